"""Sub-ranges of a tensor-memory region: the lanes x columns rectangle a `tcgen05.ld` / `tcgen05.st` touches.

Tensor memory is 128 lanes x 512 columns per CTA (PTX ISA, "Tensor Memory"); a `tcgen05.ld/st` with shape
`.32x32b.xN` (or `.16x256b`, …) moves a chunk of lanes and columns, and kernels split one region into chunks
that their warps load and store (a warp reaches the 32 lanes of its quarter of the warpgroup). Two accesses
of one region conflict only where their rectangles overlap: Meta's TLX FA backward (facebookexperimental/
triton PR #1992) stores P over the upper columns of the region it loads qkT from, with a different
warp -> chunk map for the store than for the load, so one warp's store overlaps another warp's load.

A record's R_REGION holds the rectangle: WHOLE (0) is every lane and column, as an access without ranges
always meant (and as every `tcgen05.mma`/`tcgen05.cp` accumulator write and operand read still is); otherwise
1 + lanes_lo + lanes_hi << 8 + cols_lo << 16 + cols_hi << 26 (half-open bounds, columns counted from the
region's first). The handlers of families/tcgen05.py skip records apart from an access and let a write
replace only the records it covers.
"""

from __future__ import annotations

from ... import ir
from ..core import Violation
from .regions import WHOLE

LANES = 128  # tensor-memory lanes of a CTA
_B8, _B10 = 0xFF, 0x3FF


def encode(lanes: tuple[int, int], cols: tuple[int, int]) -> int:
    return 1 + lanes[0] + (lanes[1] << 8) + (cols[0] << 16) + (cols[1] << 26)


def bounds(region: int, ncols: int) -> tuple[int, int, int, int]:
    """(lanes lo, lanes hi, cols lo, cols hi) of a record's region in a region of ``ncols`` columns."""
    if region == WHOLE:
        return 0, LANES, 0, ncols
    v = region - 1
    return v & _B8, (v >> 8) & _B8, (v >> 16) & _B10, (v >> 26) & _B10


def overlap(a: int, b: int, ncols: int) -> bool:
    """Do two rectangles of one region share a lane-column cell? (Always, where either is WHOLE.)"""
    if a == WHOLE or b == WHOLE:
        return True
    al, ah, ac, ad = bounds(a, ncols)
    bl, bh, bc, bd = bounds(b, ncols)
    return al < bh and bl < ah and ac < bd and bc < ad


def covers(a: int, b: int, ncols: int) -> bool:
    """Does rectangle ``a`` contain every cell of ``b``?"""
    if a == WHOLE:
        return True
    al, ah, ac, ad = bounds(a, ncols)
    bl, bh, bc, bd = bounds(b, ncols)
    return al <= bl and bh <= ah and ac <= bc and bd <= ad


def access_region(machine, op: ir.TmemAccess, ncols: int, env, ctx) -> int:  # type: ignore[no-untyped-def]
    """The rectangle a `tcgen05.ld/st` touches; SV104 when a range is empty or leaves the region. A range
    that covers the whole of its dimension is the same as none, so the whole-region form keeps its meaning."""
    if op.lanes is None and op.cols is None:
        return WHOLE
    out = []
    for rng, limit, what in ((op.lanes, LANES, "lanes"), (op.cols, ncols, "columns")):
        if rng is None:
            out.append((0, limit))
            continue
        lo, hi = machine._eval(rng[0], env, ctx), machine._eval(rng[1], env, ctx)
        if not 0 <= lo < hi <= limit:
            raise Violation("SV104", f"{what} {lo}..{hi} is not a non-empty range inside `{op.region.name}`'s {limit} "
                            f"{what}", op.span)
        out.append((lo, hi))
    if out[0] == (0, LANES) and out[1] == (0, ncols):
        return WHOLE
    return encode(out[0], out[1])

