"""tcgen05 soundness (#31): each lane's tcgen05.ld/st is its own until a syncwarp, and the named
commit-release reading of a tcgen05.commit's arrival.

* `tcgen05.wait::ld` / `wait::st` complete the loads / stores "issued by the executing thread"
  (PTX ISA §9.7.16.8.5): by the letter (`--no-assume`), after a whole-warp ld and its wait, a
  release by lane 0 alone publishes lane 0's load only, so an MMA that overwrites the columns
  after it races with lanes 1..31's loads. By default the warp-collective reading takes the
  whole warp's `.sync.aligned` wait as ordering the loads it completed for that release (the
  SV609 warning; tests/test_warp_collective_order.py). With a `syncwarp` before the release it
  is safe under both, with no warning.
* PTX gives a commit's arrive-on no memory semantics for the committing thread's own accesses;
  CUTLASS example 77 relies on it (the tensor-memory base address written after tcgen05.alloc is
  read ordered only through commits). It is a named reading, on by default, reported in the
  result (`assumed`), dropped by `--no-assume`.

Each reproducer runs on every engine: explicit, z3 (the all-iterations lift), bmc (which encodes
a commit alone and refuses tcgen05 ld/st/fences with a reason) and the Promela export (which
refuses tcgen05 operations with a reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.export.promela import ExportError, export_model
from syncverify.result import Verdict

ROOT = Path(__file__).resolve().parent.parent


def check(text: str, engine: str = "explicit", **options):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120, **options))


def errors(res) -> set[str]:
    return {d.code for d in res.diagnostics if d.is_error}


def promela_refusal(text: str) -> str:
    with pytest.raises(ExportError) as why:
        export_model(syncverify.load(text, path="t.sync"))
    return str(why.value)


# An epilogue warp loads the accumulator, waits for its loads, and hands the columns back to the
# MMA warp with RELEASE; the MMA warp's next tcgen05.mma overwrites them.
HANDBACK = """
protocol tc_handback {
  param TILES = 2;
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  tmem acc cols 128;
  mbarrier acc_full count 1;
  mbarrier acc_empty count COUNT;
  if mma { elect { init acc_full; init acc_empty; fence.mbarrier_init; } tmem.alloc cols 128; }
  syncthreads;
  if mma {
    for t in 0..TILES {
      wait acc_empty parity (t + 1) % 2;
      tcgen05.fence::after_thread_sync;
      elect { tcgen05.mma acc; tcgen05.commit acc_full; }
    }
  }
  if epi {
    for t in 0..TILES {
      wait acc_full parity t % 2;
      tcgen05.fence::after_thread_sync;
      tcgen05.ACCESS acc;
      tcgen05.wait::ACCESS;
      tcgen05.fence::before_thread_sync;
      RELEASE
    }
  }
  syncthreads;
  if mma { tmem.dealloc cols 128; }
}
"""


def handback(access: str, release: str, count: int = 1) -> str:
    return HANDBACK.replace("ACCESS", access).replace("RELEASE", release).replace("COUNT", str(count))


RACE = {"ld": "SV302", "st": "SV303"}


@pytest.mark.parametrize("access", ["ld", "st"])
@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_lane0_release_after_whole_warp_tmem_access_is_a_race(access, engine):
    """By the letter, lane 0's arrive publishes lane 0's load (store) only: the next MMA races with
    lanes 1..31's (SV302 after an ld, SV303 after an st), and SV508 names the missing syncwarp."""
    res = check(handback(access, "elect { arrive acc_empty; }"), engine, assume_warp_collective_orders=False)
    assert res.verdict is Verdict.VIOLATION, res.coverage
    assert RACE[access] in errors(res)
    sv508 = [d for d in res.diagnostics if d.code == "SV508"]
    assert sv508 and f"tcgen05.{access} of acc" in sv508[0].message


@pytest.mark.parametrize("access", ["ld", "st"])
@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_syncwarp_before_the_lane0_release_stays_safe(access, engine):
    """The twin: `syncwarp` orders every lane's completed access before lane 0's arrive."""
    res = check(handback(access, "syncwarp; elect { arrive acc_empty; }"), engine)
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set()), res.diagnostics
    assert res.bound.startswith("all-iterations") or engine == "explicit"


@pytest.mark.parametrize("access", ["ld", "st"])
def test_every_lane_releasing_stays_safe(access):
    """CUTLASS's epilogue: every thread arrives (count 32), each publishing its own access."""
    res = check(handback(access, "arrive acc_empty;", 32))
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set()), res.diagnostics


def test_some_lanes_releasing_publish_only_their_own_loads():
    """By the letter a lane guard releases what those lanes did: lanes 2..31's loads stay
    unpublished. Under the warp-collective reading the warp's wait::ld orders them (SV609)."""
    letter = {"assume_warp_collective_orders": False}
    res = check(handback("ld", "if lane < 2 { arrive acc_empty; }", 2), **letter)
    assert res.verdict is Verdict.VIOLATION and "SV302" in errors(res)
    res = check(handback("ld", "syncwarp; if lane < 2 { arrive acc_empty; }", 2), **letter)
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set())
    res = check(handback("ld", "if lane < 2 { arrive acc_empty; }", 2))
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set())
    assert [d.code for d in res.diagnostics] == ["SV609"]


def test_a_warps_own_later_access_and_dealloc_follow_its_wait():
    """Each lane's own later tcgen05 access, and the warp's own dealloc, are ordered after the
    lane's wait without a syncwarp (PTX §9.7.16.6.4.2, same thread): no false alarm."""
    text = """
protocol own {
  cta threads 32;
  tmem acc cols 128;
  tmem.alloc cols 128;
  tcgen05.st acc;
  tcgen05.wait::st;
  tcgen05.ld acc;
  tcgen05.wait::ld;
  tcgen05.st acc;
  tcgen05.wait::st;
  tmem.dealloc cols 128;
}
"""
    res = check(text)
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set()), res.diagnostics
    res = check(text.replace("  tcgen05.wait::ld;\n", ""))
    assert res.verdict is Verdict.VIOLATION and "SV302" in errors(res)


@pytest.mark.parametrize("release", ["elect { arrive acc_empty; }", "syncwarp; elect { arrive acc_empty; }"])
def test_tmem_handback_is_refused_with_a_reason_by_bmc_and_promela(release):
    res = check(handback("ld", release), "bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "not encoded" in res.coverage
    assert "not exported" in promela_refusal(handback("ld", release))


# ---------------------------------------------------------------- the commit-release reading
COMMIT_RELEASE = """
protocol commit_release {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  smem d bytes 16;
  mbarrier m count 1;
  first thread { init m; }
  syncthreads;
  if a { elect { BODY } }
  if b { wait m parity 0; read d; }
}
"""
WRITE_THEN_COMMIT = COMMIT_RELEASE.replace("BODY", "write d; tcgen05.commit m;")
COMMIT_THEN_WRITE = COMMIT_RELEASE.replace("BODY", "tcgen05.commit m; write d;")


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_commit_release_reading_orders_the_committers_write(engine):
    """On by default, reported as used; `--no-assume` (assume_commit_release=False) is the
    PTX-only reading: the read races with the write (SV301)."""
    res = check(WRITE_THEN_COMMIT, engine)
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set()), (res.diagnostics, res.coverage)
    assert "commit-release" in res.assumed
    res = check(WRITE_THEN_COMMIT, engine, assume_commit_release=False)
    assert res.verdict is Verdict.VIOLATION and errors(res) == {"SV301"}
    assert "commit-release" not in res.assumed


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_a_write_after_the_commit_is_not_released(engine):
    """The twin: the commit's arrival carries what the thread knew when it committed, not a
    later write: SV301 under every reading."""
    for assume in (True, False):
        res = check(COMMIT_THEN_WRITE, engine, assume_commit_release=assume)
        assert res.verdict is Verdict.VIOLATION and "SV301" in errors(res), (engine, assume)


def test_commit_release_is_refused_with_a_reason_by_promela():
    assert "not exported" in promela_refusal(WRITE_THEN_COMMIT)


def test_commit_of_the_elected_lane_does_not_release_the_other_lanes_writes():
    """The lane rule holds under the reading: a whole-warp write, then a commit by lane 0 with
    no syncwarp between, publishes lane 0's part only."""
    text = COMMIT_RELEASE.replace("if a { elect { BODY } }", "if a { write d; elect { tcgen05.commit m; } }")
    res = check(text)
    assert res.verdict is Verdict.VIOLATION and "SV301" in errors(res)
    res = check(text.replace("write d; elect", "write d; syncwarp; elect"))
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set())


FMHA = (ROOT / "specs" / "cutlass_sm100_fmha_tmem_base_address.sync").read_text()


@pytest.mark.parametrize("engine", ["explicit", "auto", "z3"])
def test_cutlass_fmha_base_address_is_safe_under_the_reading_and_sv301_without(engine):
    """CUTLASS example 77 as it ships: safe for every tile count, saying it assumed the reading;
    with `--no-assume` the correction warp's read of the base address is SV301."""
    res = check(FMHA, engine)
    assert (res.verdict, errors(res)) == (Verdict.SAFE, set()), res.diagnostics
    assert "commit-release" in res.assumed
    assert res.bound.startswith("all-iterations") or engine == "explicit"
    res = check(FMHA, engine, assume_commit_release=False)
    assert res.verdict is Verdict.VIOLATION and errors(res) == {"SV301"}


def test_cutlass_fmha_is_refused_with_a_reason_by_bmc_and_promela():
    res = check(FMHA, "bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "not encoded" in res.coverage
    assert "not exported" in promela_refusal(FMHA)


def test_no_assume_drops_the_reading_on_the_command_line(tmp_path, capsys):
    from syncverify.cli import main

    path = tmp_path / "c.sync"
    path.write_text(WRITE_THEN_COMMIT)
    assert main(["check", str(path)]) == 0
    assert "(assumed: commit-release)" in capsys.readouterr().out  # (one commit: no order to assume)
    assert main(["check", "--no-assume", str(path)]) == 1
    assert "SV301" in capsys.readouterr().out


def test_the_other_readings_are_named_when_used():
    """Two commits of one thread in flight: the second's arrival waits behind the first (commit-order);
    a cta_group 2 deallocation waits for its peer (dealloc-blocks). `--no-assume` names none."""
    two = (ROOT / "specs" / "cutlass_sm100_2sm_umma_gemm.sync").read_text()
    res = check(two)
    assert res.verdict is Verdict.SAFE and {"commit-order", "dealloc-blocks"} <= set(res.assumed)
    res = check(two, assume_tcgen05_commit_order=False, assume_dealloc_blocks=False, assume_commit_release=False)
    assert res.assumed == ()
