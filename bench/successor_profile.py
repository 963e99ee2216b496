"""Where the reduced successor function spends its steps (issue #36): counted, and timed by kind.

For each expanded state the explicit search asks ``Reduction.successors`` for the steps to explore.
To choose one step to take alone it computes the steps of other processes too (the first loop's
candidates before it, and every process's step where it must know that none breaks a rule), and
sets most of them aside. This tool counts every ``Machine.step_process`` the search makes, by
where it was asked (the reduction's first loop, ``_some_step_breaks_a_rule``, the later loops or
the full expansion), whether the step was among those explored, its outcome (blocked, a
violation, warnings, ok), the reduction's class of its instruction and its source line, and
times each with ``time.perf_counter`` (the timer itself costs about a microsecond a step).

    python3 -m syncverify extract KERNEL.ptx <launch arguments> -o /tmp/k.sync   # a PTX kernel: once
    PYTHONPATH=$PWD python3 bench/successor_profile.py /tmp/k.sync --max-states 20000
    PYTHONPATH=$PWD python3 bench/successor_profile.py bench/families/gemm_2cta_multicast.sync -D MATH=8 -D IDLE=3

The search runs as ``syncverify check --engine explicit`` runs it (symmetry and reductions on),
under a state budget, so two runs count the same steps.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import successors as reduction
from syncverify.semantics import machine as machine_mod
from syncverify.semantics.state import P_PC

Key = tuple[str, str, str, str, int]


def _outcome(res) -> str:
    if res is None:
        return "blocked"
    if res.violation is not None:
        return "violation"
    if res.warnings or res.soft:
        return "warns"
    return "ok"


def profile(path: str, defines: dict[str, int], max_states: int) -> tuple[collections.Counter, collections.Counter,
                                                                           collections.Counter, float, int]:
    """Run the search and count its steps. Returns (seconds by key, steps by key, states by the
    number of steps computed for them, seconds in the successor function, states expanded); a key is
    (lone or all, where asked, used or set aside, outcome, class, line)."""
    protocol = load(path, defines)
    machine = machine_mod.Machine(protocol)
    seconds: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    per_state: collections.Counter = collections.Counter()
    computed: list[tuple[int, object, float, str]] = []
    total = [0.0, 0]
    real_step = machine_mod.Machine.step_process
    real_successors = reduction.Reduction.successors

    def step(self, state, p):
        site = sys._getframe(1).f_code.co_name
        t = time.perf_counter()
        res = real_step(self, state, p)
        computed.append((p, res, time.perf_counter() - t, site))
        return res

    def successors(self, state):
        computed.clear()
        t = time.perf_counter()
        out = list(real_successors(self, state))
        total[0] += time.perf_counter() - t
        total[1] += 1
        labels = {r.label for r in out}
        per_state[len(computed)] += 1
        for p, res, dt, site in computed:
            pc = state.procs[p][P_PC]
            key = ("lone" if len(out) == 1 else "all", "first loop" if site == "successors" else site,
                   "used" if ("p", p) in labels else "set aside", _outcome(res), self._por_class[p][pc],
                   self.machine.programs[p].code[pc].line)
            seconds[key] += dt
            counts[key] += 1
        return iter(out)

    machine_mod.Machine.step_process = step  # type: ignore[method-assign]
    reduction.Reduction.successors = successors  # type: ignore[method-assign]
    try:
        explore(protocol, Budget(max_states=max_states, seconds=10**6), machine)
    finally:
        machine_mod.Machine.step_process = real_step  # type: ignore[method-assign]
        reduction.Reduction.successors = real_successors  # type: ignore[method-assign]
    return seconds, counts, per_state, total[0], total[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", help="a .sync file (extract a PTX kernel first)")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--max-states", type=int, default=20_000)
    ap.add_argument("--top", type=int, default=25, help="rows of the table")
    args = ap.parse_args()
    defines = {}
    for d in args.defines:
        name, _, value = d.partition("=")
        defines[name] = int(value)
    seconds, counts, per_state, succ_s, states = profile(str(Path(args.spec)), defines, args.max_states)
    steps = sum(counts.values())
    step_s = sum(seconds.values())
    aside = [k for k in counts if k[2] == "set aside"]
    print(f"{states:,} states expanded; {steps:,} steps computed ({steps / max(states, 1):.1f} a state), "
          f"{sum(counts[k] for k in aside):,} set aside")
    print(f"successor function {succ_s:.2f} s; steps {step_s:.2f} s, of which set aside "
          f"{sum(seconds[k] for k in aside):.2f} s (perf_counter, with the timer's own cost)\n")
    print("| states | where asked | step | outcome | class | line | steps | s |")
    print("|---|---|---|---|---|---|---|---|")
    for key, s in seconds.most_common(args.top):
        print("| " + " | ".join(str(x) for x in key) + f" | {counts[key]:,} | {s:.3f} |")
    print("\nsteps computed per expanded state: " +
          ", ".join(f"{n}: {c:,}" for n, c in sorted(per_state.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
