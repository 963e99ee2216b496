"""Explicit-engine benchmark for the ring family (issue targets in bench/RESULTS.md).

Runs `syncverify check` in a fresh subprocess per point (so peak RSS is per
run) and writes a Markdown table. Usage:

    python bench/run_bench.py [--consumers 1 2 4] [--iters 4 8 16] [--timeout 120] [--out bench/RESULTS-explicit.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = HERE / "ring_family.sync"


def run_point(consumers: int, iters: int, timeout: float, max_states: int) -> dict:
    cmd = [sys.executable, "-c",
           "import json, resource, sys; from syncverify.cli import main; "
           "rc = main(sys.argv[1:]); "
           "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr); "
           "sys.exit(rc)",
           "check", str(SPEC), "--engine", "explicit", "--format", "json",
           "-D", f"CONSUMERS={consumers}", "-D", f"ITERS={iters}",
           "--timeout", str(timeout), "--max-states", str(max_states)]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
    wall = time.monotonic() - start
    result = json.loads(proc.stdout)["results"][0]
    peak = next((float(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK")), 0.0)
    return {"consumers": consumers, "iters": iters, "verdict": result["verdict"], "states": result["stats"]["states"],
            "search_s": result["stats"]["seconds"], "wall_s": wall, "peak_rss_mb": peak, "cmd": " ".join(cmd[3:])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--consumers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--iters", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--max-states", type=int, default=2_000_000)
    ap.add_argument("--out", default=str(HERE / "RESULTS-explicit.md"))
    args = ap.parse_args()
    rows = []
    for c in args.consumers:
        for n in args.iters:
            row = run_point(c, n, args.timeout, args.max_states)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if row["verdict"] == "inconclusive":
                break  # larger ITERS only take longer
    lines = [
        "# Explicit engine: ring family",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()} "
        f"({platform.processor() or 'cpu'}), "
        f"Python {platform.python_version()}; spec `bench/ring_family.sync` (4 stages, 1 producer warp, "
        "CONSUMERS consumer warpgroups, warp-granular processes).",
        "",
        f"Command: `python bench/run_bench.py --consumers {' '.join(map(str, args.consumers))} "
        f"--iters {' '.join(map(str, args.iters))} --timeout {args.timeout:g}`",
        "",
        "| consumer warpgroups | ITERS | verdict | states | search s | wall s | peak RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['consumers']} | {r['iters']} | {r['verdict']} | {r['states']} | {r['search_s']:.2f} | "
                     f"{r['wall_s']:.2f} | {r['peak_rss_mb']:.0f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
