"""A warp-collective `wgmma.commit`/`wgmma.wait` read as ordering the warp's lanes' earlier generic accesses
before a release by some lanes (semantics/families/warp_collective_order.py; docs/model.md, "Warp-collective
instructions"): the SV609 warning where that reading is what lets lane 0's release publish lanes 1..31's access,
the letter's race with `--no-assume`, and no warning where a `syncwarp` orders it or no collective comes between.

DeepGEMM 54e2261's sm90 FP8 GEMM is the pattern (`sm90_fp8_gemm_1d2d.cuh:302-325`): every lane reads its A scales,
then the warpgroup's wgmmas, `warpgroup_wait<0>()`, and lane 0 alone arrives on the empty barrier. The explicit
engine and the z3 lift take the reading; bmc refuses a release by some lanes after the warp's collective."""

from __future__ import annotations

import pytest

from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.lang import load
from syncverify.result import Verdict
from syncverify.semantics.families.warp_collective_order import WARP_COLLECTIVE_ORDERS

SPEC = "specs/deepgemm_sm90_scales_lane0_release.sync"
TWIN = "specs/deepgemm_sm90_scales_lane0_release_no_collective.sync"

# Small enough for the z3 lift: the producer rewrites the scales once the four math warps released them.
SMALL = """protocol scales_then_lane0_release {
  cta threads 160;
  role math = warpgroup 0;
  role producer = warp 4;
  smem a bytes 1024;
  smem sfa bytes 64;
  mbarrier full count 1;
  mbarrier empty count 4;
  if producer { first thread { init full; init empty; } }
  syncthreads;
  if producer { first thread { write sfa; arrive full; wait empty parity 0; write sfa; } }
  if math { wait full parity 0; MATH }
}
"""
COLLECTIVE = "read sfa; wgmma.read a; wgmma.commit; wgmma.wait 0; if lane == 0 { arrive empty; }"


def _run(text: str, engine: str = "explicit", assume: bool = True, path: str = "x.sync"):  # type: ignore[no-untyped-def]
    res = check_protocol(load(text, path=path), Options(engine=engine, timeout=120,
                                                         assume_warp_collective_orders=assume))
    errors = {d.code for d in res.diagnostics if d.is_error}
    warnings = [d for d in res.diagnostics if not d.is_error]
    return res.verdict, errors, warnings, res.assumed


def _line(text: str, needle: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_lane0_release_after_the_collective_is_the_warning_and_the_race_to_the_letter(engine: str) -> None:
    """Every lane reads, the warp's wgmma.commit/wait, lane 0 releases: safe with SV609 at the release naming the
    collective and the read, the reading named; to the letter the producer's rewrite races the lanes' read."""
    text = SMALL.replace("MATH", COLLECTIVE)
    verdict, errors, warnings, assumed = _run(text, engine)
    assert (verdict, errors) == (Verdict.SAFE, set()) and WARP_COLLECTIVE_ORDERS in assumed
    assert [w.code for w in warnings] == ["SV609"]
    w = warnings[0]
    assert w.span.line == _line(text, "arrive empty")
    assert {r.span.line for r in w.related} == {_line(text, "wgmma.commit")}  # the read and the commit share it
    assert _run(text, engine, assume=False)[:2] == (Verdict.VIOLATION, {"SV302"})


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_a_syncwarp_before_the_release_needs_no_reading(engine: str) -> None:
    """Near twin: `__syncwarp()` after the wait orders the lanes' read by PTX's letter: safe, no warning, nothing
    assumed, with and without the reading."""
    text = SMALL.replace("MATH", COLLECTIVE.replace("if lane == 0", "syncwarp; if lane == 0"))
    for assume in (True, False):
        verdict, errors, warnings, assumed = _run(text, engine, assume)
        assert (verdict, errors, [w.code for w in warnings], assumed) == (Verdict.SAFE, set(), [], ())


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_a_read_after_the_last_collective_stays_the_race(engine: str) -> None:
    """Near twin: the scales read after `wgmma.wait` (no collective between the read and lane 0's release) is
    SV302 under the reading too, and no SV609 is given for it."""
    text = SMALL.replace("MATH", "wgmma.read a; wgmma.commit; wgmma.wait 0; read sfa; if lane == 0 { arrive empty; }")
    for assume in (True, False):
        verdict, errors, warnings, _ = _run(text, engine, assume)
        assert (verdict, errors) == (Verdict.VIOLATION, {"SV302"}) and not warnings


def test_a_release_by_every_lane_needs_no_reading() -> None:
    """Near twin: every lane of each math warp arrives (count 128): each lane publishes its own read by the letter,
    so there is no warning and nothing assumed; the reading changes nothing."""
    text = SMALL.replace("MATH", COLLECTIVE.replace("if lane == 0 { arrive empty; }", "arrive empty;"))
    text = text.replace("mbarrier empty count 4;", "mbarrier empty count 128;")
    for assume in (True, False):
        verdict, errors, warnings, assumed = _run(text, assume=assume)
        assert (verdict, errors, [w.code for w in warnings], assumed) == (Verdict.SAFE, set(), [], ())


def test_the_deepgemm_spec_and_its_twin() -> None:
    """specs/: the scale read before the collectives is SV609 at lane 0's arrive (source line :325), SV302 to the
    letter; the read moved after the wait is SV302 under both."""
    text = open(SPEC).read()
    verdict, errors, warnings, assumed = _run(text, path=SPEC)
    assert (verdict, errors) == (Verdict.SAFE, set()) and {w.code for w in warnings} == {"SV609"}
    assert {w.span.line for w in warnings} == {_line(text, "arrive empty[s]")}
    assert WARP_COLLECTIVE_ORDERS in assumed
    assert _run(text, assume=False, path=SPEC)[:2] == (Verdict.VIOLATION, {"SV302"})
    twin = open(TWIN).read()
    for assume in (True, False):
        assert _run(twin, assume=assume, path=TWIN)[:2] == (Verdict.VIOLATION, {"SV302"})


def test_the_command_line_strict_and_no_assume(capsys) -> None:  # type: ignore[no-untyped-def]
    """`check` exits 0 with the warning and `assumed: warp-collective-orders`; `--strict` makes it an error,
    `--no-assume` gives the letter's SV302 and no SV609."""
    capsys.readouterr()
    assert main(["check", SPEC]) == 0
    out = capsys.readouterr().out
    assert "SV609" in out and WARP_COLLECTIVE_ORDERS in out
    assert main(["check", "--strict", SPEC]) == 1
    assert "SV609" in capsys.readouterr().out
    assert main(["check", "--no-assume", SPEC]) == 1
    out = capsys.readouterr().out
    assert "SV302" in out and "SV609" not in out


def test_bmc_and_promela_refuse_a_release_by_some_lanes_after_the_collective() -> None:
    """bmc and the Promela export encode neither the reading nor the letter there: they refuse with the reason
    (never safe); the twin where every lane releases has no such release and bmc checks it (safe)."""
    from syncverify.export.promela import export_promela
    from syncverify.export.promela.base import ExportError

    text = SMALL.replace("MATH", COLLECTIVE)
    res = check_protocol(load(text, path="x.sync"), Options(engine="bmc", timeout=60))
    assert res.verdict is Verdict.INCONCLUSIVE and "warp-collective reading" in res.coverage
    with pytest.raises(ExportError, match="warp-collective reading"):
        export_promela(load(text, path="x.sync"))
    twin = SMALL.replace("MATH", COLLECTIVE.replace("if lane == 0 { arrive empty; }", "arrive empty;"))
    twin = twin.replace("mbarrier empty count 4;", "mbarrier empty count 128;")
    res = check_protocol(load(twin, path="x.sync"), Options(engine="bmc", timeout=120))
    assert res.verdict is Verdict.SAFE


# tcgen05.wait::ld / ::st read the same way (PTX ISA §9.7.16.8.5 words its `.sync` / `.aligned` as wgmma.wait_group's):
# CUTLASS's CuTe-DSL blockwise GEMM's acc-update warp (blockwise_gemm.py:1625-1659 at 7107b05) loads the accumulator
# with every lane, waits, and releases the stage from one elected lane.
TC_SPEC = "specs/cute_dsl_acc_update_elected_release.sync"
TC_TWIN = "specs/cute_dsl_acc_update_elected_release_ld_after_wait.sync"
TC_SMALL = """protocol tc_wait_then_lane0_release {
  cta threads 64;
  role mma = warp 0;
  role accu = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  mbarrier empty count 1;
  if mma { elect { init full; init empty; fence.mbarrier_init; } tmem.alloc cols 128; }
  syncthreads;
  if mma {
    for t in 0..2 { wait empty parity (t + 1) % 2; AFTER elect { tcgen05.mma acc, a, a; tcgen05.commit full; } }
  }
  if accu { for t in 0..2 { wait full parity t % 2; AFTER ACCU } }
  syncthreads;
  if mma { tmem.dealloc cols 128; }
}
"""
TC_RACE = {"ld": "SV302", "st": "SV303"}


def _tc(accu: str, fenced: bool = False) -> str:
    after = "tcgen05.fence::after_thread_sync;" if fenced else ""
    return TC_SMALL.replace("AFTER", after).replace("ACCU", accu)


def _tc_collective(kind: str, fenced: bool = False) -> str:
    before = "tcgen05.fence::before_thread_sync; " if fenced else ""
    return _tc(f"tcgen05.{kind} acc; tcgen05.wait::{kind}; {before}elect {{ arrive empty; }}", fenced)


@pytest.mark.parametrize("kind", ["ld", "st"])
def test_lane0_release_after_the_warps_tcgen05_wait(kind: str) -> None:
    """The warp's loads (stores), its tcgen05.wait, the fence pair, lane 0's release: safe with SV609 alone at the
    release, naming the wait; to the letter the MMA's next write races lanes 1..31's access (SV302 / SV303)."""
    text = _tc_collective(kind, fenced=True)
    verdict, errors, warnings, assumed = _run(text)
    assert (verdict, errors) == (Verdict.SAFE, set()) and WARP_COLLECTIVE_ORDERS in assumed
    assert [w.code for w in warnings] == ["SV609"]
    assert "tcgen05.wait" in warnings[0].message and warnings[0].span.line == _line(text, "arrive empty")
    assert _run(text, assume=False)[:2] == (Verdict.VIOLATION, {TC_RACE[kind], "SV508"})  # SV508: the release


def test_the_reading_stands_for_a_syncwarp_not_for_the_before_fence() -> None:
    """The MMA runs its after-fence but the loading warp no tcgen05.fence::before_thread_sync: the published loads
    still lack that fence, and the MMA's write is the SV608 warning (the letter: SV603), as it is after a real
    syncwarp; the reading gives the release the lanes' loads, not a fence the lanes did not run."""
    text = _tc("tcgen05.ld acc; tcgen05.wait::ld; elect { arrive empty; }", fenced=True)
    synced = _tc("tcgen05.ld acc; tcgen05.wait::ld; syncwarp; elect { arrive empty; }", fenced=True)
    mma = _line(text, "tcgen05.mma")
    for t in (text, synced):
        verdict, errors, warnings, _ = _run(t)
        assert (verdict, errors) == (Verdict.SAFE, set())
        assert ("SV608", mma) in {(w.code, w.span.line) for w in warnings}
    assert "SV609" in {w.code for w in _run(text)[2]} and "SV609" not in {w.code for w in _run(synced)[2]}


def test_a_tcgen05_load_after_the_collective_wait_stays_the_race() -> None:
    """The load after the warp's last wait is in flight at the release: SV302 under the reading too."""
    text = _tc("tcgen05.ld acc; tcgen05.wait::ld; tcgen05.ld acc; elect { arrive empty; }", fenced=True)
    for assume in (True, False):
        assert _run(text, assume=assume)[:2] == (Verdict.VIOLATION, {"SV302", "SV508"})


def test_the_cute_dsl_spec_and_its_twin() -> None:
    """specs/: the acc-update warp's elected release after its loads and wait::ld is SV609 at the arrive (source
    :1658-1659) beside the source's SV608, SV302 at the MMA to the letter; the load after the wait is SV302 under
    both; bmc refuses the tensor-memory loads with a reason (never safe)."""
    text = open(TC_SPEC).read()
    verdict, errors, warnings, assumed = _run(text, path=TC_SPEC)
    assert (verdict, errors) == (Verdict.SAFE, set()) and {w.code for w in warnings} == {"SV608", "SV609"}
    assert WARP_COLLECTIVE_ORDERS in assumed
    assert {w.span.line for w in warnings if w.code == "SV609"} == {_line(text, "arrive acc_empty")}
    letter = _run(text, assume=False, path=TC_SPEC)
    assert letter[0] is Verdict.VIOLATION and "SV302" in letter[1]
    twin = open(TC_TWIN).read()
    for assume in (True, False):
        verdict, errors, _, _ = _run(twin, assume=assume, path=TC_TWIN)
        assert verdict is Verdict.VIOLATION and "SV302" in errors
    res = check_protocol(load(text, path=TC_SPEC), Options(engine="bmc", timeout=60))
    assert res.verdict is Verdict.INCONCLUSIVE and "tcgen05" in res.coverage
