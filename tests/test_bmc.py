"""The Z3 bounded model checker (`--engine bmc`) against the explicit engine.

The two engines share the barrier rules (`semantics.rules`) but search differently:
breadth-first over states with reductions, or one SMT problem over every interleaving
with the happens-before knowledge as bit-vectors. Whatever both decide must agree, and
every counterexample the solver finds must replay step by step in the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from hypothesis import HealthCheck, assume, given, settings
from strategies import protocols
from test_symbolic import _ring

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.engines.bmc import BMC, Unsupported
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

ENGINES = {e.name: e for e in engines()}



def _check(text: str, engine: str, timeout: float = 60.0):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=timeout))


def test_safe_ring_is_proved_for_its_params():
    res = _check(_ring(2), "bmc")
    assert res.verdict is Verdict.SAFE, res
    assert res.bound == "ITERS=2"
    assert "every interleaving" in res.coverage


def test_ring_without_the_empty_wait_is_a_violation_with_a_replayed_trace():
    res = _check(_ring(3, ""), "bmc")
    explicit = _check(_ring(3, ""), "explicit")
    assert res.verdict is Verdict.VIOLATION is explicit.verdict
    (diag,) = [d for d in res.diagnostics if d.is_error]
    assert diag.code in explicit.codes()  # one of the explicit engine's findings (a race or the overflow)
    assert diag.trace, "the counterexample is replayed into the explicit engine's trace format"


def test_wrong_parity_deadlocks():
    text = _ring(2).replace("parity (k / STAGES) % 2", "parity (k / STAGES + 1) % 2")
    explicit = _check(text, "explicit")
    res = _check(text, "bmc")
    assert res.verdict is Verdict.VIOLATION
    assert res.verdict == explicit.verdict


def test_unsupported_features_are_reported_not_guessed():
    text = """protocol pair {
  cluster 2;
  cta threads 32;
  mbarrier bar count 1;
  elect { init bar; }
  cluster.sync;
}
"""
    res = _check(text, "bmc")
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "unsupported" in res.coverage and "cluster" in res.coverage


def test_depth_bound_counts_every_step_and_copy():
    machine = Machine(syncverify.load(_ring(2), path="t.sync"))
    bmc = BMC(machine)
    # A step is one operation and the local ones after it (the copy after its arrive.expect_tx, the
    # read after its wait), except a process's last operation. Producer: init, init, syncthreads,
    # wait, arrive.expect_tx + tma.load, wait, arrive.expect_tx, tma.load (last): 8 steps.
    # Consumer: syncthreads, wait + read, arrive, wait + read, arrive: 5. Two copies complete.
    assert bmc.depth_bound() == 8 + 5 + 2
    assert [len(run) for run in bmc.enc.runs[1].values()] == [1, 2, 1, 2, 1]


def test_budget_ends_inconclusive_never_safe():
    res = _check(_ring(4), "bmc", timeout=0.01)
    assert res.verdict is Verdict.INCONCLUSIVE


def _small(text: str) -> bool:
    try:
        return BMC(Machine(syncverify.load(text, path="g.sync"))).depth_bound() <= 22
    except Unsupported:
        return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(protocols())
def test_bmc_agrees_with_the_explicit_engine(text):
    assume(_small(text))
    protocol = syncverify.load(text, path="generated.sync")
    ref = ENGINES["explicit"].run(protocol, 20_000, 20.0)
    other = ENGINES["bmc"].run(protocol, 20_000, 60.0)
    assert other.verdict != "error", other.detail
    if ref.verdict in CONCLUSIVE and other.verdict in CONCLUSIVE:
        assert compare(ref, other, ENGINES["bmc"]).kind == "agree", (ref, other, text)


@pytest.mark.parametrize("seed", [0, 3, 5, 9])
def test_bmc_agrees_on_fixed_seeds(seed):
    from strategies import random_protocol

    protocol = syncverify.load(random_protocol(seed), path=f"seed{seed}.sync")
    ref = ENGINES["explicit"].run(protocol, 20_000, 20.0)
    other = ENGINES["bmc"].run(protocol, 20_000, 120.0)
    assert other.verdict in CONCLUSIVE, other
    assert compare(ref, other, ENGINES["bmc"]).kind == "agree", (ref, other)


SPECS = Path(__file__).resolve().parent.parent / "specs"


@pytest.mark.parametrize("name, defines", [
    ("nvfuser_cb_syncthreads", {"ITERS": 1, "PREFETCH": 1}), ("nvfuser_cb_mbarrier_war", {"ITERS": 1, "PREFETCH": 1}),
    ("nvfuser_cb_prologue_unobserved_phase", {"ITERS": 1, "PREFETCH": 1}), ("tma_store_epilogue", {"ITERS": 1}),
    ("tma_store_no_fence", {"ITERS": 1}),
    ("nvfuser_cb_no_war_wait", {"ITERS": 2, "PREFETCH": 2}),  # an index out of range (SV104)
])
def test_bmc_agrees_on_specs_at_small_trip_counts(name, defines):
    """The specs the solver decides within the test budget (bench/RESULTS-bmc.md has all of them)."""
    protocol = syncverify.load(str(SPECS / f"{name}.sync"), defines)
    ref = check_protocol(protocol, Options(engine="explicit", timeout=60))
    res = check_protocol(protocol, Options(engine="bmc", timeout=120))
    assert res.verdict in (Verdict.SAFE, Verdict.VIOLATION), res.coverage
    assert res.verdict == ref.verdict, (res, ref)
    assert {d.code for d in res.diagnostics if d.is_error} <= ref.codes()


REGRESSIONS = sorted((Path(__file__).resolve().parent / "data" / "differential").glob("*_bmc.sync"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.stem)
def test_differential_regressions(path):
    """Protocols on which bench/differential.py once found the bmc engine failing."""
    protocol = syncverify.load(str(path))
    ref = ENGINES["explicit"].run(protocol, 20_000, 20.0)
    other = ENGINES["bmc"].run(protocol, 20_000, 120.0)
    assert other.verdict in CONCLUSIVE, other
    assert compare(ref, other, ENGINES["bmc"]).kind == "agree", (ref, other)
