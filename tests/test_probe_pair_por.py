"""Both outcomes of a probe whose phase has completed, taken together as a persistent set where nothing can
update the barrier first (engines/reduction/probe_pair.py; docs/model.md, "Both outcomes of a completed probe").

Each program of the exhaustive `probes` scope (plain probes against arrivals, waits and accesses) and the
`probe-tokens` and `probe-outcomes` scopes (kept probes beside byte counts and copies, and the true outcome that
probe_outcome.py leaves out where the false one covers it) is searched with the rule, without it (the rest
of the reduction on) and without any reduction: the verdicts must be equal, the finding codes with the rule equal
to those without it, and those among the codes of the search without any reduction (which finds more on some
programs: each path of a reduced search stops at its first violation). The rule's key condition (the walk: no
arrival, and in phase 0 or with no arrival pending no update at all, can come before the prober moves) is dropped
once, and a finding is then lost.
"""

from __future__ import annotations

import os
import time

import pytest
from exhaustive_programs import PROBE_TOKEN_SCOPES, SCOPES, Scope
from rule_compare import Outcome, compare_slice, search

from syncverify.engines.reduction import probe_pair

# the CI slice of each scope: (every n-th program, offset), a few dozen programs each
SLICES: dict[str, tuple[Scope, int, int]] = {
    "probes": (SCOPES["probes"], 400, 3),
    "probe-tokens": (PROBE_TOKEN_SCOPES["probe-tokens"], 60, 5),
    "probe-outcomes": (PROBE_TOKEN_SCOPES["probe-outcomes"], 80, 7),
}


def _search(text: str, reduce: bool = True, rule: bool = True) -> Outcome:
    return search(probe_pair, text, reduce, rule)


def _codes_kept(on: Outcome, off: Outcome, none: Outcome) -> bool:
    """The rule keeps every code; the errors are among those of the unreduced search."""
    return on[1] == off[1] and on[3] <= none[3]


def _slice(scope: Scope, every: int, offset: int) -> dict[str, int]:
    return compare_slice(probe_pair, scope, every, offset, _codes_kept)


@pytest.mark.parametrize("name", sorted(SLICES))
def test_the_slice_keeps_verdicts_and_codes(name):
    """A slice of each scope in CI: equal verdicts with the rule, without it and without any reduction, equal
    codes with the rule and without it, the errors among those without any reduction, and the rule acting on
    some of them (fewer states)."""
    scope, every, offset = SLICES[name]
    tally = _slice(scope, every, offset)
    assert tally["programs"] >= 15 and tally["acted"] >= 1, tally


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="every program of the scopes: minutes of CPU on a two-core host; run with SYNCVERIFY_SLOW=1")
@pytest.mark.parametrize("name", sorted(SLICES))
def test_the_scope_keeps_verdicts_and_codes_wider(name):
    start = time.process_time()
    tally = _slice(SLICES[name][0], 1, 0)
    print(name, tally, f"{time.process_time() - start:.1f} CPU s")
    assert tally["acted"] >= 10, tally


# w0 completes phase 0 of `mb`, then (with ``tail``) does something more; w1 probes phase 0 with a branch on the
# result. Where w1 stands at the probe with the phase completed, both outcomes are enabled.
PROBED = """
protocol probed {{
  cta threads 96;
  role w0 = warp 0;
  role w1 = warp 1;
  role setup = warp 2;
  mbarrier mb count 1;
  mbarrier other count 1;
  smem buf bytes 64;
  if setup {{ elect {{ init mb; init other; }} }}
  syncthreads;
  if w0 {{ elect {{ arrive mb; {tail} }} }}
  if w1 {{
    if try_wait mb parity 0 {{ elect {{ write buf; }} }} else {{ elect {{ read buf; }} }}
    elect {{ arrive other; }}
  }}
}}
"""


def test_both_outcomes_are_taken_together():
    """w0's last step, an arrive on another barrier that ends it, is never taken alone; w1's two outcomes are taken
    before it (fewer states than without the rule), with the verdict and codes of the search without any
    reduction."""
    text = PROBED.format(tail="arrive other;")
    on, off, none = _search(text), _search(text, rule=False), _search(text, reduce=False)
    assert on[:2] == off[:2] == none[:2], (on, off, none)
    assert on[2] < off[2], (on, off)


def test_an_inval_that_can_come_first_holds_the_outcomes_back(monkeypatch):
    """w0 invalidates the barrier after its arrive: the walk finds the inval before w1 moves, so the outcomes are
    not taken together, and the probe after the inval is SV401, as without any reduction. With the walk's
    condition dropped the outcomes always come first, the inval after them breaks nothing, and the search says
    safe."""
    text = PROBED.format(tail="inval mb;")
    on, none = _search(text), _search(text, reduce=False)
    assert on[:2] == none[:2] and "SV401" in on[1], (on, none)
    monkeypatch.setattr(probe_pair, "CONDITION", False)
    assert _search(text)[0] == "safe"
