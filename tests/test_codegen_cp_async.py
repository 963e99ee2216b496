"""Non-bulk cp.async, its groups and mbarrier arrive, 1-D cp.async.bulk and test_wait in the emitted kernel.

Each spec of the family emits the PTX its semantics names (docs/language.md §8: `.noinc` exactly where
the spec writes it, the wait_group immediate of the spec), the copies read the pre-stamped source of
their own (process, site, occurrence), and what the reads expect is the stamp of the copy the model
says they observe.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from nvcc import ptxas_clean_cubin

import syncverify
from syncverify.codegen import EmitRefused, emit
from syncverify.codegen import ptx as P
from syncverify.codegen.schedule import stamp

SPECS = Path(__file__).resolve().parent.parent / "specs"


def _load(name: str) -> syncverify.ir.Protocol:
    return syncverify.load(str(SPECS / f"{name}.sync"))


def test_noinc_arrive_is_emitted_noinc_and_its_twin_without():
    noinc = emit(_load("cp_async_mbarrier_noinc")).source
    inc = emit(_load("cp_async_mbarrier_inc_hang")).source
    assert P.CP_ASYNC_ARRIVE_NOINC in noinc and P.CP_ASYNC_ARRIVE not in noinc
    assert P.CP_ASYNC_ARRIVE in inc and P.CP_ASYNC_ARRIVE_NOINC not in inc
    # the elected thread copies the whole 512-byte slot, 16 bytes at a time
    assert "const u32 sv_p[2] = {0u, 1u};" in noinc and "ch < 32u" in noinc


def test_multistage_groups_take_the_specs_immediate_and_every_lane_copies_its_chunks():
    em = emit(_load("cutlass_sm80_multistage_cp_async"))
    src = em.source
    assert P.CP_ASYNC_COMMIT in src and P.CP_ASYNC in src
    assert f'asm volatile("{P.CP_ASYNC_WAIT}" :: "n"(1)' in src  # STAGES - 2
    assert f'asm volatile("{P.CP_ASYNC_WAIT}" :: "n"(0)' in src  # wait_all
    assert "const u32 sv_p[2] = {c.pidx, c.pn};" in src and "ch < 64u" in src


def test_reads_expect_the_copy_the_model_retired_and_the_source_holds_its_stamp():
    em = emit(_load("cutlass_sm80_multistage_cp_async"))
    n = em.launch["nsites"]
    sites = em.launch["sites"]
    copy = next(s["index"] for s in sites if s["op"].startswith("cp.async tile[2 * s"))
    reads = [s["index"] for s in sites if s["op"].startswith("read")]
    # k = 0 reads tile[0] (warp 0's first copy) and tile[1] (warp 1's first copy), in both warps
    for proc in (0, 1):
        assert em.schedule.reads[(proc, reads[0])][0] == stamp(0, copy, 0, n)
        assert em.schedule.reads[(proc, reads[1])][0] == stamp(1, copy, 0, n)
    assert stamp(1, copy, 0, n) in em.launch["sources"]["stamps"]


def test_the_no_sync_twin_loses_the_barrier_and_its_expectations_are_marked_intended():
    """The safe kernel's expectations are the model's; the twin's race stops the model, so they follow
    the intended order and say so (reports must not present them as the model's)."""
    safe = emit(_load("cutlass_sm80_multistage_cp_async"))
    bug = emit(_load("cutlass_sm80_multistage_cp_async_no_sync"))
    assert safe.source.count("syncthreads; */") == 1 and bug.source.count("syncthreads; */") == 0
    assert not safe.schedule.intended and safe.schedule.complete
    assert bug.schedule.intended and bug.launch["schedule"]["intended"]


TEST_WAIT = """protocol tw {
  cta threads 64;
  role prod = warp 0;
  role cons = warp 1;
  smem buf bytes 1024;
  mbarrier full count 1;
  first thread { init full; fence.mbarrier_init; }
  syncthreads;
  if prod { elect { arrive.expect_tx full bytes 1024; cp.async.bulk buf bytes 1024 -> full; } }
  if cons {
    test_wait.relaxed full parity 0;
    wait full parity 0;
    read buf;
  }
}
"""


def test_test_wait_is_one_probe_and_a_1d_bulk_copy_is_the_bulk_form():
    src = emit(syncverify.load(TEST_WAIT, path="tw.sync")).source
    probe = next(line for line in src.splitlines() if "mbarrier.test_wait" in line)
    assert "mbarrier.test_wait.parity.relaxed.cta.shared::cta.b64" in probe
    body = src[src.index("line 11: test_wait"):src.index("line 12: wait")]
    assert "for (" not in body and "while" not in body  # never blocks: no loop around it
    assert P.TMA_LOAD in src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_test_wait_kernel_compiles_without_ptxas_warnings(tmp_path):
    ptxas_clean_cubin(emit(syncverify.load(TEST_WAIT, path="tw.sync")).source, tmp_path)


def test_the_local_form_arrive_on_a_peer_is_refused_and_its_remote_twin_emits():
    text = (SPECS / "tvm_tirx_local_arrive_on_peer.sync").read_text()
    with pytest.raises(EmitRefused, match=r"tvm.sync:31: .*SV407"):
        emit(syncverify.load(text, path="tvm.sync"))
    fixed = text.replace("arrive.release.cluster.shared::cta empty @ 0;", "arrive.release.cluster empty @ 0;")
    assert fixed != text
    assert "mapa.shared::cluster" in emit(syncverify.load(fixed, path="tvm.sync")).source


def test_the_no_sync_replay_reads_before_the_other_warps_copy():
    """The counterexample reads warp 1's part (line 22) and then warp 1 copies into it (line 15): a RAW race,
    the read was due to see that copy. The gated order already reads first; no hold defers the read past the
    copy (a late-process hold did, and the read then saw the copy it wanted: never wrong on the H200)."""
    from syncverify.codegen.replay import replay_order
    from syncverify.codegen.sites import collect_sites, site_index

    protocol = _load("cutlass_sm80_multistage_cp_async_no_sync")
    sites = collect_sites(protocol)
    order = replay_order(protocol, site_index(sites))
    read = next(s.index for s in sites if s.text.startswith("read tile[2 * (k % STAGES) + 1]"))
    assert order.holds == () and order.steps[-2][:3] == (0, read, 0) and order.steps[-1][0] == 1
    src = emit(protocol, replay=order).source
    assert "defer" not in src and "sv_hold(" not in src
    # the schedule's walk reads before any copy of warp 1 (0); the replay checks the read against the copy
    assert emit(protocol).schedule.reads[(0, read)][0] == 0
    assert emit(protocol, replay=order).schedule.reads[(0, read)][0] == order.expect[0][3] != 0
