"""The bounded-exhaustive cross-check of the consumption rule's two readings (docs/model.md, "Readings PTX does
not settle"): SV502, a phase that completes while no wait observed the previous one (an error, at the completing
update), and SV505, an arrive-on into such a phase that does not complete it (a warning).

Scopes of tests/exhaustive_programs.py where both occur: "phases" (a barrier of count 1 past phase 1: every
elected arrive completes a phase, so unobserved phases are SV502), "rounds" (a second barrier of count 2 beside it:
an arrival that leaves the phase pending warns) and "probe-outcomes" (an arrive.expect_tx whose bytes are still due
does not complete its phase). On a deterministic slice each program is searched with the reductions and without
them: the verdicts must be equal, the reduced search's errors (code, line) among the unreduced search's, SV502
found by both or by neither, and the warning codes of a safe verdict equal (an arrive taken alone where its only
finding is SV505: engines/reduction/element.py, reuse_warnings_only). The z3 engine (the all-iterations one) and
the bmc engine, which encode the error only, must give the verdict. The CI slice takes a few seconds;
SYNCVERIFY_SLOW=1 runs a wider one.
"""

from __future__ import annotations

import collections
import os

import pytest
from diff_engines import loaded
from exhaustive_programs import PROBE_TOKEN_SCOPES, ROUND_SCOPES, SCOPES, sample

from syncverify.check import Options, check_protocol
from syncverify.engines.explicit import Budget, explore
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine

SCOPES_OF_THE_RULE = {"phases": SCOPES["phases"], "rounds": ROUND_SCOPES["rounds"],
                      "probe-outcomes": PROBE_TOKEN_SCOPES["probe-outcomes"]}
BUDGET = Budget(max_states=50_000, seconds=60)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes; run with SYNCVERIFY_SLOW=1")


def _errors(result: CheckResult) -> set[tuple[str, int]]:
    return {("SV30x" if d.code in ("SV301", "SV302") else d.code, d.span.line if d.span else 0)
            for d in result.diagnostics if d.is_error}


def _warnings(result: CheckResult) -> set[str]:
    return {d.code for d in result.diagnostics if not d.is_error}


def _slice(scope: str, every: int, offset: int, others: bool) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text, protocol in loaded(sample(SCOPES_OF_THE_RULE[scope], every, offset), tally):
        full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
        reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
        if Verdict.INCONCLUSIVE in (full.verdict, reduced.verdict):
            tally["inconclusive"] += 1
            continue
        where = (scope, index, reduced.diagnostics, full.diagnostics, text)
        assert reduced.verdict == full.verdict, where
        assert _errors(reduced) <= _errors(full), where
        assert ("SV502" in {c for c, _ in _errors(reduced)}) == ("SV502" in {c for c, _ in _errors(full)}), where
        if full.verdict is Verdict.SAFE:
            assert _warnings(reduced) == _warnings(full), where
        tally[full.verdict.value] += 1
        tally["SV502"] += any(c == "SV502" for c, _ in _errors(full))
        tally["SV505"] += "SV505" in _warnings(full)
        tally["SV505, safe"] += "SV505" in _warnings(full) and full.verdict is Verdict.SAFE
        if others:  # the engines as the CLI runs them, the search-free findings included, against the explicit one
            ref = check_protocol(protocol, Options(engine="explicit", max_states=50_000, timeout=60))
            for engine in ("z3", "bmc"):
                other = check_protocol(protocol, Options(engine=engine, max_states=50_000, timeout=60))
                if ref.verdict in (Verdict.SAFE, Verdict.VIOLATION) and \
                        other.verdict in (Verdict.SAFE, Verdict.VIOLATION):
                    assert other.verdict == ref.verdict, (engine, other, ref, where)
                    if engine == "z3" and ref.verdict is Verdict.SAFE:  # the same search, without the lift's loops
                        assert _warnings(other) == _warnings(ref), (engine, other, ref, where)
                    tally[f"{engine} agrees"] += 1
    return tally


@pytest.mark.parametrize("scope, every, offset", [("phases", 60, 5), ("rounds", 700, 11), ("probe-outcomes", 60, 7)])
def test_consumption_slice(scope, every, offset):
    tally = _slice(scope, every, offset, others=False)
    print(scope, dict(tally))
    assert tally[Verdict.VIOLATION.value] and (tally["SV502"] or tally["SV505"]), tally


def test_consumption_engines_agree_on_a_slice():
    tally = _slice("probe-outcomes", 700, 13, others=True)
    assert tally["z3 agrees"] and tally["bmc agrees"], tally


@SLOW
@pytest.mark.parametrize("scope, every", [("phases", 30), ("rounds", 300), ("probe-outcomes", 30)])
def test_consumption_wider_slice(scope, every):
    tally = _slice(scope, every, 1, others=True)
    print(scope, dict(tally))
    assert tally["z3 agrees"] and tally["bmc agrees"] and (tally["SV502"] or tally["SV505"]), tally
