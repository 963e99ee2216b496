"""Named-barrier waits in the walk of what can come first (engines/reduction/precede_walk.py) against
the unreduced search.

The walk takes a `bar.sync` wait with an explicit count to pass only when the open generation's
threads and the arrivals on the barrier in the set can reach the count. Each check here counts
the waits the walk held back, so that a protocol that stopped exercising the rule fails, and
compares the reduced search's verdict and error codes with the search without reductions: on
FlashAttention-3's forward pass at small sizes (its ping-pong is where the rule matters), safe
and with its bug, and on the programs of the exhaustive scopes with named barriers where the
rule held a wait back.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reduction_slices import compare_where_it_acts, error_codes

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import precede_walk
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

FA3 = Path(__file__).resolve().parent.parent / "bench" / "families" / "fa3_fwd.sync"
BUDGET = Budget(max_states=100_000, seconds=120)


def _held(monkeypatch) -> list[int]:
    """Count the named waits the walk holds back in the searches that follow."""
    held: list[int] = []
    real = precede_walk.named_wait_passes

    def counting(state, idx, count, q, here, arrivals, least):
        ok = real(state, idx, count, q, here, arrivals, least)
        if not ok:
            held.append(idx)
        return ok

    monkeypatch.setattr(precede_walk, "named_wait_passes", counting)
    return held


@pytest.mark.parametrize(("defines", "verdict", "codes"), [
    ({"W": 1, "TILES": 2, "NBLK": 2}, Verdict.SAFE, {"SV203"}),
    ({"W": 1, "TILES": 2, "NBLK": 2, "BUG": 1}, Verdict.VIOLATION, {"SV203", "SV302"}),
    ({"W": 2, "TILES": 1, "NBLK": 1}, Verdict.SAFE, {"SV203"}),
])
def test_fa3_agrees_with_the_unreduced_search(defines, verdict, codes, monkeypatch):
    if defines.get("TILES") == 2 and not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("two tiles, searched unreduced: 15-20 s each of CI (2026-12-06); the one-tile case runs in CI, "
                    "these with SYNCVERIFY_SLOW=1")
    protocol = load(str(FA3), defines)
    held = _held(monkeypatch)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    assert held, "the walk held no named wait back: the protocol no longer exercises the rule"
    full = explore(protocol, Budget(max_states=400_000, seconds=300), Machine(protocol),
                   symmetry=False, reduce=False)
    assert full.verdict == verdict and error_codes(full) == codes, full.diagnostics
    assert reduced.verdict == verdict and error_codes(reduced) == codes, reduced.diagnostics


def test_exhaustive_programs_where_a_named_wait_is_held_back_agree(monkeypatch):
    """Every 5th program of the named-barrier scopes (cta2-seq, cta3, pairs2) and every 25th of
    cta2 and new2 on which the walk holds a named wait back."""
    held = _held(monkeypatch)
    slices = (("cta2-seq", 5), ("cta3", 5), ("pairs2", 5), ("cta2", 25), ("new2", 25))
    assert compare_where_it_acts(slices, held, lambda text: "bar" in text) >= 10
