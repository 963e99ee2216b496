"""The semantics of the mbarrier parity wait and test_wait: the phase a wait means, whether it
passes, blocks or is a stale waiter (SV501), the observation it records (checked at the next
completion, MbarrierOps._check_observations) and what it orders.

A mixin of ``Machine`` through MbarrierOps (mbarrier.py), which registers the handlers.
"""

from __future__ import annotations

from typing import NamedTuple

from ... import ir
from ...diagnostics import Severity
from ...expr import EvalError, evaluate
from .. import rules
from ..core import (
    Violation,
    _key_bounds,
    _Work,
)
from ..program import END
from ..state import (
    M_JPREV,
    M_K,
    M_OBSERVED,
    M_RDATA,
    M_VALID,
    P_PC,
    P_VARS,
    R_CTA,
    R_KNOWN,
    R_OBJ,
    R_OWNER,
    R_SLOT,
    R_SPACE,
    READ,
    SPACE_INIT,
    SPACE_OBS,
    State,
    acquire,
    carry_obs,
    rdata_cta_line,
)


def wait_commutes(mb: tuple, intended: int) -> bool:
    """Does a passing wait that means phase ``intended`` of barrier ``mb`` (as the wait finds it)
    commute with every other step (StepResult.lone, set by op_wait)? When it observes the last
    completed phase and another wait already observed that phase. A function of the barrier before
    the step, so a search may ask it without taking the step (Footprint.wait_cannot_be_lone)."""
    return intended == mb[M_K] - 1 and bool(mb[M_OBSERVED])



class StepFindings(NamedTuple):
    """What the step of an mbarrier arrival or wait reports, asked without taking it
    (Machine.mbar_arrival_findings, Machine.mbar_wait_findings): the code of the violation that
    ends it (None: none), the codes of its soft findings, whether it warns."""

    violation: str | None
    soft: tuple[str, ...]
    warns: bool


QUIET = StepFindings(None, (), False)
_WAIT_FINDINGS_KEPT = 1 << 16  # entries of Machine._wait_findings before it starts over


class MbarrierWaitOps:
    """Explicit-state handlers of the waits (a mixin of Machine, through MbarrierOps)."""

    def _wait_blocked(self, state: State, p: int, ins, pstate: tuple) -> bool:
        """Fast path: a wait that would simply block (valid barrier, parity not passing, not
        stale). Anything else — including an expression that cannot be evaluated — goes
        through op_wait, which decides and reports."""
        target = self._wait_target_at(p, ins, pstate)
        if target is False:
            return False
        m, parity = target
        mb = state.mbars[m]
        if not mb[M_VALID] or rules.mb_wait_passes(self._rule_state(mb), parity):
            return False  # invalid (reported by op_wait) or passing
        if not self._knows(state.records, (SPACE_INIT, self.procs[p].cta, m, 0), self._lanes(p, ins)):
            return False  # the init is not ordered before this wait: op_wait reports it
        jprev = self._jprev(mb, p)
        intended = rules.first_wait_phase(mb[M_K], parity) if jprev is None else \
            rules.intended_phase(jprev, parity)
        return mb[M_K] <= intended + 1  # not stale: it just blocks

    def _wait_target_at(self, p: int, ins, pstate: tuple) -> tuple[int, int] | bool:
        """_wait_target of process p's wait where it stands, remembered by (p, pc, variables)."""
        key = (p, pstate[P_PC], pstate[P_VARS])
        target = self._wait_targets.get(key)
        if target is None:
            target = self._wait_targets[key] = self._wait_target(p, ins.op, pstate[P_VARS])
        return target

    def mbar_wait_findings(self, state: State, p: int) -> StepFindings | None:
        """What the step of process p's parity `wait` reports, asked without taking it; None where
        that is not known here (the step then decides).

        The step (op_wait, then the local control flow to p's next instruction) reports, in this
        order: an operand that cannot be evaluated or is out of range (None here: _wait_target), a
        barrier not usable (SV401: _init_unordered), a stale waiter (SV501: rules.wait_aliases of
        the phase wait_intends), and for a wait that passes with .acquire the SV602 warning of data a
        `.cta`-scope remote release brought into the phase (None here where the phase records one:
        _check_cta_scope_data decides on the records, and what the wait learns) or the SV602 warning of a `.cta`-scope
        acquire of a phase released at .cluster scope. A wait that does not pass is blocked: no
        step, nothing reported. The observation it records and what it acquires report nothing.
        None too where the process ends and its exit may do more than end it
        (LifecycleOps.exit_is_silent), where its control flow raises, and under a loop hook. A wait
        moves no other process.

        The partial-order reduction asks this to learn that a step breaks no rule without computing
        its knowledge updates (Reduction._some_step_breaks_a_rule): on the 2x1 ping-pong GEMM
        passing waits so computed were set aside in many states."""
        if self.loop_hook is not None:
            return None
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        target = self._wait_target_at(p, ins, pstate)
        if target is False:
            return None
        m, parity = target
        if self._init_unordered(state, m, self._lanes(p, ins)):
            return StepFindings("SV401", (), False)
        mb = state.mbars[m]
        key = (p, pstate[P_PC], pstate[P_VARS], mb)
        found = self._wait_findings.get(key)
        if found is None:
            if len(self._wait_findings) >= _WAIT_FINDINGS_KEPT:
                self._wait_findings.clear()
            found = self._wait_findings[key] = self._wait_findings_at(p, ins, pstate, mb, parity)
        findings, ends = found
        if ends and not self.exit_is_silent(state, p):
            return None
        return findings

    def _wait_findings_at(self, p: int, ins, pstate: tuple, mb: tuple, parity: int) -> tuple[StepFindings | None, bool]:
        """mbar_wait_findings past its SV401 question, and whether the step ends the process (the
        caller then asks LifecycleOps.exit_is_silent of the state). A function of the process's
        position, its barrier's state and the parity alone, so the caller remembers it by them: a
        waiter keeps its position and its barrier over most of the states a search meets it in
        (on the 1x2 ping-pong GEMM this was asked 168,460 times in 40,000 states)."""
        s = self._rule_state(mb)
        if rules.wait_aliases(s, self.wait_intends(mb, p, parity)[0]):
            return StepFindings("SV501", (), False), False
        if not rules.mb_wait_passes(s, parity):
            return QUIET, False  # blocked
        warns = False
        if ins.op.sem == "acquire":
            if rdata_cta_line(mb[M_RDATA], current=False):
                return None, False
            warns = self._cta_scope_acquire_warns(ins.op, mb[M_RDATA])
        try:
            pc, _ = self._run_local(p, pstate[P_PC] + 1, pstate[P_VARS])
        except Violation:
            return None, False
        return (StepFindings(None, (), True) if warns else QUIET), self.programs[p].code[pc].kind == END

    @staticmethod
    def _cta_scope_acquire_warns(op: ir.MbarWait | ir.MbarTestWait, rdata: int) -> bool:
        """SV602 (a warning): an acquire at the default .cta scope of a phase into which another CTA
        released generic-proxy data at .cluster scope (_wait_effect)."""
        return op.scope == "cta" and bool(rdata & 2)

    def _wait_target(self, p: int, op: ir.MbarWait, vars_: tuple) -> tuple[int, int] | bool:
        """The barrier index and parity of a wait of process p under its variables, or False
        when they cannot be evaluated or are out of range (op_wait reports that). It depends
        only on the process's program position and variables, so it is remembered."""
        try:
            env = self.env(p, vars_)
            ctx = self.ctx[p]
            idx = evaluate(op.bar.index, env, ctx) if op.bar.index is not None else 0
            if not 0 <= idx < (self.mb_decl[op.bar.name].size or 1):
                return False
            return self.mb_index[(self.procs[p].cta, op.bar.name, idx)], evaluate(op.parity, env, ctx)
        except EvalError:
            return False

    def wait_intends(self, mb: tuple, p: int, parity: int) -> tuple[int, int]:
        """The phase process p's wait with ``parity`` means on barrier ``mb``, and the last phase p
        observed of it (-1: none yet).

        A first wait has no history: it means the phase of PTX's window (the current one or the
        one before) with its parity. The CUTLASS producer start (parity 1 on a fresh barrier)
        passes at once and keeps no history; nvFuser's first WAR wait (parity 1 after a
        pre-arrived phase 0) means 1; a warp that first waits once the barrier is past phase 1
        (ordered after it by other synchronization) means the phase it finds. Could it also run
        earlier, it observes an earlier phase there, and the next completion reports that it is
        not ordered after it (SV501)."""
        jprev = self._jprev(mb, p)
        if jprev is None:
            return rules.first_wait_phase(mb[M_K], parity), -1
        return rules.intended_phase(jprev, parity), jprev

    def _jprev(self, mb: tuple, p: int) -> int | None:
        for q, j in mb[M_JPREV]:
            if q == p:
                return j
        return None

    def op_wait(self, w, p, proc, op: ir.MbarWait, ins, env, ctx, lanes) -> bool:
        m = self._mbar(w, p, op.bar, proc.cta, env, ctx)
        self._check_barrier_usable(w, p, m, lanes, op.span, "wait")
        parity = self._eval(op.parity, env, ctx)
        mb = w.mbars[m]
        s = self._rule_state(mb)
        intended, jprev = self.wait_intends(mb, p, parity)
        if rules.wait_aliases(s, intended):
            raise Violation("SV501", f"wait on {self.mb_label(m)} for parity {parity % 2} means phase {intended}, "
                            f"but the barrier is already in phase {s.k}: that phase completed and was overtaken, "
                            "so the parity now names a later phase (stale waiter)", op.span)
        if not rules.mb_wait_passes(s, parity):
            return False
        observed_phase = s.k - 1
        new_j = max(jprev, observed_phase if intended == observed_phase else jprev)
        jprevs = tuple(sorted([(q, j) for q, j in mb[M_JPREV] if q != p] + [(p, new_j)]))
        observed = mb[M_OBSERVED] or intended == observed_phase
        w.mbars[m] = (*mb[:M_OBSERVED], int(observed), jprevs, mb[M_RDATA])
        if intended == observed_phase:
            # the observation, checked against the next phase's completion (_check_observations)
            key = (SPACE_OBS, proc.cta, m, observed_phase)
            part = self._part(p, ins)
            records = w.records
            lo, hi = _key_bounds(w, key)  # (a filter of the whole tuple, where it is not sorted)
            w.records = (*records[:lo], *[r for r in records[lo:hi] if r[R_OWNER] != p or r[:4] != key],
                         *records[hi:], (*key, READ, p, part, op.span.line, 0, 0, -1, 0, lanes, lanes))
            # Taken alone by partial-order reduction when another wait already observed the phase
            # (so no arrive can depend on this one for the consumption rule): every other step
            # commutes with it, and a completion of the next phase is checked on causality.
            w.lone = wait_commutes(mb, intended)
        self._wait_effect(w, m, proc, op, lanes)
        return True

    def _wait_effect(self, w: _Work, m: int, proc, op: ir.MbarWait | ir.MbarTestWait, lanes: int) -> None:
        """What a wait (or a probe) that returns true orders: with .acquire, everything released
        into the completed phase; with .relaxed, only the observations (execution order)."""
        if op.sem != "acquire":
            w.records = carry_obs(w.records, self.holders.mb_last(m), lanes)
        if op.sem == "acquire":
            rdata = w.mbars[m][M_RDATA]
            line, learnt = self._check_cta_scope_data(w, m, proc.cta, lanes, op.span.line)
            if self._cta_scope_acquire_warns(op, rdata):
                # A warning, not an error: the release side is at .cluster scope here (a .cta one is
                # the error at the arrive), and CUTLASS's ClusterBarrier::wait acquires at the default
                # .cta scope on barriers its peers release at .cluster scope (docs/model.md, "Scopes").
                w.warnings.append(Violation(
                    "SV602", f"wait on {self.mb_label(m)} acquires generic-proxy data another CTA released into "
                    "it, with the default .cta scope; PTX's memory model pairs a release and an acquire only when "
                    "each scope includes the other thread, so prefer wait.acquire.cluster (CUTLASS relies on "
                    "the .cta form)", op.span, severity=Severity.WARNING))
            w.records = acquire(w.records, self.holders.mb_last(m), lanes)
            if learnt:
                self._learn_unpaired(w, line, learnt, lanes)

    def op_test_wait(self, w, p, proc, op: ir.MbarTestWait, ins, env, ctx, lanes) -> bool:
        """`mbarrier.test_wait.parity` whose result nothing uses: it never blocks, names no phase
        (PTX: any parity is a valid operand) and so is never a stale waiter. It returns true when
        the last completed phase has its parity — but unless the probing lanes are already ordered
        after that completion, it may return false there too (the completion need not be visible
        yet). False has no effect, and it orders less than true, so every finding of an execution
        where an unforced probe returns true is one of the same execution where it returns false:
        the model takes false. Where the lanes know an observation of that phase (a wait of theirs,
        or one ordered before them), PTX's coherence makes the probe see the completion: it returns
        true and orders what a passing wait orders (the acquire, or the observations for .relaxed)."""
        m = self._mbar(w, p, op.bar, proc.cta, env, ctx)
        self._check_barrier_usable(w, p, m, lanes, op.span, "test_wait")
        parity = self._eval(op.parity, env, ctx)
        s = self._rule_state(w.mbars[m])
        if rules.mb_wait_passes(s, parity) and self._has_observed(w, m, proc.cta, s.k - 1, lanes):
            self._wait_effect(w, m, proc, op, lanes)
        return True

    @staticmethod
    def _has_observed(w: _Work, m: int, cta: int, phase: int, lanes: int) -> bool:
        """Do all of ``lanes`` know a wait's observation of that phase of barrier m?"""
        return any(r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m and r[R_CTA] == cta and r[R_SLOT] == phase
                   and r[R_KNOWN] & lanes == lanes for r in w.records)

