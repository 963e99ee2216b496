"""The explicit search's frontier held packed beyond a bound (engines/explicit.py, WHOLE_AHEAD; issue #36).

On wide levels most stored states are waiting in the frontier; held whole they cost several KB each, so
the search holds at most ``whole_ahead`` of them whole and the others as their packed bytes, decoded when
popped. What must hold: the bound is kept (the queue never holds more whole states), the frontier is
packed beyond it (states are decoded), and the bound changes nothing the search reports: the same states
in the same order (so the same counts at a state budget), transitions, findings and counterexamples.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import explicit, parallel, store
from syncverify.engines.explicit import Budget, search
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry import Symmetry

ROOT = Path(__file__).resolve().parent.parent
POINTS = [  # each with a frontier wider than the tiny bound
    ("specs/cutlass_ws_ring_no_empty_wait.sync", {}, True, 2_000_000),  # several findings, with their paths
    ("specs/cutlass_sm100_2sm_umma_gemm.sync", {}, True, 2_000_000),  # two CTAs, tensor memory, a warning
    ("specs/tilelang_bar_h_deadlock.sync", {}, False, 2_000_000),  # a deadlock
    ("specs/cluster_multicast_ring.sync", {"ITERS": 2}, False, 1_500),  # stopped by the state budget
]
IDS = [p for p, *_ in POINTS]


def _explore(path: str, params: dict[str, int], reduce: bool, max_states: int, whole_ahead: int) -> tuple:
    machine = Machine(load(str(ROOT / path), params))
    return _summary(search(machine, Budget(max_states=max_states),
                           Symmetry(machine.procs, machine.programs, machine.holders), reduce=reduce,
                           whole_ahead=whole_ahead))


def _summary(out: explicit.SearchOutcome) -> tuple:
    """What a search reports: whether it finished and why not, its counts, its findings with their paths."""
    return (out.complete, out.stop_reason, out.states, out.transitions,
            [(v.code, v.span.line if v.span else 0, labels) for v, labels in out.errors],
            [(v.code, v.span.line if v.span else 0, labels) for v, labels in out.warnings])


class _BoundedQueue(deque):
    """The search's queue, checking on every append that it holds at most BOUND states whole."""

    BOUND = 0
    most = 0
    packed = 0

    def append(self, item: object) -> None:
        super().append(item)
        whole = sum(type(x) is not bytes for x in self)
        assert whole <= _BoundedQueue.BOUND
        _BoundedQueue.most = max(_BoundedQueue.most, whole)
        _BoundedQueue.packed = max(_BoundedQueue.packed, len(self) - whole)


@pytest.mark.parametrize("path,params,reduce,max_states", POINTS, ids=IDS)
def test_a_tiny_bound_reports_what_a_huge_one_does(path, params, reduce, max_states, monkeypatch):
    """States, order (the counts at a state budget), transitions, findings and their paths: equal, with
    the frontier packed beyond 2 states, and then with the cache of duplicates (store.Visited) tiny too."""
    opened: list[bytes] = []
    real_open = store.Visited.open
    monkeypatch.setattr(store.Visited, "open", lambda self, packed: opened.append(packed) or real_open(self, packed))
    whole = _explore(path, params, reduce, max_states, 10**9)
    assert not opened  # a bound above every frontier: nothing packed, nothing decoded
    packed = _explore(path, params, reduce, max_states, 2)
    assert packed == whole
    monkeypatch.setattr(explicit, "Visited", lambda: store.Visited(cache_size=2))  # a cache of 2 to 4 states
    assert _explore(path, params, reduce, max_states, 2) == whole
    assert len(opened) > 10  # most states were waiting packed and decoded when popped
    assert whole[2] > 20 and (whole[4] or whole[5] or max_states < 2_000_000)
    if max_states < 2_000_000:
        assert not whole[0] and whole[2] == max_states + 1  # stopped at the state budget, at the same state


def test_the_queue_holds_at_most_the_bound_whole(monkeypatch):
    """No more than ``whole_ahead`` whole states at any time, and the frontier beyond them packed."""
    monkeypatch.setattr(explicit, "deque", _BoundedQueue)
    _BoundedQueue.BOUND, _BoundedQueue.most, _BoundedQueue.packed = 3, 0, 0
    _explore("specs/cluster_multicast_ring.sync", {"ITERS": 2}, False, 500, 3)
    assert _BoundedQueue.most == 3
    assert _BoundedQueue.packed > 3


def test_two_processes_with_a_tiny_bound_report_what_one_does():
    """The parallel search's workers hold their frontiers packed beyond the bound alike: its outcome is
    still the sequential search's, state for state (engines/parallel.py)."""
    path, params, reduce, max_states = POINTS[0]
    machine = Machine(load(str(ROOT / path), params))
    out = parallel.search(machine, Budget(max_states=max_states),
                          Symmetry(machine.procs, machine.programs, machine.holders), reduce=reduce, whole_ahead=2,
                          jobs=2)
    assert _summary(out) == _explore(path, params, reduce, max_states, 10**9)
