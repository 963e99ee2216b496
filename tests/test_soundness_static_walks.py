"""SV406 on every trip count and at any length: the tensor-memory totals and the exit check.

The column totals of each CTA are added up by an exact walk (syncverify/static/tmem_walk.py) that
summarises loops instead of stepping a fixed number of operations, and the search checks the
columns at every CTA's exit (Machine._tmem_exit), so the all-iterations lift sees a leak at the
trip counts where it happens. Each reproducer has a near twin that keeps its answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import time
from pathlib import Path

import pytest
from diff_engines import spin_fast

from syncverify import ir
from syncverify.budget import STATES, TIME
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.export.promela import ExportError, export_model
from syncverify.export.spin import tools_available
from syncverify.lang import load
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine
from syncverify.static.checks import static_findings
from syncverify.static.tmem_walk import WalkIncomplete, tmem_totals

# alloc on even trips, dealloc on odd ones: balanced at even ITERS, 64 columns leaked at odd ones
LEAK_ODD = """\
protocol leak_odd {
  param ITERS = 2;
  cta threads 64;
  role mma = warp 0;
  role other = warp 1;
  if mma {
    for k in 0..ITERS {
      if k % 2 == 0 { tmem.alloc cols 64; } else { tmem.dealloc cols 64; }
    }
  }
}
"""

# near twin: each trip allocates and frees: balanced at every ITERS
PAIRED = LEAK_ODD.replace("""    for k in 0..ITERS {
      if k % 2 == 0 { tmem.alloc cols 64; } else { tmem.dealloc cols 64; }
    }""", """    for k in 0..ITERS {
      for h in 0..2 {
        if h % 2 == 0 { tmem.alloc cols 64; } else { tmem.dealloc cols 64; }
      }
    }""")

# an allocation after more than a million operations, never freed
LATE_ALLOC = """\
protocol late_alloc {
  param ITERS = 1000001;
  cta threads 32;
  for k in 0..ITERS { syncwarp; }
  tmem.alloc cols 32;
}
"""
LATE_ALLOC_FREED = LATE_ALLOC.replace("tmem.alloc cols 32;\n", "tmem.alloc cols 32;\n  tmem.dealloc cols 32;\n")

# balanced across 10^8 operations
BALANCED_FAR = """\
protocol balanced_far {
  param ITERS = 100000000;
  cta threads 32;
  tmem.alloc cols 32;
  for k in 0..ITERS { syncwarp; }
  tmem.dealloc cols 32;
}
"""
UNBALANCED_FAR = BALANCED_FAR.replace("  tmem.dealloc cols 32;\n", "")

# 10^9 trips of local control flow (the operation in the loop is never reached)
SPIN_LOCAL = """\
protocol spin_local {
  param ITERS = 1000000000;
  cta threads 32;
  tmem.alloc cols 32;
  for k in 0..ITERS { if k == ITERS + 5 { syncwarp; } }
  tmem.dealloc cols 32;
}
"""

# a loop whose trips allocate differently, too long to walk trip by trip
TAINTED = """\
protocol tainted {
  param ITERS = 10000000;
  cta threads 32;
  for k in 0..ITERS {
    for h in 0..2 {
      if (h + 2 * k) % 2 == 0 { tmem.alloc cols 64; } else { tmem.dealloc cols 64; }
    }
  }
}
"""


# The state budget of a z3 check whose lift finds an error at a small trip count while the protocol's own trip
# count is huge: the explicit search z3 runs there afterwards would otherwise spend the whole timeout
FOLLOW_UP_STATES = 20_000


def run(text: str, engine: str, max_states: int | None = None, **defines: int) -> tuple[Verdict, set[str], str]:
    options = Options(engine=engine, timeout=120) if max_states is None else \
        Options(engine=engine, timeout=120, max_states=max_states)
    res = check_protocol(load(text, defines, path="t.sync"), options)
    return res.verdict, {d.code for d in res.diagnostics if d.is_error}, res.bound


def static(text: str, **defines: int) -> set[str]:
    proto = load(text, defines, path="t.sync")
    return {d.code for d in static_findings(proto, Machine(proto).programs)}


# ---------------------------------------------------------------------- a leak at some trip counts
@pytest.mark.parametrize("iters", [1, 3, 5])
def test_leak_at_odd_trip_counts_is_sv406_on_the_explicit_and_bmc_engines(iters):
    for engine in ("explicit", "bmc"):
        verdict, codes, _ = run(LEAK_ODD, engine, ITERS=iters)
        assert verdict is Verdict.VIOLATION and codes == {"SV406"}, engine


@pytest.mark.parametrize("iters", [2, 4])
def test_leak_odd_is_balanced_at_even_trip_counts(iters):
    for engine in ("explicit", "bmc"):
        assert run(LEAK_ODD, engine, ITERS=iters)[0] is Verdict.SAFE, engine


@pytest.mark.parametrize("engine", ["z3", "auto"])
def test_the_lift_finds_the_leak_at_an_odd_trip_count(engine):
    verdict, codes, bound = run(LEAK_ODD, engine)
    assert verdict is Verdict.VIOLATION and codes == {"SV406"}
    assert bound == "ITERS=1"


@pytest.mark.parametrize("engine", ["z3", "auto"])
def test_twin_balanced_on_every_trip_is_safe_for_all_iterations(engine):
    verdict, codes, bound = run(PAIRED, engine)
    assert verdict is Verdict.SAFE and not codes and bound.startswith("all-iterations")


def test_the_search_reports_the_leak_at_exit_with_a_trace():
    res = check_protocol(load(LEAK_ODD, {"ITERS": 3}, path="t.sync"), Options(engine="explicit"))
    (d,) = [d for d in res.diagnostics if d.code == "SV406"]
    assert d.trace and d.span.line == 8


@pytest.mark.skipif(tools_available() is not None, reason="needs spin and a C compiler")
@pytest.mark.parametrize("iters, verdict", [(1, "violation"), (2, "safe")])
def test_promela_export_with_the_static_findings_agrees(iters, verdict):
    """SPIN on the exported model plus the search-free findings, as the cross-check combines them."""
    answer = spin_fast(load(LEAK_ODD, {"ITERS": iters}, path="t.sync"), 10_000, 120)
    assert answer.verdict == verdict
    assert answer.codes == ({"SV406"} if verdict == "violation" else set())


# ---------------------------------------------------------------------- totals beyond a million operations
def test_alloc_after_a_million_operations_is_sv406():
    assert static(LATE_ALLOC) == {"SV406"}
    # the lift finds the leak at ITERS = 0; the explicit search z3 adds at the protocol's own trip count (a
    # million steps, for further errors) is bounded by states here, not by the wall clock
    verdict, codes, _ = run(LATE_ALLOC, "z3", max_states=FOLLOW_UP_STATES)
    assert verdict is Verdict.VIOLATION and codes == {"SV406"}


def test_twin_alloc_after_a_million_operations_freed_is_clean():
    assert static(LATE_ALLOC_FREED) == set()
    verdict, _, bound = run(LATE_ALLOC_FREED, "z3")
    assert verdict is Verdict.SAFE and bound.startswith("all-iterations")


def test_balanced_across_a_hundred_million_operations_is_safe():
    assert static(BALANCED_FAR) == set()
    verdict, codes, bound = run(BALANCED_FAR, "z3")
    assert verdict is Verdict.SAFE and not codes and bound.startswith("all-iterations")


def test_twin_unbalanced_across_a_hundred_million_operations_is_sv406():
    assert static(UNBALANCED_FAR) == {"SV406"}
    assert run(UNBALANCED_FAR, "z3", max_states=FOLLOW_UP_STATES)[:2] == (Verdict.VIOLATION, {"SV406"})


def test_totals_are_exact_and_cheap_for_summarised_loops():
    m = Machine(load(BALANCED_FAR, {}, path="t.sync"))
    alloc, free, first = tmem_totals(m, limit=100)[0]
    assert (alloc, free) == (32, 32) and isinstance(first, ir.TmemAlloc)


# ---------------------------------------------------------------------- the walk's budgets
def test_a_walk_past_its_step_budget_says_so_every_time():
    m = Machine(load(TAINTED, {}, path="t.sync"))
    for _ in range(2):
        with pytest.raises(WalkIncomplete) as why:
            tmem_totals(m, limit=10_000)
        assert why.value.kind == STATES and "10,000 steps" in str(why.value)


def test_a_walk_past_its_deadline_stops():
    m = Machine(load(TAINTED, {}, path="t.sync"))
    with pytest.raises(WalkIncomplete) as why:
        tmem_totals(m, limit=10**9, deadline=time.monotonic() + 0.2)
    assert why.value.kind == TIME


def test_bmc_refuses_totals_it_cannot_add_up():
    verdict, _, _ = run(TAINTED, "bmc")
    assert verdict is Verdict.INCONCLUSIVE


def test_promela_export_refuses_totals_it_cannot_add_up():
    with pytest.raises(ExportError, match="not added up"):
        export_model(load(TAINTED, {}, path="t.sync"))


def test_the_lift_decides_what_the_walk_could_not():
    verdict, _, bound = run(TAINTED, "z3")
    assert verdict is Verdict.SAFE and bound.startswith("all-iterations")


class Hang(Exception):
    pass


def cli_check(tmp_path: Path, text: str, *extra: str, hang: int = 60) -> tuple[int, dict, float]:
    path = tmp_path / "walk.sync"
    path.write_text(text)
    out = io.StringIO()

    def alarm(signum, frame):
        raise Hang(f"no answer after {hang}s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(hang)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["check", str(path), "--format", "json", *extra])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    (result,) = json.loads(out.getvalue())["results"]
    return rc, result, time.monotonic() - start


def test_timeout_holds_over_a_billion_trips_of_local_control_flow(tmp_path):
    rc, result, seconds = cli_check(tmp_path, SPIN_LOCAL, "--engine", "explicit", "--timeout", "3")
    assert rc == 3 and result["verdict"] == "inconclusive" and result["stopped_by"] == "time"
    assert seconds < 30


def test_twin_short_local_loop_is_safe(tmp_path):
    rc, result, _ = cli_check(tmp_path, SPIN_LOCAL.replace("1000000000", "1000"), "--engine", "explicit")
    assert rc == 0 and result["verdict"] == "safe"
