"""The explicit search's packed store of visited states (engines/store.py, issue #36).

A stored state is one ``bytes`` of its parts' numbers. What must hold for the search to stay exact:
packing is injective (two states pack alike only when they are equal), decoding gives back the
state with parts of the same types, packing a successor against its parent (by identity) gives the
bytes packing it alone (by value) gives, and a search over the packed store explores exactly what a
search over a plain set of whole states explores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import explicit
from syncverify.engines.explicit import Budget, search
from syncverify.engines.reduction import successors_of
from syncverify.engines.store import CHUNK, Store, Visited, key, numbers_of
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import State
from syncverify.semantics.symmetry import Symmetry

ROOT = Path(__file__).resolve().parent.parent
POINTS = [
    ("specs/cluster_multicast_ring.sync", {"ITERS": 6}),  # two CTAs, records of every kind
    ("bench/ring_family.sync", {"STAGES": 2, "CONSUMERS": 2, "ITERS": 4}),  # symmetric consumer warps
    ("specs/cutlass_ws_ring_no_empty_wait.sync", {}),  # several findings
    ("specs/tilelang_bar_h_deadlock.sync", {}),  # a deadlock
]
IDS = [p for p, _ in POINTS]


class _Whole:
    """A stored state kept whole, for the reference store."""

    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        self.state = state


class WholeStates:
    """The simplest exact visited set: a Python set of the whole states (what the packed store
    must agree with)."""

    def __init__(self) -> None:
        self._states: set[State] = set()

    def __len__(self) -> int:
        return len(self._states)

    def next_level(self) -> None:
        pass

    def add(self, state: State, like: object = None, whole: bool = True) -> _Whole | None:
        if state in self._states:
            return None
        self._states.add(state)
        return _Whole(state)


def _machine(path: str, params: dict[str, int]) -> Machine:
    return Machine(load(str(ROOT / path), params))


def _explore(machine: Machine) -> tuple:
    out = search(machine, Budget(), Symmetry(machine.procs, machine.programs, machine.holders))
    findings = sorted((v.code, v.span.line if v.span else 0, len(labels)) for v, labels in out.errors + out.warnings)
    return out.complete, out.states, out.transitions, findings


@pytest.mark.parametrize("path,params", POINTS, ids=IDS)
def test_search_agrees_with_a_set_of_whole_states(path, params, monkeypatch):
    packed = _explore(_machine(path, params))
    monkeypatch.setattr(explicit, "Visited", WholeStates)
    whole = _explore(_machine(path, params))
    assert packed == whole
    assert packed[1] > 20


def _states(machine: Machine, limit: int = 3000) -> list[tuple[State, list[State]]]:
    """States of a breadth-first walk, each with its successors (the objects the model built)."""
    successors = successors_of(machine, True)
    seen = {machine.initial()}
    order = [machine.initial()]
    out = []
    for state in order:
        succ = [r.state for r in successors(state) if r.violation is None and r.state is not None]
        out.append((state, succ))
        for s in succ:
            if s not in seen and len(order) < limit:
                seen.add(s)
                order.append(s)
    return out


def _types(state: State) -> list:
    return [type(part) for part in state] + [[type(x) for x in part] for part in state if isinstance(part, tuple)]


@pytest.mark.parametrize("path,params", POINTS[:2], ids=IDS[:2])
def test_packing_is_exact_and_decodes(path, params):
    """Equal packed bytes exactly for equal states; decoding gives the state back, part types and
    all; a successor packed against its parent packs as it does alone."""
    pairs = _states(_machine(path, params))
    store = Store()
    by_bytes: dict[bytes, State] = {}
    against = 0
    for state, succ in pairs:
        mine = store.pack(state)
        by_bytes.setdefault(key(mine), state)
        assert by_bytes[key(mine)] == state
        parent = store.open(key(mine))
        assert parent.state == state and _types(parent.state) == _types(state)
        for s in succ:
            packed = key(store.pack(s, parent))
            assert packed == key(store.pack(s))
            assert by_bytes.setdefault(packed, s) == s
            decoded = store.open(packed).state
            assert decoded == s and _types(decoded) == _types(s)
            against += 1
    states = {s for state, succ in pairs for s in [state, *succ]}
    assert len(by_bytes) == len(states)
    assert against > 100


def test_record_table_holds_one_object_per_knowledge_set():
    """The records' table keeps each knowledge set (a record's last two fields) as one object per value,
    whatever objects the records it was given held; the records it gives back are equal to those."""
    pairs = _states(_machine(*POINTS[0]))
    store = Store()
    given = {}
    for state, succ in pairs:
        for s in [state, *succ]:
            for r in s.records:
                given[store.record_table(r)] = r
    table = store.record_table.value
    assert all(table[n] == r for n, r in given.items())
    knowledge = [r[-2] for r in table] + [r[-1] for r in table]
    assert len({id(x) for x in knowledge}) == len(set(knowledge))
    fresh = [r[-1] for r in given.values() if r[-1] > 256]  # integers above CPython's shared small ones
    assert len({id(x) for x in fresh}) > len(set(fresh))  # the records given held several objects of a value


def test_records_change_in_one_chunk_only():
    """A successor that changes one record renumbers the chunk that holds it, and shares its
    other chunks with its parent."""
    pairs = _states(_machine(*POINTS[0]))
    store = Store()
    changed = 0
    for state, succ in pairs:
        parent = store.open(key(store.pack(state)))
        for s in succ:
            if len(s.records) != len(state.records) or len(state.records) <= CHUNK:
                continue
            moved = [i for i, (a, b) in enumerate(zip(s.records, state.records, strict=True)) if a != b]
            if len(moved) != 1:
                continue
            mine = store.pack(s, parent)
            chunks = list(mine[len(mine) - len(parent.record_chunks):])
            differ = [c for c, (a, b) in enumerate(zip(chunks, parent.record_chunks, strict=True)) if a != b]
            assert differ == [moved[0] // CHUNK]
            changed += 1
    assert changed >= 5


def test_values_of_different_kinds_never_stand_in_for_each_other():
    """A process state equal to an mbarrier state (or to a record) as a tuple is still decoded as
    the part of its own kind: each kind has its own table."""
    base = _machine(*POINTS[0]).initial()
    twin = base.mbars[0]
    state = base._replace(procs=(twin, *base.procs[1:]))
    store = Store()
    store.pack(base)
    decoded = store.open(key(store.pack(state))).state
    assert decoded == state
    assert decoded.procs[0] is twin or decoded.procs[0] == twin
    assert decoded.mbars == base.mbars


def test_visited_keeps_each_state_once():
    """The store's own answer: a state added twice is a duplicate, whatever object it is."""
    pairs = _states(_machine(*POINTS[1]), limit=500)
    visited = Visited()
    fresh = 0
    for state, succ in pairs:
        first = visited.add(state)
        again = visited.add(tuple.__new__(State, [tuple(p) if isinstance(p, tuple) else p for p in state]))
        assert again is None
        fresh += first is not None
        for s in succ:
            visited.add(s)
    assert len(visited) == len({s for state, succ in pairs for s in [state, *succ]})
    assert fresh > 0


def test_the_compact_key_is_one_to_one_over_every_width():
    """key() keeps a number's byte planes that are not zero throughout: sequences of every width
    (below 256, 65,536, 2**24, 2**32), of several lengths, give keys that decode to themselves and
    are equal only for equal sequences, including a sequence that differs from another only in a
    plane the other leaves out, and sequences whose plain bytes would be each other's."""
    import random
    from array import array

    rng = random.Random(36)
    seqs = {(), (0,), (1, 0), (65536,), (1, 1), (256,), (1 << 24,), (2**32 - 1, 0)}
    for top in (256, 65536, 1 << 24, 1 << 32):
        for n in (1, 2, 3, 7, 62):
            for _ in range(20):
                seqs.add(tuple(rng.randrange(top) for _ in range(n)))
    seqs.discard(())
    keys: dict[bytes, tuple] = {}
    for seq in seqs:
        k = key(array("I", seq))
        assert tuple(numbers_of(k)) == seq
        assert keys.setdefault(k, seq) == seq  # no two sequences share a key
    assert len(key(array("I", [65535] * 62))) == 2 * 62 + 1  # two bytes a number below 65,536
