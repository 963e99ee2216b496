"""The tcgen05 instructions (Blackwell, sm_100a) turned into events: allocation, MMA, commit, tensor-memory
loads and stores, their waits and fences (docs/extract.md, "tcgen05").

Tensor-memory addresses. `tcgen05.alloc.….shared::cta.b32 [dst], ncols` writes the address of the allocated
columns to the shared-memory word `dst` (PTX ISA §9.7.16.7.1: "the address of the allocated Tensor Memory
is written to the location specified by the shared memory address dst"); the other warps read it back with
an ordinary `ld.shared`. Extraction records that word (Memory.tmem_words): the allocation is also a `write`
of the word, a load of it a `read` (the checker proves the read ordered after the write), and the value
the load gives is the allocation's address. A CTA allocates once here (a second allocation is refused), so
the address is the base 0: lane in bits 31..16, column in bits 15..0 (§9.7.16.2.1), every tensor-memory
operand is then a column range relative to the allocation, and a region of the protocol is a range of
columns (skeleton: tmem.py). A `tcgen05.ld/st` is a rectangle of lanes x columns (`_ldst`): the warp's lane
quarter and the columns its shape and repetitions cover; the MMA, cp, shift and dealloc cover every lane of
their columns.

The shared-memory operands of `tcgen05.mma` are read from their matrix descriptors exactly as wgmma's
(wgmma_desc.py): the sm_100 descriptor has the same start address, LBO, SBO and base offset fields and
the swizzle mode in bits 61..63 (CUTLASS `UMMA::SmemDescriptor`, cute/arch/mma_sm100_desc.hpp: 0 none,
2 128-byte, 4 64-byte, 6 32-byte; 1, the 128-byte swizzle with 32-byte atoms, and the LBO mode bit are
refused). The instruction descriptor gives M, N and the major-ness of A and B (`UMMA::InstrDescriptor`:
bits 15 and 16, N >> 3 in bits 17..22, M >> 4 in bits 24..28).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .access import shared_target, space_of
from .launch import Event, lanes_of
from .parse import Addr, Imm, Instr, Vec
from .values import UNKNOWN
from .wgmma_desc import operand_ranges

if TYPE_CHECKING:
    from .warp import WarpState

TMEM_BASE = 0  # the address of the CTA's one allocation (module docstring)
_SWIZZLE = {0: 0, 2: 1, 4: 2, 6: 3}  # sm_100 layout type -> the wgmma descriptor's swizzle mode
# K of one MMA per kind, and the bytes of an element (PTX ISA §9.7.16.10.1, "Matrix shape")
_KIND_K = {"kind::f16": (16, 2), "kind::tf32": (8, 4), "kind::f8f6f4": (32, 1), "kind::i8": (32, 1)}
# tcgen05.ld/st shapes: (lanes, bits per lane per repetition) -> columns of 32 bits per repetition
_LDST_COLS = {"32x32b": 1, "16x64b": 2, "16x128b": 4, "16x256b": 8, "16x32bx2": 1}
# PTX ISA §9.7.16.8.1, "Access restrictions": "The Tensor Memory of a CTA is divided into 4 equal chunks such
# that each warp of a warpgroup in the CTA can access a chunk of the Tensor Memory ... A lane of the Tensor
# Memory can be accessed by a single warp in the warpgroup": warp w % 4 of the warpgroup reaches lanes
# 32 * (w % 4) .. 32 * (w % 4) + 31 (the .16x… shapes 16 of them; the quarter is kept, a superset).
QUARTER = 32


def _uniform(run: WarpState, ins: Instr, lanes: int, f):  # type: ignore[no-untyped-def]
    vals = {f(lane) for lane in lanes_of(lanes)}
    if len(vals) != 1 or None in vals:
        raise run.refuse(ins, "an operand of this tcgen05 instruction is not known, or differs between the "
                         "lanes that execute it (a tensor-memory address read from somewhere other than the "
                         "word tcgen05.alloc wrote it to?)")
    return next(iter(vals))


def _int(run: WarpState, op, lane: int) -> int | None:  # type: ignore[no-untyped-def]
    v = run.read(op, lane)
    return v if isinstance(v, int) else None


def _taddr(run: WarpState, op, lane: int) -> int | None:  # type: ignore[no-untyped-def]
    """A tensor-memory address operand: `[r+off]` or a register."""
    v = run.address(op, lane) if isinstance(op, Addr) else run.read(op, lane)
    return v if isinstance(v, int) else None


def _group(run: WarpState, ins: Instr) -> int:
    g = next((m for m in ins.mods if m.startswith("cta_group::")), None)
    if g is None:
        raise run.refuse(ins, f"`{ins.opcode}` without .cta_group (PTX requires it for this form)")
    return int(g.split("::")[1])


def _columns(run: WarpState, ins: Instr, taddr: int, width: int) -> tuple[int, int]:
    col = taddr & 0xFFFF
    if col + width > 512:
        raise run.refuse(ins, f"tensor-memory columns {col}..{col + width} lie beyond the 512 of a CTA")
    return (col, col + width)


def execute(run: WarpState, ins: Instr, lanes: int) -> bool:
    """Every `tcgen05.*` instruction: an event, or a refusal at its line."""
    sub = ins.mods[0] if ins.mods else ""
    if sub in ("alloc", "dealloc"):
        return _alloc(run, ins, lanes, sub == "dealloc")
    if sub == "relinquish_alloc_permit":
        run.events.append(Event("tmem_relinquish", (_group(run, ins),), lanes, ins))
        return True
    if sub == "mma":
        return _mma(run, ins, lanes)
    if sub == "commit":
        return _commit(run, ins, lanes)
    if sub in ("ld", "st"):
        return _ldst(run, ins, lanes, sub)
    if sub in ("wait::ld", "wait::st"):
        run.events.append(Event("tc_wait", (sub[-2:],), lanes, ins))
        return True
    if sub in ("fence::before_thread_sync", "fence::after_thread_sync"):
        run.events.append(Event("tc_fence", ("before" if "before" in sub else "after",), lanes, ins))
        return True
    if sub == "cp":
        return _cp(run, ins, lanes)
    if sub == "shift":
        return _shift(run, ins, lanes)
    raise run.refuse(ins, f"`{ins.opcode}` is not modelled by syncverify (the sparse and block-scaled MMA forms "
                     "have no form in the language yet)")


def _alloc(run: WarpState, ins: Instr, lanes: int, dealloc: bool) -> bool:
    """`tcgen05.alloc.cta_group::G.sync.aligned.shared::cta.b32 [dst], ncols` (and the write of the address
    to dst) / `tcgen05.dealloc.cta_group::G.sync.aligned.b32 taddr, ncols`."""
    group = _group(run, ins)
    ops = ins.operands
    cols = _uniform(run, ins, lanes, lambda lane: _int(run, ops[1], lane))
    if dealloc:
        taddr = _uniform(run, ins, lanes, lambda lane: _int(run, ops[0], lane))
        if taddr & 0xFFFF != TMEM_BASE:
            raise run.refuse(ins, "a deallocation of columns other than the allocation's")
        run.events.append(Event("tmem_alloc", (True, group, cols), lanes, ins))
        return True
    space = space_of(ins)
    dst = _uniform(run, ins, lanes, lambda lane: shared_target(run.address(ops[0], lane), space, run.rank))
    if dst[0] != run.rank:
        raise run.refuse(ins, "tcgen05.alloc writing the address to another CTA's shared memory")
    words = run.mem.tmem_words
    if any(key[0] == run.rank and key != dst for key in words):
        raise run.refuse(ins, "a second tcgen05.alloc in one CTA: extraction models one allocation per CTA "
                         "(tensor-memory addresses are relative to it)")
    words[dst] = TMEM_BASE
    run.mem.tmem_cols[run.rank] = cols
    run.events.append(Event("tmem_alloc", (False, group, cols), lanes, ins))
    full = ((dst[0], dst[1], dst[1] + 4),)
    run.events.append(Event("write", (), lanes, ins, full, None, ((-1, *full[0]),)))
    return True


def _instr_desc(run: WarpState, ins: Instr, lanes: int, op) -> tuple[int, int, bool, bool]:  # type: ignore[no-untyped-def]
    d = _uniform(run, ins, lanes, lambda lane: _int(run, op, lane))
    m, n = ((d >> 24) & 0x1F) << 4, ((d >> 17) & 0x3F) << 3
    if d & 0x4 or not m or not n:  # sparse, or no shape
        raise run.refuse(ins, f"an MMA instruction descriptor {d:#x} that is sparse or has no shape")
    return m, n, bool(d >> 15 & 1), bool(d >> 16 & 1)


def _smem_desc(run: WarpState, ins: Instr, desc: int) -> int:
    """The sm_100 shared-memory descriptor as the wgmma decoder reads it (module docstring)."""
    layout = desc >> 61 & 7
    if layout not in _SWIZZLE or desc >> 52 & 1:
        raise run.refuse(ins, f"a shared-memory matrix descriptor with layout type {layout} or the LBO mode bit "
                         "is not modelled")
    return (desc & ((1 << 61) - 1) & ~(3 << 46)) | (_SWIZZLE[layout] << 62)


def _mma(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`tcgen05.mma.cta_group::G.kind::K [d], a_desc, b_desc, idesc, {disable-output-lane}, enable-input-d`:
    the accumulator columns d..d+N and the operand bytes of A and B (this CTA's half of M and of N with
    cta_group::2). A in tensor memory (`[a]`), block scaling, sparsity and `.ws` are refused."""
    mods = ins.mods
    kind = next((m for m in mods if m.startswith("kind::")), "")
    if kind not in _KIND_K or any(m in ("sp", "ws", "block_scale") or m.startswith(("block_scale", "scale_vec"))
                                  for m in mods):
        raise run.refuse(ins, f"`{ins.opcode}`: only the dense kind::f16/tf32/f8f6f4/i8 MMA with both operands "
                         "in shared memory is modelled")
    group = _group(run, ins)
    ops = ins.operands
    if isinstance(ops[1], Vec) or len(ops) < 4:
        raise run.refuse(ins, "an MMA whose A operand is in tensor memory is not modelled")
    k, elem = _KIND_K[kind]
    m, n, a_mn, b_mn = _instr_desc(run, ins, lanes, ops[3])
    d = _uniform(run, ins, lanes, lambda lane: _taddr(run, ops[0], lane))
    acc = _columns(run, ins, d, n)
    ranges: set[tuple[int, int, int]] = set()
    for op, rows, mn_major in ((ops[1], m // group, a_mn), (ops[2], n // group, b_mn)):
        desc = _uniform(run, ins, lanes, lambda lane, op=op: _int(run, op, lane))
        for lo, hi in operand_ranges(_smem_desc(run, ins, desc), rows, elem, k, not mn_major):
            ranges.add((run.rank, lo, hi))
    run.events.append(Event("tc_mma", (group, (run.rank, *acc)), lanes, ins, tuple(sorted(ranges))))
    return True


def _cp(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`tcgen05.cp.cta_group::G.shape[.multicast] [taddr], s_desc`: shared memory to tensor memory, completed
    by a commit. The bytes read are the descriptor's rows (shape 128x256b: 128 rows of 32 bytes, 4x256b: 4,
    128x128b: 128 rows of 16 bytes, 64x128b: 64), the columns written 256 or 128 bits' worth."""
    shape = next((m for m in ins.mods if "x" in m and m[0].isdigit()), "")
    rows_bits = {"128x256b": (128, 256), "4x256b": (4, 256), "128x128b": (128, 128)}.get(shape)
    if rows_bits is None or any(m.startswith(("b8x16", "b6x16", "b4x16")) for m in ins.mods):
        raise run.refuse(ins, f"`{ins.opcode}`: only the 128x256b, 4x256b and 128x128b shapes without "
                         "decompression are modelled")
    group = _group(run, ins)
    rows, bits = rows_bits
    ops = ins.operands
    taddr = _uniform(run, ins, lanes, lambda lane: _taddr(run, ops[0], lane))
    acc = _columns(run, ins, taddr, bits // 32)
    desc = _uniform(run, ins, lanes, lambda lane: _int(run, ops[1], lane))
    ranges = {(run.rank, lo, hi) for lo, hi in operand_ranges(_smem_desc(run, ins, desc), rows, 1, bits // 8, True)}
    run.events.append(Event("tc_cp", (group, (run.rank, *acc)), lanes, ins, tuple(sorted(ranges))))
    return True


def _shift(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`tcgen05.shift.cta_group::G.down [taddr]` (PTX ISA §9.7.16.9.3): "the shifting of 32-byte elements
    downwards across all the rows, except the last, by one row" of the matrix at taddr -- an asynchronous read
    and write of its 8 columns, completed by a commit, as an MMA's accumulator is."""
    if "down" not in ins.mods:
        raise run.refuse(ins, f"`{ins.opcode}`: only the .down shift is defined by PTX")
    group = _group(run, ins)
    taddr = _uniform(run, ins, lanes, lambda lane: _taddr(run, ins.operands[0], lane))
    acc = _columns(run, ins, taddr, 8)
    run.events.append(Event("tc_shift", (group, (run.rank, *acc)), lanes, ins))
    return True


def _commit(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`tcgen05.commit.cta_group::G.mbarrier::arrive::one[.shared::cluster][.multicast::cluster].b64 [mbar]
    [, ctaMask]`."""
    group = _group(run, ins)
    ops = ins.operands
    space = "cluster" if "shared::cluster" in ins.mods else space_of(ins)
    bar = _uniform(run, ins, lanes, lambda lane: shared_target(run.address(ops[0], lane), space, run.rank))
    mask = -1
    if "multicast::cluster" in ins.mods:
        mask = _uniform(run, ins, lanes, lambda lane: _int(run, ops[1], lane))
    run.events.append(Event("tc_commit", (bar, mask, group), lanes, ins))
    return True


def _ldst(run: WarpState, ins: Instr, lanes: int, sub: str) -> bool:
    """`tcgen05.ld.sync.aligned.shape.num[.pack::16b].b32 r, [taddr]` / `tcgen05.st….num[.unpack::16b].b32
    [taddr], r` (`.16x32bx2`: `r, [taddr], immHalfSplitoff` / `[taddr], immHalfSplitoff, r`): the rectangle
    of tensor memory the warp touches, `(rank, col lo, col hi), (lane lo, lane hi)`.

    The address is `taddr = base + (lane << 16) + column` (PTX ISA §9.7.16.2.1, "Tensor Memory Addressing":
    lane in bits 31..16, column in bits 15..0). Columns: from the address's column, the shape's 32-bit columns
    per repetition times `.num` (`.32x32b`: 1, `.16x64b`: 2, `.16x128b`: 4, `.16x256b`: 8 -- §9.7.16.2.3,
    "a warp executing tcgen05{.ld,.st}.16x256b ... loads from or stores to each of the lane (256 * .num)-bits"),
    twice that with `.pack::16b`/`.unpack::16b` (§9.7.16.8.2: "two 16-bit chunks can be packed into a single
    32-bit chunk in the register": each register holds the 16-bit halves of two adjacent columns; CUTLASS's
    `Copy_Traits<SM100_TMEM_LOAD_32dp32b1x_16b>` reads bits 0..15 and 32..47), and for `.16x32bx2` the second
    half's columns from `immHalfSplitoff` on. Lanes: the warp's quarter (QUARTER), whatever the address's lane
    field says, since no warp reaches another's lanes. An address that is not known (not the allocation's
    word plus a constant) is the whole allocation -- every column it may name -- never a refusal."""
    mods = ins.mods
    shape = next((m for m in mods if m in _LDST_COLS), None)
    num = next((int(m[1:]) for m in mods if m[0] == "x" and m[1:].isdigit()), None)
    if shape is None or num is None:
        raise run.refuse(ins, f"`{ins.opcode}`: shape or repetition not understood")
    ops = ins.operands
    addr = ops[1] if sub == "ld" else ops[0]
    width = _LDST_COLS[shape] * num * (2 if any(m in ("pack::16b", "unpack::16b") for m in mods) else 1)
    if shape == "16x32bx2":
        split = ops[2] if sub == "ld" else ops[1]
        if not isinstance(split, Imm) or split.value < 0:
            raise run.refuse(ins, f"`{ins.opcode}`: the immHalfSplitoff operand is not an immediate")
        width += split.value
    vals = {_taddr(run, addr, lane) for lane in lanes_of(lanes)}
    if None in vals:  # not known: every column of the allocation (sound, may add conflicts)
        cols = (TMEM_BASE, run.mem.tmem_cols.get(run.rank, 512))
    elif len(vals) != 1:
        raise run.refuse(ins, "the lanes of this warp-collective tcgen05 instruction give it different "
                         "tensor-memory addresses")
    else:
        cols = _columns(run, ins, next(iter(vals)), width)  # type: ignore[arg-type]
    quarter = QUARTER * (run.warp % 4)
    if sub == "ld":
        dst = ops[0]
        for lane in lanes_of(lanes):
            for x in dst.items if isinstance(dst, Vec) else (dst,):
                run.write(x, lane, UNKNOWN)
    run.events.append(Event("tc_" + sub, ((run.rank, *cols), (quarter, quarter + QUARTER)), lanes, ins))
    return True
