"""The semantics of memory accesses: slots of buffers, the race records (`_add_read`, `_add_write`) and the
conflict test between them (`_conflicts`). Records of one slot conflict only where their regions
overlap (`regions.Parts.overlap`: whole slot, a warp's part, or a byte range).

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from ..core import (
    Violation,
    _key_bounds,
    _Work,
)
from ..program import lanes_meet_unordered
from ..state import (
    F_ASYNC,
    F_GENERIC,
    F_INFLIGHT,
    F_LANESYNCED,
    F_REPEAT,
    F_SUPERSEDED,
    FULL,
    LEADER,
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
    R_SLOT,
    R_SPACE,
    READ,
    SHADOW,
    SPACE_DATA,
    SPACE_START,
    WRITE,
    generic_proxy_write,
    in_program_order_when_own,
)
from .encoding import DATA
from .encoding.events import Record, remote_target, static_value
from .regions import WHOLE, explicit, region_of

if TYPE_CHECKING:
    from .encoding.effects import Work
    from .encoding.events import Event
    from .encoding.layout import Encoding


class MemoryOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _slot(self, ref: ir.Ref, env, ctx) -> tuple[int, int]:
        buf = self.buf_index[ref.name]
        decl = self.protocol.buffers[buf]
        slot = 0
        if ref.index is not None:
            slot = self._eval(ref.index, env, ctx)
            if not 0 <= slot < (decl.slots or 1):
                raise Violation("SV104", f"index {slot} is out of range for `{ref.name}[{decl.slots}]`", ref.span)
        return buf, slot

    def _knows(self, records: tuple, key: tuple, mask: int) -> bool:
        """Do all holders in ``mask`` know the record with (space, cta, obj, slot) = key?

        Asked of init and CTA-start records (on every barrier use and every blocked wait), of
        which the records hold at most one per key: op_init drops a barrier's old init record
        before it adds the new one, and the start records are made once. A state's records are
        sorted, and the key sorts just before every record that begins with it, so bisection
        finds that record. Records that a step is changing may be out of order: where bisection
        does not land on the key, they are scanned."""
        i = bisect_left(records, key)
        if i < len(records) and records[i][:4] == key:
            return (records[i][R_KNOWN] & mask) == mask
        space, cta, obj, slot = key
        for r in records:
            # field by field, the space first (most records are data, not the key's), without slicing
            if r[R_SPACE] == space and r[R_OBJ] == obj and r[R_CTA] == cta and r[R_SLOT] == slot:
                return (r[R_KNOWN] & mask) == mask
        return True  # no such record: nothing to order after

    def _apart(self, r: tuple, p: int, region: int) -> bool:
        """Does record ``r`` touch no byte of ``region`` accessed by ``p``? (Never for whole slots.)"""
        if region == WHOLE and r[R_REGION] == WHOLE:
            return False
        size = self.protocol.buffers[r[R_OBJ]].bytes
        return not self.parts.overlap(r[R_REGION], r[R_OWNER], region, p, size)

    def _covered(self, r: tuple, p: int, region: int) -> bool:
        """Does a write of ``region`` by ``p`` overwrite every byte that record ``r`` touched?"""
        if region == WHOLE:
            return True
        return self.parts.covers(region, p, r[R_REGION], r[R_OWNER], self.protocol.buffers[r[R_OBJ]].bytes)

    def _conflicts(self, w: _Work, p: int, part: int, lanes: int, key: tuple, kind: int, span,
                   what: str, async_op: bool = False, region: int = WHOLE) -> None:
        """Check a new access against the live records of its slot (happens-before, §10.4)."""
        self.storage_access(w, p, lanes, key, region, span, what)  # bytes of a barrier (families/storage.py)
        space, cta, obj, slot = key
        lo, hi = _key_bounds(w, key)
        run = w.records[lo:hi]  # (the records in their order: a scan meets the key's as a scan of all would)
        for r in run:
            # (r[:4] != key, field by field without slicing: most records differ in the first test)
            if r[R_SLOT] != slot or r[R_OBJ] != obj or r[R_CTA] != cta or r[R_SPACE] != space or \
                    (r[R_KIND] == READ and kind == READ) or r[R_FLAGS] & F_SUPERSEDED or r[R_KIND] == SHADOW:
                continue
            if (self._ordered(r, p, part, lanes) and not self._lanes_unordered(r, p, part)) or \
                    self._apart(r, p, region):
                continue
            self._unpaired_race(w, p, lanes, key, kind, r, span, what)  # only a .cta-scope edge orders it: SV602
            self._raise_race(w, p, lanes, key, kind, r, span, what)
        if async_op:
            for r in run:
                if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj and r[R_CTA] == cta and \
                        r[R_SPACE] == space and generic_proxy_write(r[R_FLAGS]) and not r[R_FLAGS] & F_SUPERSEDED \
                        and (r[R_AKNOWN] & lanes) != lanes and not self._apart(r, p, region):
                    # A missing proxy fence: reported, and the search goes on as if it were there (the state
                    # the step reaches is the fenced one's), so what comes after it is reported too
                    # (docs/engines.md, "Findings that end a path").
                    if r[R_FLAGS] & F_GENERIC:  # a cp.async copy (families/cp_async.py)
                        how = (f"cp.async at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} wrote it through the "
                               "generic proxy, and no fence.proxy.async by a thread that had seen the copy complete "
                               "orders it before this read")
                        related = (r[R_LINE], "the unfenced cp.async write")
                    else:
                        how = (f"generic write at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} reaches it "
                               "through no fence.proxy.async covering the slot (the writer's before the "
                               "synchronization, or the reading thread's after it)")
                        related = (r[R_LINE], "the unfenced generic write")
                    w.soft.append(Violation("SV601", f"{what} reads {self.slot_label(*key[1:])} through the async "
                                            f"proxy, but the {how}", span, related=(related,)))
                    break

    @staticmethod
    def _lanes_unordered(r: tuple, p: int, part: int) -> bool:
        """An own generic access of other lanes of the warp that no syncwarp or barrier has ordered
        yet (program.lanes_meet_unordered): the other-lanes holder's knowledge does not cover it."""
        return not r[R_FLAGS] & (F_ASYNC | F_LANESYNCED) and lanes_meet_unordered(r[R_OWNER], r[R_PART], p, part)

    @staticmethod
    def _ordered(r: tuple, p: int, part: int, lanes: int) -> bool:
        if r[R_FLAGS] & F_INFLIGHT:
            return False
        if r[R_OWNER] == p and r[R_PART] == part and in_program_order_when_own(r[R_FLAGS], r[R_KIND]):
            return True  # program order (lanes of a whole-warp access touch their own part: language doc)
        return (r[R_KNOWN] & lanes) == lanes

    def _raise_race(self, w, p, lanes, key, kind, r, span, what) -> None:
        self.storage_unordered(r, what, p, span)  # an inval of a barrier in the slot: SV408 (families/storage.py)
        slot = self.slot_label(*key[1:])
        other = f"{'write' if r[R_KIND] == WRITE else 'read'} at line {r[R_LINE]} by {self._owner_label(r)}"
        if kind == WRITE and r[R_KIND] == WRITE:
            code, name = "SV303", "WAW"
        elif kind == WRITE:
            # A read of an epoch its reader had already consumed was waiting for this write (RAW);
            # otherwise the write came too early for a read that was due (WAR).
            code, name = ("SV301", "RAW") if r[R_FLAGS] & F_REPEAT else ("SV302", "WAR")
        else:
            code, name = ("SV302", "WAR") if self._read_intends_older(w, p, lanes, key, r) else ("SV301", "RAW")
        inflight = " (still in flight)" if r[R_FLAGS] & F_INFLIGHT else ""
        raise Violation(code, f"{name} race on {slot}: {what} by {self.proc_label(p)} is not ordered with the "
                        f"{other}{inflight}; no release/acquire chain, barrier or async-completion wait orders "
                        "them", span, related=((r[R_LINE], f"the other access ({other})"),),
                        procs=(r[R_OWNER],) if r[R_OWNER] >= 0 else ())

    def _read_intends_older(self, w: _Work, p: int, lanes: int, key: tuple, unordered_write: tuple) -> bool:
        """Was this read meant for an older write that the unordered one overwrote too early?"""
        known_epoch = max((r[R_EPOCH] for r in w.records if r[:4] == key and r[R_KIND] == WRITE
                           and self._ordered(r, p, LEADER if lanes == self.holders.leader(p) else FULL, lanes)),
                          default=0)
        last_read = max((r[R_EPOCH] for r in w.records if r[:4] == key and r[R_KIND] == READ and r[R_OWNER] == p),
                        default=0)
        return known_epoch > last_read and known_epoch < unordered_write[R_EPOCH]

    def _owner_label(self, r: tuple) -> str:
        who = self.proc_label(r[R_OWNER]) if r[R_OWNER] >= 0 else "an async agent"
        if r[R_FLAGS] & F_ASYNC:
            return f"the async operation issued by {who}"
        return who

    def _epoch(self, records: tuple, key: tuple) -> int:
        space, cta, obj, slot = key  # (r[:4] == key, field by field without slicing)
        return max((r[R_EPOCH] for r in records if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj
                    and r[R_CTA] == cta and r[R_SPACE] == space), default=0)

    def _add_read(self, w, p, part, lanes, key, line, flags=0, grp=-1, region=WHOLE) -> None:
        space, cta, obj, slot = key  # (r[:4] == key, field by field without slicing)
        records = w.records
        lo, hi = _key_bounds(w, key)  # only the key's run is searched and filtered
        run = records[lo:hi]
        epoch = max((r[R_EPOCH] for r in run if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj
                     and r[R_CTA] == cta and r[R_SPACE] == space and self._ordered(r, p, part, lanes)
                     and not self._apart(r, p, region)), default=0)
        repeat = 0
        keep = list(records[:lo])
        for r in run:
            if r[R_KIND] == READ and r[R_OWNER] == p and r[R_SLOT] == slot and r[R_OBJ] == obj and \
                    r[R_CTA] == cta and r[R_SPACE] == space and r[R_PART] == part and r[R_REGION] == region and \
                    not r[R_FLAGS] & F_ASYNC and not flags & F_ASYNC:
                if r[R_EPOCH] == epoch:
                    repeat = F_REPEAT
                continue  # subsumed by the new read of the same lanes
            keep.append(r)
        keep += records[hi:]
        if epoch == 0:
            repeat = F_REPEAT  # nothing was written yet: the read waits for a write to come
        known = 0 if flags & F_ASYNC else (lanes if part == LEADER else self.holders.lanes(p))
        keep.append((*key, READ, p, part, line, flags | repeat, epoch, grp, region, known, known))
        w.records = tuple(keep)

    def _add_write(self, w, p, part, lanes, key, line, flags=0, grp=-1, region=WHOLE) -> None:
        """A write record. ``grp`` >= 0: a cp.async write of that group tag, known to no one (not
        even its issuer) until a group wait or its cp.async.mbarrier.arrive orders it; the older
        records stay, since that arrive publishes the copy alone, not what its issuer knew."""
        records = w.records
        lo, hi = _key_bounds(w, key)  # only the key's run is searched and dropped
        run = records[lo:hi]
        epoch = self._epoch(run, key) + 1
        if flags & F_INFLIGHT or grp >= 0:
            keep = list(records)
            known = 0
        else:
            # Every older access is ordered before this write (checked), so none of the bytes it
            # overwrites can race with a later access that this write does not race with: the
            # records it covers are dropped (those of other parts of the slot stay). The latest
            # covered write is kept, marked superseded, only so that a late read that acquired
            # it is named WAR (it was meant for that write) rather than RAW, and so that a
            # release still publishes it (SV602).
            covered = [r for r in run if r[:4] == key and r[R_KIND] == WRITE and self._covered(r, p, region)]
            keep = [*records[:lo], *[r for r in run if r[:4] != key or not self._covered(r, p, region)],
                    *records[hi:]]
            for old in self._superseded(covered):
                keep.append((*old[:R_FLAGS], old[R_FLAGS] | F_SUPERSEDED, *old[R_FLAGS + 1:]))
            known = lanes if part == LEADER else self.holders.lanes(p)
        # a generic write (a cp.async copy included) is visible to the async proxy only after a fence.proxy.async
        aknown = 0 if generic_proxy_write(flags) else known
        keep.append((*key, WRITE, p, part, line, flags, epoch, grp, region, aknown, known))
        w.records = tuple(keep)

    @staticmethod
    def _superseded(covered: list[tuple]) -> list[tuple]:
        """The writes a new write keeps as superseded, of the older writes it covers: the latest
        one, or where parts of the slot were written separately (several live generic writes,
        no live copy), each of them, as MemoryEncoding.add_record keeps them."""
        latest = max(covered, default=None, key=lambda r: r[R_EPOCH])
        if latest is None or all(r[R_REGION] == WHOLE for r in covered):
            return [] if latest is None else [latest]
        live = [r for r in covered if not r[R_FLAGS] & F_SUPERSEDED]
        copies = [r for r in live if r[R_FLAGS] & F_ASYNC]
        return copies or live or [latest]

    def op_access(self, w, p, proc, op: ir.Access, ins, env, ctx, lanes) -> bool:
        if self.protocol.buffer(op.buf.name).space == "global":
            cta = -1  # globalmem.GLOBAL_CTA: one copy of a global buffer for the grid
        else:
            cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        if cta != proc.cta and cta >= 0:
            self._check_peer_alive(w, p, cta, op.span, f"{op.kind} of distributed shared memory")
            if not self._knows(w.records, (SPACE_START, cta, 0, 0), lanes):
                raise Violation("SV404", f"{op.kind} of CTA {cta}'s shared memory before anything shows that CTA "
                                "is running (PTX: make sure the peer's shared memory exists; use a cluster "
                                "barrier first)", op.span)
        buf, slot = self._slot(op.buf, env, ctx)
        key = (SPACE_DATA, cta, buf, slot)
        part = self._part(p, ins)
        kind = WRITE if op.kind == "write" else READ
        region = self._region(op, buf, env, ctx)
        self._conflicts(w, p, part, lanes, key, kind, op.span, op.kind, region=region)
        if kind == WRITE:
            self._add_write(w, p, part, lanes, key, op.span.line, region=region)
        else:
            self._add_read(w, p, part, lanes, key, op.span.line, region=region)
        return True

    def _region(self, op: ir.Access, buf: int, env, ctx) -> int:
        """The access's region (regions.py); an explicit range is evaluated and checked here."""
        region = region_of(op)
        if region is not None:
            return region
        assert op.lo is not None and op.hi is not None
        lo, hi = self._eval(op.lo, env, ctx), self._eval(op.hi, env, ctx)
        size = self.protocol.buffers[buf].bytes
        if not 0 <= lo < hi <= size:
            raise Violation("SV104", f"bytes {lo}..{hi} is not a non-empty range inside `{op.buf.name}`'s "
                            f"{size}-byte slots", op.span)
        return explicit(lo, hi)


HANDLERS: dict[type, Callable] = {
    ir.Access: MemoryOps.op_access,
}


class MemoryEncoding:
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step)."""

    def _apart(self, a: Any, b: Any) -> bool:
        """MemoryOps._apart for two static records of one slot: do their regions share no byte?"""
        if a.region == WHOLE and b.region == WHOLE:
            return False
        size = self.enc.machine.protocol.buffers[a.key[1]].bytes
        return not self.enc.machine.parts.overlap(a.region, a.owner, b.region, b.owner, size)

    def _covers(self, a: Any, b: Any) -> bool:
        """MemoryOps._covered: does a write of record a overwrite every byte of record b?"""
        if a.region == WHOLE:
            return True
        size = self.enc.machine.protocol.buffers[a.key[1]].bytes
        return self.enc.machine.parts.covers(a.region, a.owner, b.region, b.owner, size)

    def conflicts(self, w: Work, e: Event, key: tuple, kind: int, async_op: bool) -> list[tuple[str, Any]]:
        out = []
        mine = self.enc.records[e.record] if isinstance(e.op, ir.Access) and e.record >= 0 else None
        for r, rec in enumerate(self.enc.records):
            if rec.space != DATA or rec.key != key or rec.event is e or (rec.kind == 0 and kind == 0):
                continue
            if mine is not None and self._apart(mine, rec):
                continue
            # program order; a cp.async copy is ordered so for its lanes after their own wait retired it
            po = rec.owner == e.proc and rec.part == e.part and \
                (not rec.is_async or self.enc.lanewise.get(r, e.index) < e.index)
            ordered = z3.And(z3.Not(self.has(w["inflight"], r)), z3.Or(po, self.knows(w, r, e.lanes)))
            if not rec.is_async and rec.event is not None and \
                    lanes_meet_unordered(rec.owner, rec.part, e.proc, e.part) and \
                    not self.enc.lanes_synced(e.proc, rec.event.index, e.index):
                ordered = z3.BoolVal(False)  # (MemoryOps._lanes_unordered)
            out.append(("SV30x", z3.And(self.has(w["live"], r), z3.Not(ordered))))
            if async_op and rec.kind == 1 and (not rec.is_async or rec.generic):
                fenced = z3.And(*[self.has(w["A", h], r) for h in e.lanes])
                out.append(("SV601", z3.And(self.has(w["live"], r), z3.Not(fenced))))
        return out

    def add_record(self, w: Work, e: Event, kind: int) -> None:
        """Machine._add_write / _add_read for a generic access: a write makes every older record
        of its slot irrelevant (dropped there, cleared here) but keeps the latest older write,
        marked superseded, which a release on a peer's barrier still counts (SV602); a read
        replaces the same lanes' older reads of the slot."""
        enc = self.enc
        new = enc.records[e.record]
        mine = [r for r, rec in enumerate(enc.records) if rec.space == DATA and rec.key == e.key and r != e.record
                and (self._covers(new, rec) if kind == 1 else rec.region == new.region)]
        if kind == 1:
            older = enc._mask(mine)
            if enc.track_rdata:
                # The latest older write is the one issued last: the live generic write of the slot
                # (a generic write drops every older record it covers) unless a bulk copy issued
                # after it is live; where parts were written separately, every live one of them
                # (MemoryOps._superseded). Only a generic-proxy one can count, so only those are kept. A
                # cp.async copy counts (it is generic-proxy data) but drops nothing older: where it and an
                # older plain write are both live, both are kept — more than the machine keeps, so a
                # counterexample that needs the older one is not reproduced (inconclusive), never missed.
                generic = enc._mask(r for r in mine if enc.records[r].kind == 1
                                    and (not enc.records[r].is_async or enc.records[r].generic))
                copies = enc._mask(r for r in mine if enc.records[r].kind == 1 and enc.records[r].is_async
                                   and not enc.records[r].generic)
                zero = z3.BitVecVal(0, enc.R)
                latest = z3.If((w["live"] & z3.BitVecVal(copies, enc.R)) == 0,
                               w["live"] & z3.BitVecVal(generic, enc.R), zero) if generic else zero
                w["sup"] = (w["sup"] & ~z3.BitVecVal(older, enc.R)) | latest
        else:
            older = enc._mask(r for r in mine if enc.records[r].kind == 0 and enc.records[r].owner == e.proc
                              and enc.records[r].part == e.part and not enc.records[r].is_async)
        w["live"] = (w["live"] & ~z3.BitVecVal(older, enc.R)) | enc.bit(e.record)
        self.set_record(w, e.record, (e.creator,), (e.creator,) if kind == 0 else ())

    def ev_access(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `Access` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        op = e.op
        if e.remote:  # Machine.op_access on a peer's shared memory (DSMEM)
            hard.append(("SV404", enc.cta_done(w, e.cta)))
            hard.append(("SV404", z3.Not(self.knows(w, enc.start_record[e.cta], e.lanes))))
        kind = 1 if op.kind == "write" else 0
        hard += self.conflicts(w, e, e.key, kind, False)
        self.add_record(w, e, kind)
        return z3.BoolVal(True), False


EVENTS: dict[type, Callable] = {
    ir.Access: MemoryEncoding.ev_access,
}


# ------------------------------------------------------------------ bmc: the unrolled events
def setup_access(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_access's operands: the target CTA of a DSMEM access (SV405), the slot, the
    region of it (SV104 and the region checks), and the access's record."""
    mach = enc.machine
    op = e.op
    remote_target(enc, e, env, ctx)
    if e.error is not None:
        return
    slot, e.error = static_value(mach._slot, op.buf, env, ctx)
    if e.error is None:
        region, e.error = static_value(mach._region, op, slot[0], env, ctx)
    if e.error is None:
        e.key = (e.cta, *slot)
        e.record = enc._new_record(Record(DATA, e.key, 1 if op.kind == "write" else 0, e.proc, e.part, event=e,
                                          region=region))


def uses_access(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """A write writes its slot; a read reads it (reads are checked against writes only)."""
    return [(("key", e.key), "w" if e.op.kind == "write" else "r")] if e.key else []


SETUP: dict[type, Callable] = {ir.Access: setup_access}
USES: dict[type, Callable] = {ir.Access: uses_access}
