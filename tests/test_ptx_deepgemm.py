"""DeepGEMM's sm90 FP8 GEMM (1D2D scaling) with TMA multicast 2, extracted from its PTX as it ships (#33).

The kernel is deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh at DeepGEMM commit
54e22612409371d6364144b69086735beb54e98b, instantiated by tests/data/ptx/deepgemm_sm90_fp8_1d2d.cu the way
DeepGEMM's JIT does (SM90FP8Gemm1D2DRuntime::generate_impl); the build commands are in that file. It
releases each stage with `lane_idx < kNumTMAMulticast ? empty_barriers[stage_idx]->arrive(target_cta)`,
lane r on CTA r (line 268-269), which extraction refused before ("lanes of one warp give this instruction
different operands"); it is `if lane < 2 { arrive mb0[2] @ lane; }` now (ptx/lane_operands.py).

The launch and the parameters, as DeepGEMM's host code (csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp and
heuristics/sm90.hpp) makes them for M=64 N=128 K=384 with this configuration (BLOCK 64x64x128, 2 stages,
multicast 2 on A):

* grid = num_sms = 2, block = num_tma_threads + num_math_threads = 256, cluster = get_cluster_size() = 2;
* dynamic shared memory = get_pipeline_config's smem_extra + num_stages * smem_per_stage:
  smem_cd align(64*64*2, 1024) = 8192, barriers 16*8*2 = 256, extra SFB align(3*4*1, 8) = 16, per stage
  64*128 (A) + 64*128 (B) + align(64*4, 128) (SFA) = 16640: 41744;
* the kernel's arguments (sfb, grouped_layout, m, n, k, tensor_map_a, _b, _d, _sfa): m = 64 is parameter 2
  (compiled dims "nk": n and k are template constants); sfb is only loaded as data (unbound);
* the box of each tensor map (cuTensorMapEncodeTiled on the host; the PTX holds only its address):
  make_tma_a_desc(K-major, load_block_m 64, block_k 128, swizzle 128) 128 x 64 fp8 = 8192 bytes;
  make_tma_b_desc (load_block_n 64) 8192; make_tma_cd_desc (store 64 x 64 bf16, swizzle 128) 8192;
  make_tma_sf_desc(MN, block_m 64, 1) 64 floats = 256.

The seeded bug (tests/data/ptx/deepgemm_seeds/make_overlay.py, one line of DeepGEMM's header replaced):
every releasing lane arrives on its own CTA's empty barrier -- a lane arriving on the wrong rank. The counts
still add up, so nothing hangs; CTA 0's producer then multicasts over CTA 1's copy of a stage that CTA 1
has not consumed. With multicast off at BLOCK_N 128 the epilogue's TMA store is issued by two lanes, one
per 64-column half, each waiting for its own bulk group: lane-guarded stores with their own groups.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
BOXES = {5: 8192, 6: 8192, 7: 8192, 8: 256}
LAUNCH = Launch(block=(256, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=41744,
                params={"2": 64}, tensor_bytes={(str(k), 0): n for k, n in BOXES.items()})
ARGS = ["--grid", "2x1x1", "--block", "256x1x1", "--cluster", "2x1x1", "--dynamic-smem", "41744", "--param", "2=64",
        *[a for k, n in BOXES.items() for a in ("--tensor-bytes", f"{k}[0]={n}")]]
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="the search takes minutes (bench/RESULTS-ptx.md); run with SYNCVERIFY_SLOW=1")


def _ptx(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    out.write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return out


def _body(text: str) -> list[str]:
    return [ln.split("//")[0].strip() for ln in text.splitlines() if ln.split("//")[0].strip()]


def test_lane_r_arrives_on_cta_r(tmp_path: Path) -> None:
    text = extract(parse_ptx_file(str(_ptx(tmp_path, "deepgemm_sm90_fp8_1d2d.ptx"))), LAUNCH).text
    body = _body(text)
    # three k-blocks of the math warpgroup, each released by lanes 0 and 1 of every math warp
    assert body.count("if lane < 2 { arrive mb0[2] @ lane; }") == 2
    assert body.count("if lane < 2 { arrive mb0[3] @ lane; }") == 1
    # CTA 0 multicasts A (and its scales) to both CTAs; each CTA loads its own B; the expect_tx is A + B + SFA
    assert "tma.load s1[0] bytes 8192 -> mb0[0] multicast 0x3;" in body
    assert "arrive.expect_tx mb0[0] bytes 16640;" in body
    # the empty barriers count kNumTMAMulticast * kNumMathThreads / 32 = 8 arrivals, and the producer's
    # "another round of empty waits" before it exits
    assert any(re.fullmatch(r"init mb0\[2 \+ k\d\] count 8;", ln) for ln in body)
    assert "wait mb0[3] parity 0;" in body  # the extra round: stage 1's second phase
    # the arrival is CUTLASS's ClusterBarrier::arrive(cta_id, pred), the mapa'd mbarrier.arrive
    line = next(ln for ln in text.splitlines() if "@ lane;" in ln)
    assert "barrier.h:492" in line


def test_the_wrong_rank_seed_arrives_on_its_own_cta(tmp_path: Path) -> None:
    body = _body(extract(parse_ptx_file(str(_ptx(tmp_path, "deepgemm_sm90_fp8_1d2d_seed1.ptx"))), LAUNCH).text)
    assert body.count("if lane < 2 { arrive mb0[2]; }") == 2  # two arrivals on its own CTA's barrier
    assert not any("@ lane" in ln for ln in body)


def test_multicast_off_two_lane_store_is_extracted_at_the_store(tmp_path: Path) -> None:
    """The two lanes' stores were refused ("per-thread bulk async-group"); they are lane-guarded statements
    now, each lane with its own bulk groups (tests/test_lane_bulk_groups.py checks the kernel). A grid of
    2 gives CTA 1 no tile at M=64, and a protocol is one cluster's: the launch is CTA 0's."""
    launch = Launch(block=(256, 1, 1), dynamic_smem=66320, params={"2": 64},
                    tensor_bytes={("5", 0): 8192, ("6", 0): 16384, ("7", 0): 8192, ("8", 0): 256})
    text = extract(parse_ptx_file(str(_ptx(tmp_path, "deepgemm_sm90_fp8_1d2d_mc1_n128.ptx"))), launch).text
    body = _body(text)
    assert any(ln.startswith("if lane == 1 { tma.store") for ln in body)
    assert "if lane < 2 { bulk.commit; }" in body and "if lane < 2 { bulk.wait_read 0; }" in body
    assert "sm90_fp8_gemm_1d2d.cuh:439" in next(ln for ln in text.splitlines() if "if lane == 1 { tma.store" in ln)


@SLOW
def test_the_wrong_rank_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CTA 0's producer multicasts A into CTA 1's stage while CTA 1's copy of it may still be in flight
    or read: its own math warps' releases were all it waited for. The seeded arrive is named at the kernel's
    line (sm90_fp8_gemm_1d2d.cuh:269, the lane-guarded release; its instruction is CUTLASS's barrier.h:492)
    as the race's cause, since the kernel with `@ lane` there checks clean (diagnose_rank.py) -- under the
    default reading `exit-drains-bulk-reads`, which the kernel as it ships needs to check safe (docs/model.md, "A
    CTA's exit and its bulk stores"); to the letter of the exit (`--letter exit-drains-bulk-reads`) the
    retargeted kernel is not clean and nothing is named.
    Both runs: 7,314 states each, about 4 s of CPU apiece with the counterfactual search (2026-12-06)."""
    ptx = str(_ptx(tmp_path, "deepgemm_sm90_fp8_1d2d_seed1.ptx"))
    for letter in ([], ["--letter", "exit-drains-bulk-reads"]):
        code = main(["check", ptx, *ARGS, *letter, "--fail-fast"])
        out = capsys.readouterr()
        text = out.out + out.err
        assert code == 1
        assert "copy_sm90_tma.hpp:676" in text and ("SV303 WAW race on s1[" in text or "SV302" in text)
        cause = re.search(r"sm90_fp8_gemm_1d2d\.cuh:269:\d+: SV30[23] arrive on the wrong CTA: .*`@ lane`", text)
        assert bool(cause) == (not letter), text[-3000:]


@SLOW
def test_multicast_2_checks_safe_with_the_consumption_rules_letter_warned(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Only CTA 0 multicasts A, so CTA 0's math warps may release CTA 1's empty barrier for a round before CTA 1's
    producer has waited on its previous phase: the letter of PTX's consumption rule (SV505, a warning), never its
    hazard (SV502: that phase also needs CTA 1's own releases, behind CTA 1's full barrier, behind CTA 1's
    producer's wait). The kernel is safe, under the default reading `exit-drains-bulk-reads` (the epilogue's bulk
    stores at the exit: an H100 waits, docs/gpu-agreement.md), and SV404 there to the letter (docs/model.md,
    "Readings PTX does not settle"; bench/RESULTS-speed.md, 2026-12-06 07:00 UTC)."""
    sync = tmp_path / "dg.sync"
    sync.write_text(extract(parse_ptx_file(str(_ptx(tmp_path, "deepgemm_sm90_fp8_1d2d.ptx"))), LAUNCH).text)
    code = main(["check", str(sync), "--format", "json", "--max-states", "300000"])
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert code == 0 and result["verdict"] == "safe", result["coverage"]
    assert "exit-drains-bulk-reads" in result["assumed"]
    letter = main(["check", str(sync), "--letter", "exit-drains-bulk-reads", "--format", "json", "--max-states",
                   "300000"])
    (strict,) = json.loads(capsys.readouterr().out)["results"]
    assert letter == 1 and "SV404" in {d["code"] for d in strict["diagnostics"]}
    codes = {d["code"] for d in result["diagnostics"]}
    assert "SV502" not in codes and all(d["severity"] == "warning" for d in result["diagnostics"])
    lines = sync.read_text().splitlines()
    letter = [d for d in result["diagnostics"] if d["code"] == "SV505"]
    assert letter, result["diagnostics"]
    for d in letter:  # at a math warp's release, lane r on cluster CTA r (CUTLASS's ClusterBarrier::arrive)
        source = lines[d["line"] - 1]
        assert "arrive mb0[" in source and "@ lane;" in source and "barrier.h:492" in source, source
