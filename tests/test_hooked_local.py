"""Runs under a loop hook remembered with the hook's answers (semantics/hooked_local.py).

* A remembered run asks the hook its tests again: the hook records them as the first run made them,
  and a hook that decides one otherwise (ITERS fixed below it) gets the run made afresh.
* The lift with runs, futures and the reductions' walks remembered that way searches exactly what it
  searches with every run made afresh: the same states, transitions, verdict, bound and findings, on
  the lifted small programs of tests/exhaustive_programs.py and on specs whose main loops hold the walks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exhaustive_programs import SCOPES, assignments, programs, render
from test_lift_walks import lifted

from syncverify import load
from syncverify.engines.periodic import Refusal, plan
from syncverify.engines.symbolic import hook as trip_hook
from syncverify.engines.symbolic import lifted_search
from syncverify.semantics import hooked_local
from syncverify.semantics.machine import Machine

ROOT = Path(__file__).resolve().parent.parent
SLOW = bool(os.environ.get("SYNCVERIFY_SLOW"))

LOOP = """protocol loop {
  param ITERS = 3;
  cta threads 32;
  role w = warp 0;
  mbarrier f count 1;
  smem buf bytes 64;
  if w { elect { init f; } }
  __syncthreads;
  if w { for k in 0..ITERS { write buf; } }
}
"""


def _machine() -> tuple[Machine, trip_hook.TripCount, tuple]:
    protocol = load(LOOP, {}, path="loop.sync")
    chosen = plan(protocol.source, dict(protocol.defines), "ITERS", source_path=protocol.path)
    machine = Machine(chosen.protocol)
    hook = trip_hook.TripCount(chosen)
    machine.loop_hook = hook
    (proc, loop_plan), = chosen.procs
    return machine, hook, (proc, loop_plan.main)


def test_a_remembered_run_asks_the_hook_its_tests_again():
    machine, hook, (p, main) = _machine()
    vars_ = (0,) * len(machine.programs[p].var_names)
    hook.fixed, hook.known, hook.tested = None, 0, []
    first = machine._run_local(p, main.init_pc, vars_)
    assert hook.tested == [], "entering the loop tests 0 < ITERS, known true"
    at_next = (main.next_pc, tuple(first[1]))
    stepped = machine._run_local(p, *at_next)  # the test 1 < ITERS: not known, recorded
    assert hook.tested == [1]
    hook.tested = []
    assert machine._run_local(p, *at_next) == stepped  # remembered, and the test made again
    assert hook.tested == [1]
    hook.fixed = 1  # ITERS = 1: the loop ends there, so the remembered run is not the answer
    ended = machine._run_local(p, *at_next)
    assert ended != stepped and ended[0] > main.next_pc
    hook.fixed = 5
    assert machine._run_local(p, *at_next) == stepped


def _searched(text: str, pinned: dict[str, int], states: int) -> tuple:
    protocol = load(text, pinned, path="lifted.sync")
    try:
        chosen = plan(protocol.source, dict(protocol.defines), "ITERS", source_path=protocol.path)
    except Refusal as why:  # (not a shape the lift takes: nothing to compare)
        return ("refused", str(why))
    out = lifted_search(chosen, max_states=states, seconds=120)
    found = sorted((f.violation.code, f.violation.span.line if f.violation.span else 0, f.iters, len(f.labels))
                   for f in (*out.errors, *out.warnings))
    return out.complete, out.states, out.transitions, found


def _both(text: str, pinned: dict[str, int], states: int) -> tuple[tuple, tuple]:
    on = _searched(text, pinned, states)
    hooked_local.REMEMBER = False
    try:
        off = _searched(text, pinned, states)
    finally:
        hooked_local.REMEMBER = True
    return on, off


@pytest.mark.parametrize("scope, every", [("cta3", 97), ("phases", 97), ("probes", 499)])
def test_remembering_keeps_every_lift_of_small_programs(scope: str, every: int):
    """Every ``every``-th program of the scope (a quarter as many apart with SYNCVERIFY_SLOW=1)."""
    every = every // 4 if SLOW else every
    compared = 0
    for index, program in enumerate(programs(SCOPES[scope])):
        if index % every:
            continue
        text = lifted(render(SCOPES[scope], program))
        if text is None:
            continue
        for pinned in assignments(text):
            on, off = _both(text, pinned, 600)
            assert on == off, (scope, index, pinned, on, off, text)
            compared += on[0] != "refused"
    print(scope, compared)  # (pytest -s)
    assert compared >= 5, compared


@pytest.mark.parametrize("name", ["cluster_multicast_ring_cta_scope", "cutlass_ws_ring", "nvfuser_cb_mbarrier_war",
                                  "cutlass_sm90_consumer_try_wait", "cutlass_sm80_multistage_cp_async"])
def test_remembering_keeps_the_lift_of_specs(name: str):
    path = ROOT / "specs" / f"{name}.sync"
    on, off = _both(path.read_text(), {}, 3000)
    assert on == off and on[1] > 50, (on, off)
