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
from typing import TYPE_CHECKING

from ... import ir
from .. import rules
from ..core import (
    Violation,
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
    carry_obs,
    hidden_like_own_access,
    rdata_shift,
    release,
    release_partial,
    shift_phase,
)
from .mbarrier_lifecycle import MbarrierLifecycleOps
from .mbarrier_wait import MbarrierWaitOps
from .scopes import ScopeOps

if TYPE_CHECKING:
    pass


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


HANDLERS: dict[type, Callable] = {
    ir.MbarTestWait: MbarrierOps.op_test_wait,
    ir.MbarInit: MbarrierOps.op_init,
    ir.MbarInval: MbarrierOps.op_inval,
    ir.MbarArrive: MbarrierOps.op_arrive,
    ir.MbarTx: MbarrierOps.op_tx,
    ir.MbarWait: MbarrierOps.op_wait,
}

