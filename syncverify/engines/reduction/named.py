"""Partial-order reduction for named-barrier arrivals (`bar.sync`, `bar.arrive`, `syncthreads`).

An arrival adds its warp's threads to the open generation of a barrier; the generation
completes when its count is reached, and the next arrival opens a new one. Two arrivals on
one barrier therefore commute, except where one of them completes the generation: then
the other lands in the next generation in one order and in this one in the other. An
arrival a of process p is taken alone (a persistent set of one step, as for the other
steps of Reduction.successors) when no execution that leaves p where it stands can complete
the open generation g, nor make a complete it in front of another arrival on the barrier:

* counted barriers (`bar.sync id, N`): the threads already in g plus every arrival on the
  barrier that the other processes can make before a (Reduction._can_precede: an
  over-approximation that follows each process along its fixed sequence of operations,
  through every mbarrier wait that can pass, and stops a warp after its own `bar.sync` on
  this barrier, which waits for g) stay below N. Then no arrival completes g before a, and a
  taken before an arrival u completes nothing either (the threads in g before u are at most
  that sum less u's own, so a's 32 keep them below N): a and u commute at every point of
  every such execution. Exits do not release explicit-count generations (docs/model.md).
* all-thread barriers (`syncthreads`, `bar.sync id` with no count): g needs every thread that
  has not exited, p's among them, so it cannot complete before a. a completes g (later)
  only once every other warp that has not exited is in it; where every warp in g, and every
  arrival that can come first, is a `bar.sync` (each warp then arrives once and waits), no
  arrival on the barrier can follow that, and an exit that comes first only lowers the count
  that a's arrival (or, in the other order, the exit) completes.

Where g has no arrival yet, the first arrival fixes its count and the site it keeps (SV202,
SV204): every arrival that can come first must then write the same ones as a, or the two
orders leave different states. The step itself must break no rule and raise no warning
(checked by the caller), and it never ends its process (a `bar.sync` parks at its wait).
The state graph is acyclic, so the cycle proviso holds; a stays enabled (arrivals never
block), so no deadlock is lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ...expr import EvalError
from ...semantics.program import BAR_WAIT
from ...semantics.state import P_PC, P_TOKEN, P_VARS, State

if TYPE_CHECKING:
    from ...semantics.machine import Machine


class ReductionView(Protocol):
    """What this rule reads of the reduction that asks it (successors.Reduction)."""

    machine: Machine

    def _can_precede(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                     freeze: bool, named: tuple[int, list] | None = None,
                     landings_ok: bool = False, updates: list | None = None) -> list[bool] | None: ...


def lone_named_arrival(reduction: ReductionView, state: State, p: int) -> bool:
    """May the named-barrier arrival of process p be taken alone in ``state``? (module docstring)"""
    return named_refusal(reduction, state, p) is None


def named_refusal(reduction: ReductionView, state: State, p: int) -> str | None:
    """Why the named-barrier arrival of process p is not taken alone in ``state`` (the first condition that
    refuses it), or None where it is: the rule itself, which bench/refusal_census.py also asks."""
    from ...semantics.core import Violation

    machine = reduction.machine
    pstate = state.procs[p]
    op = machine.programs[p].code[pstate[P_PC]].op
    try:
        idx, count, site, _ = machine.named_arrival(p, op, pstate[P_VARS])
    except (EvalError, Violation):  # not evaluable here: the step reports it, and is not taken alone
        return "arrival not evaluable"
    nb = state.named[idx]
    warp = machine.procs[p].warp
    if nb.warps >> warp & 1 or (nb.arrived and nb.count != count):
        return "second arrival of the warp (SV203) or count mismatch (SV202)"
    before: list[tuple] = []
    if reduction._can_precede(state, -1, p, None, frozenset(), False, (idx, before)) is None:
        return "the walk of what can come first answers None"
    if not nb.arrived and any(ev[2] != count or ev[3] != site for ev in before):
        return "generation not open: which arrival opens it would decide its count or site"
    if count is not None:
        if nb.arrived + 32 * len(before) >= count:
            return f"{nb.arrived} arrived and {len(before)} arrivals that can come first reach the count {count}"
        return None
    # all-thread barrier: each warp in it, and each arrival that can come first, must be a bar.sync
    if any(not ev[4] for ev in before):
        return "all-thread barrier: an arrival that can come first is no bar.sync"
    cta = machine.procs[p].cta
    parked = idx * 65536 + nb.gen
    for q in machine.procs_of_cta[cta]:
        if nb.warps >> machine.procs[q].warp & 1:
            qs = state.procs[q]
            if qs[P_TOKEN] != parked or machine.programs[q].code[qs[P_PC]].kind != BAR_WAIT:
                return "all-thread barrier: a warp in it is not parked at its bar.sync"
    return None


__all__ = ["lone_named_arrival", "named_refusal"]
