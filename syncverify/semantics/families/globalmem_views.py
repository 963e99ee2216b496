"""Which write of a flag a read may return: each flag's coherence order of writes and each thread's
view of it (the view-based operational reading of release/acquire: Kang et al., "A Promising
Semantics for Relaxed-Memory Concurrency", POPL'17; Lahav et al., SRA). Part of the global-memory
family (families/globalmem.py uses these helpers; docs/model.md, "Global memory: which write a read
returns", quotes the PTX text).

* **History.** Every flag element keeps the writes the model still needs, oldest first: their values
  (the state's ``tmem`` entries after the grid barrier's, ``(older values, 0)``, while the latest stays
  the element's own ``(value, 0)`` entry) and, per write, the knowledge released into it (holder bits
  per scope level and releasing CTA, as before but per write). Flag writes are strong and, at a scope
  that includes both threads, morally strong, so the interleaving's order of them is their coherence
  order (PTX §8.9.6).
* **Knowing a write.** Each write after the initial value has a record of its own (space
  ``SPACE_FLAG``: element, index in the history) whose knowledge set says which thread holders are
  causally after it: the writer, the threads that read it (observation order, §8.9.2; per-location
  coherence, §8.10.5), and whoever happens-before carries it to — every release/acquire, barrier,
  grid.sync or fence.sc edge of the other families moves these records exactly as it moves data
  records, so "what happens-before brings" needs no rule of its own.
* **View.** A holder's view of an element is the newest write whose record it knows (the oldest kept
  otherwise). PTX §8.10.6 (Causality): "If a write W precedes an overlapping read R in causality
  order, then ... R cannot read from any write W' that precedes W in coherence order". So a `ld` or a
  passing `wait.until` may read any write from the view on; an RMW reads the latest (atomicity,
  §8.10.3). The executing lanes of one step read one write (the least view among them counts).
* **Bounding.** A write older than the view of every holder that may still read the element (a
  process that has not exited and has a `ld`/`wait.until` of that flag) can never be read: it is
  dropped, with its record and knowledge bits. More than ``HISTORY`` writes still readable makes the
  check inconclusive (ModelBound), never safe.
"""

from __future__ import annotations

from ... import ir
from ..core import ModelBound, _Work
from ..program import END
from ..state import P_PC, R_KNOWN, R_OBJ, R_SLOT, R_SPACE, WRITE

SPACE_FLAG = 5  # the record space of flag writes (after every space of state.py)
HISTORY = 16  # writes of one flag element a thread may still read, at most
LEVELS = 3  # scope levels: 0 .cta, 1 .cluster, 2 .gpu (and .sys)
FLAG_CTA = -1  # the CTA field of a flag write's record: one copy for the grid


class FlagViewOps:
    """The history and view helpers of the global-memory family (a mixin of GlobalMemOps)."""

    def _init_views(self, hist_entry: int) -> None:
        """``hist_entry``: the first tmem entry of the histories (one per flag element). Which lane
        holders of which processes may read each flag name (a `ld` or `wait.until` of it)."""
        self.hist_entry = hist_entry
        self.flag_readers: dict[str, list[tuple[int, int]]] = {}
        for q, prog in enumerate(self.programs):
            masks: dict[str, int] = {}
            for ins in prog.code:
                op = ins.op
                if isinstance(op, ir.FlagOp) and op.kind in ("ld", "wait"):
                    masks[op.flag.name] = masks.get(op.flag.name, 0) | self._lanes(q, ins)
            for name, mask in masks.items():
                self.flag_readers.setdefault(name, []).append((q, mask))

    # ------------------------------------------------------------------ layout
    def _entry_bit(self, e: int, h: int, level: int, cta: int) -> int:
        """The knowledge holder of write ``h`` of element ``e``, released at ``level`` by ``cta``."""
        return 1 << (self.gl_flag_base + ((e * HISTORY + h) * LEVELS + level) * self.ncta + cta)

    def _entry_mask(self, e: int, h: int) -> int:
        lo = self.gl_flag_base + (e * HISTORY + h) * LEVELS * self.ncta
        return ((1 << (LEVELS * self.ncta)) - 1) << lo

    def history(self, tmem, e: int) -> tuple[int, ...]:
        """The values of element e's writes still kept, oldest first (the last is the latest)."""
        return (*tmem[self.hist_entry + e][0], tmem[self.gl_tmem + e][0])

    # ------------------------------------------------------------------ views
    def view_of(self, records: tuple, e: int, holders: int) -> int:
        """The oldest write of element e that every holder in ``holders`` may still read: per holder
        the newest write whose record it knows; the least of them (one step's lanes read one write)."""
        best: dict[int, int] = {}
        for r in records:
            if r[R_SPACE] != SPACE_FLAG or r[R_OBJ] != e:
                continue
            known = r[R_KNOWN] & holders
            while known:
                bit = known & -known
                known ^= bit
                if r[R_SLOT] > best.get(bit, 0):
                    best[bit] = r[R_SLOT]
        out = None
        rest = holders
        while rest:
            bit = rest & -rest
            rest ^= bit
            v = best.get(bit, 0)
            out = v if out is None else min(out, v)
        return out or 0

    def _know_write(self, w: _Work, e: int, h: int, lanes: int) -> None:
        """The holders in ``lanes`` are now causally after write h of element e (they read it)."""
        out = None
        for i, r in enumerate(w.records):
            if r[R_SPACE] == SPACE_FLAG and r[R_OBJ] == e and r[R_SLOT] == h and r[R_KNOWN] & lanes != lanes:
                out = list(w.records) if out is None else out
                out[i] = (*r[:R_KNOWN], r[R_KNOWN] | lanes)
        if out is not None:
            w.records = tuple(out)

    def _append_write(self, w: _Work, p: int, lanes: int, e: int, value: int, line: int, rmw: bool) -> int:
        """A new latest write of element e by process p (after the older ones are dropped where they
        can be): its record, known by the writer, and — for an RMW, which continues the release
        sequence — the knowledge released into the write it read. Returns the new write's index."""
        self._compact(w, e)
        hist = self.history(w.tmem, e)
        if len(hist) >= HISTORY:
            raise ModelBound(f"line {line}: flag {self.flag_label(e)} would keep more than {HISTORY} writes a "
                                 "thread may still read (a reader falls that far behind its writers): the model "
                                 "bounds the history of a flag")
        h = len(hist)
        w.tmem[self.hist_entry + e] = (hist, 0)
        w.tmem[self.gl_tmem + e] = (value, w.tmem[self.gl_tmem + e][1])  # its meta stays (flag_weak.py)
        if rmw:
            from ..state import release

            for level in range(LEVELS):
                for cta in range(self.ncta):
                    w.records = release(w.records, self._entry_bit(e, h - 1, level, cta),
                                        self._entry_bit(e, h, level, cta))
        w.records = (*w.records, (SPACE_FLAG, FLAG_CTA, e, h, WRITE, p, 0, line, 0, 0, -1, 0, 0, lanes))
        return h

    def _compact(self, w: _Work, e: int) -> None:
        """Drop the writes of element e that no holder that may still read it can read."""
        hist = self.history(w.tmem, e)
        if len(hist) == 1:
            return
        name = self.flag_names[e][0]
        holders = 0
        for q, mask in self.flag_readers.get(name, ()):
            if self.programs[q].code[w.procs[q][P_PC]].kind == END:
                continue
            if self.resident is not None and self.procs[q].cta not in self.resident:
                continue
            holders |= mask
        k = self.view_of(w.records, e, holders) if holders else len(hist) - 1
        if k <= 0:
            return
        w.tmem[self.hist_entry + e] = (hist[k:-1], 0)
        lo = self.gl_flag_base + e * HISTORY * LEVELS * self.ncta
        width = HISTORY * LEVELS * self.ncta
        region = ((1 << width) - 1) << lo
        shift = k * LEVELS * self.ncta
        out = []
        for r in w.records:
            if r[R_SPACE] == SPACE_FLAG and r[R_OBJ] == e:
                if r[R_SLOT] < k:
                    continue
                r = (*r[:R_SLOT], r[R_SLOT] - k, *r[R_SLOT + 1:])
            a, kn = r[-2], r[-1]
            if (a | kn) & region:
                a = (a & ~region) | ((((a & region) >> lo) >> shift) << lo)
                kn = (kn & ~region) | ((((kn & region) >> lo) >> shift) << lo)
                r = (*r[:-2], a, kn)
            out.append(r)
        w.records = tuple(out)

    def readable(self, state, p: int, e: int, lanes: int) -> range:
        """The indices of the writes of element e that process p's ``lanes`` may read."""
        n = len(self.history(state.tmem, e))
        return range(self.view_of(state.records, e, lanes), n)
