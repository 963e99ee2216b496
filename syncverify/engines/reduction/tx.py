"""When byte counts on one mbarrier commute: the condition behind taking a copy's landing or an
`arrive.expect_tx` alone while other copies into the same barrier are still in flight.

A landing subtracts its bytes from the barrier's tx-count; an `arrive.expect_tx` adds its
bytes and removes its arrivals from the pending count. Each then completes the phase if
pending arrivals and tx-count are both 0. The updates themselves add up in any order, so two
of them commute unless the phase completes between them: then the later one counts in the
next phase in one order only. With nothing but the step t and the landings L in flight able
to change the barrier first (the caller's Reduction._can_precede condition), the barrier's
state after any set of them is the sum of the set, whatever the order. If no set short of
all of them (t with every landing) leaves it at 0 pending and 0 bytes, no order completes
the phase before its last update, and every order ends in the same state: t then commutes
with every landing at every point of every execution, which is what taking it alone needs.
The same sums also stay inside the tx-count's range (±(2^20−1), SV503), so no order reports
an overflow that another does not.

The sets are asked of their distinct sums (only_whole_completes, which cp_arrive.py asks too), so the work
is bounded by the number of distinct sums (MAX_SUMS), not by the number of updates; the rule is refused past
MAX_LANDINGS updates asked together, a bound on the length of the remembered question only.

The rules that ask it are here too (LandingRules): a copy's landing against the updates of its
barrier that can come first, an arrive.expect_tx against the copies in flight.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from ...expr import EvalError
from ...semantics.core import Violation
from ...semantics.rules import MAX_COUNT
from ...semantics.state import AG_TMA, M_PEND, M_TX, State
from .precede_walk import _ANY_UPDATE

if TYPE_CHECKING:
    from ...semantics.machine import Machine

MAX_LANDINGS = 64
Update = tuple[int, int]  # (arrivals it removes from the pending count, what it adds to the tx-count)


def landings_commute(pend: int, tx: int, step_arrivals: int, step_tx: int, landings: list[int]) -> bool:
    """May a step that removes ``step_arrivals`` pending arrivals and adds ``step_tx`` to the
    tx-count be taken before the ``landings`` (byte counts) in flight on the same barrier, which
    has ``pend`` arrivals pending and tx-count ``tx``? (module docstring)"""
    return updates_commute(pend, tx, (step_arrivals, step_tx), [(0, -b) for b in landings])


def updates_commute(pend: int, tx: int, step: Update, updates: list[Update]) -> bool:
    """May ``step`` be taken before ``updates`` of the same barrier, each a (arrivals, tx-count
    change) pair, when these are all that can change the barrier first? The barrier after any
    set of them is its sum; no set short of all of them with the step may leave it at 0 pending
    and tx-count 0 (module docstring), every sum keeps the tx-count in range (SV503) and the
    pending count at or above 0 (an arrive past it is SV504, whose report would then depend on
    the order): only_whole_completes with the step among the updates (a set with the step and one
    without are sub-multisets either way, and all of them with the step is the whole)."""
    if len(updates) > MAX_LANDINGS:
        return False
    return _only_whole_completes(pend, tx, (*updates, step))


MAX_SUMS = 1 << 14  # distinct (arrivals, tx-count, whole) sums kept before the rule gives up (refuses)


def only_whole_completes(pend: int, tx: int, updates: list[Update]) -> bool:
    """_only_whole_completes, remembered by its arguments (the updates in the order given).

    Why. The landing rule asks it for every copy in flight in every state where the copies' walk
    allows them, and sibling states ask it again with the same barrier counts and updates: on the
    2-SM GEMM with its teardown barrier's init fenced a third of the search went to these sums
    (bench/RESULTS-speed.md, "both outcomes of a completed probe"). The answer is a function of the
    arguments alone, so a bounded least-recently-used table of answers changes no answer, whatever
    it holds. The key keeps the updates' order, in which the refusal past MAX_SUMS is counted."""
    return _only_whole_completes(pend, tx, tuple(updates))


@lru_cache(maxsize=1 << 16)
def _only_whole_completes(pend: int, tx: int, updates: tuple[Update, ...]) -> bool:
    """Does no sub-multiset of ``updates`` short of all of them leave a barrier with ``pend`` arrivals
    pending and tx-count ``tx`` at 0 pending and tx-count 0, with every sub-multiset keeping the
    pending count within 0..2^20−1 and the tx-count within ±(2^20−1)? (An update of negative arrivals
    is an increment of the pending count: a `cp.async.mbarrier.arrive` without .noinc.)

    Asked of the distinct sums instead of each subset: equal updates give equal sums whichever of them a
    set takes, so a sum is kept once, with whether the whole multiset reaches it. False where more than
    MAX_SUMS distinct sums would be kept (refusing is always sound)."""
    sums: set[tuple[int, int, bool]] = {(0, 0, True)}
    for (arr, dtx), n in Counter(updates).items():
        nxt: set[tuple[int, int, bool]] = set()
        for a0, t0, whole in sums:
            for k in range(n + 1):
                nxt.add((a0 + k * arr, t0 + k * dtx, whole and k == n))
        if len(nxt) > MAX_SUMS:
            return False
        sums = nxt
    for arr, dtx, whole in sums:
        p, t = pend - arr, tx + dtx
        if not 0 <= p <= MAX_COUNT or not -MAX_COUNT <= t <= MAX_COUNT:
            return False
        if p == 0 and t == 0 and not whole:
            return False
    return True



class LandingRules:
    """The conditions for a copy's landing and an arrive.expect_tx against the other byte counts on
    their barrier (a mixin of Reduction)."""

    machine: Machine

    def _lands_first(self, state: State, a: tuple) -> bool:
        """May the landing of bulk copy ``a`` be taken alone (partial-order reduction)?

        A landing writes its slot's in-flight record and counts its bytes on its barrier m
        (completing the phase, maybe). It does not commute with another update of m (an
        arrive, expect_tx, complete_tx, another copy's landing or a commit's arrival: the
        intermediate tx-count decides whether and when the phase completes), with an init or
        inval of m, or with the exit of its CTA (an exit before it is SV404). So it is taken
        alone only when none of these can happen before it, whatever the other actors do: in
        what can run before it (``_can_precede``, with m's phase frozen), no commit counts
        on m, no process reaches an arrive_drop, init or inval of m, and some process of the
        copy's CTA does not reach its end. What can come first otherwise commutes with it or,
        taken after it, reports a violation of its own (docs/model.md). The other updates of m
        that can come first — copies in flight, and the arrivals, tx updates and copies of the
        processes in that set (a peer's multicast copy, the CTA's own arrive.expect_tx) — are
        allowed where no set of them short of all, with the landing, completes m's phase
        (updates_commute), and then no wait on m in the set may pass now."""
        machine = self.machine
        if not self._landings_commute(state, a[4], a, -1):  # the cheap condition first
            return False
        updates: list = []
        ends = self._can_precede(state, a[4], -1, a, _ANY_UPDATE, True, landings_ok=True, updates=updates)
        if ends is None or all(ends[q] for q in machine.procs_of_cta[a[1]]):
            return False
        if not updates:
            return True
        mb = state.mbars[a[4]]
        updates.extend((0, -nbytes) for nbytes in self._other_landings(state, a[4], a))
        return updates_commute(mb[M_PEND], mb[M_TX], (0, -a[5]), updates)

    def _landings_commute(self, state: State, m: int, agent: tuple | None, p: int) -> bool:
        """Do the copies in flight on m (other than ``agent``) commute with the step: the landing
        of ``agent``, or process p's arrive.expect_tx on m (landings_commute)?"""
        machine = self.machine
        landings = self._other_landings(state, m, agent)
        if not landings:
            return True
        mb = state.mbars[m]
        if agent is not None:
            return landings_commute(mb[M_PEND], mb[M_TX], 0, -agent[5], landings)
        try:
            arrivals, nbytes = machine.arrive_counts(p, state.procs[p])
        except (EvalError, Violation):
            return False
        return landings_commute(mb[M_PEND], mb[M_TX], arrivals, nbytes or 0, landings)

    @staticmethod
    def _other_landings(state: State, m: int, agent: tuple | None) -> list[int]:
        """The byte counts of the copies in flight on m, less ``agent`` (once: equal copies may be
        one interned tuple)."""
        landings = []
        skip = agent is not None
        for b in state.agents:
            if skip and b is agent:
                skip = False
                continue
            if b[4] == m and b[0] == AG_TMA:
                landings.append(b[5])
        return landings


__all__ = ["MAX_LANDINGS", "MAX_SUMS", "LandingRules", "Update", "landings_commute", "only_whole_completes",
           "updates_commute"]
