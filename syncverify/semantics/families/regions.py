"""Sub-slot regions: which bytes of a slot an access touches, and when two accesses overlap.

A slot is the unit that barriers and copies hand over, but the warps of a role often each
write their own part of it (the per-warp partitions of an epilogue staging tile) before one
of them stores the whole tile. An access may therefore name a region of its slot
(docs/language.md §8.4): the whole slot, an explicit half-open byte range, or the part of
the slot that belongs to the executing warp (or warpgroup) of its role.

A region is kept as one int in every access record (``R_REGION``) and in the bmc engine's
static records, so that the explicit machine, the all-iterations lift and bmc share this
one definition:

- ``WHOLE`` (0): every byte of the slot (TMA copies, wgmma reads, plain accesses);
- ``OWN_WARP`` / ``OWN_WARPGROUP``: the owner's part. It stays symbolic: the bytes follow
  from the record's owner, so swapping two identical warps (the symmetry reduction) swaps
  their parts with them and the image of a state is again a state of the program;
- ``explicit(lo, hi)``: bytes ``lo ..< hi``, the same whoever executes it.

Two regions overlap when their byte ranges intersect (exactly; a region of no bytes
overlaps nothing). The tensor-memory columns of an accumulator are the same shape, a slot
plus a range, and can use the same encoding.
"""

from __future__ import annotations

from ...ir import Access
from ..program import Process

WHOLE = 0
OWN_WARP = 1
OWN_WARPGROUP = 2
_EXPLICIT = 1 << 32  # explicit ranges: ((lo + 1) << 32) | hi, so every one is >= this
_LIMIT = 1 << 31  # byte offsets must stay below (buffers are far smaller: smem is < 256 KiB)


def explicit(lo: int, hi: int) -> int:
    """The region of bytes ``lo ..< hi`` (0 <= lo <= hi < 2**31; checked by the caller)."""
    return ((lo + 1) << 32) | hi


def describe(region: int) -> str:
    """How the language writes the region (for messages)."""
    if region == WHOLE:
        return "the whole slot"
    if region == OWN_WARP:
        return "its warp's part"
    if region == OWN_WARPGROUP:
        return "its warpgroup's part"
    return f"bytes {(region >> 32) - 1}..{region & 0xFFFFFFFF}"


def region_of(op: Access) -> int | None:
    """The symbolic region of an access, or None when it is an explicit range (evaluated per step)."""
    if op.part == "warp":
        return OWN_WARP
    if op.part == "warpgroup":
        return OWN_WARPGROUP
    return WHOLE if op.lo is None else None


class Parts:
    """Which part of a slot each process owns: its position among the processes (or the
    warpgroups) of its CTA, role and role instance, the slot split into that many equal
    parts (the last takes the remainder). A slot of fewer bytes than parts is not split
    (every part is the whole slot): parts stay non-empty, which the symmetry argument needs
    (an empty part would overlap nothing, unlike its siblings)."""

    def __init__(self, procs: list[Process]):
        units: dict[tuple, list[Process]] = {}
        for p in procs:
            units.setdefault((p.cta, p.role, p.instance), []).append(p)
        self.warp: list[tuple[int, int]] = [(0, 1)] * len(procs)
        self.group: list[tuple[int, int]] = [(0, 1)] * len(procs)
        for members in units.values():
            members = sorted(members, key=lambda p: (p.warp, p.lo))
            groups = sorted({p.warp // 4 for p in members})
            for i, p in enumerate(members):
                self.warp[p.index] = (i, len(members))
                self.group[p.index] = (groups.index(p.warp // 4), len(groups))

    def bytes(self, region: int, owner: int, size: int) -> tuple[int, int]:
        """The half-open byte range of ``region`` executed by ``owner`` in a slot of ``size`` bytes."""
        if region == WHOLE or owner < 0:
            return 0, size
        if region >= _EXPLICIT:
            return (region >> 32) - 1, region & 0xFFFFFFFF
        i, n = self.warp[owner] if region == OWN_WARP else self.group[owner]
        step = size // n
        if step == 0:
            return 0, size
        return i * step, size if i == n - 1 else (i + 1) * step

    def overlap(self, ra: int, oa: int, rb: int, ob: int, size: int) -> bool:
        """Do the two accesses touch a common byte? (Whole slots overlap anything non-empty.)"""
        if ra == WHOLE and rb == WHOLE:
            return True
        alo, ahi = self.bytes(ra, oa, size)
        blo, bhi = self.bytes(rb, ob, size)
        return alo < bhi and blo < ahi and alo < ahi and blo < bhi

    def covers(self, ra: int, oa: int, rb: int, ob: int, size: int) -> bool:
        """Does region a contain every byte of region b? (A write to a drops the records of b.)"""
        if ra == WHOLE:
            return True
        alo, ahi = self.bytes(ra, oa, size)
        blo, bhi = self.bytes(rb, ob, size)
        return alo <= blo and bhi <= ahi


def part_buffers(code: object) -> dict[str, set[tuple[str, bool]]]:
    """The buffers a compiled program accesses by region: name -> {(kind, remote)}, kind one of
    "warp", "warpgroup", "bytes"; remote: the access is to a peer CTA's buffer."""
    out: dict[str, set[tuple[str, bool]]] = {}

    def walk(obj: object) -> None:
        if isinstance(obj, Access):
            if obj.part is not None or obj.lo is not None:
                out.setdefault(obj.buf.name, set()).add((obj.part or "bytes", obj.remote is not None))
            return
        if isinstance(obj, tuple):
            for x in obj:
                walk(x)
        elif hasattr(obj, "__dataclass_fields__"):
            for f in obj.__dataclass_fields__:
                if f != "span":
                    walk(getattr(obj, f))

    walk(code)
    return out


def asymmetric_procs(procs: list[Process], codes: list[object]) -> dict[int, object]:
    """What the symmetry reduction must add to a process's key so that swapping two warps
    of a group keeps the overlap relation (the soundness condition, docs/model.md).

    Parts of one unit (CTA, role, instance, division) are pairwise disjoint and each overlaps
    the whole slot, so whether two of them overlap depends only on whether their owners are
    equal, which any permutation within the unit keeps. That fails when the buffer is also
    accessed by an explicit range, by parts of another unit or of the other division (warp 0's
    part overlaps some ranges that warp 1's does not): such processes keep their identity.
    Warpgroup parts are shared by the warps of one warpgroup, so they swap only within it.
    Each CTA's buffers are apart from the others' unless a region access reaches a peer's."""
    per_proc = [part_buffers(c) for c in codes]
    remote = {name for bufs in per_proc for name, kinds in bufs.items() if any(r for _, r in kinds)}
    users: dict[tuple, set[tuple]] = {}

    def pool(name: str, p: Process) -> tuple:
        return (name, None if name in remote else p.cta)

    for p, bufs in zip(procs, per_proc, strict=True):
        for name, kinds in bufs.items():
            for k, _ in kinds:
                users.setdefault(pool(name, p), set()).add((p.cta, p.role, p.instance, k) if k != "bytes"
                                                           else ("bytes",))
    out: dict[int, object] = {}
    for p, bufs in zip(procs, per_proc, strict=True):
        extra: list[object] = []
        for name, kinds in sorted(bufs.items()):
            if len(users[pool(name, p)]) > 1:
                extra = ["identity", p.index]
                break
            if any(k == "warpgroup" for k, _ in kinds):
                extra.append(("warpgroup", p.warp // 4))
        if extra:
            out[p.index] = tuple(extra)
    return out


__all__ = ["OWN_WARP", "OWN_WARPGROUP", "WHOLE", "Parts", "asymmetric_procs", "describe", "explicit", "region_of"]
