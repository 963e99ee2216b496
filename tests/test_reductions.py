"""Partial-order and symmetry reduction must not change what the checker finds.

Every spec in specs/ is checked with both reductions on and with both off (at
small loop bounds so the unreduced search stays cheap); the verdicts must
agree, the reduced findings must be among the unreduced ones, and the reduced
search must not visit more states.
"""

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

SPECS = sorted(Path(__file__).resolve().parent.parent.joinpath("specs").glob("*.sync"))
SMALL = {"ITERS": 2, "ROUNDS": 2, "CONSUMERS": 1, "STAGES": 2}


def _small_defines(path: Path) -> dict[str, int]:
    text = path.read_text()
    return {k: v for k, v in SMALL.items() if f"param {k}" in text}


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_reductions_preserve_findings(path):
    protocol = load(str(path), _small_defines(path))
    budget = Budget(max_states=30_000, seconds=30)
    reduced = explore(protocol, budget, Machine(protocol, reduce=True), symmetry=True)
    full = explore(protocol, budget, Machine(protocol, reduce=False), symmetry=False)
    if Verdict.INCONCLUSIVE in (full.verdict, reduced.verdict):
        pytest.skip(f"unreduced search of {path.name} exceeds the test budget ({full.stats.states} states)")
    assert reduced.verdict == full.verdict
    # reductions keep the verdict; their findings are a subset of the unreduced search's, with
    # RAW/WAR as one family (which one names a race can depend on the interleavings explored)
    family = lambda r: {"SV30x" if d.code in ("SV301", "SV302") else d.code  # noqa: E731
                        for d in r.diagnostics if d.is_error}
    assert family(reduced) <= family(full)
    assert reduced.stats.states <= full.stats.states
