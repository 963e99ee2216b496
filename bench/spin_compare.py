"""syncverify (explicit engine) against SPIN on the exported Promela model, side by side.

For every point of the protocol families both tools run in the same invocation,
one after the other, each in its own subprocesses (so that peak memory is per
run): syncverify as `python -m syncverify check --engine explicit`, SPIN as
`spin -a` + `gcc -DSAFETY -O2` + `./pan` on `syncverify export --promela`'s
model (the export itself is not counted: a SPIN user writes the model once).
Wall seconds are measured around the subprocesses; peak MB is the maximum
resident set of any one of them (`/usr/bin/time -f %M`), for SPIN the larger
of the compiler's and pan's.

Families (issue #8): the TMA ring (bench/ring_family.sync: STAGES x CONSUMERS
warpgroups x ITERS), the ring in a 2-CTA multicast cluster
(specs/cluster_multicast_ring.sync: ITERS), the named-barrier ping-pong
(specs/fa3_pingpong.sync: ROUNDS). A tool that does not finish a point within
the per-point limit is not run at the larger trip counts of the same shape
(they only grow), and the table says so.

Usage:
    python bench/spin_compare.py --quick          # a few small points, a minute or two
    python bench/spin_compare.py                  # the full grid (writes bench/RESULTS-spin.md)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from syncverify.export import export_model  # noqa: E402
from syncverify.export.spin import SpinOutcome, run_group, run_spin, tools_available  # noqa: E402
from syncverify.lang import load  # noqa: E402

TIME = "/usr/bin/time"


@dataclass
class Point:
    family: str
    spec: Path
    params: dict[str, int]
    shape: tuple  # the params other than the trip count: a timeout skips larger trip counts of one shape
    trip: str  # the trip-count param

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items())


@dataclass
class Row:
    point: Point
    sv: dict = field(default_factory=dict)
    spin: dict = field(default_factory=dict)


def points(quick: bool) -> list[Point]:
    ring = ROOT / "bench" / "ring_family.sync"
    cluster = ROOT / "specs" / "cluster_multicast_ring.sync"
    pingpong = ROOT / "specs" / "fa3_pingpong.sync"
    if quick:
        grid = [(2, 1, 8), (2, 1, 16), (4, 1, 8)]
        cl, pp = [2, 4], [4, 8]
    else:
        grid = [(s, c, n) for s in (2, 4, 8) for c in (1, 2, 4) for n in (8, 16, 32, 64)]
        cl, pp = [2, 4, 8, 16], [4, 8, 16, 32]
    out = [Point("ring", ring, {"STAGES": s, "CONSUMERS": c, "ITERS": n}, ("ring", s, c), "ITERS")
           for s, c, n in grid]
    out += [Point("cluster ring", cluster, {"ITERS": n}, ("cluster",), "ITERS") for n in cl]
    out += [Point("ping-pong", pingpong, {"ROUNDS": n}, ("pingpong",), "ROUNDS") for n in pp]
    return out


def run_syncverify(pt: Point, timeout: float, workdir: Path) -> dict:
    """`syncverify check` in a fresh process, under /usr/bin/time for its peak RSS."""
    cmd = [sys.executable, "-m", "syncverify", "check", str(pt.spec), "--engine", "explicit", "--format", "json",
           "--timeout", str(timeout), "--max-states", "100000000"]
    for k, v in pt.params.items():
        cmd += ["-D", f"{k}={v}"]
    stats = workdir / "sv.rusage"
    full = [TIME, "-f", "%M", "-o", str(stats), *cmd] if os.path.exists(TIME) else cmd
    start = time.monotonic()
    proc, timed_out = run_group(full, ROOT, timeout + 30)
    if timed_out:
        return {"verdict": "timeout", "states": 0, "wall": time.monotonic() - start, "peak": 0.0}
    wall = time.monotonic() - start
    try:
        peak = int(stats.read_text().strip().splitlines()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        peak = 0.0
    try:
        result = json.loads(proc.stdout)["results"][0]
    except (ValueError, KeyError, IndexError):
        return {"verdict": "error", "states": 0, "wall": wall, "peak": peak, "detail": proc.stderr[-300:]}
    verdict = result["verdict"]
    return {"verdict": verdict, "states": result["stats"]["states"], "wall": wall, "peak": peak,
            "codes": sorted({d["code"] for d in result["diagnostics"] if d["severity"] == "error"})}


def run_spin_point(pt: Point, timeout: float, memlim: int, workdir: Path) -> dict:
    model = export_model(load(str(pt.spec), pt.params))
    out: SpinOutcome = run_spin(model.text, workdir, timeout=timeout, memlim_mb=memlim, depth=model.max_depth,
                                cc_flags=("-O2",))
    return {"verdict": out.verdict, "states": out.states, "wall": out.wall, "peak": out.peak,
            "pan_s": out.seconds.get("pan", 0.0), "cc_s": out.seconds.get("cc", 0.0),
            "pan_mb": out.peak_mb.get("pan", 0.0), "cc_mb": out.peak_mb.get("cc", 0.0),
            "code": out.code, "detail": out.detail}


def finished(r: dict) -> bool:
    return r.get("verdict") in ("safe", "violation")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}"


def versions() -> str:
    def first_line(cmd: list[str]) -> str:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (res.stdout or res.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    return f"{first_line(['spin', '-V'])}; {first_line([os.environ.get('CC', 'gcc'), '--version'])}; " \
           f"Python {platform.python_version()}"


def fmt_cell(r: dict, skipped: str | None) -> tuple[str, str, str, str]:
    if skipped:
        return ("not run", "", "", "")
    v = r["verdict"]
    if v == "violation":
        v = f"violation ({', '.join(r.get('codes') or [r.get('code') or '?'])})"
    elif v not in ("safe",):
        v = f"**{v}**" + (f" ({r['detail'][:40]})" if r.get("detail") else "")
    return (v, f"{r['states']:,}", f"{r['wall']:.2f}", f"{r['peak']:.0f}")


def write_md(rows: list[tuple[Row, str | None, str | None]], args: argparse.Namespace, started: str, load: str,
             command: str) -> str:
    lines = ["# syncverify vs SPIN on the exported Promela model", "",
             f"Command: `{command}`", "",
             f"Machine: {machine()}; load average at start {load}. Date: {started} UTC.", "",
             f"Tools: {versions()}. SPIN: `spin -a`, `gcc -DSAFETY -DMEMLIM={args.memlim} -O2`, "
             "`./pan -m<depth> -n` (default hash table -w24); the model comes from `syncverify export --promela` "
             "(not timed).",
             f"syncverify: `python -m syncverify check --engine explicit` in its own process. Per-point limit "
             f"{args.timeout:g} s for each tool. Wall = seconds around the subprocesses (SPIN: spin + gcc + pan); "
             "peak = the largest resident set of one subprocess (`/usr/bin/time -f %M`; SPIN: max of gcc and pan).",
             "",
             "| family | params | syncverify | states | wall s | peak MB | SPIN | states | wall s (gcc + pan) "
             "| peak MB (gcc / pan) | wall ratio | mem ratio | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    met = missed = 0
    for row, sv_skip, spin_skip in rows:
        sv, sp = row.sv, row.spin
        a = fmt_cell(sv, sv_skip)
        b = fmt_cell(sp, spin_skip)
        spin_wall = "" if spin_skip else f"{sp['wall']:.2f} ({sp['cc_s']:.1f} + {sp['pan_s']:.1f})"
        spin_mem = "" if spin_skip else f"{sp['peak']:.0f} ({sp['cc_mb']:.0f} / {sp['pan_mb']:.0f})"
        ratio_w = ratio_m = target = ""
        if not spin_skip and finished(sp):
            if not sv_skip and finished(sv):
                rw, rm = sv["wall"] / max(sp["wall"], 1e-9), sv["peak"] / max(sp["peak"], 1e-9)
                ratio_w, ratio_m = f"{rw:.2f}", f"{rm:.2f}"
                ok = rw <= 1.0 and rm <= 1.0
                target = "met" if ok else "**missed**"
            else:
                target = "**missed** (syncverify did not finish)"
                ok = False
            met += ok
            missed += not ok
        else:
            target = "n/a (SPIN did not finish)"
        lines.append(f"| {row.point.family} | {row.point.label()} | {a[0]} | {a[1]} | {a[2]} | {a[3]} | {b[0]} | "
                     f"{b[1]} | {spin_wall} | {spin_mem} | {ratio_w} | {ratio_m} | {target} |")
    lines += ["", f"Target (wherever SPIN finishes within {args.timeout:g} s, syncverify's wall time and peak memory "
              f"are at most SPIN's): met at {met} of {met + missed} such points."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few small points only")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per tool per point")
    ap.add_argument("--memlim", type=int, default=4096, help="SPIN's -DMEMLIM (MB)")
    ap.add_argument("--family", choices=["ring", "cluster ring", "ping-pong"], help="measure one family only")
    ap.add_argument("--out", default=None, help="Markdown output (default: bench/RESULTS-spin.md; --quick or "
                    "--family: stdout)")
    args = ap.parse_args()
    missing = tools_available()
    if missing:
        print(f"spin_compare: {missing}", file=sys.stderr)
        return 2
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    command = "python bench/spin_compare.py" + (" --quick" if args.quick else "") + \
        (f" --timeout {args.timeout:g}" if args.timeout != 60 else "") + \
        (f" --memlim {args.memlim}" if args.memlim != 4096 else "") + \
        (f" --family '{args.family}'" if args.family else "")
    failed_sv: set[tuple] = set()
    failed_spin: set[tuple] = set()
    rows: list[tuple[Row, str | None, str | None]] = []
    with tempfile.TemporaryDirectory(prefix="spin_compare_") as tmp:
        work = Path(tmp)
        for pt in points(args.quick):
            if args.family and pt.family != args.family:
                continue
            row = Row(pt)
            sv_skip = "larger than a point that did not finish" if pt.shape in failed_sv else None
            spin_skip = "larger than a point that did not finish" if pt.shape in failed_spin else None
            if not sv_skip:
                row.sv = run_syncverify(pt, args.timeout, work)
                if not finished(row.sv):
                    failed_sv.add(pt.shape)
            if not spin_skip:
                row.spin = run_spin_point(pt, args.timeout, args.memlim, work / "spin")
                if not finished(row.spin):
                    failed_spin.add(pt.shape)
            rows.append((row, sv_skip, spin_skip))
            sv_txt = "not run" if sv_skip else f"{row.sv['verdict']} {row.sv['states']} {row.sv['wall']:.1f}s " \
                f"{row.sv['peak']:.0f}MB"
            spin_txt = "not run" if spin_skip else f"{row.spin['verdict']} {row.spin['states']} " \
                f"{row.spin['wall']:.1f}s {row.spin['peak']:.0f}MB"
            print(f"{pt.family:12s} {pt.label():32s} syncverify {sv_txt:32s} SPIN {spin_txt}", flush=True)
    md = write_md(rows, args, started, load, command)
    out = args.out or (None if args.quick or args.family else str(ROOT / "bench" / "RESULTS-spin.md"))
    if out:
        Path(out).write_text(md)
        print(f"wrote {out}")
    else:
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
