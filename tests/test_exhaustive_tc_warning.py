"""The cross-check of the rule that takes a local tcgen05 step alone when its only finding is the SV608 warning
(engines/reduction/tc_warning.py; docs/model.md, "Partial-order reduction").

Each program of the `tcgen05` and `tmem-ranges` scopes of tests/exhaustive_programs.py (the tensor-memory
accesses, MMA, commits, waits and the fence pair around thread synchronization) is searched without reductions,
with them, and with them less the rule: the same verdict in all three, the error findings (code, line) of either
reduced search among the unreduced search's (tests/por_slices.py), and the warnings (code, line) the same with the
rule as without it. The CI slices take a few seconds; SYNCVERIFY_SLOW=1 runs every program of both scopes.

The rule does not act on any program of those scopes (two warps: a load that warns has no step beside it that the
rule would spare); SYNCVERIFY_SLOW=1's run of both scopes whole (5,643 programs, 84 CPU s) found every answer the
same. Where it acts is a protocol with more warps: the CuTe-DSL 2-CTA blockscaled GEMM of bench/families at its
smallest size, searched with and without the rule below.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest
from exhaustive_programs import OPERAND_SCOPES, SCOPES, sample
from por_slices import three_way_slice

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import successors, tc_warning
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")


def _without_rule(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(tc_warning, "ENABLED", False)


def _warnings(protocol) -> set[tuple[str, int]]:
    res = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    return {(d.code, d.span.line if d.span else 0) for d in res.diagnostics if not d.is_error}


@pytest.mark.parametrize("scope, every, offset", [
    ("tcgen05", 400, 7), ("tmem-ranges", 400, 11),
    pytest.param("tcgen05", 1, 0, marks=SLOW), pytest.param("tmem-ranges", 1, 0, marks=SLOW)])
def test_tc_warning_slice(scope, every, offset, monkeypatch):
    """A slice in CI; the whole scope with SYNCVERIFY_SLOW=1. Besides three_way_slice's checks, the warnings
    with and without the rule are the same."""
    texts = list(sample({**SCOPES, **OPERAND_SCOPES}[scope], every, offset))
    tally: collections.Counter = three_way_slice(texts, BUDGET, monkeypatch, _without_rule, "the rule acts")
    for _, text in texts:
        try:
            protocol = load(text, path="slice.sync")
        except Exception:
            continue
        with_rule = _warnings(protocol)
        with monkeypatch.context() as patch:
            _without_rule(patch)
            assert _warnings(protocol) == with_rule, text
        tally["warnings compared"] += 1
    print(scope, every, dict(tally))
    assert tally["safe"] + tally["violation"] > 0


CUTE_DSL = Path(__file__).resolve().parents[1] / "bench" / "families" / "cute_dsl_2cta_blockscaled_gemm.sync"


def test_the_rule_acts_on_the_cute_dsl_gemm_and_keeps_its_findings(monkeypatch):
    """One tile of one k-tile, one accumulator-update and one epilogue warp per CTA: the four loads' SV608 no
    longer keeps them from being taken alone (1,831 states without the rule, 954 with it, since SV602 is decided
    at the access: 6,827 and 2,202 before), and the verdict and every finding (code, line), warnings included,
    are the same. The warps' last arrives stay unreduced in both runs (exit.lone_exit_after_arrive takes them
    alone with their exits: 399 states with this rule, 433 without), so that the count is this rule's."""
    protocol = load(CUTE_DSL.read_text(), {"W": 1, "TILES": 1, "KT": 1, "SUB": 1}, path=str(CUTE_DSL))
    monkeypatch.setattr(successors, "lone_exit_after_arrive", lambda reduction, state, p: False)

    def run():
        res = explore(protocol, Budget(max_states=100_000, seconds=120), Machine(protocol))
        return res.verdict, res.stats.states, {(d.code, d.span.line if d.span else 0) for d in res.diagnostics}

    verdict, states, found = run()
    with monkeypatch.context() as patch:
        _without_rule(patch)
        verdict_off, states_off, found_off = run()
    assert (verdict, found) == (verdict_off, found_off)
    load_line = next(n for n, ln in enumerate(CUTE_DSL.read_text().splitlines(), 1) if "tcgen05.ld acc[ab]" in ln)
    assert ("SV608", load_line) in found
    assert states * 3 < states_off * 2, (states, states_off)
