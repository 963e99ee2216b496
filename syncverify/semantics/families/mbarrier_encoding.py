"""The bmc engine's Z3 encoding of the mbarrier family: the same rules as the explicit handlers
(mbarrier.py, mbarrier_wait.py, mbarrier_lifecycle.py), over symbolic state, and the set-up of
each unrolled event's operands through the machine's own helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from .. import rules
from ..core import (
    Violation,
)
from .encoding import INIT, OBS, Z3A
from .encoding.events import Record, remote_target, static_value
from .scopes import ScopeEncoding

if TYPE_CHECKING:
    from .encoding.effects import Work
    from .encoding.events import Event
    from .encoding.layout import Encoding



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
               hide: tuple[int, int] = (-1, 0), soft: list | None = None) -> list[tuple[str, Any]]:
        """Machine._set_mb: store the rule's result; on a phase completion check the
        observations of the previous phase (SV501), drop them, and shift the knowledge and the
        cross-CTA data flags (``carries``: this release brings data from another CTA). A completion
        of a phase whose previous phase no wait observed is appended to ``soft`` (SV502, the
        consumption rule's hazard; its letter alone, the explicit engine's SV505 warning, is not
        encoded: this engine answers the error only)."""
        enc = self.enc
        old_k = w["k", m]
        cur, last = enc.cur(m), enc.last(m)
        if release:
            self.release(w, release, cur, c, hide=hide)
        if contributor:
            self.carry_obs(w, contributor, (cur,), c)
        changed = z3.And(c, new.k != old_k)
        if soft is not None:
            soft.append(("SV502", z3.And(changed, z3.Not(w["observed", m]))))
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
            self.acquire(w, self.enc.last(m), e.lanes, withheld=self.unpaired_data(w, e))
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
                            hide=(enc.lanes_holder(e.proc), e.hide), soft=soft)
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
        hard += self.set_mb(w, m, new, z3.BoolVal(True), (), e.lanes, soft=soft)
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
