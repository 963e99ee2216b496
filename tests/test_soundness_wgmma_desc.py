"""The bytes a wgmma operand reads, decoded exactly from its matrix descriptor (#31): every layout CUTLASS's
`make_gmma_desc` accepts -- K-major and MN-major, interleave and 32/64/128-byte swizzling, 1/2/4-byte
elements -- compared, k-slice by k-slice, with the bytes of the elements the instruction reads, computed
independently from the canonical layout atoms (cute/atom/mma_traits_sm90_gmma.hpp, `Layout_{K,MN}_*_Atom`
tiled with `tile_to_shape`) and the Swizzle<B,4,3> of the shared-memory address.

The false alarm it fixes: the transposed (MN-major) operand of CUTLASS's FMHA P·V product was given the
bounding box of the K-major and MN-major readings, past the end of its stage, so the next stage's TMA
copy in flight "raced" with it (SV301 on a correct kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.ptx.wgmma_desc import MatrixDescriptor, operand_ranges

MODES = {1: 0, 2: 3, 4: 2, 8: 1}  # W (16-byte chunks per swizzled row) -> descriptor swizzle mode


def _swizzle(addr: int, w: int) -> int:
    """Swizzle<log2 W, 4, 3> on a byte address: bits 4.. XOR bits 7.. (cute/swizzle.hpp)."""
    return addr ^ (((addr >> 7) & (w - 1)) << 4)


class Tile:
    """A shared-memory tile of MN x K elements laid out as CUTLASS tiles a canonical GMMA atom over it
    (`tile_to_shape(Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T>{}, Shape<MN, K>{})`: atoms along MN
    first), at a base address aligned to the 1024-byte swizzle pattern."""

    def __init__(self, major: str, w: int, elem: int, mn: int, k: int, base: int):
        self.major, self.w, self.elem, self.mn, self.k, self.base = major, w, elem, mn, k, base
        self.row = 16 * w  # bytes of one row of the atom (its contiguous dimension)

    def offset(self, m: int, kk: int) -> int:
        """The element's byte offset in the tile, before the swizzle (the atom's layout, tiled)."""
        row, per_row = self.row, self.row // self.elem
        if self.major == "K":  # atom: 8 MN rows of `row` bytes along K
            atom = m // 8 + kk // per_row * (self.mn // 8)
            return atom * 8 * row + m % 8 * row + kk % per_row * self.elem
        atom = m // per_row + kk // 8 * (self.mn // per_row)  # MN: `row` bytes along MN, 8 K rows
        return atom * 8 * row + kk % 8 * row + m % per_row * self.elem

    def address(self, m: int, kk: int) -> int:
        a = self.base + self.offset(m, kk)
        return a if self.w == 1 else _swizzle(a, self.w)

    def descriptor(self, k0: int) -> int:
        """make_gmma_desc of the slice at k0 (CUTLASS's DescriptorIterator moves the start address by the
        slice's unswizzled offset): LBO and SBO are the canonical layout's strides in this tiling."""
        row, start = self.row, self.base + self.offset(0, k0)
        atom = 8 * row
        if self.major == "K":
            sbo = atom                                     # the next 8 MN rows: the next atom along MN
            lbo = self.mn // 8 * atom if self.w == 1 else 16  # interleave: the next 16 bytes of K (assumed 1)
        elif self.w == 1:
            sbo = atom                                     # the next 16 bytes of MN: the next atom along MN
            lbo = self.mn * self.elem // row * atom        # the next 8 K rows: the next atom along K
        else:
            lbo = atom                                     # the next W chunks of MN: the next atom along MN
            sbo = self.mn * self.elem // row * atom        # the next 8 K rows
        return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (MODES[self.w] << 62)

    def read(self, k0: int, kw: int) -> set[int]:
        """Every byte of the elements an MN x kw slice at k0 reads."""
        return {self.address(m, kk) + b for m in range(self.mn) for kk in range(k0, k0 + kw) for b in range(self.elem)}


def _bytes(ranges) -> set[int]:
    return {b for lo, hi in ranges for b in range(lo, hi)}


# (major, element bytes, the wgmma's K in elements): transposes exist for 16-bit types only
KINDS = [("K", 2, 16), ("MN", 2, 16), ("K", 4, 8), ("K", 1, 32)]


@pytest.mark.parametrize("w", [1, 2, 4, 8], ids=["interleave", "sw32", "sw64", "sw128"])
@pytest.mark.parametrize(("major", "elem", "kw"), KINDS, ids=[f"{m}-{e}B" for m, e, _k in KINDS])
@pytest.mark.parametrize("mn", [64, 128, 256])
def test_every_k_slice_reads_exactly_its_elements(major, elem, kw, w, mn):
    """For a tile of 4 k-slices (the operand of one k-tile), each slice's decoded footprint is exactly
    the bytes of its elements; together they are the whole tile and nothing past it."""
    k = 4 * kw
    if major == "MN" and mn * elem % (16 * w):
        pytest.skip("the MN extent is not a whole number of atoms")
    tile = Tile(major, w, elem, mn, k, base=0x10000 + 0x400 * 3)
    union: set[int] = set()
    for s in range(4):
        got = _bytes(operand_ranges(tile.descriptor(s * kw), mn, elem, kw, major == "K"))
        assert got == tile.read(s * kw, kw), (major, w, elem, mn, s)
        union |= got
    assert union == set(range(tile.base, tile.base + mn * k * elem))


def test_fmha_pv_mn_major_slice_stays_in_its_stage():
    """The P·V product's V operand: N-major (transposed B), bf16, 128-byte swizzle, a 128 x 128 stage
    followed by the next stage. Each k16 slice reads 4 KiB of its own stage; the bounding box of both
    readings reached into the next stage, whose TMA copy is in flight (the SV301 false alarm)."""
    tile = Tile("MN", 8, 2, 128, 128, base=0x8000)
    stage_end = tile.base + 128 * 128 * 2
    for s in range(8):
        ranges = operand_ranges(tile.descriptor(16 * s), 128, 2, 16, False)
        assert sum(hi - lo for lo, hi in ranges) == 4096
        assert tile.base <= ranges[0][0] and ranges[-1][1] <= stage_end


def test_the_transpose_flag_decides_the_reading():
    """The same descriptor read K-major and MN-major covers different bytes: neither is a superset."""
    tile = Tile("MN", 8, 2, 64, 64, base=0x4000)
    desc = tile.descriptor(16)
    mn = _bytes(operand_ranges(desc, 64, 2, 16, False))
    kmaj = _bytes(operand_ranges(desc, 64, 2, 16, True))
    assert mn == tile.read(16, 16) and mn != kmaj


def test_a_nonzero_base_offset_widens_each_chunk_to_its_swizzle_unit():
    """CUTLASS writes base offset 0; another one means the pattern's phase is not the address's own, and
    each chunk is taken as its whole 128-byte unit (more bytes, never fewer)."""
    tile = Tile("K", 8, 2, 64, 64, base=0x4000)
    desc = tile.descriptor(0) | (3 << 49)
    assert MatrixDescriptor.decode(desc).base_offset == 3
    got = _bytes(operand_ranges(desc, 64, 2, 16, True))
    assert tile.read(0, 16) <= got and got == set(range(tile.base, tile.base + 64 * 128))


# ---- extraction: the N-major B operand of a TMA ring (tests/data/ptx/wgmma_mn_major.cu) -------------------

PTX = Path(__file__).parent / "data" / "ptx"


def test_extracted_mn_major_ring_is_safe(capsys):
    """Four k16 slices per stage read the stage's 8 KiB and nothing of the next stage, whose copy may be
    in flight: safe (the bounding box made it SV301 at the first slice past the stage's middle)."""
    from syncverify.cli import main

    assert main(["check", str(PTX / "wgmma_mn_major.ptx"), "--block", "160", "--param", "2=4"]) == 0
    assert "safe" in capsys.readouterr().out


def test_extracted_mn_major_ring_releasing_before_the_wait_is_a_race(capsys):
    """The twin: the consumer arrives on `empty` before `wgmma.wait_group 0`, so the refill's copy races
    the slices still reading the stage (SV302 at the copy)."""
    from syncverify.cli import main

    assert main(["check", str(PTX / "wgmma_mn_major_no_wait.ptx"), "--block", "160", "--param", "2=4"]) == 1
    assert "SV302" in capsys.readouterr().out
