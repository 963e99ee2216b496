"""When byte counts on one mbarrier commute: the condition behind taking a copy's landing or an
`arrive.expect_tx` alone while other copies into the same barrier are still in flight.

A landing subtracts its bytes from the barrier's tx-count; an `arrive.expect_tx` adds its
bytes and removes its arrivals from the pending count. Each then completes the phase if
pending arrivals and tx-count are both 0. The updates themselves add up in any order, so two
of them commute unless the phase completes between them: then the later one counts in the
next phase in one order only. With nothing but the step t and the landings L in flight able
to change the barrier first (the caller's Machine._can_precede condition), the barrier's
state after any set of them is the sum of the set, whatever the order. If no set short of
all of them (t with every landing) leaves it at 0 pending and 0 bytes, no order completes
the phase before its last update, and every order ends in the same state: t then commutes
with every landing at every point of every execution, which is what taking it alone needs.
The same sums also stay inside the tx-count's range (±(2^20−1), SV503), so no order reports
an overflow that another does not.

Sets are enumerated, so this is refused past MAX_LANDINGS copies in flight on the barrier.
"""

from __future__ import annotations

from ..semantics.rules import MAX_COUNT

MAX_LANDINGS = 10
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
    the order)."""
    n = len(updates)
    if n > MAX_LANDINGS:
        return False
    full = (1 << n) - 1
    arr = [0] * (1 << n)
    sums = [0] * (1 << n)
    for s in range(1, 1 << n):
        low = s & -s
        a, d = updates[low.bit_length() - 1]
        arr[s] = arr[s ^ low] + a
        sums[s] = sums[s ^ low] + d
    for s in range(1 << n):
        for with_step in (False, True):
            p = pend - arr[s] - (step[0] if with_step else 0)
            t = tx + sums[s] + (step[1] if with_step else 0)
            if not -MAX_COUNT <= t <= MAX_COUNT or p < 0:
                return False
            if p == 0 and t == 0 and not (with_step and s == full):
                return False
    return True


__all__ = ["MAX_LANDINGS", "Update", "landings_commute", "updates_commute"]
