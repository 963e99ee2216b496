"""Work the search skips without changing what it explores (issue #36).

* ``Reduction._arrive_ends``: a plain arrive after which its process ends is never taken alone, so
  the reduction's first loop does not compute it. Each answer is checked against the step itself
  (where the step breaks no rule, its process ends exactly when the answer says so), both answers
  must occur, and the search with the pre-check turned off must explore the same states and
  transitions and report the same findings with the same counterexample lengths.
* ``_Work.freeze`` passes on the records of a step that left them alone as the very object of
  the state before it, without sorting: every state the search stores must still have sorted
  records, as the bisections of the model assume (memory.MemoryOps._knows, core._key_bounds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import explicit
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.successors import Reduction
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import END
from syncverify.semantics.state import P_PC

ROOT = Path(__file__).resolve().parent.parent
POINTS = [  # each has arrives that end their process, and arrives that do not (asserted below)
    ("specs/cutlass_ws_ring.sync", {}),
    ("specs/cutlass_sm90_consumer_try_wait.sync", {}),
    ("specs/cutlass_consumer_release_warpgroup.sync", {}),
    ("specs/nvfuser_warp_specialized.sync", {}),
    ("specs/lane_reduction_reads.sync", {}),
    ("specs/umma_commit_ring_no_wait.sync", {}),
    ("specs/wgmma_release_after_wait.sync", {}),
]
IDS = [f"{Path(p).stem}{d}" for p, d in POINTS]


def _summary(path: str, defines: dict) -> tuple:
    protocol = load(str(ROOT / path), defines)
    result = explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    findings = sorted((d.code, d.span.line if d.span else 0, d.message, len(d.trace)) for d in result.diagnostics)
    return result.verdict, result.stats.states, result.stats.transitions, findings


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_arrive_ends_agrees_with_the_step(path, defines, monkeypatch):
    answers = {True: 0, False: 0}
    asked = Reduction._arrive_ends

    def checked(self, p, pstate):
        got = asked(self, p, pstate)
        machine = self.machine
        # the step of that arrive, from any state where p stands there: the answer reads only (p, pc, vars)
        state = self._last_state
        assert state.procs[p] is pstate
        res = machine.step_process(state, p)
        if res is not None and res.violation is None:
            assert got == (machine.programs[p].code[res.state.procs[p][P_PC]].kind == END), (p, pstate[P_PC])
        answers[got] += 1
        return got

    walk = Reduction.successors

    def remember(self, state):
        self._last_state = state
        return walk(self, state)

    monkeypatch.setattr(Reduction, "_arrive_ends", checked)
    monkeypatch.setattr(Reduction, "successors", remember)
    protocol = load(str(ROOT / path), defines)
    explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    # both answers occur: arrives that end their process are skipped, the others computed as before
    assert answers[True] > 0 and answers[False] > 0, answers


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_without_the_precheck(path, defines, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(Reduction, "_arrive_ends", lambda self, p, pstate: False)
    assert _summary(path, defines) == with_it


@pytest.mark.parametrize(("path", "defines"), POINTS[:3], ids=IDS[:3])
def test_stored_records_stay_sorted(path, defines, monkeypatch):
    stored: list = []
    add = explicit.Visited.add

    def keep(self, state, like=None, whole=True):
        out = add(self, state, like, whole)
        if out is not None:
            stored.append(state)  # (the state stored: held whole or packed, as ``whole`` says)
        return out

    monkeypatch.setattr(explicit.Visited, "add", keep)
    protocol = load(str(ROOT / path), defines)
    machine = Machine(protocol)
    explore(protocol, Budget(max_states=5_000, seconds=300), machine)
    assert len(stored) > 50
    for state in stored:
        assert list(state.records) == sorted(state.records)
    # a step that leaves the records alone hands on the very object (no copy, no sort)
    same = 0
    for state in stored[:300]:
        for res in machine.successors(state):
            if res.state is not None:
                assert list(res.state.records) == sorted(res.state.records)
                same += res.state.records is state.records
    assert same > 0
