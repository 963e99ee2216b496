"""A reduction rule against the search without it and without any reduction, on programs of an exhaustive scope.

The rules of engines/reduction/ that take steps alone each carry a module switch ``ENABLED``; their tests search
each program with the rule, with it switched off (the rest of the reduction on) and without any reduction, and
compare verdicts and finding codes (tests/test_first_wait_por.py, tests/test_probe_pair_por.py).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from exhaustive_programs import Scope, sample

from syncverify import load
from syncverify.diagnostics import InputError
from syncverify.engines.explicit import Budget, explore
from syncverify.semantics.machine import Machine

# (verdict, finding codes, states, error codes)
Outcome = tuple[str, frozenset[str], int, frozenset[str]]


def search(rule_module: ModuleType, text: str, reduce: bool = True, rule: bool = True) -> Outcome:
    """The explicit search of ``text`` without symmetry, with ``rule_module.ENABLED`` set to ``rule``."""
    protocol = load(text, path=f"{rule_module.__name__.rsplit('.', 1)[-1]}.sync")
    old = rule_module.ENABLED
    rule_module.ENABLED = rule
    try:
        res = explore(protocol, Budget(200_000, 120.0), Machine(protocol), symmetry=False, reduce=reduce)
    finally:
        rule_module.ENABLED = old
    return (res.verdict.value, frozenset(d.code for d in res.diagnostics), res.stats.states,
            frozenset(d.code for d in res.diagnostics if d.is_error))


def compare_slice(rule_module: ModuleType, scope: Scope, every: int, offset: int,
                  codes_kept: Callable[[Outcome, Outcome, Outcome], bool]) -> dict[str, int]:
    """Every ``every``-th program of ``scope`` searched with the rule, without it and without any reduction: the
    verdicts must be equal and ``codes_kept(on, off, none)`` hold. The tally counts the programs, those where the
    rule acted (fewer states), those whose codes agree three ways or with and without the rule, and the verdicts."""
    tally = {"programs": 0, "acted": 0, "same codes": 0, "rule keeps codes": 0, "safe": 0, "violation": 0}
    for index, text in sample(scope, every, offset):
        try:
            load(text, path="slice.sync")
        except InputError:
            continue
        on = search(rule_module, text)
        off = search(rule_module, text, rule=False)
        none = search(rule_module, text, reduce=False)
        assert on[0] == off[0] == none[0], (index, on, off, none, text)
        assert codes_kept(on, off, none), (index, on, off, none, text)
        tally["programs"] += 1
        tally["acted"] += on[2] < off[2]
        tally["same codes"] += on[1] == off[1] == none[1]
        tally["rule keeps codes"] += on[1] == off[1]
        tally[on[0]] = tally.get(on[0], 0) + 1
    return tally
