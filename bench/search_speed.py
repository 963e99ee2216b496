"""Speed and memory of the explicit search on real kernels (issue #36), before and after.

Each case is one `syncverify check --engine explicit --format json` in its own process, with a
CPU-time cap (RLIMIT_CPU): a case the cap ends is recorded as not finished, with the CPU it used.
CPU seconds (user + system, from wait4) are measured rather than wall time, since the host is shared;
peak MB is the process's ru_maxrss. Bytes per state is the search's own growth of the resident set
(the `peak_mb` of the result's stats: the RSS at the end less the RSS at the start of the search)
over the states it stored, so it counts everything a stored state keeps alive (the state, its entry
in the visited table, its parent link, the interned parts it shares with others).

The cases: the CUTLASS sm_90 GEMMs extracted from tests/data/ptx/*.ptx.gz with the launch arguments
tests/test_ptx_cutlass.py and tests/test_ptx_pingpong.py pass them (the ping-pong GEMM at cluster 2x1
with two tiles per CTA, the cooperative GEMM at K=128 and with a stage reused at K=448), the seeded
builds of tests/data/ptx/cutlass_seeds, the ping-pong GEMM with its epilogue order wait removed
(tests/test_ptx_pingpong.py's patch), and three bench/families specs.

A source tree is run by putting it first on PYTHONPATH. ``--before REF`` runs every case under the
tree of git REF too (extracted with `git archive` into a temporary directory), in the same run and
alternating with the working tree, so that both see the same load; the table gives their ratios.

Usage:
    python3 bench/search_speed.py --before main                  # writes bench/RESULTS-speed.md
    python3 bench/search_speed.py --only pp --cap 60 --out -
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "ptx"
FAM = ROOT / "bench" / "families"

# the Params fields that decide control flow (tests/test_ptx_cutlass.py, tests/test_ptx_pingpong.py)
PARAM_FIELDS = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]
COOP_2X1 = ["--grid", "2x1x1", "--block", "384x1x1", "--cluster", "2x1x1", "--dynamic-smem", "231424"]
COOP_BOXES = {128: 16384, 384: 8192, 896: 4096, 1152: 4096}
S2 = ["--grid", "1x2x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "100352"]
S2_BOXES = {128: 16384, 384: 16384, 896: 4096, 1152: 4096}
PP_2X1 = ["--grid", "2x1x1", "--block", "384x1x1", "--cluster", "2x1x1", "--dynamic-smem", "215040"]
PP_2X1_BOXES = {128: 8192, 384: 8192, 896: 4096, 1152: 4096}
PP_1X1 = ["--grid", "1x1x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "215040"]
PP_1X1_BOXES = {128: 8192, 384: 16384, 896: 4096, 1152: 4096}
# tests/test_ptx_pingpong.py: the epilogue's order wait (PTX line 2456) replaced by a true predicate
PP_ORDER_WAIT = "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r43], %r1196, %r544; "
SEED_CONST = ".const .align 4 .u32 sv_seed = 9;"


def _kernel_args(launch: list[str], fields: str, boxes: dict[int, int]) -> list[str]:
    out = list(launch)
    for off, n in PARAM_FIELDS:
        out += ["--param", f"0[{off}:{n}]=@{DATA / fields}"]
    for off, n in boxes.items():
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return out


@dataclass(frozen=True)
class Case:
    """One check: its name, the input (a .sync path, or a PTX file made by ``make`` in a scratch
    directory), the arguments, and whether it is one of the long ones (run with --heavy)."""

    name: str
    source: str
    args: tuple[str, ...]
    heavy: bool = False


def _gz(name: str, sub: str = "") -> str:
    return f"gz:{sub}{name}"


def cases() -> list[Case]:
    coop = _kernel_args(COOP_2X1, "sm90_gemm_coop_2x1_fields_256x128x128.bin", COOP_BOXES)
    s2 = _kernel_args(S2, "sm90_gemm_coop_1x1_s2_fields_256x128x192.bin", S2_BOXES)
    out = [
        Case("pingpong 2x1 K=128", _gz("sm90_gemm_pingpong_2x1.ptx"),
             tuple(_kernel_args(PP_2X1, "sm90_gemm_pingpong_2x1_fields_256x128x128.bin", PP_2X1_BOXES))),
        Case("pingpong 1x1 K=128", _gz("sm90_gemm_pingpong_1x1.ptx"),
             tuple(_kernel_args(PP_1X1, "sm90_gemm_pingpong_1x1_fields_128x128x128.bin", PP_1X1_BOXES))),
        Case("pingpong 1x1, no epilogue order wait", "ppwait:",
             tuple(_kernel_args(PP_1X1, "sm90_gemm_pingpong_1x1_fields_128x128x128.bin", PP_1X1_BOXES))),
        Case("coop 1x1 S=2 K=192", "seed:9", tuple(s2)),
        Case("coop 1x1 S=2, seed 2 (acquire skipped)", "seed:2", tuple(s2)),
        Case("coop 1x1 S=2, seed 3 (count + 1)", "seed:3", tuple(s2)),
        Case("coop 1x1 S=2, seed 5 (release early)", "seed:5", tuple(s2)),
        Case("coop 2x1, seed 1 (wait skipped), fail-fast", _gz("sm90_gemm_coop_2x1_seed1.ptx", "cutlass_seeds/"),
             (*coop, "--fail-fast")),
        Case("coop 2x1, seed 4 (cluster sync removed)", _gz("sm90_gemm_coop_2x1_seed4.ptx", "cutlass_seeds/"),
             tuple(coop)),
        Case("fa3_fwd W=4", str(FAM / "fa3_fwd.sync"), ()),
        Case("gemm_2cta_multicast MATH=8 IDLE=3", str(FAM / "gemm_2cta_multicast.sync"),
             ("-D", "MATH=8", "-D", "IDLE=3")),
        Case("cutlass_coop_gemm", str(FAM / "cutlass_coop_gemm.sync"), ()),
        Case("coop 2x1 K=128", _gz("sm90_gemm_coop_2x1.ptx"), tuple(coop), heavy=True),
        Case("coop 2x1 K=448 (a stage reused)", _gz("sm90_gemm_coop_2x1.ptx"),
             tuple(_kernel_args(COOP_2X1, "sm90_gemm_coop_2x1_fields_256x128x448.bin", COOP_BOXES)), heavy=True),
        Case("coop 2x1, seed 3 (count + 1)", _gz("sm90_gemm_coop_2x1_seed3.ptx", "cutlass_seeds/"),
             tuple(coop), heavy=True),
    ]
    return out


def tree_at(ref: str, folder: Path) -> Path:
    """The tree of git ``ref``, extracted into ``folder`` (made here) with git archive."""
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def command_line(script: str) -> str:
    """The command that ran this script, as its results section quotes it (without --out FILE)."""
    shown = list(sys.argv[1:])
    if "--out" in shown:
        i = shown.index("--out")
        del shown[i:i + 2]
    return f"nice -n 5 python3 bench/{script} " + shlex.join(shown)


def publish(out: str, text: str, write: Callable[[Path, str], None]) -> None:
    """A results section to stdout (``--out -``) or, with ``write``, into the Markdown file named."""
    if out == "-":
        print(text)
    else:
        write(Path(out), text)


def materialize(source: str, scratch: Path) -> Path:
    """The file a case checks: a .sync as it is, a PTX decompressed (or patched) into ``scratch``."""
    if source.startswith("gz:"):
        rel = source[3:]
        out = scratch / Path(rel).name
        if not out.exists():
            out.write_bytes(gzip.decompress((DATA / f"{rel}.gz").read_bytes()))
        return out
    if source.startswith("seed:"):
        n = source[5:]
        out = scratch / f"sm90_gemm_coop_1x1_s2_seed{n}.ptx"
        if not out.exists():
            seeds = DATA / "cutlass_seeds" / "sm90_gemm_coop_1x1_s2_seeds.ptx.gz"
            text = gzip.decompress(seeds.read_bytes()).decode()
            assert text.count(SEED_CONST) == 1
            out.write_text(text.replace(SEED_CONST, SEED_CONST.replace("9;", f"{n};")))
        return out
    if source == "ppwait:":
        out = scratch / "sm90_gemm_pingpong_1x1_no_order_wait.ptx"
        if not out.exists():
            lines = gzip.decompress((DATA / "sm90_gemm_pingpong_1x1.ptx.gz").read_bytes()).decode().split("\n")
            assert lines[2455] == PP_ORDER_WAIT
            lines[2455] = "\tsetp.eq.u32 P1, 0, 0;"
            out.write_text("\n".join(lines))
        return out
    return Path(source)


@dataclass(frozen=True)
class Run:
    finished: bool
    verdict: str
    codes: str
    cex: str  # the counterexample lengths, per code
    states: int
    cpu_s: float
    peak_mb: float
    search_mb: float
    note: str = ""
    where: str = ""  # each finding's code at its source file's name and line, in the order of `cex`

    @property
    def rate(self) -> float:
        return self.states / self.cpu_s if self.cpu_s > 0 else 0.0

    @property
    def bytes_per_state(self) -> float:
        return self.search_mb * 2**20 / self.states if self.states else 0.0


def run_case(case: Case, tree: Path, scratch: Path, cap: float, max_states: int) -> Run:
    """One check in its own process under ``tree``, capped at ``cap`` CPU seconds."""
    path = materialize(case.source, scratch)
    cmd = [sys.executable, "-m", "syncverify", "check", str(path), "--engine", "explicit", "--format", "json", "-q",
           "--timeout", "100000", "--max-memory", "100000", "--max-states", str(max_states), *case.args]
    env = dict(os.environ, PYTHONPATH=str(tree))
    soft = int(cap)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(tree), preexec_fn=limit)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        peak = usage.ru_maxrss / 1024
        out.seek(0)
        err.seek(0)
        text, errtext = out.read().decode(), err.read().decode()
    try:
        result = json.loads(text)["results"][0]
    except (ValueError, KeyError, IndexError):
        why = "CPU cap" if proc.returncode < 0 else f"exit {proc.returncode}: {errtext.strip()[-200:]}"
        return Run(False, "not finished", "", "", 0, cpu, peak, 0.0, why)
    stats = result["stats"]
    diags = [d for d in result["diagnostics"] if d["severity"] == "error"]
    codes = ", ".join(sorted({d["code"] for d in diags}))
    cex = ", ".join(f"{d['code']}:{len(d['trace'])}" for d in sorted(diags, key=lambda d: (d["code"], d["line"] or 0)))
    # an older tree's JSON may not name the file of a finding: then its line alone
    where = ", ".join(dict.fromkeys(
        f"{d['code']} {Path(d.get('file', '').split(' (inlined at ')[0]).name}:{d['line']}".replace(" :", " line ")
        for d in sorted(diags, key=lambda d: (d["code"], d["line"] or 0))))
    finished = result["verdict"] != "inconclusive"
    return Run(finished, result["verdict"], codes, cex, stats["states"], cpu, peak, stats["peak_mb"],
               result.get("coverage", ""), where)


def _cell(run: Run | None) -> list[str]:
    if run is None:
        return ["", "", "", "", "", ""]
    states = f"{run.states:,}" if run.states else "—"
    rate = f"{run.rate:,.0f}" if run.states else "—"
    bps = f"{run.bytes_per_state:,.0f}" if run.states and run.search_mb > 0 else "—"
    verdict = run.verdict + (f" ({run.codes})" if run.codes else "") + (f" [{run.note}]" if not run.finished else "")
    return [states, rate, f"{run.cpu_s:.1f}", f"{run.peak_mb:.0f}", bps, verdict]


def table(rows: list[tuple[Case, Run | None, Run | None]], labels: tuple[str, str]) -> list[str]:
    b, a = labels
    head = ["case"] + [f"{h} ({b})" for h in ("states", "states/CPU s", "CPU s", "peak MB", "B/state", "verdict")]
    head += [f"{h} ({a})" for h in ("states", "states/CPU s", "CPU s", "peak MB", "B/state", "verdict")]
    head += ["CPU ×", "memory ×", "same answer"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, before, after in rows:
        ratio = mem = same = ""
        if before is not None and after is not None:
            if before.finished and after.finished:
                ratio = f"{before.cpu_s / max(after.cpu_s, 1e-9):.2f}"
                mem = f"{before.peak_mb / max(after.peak_mb, 1e-9):.2f}"
                same = "yes" if (before.verdict, before.codes, before.cex, before.states) == \
                    (after.verdict, after.codes, after.cex, after.states) else \
                    ("same verdict and cex" if (before.verdict, before.codes, before.cex) ==
                     (after.verdict, after.codes, after.cex) else "NO")
            elif after.finished:
                ratio = f"> {before.cpu_s / max(after.cpu_s, 1e-9):.2f}"
        out.append("| " + " | ".join([case.name, *_cell(before), *_cell(after), ratio, mem, same]) + " |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="", help="git ref to measure beside the working tree (e.g. main)")
    ap.add_argument("--before-tree", default="", help="a directory holding the source tree of --before (instead of "
                    "extracting it with git archive)")
    ap.add_argument("--cap", type=float, default=150.0, help="CPU seconds per case per tree")
    ap.add_argument("--max-states", type=int, default=2_000_000, help="the search's state budget")
    ap.add_argument("--heavy", action="store_true", help="also the cases that take minutes")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-speed.md"), help="Markdown file, or - for stdout")
    args = ap.parse_args()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    command = command_line("search_speed.py")
    chosen = [c for c in cases() if (args.heavy or not c.heavy) and args.only in c.name]
    rows: list[tuple[Case, Run | None, Run | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "ptx"
        scratch.mkdir()
        base: Path | None = None
        if args.before_tree:
            base = Path(args.before_tree)
        elif args.before:
            base = tree_at(args.before, Path(tmp) / "before")
        for case in chosen:
            before = run_case(case, base, scratch, args.cap, args.max_states) if base is not None else None
            after = run_case(case, ROOT, scratch, args.cap, args.max_states)
            rows.append((case, before, after))
            print(" | ".join([case.name, *(_cell(before) if before else []), *_cell(after)]), file=sys.stderr)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    labels = (args.before or "-", "working tree")
    lines = [f"Measured {started} UTC (load at the end {load}), CPU cap {args.cap:.0f} s per case per tree, "
             f"state budget {args.max_states:,}:", "", "```sh", command, "```", "", *table(rows, labels), ""]
    publish(args.out, "\n".join(lines), write_between_marks)
    return 0


BEGIN, END = "<!-- search_speed.py: begin -->", "<!-- search_speed.py: end -->"


def write_between_marks(path: Path, text: str) -> None:
    """The table replaces what lies between the marks of ``path`` (the notes around it stay), or
    becomes the whole file when it has no marks."""
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        path.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}")
    else:
        path.write_text(f"{BEGIN}\n{text}\n{END}\n")


if __name__ == "__main__":
    sys.exit(main())
