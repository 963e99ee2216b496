"""The semantics of mbarriers: init, inval, arrive (with expect_tx), expect_tx/complete_tx and the parity wait, with
their checks (usable barrier, consumption rule, phase observations, tx-count range).

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import z3

from ... import ir
from ...diagnostics import Severity
from ...expr import EvalError, evaluate
from .. import rules
from ..core import (
    Violation,
    _key_bounds,
    _new_tuple,
    _Work,
)
from ..program import own_part_hidden
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
    READ,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    SPACE_TMEM,
    WRITE,
    State,
    acquire,
    carry_obs,
    clear_bits,
    hidden_like_own_access,
    rdata_shift,
    release,
    release_partial,
    shift_phase,
)
from .encoding import INIT, OBS, Z3A
from .encoding.events import Record, remote_target, static_value
from .scopes import ScopeEncoding, ScopeOps

if TYPE_CHECKING:
    from .encoding.effects import Work
    from .encoding.events import Event
    from .encoding.layout import Encoding


def wait_commutes(mb: tuple, intended: int) -> bool:
    """Does a passing wait that means phase ``intended`` of barrier ``mb`` (as the wait finds it)
    commute with every other step (StepResult.lone, set by op_wait)? When it observes the last
    completed phase and another wait already observed that phase. A function of the barrier before
    the step, so a search may ask it without taking the step (Footprint.wait_cannot_be_lone)."""
    return intended == mb[M_K] - 1 and bool(mb[M_OBSERVED])


class MbarrierOps(ScopeOps):
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
        init_key = (SPACE_INIT, cta, m, 0)
        if not mb[M_VALID] or not self._knows(w.records, init_key, lanes):
            if remote:
                raise Violation("SV402", f"{what} on {self.mb_label(m)} in peer CTA {cta} may run before that "
                                "CTA's init of it is visible (needs init; fence.mbarrier_init; a cluster barrier "
                                "that both sides pass before the remote use)", span)
            state = "not initialized" if not mb[M_VALID] else "initialized, but nothing orders the init before it"
            raise Violation("SV401", f"{what} on {self.mb_label(m)}: the barrier is {state}", span)

    def _check_consumption(self, w: _Work, m: int, span, what: str) -> None:
        """§1.3 consumption rule (SV502): the previous phase must have been observed by a wait."""
        mb = w.mbars[m]
        if not mb[M_OBSERVED]:
            w.soft.append(Violation("SV502", f"{what} on {self.mb_label(m)} lands in phase {mb[M_K]} although no wait "
                            f"observed the completion of phase {mb[M_K] - 1} (PTX consumption rule)", span))

    def _set_mb(self, w: _Work, m: int, mb: rules.Mbar, old: tuple, release_mask: int = 0,
                rdata: int | None = None, contributor: int = 0) -> None:
        """Store a barrier after a rule was applied, with knowledge and phase bookkeeping.

        ``contributor``: the lanes whose step this is (0 for an async agent); what they have
        observed is causally before this contribution, whatever its memory semantics."""
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
        cta = self.mb_names[m][0]
        last = phase - 1
        cur = self.holders.mb_cur(m)
        # One pass finds both the stale observation (the first, in record order) and the observations
        # of earlier phases that are dropped; the records are copied only when some are dropped.
        drop = False
        for r in w.records:
            if r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m and r[R_CTA] == cta and r[R_SLOT] <= last:
                drop = True
                if r[R_SLOT] == last and not r[R_KNOWN] & cur:
                    raise Violation("SV501", f"the wait at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} for "
                                    f"phase {last} of {self.mb_label(m)} is not ordered before the completion of "
                                    f"phase {phase}: in another interleaving it runs after it, and its parity then "
                                    "names a later phase (stale waiter)", self._agent_span(r[R_LINE]),
                                    procs=(r[R_OWNER],))
        if drop:
            w.records = tuple([r for r in w.records if not (r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m
                                                            and r[R_CTA] == cta and r[R_SLOT] <= last)])

    @staticmethod
    def _rule_state(mb: tuple) -> rules.Mbar:
        # the first five fields of a state's barrier are rules.Mbar's (state.py), in its order
        return _new_tuple(rules.Mbar, mb[:5])

    def _tx_check(self, m: int, tx: int, span) -> None:
        if rules.tx_out_of_range(tx):
            raise Violation("SV503", f"tx-count of {self.mb_label(m)} would reach {tx}, outside ±(2^20-1)", span)

    def op_init(self, w, p, proc, op: ir.MbarInit, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        count = decl.count if op.count is None else self._eval(op.count, env, ctx)
        if not 1 <= count <= rules.MAX_COUNT:
            raise Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
        elems = range(decl.size or 1) if op.bar.every else None
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in elems] if elems is not None else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        part = self._part(p, ins)
        # One pass over the records for all targets (`init B[*]` of thousands of barriers stays linear);
        # the same records as one pass per target: the new init records carry no barrier bits.
        mask = 0
        for m in targets:
            if w.mbars[m][M_VALID]:
                raise Violation("SV403", f"init of {self.mb_label(m)}: it is still live (inval it first)", op.span)
            self.storage_init(w, p, lanes, m, op.span)  # bytes still in use as data (families/storage.py)
            if ins.threads > 1:
                # Every thread writes the same fresh state into a barrier no one uses yet: its state stays
                # well defined, so the search goes on past the finding (docs/engines.md, "Findings that end
                # a path") and reports what comes after it too.
                w.soft.append(Violation("SV403", f"init of {self.mb_label(m)}: {ins.threads} threads init it at "
                                        "once (wrap the init in `first thread`)", op.span))
            mb = rules.mb_init(count)
            w.mbars[m] = (mb.valid, mb.k, mb.pend, mb.exp, mb.tx, 1, (), 0)
            mask |= self.holders.mb_cur(m) | self.holders.mb_last(m)
        inited = set(targets)
        w.records = clear_bits(w.records, mask)
        w.records = tuple(r for r in w.records
                          if not (r[R_SPACE] in (SPACE_INIT, SPACE_OBS) and r[R_CTA] == proc.cta
                                  and r[R_OBJ] in inited and (r[R_SPACE] == SPACE_OBS or r[R_SLOT] == 0)))
        w.records = (*w.records, *((SPACE_INIT, proc.cta, m, 0, WRITE, p, part, op.span.line, 0, 0, -1, 0, 0, lanes)
                                   for m in targets))
        return True

    def op_inval(self, w, p, proc, op: ir.MbarInval, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in range(decl.size or 1)] if op.bar.every else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        for m in targets:
            self._check_barrier_usable(w, p, m, lanes, op.span, "inval")
            self.storage_inval(w, p, self._part(p, ins), lanes, m, op.span)  # (families/storage.py)
            mb = rules.mb_inval(self._rule_state(w.mbars[m]))
            w.mbars[m] = (mb.valid, *w.mbars[m][1:])
            w.records = tuple(r for r in w.records if r[:4] != (SPACE_INIT, proc.cta, m, 0))
        return True

    def op_arrive(self, w, p, proc, op: ir.MbarArrive, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        self.check_local_form(op, cta, proc.cta)
        m = self._mbar(w, p, op.bar, cta, env, ctx)
        what = "arrive_drop" if op.drop else "arrive"
        self._check_barrier_usable(w, p, m, lanes, op.span, what)
        self._check_consumption(w, m, op.span, what)
        count = self._eval(op.count, env, ctx) * ins.threads
        old = w.mbars[m]
        s = self._rule_state(old)
        if op.drop and count >= s.exp:
            raise Violation("SV504", f"arrive_drop of {count} on {self.mb_label(m)} takes its expected count "
                            f"{s.exp} to {s.exp - count} (UB at 0)", op.span)
        if rules.arrive_overflows(s, count):
            raise Violation("SV504", f"{count} arrival(s) on {self.mb_label(m)} but only {s.pend} pending in "
                            f"phase {s.k} (the extra ones would land in the next phase)", op.span)
        if op.tx_bytes is not None:
            nbytes = self._eval(op.tx_bytes, env, ctx) * ins.threads
            self._tx_check(m, s.tx + nbytes, op.span)
            s = (rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx)(s, nbytes, count)
        else:
            s = rules.mb_arrive_drop(s, count) if op.drop else rules.mb_arrive(s, count)
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
        self._set_mb(w, m, s, old, release_mask, rdata, contributor=lanes)
        return True

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
        self._set_mb(w, m, s, old, contributor=lanes)
        return True

    def _wait_blocked(self, state: State, p: int, ins, pstate: tuple) -> bool:
        """Fast path: a wait that would simply block (valid barrier, parity not passing, not
        stale). Anything else — including an expression that cannot be evaluated — goes
        through op_wait, which decides and reports."""
        key = (p, pstate[P_PC], pstate[P_VARS])
        target = self._wait_targets.get(key)
        if target is None:
            target = self._wait_targets[key] = self._wait_target(p, ins.op, pstate[P_VARS])
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
            self._check_cta_scope_data(w, m, proc.cta, lanes, op.span.line)
            if op.scope == "cta" and rdata & 2:
                # A warning, not an error: the release side is at .cluster scope here (a .cta one is
                # the error at the arrive), and CUTLASS's ClusterBarrier::wait acquires at the default
                # .cta scope on barriers its peers release at .cluster scope (docs/model.md, "Scopes").
                w.warnings.append(Violation(
                    "SV602", f"wait on {self.mb_label(m)} acquires generic-proxy data another CTA released into "
                    "it, with the default .cta scope; PTX's memory model pairs a release and an acquire only when "
                    "each scope includes the other thread, so prefer wait.acquire.cluster (CUTLASS relies on "
                    "the .cta form)", op.span, severity=Severity.WARNING))
            w.records = acquire(w.records, self.holders.mb_last(m), lanes)

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


HANDLERS: dict[type, Callable] = {
    ir.MbarTestWait: MbarrierOps.op_test_wait,
    ir.MbarInit: MbarrierOps.op_init,
    ir.MbarInval: MbarrierOps.op_inval,
    ir.MbarArrive: MbarrierOps.op_arrive,
    ir.MbarTx: MbarrierOps.op_tx,
    ir.MbarWait: MbarrierOps.op_wait,
}


class MbarrierEncoding(ScopeEncoding):
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step)."""

    def tx_check(self, tx: Any) -> Any:
        return rules.tx_out_of_range(tx, Z3A) if self.enc.tx_can_overflow else z3.BoolVal(False)

    def mbar(self, w: Work, m: int) -> rules.Mbar:
        return rules.Mbar(*(w[f, m] for f in rules.Mbar._fields))

    def usable(self, w: Work, m: int, lanes: tuple[int, ...]) -> Any:
        """Valid, and its init known by the lanes. On a path at most one init of a barrier runs
        (a second one on a valid barrier is SV403, and inval is unsupported), and the records of
        inits that have not run are known by nobody, so "some init record of it is known" is
        "the init is known"."""
        known = [self.knows(w, r, lanes) for r in self.enc.init_records[m]]
        return z3.And(w["valid", m] == 1, z3.Or(*known)) if known else z3.BoolVal(False)

    def use_barrier(self, w: Work, e: Event, m: int) -> list[tuple[str, Any]]:
        """Machine._check_barrier_usable: on a peer's barrier the peer must still be running
        (SV404) and its init visible (SV402); on the CTA's own, SV401."""
        cta = self.enc.machine.mb_names[m][0]
        ok = self.usable(w, m, e.lanes)
        if cta != e.own:
            return [("SV404", self.enc.cta_done(w, cta)), ("SV402", z3.Not(ok))]
        return [("SV401", z3.Not(ok))]

    def set_mb(self, w: Work, m: int, new: rules.Mbar, c: Any, release: tuple[int, ...] = (),
               contributor: tuple[int, ...] = (), carries: Any = None,
               hide: tuple[int, int] = (-1, 0)) -> list[tuple[str, Any]]:
        """Machine._set_mb: store the rule's result; on a phase completion check the
        observations of the previous phase (SV501), drop them, and shift the knowledge and the
        cross-CTA data flags (``carries``: this release brings data from another CTA)."""
        enc = self.enc
        old_k = w["k", m]
        cur, last = enc.cur(m), enc.last(m)
        if release:
            self.release(w, release, cur, c, hide=hide)
        if contributor:
            self.carry_obs(w, contributor, (cur,), c)
        changed = z3.And(c, new.k != old_k)
        hard = []
        kill = z3.BitVecVal(0, enc.R)
        for r in enc.obs_of[m]:
            alive = z3.And(self.has(w["live"], r), w["phase", r] == old_k - 1)
            hard.append(("SV501", z3.And(changed, alive, z3.Not(self.has(w["K", cur], r)))))
            kill = kill | z3.If(z3.And(changed, w["phase", r] <= old_k - 1), enc.bit(r), z3.BitVecVal(0, enc.R))
        w["live"] = w["live"] & ~kill
        self.shift(w, cur, last, changed)
        w.cond(changed, ("observed", m), z3.BoolVal(False))
        if enc.track_rdata:
            rd = w["rd_cur", m] if carries is None else z3.Or(w["rd_cur", m], carries)
            w.cond(c, ("rd_cur", m), rd)
            w.cond(changed, ("rd_last", m), rd)
            w.cond(changed, ("rd_cur", m), z3.BoolVal(False))
        for f, value in zip(rules.Mbar._fields, new, strict=True):
            w.cond(c, (f, m), value)
        return hard

    def carries_data(self, w: Work, e: Event) -> Any:
        """Machine._check_cross_cta_release: some generic write by another CTA than the barrier's,
        still recorded (live, or kept as superseded), is known by one of the arriving lanes."""
        enc = self.enc
        known = self.union(w, "K", e.lanes) & (w["live"] | w["sup"])
        mask = enc._mask(enc.published(e))
        return (known & z3.BitVecVal(mask, enc.R)) != 0 if mask else z3.BoolVal(False)

    def wait(self, w: Work, e: Event, hard: list, soft: list) -> Any:
        """Machine.op_wait (on the CTA's own barrier). Returns when the wait can move (pass, or
        break a rule)."""
        m, p = e.m, e.proc
        usable = self.usable(w, m, e.lanes)
        s = self.mbar(w, m)
        hist, jprev = w["hist", m, p], w["jprev", m, p]
        first = rules.first_wait_phase(s.k, e.parity, Z3A)
        intended = z3.If(hist, rules.intended_phase(jprev, e.parity, Z3A), first)
        jprev = z3.If(hist, jprev, self.enc.num(-1))
        aliases = rules.wait_aliases(s, intended)
        passes = rules.mb_wait_passes(s, e.parity, Z3A)
        hard.append(("SV401", z3.Not(usable)))
        hard.append(("SV501", z3.And(usable, aliases)))
        # (a .cta-scope acquire of data another CTA released into the observed phase is the SV602
        # warning of Machine.op_wait: warnings are not modelled)
        observed_phase = s.k - 1
        means_it = intended == observed_phase
        new_j = z3.If(z3.And(means_it, observed_phase > jprev), observed_phase, jprev)
        w["hist", m, p] = z3.BoolVal(True)
        w["jprev", m, p] = new_j
        w["observed", m] = z3.Or(w["observed", m], means_it)
        r = e.record
        # the observation record (replacing this process's older one of the same phase)
        same = self.enc._mask(x for x in self.enc.obs_of[m] if self.enc.records[x].owner == p and x != r)
        for x in self.enc.obs_of[m]:
            if same >> x & 1:
                drop = z3.And(means_it, w["phase", x] == observed_phase)
                w["live"] = w["live"] & z3.If(drop, ~self.enc.bit(x), z3.BitVecVal(-1, self.enc.R))
        w.cond(means_it, "live", w["live"] | self.enc.bit(r))
        w.cond(means_it, ("phase", r), observed_phase)
        self.set_record(w, r, e.lanes, e.lanes, means_it)
        if e.op.sem == "acquire":
            soft.append(("SV602", self.cta_scope_data(w, e)))
            self.acquire(w, self.enc.last(m), e.lanes)
        else:
            self.carry_obs(w, (self.enc.last(m),), e.lanes)
        return z3.Or(z3.Not(usable), aliases, passes)

    def ev_init(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `MbarInit` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        # Machine.op_init. It also resets the barrier's knowledge, observations and flags; on a
        # path they are all still fresh here: only a use of the barrier changes them, a use
        # needs a valid barrier (SV401/SV402), and a barrier is valid only after an init —
        # after which this one is SV403 (inval is unsupported).
        hard.append(("SV403", z3.BoolVal(e.threads > 1)))
        for m, rec in zip(e.targets, e.inits, strict=True):
            hard.append(("SV403", w["valid", m] == 1))
            for f, value in zip(rules.Mbar._fields, rules.mb_init(e.count), strict=True):
                w[f, m] = enc.num(value)
            self.set_record(w, rec, e.lanes, ())
        return z3.BoolVal(True), False

    def ev_arrive(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `MbarArrive` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        op = e.op
        m = e.m
        hard += self.use_barrier(w, e, m)
        soft.append(("SV502", z3.Not(w["observed", m])))
        s = self.mbar(w, m)
        if op.drop:
            hard.append(("SV504", e.count >= s.exp))
        hard.append(("SV504", rules.arrive_overflows(s, e.count)))
        if e.nbytes is not None:
            hard.append(("SV503", self.tx_check(s.tx + enc.tx(e))))
            rule = rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx
            new = rule(s, enc.tx(e), e.count, Z3A)
        else:
            new = (rules.mb_arrive_drop if op.drop else rules.mb_arrive)(s, e.count, Z3A)
        release = e.lanes if op.sem == "release" else ()
        carries = None
        if e.cross_release:
            carries = self.carries_data(w, e)  # (a .cta-scope one is judged at the acquiring waits: wait)
        hard += self.set_mb(w, m, new, z3.BoolVal(True), release, e.lanes, carries,
                            hide=(enc.lanes_holder(e.proc), e.hide))
        dynamic.append((("m", m), new.pend <= 0))
        return z3.BoolVal(True), False

    def ev_tx(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `MbarTx` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        op = e.op
        m = e.m
        hard += self.use_barrier(w, e, m)
        s = self.mbar(w, m)
        if op.kind == "expect":
            hard.append(("SV503", self.tx_check(s.tx + enc.tx(e))))
            new = rules.mb_expect_tx(s, enc.tx(e), Z3A)
        else:
            hard.append(("SV503", self.tx_check(s.tx - enc.tx(e))))
            new = rules.mb_complete_tx(s, enc.tx(e), Z3A)
        hard += self.set_mb(w, m, new, z3.BoolVal(True), (), e.lanes)
        dynamic.append((("m", m), new.pend <= 0))
        return z3.BoolVal(True), False

    def ev_wait(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `MbarWait` (Step.event). Returns (can move, places its own pc)."""
        enabled = self.wait(w, e, hard, soft)
        return enabled, False


EVENTS: dict[type, Callable] = {
    ir.MbarInit: MbarrierEncoding.ev_init,
    ir.MbarArrive: MbarrierEncoding.ev_arrive,
    ir.MbarTx: MbarrierEncoding.ev_tx,
    ir.MbarWait: MbarrierEncoding.ev_wait,
}


# ------------------------------------------------------------------ bmc: the unrolled events
def setup_init(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_init's operands, evaluated once (the same helpers, so the same errors): the
    count (SV105) and the barrier or every element of it, each with its init record."""
    mach = enc.machine
    op = e.op
    decl = mach.mb_decl[op.bar.name]
    count, e.error = (decl.count, None) if op.count is None else static_value(mach._eval, op.count, env, ctx)
    if e.error is None and not 1 <= count <= rules.MAX_COUNT:
        e.error = Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
    e.count = count or 0
    if op.bar.every:
        e.targets = tuple(mach.mb_index[(e.own, op.bar.name, i)] for i in range(decl.size or 1))
    elif e.error is None:
        m, e.error = static_value(mach._mbar, None, e.proc, op.bar, e.own, env, ctx)
        e.targets = (m,) if m is not None else ()
    if e.error is None:
        e.inits = tuple(enc._new_record(Record(INIT, (m,), 1, e.proc, e.part, event=e)) for m in e.targets)


def setup_use(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_arrive / op_tx / op_wait's operands: the target CTA of a remote form (SV405, and
    the local form on a peer's barrier, SV407), the barrier, the count and bytes scaled by the
    executing threads, a wait's parity with its observation record."""
    mach = enc.machine
    op = e.op
    if not isinstance(op, ir.MbarWait):
        remote_target(enc, e, env, ctx)
        if e.error is None and isinstance(op, ir.MbarArrive) and op.local_form and e.remote:
            _, e.error = static_value(mach.check_local_form, op, e.cta, e.own)  # SV407
        if e.error is not None:
            return
    e.m, e.error = static_value(mach._mbar, None, e.proc, op.bar, e.cta, env, ctx)
    if e.error is None and isinstance(op, ir.MbarArrive):
        count, e.error = static_value(mach._eval, op.count, env, ctx)
        e.count = (count or 0) * e.threads
    if e.error is None and not isinstance(op, ir.MbarWait) and op.tx_bytes is not None:
        nbytes, e.error = static_value(mach._eval, op.tx_bytes, env, ctx)
        e.nbytes = (nbytes or 0) * e.threads
    if e.error is None and isinstance(op, ir.MbarWait):
        e.parity, e.error = static_value(mach._eval, op.parity, env, ctx)
        e.record = enc._new_record(Record(OBS, (e.m,), 0, e.proc, e.part, event=e))


def uses_init(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """An init writes each barrier it initializes (Encoding.objects)."""
    return [(("m", m), "w") for m in e.targets]


def uses_barrier(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """A wait reads its barrier, an arrive or tx operation adds to it or writes it
    (Encoding.adds_to); a release on a peer's barrier reads every slot whose writes it may
    publish (SV602)."""
    if e.m < 0:
        return []
    mode = "r" if isinstance(e.op, ir.MbarWait) else "a" if enc.adds_to(e) else "w"
    out = [(("m", e.m), mode)]
    if e.cross_release:
        out += [(("key", enc.records[r].key), "r") for r in enc.published(e)]
    return out


def adds(enc: Encoding, e: Event) -> bool:
    """An arrive (not a drop) or a tx operation adds to its barrier while the tx-count cannot
    leave its range (Encoding.adds_to gives the argument)."""
    return not (isinstance(e.op, ir.MbarArrive) and e.op.drop) and not enc.tx_can_overflow


# per operation type: its set-up, its uses of shared objects, whether it only adds to them
SETUP: dict[type, Callable] = {ir.MbarInit: setup_init, ir.MbarArrive: setup_use, ir.MbarTx: setup_use,
                               ir.MbarWait: setup_use}
USES: dict[type, Callable] = {ir.MbarInit: uses_init, ir.MbarArrive: uses_barrier, ir.MbarTx: uses_barrier,
                              ir.MbarWait: uses_barrier}
ADDS: dict[type, Callable] = {ir.MbarArrive: adds, ir.MbarTx: adds}
# operations the bmc encoding refuses, and why
REFUSED: dict[type, str] = {
    ir.MbarInval: "`inval` (mbarrier.inval: a barrier's lifecycle after an inval, and a re-init, are not encoded)",
    ir.MbarTestWait: "`test_wait` (a non-blocking wait whose effect depends on the phase is not encoded)",
    ir.MbarProbe: "`if try_wait`/`if test_wait` (a branch on a probe's result: the encoding has one fixed "
                  "sequence of operations per process)",
}
