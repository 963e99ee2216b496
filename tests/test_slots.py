"""Shared memory cut into slots (ptx/slots.py): bytes share a slot exactly when the same accesses touch them.

`partition` groups accesses by their byte ranges before it cuts; these tests compare it with the definition
read byte by byte, on random accesses that have several disjoint ranges each (a wgmma's operand reads), so
that two pieces of one access's footprint must land in one slot and a shared range alone must not.
"""

from __future__ import annotations

import itertools
import random

import pytest

from syncverify.ptx.launch import Event, Refusal
from syncverify.ptx.parse import Instr
from syncverify.ptx.slots import coalesce, partition


class _Mod:
    path = "k.ptx"

    def source_line(self, line: int) -> str:
        return ""


def _instr(line: int) -> Instr:
    return Instr("ld.shared", (), None, False, line, 1, None)


def _by_bytes(events: dict[object, list[Event]]) -> list[frozenset[int]]:
    """The definition: per byte, the accesses touching it; bytes with equal sets form one slot."""
    who: dict[int, set[tuple[object, int]]] = {}
    for key, evs in events.items():
        for k, e in enumerate(evs):
            for _r, s, t in e.ranges:
                for b in range(s, t):
                    who.setdefault(b, set()).add((key, k))
    groups: dict[frozenset[tuple[object, int]], set[int]] = {}
    for b, ids in who.items():
        groups.setdefault(frozenset(ids), set()).add(b)
    return sorted((frozenset(g) for g in groups.values()), key=min)


def _slots_bytes(slot_of: list[tuple[int, int, str]]) -> list[frozenset[int]]:
    named: dict[str, set[int]] = {}
    for a, b, name in slot_of:
        named.setdefault(name, set()).update(range(a, b))
    return sorted((frozenset(g) for g in named.values()), key=min)


def _random_events(rng: random.Random) -> dict[object, list[Event]]:
    out: dict[object, list[Event]] = {}
    for warp in range(rng.randint(1, 3)):
        evs = []
        for k in range(rng.randint(1, 6)):
            starts = sorted(rng.sample(range(0, 64, 4), rng.randint(1, 3)))
            ranges = tuple((0, s, s + 4 * rng.randint(1, 2)) for s in starts)
            evs.append(Event(rng.choice(("read", "write", "wgmma_read")), (), 1, _instr(warp * 10 + k), ranges))
        out[warp] = evs * rng.randint(1, 3)  # a loop body repeated: equal footprints again
    return out


def test_slots_are_the_bytes_the_same_accesses_touch() -> None:
    rng = random.Random(7)
    for _ in range(300):
        events = _random_events(rng)
        _slots, slot_of, _hosted = partition(_Mod(), events, set())  # type: ignore[arg-type]
        assert _slots_bytes(slot_of) == _by_bytes(events)


def test_two_pieces_of_one_access_are_one_slot() -> None:
    # access A reads [0, 8) and [16, 24); nothing else touches either: one slot of two pieces
    a = Event("wgmma_read", (), 1, _instr(1), ((0, 0, 8), (0, 16, 24)))
    b = Event("read", (), 1, _instr(2), ((0, 8, 16),))
    slots, slot_of, _ = partition(_Mod(), {0: [a, b]}, set())  # type: ignore[arg-type]
    assert _slots_bytes(slot_of) == [frozenset({*range(0, 8), *range(16, 24)}), frozenset(range(8, 16))]
    assert len(slots) == 2


def test_barrier_bytes_split_between_slots_are_refused_at_the_first_access() -> None:
    # the mbarrier at 8 is data to two accesses that cut its bytes at 12: refused at the first one's line
    first = Event("write", (), 1, _instr(5), ((0, 0, 12),))
    later = Event("read", (), 1, _instr(9), ((0, 12, 20),))
    with pytest.raises(Refusal) as got:
        partition(_Mod(), {0: [later], 1: [first, later]}, {8})  # type: ignore[arg-type]
    assert got.value.line == 9 and "mbarrier at 0x8" in got.value.message
    _slots, _slot_of, hosted = partition(_Mod(), {0: [Event("read", (), 1, _instr(3), ((0, 0, 16),))]}, {8})  # type: ignore[arg-type]
    assert hosted == {8}


def _coalesced_by_runs(evs: list[Event]) -> tuple[list[Event], list[int]]:
    """The definition of `coalesce`, read as runs: consecutive accesses of one kind by the same lanes are one
    (reads, writes, wgmma operand reads); the same registers read or written again are one (rs_read/rs_write)."""
    def run_key(k: int) -> object:
        e = evs[k]
        if e.kind in ("read", "write", "wgmma_read"):
            return (e.kind, e.lanes)
        if e.kind in ("rs_read", "rs_write"):
            return (e.kind, e.lanes, e.args)
        return ("alone", k)

    out: list[Event] = []
    owner: list[int] = []
    for _key, group in itertools.groupby(range(len(evs)), key=run_key):
        members = [evs[k] for k in group]
        first = members[0]
        if len(members) > 1 and first.kind in ("read", "write", "wgmma_read"):
            first = Event(first.kind, first.args, first.lanes, first.instr,
                          tuple(sorted({r for e in members for r in e.ranges})), None,
                          tuple(sorted({f for e in members for f in e.footprint})))
        owner += [len(out)] * len(members)
        out.append(first)
    return out, owner


def test_coalesce_merges_runs_of_one_kind_by_the_same_lanes() -> None:
    rng = random.Random(11)
    kinds = ("read", "write", "wgmma_read", "rs_read", "rs_write", "arrive")
    for _ in range(400):
        evs = []
        for k in range(rng.randint(0, 12)):
            s = 4 * rng.randint(0, 8)
            evs.append(Event(rng.choice(kinds), (rng.randint(0, 1),), rng.choice((1, 3)), _instr(k),
                             ((0, s, s + 4),), rng.choice((None, _instr(99))),
                             ((rng.randint(0, 1), 0, s, s + 4),)))
        owner: list[int] = []
        got = coalesce(evs, owner)
        assert (got, owner) == _coalesced_by_runs(evs)
        assert coalesce(evs) == got
