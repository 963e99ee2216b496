"""One explicit search on N processes (`check --search-jobs N`, engines/parallel.py): wall time, CPU,
states per second, and the answer compared with one process, to bench/RESULTS-parallel.md.

Each run is one `syncverify check --engine explicit --format json --search-jobs N --after-first-error 0`
in its own process (a kernel's default stop 10 s after its first error is a clock, which the parallel
search refuses; 0 searches to the end on every N alike). Wall seconds are measured around the
process, CPU seconds (user + system of the process and its workers) from wait4; the load average
is read before each run, since the host may be shared: a parallel search gains only where its
processes get cores of their own. The answer of each N (verdict, error codes, the length of each
counterexample, states, transitions) is compared with N=1's, and a difference is marked in the table
and fails the run (exit 1).

The cases: specs and bench/families protocols, and with --kernels the CUTLASS sm_90 GEMMs extracted
from their PTX as bench/search_speed.py runs them (its cases, by name).

Usage:
    nice -n 5 python3 bench/parallel_bench.py                       # N = 1, 2; writes bench/RESULTS-parallel.md
    python3 bench/parallel_bench.py --jobs 1 2 4 --kernels "coop 1x1 S=2 K=192" --out -
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import search_speed  # noqa: E402  (bench/ is not a package)

SPEC_CASES = [
    ("2-CTA multicast ring (specs/cluster_multicast_ring.sync)", ROOT / "specs" / "cluster_multicast_ring.sync", ()),
    ("try-wait fallthrough, a violation (specs/bounded_try_wait_fallthrough.sync)",
     ROOT / "specs" / "bounded_try_wait_fallthrough.sync", ()),
    ("FA3 forward W=4 (bench/families/fa3_fwd.sync)", ROOT / "bench" / "families" / "fa3_fwd.sync", ()),
    ("2-CTA multicast GEMM (bench/families/gemm_2cta_multicast.sync)",
     ROOT / "bench" / "families" / "gemm_2cta_multicast.sync", ()),
    ("a 17-state violation: the cost of starting the workers (specs/cp_async_mbarrier_inc_hang.sync)",
     ROOT / "specs" / "cp_async_mbarrier_inc_hang.sync", ()),
]


NOTES = "## What the table shows"  # a hand-written reading of the last run, kept when the table is rewritten


@dataclass(frozen=True)
class Run:
    answer: tuple  # what must not depend on N
    states: int
    wall: float
    cpu: float
    load: float
    note: str = ""

    @property
    def rate(self) -> float:
        return self.states / self.wall if self.wall > 0 else 0.0


def run(path: Path, args: tuple[str, ...], jobs: int, max_states: int) -> Run:
    cmd = [sys.executable, "-m", "syncverify", "check", str(path), "--engine", "explicit", "--format", "json", "-q",
           "--timeout", "100000", "--max-memory", "100000", "--max-states", str(max_states),
           "--after-first-error", "0", "--search-jobs", str(jobs), *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(ROOT))
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        text, errtext = out.read().decode(), err.read().decode()
    try:
        result = json.loads(text)["results"][0]
    except (ValueError, KeyError, IndexError):
        return Run(("failed",), 0, wall, usage.ru_utime + usage.ru_stime, load,
                   f"exit {os.waitstatus_to_exitcode(status)}: {errtext.strip()[-200:]}")
    stats = result["stats"]
    diags = sorted((d["code"], d["line"], len(d["trace"])) for d in result["diagnostics"])
    answer = (result["verdict"], tuple(diags), stats["states"], stats["transitions"], result.get("coverage", ""))
    return Run(answer, stats["states"], wall, usage.ru_utime + usage.ru_stime, load)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="the numbers of processes (1 first)")
    ap.add_argument("--kernels", nargs="*", default=[], metavar="NAME",
                    help="bench/search_speed.py cases to add, by name")
    ap.add_argument("--only", metavar="TEXT", help="the spec cases whose name contains TEXT")
    ap.add_argument("--max-states", type=int, default=2_000_000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-parallel.md"), help="- for stdout")
    args = ap.parse_args()
    jobs = sorted(set(args.jobs) | {1})
    todo = [(name, path, extra) for name, path, extra in SPEC_CASES if args.only is None or args.only in name]
    by_name = {c.name: c for c in search_speed.cases()}
    rows: list[str] = []
    bad = False
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.kernels:
            case = by_name[name]
            todo.append((f"{name} (extracted PTX)", search_speed.materialize(case.source, Path(scratch)), case.args))
        for name, path, extra in todo:
            runs = {n: run(Path(path), tuple(extra), n, args.max_states) for n in jobs}
            one = runs[1]
            for n, r in runs.items():
                same = "—" if n == 1 else ("same" if r.answer == one.answer else "**DIFFERENT**")
                bad |= same == "**DIFFERENT**"
                speedup = f"{one.wall / r.wall:.2f}×" if r.wall > 0 else ""
                rows.append(f"| {name} | {n} | {r.answer[0]} | {r.states:,} | {r.wall:.2f} | {r.cpu:.2f} | "
                            f"{r.rate:,.0f} | {speedup} | {r.load:.1f} | {same}{' ' + r.note if r.note else ''} |")
                print(rows[-1], file=sys.stderr, flush=True)
    cmd = "nice -n 5 python3 bench/parallel_bench.py " + shlex.join(sys.argv[1:])
    text = "\n".join([
        "# One search on several processes (`check --search-jobs N`)",
        "",
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on a host with {os.cpu_count()} cores "
        f"by `{cmd.strip()}` (bench/parallel_bench.py says what is measured). The load column is the "
        "1-minute load average when the run started: the host is shared, and a search on N processes gains "
        "only where each of them gets a core.",
        "",
        "| case | processes | verdict | states | wall s | CPU s | states / wall s | speed-up (wall) | load | "
        "answer vs 1 |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
        *rows, ""])
    if args.out == "-":
        print(text)
    else:
        out = Path(args.out)
        kept = out.read_text().partition(NOTES)[2] if out.exists() else ""
        out.write_text(text + ("\n" + NOTES + kept if kept else ""))  # the reading below the table stays
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
