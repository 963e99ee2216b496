"""A plain mbarrier arrive that completes a phase while a first wait on its barrier lies ahead, taken
alone where nothing can update the barrier before it.

A plain arrive A of process p on barrier m is otherwise taken alone only where it does not complete a
phase that another process q may still wait on without history (element.py,
``_completes_fresh_phase_before_a_first_wait``): a first wait means the phase of PTX's window with its
parity (rules.first_wait_phase), which the completion moves, so a first wait that passes in phase k
before A blocks after it, and nothing reports the difference. That is the only reason it refuses: on
CUTLASS's sm100 2-SM GEMM the follower's teardown arrive on the leader's `tmem_deallocation_result_barrier`
(`barrier.h:492`) completes its fresh phase while the leader's MMA warp still has its first wait on it
ahead, and the arrive stayed in every state the search expanded whole from there on.

A first wait that does *not* pass in phase k runs only after k completes, in either order. So A is taken
alone where, with p frozen, the walk of what can come first (precede_walk.py; ``forbidden`` every update
of m, ``freeze``) answers: no process can reach an arrival, byte count, `arrive_drop`, init or inval of m
in the set, no copy or commit in flight counts on m, and no wait on m in the set passes now as a first
wait or in phase 0 (the walk answers None there). Then on every execution that avoids A, m stays in phase
k with its pending count (the set over-approximates each process's moves), so A completes phase k
wherever it is moved to; a first wait on m is blocked on every such execution (it would pass only in
phase k, and none in the set does), so none runs before A, and in the order with A first it passes where
it would have after A. What remains before A are steps that touch m not at all and waits on m with
history that pass in phase k, against which A is the plain arrive of element.py: taken first it makes such
a wait stale, and the completion reports SV501 on causality (docs/model.md, "Partial-order reduction").
The step itself must break no rule, warn of nothing (but the SV602 reuse warning, as for every plain
arrive), and leave p running (the caller checks), and the other conditions of a plain arrive
(``_lone_reaching_op``: no lifecycle ahead, no bytes ahead, the peer cannot exit first) hold already.
"""

from __future__ import annotations

from ...semantics.core import StepResult
from ...semantics.program import END
from ...semantics.state import M_K, P_PC, State
from .element import reuse_warnings_only
from .named import ReductionView
from .precede_walk import _ANY_UPDATE

ENABLED = True  # the rule on (tests compare the search with it and without it)
# Whether the walk's condition is asked (False: every arrive that completes a phase before a first wait is
# taken alone, which tests/test_first_wait_por.py shows to lose a finding)
CONDITION = True


def lone_completing_arrive(reduction: ReductionView, state: State, p: int, res: StepResult | None) -> bool:
    """May the plain arrive of process p, whose step ``res`` completes a phase of its barrier while another
    process may still wait on it without history, be taken alone in ``state``? (module docstring)"""
    machine = reduction.machine
    if not ENABLED or res is None or res.violation is not None or res.soft or \
            (res.warnings and not reuse_warnings_only(res)):
        return False
    if machine.programs[p].code[res.state.procs[p][P_PC]].kind == END:
        return False
    # the barrier whose phase the arrive completes (on a peer CTA for a remote arrive)
    moved = [m for m, (before, after) in enumerate(zip(state.mbars, res.state.mbars, strict=True))
             if before[M_K] != after[M_K]]
    if len(moved) != 1:
        return False
    return not CONDITION or reduction._can_precede(state, moved[0], p, None, _ANY_UPDATE, True) is not None


__all__ = ["CONDITION", "ENABLED", "lone_completing_arrive"]
