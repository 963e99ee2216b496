"""Tensor-memory regions of an extracted protocol, and how the tcgen05 events are written.

A region (docs/language.md §3.3a) is the unit of race detection in tensor memory. Extraction makes the
regions from the column ranges the tcgen05 events touch (ptx/tcgen05.py: relative to the CTA's one
allocation): ranges that overlap are one region, so two accesses share a region exactly when their
columns meet -- the same rule as shared-memory slots, at the granularity of the widest access that
covers them. Regions of equal width laid end to end become one array (`tmem t0[2] cols 128;`).

Within a region, a `tcgen05.ld/st` is the rectangle of lanes x columns it touches (ptx/tcgen05.py: the warp's
lane quarter, its columns), written `tcgen05.st R lanes LO..HI cols LO..HI;` (language §7.6) in a region where
that tells two accesses apart: a store and another load or store of the region whose rectangles do not meet
(`ranged`). Elsewhere the statement names the region alone -- every pair of its accesses meets anyway, so the
race findings are the same and the protocol reads as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from .launch import Event

# events that name tensor-memory columns: where the (rank, lo, hi) tuple sits in their args
_COLS_AT = {"tc_mma": 1, "tc_cp": 1, "tc_shift": 1, "tc_ld": 0, "tc_st": 0}
TMEM_KINDS = frozenset({"tmem_alloc", "tmem_relinquish", "tc_mma", "tc_cp", "tc_shift", "tc_commit", "tc_ld", "tc_st",
                        "tc_wait", "tc_fence", "tma_load_2sm"})
# warp-collective (.sync.aligned) in PTX and in the language
TMEM_COLLECTIVE = frozenset({"tmem_alloc", "tmem_relinquish", "tc_ld", "tc_st", "tc_wait"})


def regions(events: Iterable[Event]) -> tuple[tuple[str, int, int, int], ...]:
    """(name, count, columns, first column) of each region: the overlapping column ranges merged."""
    spans = sorted({e.args[_COLS_AT[e.kind]][1:] for e in events if e.kind in _COLS_AT})  # type: ignore[index]
    merged: list[list[int]] = []
    for lo, hi in spans:  # type: ignore[misc]
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out: list[tuple[str, int, int, int]] = []
    i = 0
    while i < len(merged):
        width = merged[i][1] - merged[i][0]
        n = 1
        while i + n < len(merged) and merged[i + n][0] == merged[i + n - 1][1] \
                and merged[i + n][1] - merged[i + n][0] == width:
            n += 1
        out.append((f"t{len(out)}", n, width, merged[i][0]))
        i += n
    return tuple(out)


def _element(regs: tuple[tuple[str, int, int, int], ...], lo: int) -> tuple[str, int, int]:
    """The region element holding column ``lo``: its name, first column and width."""
    for name, n, width, first in regs:
        if first <= lo < first + n * width:
            j = (lo - first) // width
            return (f"{name}[{j}]" if n > 1 else name), first + j * width, width
    raise AssertionError(lo)  # pragma: no cover - every range lies in a region by construction


Rect = tuple[int, int, int, int]  # lanes lo, lanes hi, cols lo, cols hi (absolute columns)


def _rect(e: Event) -> Rect:
    (_rank, lo, hi), (llo, lhi) = e.args  # type: ignore[misc]
    return llo, lhi, lo, hi  # type: ignore[return-value]


def ranged(events: Iterable[Event], regs: tuple[tuple[str, int, int, int], ...]) -> frozenset[str]:
    """The region elements whose loads and stores are written with their rectangles: those where a store
    and another load or store (of one CTA) touch rectangles that do not meet (module docstring)."""
    seen: dict[tuple[int, str], set[tuple[bool, Rect]]] = {}
    for e in events:
        if e.kind in ("tc_ld", "tc_st"):
            rank, lo = e.args[0][0], e.args[0][1]  # type: ignore[index]
            seen.setdefault((rank, _element(regs, lo)[0]), set()).add((e.kind == "tc_st", _rect(e)))  # type: ignore[arg-type]
    out = set()
    for (_rank, name), accs in seen.items():
        for st, a in accs:
            if st and any(not (a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]) for _w, b in accs):
                out.add(name)
    return frozenset(out)


def region_name(regs: tuple[tuple[str, int, int, int], ...], lo: int) -> str:
    for name, n, width, first in regs:
        if first <= lo < first + n * width:
            j = (lo - first) // width
            return f"{name}[{j}]" if n > 1 else name
    raise AssertionError(lo)  # pragma: no cover - every range lies in a region by construction


def render(e: Event, regs: tuple[tuple[str, int, int, int], ...], bar, operands,  # type: ignore[no-untyped-def]
           with_ranges: frozenset[str] = frozenset()) -> list[str]:
    """The statement of one tcgen05 event; `bar(ref)` names a barrier, `operands(e)` the slots an MMA or
    cp reads; a load or store in a region of ``with_ranges`` (`ranged`) names its rectangle."""
    k, a = e.kind, e.args
    if k == "tmem_alloc":
        dealloc, group, cols = a
        return [f"tmem.{'dealloc' if dealloc else 'alloc'} cta_group {group} cols {cols};"]
    if k == "tmem_relinquish":
        return [f"tmem.relinquish cta_group {a[0]};"]
    if k in ("tc_mma", "tc_cp", "tc_shift"):
        group, (_rank, lo, _hi) = a  # type: ignore[misc]
        srcs = operands(e)
        ops = ", ".join([region_name(regs, lo), *srcs])
        return [f"tcgen05.{k[3:]} {ops} cta_group {group};"]
    if k in ("tc_ld", "tc_st"):
        name, first, width = _element(regs, a[0][1])  # type: ignore[index]
        if name not in with_ranges:
            return [f"tcgen05.{k[3:]} {name};"]
        llo, lhi, lo, hi = _rect(e)
        lanes = f" lanes {llo}..{lhi}" if (llo, lhi) != (0, 128) else ""
        cols = f" cols {lo - first}..{hi - first}" if (lo, hi) != (first, first + width) else ""
        return [f"tcgen05.{k[3:]} {name}{lanes}{cols};"]
    if k == "tc_wait":
        return [f"tcgen05.wait::{a[0]};"]
    if k == "tc_fence":
        return [f"tcgen05.fence::{a[0]}_thread_sync;"]
    if k == "tc_commit":
        ref, mask, group = a
        m = f" multicast {mask:#x}" if mask != -1 else ""  # type: ignore[str-format]
        return [f"tcgen05.commit {bar(ref)}{m} cta_group {group};"]
    raise AssertionError(k)  # pragma: no cover
