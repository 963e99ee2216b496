"""Per-lane operations in the emitted kernel and its replay.

An operation whose operand uses `lane` runs once per lane (``semantics.program.per_lane``): each lane
reads or writes the whole of its own slot. The expected schedule records what each lane observes, the
kernel checks each lane against its own stamp, and a counterexample that takes the lanes' copies of one
operation back to back is replayed as one gated step of the lanes of its guard.
"""

from __future__ import annotations

from pathlib import Path

import syncverify
from syncverify.codegen import emit
from syncverify.codegen.replay import LANES, LEADER, replay_order
from syncverify.codegen.schedule import stamp
from syncverify.codegen.sites import collect_sites, site_index

SPECS = Path(__file__).resolve().parent.parent / "specs"


def _load(name: str) -> syncverify.ir.Protocol:
    return syncverify.load(str(SPECS / f"{name}.sync"))


def _site(launch: dict, text: str) -> int:
    return next(s["index"] for s in launch["sites"] if s["op"].startswith(text))


def test_each_lane_expects_the_writer_of_the_slot_it_reads():
    em = emit(_load("lane_reduction_reads"))
    read, write = _site(em.launch, "read red[lane]"), _site(em.launch, "write red[instance]")
    n = em.launch["nsites"]
    seen = em.schedule.lane_reads[(4, read)]  # the reducer warp
    assert len(seen) == 3  # ITERS
    for k, stamps in enumerate(seen):
        assert stamps[:4] == [stamp(w, write, k, n) for w in range(4)] and not any(stamps[4:])
    # each lane checks the whole of its slot against its own entry
    assert "expect[expect[base + o7] + (c.tid & 31u)]" in em.source and ", 0u, 1u, 1u);" in em.source


def test_a_whole_warp_read_keeps_one_stamp_for_the_warp():
    src = emit(_load("cutlass_ws_ring")).source
    assert "+ (c.tid & 31u)]" not in src and "c.pidx, c.pn, 1u);" in src


def test_the_one_release_replay_takes_the_lanes_reads_as_one_step_and_holds_lanes_1_to_3():
    protocol = _load("lane_reduction_reads_one_release")
    sites = collect_sites(protocol)
    order = replay_order(protocol, site_index(sites))
    read = next(s.index for s in sites if s.text.startswith("read red[lane]"))
    arrive = next(s.index for s in sites if s.text.startswith("arrive empty"))
    reads = [s for s in order.steps if s[1] == read]
    assert reads == [(4, read, 0, LANES)]  # lanes 0..3, one execution of the site
    assert [e for e in order.events if e[1] == read] == [(4, read, 0)] * 4  # one trace line per lane
    assert [s[3] for s in order.steps if s[1] == arrive] == [LEADER]
    (hold,) = order.holds
    assert (hold.kind, hold.site, hold.process, hold.after_site) == ("late-lanes", read, 4, arrive)
    src = emit(protocol, replay=order).source
    assert "sv_gate_done_lanes(c, g, rcur, lm" in src and "__ballot_sync(c.seg_mask, ((int)(c.tid & 31u) < 4))" in src
    # the guard that leaves lane 0 alone gates as the elected lane does: no ballot for it
    assert "__ballot_sync(c.seg_mask, ((int)(c.tid & 31u) == 0))" not in src


def test_the_safe_twin_replay_gates_nothing_and_takes_no_ballot():
    from syncverify.codegen.replay import instrumented_order

    protocol = _load("lane_reduction_reads")
    src = emit(protocol, replay=instrumented_order(protocol)).source
    assert "__ballot_sync" not in src and "sv_gate_done_lanes" not in src
