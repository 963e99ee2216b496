"""Sub-slot regions in the emitted kernel: which bytes each access stamps or checks.

A buffer that some access touches by region (`part warp`, `part warpgroup`, `bytes LO..HI`;
``semantics.families.regions``) cannot be checked with one stamp per slot: the warps of an
epilogue each write their own part, and the bulk store that follows reads every part at once.
For such a buffer the expected schedule keeps the slot's content as *segments*, half-open byte
ranges each holding the stamp of the write that last covered it, and every access records the
range the model gave it (``Machine._region`` and ``Parts.bytes``, the checker's own definition:
nothing here computes a part). The kernel then stamps exactly the written range and checks each
segment of a read against its own stamp, so a write that lands in another warp's part shows as
wrong words there, and disjoint parts never disturb each other's check.

Buffers no access touches by region keep the whole-slot stamps (their kernels are unchanged).
"""

from __future__ import annotations

from .. import ir
from ..semantics.families.regions import part_buffers
from .base import EmitRefused, KernelBase

Segment = tuple[int, int, int]  # (lo, hi, stamp): bytes lo ..< hi hold the stamp
Content = tuple[Segment, ...]


def region_buffers(protocol: ir.Protocol) -> frozenset[str]:
    """The buffers some access of the body touches by region (the checker's own walk)."""
    return frozenset(part_buffers(protocol.body))


def whole(size: int, stamp: int) -> Content:
    return ((0, size, stamp),)


def paint(content: Content, lo: int, hi: int, stamp: int) -> Content:
    """The content after a write of bytes lo ..< hi with ``stamp``."""
    out: list[Segment] = []
    for a, b, s in content:
        if a < lo:
            out.append((a, min(b, lo), s))
        if b > hi:
            out.append((max(a, hi), b, s))
    out.append((lo, hi, stamp))
    return tuple(sorted(x for x in out if x[0] < x[1]))


def view(content: Content, lo: int, hi: int) -> Content:
    """What a read of bytes lo ..< hi observes: the content clipped to the range, with neighbouring
    segments of one stamp merged (a read of four parts written by one write is one check)."""
    out: list[Segment] = []
    for a, b, s in content:
        a, b = max(a, lo), min(b, hi)
        if a >= b:
            continue
        if out and out[-1][1] == a and out[-1][2] == s:
            out[-1] = (out[-1][0], b, s)
        else:
            out.append((a, b, s))
    return tuple(out)


def words(seg: tuple[int, int], limit: int, where: str) -> tuple[int, int]:
    """A byte range as the 32-bit words the kernel stamps, clipped to the ``limit`` words every
    writer of the slot covers. The kernel stamps whole words, so a bound inside a word is refused."""
    lo, hi = seg
    if lo % 4 or hi % 4:
        raise EmitRefused(f"{where}: the region bytes {lo}..{hi} does not start and end on a 4-byte word; the "
                          "emitted kernel stamps and checks whole words")
    return min(lo // 4, limit), min(hi // 4, limit)


# Device functions of kernels with region buffers (emitted only there: other kernels are unchanged).
# A region's words come from the expectation array: for a region write, expect[r] = first word and
# expect[r + 1] = end; for a read, expect[r] = n segments, then (first word, end, stamp) for each.
DEVICE_FNS = r"""
// Stamp words lo ..< hi of a slot: this thread takes every nparts-th word of the range.
SV_DEVICE void sv_stamp_range(void* slot, u32 lo, u32 hi, u32 value, u32 part, u32 nparts) {
  u32* v = (u32*)slot;
  for (u32 w = lo + part; w < hi; w += nparts) v[w] = value;
}

// The late form (a replay hold, as sv_stamp_late): each thread stores one contiguous run of the range.
SV_DEVICE void sv_stamp_range_late(void* slot, u32 lo, u32 hi, u32 value, u32 part, u32 nparts) {
  u32* v = (u32*)slot;
  const u32 per = (hi - lo + nparts - 1) / nparts;
  for (u32 j = 0; j < per; ++j)
    if (lo + part * per + j < hi) v[lo + part * per + j] = value;
}

// Compare this thread's words of lo ..< hi with the stamp of the write the model says covered them.
SV_DEVICE void sv_check_range(const SvCtx& c, const void* slot, u32 lo, u32 hi, u32 expected, u32 site, u32 occ,
                              u32 slot_id, u32 part, u32 nparts, u32 stride) {
  const u32* v = (const u32*)slot;
  u32 bad = 0, first_seen = 0, first_word = 0;
  for (u32 w = lo + part; w < hi; w += nparts * stride) {
    const u32 x = v[w];
    if (x != expected) { if (!bad) { first_seen = x; first_word = w; } ++bad; }
  }
  if (bad) {
    atomicAdd(&c.ctl[SV_CTL_BAD_WORDS], bad);
    sv_record(c, 0, c.proc, site, occ, slot_id, expected, first_seen, first_word);
  }
}
"""


class RegionWriter(KernelBase):
    """The kernel lines of region accesses (a mixin of KernelWriter)."""

    def region_write(self, site: int, stamp: str, part: str, late: str | None) -> None:
        """Stamp exactly the words the model gave this write (its record in the expectation list)."""
        n = self.tables.nsites
        self.line(f"{{ const int base = sv_read_base[c.proc * {n}u + {site}u];")
        self.line(f"  if (base >= 0 && o{site} < sv_read_count[c.proc * {n}u + {site}u]) {{")
        self.line(f"    const u32 r = expect[base + o{site}];")
        if late is not None:
            self.line(f"    if ({late}) sv_stamp_range_late(slot, expect[r], expect[r + 1u], {stamp}, {part});")
            self.line(f"    else sv_stamp_range(slot, expect[r], expect[r + 1u], {stamp}, {part});")
        else:
            self.line(f"    sv_stamp_range(slot, expect[r], expect[r + 1u], {stamp}, {part});")
        self.line("  } else atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u); }")

    def region_read_lines(self, site: int, part: str, occ: str, slot: str, sid: str) -> list[str]:
        """A read of a region buffer checks each segment it observed against that segment's stamp."""
        n = self.tables.nsites
        return [f"{{ const int base = sv_read_base[c.proc * {n}u + {site}u];",
                f"  const bool known = base >= 0 && {occ} < sv_read_count[c.proc * {n}u + {site}u];",
                f"  if (known) {{ const u32 r = expect[base + {occ}];",
                "    for (u32 i = 0; i < expect[r]; ++i)",
                f"      sv_check_range(c, {slot}, expect[r + 1u + 3u * i], expect[r + 2u + 3u * i], "
                f"expect[r + 3u + 3u * i], {site}u, {occ}, {sid}, {part}, {self.check_stride}u); }}",
                "  else atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u); }"]
