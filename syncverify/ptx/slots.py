"""Shared memory cut into slots: the byte ranges the extracted protocol names.

Accesses share a slot exactly when they share bytes (bytes touched by exactly the same accesses form one slot,
contiguous or not); back-to-back accesses of one kind by the same lanes are one access first (``coalesce``);
an mbarrier's 8 bytes never straddle two slots (storage.py: barrier memory reused as data). Computed once per
set of sequences (``every_slots``): the protocols of a symbolic extraction's residues share it (symextract.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from .launch import Event, Refusal, source_of
from .parse import Instr, Module

MAX_SLOTS = 256


def refuse(mod: Module, ins: Instr, why: str) -> Refusal:
    return Refusal(mod.path, ins.line, ins.column, f"cannot extract: {why}", mod.source_line(ins.line),
                   f"CUDA source: {source_of(ins)}" if ins.src else "")


BAR_KINDS = {"init", "inval", "wait", "arrive", "arrive_drop", "arrive_tx", "arrive_drop_tx", "expect_tx",
              "complete_tx", "tc_commit", "probe"}


def bars_named(seqs: Iterable[list[Event]]) -> set[int]:
    """The offsets of the mbarriers the events name."""
    bars: set[int] = set()
    for evs in seqs:
        for e in evs:
            if e.kind in BAR_KINDS:
                bars.add(e.args[0][1])  # type: ignore[index]
            elif e.kind in ("tma_load", "tma_load_2sm", "clc_try_cancel"):
                bars.add(e.args[2][1])  # type: ignore[index]
    return bars


# the slots, each byte range's slot, the barriers that accesses touch as data (``partition``)
Slots = tuple[list[tuple[str, int, int, int, int]], list[tuple[int, int, str]], set[int]]


def every_slots(mod: Module, every: dict[object, list[Event]]) -> Slots:
    """What `build` computes from `every` alone (the slots of all the sequences): the same for each protocol
    that shares `every`, so computed once for them (symextract.py: one per residue and per small trip count)."""
    return partition(mod, {k: coalesce(v) for k, v in every.items()}, bars_named(every.values()))


def _ranges(e: Event) -> list[tuple[int, int, int]]:
    """(rank, start, end) byte ranges of buffer accesses (the rank is the accessed CTA)."""
    if e.kind in ("read", "write", "wgmma_read", "tc_mma", "tc_cp"):
        return list(e.ranges)
    if e.kind in ("tma_load", "tma_load_2sm", "clc_try_cancel"):
        (rank, off), size = e.args[0], e.args[1]  # type: ignore[misc]
        return [(rank, off, off + size)]  # type: ignore[operator]
    if e.kind == "tma_store":
        (rank, off), size = e.args[0], e.args[1]  # type: ignore[misc]
        return [(rank, off, off + size)]  # type: ignore[operator]
    return []


def coalesce(evs: list[Event], owner: list[int] | None = None) -> list[Event]:
    """Merge back-to-back accesses of one kind by the same lanes into one access.

    Nothing that synchronizes lies between them, so every other access is
    ordered with both or with neither: the race findings are the same. That
    holds for the asynchronous operand reads of back-to-back wgmma too: no
    commit lies between them, so one `wgmma.wait` completes both (a k-tile's
    four m64n128k16 instructions become one read of the stage). ``owner`` receives, for each event,
    the index of the access it became part of.
    """
    out: list[Event] = []
    ranges: set[tuple[int, int, int]] | None = None  # while out[-1] grows: the ranges and footprints of
    footprint: set[tuple[int, int, int, int]] = set()  # its accesses so far, the merged event built once
    for e in evs:
        last = out[-1] if out else None
        same = last is not None and last.kind == e.kind and last.lanes == e.lanes
        # the same registers read or written again with nothing between: one access (wgmma_regs.py)
        if same and e.kind in ("rs_read", "rs_write") and last.args == e.args:  # type: ignore[union-attr]
            if owner is not None:
                owner.append(len(out) - 1)
            continue
        if same and e.kind in ("read", "write", "wgmma_read"):
            if ranges is None:
                ranges, footprint = set(last.ranges), set(last.footprint)  # type: ignore[union-attr]
            ranges.update(e.ranges)
            footprint.update(e.footprint)
            if owner is not None:
                owner.append(len(out) - 1)
            continue
        if ranges is not None:
            out[-1] = _merged(out[-1], ranges, footprint)
            ranges = None
        if owner is not None:
            owner.append(len(out))
        out.append(e)
    if ranges is not None:
        out[-1] = _merged(out[-1], ranges, footprint)
    return out


def _merged(first: Event, ranges: set[tuple[int, int, int]], footprint: set[tuple[int, int, int, int]]) -> Event:
    """One access standing for back-to-back ones that began with `first`."""
    return Event(first.kind, first.args, first.lanes, first.instr, tuple(sorted(ranges)), None,
                 tuple(sorted(footprint)))


def partition(mod: Module, events: dict, bars: set[int]):  # type: ignore[no-untyped-def,type-arg]
    """Partition the accessed bytes so that accesses share a slot exactly when they share bytes.

    Bytes touched by exactly the same accesses form one slot, whether or not
    they are contiguous: merging them loses nothing, since any access that
    touches one touches all.
    """
    # accesses with the same byte ranges stand together: bytes are touched by exactly the accesses whose
    # ranges contain them, so grouping bytes by the footprints (an access's ranges) that touch them groups
    # them by the accesses that do; a residue's events repeat the loop body's footprints many times
    first: dict[tuple[tuple[int, int], ...], Instr] = {}  # each footprint, with its first access
    for evs in events.values():
        for e in evs:
            ranges = _ranges(e)
            if ranges:
                first.setdefault(tuple((s, t) for _r, s, t in ranges), e.instr)
    bounds: set[int] = set()
    hosted: dict[int, Instr] = {}  # barriers whose bytes accesses touch (data before their init, after their
    #                                inval), each with the first access that does
    for footprint, instr in first.items():  # in the order of each footprint's first access
        for s, t in footprint:
            for b in bars:
                if s < b + 8 and b < t:
                    hosted.setdefault(b, instr)
                    bounds.update((b, b + 8))  # the barrier's bytes: in one slot, never split between two
            bounds.update((s, t))
    cuts = sorted(bounds)
    index = {c: i for i, c in enumerate(cuts)}
    who: list[set[int]] = [set() for _ in cuts]
    for i, footprint in enumerate(first):
        for s, t in footprint:
            for j in range(index[s], index[t]):
                who[j].add(i)
    by_sig: dict[frozenset[int], list[tuple[int, int]]] = {}
    for j in range(len(cuts) - 1):
        if who[j]:
            pieces = by_sig.setdefault(frozenset(who[j]), [])
            if pieces and pieces[-1][1] == cuts[j]:
                pieces[-1] = (pieces[-1][0], cuts[j + 1])
            else:
                pieces.append((cuts[j], cuts[j + 1]))
    groups = list(by_sig.values())
    if len(groups) > MAX_SLOTS:
        raise Refusal(mod.path, 1, 1, f"cannot extract: the accesses cut shared memory into {len(groups)} "
                      f"separate regions (more than {MAX_SLOTS}); slots would need sub-slot byte regions, "
                      "which the language does not have yet")
    slots: list[tuple[str, int, int, int, int]] = []
    slot_of: list[tuple[int, int, str]] = []
    i = 0
    k = 0

    def size(g: list[tuple[int, int]]) -> int:
        return sum(b - a for a, b in g)

    while i < len(groups):
        n = 1
        while i + n < len(groups) and size(groups[i + n]) == size(groups[i]) and len(groups[i + n]) == 1 \
                and len(groups[i]) == 1 and groups[i + n][0][0] == groups[i + n - 1][-1][1]:
            n += 1
        name = f"s{k}"
        k += 1
        slots.append((name, n, size(groups[i]), groups[i][0][0], len(groups[i])))
        for j in range(n):
            for a, b in groups[i + j]:
                slot_of.append((a, b, f"{name}[{j}]" if n > 1 else name))
        i += n
    for b, instr in hosted.items():
        pieces = {name for a, end, name in slot_of if a < b + 8 and b < end}
        if len(pieces) > 1 or not any(a <= b and b + 8 <= end for a, end, _n in slot_of):
            raise refuse(mod, instr, f"the bytes of the mbarrier at {b:#x} are accessed as data, but by accesses "
                          "that split them between slots; the language places a barrier in one slot")
    return slots, slot_of, set(hosted)
