"""CPU of the explicit search on its first states, under two source trees alternating (issue #36).

Each run is a fresh process with the tree first on PYTHONPATH: it loads the .sync file, runs the
search as ``syncverify check --engine explicit`` runs it (``explore`` with a ``Machine``, symmetry
and reductions on) under a state budget, and prints the CPU seconds of the search alone
(``time.process_time``, loading excluded), the states, the transitions and the steps computed
(``Machine.step_process`` calls). The trees alternate, so that both see the same load.

    python3 -m syncverify extract KERNEL.ptx <launch arguments> -o /tmp/k.sync   # a PTX kernel: once
    python3 bench/first_states_cpu.py /tmp/k.sync --trees /tmp/main-tree . --rounds 2 --max-states 30000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.semantics.machine import Machine
protocol = load(sys.argv[1], {})
machine = Machine(protocol)
steps = [0]
real = Machine.step_process
def counted(self, state, p):
    steps[0] += 1
    return real(self, state, p)
Machine.step_process = counted
t = time.process_time()
result = explore(protocol, Budget(max_states=int(sys.argv[2]), seconds=100_000), machine)
cpu = time.process_time() - t
print(json.dumps({"cpu": cpu, "states": result.stats.states, "transitions": result.stats.transitions,
                  "steps": steps[0], "verdict": str(result.verdict)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--trees", nargs="+", required=True, help="source trees, run in this order each round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-states", type=int, default=30_000)
    args = ap.parse_args()
    for r in range(args.rounds):
        for tree in args.trees:
            env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
            out = subprocess.run([sys.executable, "-c", CHILD, args.spec, str(args.max_states)], env=env,
                                 capture_output=True, text=True, check=True, cwd=tree)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"round {r + 1} | {tree} | {row['cpu']:.2f} s CPU | {row['states']:,} states | "
                  f"{row['transitions']:,} transitions | {row['steps']:,} steps computed | "
                  f"{row['states'] / row['cpu']:,.0f} states/CPU s | {row['verdict']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
