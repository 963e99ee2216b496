"""The semantics of non-bulk `cp.async`: the per-thread copy into shared memory, its groups
(`cp.async.commit_group` / `wait_group` / `wait_all`, handled with the other group kinds in
async_agents.py) and `cp.async.mbarrier.arrive[.noinc]`, the asynchronous arrive-on that follows
the thread's prior copies.

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec). The bmc engine encodes `cp.async` with the other asynchronous
accesses (async_agents.py) and refuses `cp.async.mbarrier.arrive` (``REFUSED``). The copy is
generic-proxy data (state.F_GENERIC); which `fence.proxy.async` makes it visible to the async proxy
is decided with the other proxy fences' rules, in proxy_fence.py, for both engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ... import ir
from .. import rules
from ..core import Violation, _Work
from ..state import (
    AG_CPARRIVE,
    F_ASYNC,
    F_GENERIC,
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

if TYPE_CHECKING:
    pass


def _is_open_copy(r: tuple, p: int) -> bool:
    """A cp.async write of process p that no group wait has retired yet."""
    grp = r[R_GRP]
    return r[R_SPACE] == SPACE_DATA and r[R_OWNER] == p and r[R_KIND] == WRITE and grp >= 0 \
        and grp % NUNITS == UNIT_CPASYNC


def _is_copy(r: tuple, p: int) -> bool:
    """A cp.async write of process p, open or already retired by one of p's group waits."""
    return r[R_SPACE] == SPACE_DATA and r[R_OWNER] == p and r[R_KIND] == WRITE and bool(r[R_FLAGS] & F_GENERIC)


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
            self._set_mb(w, m, rules.mb_pending_increment(s, ins.threads), old, op.span,
                         "cp.async.mbarrier.arrive", contributor=lanes)
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
