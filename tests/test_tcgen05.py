"""tcgen05 (Blackwell): tcgen05.mma/cp and the commit that completes them, tcgen05.ld/st and their
waits, the fence pair around thread synchronization (SV603), tensor-memory regions, 2-SM copies and
MMAs. Each reproducer has a near twin whose verdict must stay as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify import ir
from syncverify.check import Options, check_protocol
from syncverify.codegen import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

ROOT = Path(__file__).resolve().parent.parent


def run(text: str, **options) -> tuple[Verdict, set[str]]:
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(engine="explicit", timeout=60, **options))
    return res.verdict, {d.code for d in res.diagnostics if d.is_error}


# The issue's minimal case: the MMA warp signals `full` with a commit, the epilogue hands `empty` back.
COMMIT_RING = """
protocol commit_ring {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  mbarrier full count 1;
  mbarrier empty count 32;
  first thread { init full; init empty; }
  syncthreads;
  if mma {
    for t in 0..3 {
      wait empty parity (t + 1) % 2;
      elect { COMMIT full; }
    }
  }
  if epi {
    for t in 0..3 {
      wait full parity t % 2;
      arrive empty;
    }
  }
}
"""


@pytest.mark.parametrize("commit", ["umma.commit", "tcgen05.commit", "tcgen05.commit.cta_group::1"])
def test_commit_arrival_carries_the_committing_threads_observations(commit):
    """Its arrival is causally after the MMA warp's wait on `empty`, hence after the epilogue's
    wait on `full`: no stale waiter (it was SV501 when the commit released nothing)."""
    assert run(COMMIT_RING.replace("COMMIT", commit)) == (Verdict.SAFE, set())


def test_commit_ring_without_the_epilogue_wait_is_flagged():
    verdict, codes = run(COMMIT_RING.replace("COMMIT", "tcgen05.commit").replace("wait full parity t % 2;", ""))
    assert verdict is Verdict.VIOLATION and "SV502" in codes


def test_a_second_commit_arrival_lands_unobserved():
    """Two commits per iteration on `full` (count 1): the second arrival lands in the next phase
    before the epilogue observed this one — SV502 named after the commit's arrival (the shared
    completion of asynchronous agents, AsyncAgentOps._agent_arrive). The ring with one commit is
    safe (test_commit_arrival_carries_the_committing_threads_observations)."""
    text = COMMIT_RING.replace("elect { COMMIT full; }", "elect { tcgen05.commit full; tcgen05.commit full; }")
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(engine="explicit", timeout=60))
    messages = [d.message for d in res.diagnostics if d.code == "SV502"]
    assert messages and all(m.startswith("tcgen05.commit arrive on full") for m in messages), messages


# An MMA warp and an epilogue warp around one accumulator region; variants below edit it.
HANDOFF = """
protocol handoff {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc[2] cols 128;
  mbarrier full count 1;
  mbarrier empty count 32;
  first thread { init full; init empty; }
  syncthreads;
  if mma {
    elect { tcgen05.mma acc[0], a; tcgen05.commit full; }
    wait empty parity 0;
    AFTER_MMA
    elect { tcgen05.mma acc[REUSE], a; tcgen05.commit full; }
    wait full parity 1;
  }
  if epi {
    wait full parity 0;
    AFTER_EPI
    tcgen05.ld acc[0];
    WAIT_LD
    BEFORE
    arrive empty;
  }
}
"""


def handoff(after_mma: str = "tcgen05.fence::after_thread_sync;", after_epi: str = "tcgen05.fence::after_thread_sync;",
            wait_ld: str = "tcgen05.wait::ld;", before: str = "tcgen05.fence::before_thread_sync;",
            reuse: int = 0) -> str:
    return (HANDOFF.replace("AFTER_MMA", after_mma).replace("AFTER_EPI", after_epi).replace("WAIT_LD", wait_ld)
            .replace("BEFORE", before).replace("REUSE", str(reuse)))


def test_handoff_with_the_fence_pairs_is_safe():
    assert run(handoff()) == (Verdict.SAFE, set())


def test_epilogue_without_after_fence_is_sv603_naming_it():
    res = check_protocol(syncverify.load(handoff(after_epi=""), path="t.sync"),
                         Options(timeout=60, assume_sync_orders_tcgen05=False))
    [d] = [d for d in res.diagnostics if d.is_error]
    assert d.code == "SV603" and "after_thread_sync" in d.message and "tcgen05.ld" in d.message


def test_handing_back_without_before_fence_is_sv603_naming_it():
    res = check_protocol(syncverify.load(handoff(before=""), path="t.sync"),
                         Options(timeout=60, assume_sync_orders_tcgen05=False))
    [d] = [d for d in res.diagnostics if d.is_error]
    assert d.code == "SV603" and "before_thread_sync" in d.message and "epi.w1" in d.message


def test_mma_warp_without_after_fence_is_sv603():
    assert run(handoff(after_mma=""), assume_sync_orders_tcgen05=False) == (Verdict.VIOLATION, {"SV603"})


def test_handing_back_before_wait_ld_is_a_war_race():
    """The arrive comes before the ld completes: the next MMA may overwrite what the ld still reads."""
    verdict, codes = run(handoff(wait_ld="", before="tcgen05.fence::before_thread_sync;"))
    assert verdict is Verdict.VIOLATION and "SV302" in codes


def test_other_accumulator_needs_no_handoff():
    """Double buffering: the second MMA writes acc[1], which the epilogue never reads — safe even
    without any fence; the same MMA into acc[0] is the race of the twin below."""
    bare = handoff(after_mma="", before="", wait_ld="tcgen05.wait::ld;", reuse=1)
    assert run(bare) == (Verdict.SAFE, set())
    verdict, codes = run(handoff(after_mma="", before="", wait_ld="", reuse=0))
    assert verdict is Verdict.VIOLATION and codes & {"SV302", "SV603"}


SAME_THREAD = """
protocol same_thread {
  cta threads 32;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier done count 1;
  first thread { init done; }
  syncwarp;
  elect { tcgen05.mma acc, a; tcgen05.mma acc, a; tcgen05.commit done; }
  MIDDLE
  tcgen05.ld acc;
  tcgen05.wait::ld;
}
"""


def test_mma_pipeline_same_accumulator_then_commit_wait_fence_ld_is_safe():
    """mma -> mma on one accumulator is pipelined (PTX §9.7.16.6.2); mma -> ld is not: it needs
    the commit, the wait and the after-fence (§9.7.16.6.4.2)."""
    ok = SAME_THREAD.replace("MIDDLE", "wait done parity 0; tcgen05.fence::after_thread_sync;")
    assert run(ok) == (Verdict.SAFE, set())


def test_ld_after_mma_without_waiting_for_the_commit_is_raw():
    verdict, codes = run(SAME_THREAD.replace("MIDDLE", ""))
    assert verdict is Verdict.VIOLATION and "SV301" in codes


def test_ld_after_waiting_for_the_commit_without_fence_is_sv603():
    assert run(SAME_THREAD.replace("MIDDLE", "wait done parity 0;"), assume_sync_orders_tcgen05=False) == \
        (Verdict.VIOLATION, {"SV603"})


def test_st_then_ld_needs_wait_st():
    text = """
protocol st_ld {
  cta threads 32;
  tmem acc cols 64;
  tcgen05.st acc;
  WAIT
  tcgen05.ld acc;
  tcgen05.wait::ld;
}
"""
    assert run(text.replace("WAIT", "tcgen05.wait::st;")) == (Verdict.SAFE, set())
    verdict, codes = run(text.replace("WAIT", ""))
    assert verdict is Verdict.VIOLATION and "SV301" in codes


def test_operand_released_by_commit_not_by_issue():
    """A TMA copy into the operand slot waits for the commit that tracks the MMA reading it."""
    text = """
protocol operand {
  cta threads 64;
  role producer = warp 0;
  role mma = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  mbarrier empty count 1;
  first thread { init full; init empty; }
  syncthreads;
  if producer {
    for k in 0..2 {
      wait empty parity (k + 1) % 2;
      elect { arrive.expect_tx full bytes 1024; tma.load a bytes 1024 -> full; }
    }
  }
  if mma {
    for k in 0..2 {
      wait full parity k % 2;
      elect { tcgen05.mma acc, a; RELEASE }
    }
    wait empty parity 1;
  }
}
"""
    assert run(text.replace("RELEASE", "tcgen05.commit empty;")) == (Verdict.SAFE, set())
    verdict, codes = run(text.replace("RELEASE", "arrive empty;"))
    assert verdict is Verdict.VIOLATION and "SV302" in codes


def test_exit_with_an_uncommitted_mma_is_sv404():
    text = """
protocol uncommitted {
  cta threads 32;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier done count 1;
  first thread { init done; }
  syncwarp;
  elect { tcgen05.mma acc, a; COMMIT }
  WAIT
}
"""
    assert run(text.replace("COMMIT", "tcgen05.commit done;").replace("WAIT", "wait done parity 0;")) == \
        (Verdict.SAFE, set())
    assert run(text.replace("COMMIT", "").replace("WAIT", "")) == (Verdict.VIOLATION, {"SV404"})


def test_more_commits_in_flight_than_tracked_is_inconclusive_not_safe():
    text = """
protocol many {
  cta threads 32;
  mbarrier done count 9;
  first thread { init done; }
  syncwarp;
  elect { for i in 0..N { tcgen05.commit done; } }
  wait done parity 0;
}
"""
    assert run(text.replace("N", "8").replace("count 9", "count 8")) == (Verdict.SAFE, set())
    verdict, _ = run(text.replace("N", "9"))
    assert verdict is Verdict.INCONCLUSIVE


def test_commit_order_assumption_is_what_lets_the_gemm_exit():
    """Without the in-order delivery of commits (--no-assume), the last commits on empty[s] may
    still be in flight when the epilogue has seen acc_full and the CTA exits (SV404); in order,
    they arrive before the acc_full commit issued after them."""
    protocol = syncverify.load(str(ROOT / "specs/cutlass_sm100_umma_gemm.sync"))
    res = check_protocol(protocol, Options(engine="explicit", timeout=120, assume_tcgen05_commit_order=False))
    assert res.verdict is Verdict.VIOLATION and {d.code for d in res.diagnostics if d.is_error} == {"SV404"}
    assert check_protocol(protocol, Options(engine="explicit", timeout=120)).verdict is Verdict.SAFE


TWO_SM = """
protocol two_sm {
  cluster 2;
  cta threads 64;
  role producer = warp 0;
  role mma = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  mbarrier done count 1;
  if producer { elect { init full; init done; fence.mbarrier_init; } }
  cluster.sync;
  if producer {
    elect {
      if cta == 0 { arrive.expect_tx full bytes 2048; }
      tma.load a bytes 1024 -> full GROUP;
    }
  }
  if mma && cta == LEADER {
    wait full parity 0;
    elect { tcgen05.mma acc, a cta_group 2; tcgen05.commit done multicast 0b11 cta_group 2; }
  }
  if producer { wait done parity 0; }
  cluster.sync;
}
"""


def test_two_sm_copy_signals_the_leaders_barrier_and_the_pair_mma_reads_both_ctas():
    assert run(TWO_SM.replace("GROUP", "cta_group 2").replace("LEADER", "0")) == (Verdict.SAFE, set())
    # a 1-SM copy signals its own CTA's barrier: the leader's never gets the peer's bytes
    verdict, codes = run(TWO_SM.replace("GROUP", "").replace("LEADER", "0"))
    assert verdict is Verdict.VIOLATION and codes & {"SV503", "SV201", "SV301"}


def test_two_sm_mma_from_the_odd_cta_is_sv405():
    odd = TWO_SM.replace("GROUP", "cta_group 2").replace("LEADER", "1").replace("wait full parity 0;", "")
    assert run(odd) == (Verdict.VIOLATION, {"SV405"})


def test_pair_mma_reads_the_peers_slot_before_its_copy_landed_is_raw():
    """Without waiting on `full` the leader's MMA reads both CTAs' slots while the copies may be in flight."""
    text = TWO_SM.replace("GROUP", "cta_group 2").replace("LEADER", "0").replace("wait full parity 0;", "")
    verdict, codes = run(text)
    assert verdict is Verdict.VIOLATION and "SV301" in codes


@pytest.mark.parametrize(("bad", "code", "fragment"), [
    ("tcgen05.mma a, a;", "SV111", "needs a tmem region"),
    ("tcgen05.ld full;", "SV111", "needs a tmem region"),
    ("tcgen05.mma acc[2], a;", "SV104", "out of range"),
    ("tcgen05.mma acc[0], a cta_group 3;", "SV110", "cta_group must be 1 or 2"),
    ("tcgen05.wait::mma;", "SV110", "unknown operation"),
])
def test_bad_tcgen05_input_is_a_clear_error(bad, code, fragment):
    text = f"""protocol bad {{
  cta threads 32;
  smem a bytes 1024;
  tmem acc[2] cols 128;
  mbarrier full count 1;
  {bad}
}}
"""
    with pytest.raises(InputError) as err:
        syncverify.load(text, path="bad.sync")
    [d] = err.value.diagnostics
    assert d.code == code and fragment in d.message and d.span.line == 6


def test_tmem_regions_over_512_columns_are_refused():
    with pytest.raises(InputError, match="512"):
        syncverify.load("protocol t { cta threads 32; tmem acc[2] cols 256; tmem extra cols 32; }", path="t.sync")
    syncverify.load("protocol t { cta threads 32; tmem acc[2] cols 256; tmem.alloc cols 512; tmem.dealloc cols "
                         "512; }", path="t.sync")  # `tmem.alloc` still parses beside the declarations


@pytest.mark.parametrize("op", ["tcgen05.mma acc, a;", "tcgen05.ld acc;", "tcgen05.st acc;", "tcgen05.wait::ld;",
                                "tcgen05.fence::before_thread_sync;", "tcgen05.commit full;",
                                "elect { tma.load a -> full cta_group 2; }"])
def test_emitter_refuses_each_blackwell_operation(op):
    text = f"""protocol one {{
  cluster 2;
  cta threads 32;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  {op}
}}
"""
    with pytest.raises(EmitRefused, match="sm_100a"):
        emit(syncverify.load(text, path="one.sync"))


def test_cli_emit_refuses_a_tcgen05_spec_with_exit_2(tmp_path, capsys):
    from syncverify.cli import main

    assert main(["emit", str(ROOT / "specs/cutlass_sm100_umma_gemm.sync"), "-o", str(tmp_path / "k.cu")]) == 2
    assert "tcgen05" in capsys.readouterr().err and not (tmp_path / "k.cu").exists()


def test_tcgen05_ld_by_part_of_a_warp_is_sv206():
    """tcgen05.ld/st/wait are `.sync.aligned`: every lane of the warp executes them."""
    text = """
protocol half_warp {
  cta threads 32;
  role lo = threads 0..16;
  role hi = threads 16..32;
  tmem acc cols 64;
  if lo { tcgen05.ld acc; tcgen05.wait::ld; }
  if hi { OTHER }
}
"""
    _, codes = run(text.replace("OTHER", ""))
    assert "SV206" in codes
    whole = text.replace("if lo { tcgen05.ld acc; tcgen05.wait::ld; }", "tcgen05.ld acc; tcgen05.wait::ld;")
    whole = whole.replace("if hi { OTHER }", "").replace("role lo = threads 0..16;", "").replace(
        "role hi = threads 16..32;", "")
    assert run(whole) == (Verdict.SAFE, set())


def test_commit_tags_are_reused_so_a_long_pipeline_stays_conclusive():
    """Twenty commits, at most two in flight: the tags of commits in flight are renumbered as they
    arrive, so the search ends (safe) instead of running out of tags."""
    text = """
protocol long_pipeline {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc[2] cols 128;
  mbarrier full[2] count 1;
  mbarrier empty[2] count 32;
  first thread { init full[*]; init empty[*]; }
  syncthreads;
  if mma {
    for t in 0..N {
      wait empty[t % 2] parity (t / 2 + 1) % 2;
      tcgen05.fence::after_thread_sync;
      elect { tcgen05.mma acc[t % 2], a; tcgen05.commit full[t % 2]; }
    }
  }
  if epi {
    for t in 0..N {
      wait full[t % 2] parity (t / 2) % 2;
      tcgen05.fence::after_thread_sync;
      tcgen05.ld acc[t % 2];
      tcgen05.wait::ld;
      tcgen05.fence::before_thread_sync;
      arrive empty[t % 2];
    }
  }
}
"""
    assert run(text.replace("0..N", "0..20")) == (Verdict.SAFE, set())
    # the same pipeline whose epilogue hands acc back before its ld completed (no wait::ld)
    verdict, codes = run(text.replace("0..N", "0..20").replace("tcgen05.wait::ld;", ""))
    assert verdict is Verdict.VIOLATION and "SV302" in codes


DEALLOC = """
protocol dealloc {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  first thread { init full; }
  if mma { tmem.alloc cols 128; }
  syncthreads;
  if mma { elect { tcgen05.mma acc, a; tcgen05.commit full; } }
  if epi { wait full parity 0; tcgen05.fence::after_thread_sync; tcgen05.ld acc; tcgen05.wait::ld; BEFORE }
  BARRIER
  if mma { tmem.dealloc cols 128; }
}
"""


def test_dealloc_after_the_users_finished_and_fenced_is_safe():
    """PTX's sequence at the end: the users' wait::ld, tcgen05.fence::before_thread_sync, a barrier,
    then the dealloc (a synchronous tcgen05 instruction: no after-fence needed)."""
    ok = DEALLOC.replace("BEFORE", "tcgen05.fence::before_thread_sync;").replace("BARRIER", "syncthreads;")
    assert run(ok) == (Verdict.SAFE, set())


def test_dealloc_while_the_epilogue_may_still_read_is_a_race():
    verdict, codes = run(DEALLOC.replace("BEFORE", "tcgen05.fence::before_thread_sync;").replace("BARRIER", ""))
    assert verdict is Verdict.VIOLATION and "SV302" in codes


def test_dealloc_ordered_by_the_barrier_alone_is_sv603():
    assert run(DEALLOC.replace("BEFORE", "").replace("BARRIER", "syncthreads;"), assume_sync_orders_tcgen05=False) == \
        (Verdict.VIOLATION, {"SV603"})


def test_after_fence_by_the_elected_lane_alone_does_not_order_the_warps_ld():
    """Fences are per thread: `elect { tcgen05.fence::after_thread_sync; }` orders the elected
    lane's later tcgen05 operations only, not a whole-warp tcgen05.ld."""
    lone = handoff(after_epi="elect { tcgen05.fence::after_thread_sync; }")
    assert run(lone, assume_sync_orders_tcgen05=False) == (Verdict.VIOLATION, {"SV603"})
    # an MMA issued by the elected lane after its own fence is ordered
    assert run(handoff(after_mma="elect { tcgen05.fence::after_thread_sync; }")) == (Verdict.SAFE, set())


def test_processes_with_tcgen05_state_are_not_permuted_by_symmetry():
    """Two identical producer warps issuing 2-SM copies, two identical epilogue warps: their
    per-process knowledge bits are not permuted, so they are left out of the symmetry groups;
    identical warps without tcgen05 operations still form one."""
    from syncverify.semantics.machine import Machine
    from syncverify.semantics.symmetry import symmetry_groups

    text = """
protocol groups {
  cluster 2;
  cta threads 128;
  role prod[2] = warp i;
  role epi[2] = warp 2 + i;
  smem a bytes 1024;
  tmem acc cols 64;
  mbarrier full count 1;
  if prod { elect { tma.load a -> full cta_group 2; } }
  if epi { tcgen05.ld acc; tcgen05.wait::ld; }
}
"""
    m = Machine(syncverify.load(text, path="g.sync"))
    assert symmetry_groups(m.procs, m.programs) == []
    plain = Machine(syncverify.load(text.replace(" cta_group 2", "").replace("tcgen05.ld acc; tcgen05.wait::ld;",
                                                                          "read a;"), path="g.sync"))
    assert len(symmetry_groups(plain.procs, plain.programs)) == 4  # per CTA: the producers, the epilogues


PIPE = """
protocol pipe {
  cta threads 32;
  smem a bytes 1024;
  tmem acc cols 128;
  tmem sf cols 32;
  mbarrier done count 1;
  first thread { init done; }
  syncwarp;
  elect { FIRST; SECOND; tcgen05.commit done; }
  wait done parity 0;
}
"""


@pytest.mark.parametrize(("first", "second", "pipelined"), [
    ("tcgen05.mma acc, a", "tcgen05.mma acc, a", True),        # mma -> mma, one accumulator
    ("tcgen05.cp sf, a", "tcgen05.mma acc, a, sf", True),      # cp -> mma reading what it wrote
    ("tcgen05.mma acc, a, sf", "tcgen05.cp sf, a", True),      # mma operand read -> cp writing it
    ("tcgen05.cp sf, a", "tcgen05.cp sf, a", False),           # cp -> cp: not a pipeline
    ("tcgen05.mma sf, a", "tcgen05.cp sf, a", False),          # mma accumulator write -> cp
])
def test_only_the_listed_pairs_of_one_thread_are_pipelined(first, second, pipelined):
    """PTX ISA §9.7.16.6.2: asynchronous tcgen05 operations of one thread may execute out of issue
    order, except the listed pairs."""
    verdict, codes = run(PIPE.replace("FIRST", first).replace("SECOND", second))
    if pipelined:
        assert (verdict, codes) == (Verdict.SAFE, set())
    else:
        assert verdict is Verdict.VIOLATION and codes == {"SV303"}


def test_pipeline_chain_cp_mma_cp_is_ordered():
    """cp -> mma (reading what the cp wrote) -> cp into the same columns: each pair is a pipeline,
    so the second cp follows the first (DeepGEMM's per-k-block scale-factor copies)."""
    chain = PIPE.replace("FIRST; SECOND;", "tcgen05.cp sf, a; tcgen05.mma acc, a, sf; tcgen05.cp sf, a;")
    assert run(chain) == (Verdict.SAFE, set())


HANDED = """
protocol handed {
  cta threads 96;
  role prod = warp 0;
  role mma = warp 1;
  role xpose = warp 2;
  smem sfa bytes 512;
  smem other bytes 512;
  tmem sf cols 32;
  mbarrier ready count 32;
  mbarrier empty count 1;
  first thread { init ready; init empty; }
  syncthreads;
  if xpose { write sfa; write other; fence.proxy.async; arrive ready; }
  if mma { wait ready parity 0; elect { tcgen05.cp sf, sfa; tcgen05.commit empty; } }
  if prod { wait empty parity 0; elect { tma.load SLOT -> empty2; } }
}
"""


def test_commit_carries_the_writes_of_the_slots_its_operations_read_and_no_others():
    """The producer's copy into the slot the cp read is ordered after the transposer's write
    (the cp read what it left, and completed before the commit arrived); a copy into a slot
    the tracked operations did not read is not by what PTX says: the commit does not release
    generic writes. That is the reading `--no-assume` checks; by default the commit-release
    reading (docs/model.md) lets the arrival carry them (tests/test_soundness_tcgen05.py)."""
    text = HANDED.replace("mbarrier empty count 1;", "mbarrier empty count 1; mbarrier empty2 count 1;").replace(
        "init empty;", "init empty; init empty2;").replace(
        "elect { tma.load SLOT -> empty2; }",
        "elect { arrive.expect_tx empty2 bytes 512; tma.load SLOT -> empty2; } wait empty2 parity 0;")
    assert run(text.replace("SLOT", "sfa")) == (Verdict.SAFE, set())
    assert run(text.replace("SLOT", "sfa"), assume_commit_release=False) == (Verdict.SAFE, set())
    verdict, codes = run(text.replace("SLOT", "other"), assume_commit_release=False)
    assert verdict is Verdict.VIOLATION and codes == {"SV303"}
    assert run(text.replace("SLOT", "other")) == (Verdict.SAFE, set())


def test_a_2sm_copy_reaches_the_pair_leaders_barrier_for_the_reduction():
    """The partial-order reduction takes a copy alone only when no init or inval of its barrier can
    still come first: for a 2-SM copy that barrier is the leader's, so its CTAs include the leader."""
    from syncverify.semantics.machine import Machine

    protocol = syncverify.load(TWO_SM.replace("GROUP", "cta_group 2").replace("LEADER", "0"), path="t.sync")
    m = Machine(protocol)
    p = next(q.index for q in m.procs if q.cta == 1 and q.role == "producer")
    pc = next(pc for pc, ins in enumerate(m.programs[p].code) if isinstance(ins.op, ir.TmaLoad))
    assert m.targets(p, m.programs[p].code[pc].op, pc, (0,) * len(m.programs[p].var_names)) == (0, 1)
