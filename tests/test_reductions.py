"""Partial-order and symmetry reduction must not change what the checker finds.

Every spec in specs/ is checked with both reductions on, and then with each
reduction alone and with none (at small loop bounds, with a wrap-around of the
stage ring, so the other searches stay cheap); the verdicts must agree, the
reduced findings must be among the less reduced ones, and a more reduced search
must not visit more states. The unreduced search of the two 8-warp rings does
not fit the test budget; each reduction alone still does and is compared.
"""

from functools import cache
from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine

SPECS = sorted(Path(__file__).resolve().parent.parent.joinpath("specs").glob("*.sync"))
SMALL = {"ITERS": 3, "ROUNDS": 2, "CONSUMERS": 1, "STAGES": 2}
MODES = {"por": (True, False), "symmetry": (False, True), "none": (False, False)}
BUDGET = Budget(max_states=30_000, seconds=60)
UNREDUCED_BUDGET = Budget(max_states=12_000, seconds=60)


def _small_defines(path: Path) -> dict[str, int]:
    text = path.read_text()
    return {k: v for k, v in SMALL.items() if f"param {k}" in text}


def _errors(result: CheckResult) -> set[str]:
    # RAW and WAR as one family: which one names a race can depend on the interleavings explored
    return {"SV30x" if d.code in ("SV301", "SV302") else d.code for d in result.diagnostics if d.is_error}


@cache
def _fully_reduced(path: Path) -> CheckResult:
    protocol = load(str(path), _small_defines(path))
    return explore(protocol, BUDGET, Machine(protocol, reduce=True), symmetry=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_reductions_preserve_findings(path, mode):
    protocol = load(str(path), _small_defines(path))
    reduced = _fully_reduced(path)
    por, symmetry = MODES[mode]
    other = explore(protocol, UNREDUCED_BUDGET if mode == "none" else BUDGET, Machine(protocol, reduce=por),
                    symmetry=symmetry)
    assert reduced.verdict != Verdict.INCONCLUSIVE
    if other.verdict == Verdict.INCONCLUSIVE:
        assert mode == "none", f"{mode} alone should fit the budget ({other.stats.states} states)"
        pytest.skip(f"unreduced search of {path.name} exceeds the test budget ({other.stats.states} states)")
    assert reduced.verdict == other.verdict
    if other.coverage:
        return  # a violation found before a budget ran out: its findings are a partial list
    assert _errors(reduced) <= _errors(other)
    assert reduced.stats.states <= other.stats.states
