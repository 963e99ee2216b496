"""What differs between the states of each level of the explicit search, and which steps branch (issue #36).

A breadth-first search with the search's own successor function (the reductions on) and its symmetry, under a
state budget. Per level: the states, how many distinct values each part of the state takes among them
(barriers, named barriers, cluster barrier, agents in flight, records) and, per process, how many distinct local
states. Then, over the states after ``--from`` states, the steps of the states the reduction expands whole
(more than one successor), by operation and protocol line ("F": a probe's false outcome beside its true one).

    python3 -m syncverify extract fmha.ptx --cutlass-fmha 1,1,128,128,64 > /tmp/fmha2.sync
    PYTHONPATH=$PWD python3 bench/level_census.py /tmp/fmha2.sync --max-states 200000 --from 57000
"""

from __future__ import annotations

import argparse
import collections

from syncverify import load
from syncverify.engines.reduction import successors_of
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import P_PC
from syncverify.semantics.symmetry_perm import symmetry_for

PARTS = ("mbars", "named", "cluster", "agents", "records")


def census(path: str, max_states: int, branching_from: int) -> collections.Counter:
    """Print the per-level table; return the branching steps (module docstring)."""
    machine = Machine(load(path, {}))
    symmetry = symmetry_for(machine, permuted=False)
    canon = symmetry.canon if symmetry.groups else (lambda s: (s, None))
    successors = successors_of(machine, True)
    labels = [p.label() for p in machine.procs]
    init = canon(machine.initial())[0]
    seen, level, depth = {init}, [init], 0
    branching: collections.Counter = collections.Counter()
    while level and len(seen) < max_states:
        nxt = []
        for state in level:
            results = list(successors(state))
            if len(results) > 1 and len(seen) > branching_from:
                for res in results:
                    if res.label[0] != "p":
                        branching[("landing or agent", 0, "")] += 1
                        continue
                    p = res.label[1]
                    ins = machine.programs[p].code[state.procs[p][P_PC]]
                    branching[(type(ins.op).__name__, ins.line, "F" if len(res.label) > 2 else "")] += 1
            for res in results:
                if res.violation is None:
                    image = canon(res.state)[0]
                    if image not in seen:
                        seen.add(image)
                        nxt.append(image)
        depth += 1
        level = nxt
        if level:
            parts = " ".join(f"{name}:{len({s[i] for s in level})}" for i, name in enumerate(PARTS, 1))
            procs = " ".join(f"{labels[p]}:{n}" for p in range(len(labels))
                             if (n := len({s.procs[p] for s in level})) > 1)
            print(f"level {depth}: {len(level)} states ({len(seen)} in all); distinct {parts}; processes {procs}")
    return branching


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", help="a .sync file (extract a PTX kernel first)")
    ap.add_argument("--max-states", type=int, default=200_000)
    ap.add_argument("--from", dest="branching_from", type=int, default=0,
                    help="count the branching steps only once this many states are stored")
    args = ap.parse_args()
    branching = census(args.spec, args.max_states, args.branching_from)
    print("\nsteps of the states expanded whole: operation, line, outcome: count")
    for (op, line, outcome), n in branching.most_common(20):
        print(f"  {op} line {line} {outcome}: {n:,}")


if __name__ == "__main__":
    main()
