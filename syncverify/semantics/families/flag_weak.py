"""A weak store of a flag, `st.weak F, V;`: the plain `*counter = 0;` that resets a counter after the last
CTA to arrive has drawn its ticket (CUDA's threadFenceReduction sample, `reduceSinglePass`:
`count = 0;` after `atomicInc`; PyTorch's `Reduce.cuh` resets its semaphores so).

A weak store is not morally strong with anything another thread does (PTX ISA §8.7: morally strong operations
are "each ... strong"), so it is a data race unless causality orders it with every conflicting access of the
location (§8.10.1, "Data races": "two overlapping memory operations ... conflict when at least one is a
write", and a data race is a conflicting pair "not related in causality order" and not morally strong). It
releases nothing (a release pattern needs "a strong write", §8.8). The model checks the order with the flag
family's own records (families/globalmem_views.py: each write's record holds the threads causally after it):

* **Before it.** Every write of the flag so far must be causally before the store. The storer must know the
  latest write's record (it wrote it, read it, or happens-before carried it), and every other write must be an
  RMW or the storer's own store: then each older write precedes the latest in observation order ("W precedes
  Z and Z precedes R", §8.9.2, through the atomics between), so it precedes the storer's later store in
  causality order (§8.9.5). The latest write not known is SV807 (a data race, naming that write); a `st` of
  another thread among the older writes is not followed (inconclusive: its order with the store is not
  tracked once it is older than the latest).
* **After it.** Every later operation of the flag by another thread must know the latest write's record at
  its turn (the store's, or an RMW's whose writer knew it): otherwise SV807 at that operation, naming the store.
* **Reads.** A `ld` or `wait.until` of the flag by another thread reads without writing, and its order with
  the store is not tracked: a protocol with one is inconclusive at the store.

Each flag element's entry in the state keeps, beside the value, ``meta``: bit 0 set while the latest `st`
was weak, and bit 1 + p for every process p that has stored (`st`, weak or strong) to it.
"""

from __future__ import annotations

from ... import ir
from ..core import BudgetExceeded, Violation, _Work
from ..state import R_KNOWN, R_LINE, R_OBJ, R_OWNER, R_SLOT, R_SPACE
from .globalmem_views import SPACE_FLAG


def _stores(meta: int) -> list[int]:
    """The processes that have stored to the element."""
    return [p for p in range(meta.bit_length()) if meta >> (p + 1) & 1]


class WeakFlagOps:
    """The checks of a weak store of a flag (a mixin of GlobalMemOps, which calls them from op_flag)."""

    def _knows_latest(self, w: _Work, e: int, lanes: int) -> tuple[bool, int, int]:
        """(whether ``lanes`` know the latest write of element e, its writer, its line)."""
        h = len(self.history(w.tmem, e)) - 1  # type: ignore[attr-defined]
        for r in w.records:
            if r[R_SPACE] == SPACE_FLAG and r[R_OBJ] == e and r[R_SLOT] == h:
                return r[R_KNOWN] & lanes == lanes, r[R_OWNER], r[R_LINE]
        return True, -1, 0  # the initial value: before every thread

    def weak_meta(self, w: _Work, p: int, lanes: int, e: int, op: ir.FlagOp) -> int | None:
        """Check flag operation ``op`` of process ``p`` on element ``e`` against the weak-store rules; return
        the element's ``meta`` after it (None: unchanged)."""
        meta = w.tmem[self.gl_tmem + e][1]  # type: ignore[attr-defined]
        weak = op.kind == "st" and op.sem == "weak"
        if weak:
            readers = [q for q, _m in self.flag_readers.get(op.flag.name, ()) if q != p]  # type: ignore[attr-defined]
            if readers:
                raise BudgetExceeded(f"line {op.span.line}: a weak store of {self.flag_label(e)} that "  # type: ignore[attr-defined]
                                     f"{self.proc_label(readers[0])} also loads or spins on: the order of "  # type: ignore[attr-defined]
                                     "a load with a weak store is not modelled")
            others = [q for q in _stores(meta) if q != p]
            if others:
                raise BudgetExceeded(f"line {op.span.line}: a weak store of {self.flag_label(e)} after "  # type: ignore[attr-defined]
                                     f"{self.proc_label(others[0])} stored to it: its order with an older "  # type: ignore[attr-defined]
                                     "store than the latest write is not tracked")
        if weak or (meta & 1 and _stores(meta) != [p]):
            known, writer, line = self._knows_latest(w, e, lanes)
            if not known and writer != p:
                if weak:
                    raise Violation("SV807", f"data race on {self.flag_label(e)}: this weak store is not ordered "  # type: ignore[attr-defined]
                                    f"after its write at line {line} by {self.proc_label(writer)} (a weak store "  # type: ignore[attr-defined]
                                    "races with every access of the location that causality does not order)",
                                    op.span, ((line, "the other write"),), procs=(writer,))
                storer = _stores(meta)[0]
                raise Violation("SV807", f"data race on {self.flag_label(e)}: this `{op.kind}` is not ordered after "  # type: ignore[attr-defined]
                                f"the weak store of {self.proc_label(storer)} (a weak store races with every "  # type: ignore[attr-defined]
                                "access of the location that causality does not order)", op.span, (),
                                procs=(storer,))
        if op.kind != "st":
            return None
        return (meta & ~1) | 1 << (p + 1) | int(weak)
