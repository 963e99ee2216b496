"""The bounded-exhaustive cross-check of the walk that knows which phase a later wait needs
(engines/reduction/precede_walk.py, "Phases"; docs/model.md): tests/exhaustive_programs.py,
ROUND_SCOPES["rounds"] -- two CTAs of a cluster, one warp each, waits on the CTA's own barrier in a loop of two
trips (parities k and k + 1), arrivals on the peer's barrier, the own barrier armed and copies multicast into both,
the slot read.

On a deterministic slice each program is searched three ways: with the reductions (the walk as it is), with the
reductions and the walk reading every wait's phase off the state (the rule before), and without reductions. All
three must give the same verdict; the findings (code, line) of either reduced search must be among the unreduced
search's (SV301/SV302 as one family: the name of a race may depend on the order explored first). A slice must
hold programs where the two walks explore different numbers of states (the rule acts). The CI slice takes a few
seconds; SYNCVERIFY_SLOW=1 runs a wider one, which holds safe programs too.
"""

from __future__ import annotations

import collections
import os

import pytest
from exhaustive_programs import ROUND_SCOPES, sample
from por_slices import three_way_slice

from syncverify.engines.explicit import Budget
from syncverify.engines.reduction import precede_walk
from syncverify.result import Verdict

SCOPE = ROUND_SCOPES["rounds"]
BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")


def _phase_blind(k: int, seen: int, parity: int) -> int:
    """The rule before: a wait's phase read off the state, whatever its process waited for before."""
    return 0 if k % 2 != parity % 2 else 1


def _blind_walk(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(precede_walk, "completions_needed", _phase_blind)


def _slice(every: int, offset: int, monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return three_way_slice(sample(SCOPE, every, offset), BUDGET, monkeypatch, _blind_walk, "the walks differ")


def test_rounds_slice(monkeypatch):
    tally = _slice(840, 463, monkeypatch)  # 33 programs, 4 of them where the walks differ (deadlocks)
    assert tally[Verdict.VIOLATION.value] and tally["the walks differ"], tally


@SLOW
def test_rounds_wider_slice(monkeypatch):
    tally = _slice(10, 3, monkeypatch)
    print(dict(tally))
    assert tally[Verdict.SAFE.value] and tally[Verdict.VIOLATION.value], tally
    assert tally["the walks differ"], tally
