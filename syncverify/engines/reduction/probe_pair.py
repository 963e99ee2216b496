"""Both outcomes of a probe whose phase has completed, taken together as a persistent set.

A process p at a probe (`if try_wait B parity P { … }`, `if test_wait …`, or the kept `let tok = try_wait …`)
whose phase has completed has two steps (families/mbarrier_probe.py): true T, exactly the passing wait, and
false F, which changes nothing but p's position (and the token). Neither was ever taken before another
actor's step, so every state where some process stood at such a probe was expanded whole, unless another
step could go alone. On CUTLASS's sm100 2-SM GEMM the producers' token probes on the fresh empty barriers
(`try_wait mb0[3] parity 1`) had both outcomes in 8,536 of the 18,758 states expanded whole among the first
100,000 (bench/RESULTS-speed.md).

{T, F} is taken as the expansion of a state s where the walk of what can come first (precede_walk.py; p
frozen) answers under the conditions the observing-wait rule asks of a passing wait on m (successors.py): no
process can reach an arrival, `arrive_drop`, init or inval of m before p moves, no arrival (a commit) is in
flight on m, and where m is in phase 0 or has no arrival pending, no update of m at all (bytes included).
Then on every execution from s in which p does not move, m neither completes a phase nor changes its
lifecycle: with an arrival pending and none able to come, bytes alone cannot complete the phase (PTX ISA
§9.7.13.15.6: a phase completes when the pending count and the tx-count are both zero), and elsewhere
nothing updates m. So T stays enabled (a further completion would make the parity name the new, incomplete
phase, and T would be disabled: that is what the walk's condition excludes) and F stays enabled (a probe
never blocks). Every step such an execution takes is independent of T by the observing-wait rule's argument
(the same walk, the same wait), and of F: F reads only m's validity (unchanged: no init or inval) and writes
only p's position and token, which no other actor's step reads (on a barrier of p's own CTA: on a peer's, F
checks that the peer has not exited, which the peer's exit changes). The state graph is acyclic (loops are
bounded), so the cycle proviso holds trivially. Both steps must report nothing and leave p running (an exit
has effects on barriers): a finding of either (SV501 of a stale parity, the SV502 or SV505 of the consumption
rule at T's observation) makes the state expand whole, as before. A kept probe's true step is still left out
where its false step covers it (probe_outcome.py), so the set handed on may be {F}. docs/model.md, "Both
outcomes of a completed probe", gives the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ... import ir
from ...semantics.core import StepResult
from ...semantics.program import END, OP, Instr
from ...semantics.state import M_K, M_PEND, P_PC, P_VARS, State
from .precede_walk import _ANY_UPDATE, _NO_ARRIVAL

if TYPE_CHECKING:
    from .named import ReductionView

ENABLED = True  # the rule on (tests compare the search with it and without it)
# Whether the walk's condition is asked (False: both outcomes of every completed probe are taken together
# wherever they report nothing, which tests/test_probe_pair_por.py shows to lose a finding)
CONDITION = True


def probe_outcomes(reduction: ReductionView, state: State, p: int,
                   tried: dict[int, StepResult | None]) -> tuple[StepResult, StepResult] | None:
    """The true and false steps of process p's probe where they may be taken as the whole expansion of
    ``state`` (module docstring); None where they may not. The true step is the one in ``tried`` (the
    process's deterministic step), computed there if it is not yet."""
    machine = reduction.machine
    if not ENABLED:
        return None
    pstate = state.procs[p]
    code = machine.programs[p].code
    ins = code[pstate[P_PC]]
    if ins.kind != OP or not isinstance(ins.op, ir.MbarProbe) or not machine.probe_passes(state, p):
        return None
    target = machine._wait_target(p, ins.op, pstate[P_VARS])
    if target is False:
        return None
    m = target[0]  # type: ignore[index]
    if machine.mb_names[m][0] != machine.procs[p].cta:
        return None  # a peer's barrier: F's check that the peer is alive reads the peer's exit
    true = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
    if not _clean(true, p, code):
        return None
    # the walk (remembered by what it reads) before the false step, which the expansion computes again where the
    # walk refuses
    mb = state.mbars[m]
    forbidden = _ANY_UPDATE if mb[M_K] == 0 or mb[M_PEND] <= 0 else _NO_ARRIVAL
    if CONDITION and reduction._can_precede(state, m, p, None, forbidden, False) is None:
        return None
    false = machine.step_probe_false(state, p)
    if not _clean(false, p, code):
        return None
    return true, false  # type: ignore[return-value]


def _clean(res: StepResult | None, p: int, code: Sequence[Instr]) -> bool:
    """Does the step report nothing and leave process p running (an exit has effects on barriers)?"""
    return res is not None and res.state is not None and res.violation is None and not res.warnings and \
        not res.soft and code[res.state.procs[p][P_PC]].kind != END


__all__ = ["CONDITION", "ENABLED", "probe_outcomes"]
