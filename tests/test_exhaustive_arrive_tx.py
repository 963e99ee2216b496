"""The cross-check of the rule that takes an `arrive.expect_tx` alone among other warps' byte counts on its barrier
(engines/reduction/arrive_tx.py) and of the walk's byte sums (engines/reduction/precede_walk.py, "Bytes"; both in
docs/model.md, "An arrive.expect_tx among byte counts").

Each program of tests/exhaustive_programs.py's ARRIVE_TX_SCOPES is searched three ways: without reductions, with
them, and with them less the rule (an arrive.expect_tx refused wherever another process can update its barrier
first, as before) or less the walk's byte sums (a wait that needs a completion passes in the walk wherever a byte
count on its barrier can move, as before). All three give the same verdict, and the findings (code, line) of either
reduced search are among the unreduced search's (tests/por_slices.py). The CI slices take a few seconds;
SYNCVERIFY_SLOW=1 runs every program of both scopes.

Two hand-written programs of a cluster of two CTAs, each a producer that waits on its empty barrier, arms its full
barrier for both CTAs' multicast copies and copies, and a consumer that waits, reads and releases both CTAs' empty
barriers (the CUTLASS sm_90 ping-pong GEMM's pipeline at one stage), show both acting. A third shows the rule's key
condition at work: with it dropped (the arrive.expect_tx taken alone although it and one of two copies that can
come first complete the phase early), the order where both copies land first, which leaves the phase unbalanced
for good (SV503), is lost.
"""

from __future__ import annotations

import collections
import os

import pytest
from exhaustive_programs import ARRIVE_TX_SCOPES, sample
from por_slices import findings, three_way_slice

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import arrive_tx, precede_walk, successors
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")


def _without_rule(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(successors, "lone_arrive_tx_among_byte_counts", lambda *args: False)


def _without_byte_sums(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(precede_walk, "bytes_cover", lambda *args: True)


def _slice(scope: str, every: int, offset: int, monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    texts = list(sample(ARRIVE_TX_SCOPES[scope], every, offset))
    tally = three_way_slice(texts, BUDGET, monkeypatch, _without_rule, "the rule acts")
    tally.update(three_way_slice(texts, BUDGET, monkeypatch, _without_byte_sums, "the byte sums act"))
    return tally


@pytest.mark.parametrize("scope, every, offset", [
    ("arrive-tx", 60, 26), ("arrive-tx-cluster", 200, 3),
    pytest.param("arrive-tx", 1, 0, marks=SLOW), pytest.param("arrive-tx-cluster", 1, 0, marks=SLOW)])
def test_arrive_tx_slice(scope, every, offset, monkeypatch):
    """A slice in CI; the whole scope (every program) with SYNCVERIFY_SLOW=1, where the rule must act."""
    tally = _slice(scope, every, offset, monkeypatch)
    print(scope, every, dict(tally))
    assert tally[Verdict.VIOLATION.value] and tally[Verdict.SAFE.value] and (every > 1 or tally["the rule acts"]), tally


PIPELINE = """protocol pipeline_pair {{
  cluster 2;
  cta threads 96;
  role producer = warp 0;
  role consumer = warp 1;
  role setup = warp 2;
  mbarrier full count 1;
  mbarrier empty count 2;
  smem bufs[2] bytes 64;
  if setup {{ elect {{ init full; init empty; fence.mbarrier_init; }} }}
  cluster.sync;
  if producer {{
    elect {{ wait empty parity 1; }}
    elect {{ arrive.expect_tx full bytes 128; }}
    elect {{ tma.load bufs[cta] -> full multicast 3; }}
  }}
  if consumer {{
    {early}wait full parity 0;
    read bufs[0]; read bufs[1];
    elect {{ arrive empty; }}
    elect {{ arrive.release.cluster empty @ cta ^ 1; }}
  }}
  cluster.sync;
}}
"""


@pytest.mark.parametrize("early, verdict", [("", Verdict.SAFE), ("read bufs[cta ^ 1];\n    ", Verdict.VIOLATION)])
def test_the_pipeline_pair(early, verdict, monkeypatch):
    """Each producer's first wait on its empty barrier is an observing wait that the peer's consumer could update
    first only by passing its full wait, which needs this producer's multicast copy: the byte sums take it alone. Its
    arrive.expect_tx can see the peer's copy land first: the rule takes it alone. Verdicts and findings agree with
    the unreduced search, the rule's and the sums' absence only adds states."""
    protocol = load(PIPELINE.format(early=early), path="pipeline_pair.sync")
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    with monkeypatch.context() as patch:
        _without_rule(patch)
        no_rule = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    with monkeypatch.context() as patch:
        _without_byte_sums(patch)
        no_sums = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert full.verdict == reduced.verdict == no_rule.verdict == no_sums.verdict == verdict
    assert findings(reduced) == findings(no_rule) == findings(no_sums) <= findings(full)
    assert reduced.stats.states < no_rule.stats.states and reduced.stats.states < no_sums.stats.states


# CTA 0 arms its barrier for 64 bytes and waits; CTA 1's two multicast copies (64 bytes each) can land on it first.
# The arrive.expect_tx and one landing complete the phase; both landings first leave the tx-count at -64 for good
# (SV503). CTA 0's own copy into CTA 1 keeps CTA 1's arrive.expect_tx from being taken alone by the plain rule first,
# so that both producers stand at theirs, as CUTLASS's do.
OVERTAKEN = """protocol overtaken {
  cluster 2;
  cta threads 64;
  role w0 = warp 0;
  role setup = warp 1;
  mbarrier mb count 1;
  smem bufa bytes 64;
  smem bufb bytes 64;
  smem bufc bytes 64;
  if setup { elect { init mb; fence.mbarrier_init; } }
  cluster.sync;
  if w0 && cta == 0 {
    elect { arrive.expect_tx mb bytes 64; } elect { tma.load bufc -> mb multicast 2; } elect { wait mb parity 0; }
    read bufb;
  }
  if w0 && cta == 1 {
    elect { arrive.expect_tx mb bytes 192; } elect { tma.load bufa -> mb multicast 3; }
    elect { tma.load bufb -> mb multicast 3; }
  }
  cluster.sync;
}
"""

def test_dropping_the_sum_condition_loses_the_unbalanced_phase(monkeypatch):
    protocol = load(OVERTAKEN, path="overtaken.sync")
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert full.verdict == reduced.verdict == Verdict.VIOLATION
    assert ("SV503", 13) in findings(full) and findings(reduced) <= findings(full)
    assert ("SV503", 13) in findings(reduced)
    with monkeypatch.context() as patch:
        patch.setattr(arrive_tx, "updates_commute", lambda *args: True)
        dropped = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert ("SV503", 13) not in findings(dropped)
