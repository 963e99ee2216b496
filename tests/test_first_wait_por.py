"""A plain arrive that completes a phase while a first wait on its barrier lies ahead, taken alone where nothing
can update the barrier before it (engines/reduction/first_wait.py; docs/model.md, "Partial-order reduction").

Each program is searched with the rule, without it (the rest of the reduction on) and without any reduction: the
verdicts must be equal, the finding codes with the rule equal to those without it, and those among the codes of the
search without any reduction (which finds more on some programs: a reduced search reports the violations of the
paths it explores, and each path stops at its first). The rule's key condition (the
walk: no update of the barrier and no first wait that passes now can come first) is dropped once, and a finding
is then lost.
"""

from __future__ import annotations

import os
import time

import pytest
from exhaustive_programs import Scope
from rule_compare import Outcome, compare_slice, search

from syncverify.engines.reduction import first_wait

# Two CTAs of a cluster, one body warp each beside the setup warp that initializes the CTA's barrier (count 1)
# before the cluster barrier: elected arrivals on the CTA's own barrier and on the peer's (each completes a phase),
# first waits of either parity and second ones, a byte count and a copy onto the barrier, accesses of the tile
# local and remote, the cluster barrier's halves.
SCOPE = Scope("first-wait", 2, 1, ((2, 2), (2, 1), (1, 1)),
              atoms=("arrive.remote", "arrive", "wait0", "wait1", "arrive.expect_tx", "tma.load", "write",
                     "write.remote", "cluster.arrive", "cluster.wait"), wrappers=("elect",), trips=())
EVERY_CI = 75  # the CI slice: every 75th program (the rule acts on two of them)


def _search(text: str, reduce: bool = True, rule: bool = True) -> Outcome:
    return search(first_wait, text, reduce, rule)


def _codes_kept(on: Outcome, off: Outcome, none: Outcome) -> bool:
    """The rule keeps every code; against the unreduced search the errors are among its errors (an SV505 warning
    is not reported where an SV502 error is at the same line, which the two searches may reach by different paths
    in a program that breaks the rule anyway)."""
    return on[1] <= off[1] and on[3] <= off[3] <= none[3]


def _slice(every: int, offset: int) -> dict[str, int]:
    return compare_slice(first_wait, SCOPE, every, offset, _codes_kept)


def test_the_slice_keeps_verdicts_and_codes():
    """Every 75th of the scope's 2,628 programs in CI: equal verdicts with the rule, without it and without any
    reduction, equal codes with the rule and without it, and those among the codes without any reduction. (Most
    programs end early in a violation; the rule acts on 15 of the scope, each CTA arriving on the peer's barrier
    before its own first wait, two of them in this slice.)"""
    tally = _slice(EVERY_CI, 4)
    assert tally["programs"] >= 30 and tally["acted"] >= 2, tally
    assert tally["rule keeps codes"] == tally["programs"], tally


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="every program of the scope: minutes on a two-core host; run with SYNCVERIFY_SLOW=1")
def test_the_scope_keeps_verdicts_and_codes_wider():
    start = time.process_time()
    tally = _slice(1, 0)
    print(tally, f"{time.process_time() - start:.1f} CPU s")
    assert tally["programs"] >= 2600 and tally["acted"] >= 15, tally
    assert tally["rule keeps codes"] == tally["programs"], tally


# Each CTA's elected lane arrives on the peer's barrier (count 1), then waits on its own, as the 2-SM GEMM's MMA
# warps exchange their teardown arrivals; CTA 1 writes CTA 0's tile before its arrive, CTA 0 writes it after its
# wait. With the waits' parity 0 each blocks until the peer's arrive completes phase 0, in every order, and the
# writes are ordered; with parity 1 (a first wait on a fresh barrier) CTA 0's passes at once where it comes before
# CTA 1's arrive, and CTA 0's write then races CTA 1's (SV303), while it blocks for good where the arrive comes
# first. The cluster barrier at the end keeps CTA 0's memory alive for CTA 1's write.
EXCHANGE = """
protocol exchange {{
  cluster 2;
  cta threads 64;
  role body = warp 0;
  role setup = warp 1;
  mbarrier mb count 1;
  smem buf bytes 64;
  if setup {{ elect {{ init mb; fence.mbarrier_init; }} }}
  cluster.sync;
  if body && cta == 1 {{ elect {{ write buf @ 0; }} }}
  if body {{ elect {{ arrive.release.cluster mb @ cta ^ 1; }} elect {{ wait.acquire.cluster mb parity {parity}; }} }}
  if body && cta == 0 {{ elect {{ write buf; }} }}
  cluster.sync;
}}
"""


def test_the_arrive_is_taken_alone_before_a_wait_it_releases():
    """Parity 0 (the 2-SM GEMM's teardown barrier): the arrivals are taken alone (fewer states than without the
    rule), with the verdict and codes of the search without any reduction."""
    text = EXCHANGE.format(parity=0)
    on, off, none = _search(text), _search(text, rule=False), _search(text, reduce=False)
    assert on[:2] == off[:2] == none[:2], (on, off, none)
    assert on[2] < off[2], (on, off)


def test_a_first_wait_that_passes_now_holds_the_arrive_back():
    """Parity 1: the peer's wait passes now, so the walk refuses the arrive and the race is found, as without any
    reduction. With the walk's condition dropped the arrivals always come first, the waits block for good, and
    the race (SV303) is lost."""
    text = EXCHANGE.format(parity=1)
    on, none = _search(text), _search(text, reduce=False)
    assert on[:2] == none[:2] and "SV303" in on[1], (on, none)
    first_wait.CONDITION = False
    try:
        broken = _search(text)
    finally:
        first_wait.CONDITION = True
    assert broken[0] == "violation" and "SV303" not in broken[1], broken
