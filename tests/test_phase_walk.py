"""The walk of what can come first knows which phase a process's later wait needs (precede_walk.py,
"Phases"; issues #33, #36).

Warp q waits on x with parity 0 and then with parity 1, and only then arrives on y. In the state
after the setup x is in phase 0: the first wait needs phase 0 to complete, and the second, although
parity 1 reads as passing in phase 0, can only run after that completion and so needs phase 1 to
complete too: two arrivals on x (count 1). With r arriving on x once, q cannot reach its arrive on
y before p's arrive on y; with two arrivals it can. Read off the state's phase, the second wait
passed, and q's arrive on y kept p's from being taken alone: the DeepGEMM multicast 2 case in small
(bench/RESULTS-speed.md, 2026-12-06, 03:10 UTC).
"""

from __future__ import annotations

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import precede_walk
from syncverify.engines.reduction.precede_walk import _ANY_UPDATE, can_precede, completions_needed
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import P_PC, State

TEXT = """
protocol second_wait {{
  cta threads 96;
  role q = warp 0;
  role r = warp 1;
  role p = warp 2;
  mbarrier x count 1;
  mbarrier y count 1;
  if p {{ elect {{ init x; init y; }} }}
  syncthreads;
  if q {{ wait x parity 0; wait x parity 1; elect {{ arrive y; }} }}
  if r {{ for i in 0..{rounds} {{ elect {{ arrive x; }} }} }}
  if p {{ elect {{ arrive y; }} }}
}}
"""


def _phase_blind(k: int, seen: int, parity: int) -> int:
    """The rule before: a wait's phase read off the state, whatever the process waited for before."""
    return 0 if k % 2 != parity % 2 else 1


def _after_setup(machine: Machine) -> State:
    """The first state (breadth-first) with every warp past the syncthreads and nothing in flight."""
    level = [machine.initial()]
    while level:
        for state in level:
            if all(machine.programs[q].code[state.procs[q][P_PC]].line >= 11 for q in range(len(machine.procs))):
                return state
        level = [res.state for state in level for res in machine.successors(state) if res.violation is None]
    raise AssertionError("no state past the setup")


def _walk(rounds: int) -> list[bool] | None:
    """What can come before p's arrive on y (every update of y forbidden)."""
    machine = Machine(load(TEXT.format(rounds=rounds), path="t.sync"))
    y = next(i for i, name in enumerate(machine.mb_names) if name[1] == "y")
    p = next(i for i, proc in enumerate(machine.procs) if proc.label().startswith("p."))
    return can_precede(machine, {}, _after_setup(machine), y, p, None, _ANY_UPDATE, False)


def test_completions_needed():
    assert completions_needed(0, 0, 1) == 0  # passes now: parity 1 reads phase 0 - 1 as complete
    assert completions_needed(0, 0, 0) == 1
    assert completions_needed(0, 1, 1) == 2  # after phase 0 completed for it, parity 1 needs phase 1 complete
    assert completions_needed(0, 1, 0) == 1  # the same parity again: phase 1 is where it already stands
    assert completions_needed(3, 0, 0) == 0
    assert completions_needed(3, 1, 1) == 1


def test_a_second_wait_needs_the_next_completion():
    # one arrival on x: q's second wait cannot pass first, so nothing can update y first
    assert _walk(1) is not None


def test_a_second_wait_passes_with_two_arrivals():
    # two arrivals complete phases 0 and 1: q reaches its arrive on y, which may come first
    assert _walk(2) is None


def test_the_phase_blind_walk_let_the_second_wait_pass(monkeypatch):
    monkeypatch.setattr(precede_walk, "completions_needed", _phase_blind)
    assert _walk(1) is None


@pytest.mark.parametrize("rounds", [1, 2])
def test_reduced_and_unreduced_searches_agree(rounds):
    protocol = load(TEXT.format(rounds=rounds), path="t.sync")
    budget = Budget(max_states=20_000, seconds=60)
    reduced = explore(protocol, budget, Machine(protocol), symmetry=True)
    full = explore(protocol, budget, Machine(protocol), symmetry=False, reduce=False)
    assert reduced.verdict == full.verdict
    assert {d.code for d in reduced.diagnostics if d.is_error} == {d.code for d in full.diagnostics if d.is_error}
    assert reduced.stats.states <= full.stats.states
