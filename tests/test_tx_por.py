"""Landings and arrive.expect_tx taken alone with other copies in flight on their barrier
(engines/reduction/tx.py): the condition itself, and whole searches against the unreduced one."""

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.tx import MAX_LANDINGS, landings_commute
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine
from syncverify.semantics.rules import MAX_COUNT

BUDGET = Budget(max_states=80_000, seconds=180)
FAMILIES = Path(__file__).resolve().parent.parent / "bench" / "families"


def test_an_arrive_expect_tx_whose_bytes_are_all_in_flight_commutes():
    # DeepGEMM's order: A (16 KiB) and both halves of B (8 KiB each) issued, then the expect_tx of all
    assert landings_commute(1, 0, 1, 32768, [16384, 8192, 8192])


def test_an_arrive_expect_tx_that_some_landings_would_complete_early_does_not():
    # the expect_tx covers only 16 KiB: with A landed first it completes the phase, B lands in the next
    assert not landings_commute(1, 0, 1, 16384, [16384, 8192, 8192])


def test_a_landing_with_arrivals_pending_commutes_with_any_landing():
    assert landings_commute(1, 100, 0, -50, [50, 50, 25])


def test_a_landing_that_another_landing_could_complete_before_does_not():
    # pending 0, 64 bytes outstanding: the other 64-byte copy alone completes the phase
    assert not landings_commute(0, 64, 0, -64, [64])
    assert landings_commute(0, 128, 0, -64, [64])


def test_sums_outside_the_tx_range_are_refused():
    assert not landings_commute(1, -MAX_COUNT + 10, 0, -5, [10])
    assert landings_commute(1, -MAX_COUNT + 20, 0, -5, [10])


def test_too_many_copies_in_flight_are_refused():
    assert not landings_commute(1, 0, 0, -1, [1] * (MAX_LANDINGS + 1))
    assert landings_commute(1, 0, 0, -1, [1] * MAX_LANDINGS)


def _codes(result) -> set[str]:
    return {"SV30x" if d.code in ("SV301", "SV302") else d.code for d in result.diagnostics if d.is_error}


# name -> (spec text, error codes of the unreduced search)
CASES = {
    # copies issued before the expect_tx (DeepGEMM's order) with the expected bytes short by one
    # copy: in the orders where the expect_tx and the first copy complete the phase, the second
    # copy counts in the next phase, whose arrival never comes with its bytes (SV503 or SV201),
    # and the consumer's read of the late tile races with it
    "expect_tx_short_of_the_copies": ("""
protocol t {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem a bytes 1024;
  smem b bytes 1024;
  mbarrier full count 1;
  if producer { elect { init full; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    elect {
      tma.load a bytes 1024 -> full;
      tma.load b bytes 1024 -> full;
      arrive.expect_tx full bytes 1024;
    }
  }
  if consumer { wait full parity 0; read a; read b; }
}""", None),
    "expect_tx_of_all_the_copies": None,  # the twin: the expect_tx covers both copies (below)
}

CASES["expect_tx_of_all_the_copies"] = (
    CASES["expect_tx_short_of_the_copies"][0].replace("expect_tx full bytes 1024", "expect_tx full bytes 2048"),
    set())


@pytest.mark.parametrize("name", CASES)
def test_byte_counts_taken_alone_agree_with_the_unreduced_search(name):
    text, expected = CASES[name]
    protocol = load(text, path="t.sync")
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert full.verdict != Verdict.INCONCLUSIVE
    if expected is None:
        assert full.verdict == Verdict.VIOLATION
    else:
        assert _codes(full) == expected
    assert reduced.verdict == full.verdict
    assert _codes(reduced) == _codes(full), (reduced.diagnostics, full.diagnostics)


@pytest.mark.parametrize("bug", [0, 1])
def test_the_two_cta_gemm_agrees_with_the_unreduced_search(bug):
    """One math warp per CTA, 2 k-blocks through 1 stage (the bug needs a stage reused)."""
    params = {"MATH": 1, "IDLE": 0, "KITERS": 2, "STAGES": 1, "BUG": bug}
    protocol = load(str(FAMILIES / "gemm_2cta_multicast.sync"), params)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    other = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert other.verdict == (Verdict.VIOLATION if bug else Verdict.SAFE), other.coverage
    assert reduced.verdict == other.verdict
    assert _codes(reduced) == _codes(other)
