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
  its turn (the store's, or a later write's whose writer was checked so or is the storer): otherwise SV807 at
  that operation, naming the store.
* **Reads.** A `ld`, `wait.until` or `probe` of the flag by another thread reads without writing, and its order
  with the store is not tracked: a protocol with one is inconclusive at the store.

Each flag element's entry in the state keeps, beside the value, ``meta``: the processes that have stored to it
(`st`, weak or strong) and those that have stored weakly, as two bit masks (0 until one does). Neither is ever
cleared: once a thread stored weakly, every other thread's access must be ordered after the latest write, which
by induction is ordered after the weak store (each write after it was checked so, or is its storer's own).
"""

from __future__ import annotations

from ... import ir
from ..core import ModelBound, Violation, _Work
from ..state import R_KNOWN, R_LINE, R_OBJ, R_OWNER, R_SLOT, R_SPACE
from .globalmem_views import SPACE_FLAG


def _procs(mask: int) -> list[int]:
    return [p for p in range(mask.bit_length()) if mask >> p & 1]


class WeakFlagOps:
    """The checks of a weak store of a flag (a mixin of GlobalMemOps, which calls them from op_flag)."""

    def _knows_latest(self, w: _Work, e: int, lanes: int) -> tuple[bool, int, int]:
        """(whether ``lanes`` know the latest write of element e, its writer, its line)."""
        h = len(self.history(w.tmem, e)) - 1  # type: ignore[attr-defined]
        for r in w.records:
            if r[R_SPACE] == SPACE_FLAG and r[R_OBJ] == e and r[R_SLOT] == h:
                return r[R_KNOWN] & lanes == lanes, r[R_OWNER], r[R_LINE]
        return True, -1, 0  # the initial value: before every thread

    def _flag_loaders(self, name: str) -> list[int]:
        """The processes with a `ld`, `wait.until` or `probe` of flag ``name`` (reads that write nothing), in
        the full programs (a residency search's restricted ones would hide some: engines/residency.py)."""
        programs = getattr(self, "shown_programs", None) or self.programs  # type: ignore[attr-defined]
        return [q for q, prog in enumerate(programs)
                if any(isinstance(ins.op, ir.FlagOp) and ins.op.kind in ("ld", "wait", "probe")
                       and ins.op.flag.name == name for ins in prog.code)]

    def weak_meta(self, w: _Work, p: int, lanes: int, e: int, op: ir.FlagOp) -> tuple[int, int] | None:
        """Check flag operation ``op`` of process ``p`` on element ``e`` against the weak-store rules; return
        the element's ``meta`` after it, (processes that stored, processes that stored weakly) as bit masks
        (None: unchanged)."""
        meta = w.tmem[self.gl_tmem + e][1] or (0, 0)  # type: ignore[attr-defined]
        stores, weaks = meta
        weak = op.kind == "st" and op.sem == "weak"
        label = self.flag_label(e)  # type: ignore[attr-defined]
        if weak:
            readers = [q for q in self._flag_loaders(op.flag.name) if q != p]
            if readers:
                raise ModelBound(f"line {op.span.line}: a weak store of {label} that "
                                     f"{self.proc_label(readers[0])} also loads or spins on: the order of "  # type: ignore[attr-defined]
                                     "a load with a weak store is not modelled")
            others = _procs(stores & ~(1 << p))
            if others:
                raise ModelBound(f"line {op.span.line}: a weak store of {label} after "
                                     f"{self.proc_label(others[0])} stored to it: its order with an older "  # type: ignore[attr-defined]
                                     "store than the latest write is not tracked")
            known, writer, line = self._knows_latest(w, e, lanes)
            if not known and writer != p:
                raise Violation("SV807", f"data race on {label}: this weak store is not ordered after its write at "
                                f"line {line} by {self.proc_label(writer)} (a weak store races with every access "  # type: ignore[attr-defined]
                                "of the location that causality does not order)", op.span,
                                ((line, "the other write"),), procs=(writer,))
        elif weaks & ~(1 << p):
            known, _writer, _line = self._knows_latest(w, e, lanes)
            if not known:
                storer = _procs(weaks & ~(1 << p))[0]
                raise Violation("SV807", f"data race on {label}: this `{op.kind}` is not ordered after the weak store "
                                f"of {self.proc_label(storer)} (a weak store races with every access of the "  # type: ignore[attr-defined]
                                "location that causality does not order)", op.span, (), procs=(storer,))
        if op.kind != "st":
            return None
        return stores | 1 << p, weaks | int(weak) << p
