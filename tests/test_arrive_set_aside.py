"""An arrive the reduction would set aside, recognized before its step is computed (issue #36).

``Reduction._arrive_set_aside`` answers, from the arrive's footprint (Machine.future) and the
arrival rule (rules.mb_arrive), that a plain arrive completes a phase of its barrier while another
process may still first-wait on it, so that the reduction's first loop would compute the step and
set it aside (``_completes_fresh_phase_before_a_first_wait``, or a rule the step breaks). Each True
answer is checked here against the step itself, both answers must occur, and the search with the
pre-check turned off must explore the same states and transitions and report the same findings
with the same counterexample lengths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.element import reuse_warnings_only
from syncverify.engines.reduction.successors import Reduction
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import END
from syncverify.semantics.state import M_K, P_PC

ROOT = Path(__file__).resolve().parent.parent
POINTS = [  # each has arrives set aside before their step, and arrives computed (asserted below)
    ("specs/nvfuser_warp_specialized.sync", {}),
    ("specs/nvfuser_cb_prologue_unobserved_phase.sync", {}),
    ("specs/nvfuser_cb_mbarrier_war.sync", {}),
    ("specs/tilelang_bar_h_fixed.sync", {}),
    ("specs/deepgemm_sm100_sf_utccp.sync", {}),
    ("specs/tvm_tirx_local_arrive_on_peer.sync", {}),
    ("specs/lane_reduction_reads.sync", {}),
]
IDS = [Path(p).stem for p, _ in POINTS]


def _summary(path: str, defines: dict) -> tuple:
    protocol = load(str(ROOT / path), defines)
    result = explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    findings = sorted((d.code, d.span.line if d.span else 0, d.message, len(d.trace)) for d in result.diagnostics)
    return result.verdict, result.stats.states, result.stats.transitions, findings


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_set_aside_agrees_with_the_step(path, defines, monkeypatch):
    answers = {True: 0, False: 0}
    completing = 0  # True answers whose step breaks no rule: set aside for the phase it completes
    asked = Reduction._arrive_set_aside

    def checked(self, state, p):
        nonlocal completing
        got = asked(self, state, p)
        answers[got] += 1
        if got:
            machine = self.machine
            res = machine.step_process(state, p)
            breaks = res is None or res.violation is not None or bool(res.soft) or \
                (bool(res.warnings) and not reuse_warnings_only(res))
            if not breaks:
                assert machine.programs[p].code[res.state.procs[p][P_PC]].kind != END
                # the first loop's own test sets it aside, and the phase it completes is the predicted one
                assert self._completes_fresh_phase_before_a_first_wait(state, res, p), (p, state.procs[p][P_PC])
                changed = [m for m, (a, b) in enumerate(zip(state.mbars, res.state.mbars, strict=True))
                           if a[M_K] != b[M_K]]
                assert len(changed) == 1, changed
                completing += 1
        return got

    monkeypatch.setattr(Reduction, "_arrive_set_aside", checked)
    protocol = load(str(ROOT / path), defines)
    explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    assert answers[True] > 0 and answers[False] > 0, answers
    assert completing > 0


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_without_the_set_aside_precheck(path, defines, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(Reduction, "_arrive_set_aside", lambda self, state, p: False)
    assert _summary(path, defines) == with_it
