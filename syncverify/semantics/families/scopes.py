"""Scopes across CTAs (SV602): when a `.cta`-scope remote arrive carries data another CTA needs.

A remote `arrive` with the default `.release.cta` into a peer CTA's barrier is not morally strong with
the peer's acquire (PTX ISA §8.7), so it publishes nothing to that CTA. Each acquiring wait of the
phase it fed does not learn the other CTA's generic writes that only it would hand over (from what the
waiting lanes and the slot's accessors already know); whether that matters is decided at an access that
would need them, which is then the SV602 error (docs/model.md, "Scopes across CTAs"): the explicit
handlers (ScopeOps, a mixin of MbarrierOps) and the bmc encoding (ScopeEncoding, a mixin of
MbarrierEncoding) withhold the same writes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ... import ir
from ...diagnostics import Severity
from ...z3_lazy import z3
from ..core import Violation
from ..state import (
    F_INFLIGHT,
    F_SUPERSEDED,
    M_RDATA,
    R_AKNOWN,
    R_CTA,
    R_EPOCH,
    R_FLAGS,
    R_KIND,
    R_KNOWN,
    R_LINE,
    R_OBJ,
    R_OWNER,
    R_PART,
    R_REGION,
    R_SPACE,
    RD_CUR_LINE,
    SHADOW,
    SPACE_DATA,
    WRITE,
    generic_proxy_write,
    rdata_cta_line,
)
from .globalmem import GLOBAL_CTA

if TYPE_CHECKING:
    from .encoding.effects import Work
    from .encoding.events import Event


class ScopeOps:
    """Explicit-state SV602 handling (a mixin of MbarrierOps)."""

    def _crosses(self, r: tuple, bar_cta: int) -> bool:
        """Is record r a generic-proxy write made outside ``bar_cta`` (data that would cross CTAs)? A
        cp.async copy is one (F_GENERIC: "a weak memory operation performed in the generic proxy",
        PTX cp.async): once its issuer's group wait retired it, a `.cta`-scope remote release carries
        it as it carries a plain store (the CuTe DSL 2-CTA blockscale GEMM relay of SFA, CUTLASS
        PR #3647)."""
        return r[R_SPACE] == SPACE_DATA and r[R_KIND] == WRITE and generic_proxy_write(r[R_FLAGS]) \
            and r[R_OWNER] >= 0 and self.procs[r[R_OWNER]].cta != bar_cta

    def _check_cross_cta_release(self, w, p, m, op: ir.MbarArrive, lanes: int) -> int:
        """SV602: a release into a peer CTA's barrier. Returns the barrier's new rdata.

        A .cta-scope release that publishes generic data made outside the barrier's CTA is not
        reported here: the phase records the arrive's line (rdata_cta_line), each acquiring wait
        of the phase withholds what only this release would give it (_check_cta_scope_data,
        _learn_unpaired), and an access that needs such data is the error (_unpaired_race): only
        data a waiter learns through this phase, not already ordered before it by other
        synchronization, depends on the release that PTX does not pair with the waiter's acquire
        (docs/model.md, "Scopes across CTAs")."""
        carries_data = self._carries_cross_data(w.records, lanes, self.mb_names[m][0])
        rd = w.mbars[m][M_RDATA] | (1 if carries_data else 0)
        if op.scope == "cta":
            if carries_data:
                if not rdata_cta_line(rd, current=True):
                    rd |= op.span.line << RD_CUR_LINE
            else:
                w.warnings.append(self._reuse_warning(m, op.span))
        return rd

    def _carries_cross_data(self, records: tuple, lanes: int, bar_cta: int) -> bool:
        """Does a release by ``lanes`` into a barrier of CTA ``bar_cta`` carry generic data made
        outside that CTA (some such write known by one of the lanes)? Without it, a `.cta`-scope
        one only guards reuse (the SV602 warning: _check_cross_cta_release)."""
        return any(r[R_KNOWN] & lanes and self._crosses(r, bar_cta) for r in records)

    def _reuse_warning(self, m: int, span) -> Violation:
        return Violation("SV602", f"remote arrive on {self.mb_label(m)} uses the default .cta scope; it only guards "
                         "buffer reuse here, which CUTLASS relies on but PTX does not settle (prefer .release.cluster)",
                         span, severity=Severity.WARNING)

    def _settled(self, r: tuple) -> bool:
        """Does every thread that may ever access the slot of write r (r's CTA's copy of it) already
        know r (:func:`accessor_holders`)? Then no access that conflicts with r can be ordered after
        it only by an unpaired `.cta` edge: whoever could make one is ordered after r already,
        through other synchronization (by induction, edges the check has passed). DeepGEMM's sm90
        GEMM: the math warps write their CTA's B scales (`smem_sfb`) and pass a named barrier;
        nobody in the peer CTA touches them, so the `.cta`-scope remote release of the stage carries
        nothing a reader needs (docs/model.md, "Scopes across CTAs")."""
        mask = 0
        for p, part in accessor_holders(self, r[R_CTA], r[R_OBJ]):
            mask |= self.holders.lanes(p) if part else self.holders.leader(p)
        return (r[R_KNOWN] & mask) == mask

    def _check_cta_scope_data(self, w, m: int, cta: int, lanes: int, wait_line: int) -> tuple[int, tuple]:
        """SV602 at an acquiring wait of a phase that a .cta-scope remote release fed with data made
        outside this CTA. Returns (that arrive's line, the writes the waiting lanes learn only
        through it), for :meth:`_learn_unpaired` once the acquire is made; ((0, ()) where no such
        arrive fed the phase.) A write is learnt only through it when the lanes did not all know it
        before the wait and some thread that may access its slot does not know it yet
        (:meth:`_settled`): no other happens-before path (a cluster barrier both sides passed, a
        cluster-scope release/acquire chain) orders it before them. Whether that matters is not
        decided here but at an access that would need the edge (:meth:`_unpaired_race`); the wait
        warns that the arrive's scope is `.cta`. The phase's knowledge is the union of its
        arrivals', so the test is conservative where a cluster-scope release into the same phase
        carried the data."""
        line = rdata_cta_line(w.mbars[m][M_RDATA], current=False)
        if not line:
            return 0, ()
        span = self._arrive_spans[line]
        last = self.holders.mb_last(m)
        learnt = tuple(r for r in w.records if r[R_KNOWN] & last and (r[R_KNOWN] & lanes) != lanes
                       and self._crosses(r, cta) and not r[R_FLAGS] & F_SUPERSEDED and not self._settled(r))
        if learnt:
            w.warnings.append(Violation(
                "SV602", f"remote arrive on {self.mb_label(m)} uses the default .cta scope and hands over data made "
                f"in another CTA that the wait at line {wait_line} learns through no other synchronization; PTX "
                "orders it for no thread of this CTA (an access that needs it is the error; prefer "
                ".release.cluster)", span, severity=Severity.WARNING, related=((wait_line, "the wait"),)))
        else:
            w.warnings.append(self._reuse_warning(m, span))
        return line, learnt

    def _learn_unpaired(self, w, line: int, learnt: tuple, lanes: int) -> None:
        """After the acquire: the writes of :meth:`_check_cta_scope_data` are not known by the
        lanes that learnt them from the phase (the `.cta`-scope remote release and this acquire are
        not morally strong, PTX ISA §8.7: the edge orders nothing), and their shadows (state.SHADOW)
        are, so that an access that only this edge would order is named SV602 at that arrive
        (:meth:`_unpaired_race`). What the lanes knew before keeps its bits."""
        records = list(w.records)
        index = {r[:R_AKNOWN]: i for i, r in enumerate(records) if r[R_SPACE] == SPACE_DATA}
        for before in learnt:
            i = index.get(before[:R_AKNOWN])
            if i is None:
                continue
            r = records[i]
            new = lanes & ~before[R_KNOWN]
            records[i] = (*r[:R_AKNOWN], r[R_AKNOWN] & ~(lanes & ~before[R_AKNOWN]), r[R_KNOWN] & ~new)
            head = (*r[:R_KIND], SHADOW, r[R_OWNER], r[R_PART], line, 0, r[R_EPOCH], -1, r[R_REGION])
            j = index.get(head)
            if j is None:
                index[head] = len(records)
                records.append((*head, 0, r[R_KNOWN]))
            else:
                records[j] = (*head, 0, records[j][R_KNOWN] | r[R_KNOWN])
        w.records = tuple(records)

    def _unpaired_race(self, w, p: int, lanes: int, key: tuple, kind: int, r: tuple, span, what: str) -> None:
        """SV602 (raised) where an access by ``lanes`` of p that conflicts with write r, unordered
        with it, would be ordered after it by a `.cta`-scope cross-CTA release/acquire edge: r's
        shadow, which counts those edges, is known by all of the lanes (docs/model.md, "Scopes across
        CTAs"). Otherwise nothing: the race is named by the caller."""
        if r[R_KIND] != WRITE or r[R_FLAGS] & F_INFLIGHT:
            return
        for s in w.records:
            if s[R_KIND] == SHADOW and s[:4] == key and s[R_OWNER] == r[R_OWNER] and s[R_PART] == r[R_PART] \
                    and s[R_EPOCH] == r[R_EPOCH] and s[R_REGION] == r[R_REGION] and (s[R_KNOWN] & lanes) == lanes:
                arrive = self._arrive_spans[s[R_LINE]]
                access = "write" if kind == WRITE else "read"
                raise Violation(
                    "SV602", f"remote arrive at line {s[R_LINE]} publishes generic-proxy data to another CTA with a "
                    f".cta-scope release: the {what} of {self.slot_label(*key[1:])} by {self.proc_label(p)} at "
                    f"line {span.line} is ordered after the write at line {r[R_LINE]} by {self._owner_label(r)} "
                    "only through it, and PTX pairs that release with no acquire of another CTA (not morally "
                    "strong); use arrive.release.cluster", arrive,
                    related=((span.line, f"the {access} that needs it"), (r[R_LINE], "the write it hands over")),
                    procs=(r[R_OWNER],) if r[R_OWNER] >= 0 else ())


def slot_accessors(machine: Any, cta: int, buf: int) -> tuple[int, ...]:
    """The processes whose program names buffer ``buf`` in an operation that may reach CTA ``cta``'s
    copy of it: its own CTA's, or any CTA's when the operation names another CTA (a remote access, a
    multicast, a 2-SM form) or the buffer is global. Static, so it over-approximates (an operation
    never reached still counts). ``machine`` is the model (semantics.machine.Machine): its protocol,
    programs and processes; remembered on it per (cta, buf)."""
    memo = machine.__dict__.setdefault("_accessor_memo", {})
    key = (cta, buf)
    if key not in memo:
        name = machine.protocol.buffers[buf].name
        found = []
        for p, prog in enumerate(machine.programs):
            for ins in prog.code:
                op = getattr(ins, "op", None)
                if op is None or not dataclasses.is_dataclass(op) or not _names(op, name):
                    continue
                anywhere = cta == GLOBAL_CTA or getattr(op, "remote", None) is not None or \
                    getattr(op, "multicast", None) is not None or getattr(op, "cta_group", 1) == 2
                if anywhere or machine.procs[p].cta == cta:
                    found.append(p)
                    break
        memo[key] = tuple(found)
    return memo[key]


def accessor_holders(machine: Any, cta: int, buf: int) -> tuple[tuple[int, int], ...]:
    """The knowledge holders that must know a write of CTA ``cta``'s copy of buffer ``buf`` for a
    `.cta`-scope remote release of it to carry nothing a reader needs (the SV602 rule, docs/model.md
    "Scopes across CTAs"): for each process of :func:`slot_accessors`, its leader holder (part 0)
    and, when it has more than one thread, its other-lanes holder (part 1). A one-thread process
    has no other lanes, so that holder never learns anything and is not asked. Each engine reads its
    own copy of the holders (the explicit state's bits, the bmc encoding's bit-vectors, the Promela
    model's words) through these pairs, so all three decide SV602 by this one definition."""
    out: list[tuple[int, int]] = []
    for p in slot_accessors(machine, cta, buf):
        out.append((p, 0))
        if machine.procs[p].nthreads > 1:
            out.append((p, 1))
    return tuple(out)


def _names(op: object, name: str) -> bool:
    """Does operation ``op`` (an IR dataclass) reference a buffer called ``name`` in any field?"""
    for f in dataclasses.fields(op):  # type: ignore[arg-type]
        v = getattr(op, f.name)
        for x in (v if isinstance(v, tuple | list) else (v,)):
            if isinstance(x, ir.Ref) and x.name == name:
                return True
    return False


class ScopeEncoding:
    """The bmc engine's reading of a `.cta`-scope remote release at the acquiring wait (a mixin of
    MbarrierEncoding)."""

    def unpaired_data(self, w: Work, e: Event) -> Any:
        """ScopeOps._check_cta_scope_data: the records the waiting lanes would learn only through a
        `.cta`-scope remote release, which the acquire then does not give them
        (ScopeOps._learn_unpaired): on a barrier some .cta-scope remote arrive targets, when the
        observed phase got data from another CTA (rd_last), the live generic writes made outside the
        barrier's CTA that the phase knows and that some thread which may access their slot does not
        know yet (ScopeOps._settled, by :func:`accessor_holders`). An access that needs one of them
        is then a race here; its replay by the machine names it SV602. rd_last does not tell the
        scope of the release that brought the data, so on a barrier targeted by remote arrives of
        both scopes this holds back more than the machine does (a counterexample that needs it is
        then not reproduced: inconclusive, never safe)."""
        enc = self.enc
        if not enc.track_rdata or not any(x.cross_release and x.op.scope == "cta" and x.m == e.m
                                          for evs in enc.events for x in evs):
            return None
        published = enc.published(e)
        mask = enc._mask(published)
        if not mask:
            return None
        # the records every accessor of their slot knows already, grouped by slot (one set of holders each)
        by_slot: dict[tuple[int, int], int] = {}
        for r in published:
            cta, buf = enc.records[r].key[0], enc.records[r].key[1]
            by_slot[(cta, buf)] = by_slot.get((cta, buf), 0) | 1 << r
        settled = z3.BitVecVal(0, enc.R)
        for (cta, buf), bits in by_slot.items():
            known = z3.BitVecVal(bits, enc.R)
            for p, part in accessor_holders(enc.machine, cta, buf):
                known = known & w["K", enc.lanes_holder(p) if part else enc.leader(p)]
            settled = settled | known
        learnt = w["K", enc.last(e.m)] & w["live"] & z3.BitVecVal(mask, enc.R) & ~settled
        return z3.If(w["rd_last", e.m], learnt, z3.BitVecVal(0, enc.R))
