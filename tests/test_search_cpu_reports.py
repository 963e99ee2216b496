"""The reports of one search replay their paths through one ``Replays`` (engines/witness.py): the
steps and canonical forms met are remembered by the state's identity and shared between the
findings' paths. The reports must be exactly those built with a fresh replay per finding, and the
sharing must actually happen (fewer steps of the model than the separate replays take)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, search
from syncverify.engines.witness import Replays, diagnostic
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry_cta import cta_symmetry
from syncverify.semantics.symmetry_perm import symmetry_for

SPECS = Path(__file__).resolve().parent.parent / "specs"
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="the search and the reports take about 5 s of CPU; run with SYNCVERIFY_SLOW=1")


def _counted(machine: Machine) -> list[int]:
    """Count the machine's steps (an instance attribute over the method)."""
    calls = [0]
    real = machine.step

    def step(state, label):
        calls[0] += 1
        return real(state, label)

    machine.step = step  # type: ignore[method-assign]
    return calls


# four errors under a swap of warps (in CI); a violation and two warnings under CTA symmetry (slow)
@pytest.mark.parametrize("spec", ["cutlass_ws_ring_no_empty_wait.sync",
                                  pytest.param("deepgemm_sm90_cta_release_scales_read_remotely.sync", marks=SLOW)])
@pytest.mark.parametrize("full_trace", [False, True])
def test_shared_replays_give_the_reports_of_separate_ones(spec: str, full_trace: bool) -> None:
    protocol = load(str(SPECS / spec))
    machine = Machine(protocol)
    sym = cta_symmetry(machine) or symmetry_for(machine, permuted=False)
    assert sym is not None and sym.groups  # the replays go through the canonical forms
    outcome = search(machine, Budget(100_000, 60.0), sym)
    findings = outcome.errors + outcome.warnings
    assert len(findings) >= 3
    calls = _counted(machine)
    alone = [diagnostic(machine, v, labels, full_trace, sym) for v, labels in findings]
    separate, calls[0] = calls[0], 0
    replays = Replays(machine)
    shared = [diagnostic(machine, v, labels, full_trace, sym, replays) for v, labels in findings]
    assert shared == alone
    assert all(d.trace for d in shared)
    assert calls[0] < separate, (calls[0], separate)  # the paths' common prefixes stepped once
