"""The unbounded engine (engines/symbolic/, engines/periodic.py): cross-checks against the explicit engine.

* Bounded: the periodic search restricted to exactly ITERS = N (trip count symbolic,
  counters shifted modulo the period, merges on normalized keys) must give the
  explicit engine's verdict at ITERS = N, for every spec and for random protocols.
  N is chosen past K + P where possible, so that states are merged by shifting.
* Unbounded: proofs for every ITERS on the safe specs; violations beyond the bounded
  check are found and replayed concretely; the lift refuses non-periodic protocols.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from spec_cache import loaded

from syncverify.check import Options, check_path, check_protocol
from syncverify.cli import main
from syncverify.engines import periodic
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.symbolic import lift
from syncverify.expr import Context
from syncverify.ir import BinOp, Const, Var
from syncverify.lang import load
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.sync"))

# Small params per spec (ring specs at 2 stages), so that explicit and bounded periodic
# searches stay fast while the trip count still passes K + P (states get merged by shifting).
SMALL: dict[str, dict[str, int]] = {
    "cutlass_ws_ring": {"STAGES": 2},
    "cutlass_ws_ring_no_empty_wait": {"STAGES": 2},
}
# Trip counts for the bounded cross-check where the default (past K + P) would be slow.
CROSS_N: dict[str, int] = {"cluster_multicast_ring": 1, "cluster_multicast_ring_cta_scope": 1}


def _trip_param(protocol) -> str | None:
    names = periodic.liftable_params(protocol)
    return names[0] if names else None


def _explicit(path: Path, defines: dict[str, int]) -> CheckResult:
    protocol = load(path, defines)
    return explore(protocol, Budget(max_states=200_000, seconds=120), Machine(protocol))


def _describe(result) -> str:
    lines = []
    for d in result.diagnostics:
        lines.append(f"  {d.code} line {d.span.line if d.span else '?'}: {d.message}")
        lines += [f"    {s.step:3} {s.role:24} line {s.line:3} {s.iteration:8} {s.op} {s.note}" for s in d.trace]
    return "\n".join(lines)


def _cross_check(path: Path, defines: dict[str, int], n: int) -> None:
    protocol = load(path, defines)
    param = _trip_param(protocol)
    assert param is not None
    explicit = _explicit(path, {**defines, param: n})
    lifted = lift(protocol, defines, max_states=200_000, seconds=120, full_trace=True, only=n)
    if lifted.verdict is Verdict.INCONCLUSIVE and lifted.reason.startswith("not lifted"):
        pytest.skip(f"lift refused: {lifted.reason}")
    assert explicit.verdict is not Verdict.INCONCLUSIVE
    ex_bad = explicit.verdict is Verdict.VIOLATION
    li_bad = lifted.verdict is Verdict.VIOLATION
    assert ex_bad == li_bad, (
        f"{path.name} at {param}={n}: explicit says {explicit.verdict.value} {sorted(explicit.codes())}, "
        f"periodic search says {lifted.verdict.value} {lifted.reason}\n"
        f"explicit:\n{_describe(explicit)}\nperiodic:\n{_describe(lifted)}")
    if li_bad:
        assert lifted.bound == f"{param}={n}"


# specs whose search past the period takes about a minute of CPU (the first iteration stays in the suite)
_HEAVY_PAST_PERIOD = {"bounded_try_wait_fallthrough", "cutlass_consumer_release_multicast"}


@pytest.mark.parametrize("late", [False, True], ids=["first-iteration", "past-period"])
@pytest.mark.parametrize("path", [p for p in SPECS if loaded(str(p)).loop_params], ids=lambda p: p.stem)
def test_bounded_periodic_search_agrees_with_explicit(path: Path, late: bool):
    if late and path.stem in _HEAVY_PAST_PERIOD and not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("about a minute of search past the period; run with SYNCVERIFY_SLOW=1")
    defines = SMALL.get(path.stem, {})
    protocol = load(path, defines)
    param = _trip_param(protocol)
    try:
        plan = periodic.plan(protocol.source, defines, param, source_path=protocol.path)
    except periodic.Refusal:
        pytest.skip("the lift does not apply")
    n = min(plan.threshold + plan.period + 2, 7) if late else plan.min_iters
    n = CROSS_N.get(path.stem, n)
    _cross_check(path, defines, n)


def test_two_periods_of_a_ring_agree_with_explicit():
    # STAGES=2: period 4; ITERS=10 shifts the counters twice
    _cross_check(ROOT / "specs" / "cutlass_ws_ring.sync", {"STAGES": 2}, 10)
    _cross_check(ROOT / "specs" / "cutlass_ws_ring_no_empty_wait.sync", {"STAGES": 2}, 10)


# The specs the issue names: rings, the seeds' fixed versions, the named-barrier ping-pong.
PROVABLE = ["cutlass_ws_ring", "nvfuser_cb_mbarrier_war", "nvfuser_cb_syncthreads", "nvfuser_warp_specialized",
            "tilelang_bar_h_fixed", "fa3_pingpong", "fa3_pingpong_source", "wgmma_release_after_wait",
            "cutlass_ws_ring_per_warp_release_syncwarp"]


@pytest.mark.parametrize("name", PROVABLE)
def test_safe_specs_are_proved_for_every_trip_count(name: str):
    result = check_path(str(ROOT / "specs" / f"{name}.sync"), Options(engine="z3", defines=SMALL.get(name, {})))
    assert result.verdict is Verdict.SAFE, (result.coverage, _describe(result))
    assert result.bound.startswith("all-iterations")
    assert not result.codes() - {"SV203"}  # the ping-pong's pre-arrive warning is expected


@pytest.mark.parametrize("name", ["peer_init_fixed", "cutlass_2sm_tmem_alloc_fixed"])
def test_loop_free_specs_are_safe_for_all_iterations(name: str):
    result = check_path(str(ROOT / "specs" / f"{name}.sync"), Options(engine="z3"))
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


@pytest.mark.parametrize("name", ["cutlass_ws_ring_no_empty_wait", "cutlass_ws_ring_per_warp_release",
                                  "nvfuser_cb_no_war_wait", "nvfuser_cb_prologue_unobserved_phase",
                                  "wgmma_release_before_wait", "tilelang_bar_h_deadlock"])
def test_buggy_specs_are_found_by_the_periodic_search(name: str):
    path = ROOT / "specs" / f"{name}.sync"
    result = check_path(str(path), Options(engine="z3", defines=SMALL.get(name, {})))
    assert result.verdict is Verdict.VIOLATION, result.coverage
    expected = load(path).expect
    assert expected is not None and result.codes(None) & expected.errors
    param, value = result.bound.split("=")
    # the counterexample was replayed at its trip count: the explicit engine agrees there
    again = _explicit(path, {**SMALL.get(name, {}), param: int(value)})
    assert again.verdict is Verdict.VIOLATION


# ---------------------------------------------------------------------- beyond the bound
RING = """\
protocol ring {{
  param ITERS = {iters};
  param STAGES = 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile[STAGES] bytes 128;
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES] count 32;
  if producer {{ elect {{ init full[*]; init empty[*]; }} }}
  syncthreads;
  if producer {{
    for k in 0..ITERS {{
      let s = k % STAGES;
      {producer_wait}
      elect {{ arrive.expect_tx full[s] bytes 128; tma.load tile[s] -> full[s]; }}
    }}
  }}
  if consumer {{
    for k in 0..ITERS {{
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      {consumer_body}
      arrive empty[s];
    }}
  }}
}}
"""
GOOD_WAIT = "wait empty[s] parity (k / STAGES + 1) % 2;"


def _ring(iters: int = 2, producer_wait: str = GOOD_WAIT, consumer_body: str = "read tile[s];") -> str:
    return RING.format(iters=iters, producer_wait=producer_wait, consumer_body=consumer_body)


def _check_text(text: str, tmp_path: Path, **opts) -> CheckResult:
    spec = tmp_path / "ring.sync"
    spec.write_text(text)
    return check_path(str(spec), Options(**opts))


def test_auto_lifts_a_bounded_safe_to_every_trip_count(tmp_path):
    result = _check_text(_ring(), tmp_path)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")
    explicit = _check_text(_ring(), tmp_path, engine="explicit")
    assert (explicit.verdict, explicit.bound) == (Verdict.SAFE, "ITERS=2")


def test_a_bug_after_wrap_around_is_found_beyond_the_bound(tmp_path):
    # no empty wait: safe while the ring does not wrap (ITERS <= STAGES), a WAR race after
    text = _ring(iters=2, producer_wait="")
    bounded = _check_text(text, tmp_path, engine="explicit")
    assert bounded.verdict is Verdict.SAFE
    result = _check_text(text, tmp_path)
    assert result.verdict is Verdict.VIOLATION
    assert result.bound == "ITERS=3"
    race = next(d for d in result.diagnostics if d.code in ("SV302", "SV301", "SV303"))
    assert race.trace and any("k=2" in s.iteration for s in race.trace)  # replayed trace, concrete iterations


def test_a_bug_at_one_late_iteration_is_not_proved_safe(tmp_path):
    # `if k == 9`: periodic only from iteration 10 on, past the thresholds the lift accepts
    text = _ring(iters=4, consumer_body="if k == 9 { write tile[s]; } read tile[s];")
    result = _check_text(text, tmp_path)
    assert result.verdict is not Verdict.SAFE or result.bound == "ITERS=4"
    assert result.bound != "all-iterations"
    if result.verdict is Verdict.SAFE:
        assert "not lifted" in result.coverage and "line" in result.coverage
    z3_only = _check_text(text, tmp_path, engine="z3")
    assert z3_only.verdict is Verdict.INCONCLUSIVE and "not periodic" in z3_only.coverage


def test_a_counter_dependent_index_that_is_not_periodic_refuses_the_lift(tmp_path):
    # safe at ITERS=4 (indices 0..1), out of range at ITERS=6: k / 2 is not periodic
    text = RING.format(iters=4, producer_wait=GOOD_WAIT, consumer_body="read tile[k / 2 % 4 / 2];")
    bounded = _check_text(text, tmp_path)
    assert bounded.bound != "all-iterations"
    text = _ring(iters=4, consumer_body="read tile[k / 2];")
    result = _check_text(text, tmp_path)
    assert result.bound != "all-iterations"
    assert result.verdict is Verdict.VIOLATION or "not periodic" in result.coverage


def test_trip_count_outside_loop_bounds_refuses(tmp_path):
    text = _ring(iters=3, consumer_body="if k == ITERS - 1 { read tile[s]; }")
    result = _check_text(text, tmp_path, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "outside a loop bound" in result.coverage


def test_solver_unknown_is_never_periodic():
    k = Var("k", None)
    square = BinOp("%", BinOp("*", BinOp("*", k, k, None), k, None), Const(7, None), None)
    ctx = Context(0, 0, frozenset())
    assert periodic.periodic(square, {"k": 0}, ctx, 7, 0, rlimit=1) is None
    assert periodic.periodic(BinOp("%", k, Const(4, None), None), {"k": 0}, ctx, 8, 0) is True
    assert periodic.periodic(BinOp("/", k, Const(4, None), None), {"k": 0}, ctx, 8, 0) is False
    # C division: -1 / 2 == 0 and -1 % 2 == -1, so k % 2 is not 2-periodic across zero
    assert periodic.periodic(BinOp("%", k, Const(2, None), None), {"k": -3}, ctx, 2, 0) is False


def test_a_loop_that_never_reaches_an_operation_is_inconclusive(tmp_path):
    # a third warp's iterations never reach its read: with ITERS unknown its loop would not end (the ring
    # itself is safe, so the explicit checks of the small trip counts pass and the lift is asked)
    text = _ring(iters=3).replace("cta threads 64;", "cta threads 96;").replace(
        "  role consumer = warp 1;\n", "  role consumer = warp 1;\n  role idle = warp 2;\n").rstrip()
    idle = "  if idle {\n    for k in 0..ITERS {\n      if k % 2 == 5 { read tile[0]; }\n    }\n  }\n}\n"
    text = text.removesuffix("}") + idle
    result = _check_text(text, tmp_path, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "without reaching an operation" in result.coverage


def test_solver_unknown_refuses_the_lift(tmp_path, monkeypatch):
    monkeypatch.setattr(periodic, "RLIMIT", 1)
    text = _ring(iters=3, consumer_body="read tile[(k * k * k) % 2];")
    result = _check_text(text, tmp_path, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "Z3 could not decide" in result.coverage
    auto = _check_text(text, tmp_path)
    assert (auto.verdict, auto.bound) == (Verdict.SAFE, "ITERS=3")


def test_json_and_text_state_the_bound(tmp_path, capsys):
    spec = tmp_path / "ring.sync"
    spec.write_text(_ring())
    assert main(["check", "--format", "json", str(spec)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["bound"] == "all-iterations"
    assert main(["check", "--engine", "explicit", "--format", "json", str(spec)]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["bound"] == "ITERS=2"
    assert main(["check", str(spec)]) == 0
    assert "bound: all-iterations" in capsys.readouterr().out


def test_budget_ends_the_periodic_search_inconclusive(tmp_path):
    result = _check_text(_ring(), tmp_path, engine="z3", max_states=5)
    assert result.verdict is Verdict.INCONCLUSIVE and "budget" in result.coverage


# ---------------------------------------------------------------------- random protocols
try:
    from strategies import protocols  # tests/strategies.py: random small protocols
except ImportError:  # pragma: no cover - the generator lives next to this file
    protocols = None


@pytest.mark.skipif(protocols is None, reason="tests/strategies.py not available")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(text=protocols() if protocols is not None else None)
def test_random_protocols_agree_at_a_fixed_trip_count(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("rand") / "p.sync"
    path.write_text(text)
    protocol = load(path)
    param = _trip_param(protocol)
    if param is None:
        return
    try:
        plan = periodic.plan(protocol.source, {}, param, source_path=protocol.path)
    except periodic.Refusal:
        return
    n = max(protocol.param(param), min(plan.threshold + plan.period + 1, 6))  # past K + P: states merge by shifting
    concrete = load(path, {param: n})
    explicit = explore(concrete, Budget(max_states=50_000, seconds=30), Machine(concrete))
    lifted = lift(protocol, {}, max_states=50_000, seconds=30, only=n)
    if lifted.verdict is Verdict.INCONCLUSIVE or explicit.verdict is Verdict.INCONCLUSIVE:
        return
    assert (explicit.verdict is Verdict.VIOLATION) == (lifted.verdict is Verdict.VIOLATION), (
        f"{text}\nexplicit {explicit.verdict.value} {sorted(explicit.codes())}\n{_describe(explicit)}\n"
        f"periodic {lifted.verdict.value} {lifted.reason}\n{_describe(lifted)}")


def test_check_protocol_api_runs_the_lift(tmp_path):
    spec = tmp_path / "ring.sync"
    spec.write_text(_ring())
    result = check_protocol(load(spec), Options())
    assert result.bound == "all-iterations"
