"""CUTLASS example 88's Hopper FMHA forward past its `consumer_try_wait` tokens (issue #33): two K/V tiles
(`--cutlass-fmha 1,1,128,128,64`), where each math warp keeps the V tile's probe as a token and waits only if it
said WaitAgain (`consumer_wait(smem_pipe_read, tok)`, sm90_pipeline.hpp:620). As it ships it is safe (69,452
states, about 15 s of CPU: SYNCVERIFY_SLOW=1; its CI twin is the token spec's safe check below).

The seed skips that wait: `@%p67 bra $L__BB0_53;` (the branch over the wait when the token is true, PTX line
3596 of the committed build) made unconditional, as `if (barrier_token == BarrierStatus::WaitAgain)` turned into
`if (false)` would compile. A false probe then lets the PV wgmma read the V tile while its TMA copy is in flight:
SV301 at the MMA (fmha_collective_tma_warpspecialized.hpp:532) against the copy (fmha_collective_load.hpp:131).
It needs nvcc for the example's host code and about 30 s of CPU (extraction and search), so it runs with
SYNCVERIFY_SLOW=1; its CI twin is the token pipeline of specs/cutlass_fmha_consumer_try_wait_token.sync with the
same wait removed.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from pathlib import Path

import pytest

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.ptx.cutlass_host import cutlass_include
from syncverify.ptx.extract import find_nvcc

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data" / "ptx"
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="nvcc of the FMHA host code and a search of 56,000 states (about 30 s of CPU); "
                                 "its twin on the token spec runs in CI; run with SYNCVERIFY_SLOW=1")
NEEDS = pytest.mark.skipif(find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None,
                           reason="needs nvcc, the nvidia-cutlass package and c++filt")
TOKEN_BRANCH = "\t@%p67 bra \t$L__BB0_53;\n"  # consumer_wait(…, tok): over the wait when the token is true
TOKEN_WAIT = "if !tok { wait full[tv % STAGES] parity (tv / STAGES) % 2; }"  # the token spec's consumer_wait(…, tok)


def _seeded_ptx(tmp_path: Path) -> Path:
    text = gzip.decompress((DATA / "fmha_hopper_fwd_ws_64.ptx.gz").read_bytes()).decode()
    assert text.count(TOKEN_BRANCH) == 1
    out = tmp_path / "fmha_seed_token_wait.ptx"
    out.write_text(text.replace(TOKEN_BRANCH, "\tbra \t$L__BB0_53;\n"))
    return out


@SLOW
@NEEDS
def test_the_skipped_token_wait_is_a_race_at_the_pv_mma(tmp_path, capsys):  # type: ignore[no-untyped-def]
    code = main(["check", str(_seeded_ptx(tmp_path)), "--cutlass-fmha", "1,1,128,128,64", "--fail-fast"])
    text = capsys.readouterr().out
    assert code == 1, text[-3000:]
    first = next(line for line in text.splitlines() if " SV" in line and not line.startswith(" "))
    assert "fmha_collective_tma_warpspecialized.hpp:532" in first and "SV301" in first, first
    assert "fmha_collective_load.hpp:131" in first, first  # the V tile's copy, the other access


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="69,452 states, about 15 s of CPU; the token spec's safe twin runs in CI; "
                           "run with SYNCVERIFY_SLOW=1")
@NEEDS
def test_two_kv_tiles_are_safe_past_the_tokens(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The kernel as it ships, at two K/V tiles: safe (69,452 states, bench/RESULTS-speed.md), with the SV204
    warnings of the one-tile check only (the warpgroups reach `__syncthreads` at different PTX copies). Decided
    since the reduction's walk reads each warp's kept probe (docs/model.md, "A kept probe's sequence"), in a
    tenth of the states since a kept probe's true step is left out where its false step covers it ("A kept
    probe's true outcome"; 1,329,549 states before), and 83,322 to 69,452 since both outcomes of a completed probe
    are taken together where nothing can update its barrier first ("Both outcomes of a completed probe")."""
    ptx = tmp_path / "fmha.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "fmha_hopper_fwd_ws_64.ptx.gz").read_bytes()))
    code = main(["check", str(ptx), "--cutlass-fmha", "1,1,128,128,64", "--timeout", "3600"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text[-3000:]
    assert "1 safe, 0 violations, 0 inconclusive" in text
    assert set(re.findall(r"\bSV\d{3}\b", text)) <= {"SV204"}, text[-3000:]


def _token_spec(without_wait: bool) -> str:
    text = (ROOT / "specs" / "cutlass_fmha_consumer_try_wait_token.sync").read_text()
    assert text.count(TOKEN_WAIT) == 1
    return text.replace(TOKEN_WAIT, "") if without_wait else text


def test_the_token_spec_without_its_wait_races_at_the_pv_mma_and_with_it_is_safe():
    """The CI twin: the token pipeline is safe; with `consumer_wait(…, tok)` gone the MMA PV reads the V tile
    under its copy (SV301 at the wgmma read and at the V tile's TMA load)."""
    lines = _token_spec(False).splitlines()
    mma = next(n for n, t in enumerate(lines, 1) if "// MMA PV" in t)
    copy = next(n for n, t in enumerate(lines, 1) if "tma.load kv[tv % STAGES]" in t)
    safe = check_protocol(load(_token_spec(False), path="token.sync"), Options(engine="explicit"))
    seeded = check_protocol(load(_token_spec(True), path="token.sync"), Options(engine="explicit"))
    assert safe.verdict.value == "safe"
    assert seeded.verdict.value == "violation"
    # (reported at both accesses: the read under the copy, and the copy's write under the read)
    assert {(d.code, d.span.line) for d in seeded.diagnostics if d.is_error} == {("SV301", mma), ("SV301", copy)}


# ---- fmha_seeds seed 1: the K stage released before the wgmma wait --------------------------------------------

K0_RELEASE = "    arrive empty[0];                         // consumer_release: K0\n"
PROLOGUE_WAIT = "    wgmma.wait 0;\n    wait full[1 % STAGES]"  # the prologue's warpgroup_wait<0>(), before V0


@SLOW
@NEEDS
def test_the_k_release_before_the_wgmma_wait_races_at_three_kv_tiles(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """fmha_seeds/make_overlay.py seed 1 (the first K stage's `consumer_release` moved from line 430 to before
    `warpgroup_wait<0>()` at line 413): the five-stage K/V ring first refills a stage at the third K/V tile, so
    at `1,1,128,192,64` the producer's TMA load of K2 overwrites K0's stage while the Q*K^T wgmma may still read
    it (about 51,000 states and 11 s of CPU with --fail-fast). The finding is at the load
    (fmha_collective_load.hpp:131) against the wgmma's read (fmha_common.hpp:56); the seeded release is in its
    trace, the arrive on the K stage's empty barrier at line 413 before the `wgmma.wait 0` there, and is named at
    that line as the race's cause, read off the counterexample (the arrive counts towards the phase the producer's
    wait passed while the wgmma read is in flight)."""
    ptx = tmp_path / "fmha_seed1.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "fmha_seeds" / "fmha_hopper_fwd_ws_64_seed1.ptx.gz").read_bytes()))
    code = main(["check", str(ptx), "--cutlass-fmha", "1,1,128,192,64", "--fail-fast", "--timeout", "1200"])
    text = capsys.readouterr().out
    assert code == 1, text[-3000:]
    first = next(line for line in text.splitlines() if " SV" in line and not line.startswith(" "))
    assert re.search(r"fmha_collective_load\.hpp:131:\d+: SV30[123] ", first) and "fmha_common.hpp:56" in first, first
    steps = [line for line in text.splitlines() if "fmha_collective_tma_warpspecialized.hpp:413" in line]
    release, drain = (next(n for n, line in enumerate(steps) if op in line) for op in (" arrive mb", " wgmma.wait 0"))
    assert release < drain, steps
    # the seeded release named at its own line, from this counterexample (syncverify/diagnose_async.py)
    cause = re.search(r"fmha_collective_tma_warpspecialized\.hpp:413:\d+: SV302 released before the read retires, "
                      r"as this counterexample shows: .*", text)
    assert cause and "fmha_common.hpp:56" in cause[0] and "fmha_collective_load.hpp:131" in cause[0], text[-3000:]


def test_the_token_spec_with_k0_released_before_its_wgmma_wait_races_once_the_stage_is_refilled():
    """The CI twin of the seed: the token pipeline (four stages) with the prologue's release of K0 moved before
    its `wgmma.wait 0`. At two k tiles nothing refills stage 0 and it is safe; at three the producer's K load
    into stage 0 races with the QK wgmma that still reads it (SV302 at the load, as in the kernel), and the moved
    release is named at its own line ahead of the race, as in the kernel."""
    text = _token_spec(False)
    assert text.count(K0_RELEASE) == 1 and text.count(PROLOGUE_WAIT) == 1
    seeded = text.replace(K0_RELEASE, "").replace(PROLOGUE_WAIT, "    arrive empty[0];\n" + PROLOGUE_WAIT)
    copy = next(n for n, t in enumerate(seeded.splitlines(), 1) if "tma.load kv[tk % STAGES]" in t)
    release = next(n for n, t in enumerate(seeded.splitlines(), 1) if t == "    arrive empty[0];")
    found = {}
    for iters in (2, 3):
        spec = seeded.replace("param ITERS  = 2;", f"param ITERS  = {iters};")
        result = check_protocol(load(spec, path="seed.sync"), Options(engine="explicit"))
        found[iters] = (result.verdict.value, {(d.code, d.span.line) for d in result.diagnostics if d.is_error})
        first = result.diagnostics[0] if result.diagnostics else None
    assert found[2] == ("safe", set()), found
    assert found[3][0] == "violation" and ("SV302", copy) in found[3][1], found
    assert first is not None and first.span.line == release and "released before the read retires" in first.message
