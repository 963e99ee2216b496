"""The explicit engine's visited set: exact, whatever the hashes of the states are.

The search keeps the states of the levels it builds and expands by a hash of part of a state, and
calls a successor a duplicate of one of them only when it is equal to it (engines/store.py,
Visited); every other successor is packed and looked up among the packed states. These tests make
those hashes collide, with every kept state in one bucket or in five, and check that the search
explores exactly what it explores with real hashes: the same states, transitions, verdict and
findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import store
from syncverify.engines.explicit import Budget, search
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry import Symmetry

ROOT = Path(__file__).resolve().parent.parent
POINTS = [
    ("specs/cluster_multicast_ring.sync", {"ITERS": 2}),  # two CTAs, no symmetry
    ("bench/ring_family.sync", {"STAGES": 2, "CONSUMERS": 2, "ITERS": 4}),  # symmetric consumer warps
    ("specs/cutlass_ws_ring_no_empty_wait.sync", {}),  # several findings
    ("specs/tilelang_bar_h_deadlock.sync", {}),  # a deadlock
]


def _explore(path: str, params: dict[str, int]) -> tuple:
    machine = Machine(load(str(ROOT / path), params))
    out = search(machine, Budget(), Symmetry(machine.procs, machine.programs, machine.holders))
    findings = sorted((v.code, v.span.line if v.span else 0, len(labels)) for v, labels in out.errors + out.warnings)
    return out.complete, out.states, out.transitions, findings


@pytest.mark.parametrize("path,params", POINTS, ids=[p for p, _ in POINTS])
@pytest.mark.parametrize("collide", [lambda s: 0, lambda s: hash(s) % 5], ids=["all-equal", "five-buckets"])
def test_colliding_hashes_change_nothing(path, params, collide, monkeypatch):
    expected = _explore(path, params)
    monkeypatch.setattr(store, "hash", collide, raising=False)
    assert _explore(path, params) == expected
