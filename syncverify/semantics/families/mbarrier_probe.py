"""The semantics of an mbarrier probe whose result a branch uses: `if try_wait B parity P { … } else { … }`
(and `test_wait`), defined once here.

PTX (ptx-semantics.md §1.3; PTX ISA, "mbarrier.test_wait / mbarrier.try_wait"): `test_wait` "is a
non-blocking instruction which tests for the completion of the phase"; `try_wait` "is a potentially
blocking instruction which tests for the completion of the phase. If the phase is not complete, the
executing thread may be suspended … [and] resumes … when the specified phase completes OR before the
phase completes following a system-dependent time limit". Both set `waitComplete` to true only for a
completed phase, and "form the acquire pattern only when they return True". So:

* **false** is possible at any time -- a time-out, or a completion not yet visible to the probing
  lanes -- and has no effect: it orders nothing and observes no phase;
* **true** is possible only once the phase the parity names has completed, and then the probe is
  exactly a passing `wait` (families/mbarrier.py, ``op_wait``): the acquire (the observations for
  `.relaxed`), the waiter's phase history, the consumption rule's observation, the stale-parity
  check (SV501).

One step of a process therefore has two outcomes where the phase has completed. The deterministic
step of the process (``op_probe``, what ``Machine.step_process`` computes) is true where the probe
can pass and false otherwise; the other outcome, false although the phase completed, is the step
labelled ``("p", p, 0)`` (``step_probe_false``), which ``Machine.successors`` offers beside it.
Taking false "at any time" makes the probe monotone like a wait: a step that completes a phase only
adds the true outcome, and false commutes with every step (it changes nothing but the prober's pc),
which is what keeps the reductions (engines/reduction/) sound with it.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from .. import rules
from ..core import PLACED, StepResult, Violation, _detached, _Work
from ..program import END
from ..state import M_VALID, P_PC, P_VARS, State

FALSE_OUTCOME = 0  # the third element of the label of a probe's step that returns false


class ProbeOps:
    """Explicit-state handlers of the probe (a mixin of Machine, after MbarrierOps, whose wait
    and barrier look-ups it uses)."""

    def op_probe(self, w, p, proc, op: ir.MbarProbe, ins, env, ctx, lanes) -> object:
        """The deterministic step of a probe: true (the wait's effect, then the `then` block at
        pc + 1) where the phase its parity names has completed, false (the `else` block at the
        instruction's target) otherwise. Usability and the stale-parity check are the wait's:
        they hold for either result."""
        passed = self.op_wait(w, p, proc, op, ins, env, ctx, lanes)
        if ins.slot >= 0:  # a token (`let t = try_wait …`): the result is the variable's value
            w.procs[p] = (ins_pc(w, p) + 1, _with(w.procs[p][P_VARS], ins.slot, int(passed)), *w.procs[p][2:])
            return PLACED
        if passed:
            return True
        w.procs[p] = (ins.target, *w.procs[p][1:])
        return PLACED

    def probe_passes(self, state: State, p: int) -> bool:
        """Is process p at a probe whose phase has completed (so that it may return either result)?"""
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        if not isinstance(ins.op, ir.MbarProbe):
            return False
        target = self._wait_target(p, ins.op, pstate[P_VARS])  # type: ignore[arg-type]
        if target is False:
            return False  # not evaluable: the deterministic step reports it
        m, parity = target  # type: ignore[misc]
        mb = state.mbars[m]
        return bool(mb[M_VALID]) and bool(rules.mb_wait_passes(self._rule_state(mb), parity))

    def step_probe_false(self, state: State, p: int) -> StepResult | None:
        """The probe of process p returns false although its phase has completed (a time-out, or
        the completion not yet visible): it orders nothing, and p goes on at the `else` block. None
        where the deterministic step is already the false outcome (the phase has not completed)."""
        if not self.probe_passes(state, p):
            return None
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        op = ins.op
        w = _Work(state)
        label = ("p", p, FALSE_OUTCOME)
        try:
            proc = self.procs[p]
            m = self._mbar(w, p, op.bar, proc.cta, self._env_at(p, pstate[P_VARS]), self.ctx[p])
            self._check_barrier_usable(w, p, m, self._lanes(p, ins), op.span, probe_name(op))
            if ins.slot >= 0:  # a token: false is its value
                pc, vars_ = self._run_local(p, pstate[P_PC] + 1, _with(pstate[P_VARS], ins.slot, 0))
            else:
                pc, vars_ = self._run_local(p, ins.target, pstate[P_VARS])
            w.procs[p] = (pc, vars_, *w.procs[p][2:])
            if self.programs[p].code[pc].kind == END:
                self._exit(w, p)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft)


def ins_pc(w: _Work, p: int) -> int:
    return w.procs[p][P_PC]


def _with(vars_: tuple, slot: int, value: int) -> tuple:
    return (*vars_[:slot], value, *vars_[slot + 1:])


def probe_name(op: ir.MbarProbe) -> str:
    return "test_wait" if op.test else "try_wait"


HANDLERS: dict[type, Callable] = {ir.MbarProbe: ProbeOps.op_probe}
