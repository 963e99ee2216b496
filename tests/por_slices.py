"""A slice of an exhaustive scope searched three ways: without reductions, with them, and with them under a
variant (a rule taken out, or an earlier form of it). The cross-checks of single reduction rules share it
(tests/test_exhaustive_rounds.py, tests/test_exhaustive_cp_arrive.py).

All three must give the same verdict; the findings (code, line) of either reduced search must be among the
unreduced search's (SV301/SV302 as one family: the name of a race may depend on the order explored first), and the
reduced search explores no more states than the unreduced one (where no budget ended the unreduced one). The tally
counts verdicts, inconclusive programs, and under ``differ`` the programs where the two reduced searches explore
different numbers of states (the rule acts), with "fewer states" where the reduction as it is explores fewer.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable

import pytest
from diff_engines import loaded

from syncverify.engines.explicit import Budget, explore
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine


def findings(result: CheckResult) -> set[tuple[str, int]]:
    """The error findings of a search as (code, line), SV301/SV302 as one family."""
    return {("SV30x" if d.code in ("SV301", "SV302") else d.code, d.span.line if d.span else 0)
            for d in result.diagnostics if d.is_error}


def three_way_slice(texts: Iterable[tuple[int, str]], budget: Budget, monkeypatch: pytest.MonkeyPatch,
                    variant: Callable[[pytest.MonkeyPatch], None], differ: str) -> collections.Counter:
    """Each program of ``texts`` searched unreduced, reduced, and reduced under ``variant`` (which patches the
    reduction through the monkeypatch it is given); the module docstring says what is asserted and tallied."""
    tally: collections.Counter = collections.Counter()
    for index, text, protocol in loaded(texts, tally):
        full = explore(protocol, budget, Machine(protocol), symmetry=False, reduce=False)
        reduced = explore(protocol, budget, Machine(protocol), symmetry=True)
        with monkeypatch.context() as patch:
            variant(patch)
            other = explore(protocol, budget, Machine(protocol), symmetry=True)
        if Verdict.INCONCLUSIVE in (full.verdict, reduced.verdict, other.verdict):
            tally["inconclusive"] += 1
            continue
        assert reduced.verdict == full.verdict == other.verdict, (index, text)
        assert findings(reduced) <= findings(full), (index, reduced.diagnostics, full.diagnostics, text)
        assert findings(other) <= findings(full), (index, other.diagnostics, full.diagnostics, text)
        # (a search that a state budget ended may store a state more than the budget, the unreduced one included)
        assert reduced.stats.states <= full.stats.states or full.stopped_by, (index, text)
        tally[full.verdict.value] += 1
        if reduced.stats.states != other.stats.states:
            tally[differ] += 1
            tally["fewer states"] += reduced.stats.states < other.stats.states
    return tally
