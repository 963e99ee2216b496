"""Tensor memory and tcgen05 (sm_100a): allocation and deallocation, commit (and the older
`umma.commit`), mma and cp, loads and stores of tensor memory, and their waits and fences.

A room of its own because tensor memory is a state space of its own, with its own
operands (regions, cta_group pairs) and its own ordering rules.
"""

from __future__ import annotations

from lark import Tree

from ... import ir
from .statements import Statements

TMEM_LANES = 128  # tensor-memory lanes of a CTA (PTX tcgen05 "Tensor Memory": 128 lanes x 512 columns)


class Tcgen05Ops(Statements):
    """The `op_*` builders of the tensor-memory family."""

    def _tmem(self, dealloc, span, clauses, quals=frozenset()):
        group = self.const(clauses["cta_group"], "cta_group") if "cta_group" in clauses else \
            2 if ".cta_group::2" in quals else 1
        if group not in (1, 2):
            self.error("SV110", "cta_group must be 1 or 2", span)
            return None
        if group == 2 and self.cluster < 2:
            self.error("SV108", "cta_group 2 needs a cluster of at least 2 CTAs", span)
            return None
        cols = self.const(clauses["cols"], "cols") if "cols" in clauses else 32
        if cols is None:
            return None
        if not 32 <= cols <= 512 or cols & (cols - 1):  # PTX tcgen05.alloc: nCols a power of two in 32..512
            self.error("SV110", f"cols {cols} must be a power of two in 32..512", self.span(clauses["cols"]))
            return None
        return ir.TmemAlloc(dealloc, group, span, cols)

    def op_tmem_alloc(self, span, quals, operands, clauses):
        return self._tmem(False, span, clauses)

    def op_tmem_dealloc(self, span, quals, operands, clauses):
        return self._tmem(True, span, clauses)

    def op_tmem_relinquish(self, span, quals, operands, clauses):
        group = self._cta_group(span, quals, clauses)
        return ir.TmemRelinquish(group, span) if group else None

    op_tcgen05_relinquish_alloc_permit = op_tmem_relinquish

    def op_umma_commit(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        mask = self.expr(clauses["multicast"]) if "multicast" in clauses else None
        group = self._cta_group(span, quals, clauses)
        return ir.UmmaCommit(bar, mask, span, group) if bar and group else None

    op_tcgen05_commit = op_umma_commit

    def op_tcgen05_alloc(self, span, quals, operands, clauses):
        return self._tmem(False, span, clauses, quals)

    def op_tcgen05_dealloc(self, span, quals, operands, clauses):
        return self._tmem(True, span, clauses, quals)

    def _mma(self, kind, span, quals, operands, clauses):
        acc = self.ref(operands[0], "tmem")
        # an mma's A (and scale-factor) operands may sit in tensor memory; a cp copies from shared memory
        srcs = [self.ref(o, "tmem" if kind == "mma" and self._names_kind(o) == "tmem" else "buffer")
                for o in operands[1:]]
        group = self._cta_group(span, quals, clauses)
        if acc is None or group is None or any(r is None for r in srcs):
            return None
        return ir.TcMma(kind, acc, tuple(srcs), group, span)  # type: ignore[arg-type]

    def _names_kind(self, t: Tree) -> str | None:
        """The declared kind of the object an operand names (None: not a declared name)."""
        if t.data in ("name", "index", "index_all") and str(t.children[0]) in self.kinds:
            return self.kinds[str(t.children[0])][0]
        return None

    def op_tcgen05_mma(self, span, quals, operands, clauses):
        return self._mma("mma", span, quals, operands, clauses)

    def op_tcgen05_cp(self, span, quals, operands, clauses):
        return self._mma("cp", span, quals, operands, clauses)

    def op_tcgen05_shift(self, span, quals, operands, clauses):
        return self._mma("shift", span, quals, operands, clauses)

    def op_tcgen05_ld(self, span, quals, operands, clauses):
        return self._tmem_access("ld", span, operands, clauses)

    def op_tcgen05_st(self, span, quals, operands, clauses):
        return self._tmem_access("st", span, operands, clauses)

    def _tmem_access(self, kind, span, operands, clauses):
        """`tcgen05.ld/st R [lanes LO..HI] [cols LO..HI]`: constant bounds are checked here (SV104), others
        when the access runs (semantics/families/tmem_ranges.py)."""
        region = self.ref(operands[0], "tmem")
        if region is None:
            return None
        ranges = []
        for word, limit, what in (("lanes", TMEM_LANES, "lanes"), ("col_range", self.tmem_regions[region.name].cols,
                                                                     "columns")):
            if word not in clauses:
                ranges.append(None)
                continue
            t = clauses[word]
            lo, hi = self.expr(t.children[0]), self.expr(t.children[1])
            if isinstance(lo, ir.Const) and isinstance(hi, ir.Const) and not 0 <= lo.value < hi.value <= limit:
                self.error("SV104", f"{what} {lo.value}..{hi.value} is not a non-empty range inside `{region.name}`'s "
                           f"{limit} {what} (half-open: LO..HI covers LO up to HI-1)", self.span(t))
                return None
            ranges.append((lo, hi))
        return ir.TmemAccess(kind, region, span, ranges[0], ranges[1])

    def op_tcgen05_wait__ld(self, span, quals, operands, clauses):
        return ir.TcWait("ld", span)

    def op_tcgen05_wait__st(self, span, quals, operands, clauses):
        return ir.TcWait("st", span)

    def op_tcgen05_fence__before_thread_sync(self, span, quals, operands, clauses):
        return ir.TcFence("before", span)

    def op_tcgen05_fence__after_thread_sync(self, span, quals, operands, clauses):
        return ir.TcFence("after", span)
