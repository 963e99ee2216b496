"""The lift stops at its first error and answers with the least failing trip count (answers._least_failing).

A ring with two stages and no wait on the empty barriers is safe at ITERS = 2 (no stage is
reused) and races from ITERS = 3 on. `auto` checks ITERS = 2, then the lift finds the race
beyond it. Before, the lift went on searching after it (its abstraction of a broken protocol
does not close) to its 150,000-state budget: 25 s for a race 14 steps deep. Now it stops, and
the explicit engine at the trip counts up to the one found names the least failing one, with the
findings `check -D ITERS=n` reports there.
"""

from __future__ import annotations

from syncverify.check import Options, check_protocol
from syncverify.engines.periodic import plan
from syncverify.engines.symbolic import answers, lift, lifted_search
from syncverify.lang import load
from syncverify.result import Stats, Verdict

RING = """\
protocol ring {
  param ITERS = 2;
  param STAGES = 2;
  cta threads 96;
  role producer = warp 0;
  role consumer[2] = warp 1 + i;
  smem tile[STAGES] bytes 128;
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES] count 64;
  if producer { elect { init full[*]; init empty[*]; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      let s = k % STAGES;
      elect { write tile[s]; arrive full[s]; }
    }
  }
  if consumer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      read tile[s]; arrive empty[s];
    }
  }
}
"""


def _codes(result) -> list[tuple[str, int]]:
    return sorted((d.code, d.span.line if d.span else 0) for d in result.diagnostics if d.is_error)


def test_auto_reports_the_least_failing_trip_count_with_its_explicit_findings():
    protocol = load(RING, path="ring.sync")
    result = check_protocol(protocol, Options())
    assert result.verdict is Verdict.VIOLATION
    assert result.bound == "ITERS=3"
    at3 = check_protocol(load(RING, {"ITERS": 3}, path="ring.sync"), Options(engine="explicit"))
    assert at3.verdict is Verdict.VIOLATION
    assert _codes(result) == _codes(at3)
    # the lift stopped at the race: a few hundred states at most (it searched 150,000 to its budget before)
    assert result.stats.states < 2_000


def test_the_search_stops_at_its_first_error_only_when_asked():
    protocol = load(RING, path="ring.sync")
    chosen = plan(protocol.source, dict(protocol.defines), "ITERS", source_path=protocol.path)
    stopped = lifted_search(chosen, max_states=1_000, stop_at_error=True)
    assert stopped.first_error and stopped.errors and not stopped.complete
    on = lifted_search(chosen, max_states=1_000)
    assert not on.first_error and on.states > stopped.states
    assert {f.violation.code for f in stopped.errors} <= {f.violation.code for f in on.errors}


def test_a_trip_count_found_late_is_lowered_to_the_least_failing_one():
    """The breadth-first search may meet a larger trip count's error first: the explicit checks from
    the plan's start up to it find the least one (here every ITERS >= 3 fails; asked from 5, it says 3)."""
    protocol = load(RING, path="ring.sync")
    chosen = plan(protocol.source, dict(protocol.defines), "ITERS", source_path=protocol.path)
    assert chosen.min_iters <= 3
    out = answers._least_failing(protocol, chosen, dict(protocol.defines), answers.DEFAULT_ASSUMPTIONS, 5,
                                 100_000, 60.0, False, Stats())
    assert out is not None and out.verdict is Verdict.VIOLATION and out.bound == "ITERS=3"


def test_a_safe_protocol_is_still_proved_for_every_trip_count():
    fixed = RING.replace("      let s = k % STAGES;\n      elect", "      let s = k % STAGES;\n"
                         "      wait empty[s] parity (k / STAGES + 1) % 2;\n      elect")
    res = lift(load(fixed, path="ring.sync"), {}, max_states=50_000)
    assert res.verdict is Verdict.SAFE and res.bound.startswith("all-iterations")
