"""The CTA and cluster barriers: __syncthreads, __syncwarp, bar/barrier.sync and .arrive
(by id or through a `named` declaration) and cluster.arrive/wait/sync.

A room of its own because a barrier operand is an id or a named declaration, never an
object reference: its checks (_bar_operands) are this family's own.
"""

from __future__ import annotations

from ... import ir
from ...expr import fold, substitute
from .names import _a
from .statements import Statements


class BarrierOps(Statements):
    """The `op_*` builders of the barrier family."""

    def op_syncthreads(self, span, quals, operands, clauses):
        return ir.BarSync(ir.Const(0, span), None, span)

    def op_syncwarp(self, span, quals, operands, clauses):
        return ir.Syncwarp(span)

    def _bar_operands(self, span, operands, clauses, need_count: bool,
                      op: str = "") -> tuple[ir.Expr, ir.Expr | None] | None:
        op = op or ("bar.arrive" if need_count else "bar.sync")
        first = operands[0]
        count: ir.Expr | None = None
        count_span = span
        obj = str(first.children[0]) if first.data in ("name", "index", "index_all") else None
        kind = self.kinds[obj][0] if obj in self.kinds else None
        if kind == "named barrier" and obj not in self.named:
            return None  # its declaration was rejected, and that error is reported already
        if kind in ("mbarrier", "buffer", "tmem"):
            self.error("SV111", f"`{obj}` is {_a(kind)}, but `{op}` needs a barrier id 0..15 or a `named` barrier",
                       self.span(first))
            return None
        if obj is not None and kind == "named barrier":
            decl = self.named[obj]
            if first.data == "index_all":
                self.error("SV116", f"`{obj}[*]` (every element) is only allowed with `init` and `inval`",
                           self.span(first))
                return None
            if first.data == "name" and decl.size is not None:
                self.error("SV104", f"`{obj}` is an array of {decl.size}; give an index", self.span(first))
                return None
            if first.data == "index":
                if decl.size is None:
                    self.error("SV104", f"`{obj}` is not an array", self.span(first))
                    return None
                index = self.expr(first.children[1])
                if isinstance(index, ir.Const) and not 0 <= index.value < decl.size:
                    self.error("SV104", f"index {index.value} is out of range for `{obj}[{decl.size}]`",
                               self.span(first.children[1]))
                    return None
                bar_id = fold(substitute(decl.id_expr, "i", index))
                count = fold(substitute(decl.count_expr, "i", index)) if decl.count_expr is not None else None
            else:
                bar_id, count = decl.id_expr, decl.count_expr
            if len(operands) > 1:
                self.error("SV110", "give the count of a named barrier as `count N`, or in its declaration",
                           self.span(operands[1]))
                return None
        else:
            bar_id = self.expr(first)
            if len(operands) > 1:
                count, count_span = self.expr(operands[1]), self.span(operands[1])
        if "count" in clauses:
            if count is not None and len(operands) > 1:
                self.error("SV110", "thread count given twice", self.span(clauses["count"]))
                return None
            count, count_span = self.expr(clauses["count"]), self.span(clauses["count"])
        if isinstance(bar_id, ir.Const) and not self._check_bar_id(bar_id.value, self.span(first)):
            return None
        if isinstance(count, ir.Const) and not self._check_bar_count(count.value, count_span):
            return None
        if need_count and count is None:
            self.error("SV106", f"`{op}` needs a thread count (`{op} ID, N`)", span)
            return None
        return bar_id, count

    def op_bar_sync(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=False)
        return ir.BarSync(r[0], r[1], span) if r else None

    def op_bar_arrive(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=True)
        return ir.BarArrive(r[0], r[1], span) if r else None  # type: ignore[arg-type]

    def op_barrier_sync(self, span, quals, operands, clauses):
        """`barrier.sync`: unaligned unless spelled `barrier.sync.aligned` (= `bar.sync`)."""
        r = self._bar_operands(span, operands, clauses, need_count=False, op="barrier.sync")
        return ir.BarSync(r[0], r[1], span, ".aligned" in quals) if r else None

    def op_barrier_arrive(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=True, op="barrier.arrive")
        return ir.BarArrive(r[0], r[1], span, ".aligned" in quals) if r else None  # type: ignore[arg-type]

    def op_cluster_arrive(self, span, quals, operands, clauses):
        return ir.ClusterArrive(".relaxed" in quals, span)

    def op_cluster_wait(self, span, quals, operands, clauses):
        return ir.ClusterWait(span)

    def op_cluster_sync(self, span, quals, operands, clauses):
        return [ir.ClusterArrive(False, span), ir.ClusterWait(span)]
