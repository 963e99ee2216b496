"""The bmc encoding of tcgen05.commit (families/tcgen05.py, Tcgen05Encoding): where a commit is the
protocol's only tcgen05 operation, the solver's verdict and findings equal the explicit engine's,
counterexamples through a commit's arrival replay on the machine, and what it cannot follow
exactly stays refused."""

from __future__ import annotations

import os

import pytest
from exhaustive_programs import Scope, programs, render

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.engines.bmc import BMC
from syncverify.result import Verdict
from syncverify.semantics.families.tcgen05 import Tcgen05Encoding
from syncverify.semantics.machine import Machine


def _check(text: str, engine: str, timeout: float = 120.0):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=timeout))


def _errors(res) -> set[str]:
    return {d.code for d in res.diagnostics if d.is_error}


RING = """
protocol ring {{
  param ITERS = {iters};
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  mbarrier full count 1;
  mbarrier empty count 32;
  first thread {{ init full; init empty; }}
  syncthreads;
  if mma {{
    for t in 0..ITERS {{
      wait empty parity (t + 1) % 2;
      elect {{ {commit} }}
    }}
  }}
  if epi {{
    for t in 0..ITERS {{
      {epi_wait}
      arrive empty;
    }}
  }}
}}
"""

CASES = {
    # the commit's arrival carries the MMA warp's observation of `empty` (safe)
    "ring": dict(iters=2, commit="tcgen05.commit full;", epi_wait="wait full parity t % 2;"),
    # no wait on `full`: the arrivals overtake (SV501/SV502) and a run can end with a wait stuck
    "ring_no_wait": dict(iters=2, commit="tcgen05.commit full;", epi_wait=""),
    # the MMA warp exits with its last commit's arrival possibly in flight (SV404)
    "ring_exit_in_flight": dict(iters=1, commit="tcgen05.commit full;", epi_wait=""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bmc_commit_agrees_with_explicit(name):
    text = RING.format(**CASES[name])
    ref = _check(text, "explicit")
    res = _check(text, "bmc")
    assert ref.verdict in (Verdict.SAFE, Verdict.VIOLATION), ref.coverage
    assert res.verdict == ref.verdict, (res.coverage, ref.coverage, _errors(res), _errors(ref))
    assert _errors(res) <= _errors(ref)
    assert "not reproduced" not in res.coverage


def test_commit_ring_is_safe_because_the_arrival_carries_the_observation(monkeypatch):
    """What the arrival carries matters: the commit's snapshot holds the MMA warp's observation of
    `empty`. An arrival that carried nothing (the encoding's mask emptied) makes the epilogue's
    waits on `full` stale: the solver then finds SV501 (which the machine, carrying the
    observation, refutes) — so the safe verdict rests on the snapshot."""
    protocol = syncverify.load(RING.format(**CASES["ring"]), path="t.sync")
    assert BMC(Machine(protocol)).run(120).verdict == "safe"
    monkeypatch.setattr(Tcgen05Encoding, "carried_mask", lambda self: 0)
    out = BMC(Machine(protocol)).run(120)
    assert (out.verdict, out.code) == ("violation", "SV501"), out


def test_exit_with_a_commit_in_flight():
    """SV404: the CTA may exit while the last commit's arrival is in flight."""
    res = _check(RING.format(**CASES["ring_exit_in_flight"]), "bmc")
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV404"}, res.coverage


# two barriers, an MMA warp's elected lane and an epilogue warp
TWO_BARS = """
protocol two {{
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  mbarrier a count 1;
  mbarrier b count 1;
  first thread {{ init a; init b; }}
  syncthreads;
  if mma {{ elect {{ {mma} }} }}
  if epi {{ {epi} }}
}}
"""
OVERFLOW = TWO_BARS.format(mma="tcgen05.commit a; arrive.expect_tx b bytes 16; tcgen05.commit b;",
                           epi="wait a parity 0;")


def test_commit_arrivals_in_a_counterexample_replay_in_issue_order():
    """The shortest findings are the second commit's arrival on `b`, whose pending count the
    expect_tx arrive took to 0 (SV504), and, as deep, the CTA's exit with that arrival in flight
    (SV404); which one the solver's model names depends on the formula's terms (it changed with the
    consumption rule's completion check). The schedule's commit arrivals are in issue order, the
    first commit's first, and the machine confirms it with the tags resolved against its own."""
    protocol = syncverify.load(OVERFLOW, path="t.sync")
    machine = Machine(protocol)
    out = BMC(machine).run(120)
    assert out.verdict == "violation" and out.code in ("SV504", "SV404"), out
    arrivals = [machine.mb_names[label[1][4]][1] for label in out.labels if label[0] == "a"]
    assert arrivals == ["a", "b"][:len(arrivals)] and (out.code == "SV404" or arrivals == ["a", "b"]), out.labels
    res = check_protocol(protocol, Options(engine="bmc", timeout=120))
    assert res.verdict is Verdict.VIOLATION and _errors(res) & {"SV504", "SV404"}, res.coverage
    assert "SV504" in _errors(_check(OVERFLOW, "explicit"))
    # near twin: without the expect_tx nothing overflows; the run may still end with `b`'s
    # arrival in flight (SV404), as the explicit engine says
    twin = OVERFLOW.replace(" arrive.expect_tx b bytes 16;", "")
    ref, res = _check(twin, "explicit"), _check(twin, "bmc")
    assert res.verdict == ref.verdict and _errors(res) <= _errors(ref) and "SV504" not in _errors(res), res.coverage


TWO_COMMITS = TWO_BARS.format(mma="tcgen05.commit a; tcgen05.commit b;", epi="wait b parity 0; wait a parity 0;")


def test_two_commits_in_flight_arrive_in_order():
    """Two commits of one thread, both in flight: the arrivals replay in issue order (safe either
    way here), and a wait for the second after the first is safe by both engines."""
    ref, res = _check(TWO_COMMITS, "explicit"), _check(TWO_COMMITS, "bmc")
    assert ref.verdict is Verdict.SAFE and res.verdict is Verdict.SAFE, (res.coverage, ref.coverage)
    # near twin: the epilogue never waits for `a` — the CTA may exit with its arrival in flight
    twin = TWO_COMMITS.replace("wait b parity 0; wait a parity 0;", "wait b parity 0;")
    ref, res = _check(twin, "explicit"), _check(twin, "bmc")
    assert res.verdict == ref.verdict and _errors(res) <= _errors(ref), (res.coverage, ref.coverage)


def test_commit_order_assumption_decides_an_exit_in_both_engines():
    """The epilogue waits for the second commit only, then the CTA exits. With arrivals in issue
    order the first has landed by then (safe); without that assumption it may still be in flight
    (SV404). Both engines say so under each assumption."""
    text = TWO_BARS.format(mma="tcgen05.commit a; tcgen05.commit b;", epi="wait b parity 0;")
    protocol = syncverify.load(text, path="t.sync")
    for in_order, want in ((True, set()), (False, {"SV404"})):
        got = [check_protocol(protocol, Options(engine=engine, timeout=120, assume_tcgen05_commit_order=in_order))
               for engine in ("explicit", "bmc")]
        verdict = Verdict.VIOLATION if want else Verdict.SAFE
        assert [(r.verdict, _errors(r)) for r in got] == [(verdict, want)] * 2, [r.coverage for r in got]


def test_commit_of_a_whole_warp_stays_refused():
    text = RING.format(iters=1, commit="", epi_wait="wait full parity t % 2;").replace(
        "elect {  }", "tcgen05.commit full;")
    res = _check(text, "bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "tcgen05.commit" in res.coverage, res.coverage


# Generated programs (tests/exhaustive_programs.py) with a commit by an elected lane beside the
# barrier operations, copies and accesses it interacts with: two body warps, up to two statements.
COMMITS = Scope("commits", 1, 2, ((2, 1), (2, 0)), atoms=("umma.commit", "arrive", "wait0", "wait1", "wait_k",
                                                          "wait_k1", "tma.load", "read", "write"),
                wrappers=("elect",), trips=(2,))


def test_bmc_agrees_on_generated_commit_programs():
    """Every 200th generated program that commits in CI (8 of 1,412; every 100th took 22-54 s of a 20-minute
    CI), every 100th with SYNCVERIFY_SLOW=1: bmc's verdict equals the explicit engine's (as
    tests/diff_engines.py compares them: a program with several bugs may have bmc's shortest
    counterexample end in another one than the explicit engine's first, e.g. SV303 of two copies
    beside its SV301; a bmc violation is always one the machine confirmed by replay)."""
    texts = [t for t in (render(COMMITS, p) for p in programs(COMMITS)) if "umma.commit" in t]
    agree = 0
    every = 100 if os.environ.get("SYNCVERIFY_SLOW") else 200
    for text in texts[::every]:
        protocol = syncverify.load(text, path="g.sync")
        ref = check_protocol(protocol, Options(engine="explicit", timeout=60))
        res = check_protocol(protocol, Options(engine="bmc", timeout=120))
        assert ref.verdict in (Verdict.SAFE, Verdict.VIOLATION), (ref.coverage, text)
        assert res.verdict == ref.verdict, (res.coverage, ref.coverage, text)
        assert res.verdict is Verdict.SAFE or _errors(res), res.coverage
        agree += 1
    assert agree == len(texts[::every]) >= 7
