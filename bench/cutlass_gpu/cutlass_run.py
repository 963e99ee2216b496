"""Run the CUTLASS sm_90 cooperative GEMM and its seeded bugs on a Hopper GPU, from the checked PTX.

    python3 bench/cutlass_gpu/cutlass_run.py [--build build/cutlass] [--only NAME,...] [--runs N]
                                             [--deadline S] [--gdb] [--out DIR]

Everything it runs is built beforehand on any machine by bench/cutlass_gpu/build.sh: a cubin of each PTX
the checker verified (ptxas of that very PTX, so the GPU runs what was checked) and the host programs
gemm_run_1x1/gemm_run_2x1, whose Params and TMA descriptors come from CUTLASS's own host code at run time.
It imports only the standard library (no z3, no lark), so it runs on a GPU machine that lacks the checker.

Each variant runs in its own process with a deadline of its own: a hung kernel poisons its CUDA context, and
the host program exits at its deadline without waiting for the GPU. With --gdb, each variant that hung is
run once more under cuda-gdb, which stops it at the deadline (the host program raises SIGINT there) and
prints, for each warp of each CTA, the source line it is at (`info cuda threads`, then `bt` per warp), so the
place each warp waits can be compared with the checker's counterexample. Prints one JSON line per variant
(and writes them, with the debugger logs, under --out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@dataclass(frozen=True)
class Variant:
    """One kernel build at one problem size, and what the checker says of it (for the reader of the record)."""

    name: str
    cluster: str  # "1x1" or "2x1": which host program (the Params type differs)
    ptx: str  # the stem of the PTX/cubin in the build directory
    mnk: tuple[int, int, int]
    bug: str  # "none", "race" or "deadlock": what the seeded edit can do
    note: str


GOOD = "sm90_gemm_coop_2x1"
VARIANTS: tuple[Variant, ...] = (
    Variant("coop_1x1", "1x1", "sm90_gemm_coop_1x1", (256, 128, 128), "none",
            "the checked launch: 1x1 cluster, one 128x128 tile per CTA, two k-tiles"),
    Variant("coop_2x1", "2x1", GOOD, (256, 128, 128), "none", "the checked launch: cluster 2x1, two k-tiles"),
    Variant("coop_2x1_k512", "2x1", GOOD, (256, 128, 512), "none",
            "the unseeded twin of the seeds at K=512 (8 k-tiles, 6 stages: stages reused)"),
    Variant("seed1_consumer_wait_skipped", "2x1", GOOD + "_seed1", (256, 128, 128), "race",
            "checker: SV301 at copy_sm90_tma.hpp:185 at this launch"),
    Variant("seed1_consumer_wait_skipped_k512", "2x1", GOOD + "_seed1", (256, 128, 512), "race", "as above, K=512"),
    Variant("seed2_producer_acquire_skipped", "2x1", GOOD + "_seed2", (256, 128, 512), "race",
            "a stage is overwritten while the consumers read it; needs a reused stage (K >= 448)"),
    Variant("seed3_arrival_count_plus_one", "2x1", GOOD + "_seed3", (256, 128, 512), "deadlock",
            "the empty barriers never complete: the producer's first reuse of a stage waits forever"),
    Variant("seed3_arrival_count_plus_one_k128", "2x1", GOOD + "_seed3", (256, 128, 128), "deadlock",
            "at the checked launch: no stage is reused, the deadlock is at the producer's load_tail"),
    Variant("seed4_cluster_sync_removed", "2x1", GOOD + "_seed4", (256, 128, 128), "race",
            "checker: SV402 at copy_sm90_tma.hpp:705, SV401 at barrier.h:470 (peer's init may come late)"),
    Variant("seed5_release_before_wait", "2x1", GOOD + "_seed5", (256, 128, 512), "race",
            "the stage is released while the wgmma reading it may still run; needs a reused stage"),
)


def parse_record(stdout: str) -> dict | None:
    """The last JSON object line the host program printed (it prints one), or None."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def host_command(build: str, v: Variant, runs: int, deadline_s: float) -> list[str]:
    m, n, k = v.mnk
    return [os.path.join(build, f"gemm_run_{v.cluster}"), os.path.join(build, v.ptx + ".cubin"), v.name,
            str(m), str(n), str(k), str(runs), str(deadline_s)]


def run_variant(build: str, v: Variant, runs: int, deadline_s: float) -> dict:
    """Runs the variant in a child process killed at a deadline of its own (startup allowed for)."""
    cmd = host_command(build, v, runs, deadline_s)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + runs * (deadline_s + 2))
    except subprocess.TimeoutExpired as e:  # the host program's own deadline did not fire: record, never wait
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rec = parse_record(out) or {"variant": v.name, "outcome": "hung", "note": "killed by the runner"}
        rec["wall_s"] = round(time.monotonic() - t0, 2)
        return rec
    rec = parse_record(p.stdout) or {"variant": v.name, "outcome": "error", "error": p.stderr[-2000:]}
    rec["rc"] = p.returncode
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    return rec


GDB_WARP_RE = re.compile(r"^#0\s+.*?\bat\s+(\S+):(\d+)", re.M)


def gdb_script(ctas: int, warps: int) -> list[str]:
    """cuda-gdb commands: run to the host's SIGINT at the deadline, then where every warp is."""
    cmds = ["set pagination off", "set confirm off", "set print frame-arguments none", "run",
            "info cuda kernels", "info cuda threads", "info cuda warps"]
    for b in range(ctas):
        for w in range(warps):
            cmds += [f"echo @@ cta {b} warp {w}\\n", f"cuda block ({b},0,0) thread ({32 * w},0,0)", "bt 6"]
    cmds += ["info cuda lanes", "kill", "quit"]
    return cmds


def where_warps_wait(log: str) -> dict[str, str]:
    """From the cuda-gdb log: for each `cta B warp W` the innermost file:line of its backtrace."""
    out: dict[str, str] = {}
    for part in log.split("@@ ")[1:]:
        head, _, body = part.partition("\n")
        m = GDB_WARP_RE.search(body)
        first = body.strip().splitlines()[0][:160] if body.strip() else ""
        out[head.strip()] = f"{m.group(1)}:{m.group(2)}" if m else first
    return out


def run_under_gdb(build: str, v: Variant, deadline_s: float, out_dir: str) -> dict:
    """Runs one launch of the variant under cuda-gdb; at the deadline, where each warp of the cluster is."""
    gdb = shutil.which("cuda-gdb")
    if gdb is None:
        return {"gdb": "cuda-gdb not found on PATH"}
    ctas = 2  # M=256 N=128 in 128x128 tiles: two CTAs (one 2x1 cluster, or two 1x1 clusters)
    args = [gdb, "-batch", "-nx"]
    for c in gdb_script(ctas, 12):
        args += ["-ex", c]
    args += ["--args", *host_command(build, v, 1, deadline_s)]
    env = dict(os.environ, SV_SIGINT_ON_HANG="1")
    t0 = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=150, env=env)
        log = p.stdout + "\n--- stderr ---\n" + p.stderr
    except subprocess.TimeoutExpired as e:
        so = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        log = so + "\n--- killed after 150 s ---"
    path = os.path.join(out_dir, f"{v.name}.gdb.log")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(log)
    return {"gdb_log": os.path.basename(path), "gdb_s": round(time.monotonic() - t0, 1),
            "warps": where_warps_wait(log)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "cutlass"))
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--runs", type=int, default=20, help="launches per variant, in one process (default 20)")
    ap.add_argument("--deadline", type=float, default=5.0, help="seconds a launch may take (default 5)")
    ap.add_argument("--gdb", action="store_true", help="rerun each hung variant under cuda-gdb")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where the records and logs go")
    ap.add_argument("--list", action="store_true", help="print the variants and exit")
    a = ap.parse_args(argv)
    chosen = [v for v in VARIANTS if not a.only or v.name in a.only.split(",")]
    if a.list:
        for v in chosen:
            print(f"{v.name}: {v.ptx} {v.cluster} MNK={v.mnk} ({v.bug}) {v.note}")
        return 0
    missing = [p for v in chosen for p in host_command(a.build, v, 1, 1)[:2] if not os.path.exists(p)]
    if missing:
        print(f"cutlass_run: not built: {', '.join(sorted(set(missing)))} (run bench/cutlass_gpu/build.sh)",
              file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    records = []
    for v in chosen:
        rec = run_variant(a.build, v, a.runs, a.deadline)
        if a.gdb and rec.get("outcome") == "hung":
            rec.update(run_under_gdb(a.build, v, a.deadline, a.out))
        rec["bug"], rec["note"] = v.bug, v.note
        print(json.dumps(rec), flush=True)
        records.append(rec)
    with open(os.path.join(a.out, "cutlass_run.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    return 0 if all(r.get("outcome") in ("completed", "corrupt", "hung") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
