"""The mbarrier events ahead of a kept probe (`let t = try_wait B parity P`) as the reduction's walk reads them
(semantics/footprint_probe.py, docs/model.md "A kept probe's sequence").

Before, a token probe's position was unknown to the walk of what can come before a step, and every lone step
that asks it was refused while a probe lay ahead of some process (CUTLASS's `consumer_try_wait`). Now the probe
stands for its false outcome's sequence where that covers the true one's. The tests: that sequence is what the
walk gets, and only for CUTLASS's shape; a program whose violation needs the events between the probe and the
wait to come first keeps it (the naive reading, the probe as a wait, loses it there); the reduced search agrees
with the unreduced one.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import PROBE_TOKEN_SCOPES, sample

import syncverify.semantics.footprint as footprint
from syncverify import load
from syncverify.diagnostics import InputError
from syncverify.engines.explicit import Budget, explore
from syncverify.semantics.footprint import _EV_WAIT
from syncverify.semantics.footprint_probe import with_var
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import OP

# w0 counts the copy's bytes on mb and starts it, then lets w1 go; w1 probes mb, arrives on it and waits for it
# only if the probe failed. Where the probe fails before the copy lands, w1's arrive comes before the landing:
# the expect_tx already took mb's one arrival, so it is one too many (SV504). The walk must see that arrive
# ahead of the landing; read as a wait, the probe would hide it behind the landing's own phase.
_LANDING = """protocol probe_token_landing {{
  cta threads 96;
  role w0 = warp 0;
  role w1 = warp 1;
  role setup = warp 2;
  mbarrier mb count 1;
  mbarrier go count 1;
  smem buf bytes 64;
  if setup {{ elect {{ init mb; init go; fence.mbarrier_init; }} }}
  syncthreads;
  if w0 {{ elect {{ arrive.expect_tx mb bytes 64; tma.load buf -> mb; arrive go; }} }}
  if w1 {{ elect {{ wait go parity 0; let t = try_wait mb parity 0; {between} {tail} }} }}
}}
"""


def _machine(between: str = "arrive mb;", tail: str = "if !t { wait mb parity 0; }") -> Machine:
    return Machine(load(_LANDING.format(between=between, tail=tail), path="landing.sync"))


def _probe_key(machine: Machine) -> tuple:
    """The position of w1's probe, with the variables it has there."""
    q = next(p.index for p in machine.procs if p.role == "w1")
    pc = next(pc for pc, ins in enumerate(machine.programs[q].code) if ins.kind == OP and ins.slot >= 0)
    return (q, pc, (0,) * len(machine.programs[q].var_names))


def _codes(machine: Machine, reduce: bool) -> tuple[str, list[str]]:
    result = explore(machine.protocol, Budget(100_000, 60.0), machine, reduce=reduce)
    return result.verdict.value, sorted({d.code for d in result.diagnostics})


def test_a_kept_probe_reads_as_its_false_outcome_where_it_is_cutlass_s_shape():
    machine = _machine()
    key = _probe_key(machine)
    events, after = machine.future(key)  # type: ignore[misc]
    assert events == ()
    q, pc, vars_ = key
    slot = machine.programs[q].code[pc].slot
    assert after == (q, *machine._run_local(q, pc + 1, with_var(vars_, slot, 0)))
    # the sequence from there holds the arrive, then the wait the token skips
    nxt = machine.future(after)
    assert nxt is not None and nxt[0][0][0] != _EV_WAIT
    assert machine.future(nxt[1])[0][0][0] == _EV_WAIT  # type: ignore[index]


@pytest.mark.parametrize("tail", ["if t { wait mb parity 0; }", "if !t { wait go parity 0; }",
                                  "if !t { wait mb parity 1; }", "if !t { arrive go; }"])
def test_a_token_read_otherwise_stays_unknown(tail):
    """The wait where the probe passed, a wait on another barrier or parity, an arrive where it failed: the two
    outcomes' sequences differ otherwise than by the probe's own wait, so the position stays unknown."""
    machine = _machine(tail=tail)
    assert machine.future(_probe_key(machine)) is None


def test_the_arrive_before_the_landing_is_kept_and_the_probe_read_as_a_wait_loses_it(monkeypatch):
    machine = _machine()
    reduced, unreduced = _codes(machine, True), _codes(_machine(), False)
    assert reduced == unreduced
    assert "SV504" in reduced[1]

    def as_a_wait(fp, key, wait_event):  # the naive reading: the true outcome's sequence
        q, pc, vars_ = key
        ins = fp.programs[q].code[pc]
        m, parity = fp._wait_target(q, ins.op, vars_)
        return ((wait_event, m, parity),), (q, *fp._run_local(q, pc + 1, with_var(vars_, ins.slot, 1)))

    monkeypatch.setattr(footprint, "kept_probe_future", as_a_wait)
    naive = _codes(_machine(), True)
    assert "SV504" not in naive[1], naive


def test_cutlass_s_token_pipeline_is_safe_in_fewer_states():
    """specs/cutlass_fmha_consumer_try_wait_token.sync: safe, in fewer states than the 521 it took while the
    walk could not read the probe (bench/house_invariance.py compares it with the unreduced search: the same
    verdict and findings, bench/RESULTS-speed.md)."""
    path = Path(__file__).parent.parent / "specs" / "cutlass_fmha_consumer_try_wait_token.sync"
    protocol = load(path.read_text(), path=str(path))
    reduced = explore(protocol, Budget(100_000, 60.0), Machine(protocol))
    assert reduced.verdict.value == "safe"
    assert reduced.stats.states < 521, reduced.stats.states


def _loaded(every: int):
    """Every ``every``-th program of the kept-probe scope (tests/exhaustive_programs.py, PROBE_TOKEN_SCOPES), loaded;
    the ones the language refuses are left out."""
    for index, text in sample(PROBE_TOKEN_SCOPES["probe-tokens"], every):
        try:
            yield index, load(text, path="slice.sync"), text
        except InputError:
            continue


def test_reduced_and_unreduced_explicit_agree_on_a_slice_of_the_kept_probe_scope():
    """Two warps, up to three statements each: the token shape with a read of the guarded slot or an arrive on
    the barrier between the probe and the wait, beside arrive.expect_tx, a copy onto the barrier, a wait, an
    arrive and a write. Same verdict wherever both conclude, the reduced codes among the unreduced ones (the
    full pass, every program: bench/RESULTS-speed.md)."""
    by_engine = {e.name: e for e in engines()}
    reduced, unreduced = by_engine["explicit"], by_engine["explicit-unreduced"]
    verdicts: collections.Counter = collections.Counter()
    agreed = 0
    for index, protocol, text in _loaded(41):
        ref, other = reduced.run(protocol, 100_000, 60.0), unreduced.run(protocol, 100_000, 60.0)
        verdicts[ref.verdict] += 1
        if ref.verdict in CONCLUSIVE and other.verdict in CONCLUSIVE:
            assert compare(ref, other, unreduced).kind == "agree", (index, other, ref, text)
            agreed += 1
    assert agreed >= 60 and verdicts["safe"] and verdicts["violation"], (agreed, verdicts)
