"""A larger cross-check of the periodic search against the explicit engine on random protocols.

For each seed, `tests/strategies.random_protocol(seed)` gives a small protocol; where the lift
applies, the periodic search restricted to ITERS = n (n past K + P, so that states merge by
shifting) must give the explicit engine's verdict at ITERS = n, and the unbounded proof must
not call safe a protocol the explicit engine finds a violation in at that n. Usage:

    python bench/symbolic_sweep.py [--seeds 200] [--first 0] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from strategies import random_protocol

from syncverify.engines import periodic
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.symbolic import lift
from syncverify.lang import load
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    tally: Counter[str] = Counter()
    start = time.monotonic()
    bad = 0
    for seed in range(args.first, args.first + args.seeds):
        text = random_protocol(seed)
        protocol = load(text, {}, path=f"seed{seed}.sync")
        names = periodic.liftable_params(protocol)
        if not names:
            tally["no trip-count param"] += 1
            continue
        try:
            plan = periodic.plan(protocol.source, {}, names[0], source_path=protocol.path)
        except periodic.Refusal:
            tally["refused"] += 1
            continue
        n = max(protocol.param(names[0]), min(plan.threshold + plan.period + 1, 8))
        concrete = load(text, {names[0]: n}, path=protocol.path)
        explicit = explore(concrete, Budget(max_states=200_000, seconds=60), Machine(concrete))
        bounded = lift(protocol, {}, max_states=200_000, seconds=60, only=n)
        unbounded = lift(protocol, {}, max_states=100_000, seconds=20)
        if Verdict.INCONCLUSIVE in (explicit.verdict, bounded.verdict):
            tally["inconclusive"] += 1
            continue
        agree = (explicit.verdict is Verdict.VIOLATION) == (bounded.verdict is Verdict.VIOLATION)
        sound = not (explicit.verdict is Verdict.VIOLATION and unbounded.verdict is Verdict.SAFE)
        tally[f"{explicit.verdict.value}/{unbounded.verdict.value}"] += 1
        if args.verbose:
            print(f"seed {seed} n={n}: explicit {explicit.verdict.value}, bounded {bounded.verdict.value}, "
                  f"unbounded {unbounded.verdict.value} ({unbounded.bound or unbounded.reason[:60]})", flush=True)
        if not agree or not sound:
            bad += 1
            print(f"seed {seed} n={n}: explicit {explicit.verdict.value} {sorted(explicit.codes())}, bounded "
                  f"{bounded.verdict.value} {bounded.reason}, unbounded {unbounded.verdict.value} {unbounded.bound}",
                  flush=True)
    print(f"{args.seeds} seeds in {time.monotonic() - start:.0f}s: {dict(tally)}; disagreements: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
