"""A kept probe's true outcome, left out where its false outcome covers it (engines/reduction/probe_outcome.py,
docs/model.md "A kept probe's true outcome").

The search stored both outcomes of `let t = try_wait B parity P` where the phase had completed, and they never met
again. The true step is now left out where the false step, followed at once by the local steps up to the wait
and by the wait, reaches the state the true step and the same local steps reach, but for the dead token and the
observation's line. The tests: the rule fires on CUTLASS's shape and saves states; a token read after the wait
keeps the true outcome (without the liveness condition a race is lost); a stale waiter that the true outcome
would report at the probe's line is still reported there (without the second search, only at the wait's); the
reduced search agrees with the unreduced one and with the search without the rule on a slice of the scope.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from exhaustive_programs import PROBE_TOKEN_SCOPES, sample

import syncverify.engines.explicit as explicit
import syncverify.engines.reduction.probe_outcome as probe_outcome
from syncverify import load
from syncverify.diagnostics import InputError
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import Reduction
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import P_PC

# w0 counts the copy's bytes on mb and starts it; w1 probes mb, waits for it only where the probe failed, then
# does {after} (pair[1] is also read by w0 after its copy: {w0_after})
_PROGRAM = """protocol probe_outcome {{
  cta threads 96; role w0 = warp 0; role w1 = warp 1; role setup = warp 2;
  mbarrier mb count 1; smem buf bytes 64; smem pair[2] bytes 64;
  if setup {{ elect {{ init mb; }} }} syncthreads;
  if w0 {{ elect {{ arrive.expect_tx mb bytes 64; tma.load buf -> mb; {w0_after} }} }}
  if w1 {{
    let t = try_wait mb parity 0;
    write pair[0];
    if !t {{
      wait mb parity 0;
    }}
    {after}
  }}
}}
"""


def _protocol(after: str = "read buf;", w0_after: str = ""):  # type: ignore[no-untyped-def]
    return load(_PROGRAM.format(after=after, w0_after=w0_after), path="probe_outcome.sync")


def _found(protocol, reduce: bool = True) -> tuple[str, list[tuple[str, int]], int]:  # type: ignore[no-untyped-def]
    result = explore(protocol, Budget(100_000, 60.0), Machine(protocol), reduce=reduce)
    return (result.verdict.value, sorted({(d.code, d.span.line if d.span else 0) for d in result.diagnostics}),
            result.stats.states)


def _without_the_rule(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(probe_outcome.KeptProbeOutcomes, "true_is_covered", lambda self, state, p, true: False)


def test_the_true_outcome_is_left_out_where_the_false_one_covers_it(monkeypatch):
    protocol = _protocol()
    machine = Machine(protocol)
    reduction = Reduction(machine)
    q = next(p.index for p in machine.procs if p.role == "w1")
    # run until w1 stands at its probe with the phase completed (w0's copy landed), by the reduced steps
    state, fired = machine.initial(), []
    for _ in range(200):
        if machine.programs[q].code[state.procs[q][P_PC]].slot >= 0 and machine.probe_passes(state, q):
            true = machine.step_process(state, q)
            fired.append(reduction.kept_probes.true_is_covered(state, q, true))  # type: ignore[arg-type]
            labels = [r.label for r in reduction.successors(state)]
            assert ("p", q) not in labels and ("p", q, 0) in labels, labels
            break
        state = next(reduction.successors(state)).state  # type: ignore[assignment]
    assert fired == [True]
    with_rule = _found(protocol)
    _without_the_rule(monkeypatch)
    without = _found(_protocol())
    assert with_rule[:2] == without[:2] == _found(_protocol(), reduce=False)[:2]
    assert with_rule[0] == "safe" and with_rule[2] < without[2], (with_rule, without)


def test_a_token_read_after_the_wait_keeps_the_true_outcome(monkeypatch):
    """`write pair[t]` after the wait: only the true outcome writes pair[1], which w0 reads unordered (a race).
    The token is live there, so the true step stays; taken as dead, the rule would lose the race."""
    protocol = _protocol(after="write pair[t];", w0_after="read pair[1];")
    reduced, unreduced = _found(protocol), _found(protocol, reduce=False)
    assert reduced[:2] == unreduced[:2]
    race = [f for f in reduced[1] if f[0].startswith("SV30")]
    assert race, reduced
    monkeypatch.setattr(probe_outcome, "live_positions", lambda prog, slot: [False] * len(prog.code))
    dead = _found(_protocol(after="write pair[t];", w0_after="read pair[1];"))
    assert not set(race) <= set(dead[1]), dead


def test_a_stale_waiter_is_reported_at_the_probe_s_line_too(monkeypatch):
    """w0 completes phase 1 of mb with an arrive w1's observation is not ordered before: SV501 at the line of
    whichever of the probe and the wait observed. The search that leaves the true outcome out reports only the
    wait's; explore() then searches again with every true outcome, and both lines are reported."""
    protocol = _protocol(w0_after="arrive mb;")
    reduced, unreduced = _found(protocol), _found(protocol, reduce=False)
    assert reduced[:2] == unreduced[:2]
    stale = sorted(line for code, line in reduced[1] if code == "SV501")
    assert len(stale) == 2, reduced
    monkeypatch.setattr(explicit, "stale_waiter_may_have_moved", lambda machine, errors: False)
    once = _found(_protocol(w0_after="arrive mb;"))
    assert sorted(line for code, line in once[1] if code == "SV501") == stale[1:], once


def test_the_token_is_live_only_up_to_its_last_read():
    protocol = _protocol(after="write pair[t]; write buf;")
    machine = Machine(protocol)
    q = next(p.index for p in machine.procs if p.role == "w1")
    prog = machine.programs[q]
    probe = next(pc for pc, ins in enumerate(prog.code) if ins.slot >= 0 and ins.op is not None)
    live = probe_outcome.live_positions(prog, prog.code[probe].slot)
    reads = [pc for pc, ins in enumerate(prog.code) if ins.op is not None and "pair" in str(ins.op)]
    assert live[probe + 1] and live[reads[-1]] and not live[reads[-1] + 1] and not live[probe]


@pytest.mark.parametrize("every", [37])
def test_a_slice_of_the_probe_outcome_scope_agrees(every, monkeypatch):
    """Every 37th program of PROBE_TOKEN_SCOPES["probe-outcomes"] (the full pass: bench/RESULTS-speed.md): the
    verdict and the findings (code, line) of the search with the rule are those without it, and its codes are
    among the unreduced search's, wherever all three conclude."""
    loaded = []
    for index, text in sample(PROBE_TOKEN_SCOPES["probe-outcomes"], every):
        try:
            loaded.append((index, text, load(text, path="slice.sync")))
        except InputError:
            continue
    with_rule = {index: _found(protocol) for index, _, protocol in loaded}
    unreduced = {index: _found(protocol, reduce=False) for index, _, protocol in loaded}
    _without_the_rule(monkeypatch)
    counts: collections.Counter = collections.Counter()
    for index, text, protocol in loaded:
        a, u, b = with_rule[index], unreduced[index], _found(protocol)
        if {a[0], u[0], b[0]} <= {"safe", "violation"}:
            assert a[:2] == b[:2] and a[0] == u[0], (index, a, b, u, text)
            assert {c for c, _ in a[1]} <= {c for c, _ in u[1]}, (index, a, u, text)
            counts[a[0]] += 1
            counts["fewer"] += a[2] < b[2]
    assert counts["safe"] and counts["violation"] and counts["fewer"], counts


def test_cutlass_s_token_pipeline_is_safe_in_fewer_states_than_without_the_rule(monkeypatch):
    path = Path(__file__).parent.parent / "specs" / "cutlass_fmha_consumer_try_wait_token.sync"
    protocol = load(path.read_text(), path=str(path))
    with_rule = _found(protocol)
    _without_the_rule(monkeypatch)
    without = _found(load(path.read_text(), path=str(path)))
    assert with_rule[:2] == without[:2] and with_rule[0] == "safe"
    assert with_rule[2] < without[2], (with_rule, without)


def test_the_second_search_stays_within_the_check_s_budgets(monkeypatch):
    """The search again with every true outcome gets what the first left of the state budget (and of the
    clock). With a budget the second search would fit alone but not after the first, the check keeps the first
    one's answer (the same verdict and codes, the stale waiter at the wait's line only); with room for both, it
    reports both lines."""
    protocol = _protocol(w0_after="arrive mb;")
    both = explore(protocol, Budget(100_000, 60.0), Machine(protocol))
    monkeypatch.setattr(explicit, "stale_waiter_may_have_moved", lambda machine, errors: False)
    first = explore(protocol, Budget(100_000, 60.0), Machine(protocol))
    monkeypatch.undo()
    second_states = both.stats.states  # the answer of the two searches is the second's, with its states
    assert first.stats.states < second_states

    def answer(result):  # type: ignore[no-untyped-def]
        return result.verdict, sorted((d.code, d.span.line if d.span else 0) for d in result.diagnostics)

    assert answer(both) != answer(first)  # the second search adds the probe's line
    tight = explore(protocol, Budget(second_states, 60.0), Machine(protocol))
    assert answer(tight) == answer(first) and tight.stats.states == first.stats.states
    room = explore(protocol, Budget(first.stats.states + second_states, 60.0), Machine(protocol))
    assert answer(room) == answer(both)
