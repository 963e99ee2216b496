"""The exits after a kernel's last cluster barrier taken alone (engines/exit_por.py) against
the unreduced search.

Each protocol is checked with every reduction on and with none: verdicts and error codes must
agree, and each states what the unreduced search finds. The searches where the rule applies
must also take fewer steps with it than without it (so that a protocol that stopped exercising it
fails here), and the near twins keep what makes the rule stand aside: a copy in flight, an open
named-barrier generation, a warp with work left after the others' last wait. The last test runs
every program of the cluster scope of tests/exhaustive_programs.py that ends in the rule's
shape, reduced against unreduced.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reduction_slices import compare_where_it_acts

from syncverify import load
from syncverify.engines import exit_por
from syncverify.engines.explicit import Budget, explore
from syncverify.result import Verdict
from syncverify.semantics import machine as machine_mod
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=100_000, seconds=120)


def _codes(result) -> set[str]:
    return {d.code for d in result.diagnostics if d.is_error}


# name -> (spec, the unreduced search's error codes, whether the rule must take some exit alone)
CASES = {
    # an idle warp per CTA that only takes both cluster barriers, beside a producer/consumer pair
    "idle_warps_at_the_final_cluster_barrier": ("""
protocol t {
  cluster 2;
  cta threads 96;
  role prod = warp 0;
  role cons = warp 1;
  smem x bytes 64;
  mbarrier full count 32;
  if prod { elect { init full; fence.mbarrier_init; } }
  cluster.sync;
  if prod { write x; arrive full; }
  if cons { wait full parity 0; read x; }
  cluster.sync;
}""", set(), True),
    # a bulk store whose read is never retired: the CTA's last exit reports SV404 in every order
    "store_read_outstanding_at_the_last_exit": ("""
protocol t {
  cluster 2;
  cta threads 128;
  role st = warp 0;
  smem d bytes 1024;
  cluster.sync;
  if st { elect { write d; fence.proxy.async; tma.store d; bulk.commit; } }
  cluster.sync;
}""", {"SV404"}, True),
    # the twin: the store's read is retired before the barrier
    "store_read_retired": ("""
protocol t {
  cluster 2;
  cta threads 128;
  role st = warp 0;
  smem d bytes 1024;
  cluster.sync;
  if st { elect { write d; fence.proxy.async; tma.store d; bulk.commit; bulk.wait_read 0; } }
  cluster.sync;
}""", set(), True),
    # a copy still in flight when the CTA exits (SV404): the rule stands aside while it is in
    # flight, and takes the exits alone in the orders where it has landed
    "copy_in_flight_at_the_end": ("""
protocol t {
  cluster 2;
  cta threads 96;
  role prod = warp 0;
  smem x bytes 64;
  mbarrier full count 1;
  if prod { elect { init full; fence.mbarrier_init; } }
  cluster.sync;
  if prod { elect { arrive.expect_tx full bytes 64; tma.load x bytes 64 -> full; } }
  cluster.sync;
}""", {"SV404"}, True),
    # a named-barrier generation left open (a bar.arrive for three warps that no one completes):
    # the rule stands aside on every state after the arrive
    "open_named_generation_at_the_end": ("""
protocol t {
  cluster 2;
  cta threads 96;
  role a = warp 0;
  role b = warp 1;
  smem x bytes 16;
  cluster.sync;
  if a { write x; bar.arrive 1, 96; }
  cluster.sync;
}""", set(), False),
    # a warp with work left after its last cluster wait (a DSMEM write to a peer that may have
    # exited, SV404): no exit is taken alone until it has ended
    "work_after_the_last_cluster_wait": ("""
protocol t {
  cluster 2;
  cta threads 96;
  role a = warp 0;
  role b = warp 1;
  smem x bytes 16;
  cluster.sync;
  cluster.sync;
  if a { write x @ cta ^ 1; }
}""", {"SV404"}, True),
}


def _fired(monkeypatch) -> list[int]:
    """Count the exits the rule takes alone in the searches that follow."""
    fired: list[int] = []
    real = exit_por.lone_final_exit

    def counting(machine, state, p):
        ok = real(machine, state, p)
        if ok:
            fired.append(p)
        return ok

    monkeypatch.setattr(machine_mod, "lone_final_exit", counting)
    return fired


@pytest.mark.parametrize("name", CASES)
def test_final_exits_alone_agree_with_the_unreduced_search(name, monkeypatch):
    text, expected, applies = CASES[name]
    protocol = load(text, path="t.sync")
    fired = _fired(monkeypatch)
    reduced = explore(protocol, BUDGET, Machine(protocol, reduce=True), symmetry=True)
    assert bool(fired) is applies, (name, fired)
    full = explore(protocol, BUDGET, Machine(protocol, reduce=False), symmetry=False)
    assert full.verdict in (Verdict.SAFE, Verdict.VIOLATION)
    assert _codes(full) == expected, (name, full.diagnostics)
    assert reduced.verdict == full.verdict and _codes(reduced) == expected, (name, reduced.diagnostics)
    if applies:
        monkeypatch.setattr(machine_mod, "lone_final_exit", lambda machine, state, p: False)
        without = explore(protocol, BUDGET, Machine(protocol, reduce=True), symmetry=True)
        assert without.verdict == reduced.verdict and _codes(without) == expected
        assert reduced.stats.states <= without.stats.states, (reduced.stats, without.stats)
        assert reduced.stats.transitions < without.stats.transitions, (reduced.stats, without.stats)


def test_idle_warps_cost_almost_no_states_on_the_2cta_gemm():
    """The 2-CTA GEMM at 2 math warps (2 k-blocks), with and without 3 idle warps per CTA: the idle warps'
    final waits and exits are taken alone, so they add only the states of their first barrier."""
    fam = Path(__file__).resolve().parent.parent / "bench" / "families" / "gemm_2cta_multicast.sync"
    states = {}
    for idle in (0, 3):
        protocol = load(str(fam), {"MATH": 2, "IDLE": idle, "KITERS": 2})
        result = explore(protocol, Budget(max_states=200_000, seconds=300), Machine(protocol))
        assert result.verdict == Verdict.SAFE, result.diagnostics
        states[idle] = result.stats.states
    assert states[3] < states[0] * 1.01, states


def test_every_cluster_program_ending_in_the_shape_agrees(monkeypatch):
    """Every 13th program of the cluster2-seq scope and every 80th of cluster2 on which the rule
    takes some exit alone: the same verdict and error codes as the unreduced search."""
    fired = _fired(monkeypatch)
    assert compare_where_it_acts((("cluster2-seq", 13), ("cluster2", 80)), fired) >= 25
