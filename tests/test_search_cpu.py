"""Work the explicit search no longer does, with the same answers (issue #36: CPU per state).

* ``Machine.wait_cannot_be_lone``: the reduction's first loop leaves the step of an mbarrier wait
  that cannot be taken alone to the observing-wait rule (Reduction._observing_wait). Each True
  answer is checked against the step (it never says that it commutes), both answers occur where
  the step passes, and the search with the question answered False everywhere (every wait stepped
  in the first loop, as before) explores the same states and transitions with the same findings
  and counterexample lengths.
* The knowledge updates remembered by the identity of their records (semantics/state.py,
  _knowledge_memo) and the one records object per value the store hands on
  (Visited._shared_records): the search with both off explores the same; a remembered answer is
  never handed to another tuple that happens to get the id() of a dead one.
* The store's splice of a successor whose records grew or shrank (_Chunks.spliced) numbers the
  chunks exactly as numbering the whole sequence does.
"""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import store as store_mod
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.successors import _POR_WAIT, Reduction
from syncverify.engines.store import _Chunks, _Elements
from syncverify.semantics import state as state_mod
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import P_PC

ROOT = Path(__file__).resolve().parent.parent
POINTS = [  # waits that observe a phase, first waits that do not, waits taken alone (asserted below)
    ("specs/cutlass_ws_ring.sync", {}),
    ("specs/cutlass_sm90_consumer_try_wait.sync", {}),
    ("specs/nvfuser_warp_specialized.sync", {}),
    ("bench/ring_family.sync", {"STAGES": 2, "CONSUMERS": 2, "ITERS": 4}),  # consumers observing one phase
    ("specs/cluster_multicast_ring.sync", {"ITERS": 2}),  # two CTAs
    ("specs/cutlass_ws_ring_no_empty_wait.sync", {}),  # findings
    ("specs/tilelang_bar_h_deadlock.sync", {}),  # a deadlock
]
IDS = [f"{Path(p).stem}{d}" for p, d in POINTS]


def _summary(path: str, defines: dict) -> tuple:
    protocol = load(str(ROOT / path), defines)
    result = explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    findings = sorted((d.code, d.span.line if d.span else 0, d.message, len(d.trace)) for d in result.diagnostics)
    return result.verdict, result.stats.states, result.stats.transitions, findings


@pytest.mark.parametrize(("path", "defines"), POINTS[:4], ids=IDS[:4])
def test_wait_cannot_be_lone_agrees_with_the_step(path, defines, monkeypatch):
    counts = {"never alone, passes": 0, "may be alone, alone": 0}
    walk = Reduction.successors

    def checked(self, state):
        machine = self.machine
        for p, classes in enumerate(self._por_class):
            if classes[state.procs[p][P_PC]] is not _POR_WAIT:
                continue
            answer = machine.wait_cannot_be_lone(state, p)
            res = machine.step_process(state, p)
            passes = res is not None and res.violation is None
            if answer:
                assert not (passes and res.lone), (p, state.procs[p][P_PC])
                counts["never alone, passes"] += passes
            elif passes and res.lone:
                counts["may be alone, alone"] += 1
        return walk(self, state)

    monkeypatch.setattr(Reduction, "successors", checked)
    protocol = load(str(ROOT / path), defines)
    explore(protocol, Budget(max_states=3_000, seconds=300), Machine(protocol))
    # both occur: waits left to the observing rule, and waits the first loop takes alone
    assert all(counts.values()), counts


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_with_every_wait_stepped_first(path, defines, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(Machine, "wait_cannot_be_lone", lambda self, state, p: False)
    assert _summary(path, defines) == with_it


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_without_remembered_updates(path, defines, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(state_mod, "_remembered", lambda kind, records, a, b: None)
    monkeypatch.setattr(store_mod.Visited, "_shared_records", lambda self, state, numbers: state)
    assert _summary(path, defines) == with_it


def _record(i: int, known: int, aknown: int = 0) -> tuple:
    return (0, 0, i, 0, 0, 0, 1, 10 + i, 0, 0, -1, 0, aknown, known)


def test_remembered_update_never_answers_for_another_tuple():
    state_mod._knowledge_memo.clear()
    rng = random.Random(7)
    for trial in range(3_000):
        # fresh tuples, each dropped after use: CPython reuses their memory, so a table keyed by a
        # bare id() would hand one tuple's answer to the next
        records = tuple(_record(i, rng.getrandbits(6), rng.getrandbits(6)) for i in range(rng.randrange(1, 6)))
        source, target = 1 << rng.randrange(6), 1 << rng.randrange(6)
        assert state_mod._transfer(records, source, target) == state_mod._transfer_all(records, source, target)
        assert state_mod.shift_phase(records, source, target) == state_mod._shift_phase_all(records, source, target)
        assert state_mod.clear_bits(records, source) == state_mod._clear_bits_all(records, source)
        assert state_mod.sorted_records(records[::-1]) == tuple(sorted(records))
        if trial % 500 == 0:  # the same object again: remembered, the same answer
            assert state_mod._transfer(records, source, target) is state_mod._transfer(records, source, target)
    assert len(state_mod._knowledge_memo) <= state_mod._KNOWLEDGE_MEMO_SIZE


def test_remembered_updates_bounded_by_their_records(monkeypatch):
    """The table of knowledge updates is emptied when the tuples it was asked of hold
    _KNOWLEDGE_MEMO_RECORDS records together, before it holds _KNOWLEDGE_MEMO_SIZE entries."""
    monkeypatch.setattr(state_mod, "_KNOWLEDGE_MEMO_RECORDS", 100)
    state_mod._knowledge_memo.clear()
    monkeypatch.setattr(state_mod, "_knowledge_held", 0)
    kept = []  # alive, so that each is remembered under its own id()
    most = 0
    for i in range(60):
        records = tuple(_record(j, 1 << (i % 5), 0) for j in range(10))
        kept.append(records)
        state_mod._transfer(records, 1, 2)
        most = max(most, len(state_mod._knowledge_memo))
        held = sum(len(r) for r, _ in state_mod._knowledge_memo.values())
        assert held == state_mod._knowledge_held <= 100
    assert most == 10  # ten tuples of ten records, then it starts over


def test_splice_numbers_chunks_as_the_whole_sequence_does():
    rng = random.Random(11)
    table = _Elements()
    chunks = _Chunks(table)
    reference = _Chunks(table)  # the same elements, its own chunk table: compared by chunk contents
    for _ in range(400):
        old = tuple(_record(i, rng.getrandbits(4)) for i in range(rng.randrange(1, 40)))
        old_eids = array("I", table.all_of(old))
        old_chunks = array("I", chunks.all_of(old_eids))
        seq = list(old)
        for _ in range(rng.randrange(1, 4)):  # records added, dropped, rebuilt equal, changed
            edit = rng.randrange(4)
            at = rng.randrange(len(seq) + 1)
            if edit == 0 or not seq:
                seq.insert(at, _record(rng.randrange(50), rng.getrandbits(4)))
            elif edit == 1:
                del seq[min(at, len(seq) - 1)]
            elif edit == 2:
                i = min(at, len(seq) - 1)
                seq[i] = tuple(list(seq[i]))
            else:
                i = min(at, len(seq) - 1)
                seq[i] = _record(seq[i][2], rng.getrandbits(4))
        seq = tuple(seq)
        if len(seq) == len(old):
            continue
        got = chunks.spliced(seq, old, old_eids, old_chunks)
        whole = array("I", chunks.all_of(array("I", table.all_of(seq))))
        assert got == whole
        assert chunks.element_numbers(got) == array("I", table.all_of(seq))
        assert reference.element_numbers(array("I", reference.all_of(array("I", table.all_of(seq))))) == \
            chunks.element_numbers(got)
