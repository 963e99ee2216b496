"""The shared-memory bytes a `wgmma.mma_async` operand reads, decoded exactly from its matrix descriptor.

PTX ISA §9.7.15.5.1.2 ("Shared Memory Matrix Layout") and the "Matrix Descriptor Format": a 64-bit
descriptor holds the start address (bits 0-13), the leading dimension byte offset LBO (bits 16-29) and
the stride dimension byte offset SBO (bits 32-45), all in 16-byte units, the matrix base offset (bits
49-51) and the swizzle mode (bits 62-63: 0 none/interleave, 1 128-byte, 2 64-byte, 3 32-byte). The
instruction's `imm-trans-a` / `imm-trans-b` (f16/bf16 only; every other type is K-major) choose the
major-ness: 0 K-major, 1 M-/N-major.

The operand is made of 16-byte chunks. In 16-byte units, with W = 1, 2, 4, 8 for interleave, 32, 64 and
128-byte swizzling, CUTLASS's `make_gmma_desc` (cute/atom/mma_traits_sm90_gmma.hpp) names the canonical
layouts the descriptor describes:

  K-major   interleave  ((8,n),2):((1,SBO),LBO)        swizzled  ((8,n),2):((W,SBO),1)
  MN-major  interleave  ((1,n),(8,k)):((X,SBO),(1,LBO))  swizzled  ((W,n),(8,k)):((1,LBO),(W,SBO))

(first mode: the M or N extent, 8 rows or W chunks at a time; second mode: K, in 16-byte chunks for
K-major, in rows of 8 for MN-major). A swizzled layout then permutes the chunks of each address:
Swizzle<B,4,3> with B = log2(W) XORs address bits 4..4+B-1 with bits 7..7+B-1 -- a chunk stays in its
aligned 16*W-byte unit. The set of chunks read is therefore exact; when the descriptor's base offset is
not 0 (the pattern does not start at the address's own phase; CUTLASS always writes 0), each chunk is
widened to its whole 16*W-byte unit, which can only add bytes (races), never hide one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

_WIDTH = {0: 1, 1: 8, 2: 4, 3: 2}  # swizzle mode -> W (16-byte chunks per swizzled row)


@dataclass(frozen=True)
class MatrixDescriptor:
    """The fields of a wgmma shared-memory matrix descriptor, in bytes."""

    start: int
    lbo: int
    sbo: int
    base_offset: int
    mode: int  # 0 interleave, 1 128-byte, 2 64-byte, 3 32-byte swizzle

    @property
    def width(self) -> int:
        """W: 16-byte chunks per row of the swizzle pattern (1 without swizzling)."""
        return _WIDTH[self.mode]

    @staticmethod
    def decode(desc: int) -> MatrixDescriptor:
        return MatrixDescriptor(start=(desc & 0x3FFF) << 4, lbo=((desc >> 16) & 0x3FFF) << 4,
                                sbo=((desc >> 32) & 0x3FFF) << 4, base_offset=(desc >> 49) & 7,
                                mode=(desc >> 62) & 3)


def chunk_offsets(d: MatrixDescriptor, mn: int, elem: int, k: int, k_major: bool) -> list[int]:
    """The byte offsets from the start address, before swizzling, of the 16-byte chunks of an operand of
    ``mn`` rows (M for A, N for B) by ``k`` elements of ``elem`` bytes, by the canonical layout above."""
    w = d.width
    out: list[int] = []
    if k_major:
        chunks_k = max(k * elem // 16, 1)
        for g in range(max(mn // 8, 1)):
            for i in range(8):
                for c in range(chunks_k):
                    out.append(i * 16 + g * d.sbo + c * d.lbo if w == 1 else i * 16 * w + g * d.sbo + c * 16)
        return out
    chunks_mn = max(mn * elem // 16, 1)
    for j in range(chunks_mn):
        for b in range(max(k // 8, 1)):
            for a in range(8):
                if w == 1:
                    out.append(j * d.sbo + a * 16 + b * d.lbo)
                else:
                    out.append(j % w * 16 + j // w * d.lbo + a * 16 * w + b * d.sbo)
    return out


def swizzle(addr: int, width: int) -> int:
    """Swizzle<B,4,3> of a shared-memory byte address, B = log2(width)."""
    mask = width - 1
    return addr ^ (((addr >> 7) & mask) << 4)


@lru_cache(maxsize=1024)
def operand_ranges(desc: int, mn: int, elem: int, k: int, k_major: bool) -> tuple[tuple[int, int], ...]:
    """The byte ranges [lo, hi) the operand reads, merged and sorted (remembered: a function of its
    arguments, asked again by each warp of a warpgroup at each k-block, ~4,000 chunks a 64x256 tile)."""
    d = MatrixDescriptor.decode(desc)
    w = d.width
    spans: set[tuple[int, int]] = set()
    for off in chunk_offsets(d, mn, elem, k, k_major):
        addr = d.start + off
        if w == 1:
            spans.add((addr, addr + 16))
        elif d.base_offset == 0:
            a = swizzle(addr, w)
            spans.add((a, a + 16))
        else:  # the pattern's phase is not the address's own: the chunk's whole swizzle unit
            unit = 16 * w
            spans.add((addr // unit * unit, addr // unit * unit + unit))
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)
