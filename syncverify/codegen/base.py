"""What every part of the emitter shares, below all of them: the refusal, the kernel's layout and
tables, and the writer's core (output lines, expressions, barrier and slot addresses).

The family writers (cp_async.py, regions.py) are mixins of ``KernelWriter`` (kernel.py) that need
only this core; with it in a room of its own they derive from it, and no module of ``codegen``
imports kernel.py back. This module imports nothing else of ``codegen``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir


class EmitRefused(Exception):
    """The spec cannot be emitted as a runnable Hopper kernel."""


@dataclass
class Layout:
    """Dynamic shared memory: every mbarrier (8 bytes each), then every buffer's slots (128-byte aligned)."""

    mbar_first: dict[str, int]
    nmbars: int
    buf_offset: dict[str, int]
    slot_stride: dict[str, int]
    slot_words: dict[str, int]
    check_words: dict[str, int]  # words every writer of the slot covers (a TMA copy may write less)
    buffers_start: int
    smem_bytes: int


def make_layout(protocol: ir.Protocol, load_bytes: dict[str, int]) -> Layout:
    mbar_first: dict[str, int] = {}
    n = 0
    for mb in protocol.mbarriers:
        mbar_first[mb.name] = n
        n += mb.size or 1
    offset = _align(max(n, 1) * 8, 128)
    start = offset
    buf_offset, stride, words, check = {}, {}, {}, {}
    for b in protocol.buffers:
        buf_offset[b.name] = offset
        stride[b.name] = _align(b.bytes, 128)
        words[b.name] = b.bytes // 4 // 4 * 4
        check[b.name] = min(words[b.name], load_bytes.get(b.name, b.bytes) // 16 * 4)
        offset += stride[b.name] * (b.slots or 1)
    return Layout(mbar_first, n, buf_offset, stride, words, check, start, _align(offset, 128))


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass
class Tables:
    """Per (process, site) ranges into the expectation list, the TMA source and store regions."""

    nprocs: int
    nsites: int
    read_base: list[int] = field(default_factory=list)
    read_count: list[int] = field(default_factory=list)
    src_base: list[int] = field(default_factory=list)
    src_count: list[int] = field(default_factory=list)
    dst_base: list[int] = field(default_factory=list)
    dst_count: list[int] = field(default_factory=list)
    src_regions: int = 0
    src_region_words: int = 4
    dst_regions: int = 0
    dst_region_words: int = 4


@dataclass
class Shape:
    """Who is who in a CTA: the model's processes, per CTA-relative thread."""

    proc_of_tid: list[int]
    proc_lo: list[int]
    proc_n: list[int]
    procs_per_cta: int


class KernelBase:
    """The writer's core, which ``KernelWriter`` and its family mixins share; the attributes are set by
    ``KernelWriter.__init__``."""

    p: ir.Protocol
    layout: Layout
    tables: Tables
    check_stride: int
    out: list[str]
    depth: int
    loops: list[str]
    held_wgmma: bool

    # ------------------------------------------------------------------ output
    def line(self, text: str) -> None:
        self.out.append("  " * self.depth + text)

    def expr(self, e: ir.Expr) -> str:
        match e:
            case ir.Const(value=v):
                return str(v) if -(2**31) <= v < 2**31 else f"{v}LL"
            case ir.Var(name=n):
                return f"v_{n}"
            case ir.Builtin(name="lane"):
                return "(int)(c.tid & 31u)"  # threadIdx.x % 32: the warps are whole (support.py)
            case ir.Builtin(name=n):
                return "(int)c.cta" if n == "cta" else "inst"
            case ir.InRole(role=r):
                return f"in_{r}"
            case ir.UnOp(op=op, operand=x):
                return f"({op}{self.expr(x)})"
            case ir.BinOp(op=op, left=left, right=right):
                return f"({self.expr(left)} {op} {self.expr(right)})"
            case ir.Cond(cond=c, then=then, orelse=orelse):
                return f"({self.expr(c)} ? {self.expr(then)} : {self.expr(orelse)})"
            case ir.Pick(values=values, index=ir.Const(value=i)) if all(0 <= i < len(row) for row in values):
                # one row per CTA when chosen per CTA: the value for the executing CTA's rank
                out = self.expr(ir.Const(values[-1][i], e.span))
                for rank in range(len(values) - 2, -1, -1):
                    out = f"((int)c.cta == {rank} ? {self.expr(ir.Const(values[rank][i], e.span))} : {out})"
                return out
            case ir.Pick(name=n):
                raise EmitRefused(f"{self.p.path}:{e.span.line}: the `choose` array `{n}` is indexed by a "
                                  "variable (or out of range); the kernel is emitted only for constant indices")
        raise TypeError(f"not an expression: {e!r}")

    def index(self, ref: ir.Ref) -> str:
        return "0" if ref.index is None else self.expr(ref.index)

    def bar_addr(self, ref: ir.Ref, idx: str | None = None) -> str:
        first = self.layout.mbar_first[ref.name]
        return f"(sv_bars + 8u * (u32)({first} + {idx if idx is not None else self.index(ref)}))"

    def bar_obj(self, ref: ir.Ref) -> str:
        return f"(u32)({self.layout.mbar_first[ref.name]} + {self.index(ref)})"

    def slot_ptr(self, ref: ir.Ref) -> str:
        off = self.layout.buf_offset[ref.name]
        stride = self.layout.slot_stride[ref.name]
        return f"(sv_smem_base + {off}u + {stride}u * (u32)({self.index(ref)}))"

    def slot_id(self, ref: ir.Ref, cta: str) -> str:
        b = [x.name for x in self.p.buffers].index(ref.name)
        return f"((({cta}) << 24) | ({b}u << 16) | (u32)({self.index(ref)}))"

    def iters(self) -> str:
        vals = [f"v_{n}" for n in self.loops[-3:]]
        vals += ["0"] * (3 - len(vals))
        return f"{', '.join(vals)}, {min(len(self.loops), 3)}u"

    def guard(self) -> str:
        """The abort check before an issue (a copy, an expect_tx, an arrive); none where a wgmma read is held."""
        return "" if self.held_wgmma else "if (!sv_aborted(c)) "

    def _lookup(self, table: str, site: int) -> None:
        self.line(f"const int base = {table}_base[c.proc * {self.tables.nsites}u + {site}u];")
        self.line(f"const bool known = base >= 0 && o{site} < {table}_count[c.proc * {self.tables.nsites}u + {site}u];")
