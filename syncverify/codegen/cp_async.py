"""Non-bulk `cp.async` and `mbarrier.test_wait` in the emitted kernel (a mixin of KernelWriter).

`cp.async B`: every executing thread copies its part of slot B from global memory, 16 bytes per
`cp.async.cg.shared.global` (CUTLASS SM80_CP_ASYNC_CACHEGLOBAL): the lanes of a warp take every
32nd 16-byte chunk, an elected or first thread copies every chunk. Together they write the whole
slot, as the model's write of the slot (semantics/families/cp_async.py). The source is the
pre-stamped global region of the copy's (process, site, occurrence), as for a TMA copy, so a read
that sees the copy's data sees its stamp.

`cp.async.mbarrier.arrive[.noinc]` is issued by every executing thread, as the model counts it (one
arrive-on per thread once that thread's earlier copies complete); without `.noinc` PTX first
increments the pending count, which the spec's init count accounts for exactly as the checker
does. `test_wait` is one `mbarrier.test_wait.parity` whose result is kept and not branched on: the
model's `test_wait` never blocks (a loop until it succeeds is written `wait`, emitted as the
try_wait loop with a watchdog).
"""

from __future__ import annotations

from .. import ir
from . import ptx
from .base import KernelBase


class CpAsyncWriter(KernelBase):
    """op_* handlers for the cp.async family; KernelBase (base.py) supplies line(), the layout and tables."""

    def op_CpAsync(self, op: ir.CpAsync, site: int, part: str, leader: bool) -> None:
        t = self.tables
        chunks = self.layout.slot_words[op.buf.name] // 4
        self.line(f"{self.guard()}{{")
        self.depth += 1
        self._lookup("sv_src", site)
        self.line("if (!known) atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u);")
        self.line(f"const u32 region = known ? (u32)base + o{site} : 0u;")
        self.line(f"const u32* g = src + ((u64)c.cluster * {t.src_regions}u + region) * "
                  f"{t.src_region_words}u;")
        self.line(f"const u32 d = sv_smem({self.slot_ptr(op.buf)});")
        self.line("{ const u32 sv_p[2] = {" + part + "};")
        self.line(f"  for (u32 ch = sv_p[0]; ch < {chunks}u; ch += sv_p[1])")
        self.line(f'    asm volatile("{ptx.CP_ASYNC}" :: "r"(d + 16u * ch), "l"(g + 4u * ch) : "memory"); }}')
        self.depth -= 1
        self.line("}")

    def op_CpAsyncArrive(self, op: ir.CpAsyncArrive, site: int, part: str, leader: bool) -> None:
        asm = ptx.CP_ASYNC_ARRIVE_NOINC if op.noinc else ptx.CP_ASYNC_ARRIVE
        self.line(f'asm volatile("{asm}" :: "r"({self.bar_addr(op.bar)}) : "memory");')

    def op_MbarTestWait(self, op: ir.MbarTestWait, site: int, part: str, leader: bool) -> None:
        self.line("u32 ok;")
        self.line(f'asm volatile("{ptx.test_wait_asm(op)}" : "=r"(ok) : "r"({self.bar_addr(op.bar)}), '
                  f'"r"((u32)({self.expr(op.parity)}) & 1u) : "memory");')
        self.line("(void)ok;  // the result is not branched on (the model's test_wait)")
