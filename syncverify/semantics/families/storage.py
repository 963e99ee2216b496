"""The semantics of barrier storage: an mbarrier whose bytes lie in a buffer slot (`mbarrier B in buf[s] at
OFF;`, docs/language.md §3.4), data before its `init` and after its `inval`, a barrier in between.

PTX (mbarrier.inval): "An mbarrier object must be invalidated before the memory is used for any other
purpose", and `mbarrier.init` on memory that holds a valid mbarrier is undefined. The rules, each defined
here once and checked by the explicit machine (and through it by the all-iterations lift):

* SV408 — the bytes are used as data while the barrier is live (initialised and not invalidated), or by an
  access that happens-before does not order after the `inval` (docs/model.md, "Happens-before": the
  same knowledge that names races). An `inval` leaves a write record of the barrier's bytes in the slot
  (flag ``F_MBAR``), which a later data access must know, as it must know an earlier write.
* SV409 — the lifetime itself is broken: an `init` of bytes still used as data (an access of them that
  the init's lanes do not know: a copy in flight into them, a read or write not ordered before the
  init), or an `inval` while arrivals may still come (a copy in flight that completes on the barrier, a
  pending transaction count). An arrive or wait after the `inval` is SV401, as on any invalid barrier.

A data access unordered with an `init` is SV409 whichever of the two runs first (at the access the
barrier is live, but the access does not know the init), so the finding does not depend on the
interleaving a reduction explores.

The explicit handlers form a mixin that ``Machine`` inherits; MbarrierOps.op_init/op_inval and
MemoryOps._conflicts call them.
"""

from __future__ import annotations

from ... import ir
from ..core import Violation, _key_bounds, _Work
from ..state import (
    F_INFLIGHT,
    F_MBAR,
    M_TX,
    M_VALID,
    R_FLAGS,
    R_KIND,
    R_KNOWN,
    R_LINE,
    R_OWNER,
    R_REGION,
    SHADOW,
    SPACE_DATA,
    SPACE_INIT,
    WRITE,
)
from .regions import explicit

MBAR_BYTES = 8  # an mbarrier object is a .b64


def storage_of(protocol: ir.Protocol) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(barrier name, element) -> (buffer index, slot, first byte) of every barrier that lies in a slot."""
    index = {b.name: n for n, b in enumerate(protocol.buffers)}
    out: dict[tuple[str, int], tuple[int, int, int]] = {}
    for mb in protocol.mbarriers:
        if mb.storage is not None:
            for e in range(mb.size or 1):
                out[(mb.name, e)] = (index[mb.storage.buffer], mb.storage.slot, mb.storage.offset + MBAR_BYTES * e)
    return out


def uses_storage(protocol: ir.Protocol) -> str | None:
    """The first barrier declared in a buffer's bytes, as the declaration reads (for refusals), or None."""
    for mb in protocol.mbarriers:
        if mb.storage is not None:
            s = mb.storage
            return f"mbarrier {mb.name} in {s.buffer}[{s.slot}] at {s.offset} (line {mb.span.line})"
    return None


class StorageOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _storage(self) -> tuple[dict[int, tuple[int, int, int]], dict[tuple[int, int, int], list[int]]]:
        """Per barrier index: (buffer, slot, first byte); per (cta, buffer, slot): the barriers in it."""
        cached = self.__dict__.get("_storage_layout")
        if cached is None:
            by_name = storage_of(self.protocol)
            of_bar = {m: by_name[(name, e)] for m, (_cta, name, e) in enumerate(self.mb_names) if (name, e) in by_name}
            in_slot: dict[tuple[int, int, int], list[int]] = {}
            for m, (buf, slot, _lo) in of_bar.items():
                in_slot.setdefault((self.mb_names[m][0], buf, slot), []).append(m)
            cached = self.__dict__["_storage_layout"] = (of_bar, in_slot)
        return cached

    def _bar_region(self, m: int) -> int:
        """The barrier's bytes as an explicit region of its slot (the same for every owner: give
        Parts.overlap any process as its owner; an owner < 0 would mean the whole slot)."""
        lo = self._storage()[0][m][2]
        return explicit(lo, lo + MBAR_BYTES)

    def storage_access(self, w: _Work, p: int, lanes: int, key: tuple, region: int, span, what: str) -> None:
        """A data access of ``key`` (a slot of some CTA) touching ``region``: SV409 where it meets the bytes
        of a live barrier whose init its lanes do not know (the two are unordered), else SV408 there."""
        space, cta, buf, slot = key
        bars = self._storage()[1].get((cta, buf, slot))
        if space != SPACE_DATA or not bars:
            return
        size = self.protocol.buffers[buf].bytes
        for m in bars:
            if not w.mbars[m][M_VALID] or not self.parts.overlap(region, p, self._bar_region(m), p, size):
                continue
            if not self._knows(w.records, (SPACE_INIT, cta, m, 0), lanes):
                raise Violation("SV409", f"{what} by {self.proc_label(p)} of {self.slot_label(cta, buf, slot)} is "
                                f"not ordered with the init of {self.mb_label(m)}, whose bytes it touches: in another "
                                "interleaving the init runs on bytes still in use as data", span)
            raise Violation("SV408", f"{what} by {self.proc_label(p)} touches the bytes of {self.mb_label(m)} in "
                            f"{self.slot_label(cta, buf, slot)} while the barrier is live (initialised and not "
                            "invalidated): inval it, ordered before this access, first (PTX: an mbarrier must be "
                            "invalidated before the memory is used for any other purpose)", span)

    def storage_unordered(self, r: tuple, what: str, p: int, span) -> None:
        """A data access is unordered with record ``r``: when r is a barrier's inval, SV408."""
        if r[R_FLAGS] & F_MBAR:
            raise Violation("SV408", f"{what} by {self.proc_label(p)} of {self.slot_label(*r[1:4])} is not ordered "
                            f"after the inval at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} of the barrier "
                            "whose bytes it touches: in another interleaving it uses them while the barrier is "
                            "still live", span, related=((r[R_LINE], "the inval"),))

    def storage_init(self, w: _Work, p: int, lanes: int, m: int, span) -> None:
        """An init of barrier m: every data access of its bytes must be ordered before it and complete (SV409)."""
        where = self._storage()[0].get(m)
        if where is None:
            return
        buf, slot, _lo = where
        key = (SPACE_DATA, self.mb_names[m][0], buf, slot)
        size = self.protocol.buffers[buf].bytes
        lo_i, hi_i = _key_bounds(w, key)
        for r in w.records[lo_i:hi_i]:
            if r[:4] != key or r[R_FLAGS] & F_MBAR or r[R_KIND] == SHADOW or \
                    not self.parts.overlap(r[R_REGION], r[R_OWNER], self._bar_region(m), p, size):
                continue
            if r[R_FLAGS] & F_INFLIGHT or (r[R_KNOWN] & lanes) != lanes:
                how = "a copy still in flight" if r[R_FLAGS] & F_INFLIGHT else \
                    f"the {'write' if r[R_KIND] == WRITE else 'read'} at line {r[R_LINE]} by {self._owner_label(r)}"
                raise Violation("SV409", f"init of {self.mb_label(m)} on bytes of {self.slot_label(*key[1:])} still "
                                f"in use as data: {how} touches them, and nothing orders it before the init",
                                span, related=((r[R_LINE], "the data access"),))

    def storage_inval(self, w: _Work, p: int, part: int, lanes: int, m: int, span) -> None:
        """An inval of barrier m: no arrival may still come (SV409); its bytes then become data, which a
        later access must be ordered after (the F_MBAR write record; SV408 at that access otherwise)."""
        mb = w.mbars[m]
        pending = [a for a in w.agents if a[4] == m]
        if pending or mb[M_TX]:
            how = (f"a copy issued at line {pending[0][7]} still completes on it" if pending else
                   f"its transaction count is {mb[M_TX]}, so a complete_tx or expect_tx is still to come")
            raise Violation("SV409", f"inval of {self.mb_label(m)} while arrivals may still come: {how}", span,
                            related=((pending[0][7], "the copy in flight"),) if pending else ())
        where = self._storage()[0].get(m)
        if where is None:
            return
        buf, slot, _lo = where
        key = (SPACE_DATA, self.mb_names[m][0], buf, slot)
        # (an older inval record of the same bytes is covered by this one, and dropped by _add_write: the
        # init between them was ordered after it, and this inval after the init)
        self._add_write(w, p, part, lanes, key, span.line, F_MBAR, region=self._bar_region(m))


__all__ = ["MBAR_BYTES", "StorageOps", "storage_of", "uses_storage"]
