"""Local control flow under a loop hook, remembered with the hook's answers.

Without a loop hook, where a process's local control flow (let/for/if) leads from (process, pc,
variables) is a function of that key, and ``Machine._run_local`` remembers it (as
``Machine.future`` remembers the mbarrier events ahead). A hook (the all-iterations lift's
symbolic trip count, engines/symbolic/hook.py) answers the trip-count tests of some loops with
state of its own, and records the values tested. So a run under a hook is a function of the key
*and of the hook's answers*: the run is deterministic, and the answers are all it asks the hook.

What is remembered, then, is the result with the sequence of tests the run made and what each
decided (a `for`'s first value and whether it enters; whether a `for` goes round again). A later
run from the same key asks the hook the same tests again, in the same order, so that the hook sees
and records every test as it would have; if every decision is the same, the run is the same and its
result is used, else the run is made afresh (and remembered with its own answers). A run nested in
another (a future's local run) passes its tests on to the enclosing one, replayed or made. The hooks
are idempotent for a repeated test: TripCount records a value only when it is larger than every one
it has recorded, and raises where the first run would have raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .machine import Machine

T = TypeVar("T")
MEMO_LIMIT = 1 << 16  # entries per table before it starts over
# Off: every run under a hook is made afresh, as before runs were remembered there (the tests compare
# the two: tests/test_hooked_local.py)
REMEMBER = True

# One test: (entering a loop, (process, pc, lo, hi, value)), and its decision: (first value, enters)
# for a FOR_INIT, (goes round,) for a FOR_NEXT
Test = tuple[tuple[bool, tuple[int, int, int, int, int]], tuple]


def decision(init: bool, value: int, lo: int, hi: int) -> tuple:
    """What ``Machine._run_local_code`` takes from the hook's answer (lo, hi) to one test."""
    return (lo, lo < hi) if init else (value < hi,)


def _same_again(machine: Machine, tests: tuple[Test, ...]) -> bool:
    """Ask the hook every test again, in order (each passed on to the enclosing run): does it decide
    each as before?"""
    log = machine._hook_log
    for test in tests:
        (init, args), before = test
        lo, hi = machine.loop_hook(*args)  # type: ignore[misc]
        if log is not None:
            log.append(test)
        if decision(init, args[4], lo, hi) != before:
            return False
    return True


def remembered(machine: Machine, memo: dict, key: tuple, run: Callable[[], T]) -> T:
    """``run()``, a deterministic function of ``key`` and of the hook's answers, remembered in
    ``memo`` with the tests it asked (module docstring)."""
    hit = memo.get(key) if REMEMBER else None
    if hit is not None and (not hit[1] or _same_again(machine, hit[1])):
        return hit[0]
    outer = machine._hook_log
    log: list[Test] = []
    machine._hook_log = log
    try:
        out = run()
    finally:
        machine._hook_log = outer
        if outer is not None:
            outer += log
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[key] = (out, tuple(log))
    return out


def run_local_hooked(machine: Machine, p: int, pc: int, vars_: tuple) -> tuple[int, tuple]:
    """``Machine._run_local`` under a loop hook (module docstring)."""
    return remembered(machine, machine._hooked_local_memo, (p, pc, vars_),
                      lambda: machine._run_local_code(p, pc, vars_))
