"""Steps past the model's bounds (semantics/core.py ModelBound; docs/model.md, "Steps past the model's bounds").

A flag past its declared range, or more copies or commits in flight than the model numbers, is a step the model
cannot take exactly. The explicit and parallel searches leave that step out and go on: they cannot say "safe"
any more, but a violation on a path that never passes the step is found as before, whichever order the search
(or its reduction) tries first. Before, the first such step ended the whole search, so whether a violation was
reported depended on whether the reduction happened to reach it first."""

from __future__ import annotations

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.parallel import available, searcher
from syncverify.engines.reduction import cta_local
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

# Program 18309 of the exhaustive cross-check's `grid-local` scope (tests/exhaustive_programs.py): CTA 1's
# warp arrives 32 times on a count-1 barrier (SV504) while CTA 0's warp adds 32 to a flag of range 0..8. The
# one-CTA set takes CTA 0's steps first; the add went past the range there and, before, ended the search
# after 6 states: "inconclusive" where the searches without the set said SV504.
OVERFLOW_BESIDE_A_VIOLATION = """
protocol grid_local_18309 {
  grid 2;
  launch cooperative;
  cta threads 64;
  role w0 = warp 0;
  role setup = warp 1;
  mbarrier mb count 1;
  smem buf bytes 64;
  flag f bound 8;
  if setup { elect { init mb; } }
  syncthreads;
  if w0 && block == 0 { tma.load buf -> mb; red.add.release.gpu f, 1; wait mb parity 0; }
  if w0 && block == 1 { arrive mb; read buf; }
}
"""

# The same without the bad arrival: nothing to report but the add past the range.
OVERFLOW_ALONE = OVERFLOW_BESIDE_A_VIOLATION.replace("arrive mb; read buf;", "read buf;").replace(
    "grid_local_18309", "overflow_alone")


def _explore(text: str, reduce: bool = True, rule: bool = True, jobs: int = 1):
    protocol = load(text, path="bounds.sync")
    old = cta_local.ENABLED
    cta_local.ENABLED = rule
    try:
        return explore(protocol, Budget(200_000, 120.0), Machine(protocol), symmetry=False, reduce=reduce,
                       search_with=searcher(jobs) if jobs > 1 else None)
    finally:
        cta_local.ENABLED = old


@pytest.mark.parametrize("reduce,rule", [(True, True), (True, False), (False, True)],
                         ids=["one-CTA set", "reduced without it", "unreduced"])
def test_a_violation_beside_a_step_past_the_bounds_is_found_by_every_search(reduce: bool, rule: bool) -> None:
    res = _explore(OVERFLOW_BESIDE_A_VIOLATION, reduce, rule)
    assert res.verdict is Verdict.VIOLATION, res
    assert {d.code for d in res.diagnostics} == {"SV504"}, res.diagnostics
    # its path never passes the step that was left out: the add (line 13) is not in the counterexample
    trace = res.diagnostics[0].trace
    assert trace[-1].line == 14 and not any("red.add" in step.op for step in trace), trace
    # and the result says the search did not finish, and why
    assert "flag f would become" in res.coverage and "not taken" in res.coverage, res.coverage


@pytest.mark.parametrize("reduce", [True, False], ids=["reduced", "unreduced"])
def test_a_step_past_the_bounds_is_never_safe(reduce: bool) -> None:
    res = _explore(OVERFLOW_ALONE, reduce)
    assert res.verdict is Verdict.INCONCLUSIVE and not res.diagnostics, res
    assert "line 13: flag f would become" in res.coverage, res.coverage
    # no budget ran out: a rerun with more time or states ends the same way
    assert res.stopped_by == "", res.stopped_by


def test_with_the_bound_wide_enough_the_search_decides() -> None:
    """The twin that shows the "inconclusive" above comes from the bound alone: with room for the 32 adds the
    search goes past them and finds what lies behind, CTA 0's wait on a copy whose bytes nobody expects (SV201),
    and it finishes."""
    res = _explore(OVERFLOW_ALONE.replace("bound 8", "bound 40"))
    assert res.verdict is Verdict.VIOLATION and res.coverage == "", res
    assert {d.code for d in res.diagnostics} == {"SV201"}, res.diagnostics


@pytest.mark.skipif(available() is not None, reason=str(available()))
@pytest.mark.parametrize("text", [OVERFLOW_BESIDE_A_VIOLATION, OVERFLOW_ALONE], ids=["beside", "alone"])
def test_two_processes_answer_as_one(text: str) -> None:
    one, two = _explore(text), _explore(text, jobs=2)
    assert (one.verdict, one.stats.states, one.stats.transitions, one.coverage) == \
        (two.verdict, two.stats.states, two.stats.transitions, two.coverage)
    assert [(d.code, len(d.trace)) for d in one.diagnostics] == [(d.code, len(d.trace)) for d in two.diagnostics]
