"""The all-iterations lift covers exactly the trip counts it says (engines/tripcount.py, overflow.py).

Three ways it used to call a protocol safe for every trip count while the explicit engine
found a violation at one of them, each with a near twin that must keep its verdict:

* a param derived from the trip count (CUTLASS's ``k_tile_prologue = min(k_tiles, stages)``,
  an equality) was frozen at its value for large trip counts;
* counter expressions were proved periodic over unbounded integers, while the machine
  reports SV115 beyond 2^62;
* "all-iterations" began at ITERS = 1: ITERS = 0, accepted input, was never checked.

And every refusal docs/engines.md lists for these analyses, with its reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.engines import overflow, periodic, tripcount
from syncverify.engines.symbolic import lift
from syncverify.lang import load
from syncverify.result import CheckResult, Verdict

SPECS_DIR = Path(__file__).resolve().parents[1] / "specs"

RING = """\
protocol ring {{
  param STAGES = 4;
  param ITERS = 8;
  {params}
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile[STAGES] bytes 1024;
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES] count {empty_count};
  if producer {{ elect {{ init full[*]; init empty[*]; fence.mbarrier_init; }} }}
  syncthreads;
  if producer {{
    for k in 0..ITERS {{
      let s = k % STAGES;
      wait empty[s] parity (k / STAGES + 1) % 2;
      elect {{ arrive.expect_tx full[s] bytes 1024; tma.load tile[s] bytes 1024 -> full[s]; }}
    }}
  }}
  if consumer {{
    {prologue}
    for k in 0..ITERS {{
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      read tile[{index}];
      arrive empty[s];
    }}
  }}
}}
"""
PRO = "param PRO = (ITERS < STAGES) * ITERS + (ITERS >= STAGES) * STAGES;"  # min(ITERS, STAGES)


def ring(params: str = "", prologue: str = "", empty_count: str = "32", index: str = "s") -> str:
    return RING.format(params=params, prologue=prologue, empty_count=empty_count, index=index)


def check(text: str, **opts) -> CheckResult:
    return check_protocol(load(text, opts.get("defines", {}), path="t.sync"), Options(**opts))


def explicit_at(text: str, iters: int) -> CheckResult:
    return check(text, engine="explicit", defines={"ITERS": iters})


# ---------------------------------------------------------------------- 1. derived params
def test_min_of_trip_count_and_stages_is_not_frozen():
    # the read of tile[0] before the loop races with the first load when PRO < STAGES (ITERS < 4)
    text = ring(PRO, prologue="if PRO < STAGES { read tile[0]; }")
    assert explicit_at(text, 1).verdict is Verdict.VIOLATION
    result = check(text)
    assert result.verdict is Verdict.VIOLATION and "SV301" in result.codes()
    assert result.bound in ("ITERS=1", "ITERS=2", "ITERS=3")
    assert check(text, engine="z3").verdict is Verdict.VIOLATION


def test_min_of_trip_count_and_stages_that_is_safe_still_lifts():
    # the twin: the same derived param, used where it is harmless; it settles at ITERS = 4, the
    # trip counts below are checked one by one and the periodic search covers the rest
    text = ring(PRO, prologue="if PRO < STAGES { syncwarp; }")
    p = periodic.plan(text, {}, "ITERS")
    assert p.settle == 4 and p.min_iters == 4
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


def test_derived_param_that_feeds_nothing_still_lifts():
    text = ring("param TOTAL = ITERS * 2;")
    assert periodic.plan(text, {}, "ITERS").settle == 0
    assert (check(text).verdict, check(text).bound) == (Verdict.SAFE, "all-iterations")


def test_equality_with_the_trip_count_in_a_declaration():
    text = ring("param EXTRA = ITERS == 12;", empty_count="32 + 32 * EXTRA")
    assert explicit_at(text, 12).verdict is Verdict.VIOLATION
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.VIOLATION, "ITERS=12")
    assert "SV201" in result.codes()


def test_a_derived_value_that_settles_too_late_refuses_and_names_it():
    text = ring("param EXTRA = ITERS == 40;", empty_count="32 + 32 * EXTRA")
    result = check(text, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "`EXTRA` (derived from ITERS at line 4)" in result.coverage and "read at line 10" in result.coverage
    auto = check(text)
    assert (auto.verdict, auto.bound) == (Verdict.SAFE, "ITERS=8") and "EXTRA" in auto.coverage


def test_a_param_set_on_the_command_line_is_not_derived():
    text = ring("param EXTRA = ITERS == 12;", empty_count="32 + 32 * EXTRA")
    protocol = load(text, {"EXTRA": 0}, path="t.sync")
    assert tripcount.dependents(protocol, "ITERS") == {}
    assert load(text, path="t.sync") and "EXTRA" in tripcount.dependents(load(text, path="t.sync"), "ITERS")
    result = check(text, defines={"EXTRA": 0})
    assert result.verdict is Verdict.SAFE and result.bound.startswith("all-iterations")


def test_derived_params_through_other_params_and_loop_bounds():
    # a drain over the last PRO trip counts (TAIL = ITERS - PRO): PRO settles, so the bound is
    # ITERS + c from ITERS = 4 on
    text = ring(PRO + "\n  param TAIL = ITERS - PRO;")
    text = text.replace("      arrive empty[s];\n    }\n", "      arrive empty[s];\n    }\n"
                        "    for t in TAIL..ITERS { syncwarp; }\n", 1)
    assert "TAIL..ITERS" in text
    assert tripcount.dependents(load(text, path="t.sync"), "ITERS").keys() == {"PRO", "TAIL"}
    p = periodic.plan(text, {}, "ITERS")
    assert p.settle == 4
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


def test_a_use_of_the_trip_count_that_never_settles_refuses():
    text = ring(prologue="if ITERS % 2 == 1 { syncwarp; }")
    result = check(text, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "outside a loop bound (line" in result.coverage


def test_a_loop_bound_that_is_not_trip_count_plus_constant_refuses():
    text = ring(prologue="for t in 0..ITERS + (ITERS == 100) { syncwarp; }")
    result = check(text, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "loop bound at line" in result.coverage
    doubled = ring(prologue="for t in 0..2 * ITERS { syncwarp; }")
    assert "not of the form ITERS + c" in check(doubled, engine="z3").coverage


def test_bitwise_operators_on_derived_values_refuse():
    text = ring("param ODD = ITERS & 1;", prologue="if ODD { syncwarp; }")
    result = check(text, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "`ODD`" in result.coverage


def test_solver_unknown_on_a_derived_value_refuses(monkeypatch):
    monkeypatch.setattr(tripcount, "RLIMIT", 1)
    result = check(ring(PRO, prologue="if PRO < STAGES { syncwarp; }"), engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "Z3 could not decide" in result.coverage


def test_front_end_records_where_params_are_read():
    protocol = load(ring(PRO, prologue="if PRO < STAGES { syncwarp; }"), path="t.sync")
    kinds = {(s.kind, s.target, s.span.line) for s in protocol.param_sites}
    assert ("param", "PRO", 4) in kinds and ("bound", "", 14) in kinds and ("value", "", 21) in kinds
    assert all(s.kind != "param" or s.target != "STAGES" for s in protocol.param_sites)  # reads no param


# ---------------------------------------------------------------------- 2. overflow
ONE_WARP = """\
protocol one_warp {{
  param ITERS = 4;
  cta threads 32;
  role w = warp 0;
  smem t[4] bytes 64;
  if w {{ {body} }}
}}
"""


def overflow_text(body: str) -> str:
    """One warp running ``body`` in a loop of ITERS trips."""
    return ONE_WARP.format(body=f"for k in 0..ITERS {{ {body} }}")


def test_a_counter_expression_that_overflows_is_found():
    text = overflow_text("read t[(k * 1000000000000000000) % 2];")
    assert explicit_at(text, 6).codes() == {"SV115"}
    for engine in ("auto", "z3"):
        result = check(text, engine=engine)
        assert (result.verdict, result.bound) == (Verdict.VIOLATION, "ITERS=6")
        assert "SV115" in result.codes()


def test_the_same_multiplier_after_the_modulo_still_lifts():
    text = overflow_text("read t[(k % 2) * 1000000000000000000 % 2];")
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


def test_an_overflow_out_of_reach_bounds_the_claim():
    # k + 2 passes 2^62 only at k = 2^62 - 1: the bound says where the claim stops
    text = overflow_text("let l = k + 2; read t[l % 2];")
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, f"all-iterations (ITERS <= {2**62 - 1})")
    p = periodic.plan(text, {}, "ITERS")
    assert p.max_iters == 2**62 - 1 and "line 6" in p.overflow


def test_overflow_in_a_let_and_through_a_let():
    # in the let's own definition (it reads the counter: a proof obligation of its own)
    text = overflow_text("let s = k % 8 * 1000000000000000000; read t[s % 2];")
    assert (check(text).verdict, check(text).bound) == (Verdict.VIOLATION, "ITERS=6")
    # through a let: s = k % 8 is the same in merged states, so the periodic search meets s = 5
    text = overflow_text("let s = k % 8; read t[(s * 1000000000000000000) % 2];")
    result = check(text, engine="z3")
    assert result.verdict is Verdict.VIOLATION and "SV115" in result.codes()
    bounded = overflow_text("let s = k % 4; read t[(s * 1000000000000000000) % 2];")
    assert check(bounded).bound == "all-iterations"


def test_solver_unknown_on_overflow_refuses(monkeypatch):
    monkeypatch.setattr(overflow, "RLIMIT", 1)
    result = check(overflow_text("read t[(k * k * k) % 2];"), engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and "overflows" in result.coverage


# ---------------------------------------------------------------------- 3. trip count zero
DONE = """\
protocol done_wait {{
  param ITERS = {iters};
  {params}
  cta threads 32;
  role w = warp 0;
  smem t[2] bytes 64;
  mbarrier done count 32;
  if w {{
    elect {{ init done; fence.mbarrier_init; }}
    syncwarp;
    for k in 0..{bound} {{ {body} read t[k % 2]; }}
    {after}
    wait done parity 0;
  }}
}}
"""


def zero_text(minus: str, body: str, after: str) -> str:
    """One warp that waits for `done` after a loop of ITERS trips (``minus``: `- 1` for ITERS - 1)."""
    return DONE.format(iters=4, params="", bound=f"ITERS{minus}", body=body, after=after)


def test_trip_count_zero_is_checked():
    text = zero_text(minus="", body="if k == 0 { arrive done; }", after="")
    assert explicit_at(text, 0).verdict is Verdict.VIOLATION
    for engine in ("auto", "z3"):
        result = check(text, engine=engine)
        assert (result.verdict, result.bound) == (Verdict.VIOLATION, "ITERS=0") and "SV201" in result.codes()


def test_trip_count_zero_safe_twin_is_all_iterations():
    text = zero_text(minus="", body="", after="arrive done;")
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


def test_invalid_small_trip_counts_are_named_in_the_bound(capsys, tmp_path):
    # ITERS = 0 makes the bound -1: not valid input, so the claim starts at 1 and says so
    text = zero_text(minus=" - 1", body="", after="arrive done;")
    assert check(text, engine="explicit", defines={"ITERS": 1}).verdict is Verdict.SAFE
    result = check(text, defines={"ITERS": 3})
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations (ITERS >= 1)")
    spec = tmp_path / "z.sync"
    spec.write_text(text.replace("param ITERS = 4", "param ITERS = 3"))
    assert main(["check", "--format", "json", str(spec)]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["bound"] == "all-iterations (ITERS >= 1)"
    assert main(["check", str(spec)]) == 0
    assert "all-iterations (ITERS >= 1)" in capsys.readouterr().out


def test_sarif_states_the_trip_count_of_a_violation_at_zero(capsys, tmp_path):
    spec = tmp_path / "z.sync"
    spec.write_text(zero_text(minus="", body="if k == 0 { arrive done; }", after=""))
    main(["check", "--format", "sarif", str(spec)])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert results and {r["properties"]["bound"] for r in results} == {"ITERS=0"}


def test_a_search_restricted_to_a_small_trip_count_runs_it_concretely():
    text = zero_text(minus="", body="if k == 0 { arrive done; }", after="")
    protocol = load(text, path="t.sync")
    assert lift(protocol, {}, only=0).verdict is Verdict.VIOLATION
    assert lift(protocol, {}, only=2).verdict is Verdict.SAFE


@pytest.mark.parametrize("iters", [0, 1, 2, 5])
def test_explicit_agrees_below_and_above_the_start(iters: int):
    text = ring(PRO, prologue="if PRO < STAGES { read tile[0]; }")
    assert (explicit_at(text, iters).verdict is Verdict.VIOLATION) == (1 <= iters < 4)


# ---------------------------------------------------------------------- every refusal, with its reason
@pytest.mark.parametrize(("body", "reason"), [
    ("for j in 0..2 { for k in 0..ITERS { read t[0]; } }", "nested in another loop"),
    ("for k in ITERS - 1..ITERS { read t[0]; }", "starts at an ITERS-dependent bound"),
    ("for k in 0..ITERS { read t[0]; } for j in 0..ITERS { read t[1]; }", "two loops of ITERS trips"),
    ("for k in 0..ITERS { } read t[0];", "no loop runs ITERS times"),
    ("for k in 0..ITERS { read t[0]; let l = k + 1; read t[l % 4]; }", "at the start of its loop body"),
    ("for k in 0..ITERS { read t[0]; } for k in 0..2 { read t[k]; }", "reused by another loop"),
    ("for k in 0..ITERS { let s = k % 4; read t[k % (s + 1)]; }", "not periodic"),
    ("for k in 0..ITERS { read t[k & 3]; }", "not periodic"),
    ("for k in 0..ITERS { read t[k / 4]; }", "not periodic"),
    ("for k in 0..ITERS { read t[k % 2000 % 4]; }", "would need a period of"),
    ("for k in 0..ITERS { read t[0]; } if ITERS % 3 == 0 { read t[1]; }", "outside a loop bound"),
    ("for k in 0..ITERS + (ITERS > 50) { read t[0]; }", "loop bound at line"),
    ("for k in 0..ITERS * 2 { read t[0]; }", "not of the form ITERS + c"),
])
def test_each_refusal_names_its_reason(body: str, reason: str):
    text = ONE_WARP.format(body=body)
    assert check(text, engine="explicit").verdict is Verdict.SAFE  # (so the refusal is the lift's own)
    result = check(text, engine="z3")
    assert result.verdict is Verdict.INCONCLUSIVE and reason in result.coverage, result.coverage
    auto = check(text)
    assert (auto.verdict, auto.bound) == (Verdict.SAFE, "ITERS=4") and reason in auto.coverage


@pytest.mark.parametrize(("body", "bound"), [
    ("for k in 0..ITERS { read t[k % 4]; }", "all-iterations"),
    ("for k in 0..ITERS { read t[k / 2 % 4]; }", "all-iterations"),  # periodic: period 8
    ("for k in 0..ITERS { let l = k + 1; read t[l % 4]; } for k in ITERS - 1..ITERS { read t[k % 2]; }",
     "all-iterations (ITERS >= 1)"),  # ITERS = 0 makes the epilogue run backwards: not valid input
    ("for k in 0..ITERS { read t[0]; } if ITERS > 2 * ITERS - 5 { read t[1]; }", "all-iterations"),  # settles at 5
])
def test_near_twins_of_the_refusals_lift(body: str, bound: str):
    result = check(ONE_WARP.format(body=body))
    assert (result.verdict, result.bound) == (Verdict.SAFE, bound), result.coverage


# ---------------------------------------------------------------------- a slice of bench/lift_differential.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from lift_differential import run_seed, run_text  # noqa: E402
from strategies import trip_protocols  # noqa: E402


@pytest.mark.parametrize("seed", range(0, 400, 80))
def test_differential_slice_of_trip_count_derived_protocols(seed: int):
    row = run_seed(seed, max_states=50_000, seconds=30)
    assert not row["disagree"], row
    assert row["verdict"] == "inconclusive" or row["checked"]  # something was compared


def test_differential_compares_the_warnings_of_the_trip_counts():
    """Seed 13 warns (SV204) at ITERS = 0 only, below the lift's search: the explicit engine's warnings at every trip
    count compared must be the lift's. The lift had dropped them (a --strict safe); the slice above compared
    verdicts only, so it did not see that."""
    row = run_seed(13, max_states=50_000, seconds=30)
    assert (row["verdict"], row["bound"]) == ("safe", "all-iterations")
    assert not row["disagree"], row
    assert row["warnings"] and {code for code, _ in row["warnings"]} == {"SV204"}
    assert 0 in row["checked"] and not row["warnings_unseen"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(text=trip_protocols())
def test_trip_count_derived_protocols_from_hypothesis(text: str):
    row = run_text(text, "h.sync", max_states=50_000, seconds=30)
    assert not row["disagree"], (row, text)


def test_a_loop_param_derived_from_the_lifted_one_is_not_listed_as_fixed():
    # PRO bounds a loop, but it follows ITERS: the bound must not say PRO=4
    text = ring(PRO, prologue="for t in 0..PRO { syncwarp; }")
    result = check(text)
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations"), result.coverage
    fixed = check(text, defines={"PRO": 2})  # set on the command line: it is fixed now
    assert (fixed.verdict, fixed.bound) == (Verdict.SAFE, "all-iterations, PRO=2"), fixed.coverage


# ---------------------------------------------------------------------- a loop bound derived from the trip count
def total_text(arrive: str) -> str:
    """The loop bounded by `T = ITERS + 0`, then ``arrive`` on `done` and a wait for it."""
    return DONE.format(iters=8, params="param T = ITERS + 0;", bound="T", body="", after=arrive)


def test_a_loop_bound_param_derived_from_another_lifts_its_root():
    # T is the loop-bound param, but ITERS decides it (and more): lifting T with ITERS fixed at 8
    # while calling that every trip count missed the deadlock at ITERS = 5
    text = total_text("if ITERS != 5 { arrive done; }")
    assert explicit_at(text, 5).verdict is Verdict.VIOLATION
    assert periodic.liftable_params(load(text, path="t.sync")) == ["ITERS", "T"]
    for engine in ("auto", "z3"):
        result = check(text, engine=engine)
        assert (result.verdict, result.bound) == (Verdict.VIOLATION, "ITERS=5")


def test_a_loop_bound_param_derived_from_another_twin_lifts():
    result = check(total_text("arrive done;"))
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")


def test_lifting_a_derived_loop_bound_names_what_stays_fixed():
    # ITERS itself cannot be lifted (ITERS % 3 never settles): T is, with ITERS held at 8, and says so
    text = total_text("if ITERS % 3 != 1 { arrive done; }")  # (a deadlock at ITERS = 1, 4, 7, …)
    result = check(text, engine="z3")
    assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations, ITERS=8"), result.coverage


@pytest.mark.parametrize("name", ["cutlass_ws_ring", "tilelang_wgmma_writer_fence",
                                  "deepgemm_sm90_two_lane_store_one_wait", "fa3_pingpong_source"])
def test_the_explicit_start_changes_no_answer(monkeypatch, name):  # type: ignore[no-untyped-def]
    """The least trip count the search could start at, tried with the explicit engine first (answers.py,
    EXPLICIT_START_STATES): the same verdict, bound and codes as the search covering it itself."""
    from syncverify.engines.symbolic import answers

    protocol = load(str(SPECS_DIR / f"{name}.sync"))
    tried = check_protocol(protocol, Options(engine="z3"))
    monkeypatch.setattr(answers, "EXPLICIT_START_STATES", 0)
    searched = check_protocol(protocol, Options(engine="z3"))
    assert (tried.verdict, tried.bound, tried.codes()) == (searched.verdict, searched.bound, searched.codes())
    assert tried.verdict in (Verdict.SAFE, Verdict.VIOLATION)
    assert tried.stats.states != searched.stats.states  # the try acted: another split of the same work


def test_a_violation_at_the_least_trip_count_is_the_explicit_starts_answer(monkeypatch):  # type: ignore[no-untyped-def]
    """A ring whose consumer never waits: its CTA exits with the first copy in flight at ITERS = 1 (SV404). Tried
    explicitly, that is the answer; without the try, the search refuses the consumer's loop, which runs without
    reaching an operation."""
    from syncverify.engines.symbolic import answers

    text = ring().replace("      wait full[s] parity (k / STAGES) % 2;\n      read tile[s];\n      arrive empty[s];\n",
                          "      if k % 2 == 5 { read tile[s]; }\n")
    assert "arrive empty" not in text
    tried = check_protocol(load(text, path="x.sync"), Options(engine="z3"))
    assert (tried.verdict, tried.bound) == (Verdict.VIOLATION, "ITERS=1") and "SV404" in tried.codes()
    monkeypatch.setattr(answers, "EXPLICIT_START_STATES", 0)
    searched = check_protocol(load(text, path="x.sync"), Options(engine="z3"))
    assert searched.verdict is Verdict.INCONCLUSIVE and "without reaching an operation" in searched.coverage


# ---------------------------------------------------------------------- 4. findings below the search's start
ALIGNED = """\
protocol aligned {{
  param ITERS = 2;
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  for k in 0..ITERS {{
    {loop}
  }}
  if ITERS == 0 {{
    {tail}
  }}
}}
"""
TWO_LINES = "if a { bar.sync 2, 64; }\n    if b { bar.sync 2, 64; }"  # one barrier, reached from two lines


def test_a_warning_only_below_the_search_is_reported():
    """Two warps meet at one `bar.sync` from two lines (SV204, a warning) where ITERS = 0 only: a trip count the
    explicit engine checks below the all-iterations search. Its findings are the check's: reported with the trip
    count, and with --strict the verdict is a violation. They had been dropped (safe under --strict)."""
    text = ALIGNED.format(loop="bar.sync 1, 64;", tail=TWO_LINES)
    for engine in ("auto", "z3"):
        result = check(text, engine=engine)
        assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")
        found = [d for d in result.diagnostics if d.code == "SV204"]
        assert sorted(d.span.line for d in found) == [10, 11]
        assert all("found at ITERS=0" in d.notes for d in found)
        assert check(text, engine=engine, strict=True).verdict is Verdict.VIOLATION
    twin = check(ALIGNED.format(loop="bar.sync 1, 64;", tail="bar.sync 2, 64;"), strict=True)
    assert (twin.verdict, twin.bound, twin.diagnostics) == (Verdict.SAFE, "all-iterations", ())


def test_a_warning_below_and_in_the_search_is_reported_once():
    """The same warning at every trip count (the loop's two lines meet at one barrier): the explicit engine's finding
    at a small trip count and the search's at the same code and line are one finding."""
    text = ALIGNED.format(loop=TWO_LINES.replace("2, 64", "1, 64"), tail="bar.sync 2, 64;")
    for engine in ("auto", "z3"):
        result = check(text, engine=engine)
        assert (result.verdict, result.bound) == (Verdict.SAFE, "all-iterations")
        assert sorted(d.span.line for d in result.diagnostics if d.code == "SV204") == [7, 8]
