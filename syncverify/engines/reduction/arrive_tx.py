"""An `arrive.expect_tx` taken alone although other processes can count bytes on its barrier first.

The reduction takes a process's `arrive.expect_tx` on its own CTA's barrier m alone where nothing
that updates m can come first (successors.py, the walk of what can come first with every update of
m forbidden) and the copies in flight on m commute with it (tx.py). On a cluster's pipeline that is
rarely so: the producer of each CTA multicasts its A tile into every CTA's full barrier, so while
one producer stands at its `arrive.expect_tx` the peer's producer can issue its multicast copy onto
the same barrier first, and the walk refused. On CUTLASS's sm_90 ping-pong GEMM with cluster 1x2 the
two producers' second `arrive.expect_tx` were refused in 1,350 of the 1,351 states expanded whole
among the first 30,000 of its race seed at K=64, once the walk counted bytes (bench/RESULTS-speed.md).

The rule: where the walk with every update of m forbidden refuses, the walk is asked again with m's
phase frozen, the updates of m that can come first collected (precede_walk.py, as the landing rule
collects them: tx.py ``_lands_first``), and the step is taken alone when every one of them is a
byte count (a copy, `expect_tx` or `complete_tx`: no arrival, `arrive_drop`, init or inval of m)
and no set of them with the copies in flight, with or without the step, short of all of them
completes m's phase or leaves the pending count or tx-count out of range (tx.updates_commute).

Why that is a persistent set. Along any execution that avoids the step, m changes only by the
collected byte counts and the copies in flight (the walk over-approximates every process's moves;
with the phase frozen it lets a wait on m pass only if it passes now, which holds up to m's first
completion, and no subset of those updates completes m, so there is none). Each of them adds to
m's tx-count and nothing else, and the step adds its bytes and removes its arrivals: the barrier
after any set of them is its sum, whatever the order, and since no partial sum completes the phase,
the step commutes with each of them at every point. A copy's issue does not read m (it checks that
m is a barrier, which no collected update changes) and writes a record of the issuing process that
the step's release does not cover, so the issue commutes with the step too, as the landing does
(tx.py: an `arrive.expect_tx` against the copies in flight). Every other step of every other
process touches m not at all, or is a wait on m that does not pass in the set unless it passes now;
where such a wait passes now and an update was collected the walk answers None (a wait that passes
on the phase before the step's must not be moved across the update). The step never blocks. The
other conditions of the plain rule (the step breaks no rule and warns of nothing, does not end its
process, completes no fresh phase before a first wait, commutes with the copies in flight) are the
caller's, unchanged.
"""

from __future__ import annotations

from ...expr import EvalError
from ...semantics.core import Violation
from ...semantics.state import M_PEND, M_TX, State
from .named import ReductionView
from .precede_walk import _ANY_UPDATE
from .tx import LandingRules, updates_commute


def lone_arrive_tx_among_byte_counts(reduction: ReductionView, state: State, m: int, p: int) -> bool:
    """May process p's `arrive.expect_tx` on its CTA's barrier m be taken alone although byte counts of
    other processes on m can come first (module docstring)? Asked only where the plain rule refused for
    its walk, after every other condition of that rule held."""
    updates: list = []
    if reduction._can_precede(state, m, p, None, _ANY_UPDATE, True, landings_ok=True, updates=updates) is None:
        return False
    if any(arrivals for arrivals, _ in updates):
        return False
    try:
        arrivals, nbytes = reduction.machine.arrive_counts(p, state.procs[p])
    except (EvalError, Violation):
        return False
    step = (arrivals, nbytes or 0)
    mb = state.mbars[m]
    updates.extend((0, -nbytes) for nbytes in LandingRules._other_landings(state, m, None))
    return updates_commute(mb[M_PEND], mb[M_TX], step, updates)


__all__ = ["lone_arrive_tx_among_byte_counts"]
