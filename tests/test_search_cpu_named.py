"""Named-barrier steps the explicit search no longer computes, with the same answers (issue #36).

* ``Machine.named_arrival_quiet`` tells, without the step's knowledge updates, that a named arrival
  that leaves its generation open breaks no rule, and whether it warns. Each answer that is not None
  is checked against the step itself, every answer occurs, and the search with the question
  answered None everywhere (every named arrival stepped, as before) explores the same states and
  transitions with the same findings and counterexample lengths.
* A completed generation releases its waiters in one pass over the records where none of them
  ends (BarrierOps._nb_release_waiters_at_once): the search with that pass refused (the loop over
  the waiters, as before) explores the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reduction_slices import load_point, search_summary

from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.successors import _POR_NAMED, Reduction
from syncverify.semantics.families.barriers import BarrierOps
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import END
from syncverify.semantics.state import P_PC

ROOT = Path(__file__).resolve().parent.parent

# counts that disagree (SV202), a warp arriving twice (SV203), two sites (SV204), exits after a barrier
INLINE = {
    "counts": """protocol counts {
  cta threads 96;
  role a = warp 0;
  role b = warps 1..3;
  if a { bar.sync 1, 64; }
  if b { bar.sync 1, 96; }
}
""",
    "twice": """protocol twice {
  cta threads 96;
  role a = warp 0;
  role b = warps 1..2;
  if a { bar.arrive 1, 96; bar.arrive 1, 96; }
  if b { bar.sync 1, 96; bar.sync 1, 96; }
}
""",
    "sites": """protocol sites {
  cta threads 128;
  role a = warps 0..1;
  role b = warps 2..3;
  if a {
    syncthreads;
  } else {
    syncthreads;
  }
  syncthreads;
}
""",
}
POINTS = [
    ("specs/fa3_pingpong.sync", {}),  # bar.sync / bar.arrive with counts, SV203
    ("bench/families/cutlass_coop_gemm.sync", {}),  # the epilogue's bar.sync of both math warpgroups
    ("specs/cutlass_epilogue_warp_parts.sync", {}),
    ("tests/data/symmetry/two_pipelines.sync", {}),
    *[(f"inline:{name}", {}) for name in INLINE],
]
IDS = [f"{Path(p).stem}{d}" for p, d in POINTS]


def _load(path: str, defines: dict):
    return load_point(path, defines, INLINE, ROOT)


def _summary(path: str, defines: dict) -> tuple:
    return search_summary(_load(path, defines))


def test_named_arrival_quiet_agrees_with_the_step(monkeypatch):
    counts = {"quiet": 0, "warns": 0, "not known": 0}
    walk = Reduction.successors

    def checked(self, state):
        machine = self.machine
        for p, classes in enumerate(self._por_class):
            if classes[state.procs[p][P_PC]] is not _POR_NAMED:
                continue
            answer = machine.named_arrival_quiet(state, p)
            counts["not known" if answer is None else "warns" if answer else "quiet"] += 1
            if answer is None:
                continue
            res = machine.step_process(state, p)
            assert res is not None and res.violation is None and not res.soft, (p, state.procs[p])
            assert bool(res.warnings) == answer, (p, res.warnings)
            assert machine.programs[p].code[res.state.procs[p][P_PC]].kind != END
            # and the generation stays open: no other process moved
            assert all(a == b for q, (a, b) in enumerate(zip(state.procs, res.state.procs, strict=True)) if q != p)
        return walk(self, state)

    monkeypatch.setattr(Reduction, "successors", checked)
    for path, defines in POINTS:
        protocol = _load(path, defines)
        explore(protocol, Budget(max_states=3_000, seconds=300), Machine(protocol))
    assert all(counts.values()), counts


# each shortcut turned off: every named arrival stepped, or a completed generation's waiters released
# one by one (the loop of _nb_try_complete)
SHORTCUTS_OFF = {
    "every arrival stepped": (Machine, "named_arrival_quiet", lambda self, state, p: None),
    "waiters one by one": (BarrierOps, "_nb_release_waiters_at_once", lambda self, *args: False),
}


@pytest.mark.parametrize("off", SHORTCUTS_OFF)
@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_without_the_shortcut(path, defines, off, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(*SHORTCUTS_OFF[off])
    assert _summary(path, defines) == with_it


def test_waiters_released_at_once_where_none_ends(monkeypatch):
    used = []
    real = BarrierOps._nb_release_waiters_at_once
    monkeypatch.setattr(BarrierOps, "_nb_release_waiters_at_once",
                        lambda self, *args: used.append(real(self, *args)) or used[-1])
    for path in ("specs/fa3_pingpong.sync", "bench/families/cutlass_coop_gemm.sync", "inline:sites"):
        used.clear()
        _summary(path, {})
        assert any(used), path  # the one pass applies
    assert not all(used)  # and the loop runs where a waiter ends (the last syncthreads of "sites")
