"""The all-iterations lift with the reductions' walks under its loop hook (docs/model.md, "Lone steps under the
lift"; engines/reduction/hooked.py).

* The bracket: a walk that goes too far refuses, and a refusing walk's tests are forgotten.
* Small programs: the generator's programs whose loops run twice (tests/exhaustive_programs.py), with the loop
  bound made a param, lifted with and without the walks: the same verdict, error codes and bound (a slice
  here; a larger one with SYNCVERIFY_SLOW=1, bench/RESULTS-speed.md).
* The key condition: a walk whose answer takes a step alone holds only above the values it tested. Forgetting
  them loses the SV404 of a write to a CTA that exits after one iteration.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from exhaustive_programs import ROUND_SCOPES, SCOPES, assignments, programs, render

from syncverify import load
from syncverify.engines.periodic import plan
from syncverify.engines.reduction import hooked
from syncverify.engines.symbolic import hook as trip_hook
from syncverify.engines.symbolic import lift, lifted_search
from syncverify.result import Verdict

ROOT = Path(__file__).resolve().parent.parent
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="minutes of lifts (bench/RESULTS-speed.md); run with SYNCVERIFY_SLOW=1")
STATES = 1000  # the lift's budget per program: the generator's programs mostly end far below it
TWICE = re.compile(r"for (k\d+) in 0\.\.2 ")


# ---------------------------------------------------------------------- the bracket
def _hook(tested: list[int]) -> trip_hook.TripCount:
    """The lift's hook with ITERS not fixed (ITERS > 0 known), one trip-count loop (process 0, pc 5) and
    ``tested`` recorded: a plan's loops are all it reads of one."""
    hook = trip_hook.TripCount.__new__(trip_hook.TripCount)
    hook.loops, hook.fixed, hook.known, hook.tested, hook.walking = {(0, 5): (None, 0)}, None, 0, tested, 0
    return hook


class _Machine:
    def __init__(self, hook: object) -> None:
        self.loop_hook = hook


def test_a_walk_keeps_its_tests_only_where_its_answer_is_used():
    hook = _hook([1, 2])

    def walk(answer: object) -> object:
        assert hook(0, 5, 0, 2, 3) == (0, 4)  # the test 3 < ITERS: true, and recorded
        return answer

    assert hooked.walk_under_hook(_Machine(hook), lambda: walk(None)) is None
    assert hook.tested == [1, 2] and hook.walking == 0  # a refusal holds at every trip count
    assert hooked.walk_under_hook(_Machine(hook), lambda: walk("ends")) == "ends"
    assert hook.tested == [1, 2, 3] and hook.walking == 0


def test_a_walk_that_goes_too_far_refuses():
    hook = _hook([1])

    def walk() -> object:
        for value in range(2, 100):  # a loop whose waits all pass: with ITERS not fixed it never ends
            hook(0, 5, 0, 2, value)
        return "ends"

    assert hooked.walk_under_hook(_Machine(hook), walk) is None
    assert hook.tested == [1] and hook.walking == 0
    hook(0, 5, 0, 2, 50)  # outside a walk the same test is the step's own: recorded, no refusal
    assert hook.tested == [1, 50]
    # a hook that cannot bound a walk gets none: the rule refuses
    assert hooked.walk_under_hook(_Machine(lambda *a: a[2:4]), lambda: "ends") is None
    assert hooked.walk_under_hook(_Machine(None), lambda: "ends") == "ends"  # no hook: the walk as it is


# ---------------------------------------------------------------------- small programs
def lifted(text: str) -> str | None:
    """The program with its loops of two trips run ITERS times (a param at 2), or None without such a loop."""
    if not TWICE.search(text):
        return None
    return TWICE.sub(r"for \1 in 0..ITERS ", text).replace("{\n", "{\n  param ITERS = 2;\n", 1)


def answer(text: str, pinned: dict[str, int], walks: bool, states: int = STATES) -> tuple:
    """The lift's verdict, bound and error codes (with lines), and whether it stopped at its budget."""
    saved = hooked.WALKS_UNDER_HOOK
    hooked.WALKS_UNDER_HOOK = walks
    try:
        protocol = load(text, pinned, path="lifted.sync")
        res = lift(protocol, dict(protocol.defines), max_states=states, seconds=60)
    finally:
        hooked.WALKS_UNDER_HOOK = saved
    codes = tuple(sorted((d.code, d.span.line if d.span else 0) for d in res.diagnostics if d.is_error))
    return res.verdict, res.bound, codes, bool(res.stopped_by)


def compare(scopes: dict, every: int) -> dict[str, int]:
    """Every ``every``-th program with a loop in ``scopes``, lifted with and without the walks: where neither
    stopped at its budget, the same answer; where one did, no contradiction (a safe beside a violation)."""
    tally = {"compared": 0, "budget": 0, "violation": 0, "safe": 0}
    for name, scope in scopes.items():
        index = -1
        for program in programs(scope):
            text = lifted(render(scope, program))
            if text is None:
                continue
            index += 1
            if index % every:
                continue
            for pinned in assignments(text):
                on, off = answer(text, pinned, True), answer(text, pinned, False)
                if on[3] or off[3]:
                    tally["budget"] += 1
                    assert {on[0], off[0]} != {Verdict.SAFE, Verdict.VIOLATION}, (name, index, pinned, on, off, text)
                    continue
                assert on == off, (name, index, pinned, on, off, text)
                tally["compared"] += 1
                tally[on[0].name.lower()] = tally.get(on[0].name.lower(), 0) + 1
    return tally


def test_the_walks_keep_the_lift_answers_on_a_slice():
    tally = compare({name: SCOPES[name] for name in ("cta3", "phases")}, 211)
    assert tally["compared"] >= 10 and tally["violation"] and tally["safe"], tally


@SLOW
def test_the_walks_keep_the_lift_answers_on_the_loop_scopes():
    """Every 20th program with a loop of the scopes whose loops hold waits, arrivals and barriers."""
    names = ("cta3", "cta2-seq", "new2", "pairs2", "halves", "phases", "probes")
    tally = compare({**{name: SCOPES[name] for name in names}, **ROUND_SCOPES}, 20)
    print(tally)  # (for bench/RESULTS-speed.md: pytest -s)
    assert tally["compared"] >= 1000, tally


# ---------------------------------------------------------------------- the key condition
PEER_EXIT = """protocol peer_exit {
  param ITERS = 4;
  cluster 2;
  cta threads 64;
  role w = warp 0;
  role setup = warp 1;
  mbarrier f count 1;
  smem buf bytes 64;
  smem own bytes 64;
  if setup { elect { init f; fence.mbarrier_init; } }
  cluster.sync;
  if w && cta == 0 { for k in 0..ITERS { wait f parity k % 2; } }
  if w && cta == 1 {
    elect { arrive.release.cluster f @ 0; }
    write buf @ 0;
    read own;
    for j in 1..ITERS { elect { arrive.release.cluster f @ 0; } }
  }
}
"""


def _searched(text: str) -> set[tuple[str, int, int]]:
    """The periodic search's own errors (code, line, the trip count of its path), within 300 states. Asked of
    the search, not of `lift`: the lift's answer checks the trip counts up to its first error's with the explicit
    engine (answers._least_failing), which would find a lost ITERS = 1 finding again."""
    protocol = load(text, path="lifted.sync")
    chosen = plan(protocol.source, dict(protocol.defines), "ITERS", source_path=protocol.path)
    out = lifted_search(chosen, max_states=300)
    return {(f.violation.code, f.violation.span.line if f.violation.span else 0, f.iters) for f in out.errors}


def test_forgetting_the_tests_of_a_walk_that_took_a_step_loses_a_finding(monkeypatch):
    """CTA 1 arrives once on CTA 0's barrier, then writes CTA 0's buffer. With ITERS = 1 CTA 0's one wait needs
    only that arrival, so CTA 0 may exit before the write (SV404 at line 15). With ITERS not fixed, the walk
    asked about the write sees CTA 0 blocked at its second wait, and takes the write alone: that holds for
    ITERS above 1, the value the walk tested, and the lift computes ITERS = 1 again with it fixed. Forgetting
    that test takes the write alone at ITERS = 1 too, and the search loses the SV404 there."""
    want = answer(PEER_EXIT, {}, True, 300)
    assert want[0] is Verdict.VIOLATION and want[1] == "ITERS=1" and ("SV404", 15) in want[2], want
    assert answer(PEER_EXIT, {}, False, 300)[:3] == want[:3]  # without the walks: the same answer
    assert ("SV404", 15, 1) in _searched(PEER_EXIT)
    kept = trip_hook.TripCount.walk_end
    monkeypatch.setattr(trip_hook.TripCount, "walk_end", lambda self, mark, keep: kept(self, mark, False))
    assert ("SV404", 15, 1) not in _searched(PEER_EXIT)


def test_the_walks_decide_the_multicast_ring_in_few_states():
    """The premise of the lift's speed (bench/RESULTS-speed.md): the cluster ring's lift, 83,810 states with the
    walks off under the hook, is decided in under a thousand with them."""
    protocol = load(ROOT / "specs" / "cluster_multicast_ring_cta_scope.sync", {})
    res = lift(protocol, dict(protocol.defines), max_states=5000, seconds=60)
    assert res.verdict is Verdict.SAFE and res.bound == "all-iterations" and res.stats.states < 1000, res
