"""The semantics of mbarriers: arrive (with expect_tx) and expect_tx/complete_tx, with the checks
every use of a barrier shares (usable barrier, consumption rule, phase observations at a
completion, tx-count range).

Beside it: mbarrier_wait.py (the parity wait and test_wait, with their observations),
mbarrier_lifecycle.py (init and inval), mbarrier_encoding.py (the bmc engine's encoding of the
family). The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers
them by operation type (see Machine._exec).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ...diagnostics import Severity
from .. import rules
from ..core import (
    Violation,
    _new_tuple,
    _Work,
)
from ..program import END, own_part_hidden
from ..state import (
    F_WARPSYNCED,
    FULL,
    LANES,
    M_JPREV,
    M_K,
    M_OBSERVED,
    M_RDATA,
    M_VALID,
    P_PC,
    P_VARS,
    R_CTA,
    R_FLAGS,
    R_KNOWN,
    R_LINE,
    R_OBJ,
    R_OWNER,
    R_PART,
    R_SLOT,
    R_SPACE,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    SPACE_TMEM,
    State,
    carry_obs,
    hidden_like_own_access,
    rdata_shift,
    release,
    release_partial,
    shift_phase,
)
from .mbarrier_lifecycle import MbarrierLifecycleOps
from .mbarrier_wait import QUIET, MbarrierWaitOps, StepFindings
from .scopes import ScopeOps

_ARRIVAL_COUNTS_KEPT = 1 << 16  # entries of Machine._arrival_counts before it starts over


class MbarrierOps(MbarrierWaitOps, MbarrierLifecycleOps, ScopeOps):
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _mbar(self, w: _Work, p: int, ref: ir.Ref, cta: int, env, ctx) -> int:
        decl = self.mb_decl[ref.name]
        idx = 0
        if ref.index is not None:
            idx = self._eval(ref.index, env, ctx)
            if not 0 <= idx < (decl.size or 1):
                raise Violation("SV104", f"index {idx} is out of range for `{ref.name}[{decl.size}]`", ref.span)
        return self.mb_index[(cta, ref.name, idx)]

    def _check_barrier_usable(self, w: _Work, p: int, m: int, lanes: int, span, what: str) -> None:
        """SV401/SV402: the barrier must be valid and its init must happen-before this use."""
        cta = self.mb_names[m][0]
        remote = cta != self.procs[p].cta
        if remote:
            self._check_peer_alive(w, p, cta, span, what)
        mb = w.mbars[m]
        if self._init_unordered(w, m, lanes):
            if remote:
                raise Violation("SV402", f"{what} on {self.mb_label(m)} in peer CTA {cta} may run before that "
                                "CTA's init of it is visible (needs init; fence.mbarrier_init; a cluster barrier "
                                "that both sides pass before the remote use)", span)
            state = "not initialized" if not mb[M_VALID] else "initialized, but nothing orders the init before it"
            raise Violation("SV401", f"{what} on {self.mb_label(m)}: the barrier is {state}", span)

    def _init_unordered(self, w: _Work | State, m: int, lanes: int) -> bool:
        """Is barrier m invalid, or its init not known by ``lanes`` (SV401, SV402 on a peer's)?"""
        return not w.mbars[m][M_VALID] or not self._knows(w.records, (SPACE_INIT, self.mb_names[m][0], m, 0), lanes)

    @staticmethod
    def _unconsumed(mb: tuple) -> bool:
        """Does a use of barrier ``mb`` break §1.3's consumption rule: no wait observed its previous phase?"""
        return not mb[M_OBSERVED]

    @staticmethod
    def _arrival_count_error(s: rules.Mbar, count: int, drop: bool) -> str | None:
        """SV504: "drop" where an arrive_drop takes the expected count to 0 or below, "overflow"
        where more arrivals land than are pending in the phase; None where neither."""
        if drop and count >= s.exp:
            return "drop"
        if rules.arrive_overflows(s, count):
            return "overflow"
        return None

    def _check_consumption(self, w: _Work, m: int, span, what: str, completes: bool) -> None:
        """§1.3 consumption rule, its letter (the SV505 warning): an arrive-on lands in a phase whose
        previous phase no wait has observed yet. Where the arrival also completes that phase, the
        hazard the rule guards against happens, and _set_mb reports it (SV502) instead. The letter
        alone aliases no waiter's parity: the count-based hardware cannot complete the phase again
        before the arrivals it still waits for, and an observation before then keeps every
        parity wait exact (docs/model.md, "Readings PTX does not settle")."""
        mb = w.mbars[m]
        if self._unconsumed(mb) and not completes:
            w.warnings.append(Violation(
                "SV505", f"{what} on {self.mb_label(m)} lands in phase {mb[M_K]} before any wait observed the "
                f"completion of phase {mb[M_K] - 1} (the letter of PTX's consumption rule); it does not complete "
                f"phase {mb[M_K]}, so no waiter's parity is aliased yet", span, severity=Severity.WARNING))

    def _check_completion_observed(self, w: _Work, m: int, old: tuple, span, what: str) -> None:
        """The consumption rule's hazard (SV502): phase k of barrier m completes while no wait has
        observed the completion of phase k − 1. A parity wait for phase k − 1 then names phase k + 1
        (a late wake-up or a deadlock), which is what the rule exists to prevent (synccheck's
        "Missing wait"). Reported at the update that completes phase k, whatever its kind."""
        if self._unconsumed(old):
            w.soft.append(Violation(
                "SV502", f"{what} on {self.mb_label(m)} completes phase {old[M_K]} although no wait observed the "
                f"completion of phase {old[M_K] - 1}: a parity wait for phase {old[M_K] - 1} now names phase "
                f"{old[M_K] + 1} (PTX consumption rule)", span))

    def _set_mb(self, w: _Work, m: int, mb: rules.Mbar, old: tuple, span, what: str, release_mask: int = 0,
                rdata: int | None = None, contributor: int = 0) -> None:
        """Store a barrier after a rule was applied, with knowledge and phase bookkeeping.

        ``span``, ``what``: the update, as a completion's SV502 names it. ``contributor``: the lanes
        whose step this is (0 for an async agent); what they have observed is causally before this
        contribution, whatever its memory semantics."""
        rd = old[M_RDATA] if rdata is None else rdata
        observed = old[M_OBSERVED]
        cur = self.holders.mb_cur(m)
        if release_mask:
            w.records = release(w.records, release_mask, cur)
        if contributor and contributor != release_mask:
            # (after a release from the same lanes it would change nothing: every record those
            # lanes know, observations included, is then known by the current phase)
            w.records = carry_obs(w.records, contributor, cur)
        if mb.k != old[M_K]:
            self._check_completion_observed(w, m, old, span, what)
            self._check_observations(w, m, old[M_K])
            w.records = shift_phase(w.records, self.holders.mb_cur(m), self.holders.mb_last(m))
            observed = 0
            rd = rdata_shift(rd)
        w.mbars[m] = (mb.valid, mb.k, mb.pend, mb.exp, mb.tx, observed, old[M_JPREV], rd)

    def _check_observations(self, w: _Work, m: int, phase: int) -> None:
        """Phase ``phase`` of barrier m completes. Every wait that observed phase − 1 must be
        causally before some contribution to this phase; otherwise another interleaving runs
        that wait after this completion, where its parity names a later phase (stale waiter,
        SV501). Checking it here, on causality, makes SV501 independent of the interleaving
        explored — which is what lets partial-order reduction take passing waits alone."""
        last = phase - 1
        # The stale observation is the first in record order; the records are copied only when some
        # observations are dropped.
        observations = self._observations_through(w.records, m, last)
        if observations:
            r = self._first_stale(observations, last, self.holders.mb_cur(m))
            if r is not None:
                raise Violation("SV501", f"the wait at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} for "
                                f"phase {last} of {self.mb_label(m)} is not ordered before the completion of "
                                f"phase {phase}: in another interleaving it runs after it, and its parity then "
                                "names a later phase (stale waiter)", self._agent_span(r[R_LINE]),
                                procs=(r[R_OWNER],))
            dropped = {id(r) for r in observations}  # (the very record objects: a pass without a second test)
            w.records = tuple([r for r in w.records if id(r) not in dropped])

    def _observations_through(self, records: tuple, m: int, phase: int) -> list[tuple]:
        """The records of waits' observations of barrier m's phases up to ``phase`` (those the
        completion of phase + 1 checks and drops)."""
        cta = self.mb_names[m][0]
        return [r for r in records
                if r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m and r[R_CTA] == cta and r[R_SLOT] <= phase]

    @staticmethod
    def _first_stale(observations: list[tuple], last: int, ordered: int) -> tuple | None:
        """The first observation of phase ``last`` that no holder in ``ordered`` knows (SV501 at the
        completion of the next phase, when ``ordered`` is the completed phase's holder)."""
        for r in observations:
            if r[R_SLOT] == last and not r[R_KNOWN] & ordered:
                return r
        return None

    @staticmethod
    def _rule_state(mb: tuple) -> rules.Mbar:
        # the first five fields of a state's barrier are rules.Mbar's (state.py), in its order
        return _new_tuple(rules.Mbar, mb[:5])

    def _tx_check(self, m: int, tx: int, span) -> None:
        if rules.tx_out_of_range(tx):
            raise Violation("SV503", f"tx-count of {self.mb_label(m)} would reach {tx}, outside ±(2^20-1)", span)

    def op_arrive(self, w, p, proc, op: ir.MbarArrive, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        self.check_local_form(op, cta, proc.cta)
        m = self._mbar(w, p, op.bar, cta, env, ctx)
        what = "arrive_drop" if op.drop else "arrive"
        self._check_barrier_usable(w, p, m, lanes, op.span, what)
        count = self._eval(op.count, env, ctx) * ins.threads
        old = w.mbars[m]
        s = self._rule_state(old)
        error = self._arrival_count_error(s, count, op.drop)
        if error == "drop":
            raise Violation("SV504", f"arrive_drop of {count} on {self.mb_label(m)} takes its expected count "
                            f"{s.exp} to {s.exp - count} (UB at 0)", op.span)
        if error == "overflow":
            raise Violation("SV504", f"{count} arrival(s) on {self.mb_label(m)} but only {s.pend} pending in "
                            f"phase {s.k} (the extra ones would land in the next phase)", op.span)
        if op.tx_bytes is not None:
            nbytes = self._eval(op.tx_bytes, env, ctx) * ins.threads
            self._tx_check(m, s.tx + nbytes, op.span)
            s = (rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx)(s, nbytes, count)
        else:
            s = rules.mb_arrive_drop(s, count) if op.drop else rules.mb_arrive(s, count)
        self._check_consumption(w, m, op.span, what, s.k != old[M_K])
        rdata = None
        release_mask = lanes if op.sem == "release" else 0
        if cta != proc.cta and release_mask:
            rdata = self._check_cross_cta_release(w, p, m, op, lanes)
        if release_mask and self._part(p, ins) != FULL and proc.nthreads > 1:  # SV609 (warp_collective_order)
            self.collective_release(w, p, proc, self._part(p, ins), self.holders.mb_cur(m), "mbarrier.arrive", op.span)
        if release_mask and self._part(p, ins) >= LANES:
            # some lanes of the warp (a lane guard): each publishes its own part only
            releasing = ins.lanes & proc.lane_mask
            w.records = release_partial(
                w.records, lanes, lanes & self.holders.leader(p), self.holders.mb_cur(m),
                lambda r: r[R_SPACE] in (SPACE_DATA, SPACE_TMEM) and own_part_hidden(proc, r[R_OWNER], r[R_PART],
                                                                       not hidden_like_own_access(r[R_FLAGS]),
                                                                       releasing,
                                                                       bool(r[R_FLAGS] & F_WARPSYNCED)))
            release_mask = 0
        self._set_mb(w, m, s, old, op.span, what, release_mask, rdata, contributor=lanes)
        return True

    def mbar_arrival_findings(self, state: State, p: int) -> StepFindings | None:
        """What the step of process p's `mbarrier.arrive` (with or without expect_tx or drop) reports,
        asked without taking it; None where that is not known here (the step then decides).

        The step (op_arrive, then the local control flow to p's next instruction) reports, in this
        order: an operand that cannot be evaluated or is out of range (SV104, SV115, SV405, SV407:
        functions of (p, pc, variables), remembered with the operands; None where one is raised),
        the barrier's use (SV404 on an exited peer, SV401/SV402: _init_unordered), the counts
        (SV504: _arrival_count_error; SV503: rules.tx_out_of_range), the consumption rule (_unconsumed:
        the soft SV502 where the arrival completes the phase, the SV505 warning where it does not), the
        warning of a `.cta`-scope release into a peer's barrier that carries no data made elsewhere
        (SV602: _carries_cross_data), and at a phase completion the stale observations (SV501:
        _first_stale). Each answer here is those functions asked of the
        state, in the same order. None where the step does more that could report: a release by
        some lanes of a warp that publishes the other lanes' accesses under the warp-collective
        reading (the SV609 warning, and the reading recorded as used), a completion whose previous
        phase's observations are not all known by the phase or the arriving lanes (the step's
        releases decide), a process that ends where its exit may do more than end it
        (LifecycleOps.exit_is_silent), a loop hook. The arrival moves no other
        process: an mbarrier's waiters are asked again in the next state.

        The partial-order reduction asks this to learn that a step breaks no rule without computing
        its knowledge updates (Reduction._some_step_breaks_a_rule): on the 2x1 ping-pong GEMM the
        plain arrives so computed were set aside in most states."""
        pstate = state.procs[p]
        operands = self._arrival_operands(p, pstate)
        if operands is None:
            return None
        cta, m, count, nbytes, lanes, part, ends = operands
        proc = self.procs[p]
        op = self.programs[p].code[pstate[P_PC]].op
        remote = cta != proc.cta
        if remote and self._cta_exited(state, cta):
            return StepFindings("SV404", (), False)
        if self._init_unordered(state, m, lanes):
            return StepFindings("SV402" if remote else "SV401", (), False)
        mb = state.mbars[m]
        key = (count, nbytes, op.drop, mb)
        counted = self._arrival_counts.get(key)
        if counted is None:
            if len(self._arrival_counts) >= _ARRIVAL_COUNTS_KEPT:
                self._arrival_counts.clear()
            counted = self._arrival_counts[key] = self._arrival_counted(mb, count, nbytes, op.drop)
        if type(counted) is StepFindings:
            return counted
        soft, warns, completes = counted
        if op.sem == "release":
            if remote and op.scope == "cta" and not self._carries_cross_data(state.records, lanes, cta):
                warns = True
            if part != FULL and proc.nthreads > 1 and \
                    self.collective_release_reads(state.records, proc, part, self.holders.mb_cur(m)):
                return None  # (collective_release warns, SV609, and records the reading as used)
        if completes:
            # after the step's releases the phase knows what it knew and what the lanes knew
            last = mb[M_K] - 1
            observations = self._observations_through(state.records, m, last)
            if observations and self._first_stale(observations, last, self.holders.mb_cur(m) | lanes) is not None:
                return None
        if ends and not self.exit_is_silent(state, p):
            return None  # (its exit may complete a barrier or end the CTA: _exit decides)
        if not soft and not warns:
            return QUIET
        return StepFindings(None, soft, warns)

    def _arrival_counted(self, mb: tuple, count: int, nbytes: int | None, drop: bool
                         ) -> StepFindings | tuple[tuple[str, ...], bool, bool]:
        """What mbar_arrival_findings learns of an arrival's counts on barrier ``mb``: SV504 or SV503 as
        its answer, else the consumption rule's soft SV502 and SV505 warning and whether the arrival
        completes the phase. A function of its arguments alone, so the caller remembers it by them:
        a barrier's state and an arrive's counts recur over most of the states where the arrive is
        asked about (79,792 times in 40,000 states of the 1x2 ping-pong GEMM)."""
        s = self._rule_state(mb)
        if self._arrival_count_error(s, count, drop) is not None:
            return StepFindings("SV504", (), False)
        if nbytes is not None:
            if rules.tx_out_of_range(s.tx + nbytes):
                return StepFindings("SV503", (), False)
            s = (rules.mb_arrive_drop_expect_tx if drop else rules.mb_arrive_expect_tx)(s, nbytes, count)
        else:
            s = rules.mb_arrive_drop(s, count) if drop else rules.mb_arrive(s, count)
        # the consumption rule: its hazard where the arrival completes the phase (SV502), else its letter
        completes = s.k != mb[M_K]
        soft = ("SV502",) if self._unconsumed(mb) and completes else ()
        return soft, self._unconsumed(mb) and not completes, completes

    def arrive_counts(self, p: int, pstate: tuple) -> tuple[int, int | None]:
        """The arrival count and tx bytes (None without .expect_tx) of process p's arrive at its position,
        each scaled by the threads that execute it: every thread arrives. Raises what evaluating the
        operands raises (EvalError, Violation)."""
        ins = self.programs[p].code[pstate[P_PC]]
        op = ins.op
        env, ctx = self._env_at(p, pstate[P_VARS]), self.ctx[p]
        count = self._eval(op.count, env, ctx) * ins.threads
        return count, None if op.tx_bytes is None else self._eval(op.tx_bytes, env, ctx) * ins.threads

    def _arrival_operands(self, p: int, pstate: tuple) -> tuple[int, int, int, int | None, int, int, bool] | None:
        """The target CTA, barrier, arrival count and tx bytes (both scaled by the executing threads),
        lanes and part of process p's arrive, and whether the process ends after it; None where
        evaluating them or the control flow after it raises (the step reports that), or under a
        loop hook (its trip counts keep state of their own). A function of (p, pc, variables):
        remembered."""
        if self.loop_hook is not None:
            return None
        key = (p, pstate[P_PC], pstate[P_VARS])
        memo = self._arrival_memo
        operands = memo.get(key, memo)
        if operands is not memo:
            return operands  # type: ignore[return-value]
        ins = self.programs[p].code[pstate[P_PC]]
        op = ins.op
        try:
            env, ctx = self._env_at(p, pstate[P_VARS]), self.ctx[p]
            cta = self._target_cta(None, p, op.remote, env, ctx, op.span)
            self.check_local_form(op, cta, self.procs[p].cta)
            m = self._mbar(None, p, op.bar, cta, env, ctx)
            count, nbytes = self.arrive_counts(p, pstate)
            npc, _ = self._run_local(p, pstate[P_PC] + 1, pstate[P_VARS])
            ends = self.programs[p].code[npc].kind == END
        except Violation:
            operands = None
        else:
            operands = (cta, m, count, nbytes, self._lanes(p, ins), self._part(p, ins), ends)
        if len(memo) >= 1 << 16:
            memo.clear()
        memo[key] = operands
        return operands

    @staticmethod
    def check_local_form(op: ir.MbarArrive, cta: int, own: int) -> None:
        """SV407: `mbarrier.arrive.shared::cta` takes an address in the executing CTA's own shared
        memory (PTX: a .shared::cta address); a mapa'd address of a peer CTA's barrier is outside
        that window (TVM TIRx issue: the local form given the remote address)."""
        if op.local_form and cta != own:
            raise Violation("SV407", f"mbarrier.arrive.shared::cta on CTA {cta}'s barrier `{op.bar.name}` (a mapa "
                            f"address) from CTA {own}: the .shared::cta form takes only the executing CTA's "
                            "own shared-memory addresses (UB otherwise); use mbarrier.arrive.shared::cluster",
                            op.span)

    def op_tx(self, w, p, proc, op: ir.MbarTx, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        m = self._mbar(w, p, op.bar, cta, env, ctx)
        what = f"{op.kind}_tx"
        self._check_barrier_usable(w, p, m, lanes, op.span, what)
        nbytes = self._eval(op.tx_bytes, env, ctx) * ins.threads
        old = w.mbars[m]
        s = self._rule_state(old)
        if op.kind == "expect":
            self._tx_check(m, s.tx + nbytes, op.span)
            s = rules.mb_expect_tx(s, nbytes)
        else:
            self._tx_check(m, s.tx - nbytes, op.span)
            s = rules.mb_complete_tx(s, nbytes)
        self._set_mb(w, m, s, old, op.span, what, contributor=lanes)
        return True


HANDLERS: dict[type, Callable] = {
    ir.MbarTestWait: MbarrierOps.op_test_wait,
    ir.MbarInit: MbarrierOps.op_init,
    ir.MbarInval: MbarrierOps.op_inval,
    ir.MbarArrive: MbarrierOps.op_arrive,
    ir.MbarTx: MbarrierOps.op_tx,
    ir.MbarWait: MbarrierOps.op_wait,
}

