"""The tcgen05 fence pair and release/acquire synchronization (#33; docs/model.md, "tcgen05": "The fence pair").

Each canonical pattern of PTX ISA §9.7.16.6.4 is written as a small spec and checked under both readings: the
default one (a release/acquire synchronization orders tcgen05 accesses across threads, PTX §9.7.16.6.3: "The
standard memory consistency model synchronization mechanisms also apply to the tcgen05 family of instructions";
CUTLASS and Triton rely on it) and the canonical patterns to the letter (`--no-assume`). Each pattern is safe
under both with no warning and no reading used; its twin without a fence is the SV608 warning (safe, the reading
named in `assumed`) by default and SV603 to the letter; its twin without the completion (no `tcgen05.wait::ld`,
no commit wait, no before-fence for an operation still in flight) is an error under both.
"""

from __future__ import annotations

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.result import Verdict
from syncverify.semantics.families.tcgen05_sync import SYNC_ORDERS_TCGEN05


def run(text: str, literal: bool = False) -> tuple[Verdict, set[str], set[str], tuple[str, ...]]:
    """(verdict, error codes, warning codes, readings used) of the explicit engine."""
    res = check_protocol(syncverify.load(text, path="t.sync"),
                         Options(engine="explicit", timeout=60, assume_sync_orders_tcgen05=not literal))
    errors = {d.code for d in res.diagnostics if d.is_error}
    warnings = {d.code for d in res.diagnostics if not d.is_error}
    return res.verdict, errors, warnings, res.assumed


def clean(text: str) -> None:
    """Safe under both readings, with no warning and without the reading."""
    for literal in (False, True):
        verdict, errors, warnings, assumed = run(text, literal)
        assert (verdict, errors) == (Verdict.SAFE, set()), (literal, errors)
        assert "SV608" not in warnings and SYNC_ORDERS_TCGEN05 not in assumed


def fence_only(text: str) -> None:
    """Ordered only by the synchronization: the SV608 warning by default (safe, the reading named), SV603 to the
    letter."""
    verdict, errors, warnings, assumed = run(text)
    assert (verdict, errors) == (Verdict.SAFE, set()) and "SV608" in warnings and SYNC_ORDERS_TCGEN05 in assumed
    verdict, errors, warnings, assumed = run(text, literal=True)
    assert (verdict, errors) == (Verdict.VIOLATION, {"SV603"}) and SYNC_ORDERS_TCGEN05 not in assumed


def broken(text: str, code: str) -> None:
    """An error under both readings: what the synchronization hands over is still in flight."""
    for literal in (False, True):
        verdict, errors, _, _ = run(text, literal)
        assert verdict is Verdict.VIOLATION and code in errors, (literal, errors)


# §9.7.16.6.4.4 Example 2: tcgen05.mma; tcgen05.commit [mbar] | mbarrier.try_wait [mbar];
# tcgen05.fence::after_thread_sync; tcgen05.ld. CUTLASS's epilogue (sm100_epilogue_*: acc_pipeline.consumer_wait,
# then the TMEM load) has no after-fence.
MMA_TO_LD = """
protocol mma_to_ld {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  first thread { init full; }
  syncthreads;
  if mma { elect { tcgen05.mma acc, a; tcgen05.commit full; } }
  if epi { WAIT AFTER tcgen05.ld acc; tcgen05.wait::ld; }
}
"""


def mma_to_ld(wait: str = "wait full parity 0;", after: str = "tcgen05.fence::after_thread_sync;") -> str:
    return MMA_TO_LD.replace("WAIT", wait).replace("AFTER", after)


def test_mma_commit_wait_after_fence_ld_is_clean():
    clean(mma_to_ld())


def test_mma_commit_wait_ld_without_the_after_fence_is_the_warning():
    fence_only(mma_to_ld(after=""))


def test_ld_without_waiting_for_the_commit_races_under_both_readings():
    broken(mma_to_ld(wait="", after="tcgen05.fence::after_thread_sync;"), "SV301")


# §9.7.16.6.4.4 Example 1: tcgen05.ld; tcgen05.wait::ld; tcgen05.fence::before_thread_sync; mbarrier.arrive |
# mbarrier.try_wait; tcgen05.fence::after_thread_sync; tcgen05.mma. CUTLASS's epilogue hands the accumulator back
# with fence_view_async_tmem_load (tcgen05.wait::ld) and consumer_release (an arrive, .release) alone.
LD_TO_MMA = """
protocol ld_to_mma {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  mbarrier empty count 32;
  first thread { init full; init empty; }
  syncthreads;
  if mma {
    elect { tcgen05.mma acc, a; tcgen05.commit full; }
    wait empty parity 0;
    AFTER
    elect { tcgen05.mma acc, a; tcgen05.commit full; }
    wait full parity 1;
  }
  if epi {
    wait full parity 0;
    tcgen05.fence::after_thread_sync;
    tcgen05.ld acc;
    WAIT_LD
    BEFORE
    arrive empty;
  }
}
"""


def ld_to_mma(wait_ld: str = "tcgen05.wait::ld;", before: str = "tcgen05.fence::before_thread_sync;",
              after: str = "tcgen05.fence::after_thread_sync;") -> str:
    return LD_TO_MMA.replace("WAIT_LD", wait_ld).replace("BEFORE", before).replace("AFTER", after)


def test_ld_wait_before_fence_arrive_then_wait_after_fence_mma_is_clean():
    clean(ld_to_mma())


def test_handing_back_without_the_before_fence_is_the_warning():
    fence_only(ld_to_mma(before=""))


def test_handing_back_without_either_fence_is_the_warning():
    fence_only(ld_to_mma(before="", after=""))


def test_handing_back_before_the_ld_completes_races_under_both_readings():
    """PTX: "the producer threads that issue the asynchronous tcgen05 instructions must explicitly wait for the
    instructions' completion before synchronizing" (§9.7.16.6.4.4) — a fence does not replace the wait."""
    broken(ld_to_mma(wait_ld=""), "SV302")
    broken(ld_to_mma(wait_ld="", before=""), "SV302")


# §9.7.16.6.4.3: tcgen05.cp; tcgen05.fence::before_thread_sync; mbarrier.arrive | mbarrier.try_wait;
# tcgen05.fence::after_thread_sync; tcgen05.mma — the cp is still in flight; only the fence pair makes it a
# pipeline across the two threads.
CP_TO_MMA = """
protocol cp_to_mma {
  cta threads 64;
  role cp = warp 0;
  role mma = warp 1;
  smem a bytes 1024;
  smem sf bytes 512;
  tmem acc cols 128;
  tmem sft cols 8;
  mbarrier ready count 1;
  mbarrier done count 1;
  first thread { init ready; init done; }
  syncthreads;
  if cp { elect { tcgen05.cp sft, sf; BEFORE arrive ready; tcgen05.commit done; } wait done parity 0; }
  if mma {
    wait ready parity 0;
    AFTER
    elect { tcgen05.mma acc, sft, a; tcgen05.commit done; }
    wait done parity 0;
  }
}
"""


def cp_to_mma(before: str = "tcgen05.fence::before_thread_sync;", after: str = "tcgen05.fence::after_thread_sync;"):
    return CP_TO_MMA.replace("BEFORE", before).replace("AFTER", after)


def test_pipelined_cp_to_mma_across_threads_with_the_fence_pair_is_clean():
    clean(cp_to_mma().replace("mbarrier done count 1;", "mbarrier done count 2;"))


def test_pipelined_hand_over_without_the_before_fence_races_under_both_readings():
    """The cp is in flight at the arrive: a release does not order an asynchronous operation that has not
    completed, only the before-fence puts it in the pipeline (§9.7.16.6.3)."""
    broken(cp_to_mma(before="").replace("mbarrier done count 1;", "mbarrier done count 2;"), "SV301")


# §9.7.16.6.4.1 and §9.7.16.6.4.2: one thread — mma -> mma on one accumulator needs nothing; mma -> ld needs the
# commit, its wait and the after-fence ("As tcgen05.ld is an asynchronous operation, the instruction
# tcgen05.fence::after_thread_sync is needed").
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


def test_same_thread_mma_mma_commit_wait_after_fence_ld_is_clean():
    clean(SAME_THREAD.replace("MIDDLE", "wait done parity 0; tcgen05.fence::after_thread_sync;"))


def test_same_thread_wait_without_the_after_fence_is_the_warning():
    fence_only(SAME_THREAD.replace("MIDDLE", "wait done parity 0;"))


def test_same_thread_ld_without_the_commit_wait_races_under_both_readings():
    broken(SAME_THREAD.replace("MIDDLE", ""), "SV301")


# ---- the specs and the command line ------------------------------------------------------------------------

def test_cutlass_epilogue_spec_is_the_warning_and_sv603_with_no_assume(capsys):  # type: ignore[no-untyped-def]
    """specs/cutlass_sm100_umma_no_fence.sync (the epilogue loads the accumulator with no after-fence, as CUTLASS
    4.2's sm100 epilogue does): safe with the SV608 warning and `assumed: sync-orders-tcgen05`; `--strict` and
    `--no-assume` make it an error (SV608, SV603)."""
    spec = "specs/cutlass_sm100_umma_no_fence.sync"
    capsys.readouterr()
    assert main(["check", spec]) == 0
    out = capsys.readouterr().out
    assert "SV608" in out and SYNC_ORDERS_TCGEN05 in out
    assert main(["check", "--strict", spec]) == 1
    assert "SV608" in capsys.readouterr().out
    assert main(["check", "--no-assume", spec]) == 1
    out = capsys.readouterr().out
    assert "SV603" in out and "SV608" not in out


@pytest.mark.parametrize("engine", ["z3"])
def test_the_lift_agrees(engine: str):
    """The z3 lift takes the same reading: the warning by default, SV603 to the letter."""
    text = mma_to_ld(after="")
    for literal, errors in ((False, set()), (True, {"SV603"})):
        res = check_protocol(syncverify.load(text, path="t.sync"),
                             Options(engine=engine, timeout=60, assume_sync_orders_tcgen05=not literal))
        assert {d.code for d in res.diagnostics if d.is_error} == errors
