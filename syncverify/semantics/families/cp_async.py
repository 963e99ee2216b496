"""The semantics of non-bulk `cp.async`: the per-thread copy into shared memory, its groups
(`cp.async.commit_group` / `wait_group` / `wait_all`, handled with the other group kinds in
async_agents.py) and `cp.async.mbarrier.arrive[.noinc]`, the asynchronous arrive-on that follows
the thread's prior copies.

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec). The bmc engine encodes `cp.async` with the other asynchronous
accesses (async_agents.py) and refuses `cp.async.mbarrier.arrive` (``REFUSED``). The copy is
generic-proxy data (state.F_GENERIC); which `fence.proxy.async` makes it visible to the async proxy
is decided here for both engines (``fence_copies``, ``fence_copies_encoded``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import z3

from ... import ir
from .. import rules
from ..core import Violation, _Work
from ..state import (
    AG_CPARRIVE,
    F_ASYNC,
    F_GENERIC,
    F_WARPSYNCED,
    FULL,
    LEADER,
    NUNITS,
    P_CPASYNC,
    R_AKNOWN,
    R_CTA,
    R_EPOCH,
    R_FLAGS,
    R_GRP,
    R_KIND,
    R_KNOWN,
    R_OBJ,
    R_OWNER,
    R_PART,
    R_SLOT,
    R_SPACE,
    SPACE_DATA,
    UNIT_CPASYNC,
    WRITE,
    carry_obs,
)
from .encoding import DATA

if TYPE_CHECKING:
    from ...engines.bmc import Encoding, Event, Work


def _is_open_copy(r: tuple, p: int) -> bool:
    """A cp.async write of process p that no group wait has retired yet."""
    grp = r[R_GRP]
    return r[R_SPACE] == SPACE_DATA and r[R_OWNER] == p and r[R_KIND] == WRITE and grp >= 0 \
        and grp % NUNITS == UNIT_CPASYNC


def _is_copy(r: tuple, p: int) -> bool:
    """A cp.async write of process p, open or already retired by one of p's group waits."""
    return r[R_SPACE] == SPACE_DATA and r[R_OWNER] == p and r[R_KIND] == WRITE and bool(r[R_FLAGS] & F_GENERIC)


def fence_copies(records: tuple, p: int, lanes: int) -> tuple:
    """`fence.proxy.async` by the lanes ``lanes`` of process p, for cp.async copies (AsyncAgentOps.op_fence
    does the fencing thread's own generic writes): a copy is fenced by any thread that has seen it
    complete — its issuer after the group wait that retired it, or a thread that acquired it through a
    barrier (the mbarrier phase a cp.async.mbarrier.arrive completed) — so what the fencing lanes know
    of it becomes async-known to them. PTX "Proxy-preserved base causality order" asks for the proxy
    fence "along the base causality path" from the write to the read, and the copy's completion is
    where that path leaves the copy (docs/model.md, "cp.async and the async proxy"); a fence before
    the completion is seen fences nothing. An own copy of more lanes than fence counts only once a
    syncwarp after their waits made every lane hold it whole (F_WARPSYNCED)."""
    out = None
    for i, r in enumerate(records):
        gain = r[R_KNOWN] & lanes & ~r[R_AKNOWN]
        if gain and r[R_FLAGS] & F_GENERIC and r[R_KIND] == WRITE and (r[R_OWNER] != p or r[R_FLAGS] & F_WARPSYNCED):
            if out is None:
                out = list(records)
            out[i] = (*r[:R_AKNOWN], r[R_AKNOWN] | gain, r[R_KNOWN])
    return records if out is None else tuple(out)


def fence_copies_encoded(w: Work, enc: Encoding, e: Event, own: int) -> None:
    """fence_copies for the bmc engine: the cp.async records (not in ``own``, the thread's own writes
    AsyncAgentEncoding.ev_fence fences already) that the fence covers become async-known to each
    fencing lane's holder that knows them — another thread's, or the thread's own once a syncwarp
    after the wait that retired them lane by lane (program order stands for F_WARPSYNCED)."""
    p = e.proc
    syncs = [x.index for x in enc.events[p][:e.index] if isinstance(x.op, ir.Syncwarp)]
    seen = enc._mask(r for r, rec in enumerate(enc.records)
                     if rec.space == DATA and rec.generic and rec.kind == 1 and not own >> r & 1
                     and (rec.owner != p or any(i > enc.lanewise.get(r, e.index) for i in syncs)))
    if seen:
        mask = z3.BitVecVal(seen, enc.R)
        for h in e.lanes:
            w["A", h] = w["A", h] | (w["K", h] & mask)


class CpAsyncOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def op_cp_async(self, w, p, proc, op: ir.CpAsync, ins, env, ctx, lanes) -> bool:
        """`cp.async.ca/.cg.shared.global` (PTX "cp.async"): each executing thread starts a weak
        write of its part of the slot. No ordering holds for it, not even with the issuing
        thread's own later accesses, until `cp.async.wait_group`/`wait_all` retires its group in
        that thread (op_group_wait) or its `cp.async.mbarrier.arrive` arrives. It belongs to
        the thread's open cp.async group. PTX: "cp.async is treated as a weak memory operation
        performed in the generic proxy": the record is F_GENERIC, generic-proxy data for the proxy
        rule (an async-proxy read of it needs a fence.proxy.async after its completion, SV601) and
        for the scope rule (SV602)."""
        buf, slot = self._slot(op.buf, env, ctx)
        key = (SPACE_DATA, proc.cta, buf, slot)
        part = self._part(p, ins)
        self._conflicts(w, p, part, lanes, key, WRITE, op.span, "cp.async write")
        seq = w.procs[p][P_CPASYNC]
        self._add_write(w, p, part, lanes, key, op.span.line, F_ASYNC | F_GENERIC,
                        grp=NUNITS * seq + UNIT_CPASYNC)
        return True

    def op_cp_async_arrive(self, w, p, proc, op: ir.CpAsyncArrive, ins, env, ctx, lanes) -> bool:
        """`cp.async.mbarrier.arrive{.noinc}.shared::cta.b64 [bar]`: per executing thread, an
        arrive-on of the barrier "triggered ... after the completion of all prior cp.async
        operations initiated by the executing thread". Without .noinc "the pending count ... is
        incremented by 1 prior to the asynchronous mbarrier.arrive", here at issue, so the async
        arrive-on nets zero in its phase; with .noinc it counts towards the phase.

        The agents (one per thread) name the copies they cover by (CTA, buffer, slot, write
        epoch): those still open now. An elected lane's arrive covers only that lane's copies."""
        m = self._mbar(w, p, op.bar, proc.cta, env, ctx)
        self._check_barrier_usable(w, p, m, lanes, op.span, "cp.async.mbarrier.arrive")
        part = self._part(p, ins)
        covered = tuple(sorted((r[R_CTA], r[R_OBJ], r[R_SLOT], r[R_EPOCH]) for r in w.records
                               if _is_open_copy(r, p) and (part == FULL or r[R_PART] == LEADER)))
        if not op.noinc:
            old = w.mbars[m]
            s = self._rule_state(old)
            if s.pend + ins.threads > rules.MAX_COUNT:
                raise Violation("SV504", f"cp.async.mbarrier.arrive increments the pending count of "
                                f"{self.mb_label(m)} past 2^20-1 (UB)", op.span)
            self._set_mb(w, m, rules.mb_pending_increment(s, ins.threads), old, contributor=lanes)
        else:
            # What the thread has observed is causally before its arrive-on, which lands in this
            # phase unless the phase completes without it (a count that does not plan for it).
            w.records = carry_obs(w.records, lanes, self.holders.mb_cur(m))
        seq = sum(1 for a in w.agents if a[0] == AG_CPARRIVE and a[6] == p)
        for _ in range(ins.threads):  # one async arrive-on per executing thread; identical agents merge
            w.agents.append((AG_CPARRIVE, proc.cta, 0, 0, m, seq, p, op.span.line, covered))
        return True

    def _complete_cp_arrive(self, w: _Work, a: tuple) -> None:
        """The asynchronous arrive-on of one thread of a `cp.async.mbarrier.arrive`: its copies
        have completed, and PTX makes them "performed and visible" to the threads that observe
        the phase (ptx-semantics §1.4). The copies of a whole-warp record are released with the
        warp's last agent (before it, some lanes' parts may still be in flight), then arrive(1)
        (AsyncAgentOps._agent_arrive).

        The copies published are those the issue covered, whether or not a group wait of the
        issuer has retired them since: PTX triggers the arrive-on "upon the completion of all
        prior cp.async operations initiated by the executing thread", and a later
        `cp.async.wait_group`/`wait_all` only adds the issuer's own ordering — it cannot take the
        arrive-on's publication back. They become known to the phase, not async-known: the copy
        is generic-proxy data, and an async-proxy reader still needs a fence.proxy.async after
        observing the phase (op_fence)."""
        _, _, _, _, m, _, issuer, line, covered = a

        def publish() -> None:
            if a in w.agents or not covered:
                return
            cur = self.holders.mb_cur(m)
            out = []
            for r in w.records:
                if _is_copy(r, issuer) and (r[R_CTA], r[R_OBJ], r[R_SLOT], r[R_EPOCH]) in covered:
                    r = (*r[:R_AKNOWN], r[R_AKNOWN], r[R_KNOWN] | cur)
                out.append(r)
            w.records = tuple(out)

        what = "cp.async.mbarrier.arrive"
        self._agent_arrive(w, m, self._agent_span(line), (what, what, what), publish)

HANDLERS: dict[type, Callable] = {
    ir.CpAsync: CpAsyncOps.op_cp_async,
    ir.CpAsyncArrive: CpAsyncOps.op_cp_async_arrive,
}


# operations the bmc encoding refuses, and why
REFUSED: dict[type, str] = {
    ir.CpAsyncArrive: "`cp.async.mbarrier.arrive` (its asynchronous arrivals are not encoded)",
}
