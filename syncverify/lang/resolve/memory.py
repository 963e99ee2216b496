"""Memory and the async proxy: generic reads and writes (whole slots, parts, byte ranges),
TMA loads and stores, bulk groups, wgmma reads, cp.async and its groups, cp.async.bulk,
and the fences (proxy and mbarrier-init).

A room of its own because the accesses and copies share the buffer checks (a region of a
slot, the bytes a copy moves) that no other family needs; the groups that retire the copies
and the fences that order them against generic accesses sit with them.
"""

from __future__ import annotations

from ... import ir
from .. import fences
from .operations import MAX_COUNT
from .statements import Statements


class MemoryOps(Statements):
    """The `op_*` builders of reads, writes, async copies, groups and fences."""

    def _access(self, kind, span, operands, clauses):
        t = operands[0]
        name = str(t.children[0]) if t.data in ("name", "index") else ""
        if self.kinds.get(name, ("",))[0] == "global buffer":  # global memory (resolve/globalmem.py)
            return self.global_access(kind, span, t, clauses)
        if self.kinds.get(name, ("",))[0] == "registers":  # an RS-form wgmma's operand (resolve/async_operands.py)
            return self.register_access(kind, span, t, clauses)  # type: ignore[attr-defined]
        buf = self.ref(t, "buffer")
        remote = self._remote(clauses)
        if buf is None:
            return None
        part, lo, hi = self._region(buf, clauses)
        return ir.Access(kind, buf, remote, span, part, lo, hi)

    def _region(self, buf: ir.Ref, clauses) -> tuple[str | None, ir.Expr | None, ir.Expr | None]:
        """`part warp|warpgroup` or `bytes LO..HI` of an access (regions of a slot, §8.4)."""
        if "part" in clauses and "range" in clauses:
            self.error("SV110", "an access takes `part ...` or `bytes LO..HI`, not both", self.span(clauses["range"]))
            return None, None, None
        if "part" in clauses:
            word = str(clauses["part"])
            if word not in ("warp", "warpgroup"):
                self.error("SV110", f"`part {word}`: a slot is split by `part warp` or `part warpgroup`",
                           self.span(clauses["part"]))
                return None, None, None
            return word, None, None
        if "range" not in clauses:
            return None, None, None
        t = clauses["range"]
        lo, hi = self.expr(t.children[0]), self.expr(t.children[1])
        size = self.buffers[buf.name].bytes
        if isinstance(lo, ir.Const) and isinstance(hi, ir.Const) and not 0 <= lo.value < hi.value <= size:
            self.error("SV104", f"bytes {lo.value}..{hi.value} is not a non-empty range inside `{buf.name}`'s "
                       f"{size}-byte slots (half-open: LO..HI covers LO up to HI-1)", self.span(t))
        return None, lo, hi

    def op_read(self, span, quals, operands, clauses):
        return self._access("read", span, operands, clauses)

    def op_write(self, span, quals, operands, clauses):
        return self._access("write", span, operands, clauses)

    def _buffer_bytes(self, buf: ir.Ref, clauses, span, tx: bool = True) -> ir.Expr:
        if "bytes" in clauses:
            e = self._bytes(clauses["bytes"], "copy bytes")
            size = self.buffers[buf.name].bytes
            if isinstance(e, ir.Const) and e.value > size:
                self.error("SV107", f"copy of {e.value} bytes into `{buf.name}`, whose slots hold {size} bytes",
                           self.span(clauses["bytes"]))
            return e
        nbytes = self.buffers[buf.name].bytes
        if tx and nbytes > MAX_COUNT:  # a whole-buffer copy still completes its bytes on one tx-count
            self.error("SV105", f"copying all of `{buf.name}` ({nbytes} bytes) exceeds the tx-count limit 2^20-1; "
                       "give `bytes N`", span)
        return ir.Const(nbytes, span)

    def op_tma_load(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        bar = self.ref(clauses["target"], "mbarrier")
        mask = self.expr(clauses["multicast"]) if "multicast" in clauses else None
        if mask is not None and self.cluster == 1:
            self.error("SV108", "`multicast` in a protocol whose cluster has 1 CTA", self.span(clauses["multicast"]))
            return None
        group = self._cta_group(span, quals, clauses)
        if buf is None or bar is None or group is None:
            return None
        return ir.TmaLoad(buf, self._buffer_bytes(buf, clauses, span), bar, mask, span, group)

    def op_tma_store(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        return ir.TmaStore(buf, self._buffer_bytes(buf, clauses, span, tx=False), span) if buf else None

    def op_bulk_commit(self, span, quals, operands, clauses):
        return ir.GroupCommit("bulk", span)

    def _pending(self, operands, span) -> ir.Expr:
        n = self.expr(operands[0]) if operands else ir.Const(0, span)
        if not isinstance(n, ir.Const) or not 0 <= n.value <= 7:
            self.error("SV110", "the number of groups left pending must be a constant 0..7", span)
        return n

    def op_bulk_wait_read(self, span, quals, operands, clauses):
        return ir.GroupWait("bulk", self._pending(operands, span), span)

    def op_wgmma_read(self, span, quals, operands, clauses):
        t = operands[0]
        registers = t.data in ("name", "index") and self.kinds.get(str(t.children[0]), ("",))[0] == "registers"
        buf = self.ref(t, "registers" if registers else "buffer")  # registers: an RS-form wgmma's A fragment
        return ir.WgmmaRead(buf, span) if buf else None

    def op_wgmma_commit(self, span, quals, operands, clauses):
        return ir.GroupCommit("wgmma", span)

    def op_wgmma_wait(self, span, quals, operands, clauses):
        return ir.GroupWait("wgmma", self._pending(operands, span), span)

    def op_cp_async(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        return ir.CpAsync(buf, span) if buf else None

    def op_cp_async_commit_group(self, span, quals, operands, clauses):
        return ir.GroupCommit("cp_async", span)

    def op_cp_async_wait_group(self, span, quals, operands, clauses):
        return ir.GroupWait("cp_async", self._pending(operands, span), span)

    def op_cp_async_wait_all(self, span, quals, operands, clauses):
        # PTX: "cp.async.wait_all is equivalent to: cp.async.commit_group; cp.async.wait_group 0;"
        return [ir.GroupCommit("cp_async", span), ir.GroupWait("cp_async", ir.Const(0, span), span)]

    def op_cp_async_mbarrier_arrive(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        return ir.CpAsyncArrive(bar, ".noinc" in quals, span) if bar else None

    def op_cp_async_bulk(self, span, quals, operands, clauses):
        """1-D `cp.async.bulk.shared::cta|cluster.global.mbarrier::complete_tx::bytes`: in the model
        a bulk copy is a bulk copy (ptx-semantics §5), so it is `tma.load`: into the executing
        CTA, or with `@ CTA` (`.shared::cluster` on a mapa'd address) into that CTA's slot with
        complete_tx on that CTA's barrier, which is `tma.load` with the multicast mask 1 << CTA."""
        buf = self.ref(operands[0], "buffer")
        bar = self.ref(clauses["target"], "mbarrier")
        remote = self._remote(clauses)
        if remote is not None and ".shared::cta" in quals:
            self.error("SV108", "`cp.async.bulk.shared::cta` writes the executing CTA's shared memory; a peer's "
                       "needs `.shared::cluster`", self.span(clauses["remote"]))
            return None
        if buf is None or bar is None:
            return None
        mask = None if remote is None else ir.BinOp("<<", ir.Const(1, span), remote, span)
        return ir.TmaLoad(buf, self._buffer_bytes(buf, clauses, span), bar, mask, span)

    def op_fence_proxy_async(self, span, quals, operands, clauses):
        return fences.bidirectional(span, quals, self.error)

    def op_fence_proxy_async__generic_release(self, span, quals, operands, clauses):
        return fences.half("release", span, quals, self.error)

    def op_fence_proxy_async__generic_acquire(self, span, quals, operands, clauses):
        return fences.half("acquire", span, quals, self.error)

    def op_fence_mbarrier_init(self, span, quals, operands, clauses):
        return ir.Fence("mbarrier_init", span)
