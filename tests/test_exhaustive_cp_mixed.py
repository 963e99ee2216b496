"""The bounded-exhaustive cross-check of the last two reduction rules together: cp.async arrive-ons, their issues
and copies taken alone (engines/reduction/cp_arrive.py) and both outcomes of a completed probe taken together
(engines/reduction/probe_pair.py), on programs where each meets what the other's argument must rule out.

Two scopes of their own (the generator is tests/exhaustive_programs.py; the scopes are defined here):

* ``cp-probe-mixed``: three elected warps on one CTA and a barrier of 2 arrivals, with cp.async, its arrive-on with
  and without .noinc, an arrive.expect_tx and a bulk copy into another slot of the same barrier, a probe that
  reads the slot, a wait and a read: arrive-ons beside byte counts and probes, probes beside arrive-ons in flight;
* ``cp-probe-cluster``: one elected warp in each of two CTAs of a cluster (a cluster.sync at the end keeps each
  CTA's memory alive), with cp.async, its .noinc arrive-on, a remote arrive on the peer's barrier, a probe, a wait
  and a read: the walk of what can come first must count the peer's remote arrivals.

Each program is searched three ways (tests/por_slices.py): unreduced, with the reductions, and with the reductions
without both rules. The verdicts must be equal, the findings of either reduced search among the unreduced
search's, and a slice must hold programs where the rules act. The CI slices take a few seconds; SYNCVERIFY_SLOW=1
runs the mixed scope whole and every 10th program of the cluster scope.
"""

from __future__ import annotations

import os
import time

import pytest
from exhaustive_programs import Scope, sample
from por_slices import three_way_slice

from syncverify.engines.explicit import Budget
from syncverify.engines.reduction import probe_pair, successors
from syncverify.result import Verdict

BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")

SCOPES: dict[str, Scope] = {
    "cp-probe-mixed": Scope("cp-probe-mixed", 1, 3, ((2, 1, 1), (1, 1, 1)),
                            atoms=("cp.async", "cp.async.arrive", "cp.async.arrive.noinc", "arrive.expect_tx",
                                   "tma.load", "probe.read", "wait0", "read"), wrappers=("elect",), trips=(),
                            mb_count=2),
    "cp-probe-cluster": Scope("cp-probe-cluster", 2, 1, ((2, 2), (3, 1)),
                              atoms=("cp.async", "cp.async.arrive.noinc", "arrive.remote", "probe.read", "wait0",
                                     "read"), wrappers=("elect",), trips=(), mb_count=2, tail="cluster.sync;"),
}


def _without_rules(patch: pytest.MonkeyPatch) -> None:
    """The reduction without both rules: no probe's outcomes taken together, no cp.async step taken alone."""
    patch.setattr(probe_pair, "ENABLED", False)
    patch.setattr(successors, "lone_cp_copy", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrival", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrive_issue", lambda *args: False)


def _check(scope: str, every: int, offset: int, monkeypatch: pytest.MonkeyPatch, verdicts: set[Verdict]) -> None:
    """A slice of ``scope`` three ways: it must hold programs of each of ``verdicts`` and programs where the rules
    act; the tally and the CPU time are printed (pytest -s)."""
    start = time.process_time()
    tally = three_way_slice(sample(SCOPES[scope], every, offset), BUDGET, monkeypatch, _without_rules,
                            "the rules act")
    print(scope, every, offset, dict(tally), f"{time.process_time() - start:.1f} CPU s")
    assert all(tally[v.value] for v in verdicts) and tally["the rules act"], tally


@pytest.mark.parametrize("scope, every, offset", [("cp-probe-mixed", 120, 11), ("cp-probe-cluster", 200, 13)])
def test_cp_probe_slice(scope, every, offset, monkeypatch):
    _check(scope, every, offset, monkeypatch, {Verdict.VIOLATION})


@SLOW
@pytest.mark.parametrize("scope, every", [("cp-probe-mixed", 1), ("cp-probe-cluster", 10)])
def test_cp_probe_scope_wider(scope, every, monkeypatch):
    _check(scope, every, 0, monkeypatch, {Verdict.SAFE, Verdict.VIOLATION})
