"""The bounded-exhaustive cross-check of the rule that takes `cp.async` arrive-ons and their issues alone
(engines/reduction/cp_arrive.py; docs/model.md, *cp.async arrive-ons*): tests/exhaustive_programs.py,
CP_ARRIVE_SCOPES -- three warps copy, issue `cp.async.mbarrier.arrive` with and without .noinc, arrive, wait and
read, elected on a barrier of 2 arrivals and as whole warps (32 arrive-ons each) on one of 64.

Each program is searched three ways: with the reductions, with the reductions but without the rule (a
`cp.async` issue and arrive never taken alone, as before), and without reductions. All three must give the same
verdict; the findings (code, line) of either reduced search must be among the unreduced search's (SV301/SV302 as
one family: the name of a race may depend on the order explored first). A slice must hold programs where the rule
acts (the two reduced searches explore different numbers of states). The CI slices take a few seconds;
SYNCVERIFY_SLOW=1 runs every program of both scopes.

A hand-written program shows the rule's key condition at work: with it dropped (an arrive-on taken alone while
another warp's arrival can complete the phase first), the race of a reader released by that arrival with the copy
the arrive-on publishes is lost.
"""

from __future__ import annotations

import collections
import os

import pytest
from exhaustive_programs import CP_ARRIVE_SCOPES, sample
from por_slices import findings, three_way_slice

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import cp_arrive, successors
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine
from syncverify.semantics.rules import MAX_COUNT

BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")


def _without_rule(patch: pytest.MonkeyPatch) -> None:
    """The reduction as it was before the rule: no cp.async issue, arrive or arrive-on taken alone."""
    patch.setattr(successors, "lone_cp_copy", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrival", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrive_issue", lambda *args: False)


def _slice(scope: str, every: int, offset: int, monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return three_way_slice(sample(CP_ARRIVE_SCOPES[scope], every, offset), BUDGET, monkeypatch, _without_rule,
                           "the rule acts")


@pytest.mark.parametrize("scope, every, offset", [("cp-arrive-elect", 60, 17), ("cp-arrive-warps", 360, 100)])
def test_cp_arrive_slice(scope, every, offset, monkeypatch):
    tally = _slice(scope, every, offset, monkeypatch)
    assert tally[Verdict.VIOLATION.value] and tally["the rule acts"], tally


@SLOW
@pytest.mark.parametrize("scope", sorted(CP_ARRIVE_SCOPES))
def test_cp_arrive_whole_scope(scope, monkeypatch):
    tally = _slice(scope, 1, 0, monkeypatch)
    print(scope, dict(tally))
    assert tally[Verdict.SAFE.value] and tally[Verdict.VIOLATION.value] and tally["the rule acts"], tally


# Program 843 of the elect scope: warp 1's arrive-on is in flight while warp 0's two arrivals can complete the
# phase first; warp 1 then passes its wait and the CTA exits with the arrive-on still in flight (SV404).
OVERTAKEN = 843


def test_dropping_the_sum_condition_loses_the_finding(monkeypatch):
    ((_, text),) = sample(CP_ARRIVE_SCOPES["cp-arrive-elect"], 1 << 20, OVERTAKEN)
    assert "if w0 { elect { arrive mb; } elect { arrive mb; } }" in text
    assert "if w1 { elect { cp.async.mbarrier.arrive.noinc mb; } elect { wait mb parity 0; } }" in text
    protocol = load(text, path="arrive_on_overtaken.sync")
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert full.verdict == reduced.verdict == Verdict.VIOLATION
    assert {"SV404"} <= {code for code, _ in findings(full)}
    assert findings(reduced) <= findings(full)
    with monkeypatch.context() as patch:
        patch.setattr(cp_arrive, "only_whole_completes", lambda *args: True)
        dropped = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert dropped.verdict == Verdict.SAFE  # the overtaking order is never explored


def _by_subsets(pend: int, tx: int, updates: list[tuple[int, int]]) -> bool:
    """The question only_whole_completes answers, asked of every subset by index (the reference)."""
    import itertools

    whole = len(updates)
    for k in range(whole + 1):
        for chosen in itertools.combinations(updates, k):
            p = pend - sum(a for a, _ in chosen)
            t = tx + sum(d for _, d in chosen)
            if not 0 <= p <= MAX_COUNT or not -MAX_COUNT <= t <= MAX_COUNT or (p == t == 0 and k < whole):
                return False
    return True


def test_only_whole_completes_agrees_with_the_subsets():
    """The multiset sums against an enumeration of every subset, on every small case; and the landing
    rule's question (tx.updates_commute) is the same one with its step among the updates."""
    import itertools

    from syncverify.engines.reduction.tx import only_whole_completes, updates_commute

    values = [(1, 0), (2, 0), (0, -64), (1, 64), (-1, 0), (0, 0)]
    answers = set()
    for n in range(5):
        for updates in itertools.combinations_with_replacement(values, n):
            for pend, tx in ((0, 0), (1, 0), (2, 0), (3, 64), (2, -64), (4, 0)):
                got = only_whole_completes(pend, tx, list(updates))
                assert got == _by_subsets(pend, tx, list(updates)), (pend, tx, updates)
                answers.add(got)
                if updates:
                    assert updates_commute(pend, tx, updates[-1], list(updates[:-1])) == got
    assert answers == {True, False}
