"""The real CUTLASS sm_90 cooperative GEMM (cluster 2x1, TMA epilogue; tests/data/ptx/sm90_gemm_coop_2x1.cu)
extracted from its committed PTX at M=256 N=128 K=128, with the launch and Params fields its host program
(sm90_gemm_coop_2x1_fields.cu, CUTLASS's own host code) printed, and the seeded-bug builds of the same
kernel (cutlass_seeds/make_overlay.py), each flagged at its CUTLASS line."""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import PtxError, parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
FIELDS = DATA / "sm90_gemm_coop_2x1_fields_256x128x128.bin"
# what `fields 256 128 128 132 FIELDS` prints (the Params fields that decide control flow, and the box of
# each tensor map: A at byte 128, B (multicast to the 2 CTAs: half a tile each) at 384, C at 896, D at 1152)
PARAM_FIELDS = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]
TENSOR_BYTES = {128: 16384, 384: 8192, 896: 4096, 1152: 4096}
LAUNCH = ["--grid", "2x1x1", "--block", "384x1x1", "--cluster", "2x1x1", "--dynamic-smem", "231424"]


def _args(fields: Path = FIELDS, tensor_bytes: dict[int, int] = TENSOR_BYTES, launch: list[str] = LAUNCH) -> list[str]:
    out = list(launch)
    for off, n in PARAM_FIELDS:
        out += ["--param", f"0[{off}:{n}]=@{fields}"]
    for off, n in tensor_bytes.items():
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return out


def _launch(tensor_bytes: dict[int, int] = TENSOR_BYTES) -> Launch:
    blob = FIELDS.read_bytes()
    return Launch(block=(384, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=231424,
                  params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                  tensor_bytes={("0", o): n for o, n in tensor_bytes.items()})


def _ptx(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    out.write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return out


@pytest.fixture(scope="module")
def gemm(tmp_path_factory):  # type: ignore[no-untyped-def]
    return parse_ptx_file(str(_ptx(tmp_path_factory.mktemp("gemm"), "sm90_gemm_coop_2x1.ptx")))


def test_the_gemm_extracts_with_its_tensor_maps_boxes(gemm):  # type: ignore[no-untyped-def]
    text = extract(gemm, _launch()).text
    # producer warp, the idle warps of its warpgroup, and the two consumer warpgroups as one role each
    for role in ("role w0 = warp 0;", "role w1_3[3] = warp 1 + i;", "role w4_7[4] = warp 4 + i;",
                 "role w8_11[4] = warp 8 + i;"):
        assert role in text
    # CUTLASS's expect_tx constant (32 KiB per stage) and the boxes: A, 16 KiB in two halves, and B,
    # multicast by each CTA of the pair (8 KiB each): 16 + 8 + 8 KiB reach each CTA's full barrier
    assert "arrive.expect_tx mb0[0] bytes 32768;" in text
    assert "tma.load s32[0] bytes 8192 -> mb0[0];" in text and "tma.load s32[1] bytes 8192 -> mb0[0];" in text
    assert "tma.load s33[0] bytes 8192 -> mb0[0] multicast 0x3;" in text
    assert "tma.load s33[1] bytes 8192 -> mb0[0] multicast 0x3;" in text
    # consumer_release: one warp of each consumer warpgroup signals each CTA's empty barrier
    assert "if instance == 1 {\n      elect {\n        arrive mb0[6] @ 1;" in text
    # the epilogue: stmatrix into shared memory, then the TMA store of the tile
    assert "tma.store" in text and "write s4;" in text
    assert "sm90_pipeline.hpp" in text and "copy_sm90_tma.hpp:185" in text


def test_without_the_boxes_extraction_asks_for_them(gemm):  # type: ignore[no-untyped-def]
    with pytest.raises(PtxError) as err:
        extract(gemm, _launch({}))
    assert "--tensor-bytes '0[128]=BYTES'" in err.value.message and "copy_sm90_tma.hpp:185" in err.value.note


def test_a_box_that_disagrees_with_cutlass_expect_tx_reaches_the_protocol(gemm):  # type: ignore[no-untyped-def]
    """The B box taken whole (16 KiB, the atom before make_tma_copy_desc slices it for the multicast): the
    copies then bring 16 + 16 + 16 KiB to each CTA's full barrier where CUTLASS's TmaTransactionBytes
    expects 32 KiB. Extraction keeps both numbers as they are, for the check to compare; the peer's
    multicast lands too, so only the search can: test_bug_is_flagged_at_its_cutlass_line."""
    text = extract(gemm, _launch({**TENSOR_BYTES, 384: 16384})).text
    assert "arrive.expect_tx mb0[0] bytes 32768;" in text
    # each CTA's B copy now covers both slices (and CTA 1's runs past the B stage): 8 + 8 KiB per copy
    assert "tma.load s33[0] bytes 8192 -> mb0[0] multicast 0x3;\n      tma.load s33[1] bytes 8192 -> mb0[0] " \
        "multicast 0x3;" in re.sub(r" *//[^\n]*", "", text)


# ---- the same GEMM with one CTA per cluster (sm90_gemm_coop_1x1.cu): no multicast, decided ------------

FIELDS_1X1 = DATA / "sm90_gemm_coop_1x1_fields_256x128x128.bin"  # `fields 256 128 128 132` built -DSV_CLUSTER_M=1
LAUNCH_1X1 = ["--grid", "1x2x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "231424"]
BOXES_1X1 = {128: 16384, 384: 16384, 896: 4096, 1152: 4096}  # B whole: no multicast to slice it


def test_the_1x1_cluster_gemm_is_safe_and_a_short_box_is_not(tmp_path, capsys):
    """The real kernel checked safe at this launch (two CTAs, one tile and two k-tiles each); SV204
    warnings remain: the two consumer warpgroups reach CUTLASS's epilogue `bar.sync 1, 256` (inline asm,
    barrier.h:286) at different PTX copies of it. The twin with the A box halved is SV503: the full
    barrier's bytes never balance, a deadlock."""
    ptx = _ptx(tmp_path, "sm90_gemm_coop_1x1.ptx")
    assert main(["check", str(ptx), *_args(FIELDS_1X1, BOXES_1X1, LAUNCH_1X1), "--warning-traces"]) == 0
    got = capsys.readouterr()
    text = got.out + got.err
    assert "1 file: 1 safe" in text and "SV204 aligned barrier 1" in text
    assert main(["check", str(ptx), *_args(FIELDS_1X1, {**BOXES_1X1, 128: 8192}, LAUNCH_1X1)]) == 1
    got = capsys.readouterr()
    assert "SV503 deadlock: all arrivals are in but the transaction bytes never balance" in got.out + got.err


# `fields 256 256 128 1` built -DSV_CLUSTER_M=1: four 128x128 tiles, all given to the one CTA of a one-SM launch
FIELDS_1X1_4TILES = DATA / "sm90_gemm_coop_1x1_fields_256x256x128_1sm.bin"
LAUNCH_1X1_ONE_CTA = ["--grid", "1x1x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "231424"]


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="27 s of a 20-minute CI;"
                           " the 1x1 GEMM's one-tile verdicts run in CI; run with SYNCVERIFY_SLOW=1")
def test_the_1x1_gemm_with_four_tiles_in_one_cta_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """CUTLASS's persistent tile loop run four times in one CTA: eight k-blocks through six stages, so the
    producer reuses stages 0 and 1 for the last tile (its `producer_acquire` waits on their empty barriers
    with parity 0) and the consumers' releases of the first tile guard that refill. Safe (about 15,000 states)."""
    ptx = _ptx(tmp_path, "sm90_gemm_coop_1x1.ptx")
    args = _args(FIELDS_1X1_4TILES, BOXES_1X1, LAUNCH_1X1_ONE_CTA)
    out = tmp_path / "four_tiles.sync"
    assert main(["extract", str(ptx), *args, "-o", str(out)]) == 0
    body = re.sub(r" *//[^\n]*", "", out.read_text())
    assert "wait mb0[6] parity 0;" in body and "wait mb0[7] parity 0;" in body  # stages 0 and 1 refilled
    assert body.count("tma.store") == 4 * 32  # four tiles' epilogues (the one-tile launch extracts 32 stores)
    capsys.readouterr()
    assert main(["check", str(ptx), *args]) == 0
    got = capsys.readouterr()
    assert "1 file: 1 safe" in got.out + got.err


# ---- seeded bugs: cutlass_seeds/make_overlay.py, compiled with -DSV_SEED=N ---------------------------

def _seed(tmp_path: Path, n: int) -> Path:
    out = tmp_path / f"sm90_gemm_coop_2x1_seed{n}.ptx"
    out.write_bytes(gzip.decompress((DATA / "cutlass_seeds" / f"{out.name}.gz").read_bytes()))
    return out


def test_seeded_builds_differ_from_the_kernel_where_seeded(gemm, tmp_path):  # type: ignore[no-untyped-def]
    """Extraction of each seeded build differs from the kernel's exactly by the seeded operations."""
    base = [ln.split("//")[0].rstrip() for ln in extract(gemm, _launch()).text.splitlines()[4:]]
    skipped_wait = [ln.split("//")[0].rstrip()
                    for ln in extract(parse_ptx_file(str(_seed(tmp_path, 1))), _launch()).text.splitlines()[4:]]
    gone = [ln for ln in base if ln not in skipped_wait or base.count(ln) != skipped_wait.count(ln)]
    assert gone and all(ln.strip().startswith("wait mb0[") and "parity 0" in ln for ln in gone)
    assert len(base) - len(skipped_wait) == 8  # 2 k-tiles x 2 consumer warpgroups x 2 CTAs


# consumer_wait skipped: the wgmma reads the stage the TMA load is still writing (SV301), at the A copy in
# copy_sm90_tma.hpp with the wgmma as the other access. The cluster arrive/wait after the barrier init
# removed: the peer CTA's multicast copy may complete on a barrier whose init is not yet visible (SV402 at
# the multicast copy, copy_sm90_tma.hpp:705), and a consumer may wait on a barrier not yet initialized (SV401).
# The unseeded kernel with the B box taken whole (16 KiB instead of the 8 KiB multicast slice): the two
# CTAs' multicast copies then overlap, a write-write race between them (SV303) at the multicast copy.
FLAGGED = [
    ("sm90_gemm_coop_2x1_seed1.ptx", TENSOR_BYTES,
     ["cutlass_seeded/cute/arch/copy_sm90_tma.hpp:185:13: SV301 RAW race on s32[",
      "mma_sm90_gmma.hpp:1697:14: the other access"]),
    ("sm90_gemm_coop_2x1_seed4.ptx", TENSOR_BYTES,
     ["cutlass_seeded/cute/arch/copy_sm90_tma.hpp:705:13: SV402 tma.load completion on mb0[0]",
      "SV401 wait on mb0[0]"]),
    ("sm90_gemm_coop_2x1.ptx", {**TENSOR_BYTES, 384: 16384},
     ["cutlass_library/source/include/cute/arch/copy_sm90_tma.hpp:705:13: SV303 WAW race on s33["]),
    # the empty barriers' count one too high: the producer's load_tail waits for a release that never comes
    ("sm90_gemm_coop_2x1_seed3.ptx", TENSOR_BYTES,
     ["cutlass_seeded/cutlass/arch/barrier.h:424:15: SV201 deadlock", "phase 0 pending 1/5"]),
]


# With --fail-fast the search ends at the first finding: a few seconds for the races and the cluster-sync
# seed. The deadlock at the end of the kernel (seed 3) needs the whole search, about 215 s of CPU
# (bench/RESULTS-ptx.md): run with SYNCVERIFY_SLOW=1.
_HEAVY = {"sm90_gemm_coop_2x1_seed3.ptx"}
_FIRST_FINDING = {"sm90_gemm_coop_2x1_seed1.ptx", "sm90_gemm_coop_2x1.ptx"}


@pytest.mark.parametrize(("ptx", "boxes", "expected"), FLAGGED,
                         ids=["consumer-wait-skipped", "cluster-sync-removed", "box-disagrees-with-expect-tx",
                              "empty-count-plus-one"])
def test_bug_is_flagged_at_its_cutlass_line(ptx, boxes, expected, tmp_path, capsys):  # type: ignore[no-untyped-def]
    if ptx in _HEAVY and not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip(f"{ptx}: the whole search takes minutes (bench/RESULTS-ptx.md); run with SYNCVERIFY_SLOW=1")
    path = _seed(tmp_path, int(ptx[-5])) if "seed" in ptx else _ptx(tmp_path, ptx)
    # the races end the search at the first finding (the whole search is 2 million states); the
    # cluster-sync seed and the deadlock are searched whole, for every finding named
    # (--after-first-error 0: to the end, so that what is found does not depend on the machine's speed)
    fast = ["--fail-fast"] if ptx in _FIRST_FINDING else ["--after-first-error", "0"]
    code = main(["check", str(path), *_args(tensor_bytes=boxes), *fast])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1
    for want in expected:
        assert want in text



def test_the_2x1_gemm_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The kernel itself (cluster 2x1, 24 warps, multicast B) at M=256 N=128 K=128: safe within the default
    budgets, with CUTLASS's SV602 (`.cta`-scope remote releases that only guard reuse) and SV204 (the two
    consumer warpgroups reach the epilogue's `bar.sync 1, 256` at different PTX copies) warnings. Measured:
    489,283 states, 265 s of CPU (449 s of search on the shared host; bench/RESULTS-ptx.md). Run with
    SYNCVERIFY_SLOW=1."""
    if not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("the search takes over four minutes of CPU (bench/RESULTS-ptx.md); run with SYNCVERIFY_SLOW=1")
    code = main(["check", str(_ptx(tmp_path, "sm90_gemm_coop_2x1.ptx")), *_args()])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    assert "1 file: 1 safe" in text
    assert "SV602" in text and "SV204" in text

FIELDS_K448 = DATA / "sm90_gemm_coop_2x1_fields_256x128x448.bin"  # `fields 256 128 448 132`


def test_the_2x1_gemm_with_a_stage_reused_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """K=448: seven k-tiles through six stages, so each CTA's producer refills stage 0 after both CTAs'
    consumers released it (the remote releases of the multicast B slices included). Measured: safe,
    581,288 states, 436 s of CPU (bench/RESULTS-ptx.md). Run with SYNCVERIFY_SLOW=1."""
    if not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("the search takes over seven minutes of CPU (bench/RESULTS-ptx.md); run with SYNCVERIFY_SLOW=1")
    code = main(["check", str(_ptx(tmp_path, "sm90_gemm_coop_2x1.ptx")), *_args(FIELDS_K448)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    assert "1 file: 1 safe" in text


# ---- seeds that need a stage reused: the 1x1 GEMM with 2 stages at K=192 (3 k-tiles) ------------------
# sm90_gemm_coop_1x1_seeds.cu built -DSV_STAGES=2: one PTX, the seed a __constant__ whose initializer the
# test rewrites, so each branch on it is decided as a -DSV_SEED=N build decides it (every other PTX line
# is the same). With CUTLASS's own 6 stages a stage is first reused at K=448, where the unseeded kernel's
# search is not decided in 600 s (bench/RESULTS-ptx.md).

FIELDS_S2 = DATA / "sm90_gemm_coop_1x1_s2_fields_256x128x192.bin"  # `fields 256 128 192 132`, -DSV_STAGES=2
LAUNCH_S2 = ["--grid", "1x2x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "100352"]
SEED_CONST = ".const .align 4 .u32 sv_seed = 9;"


def _seeded_1x1(tmp_path: Path, n: int) -> Path:
    src = gzip.decompress((DATA / "cutlass_seeds" / "sm90_gemm_coop_1x1_s2_seeds.ptx.gz").read_bytes()).decode()
    assert src.count(SEED_CONST) == 1
    out = tmp_path / f"sm90_gemm_coop_1x1_s2_seed{n}.ptx"
    out.write_text(src.replace(SEED_CONST, SEED_CONST.replace("9;", f"{n};")))
    return out


# seed 2, producer acquire skipped: the third k-tile's copy refills stage 0 while the wgmma of the first
# still reads it (SV302 at the copy, the wgmma the other access), and its expect_tx lands on a full barrier
# whose phase no consumer has waited out (SV502 at arrive_and_expect_tx). Seed 3, the empty barriers'
# count one too high (sm90_pipeline.hpp:321): the producer's wait for stage 0 to be released never ends,
# 256 of 257 arrivals in (SV201 at the wait). Seed 5, the release before warpgroup_wait: the refill of
# stage 0 may start while the first k-tile's wgmma is still in flight (SV302 at the copy).
SEEDS_S2 = [
    (9, 0, ["1 file: 1 safe"]),
    (2, 1, ["cutlass_seeded/cute/arch/copy_sm90_tma.hpp:185:13: SV302 WAR race on s32[0]: tma.load write",
            "mma_sm90_gmma.hpp:1697:14: the other access",
            "cutlass_seeded/cutlass/arch/barrier.h:588:15: SV504 1 arrival(s) on mb0[0]",
            "cutlass_seeded/cutlass/arch/barrier.h:588:15: SV505 warning"]),  # the same arrive lands early
    (3, 1, ["cutlass_seeded/cutlass/arch/barrier.h:424:15: SV201 deadlock", "phase 0 pending 1/257"]),
    (5, 1, ["cutlass_seeded/cute/arch/copy_sm90_tma.hpp:185:13: SV302 WAR race on s32[0]: tma.load write",
            "mma_sm90_gmma.hpp:1697:14: the other access"]),
]


@pytest.mark.parametrize(("seed", "code", "expected"), SEEDS_S2,
                         ids=["unseeded-safe", "producer-acquire-skipped", "arrival-count-plus-one",
                              "release-before-warpgroup-wait"])
def test_a_seed_that_needs_a_stage_reused_is_flagged(seed, code, expected, tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Each run searches about 10,000 states (7-8 s of CPU); the unseeded kernel at the same size is safe."""
    args = [*LAUNCH_S2]
    for off, n in PARAM_FIELDS:
        args += ["--param", f"0[{off}:{n}]=@{FIELDS_S2}"]
    for off, n in BOXES_1X1.items():
        args += ["--tensor-bytes", f"0[{off}]={n}"]
    assert main(["check", str(_seeded_1x1(tmp_path, seed)), *args]) == code  # the whole search: every finding
    got = capsys.readouterr()
    for want in expected:
        assert want in got.out + got.err


def test_the_k_tile_loop_with_k_unbound_is_refused_at_its_line(tmp_path):  # type: ignore[no-untyped-def]
    """The problem shape bound but for K (bytes 12..15): the producer's k-tile loop, whose trip count is
    computed from K, is refused at its CUTLASS line, never run with a guessed count. Bound, it extracts."""
    blob = FIELDS_S2.read_bytes()
    fields = [f for f in PARAM_FIELDS if f != (4, 16)] + [(4, 8), (16, 4)]  # M, N and L; K left unknown
    launch = Launch(block=(384, 1, 1), grid=(1, 2, 1), dynamic_smem=100352,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in fields))},
                    tensor_bytes={("0", o): n for o, n in BOXES_1X1.items()})
    mod = parse_ptx_file(str(_seeded_1x1(tmp_path, 9)))
    with pytest.raises(PtxError) as err:
        extract(mod, launch)
    assert err.value.line == 1040 and "a branch is decided by a value that is not known" in err.value.message
    assert "gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp:372" in err.value.note
    bound = replace(launch, params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in [*fields, (12, 4)]))})
    assert "tma.load" in extract(mod, bound).text


def test_the_unseeded_constant_build_extracts_as_the_pristine_kernel(tmp_path):  # type: ignore[no-untyped-def]
    """sm90_gemm_coop_1x1.cu built -DSV_STAGES=2 from the shipped headers (sm90_gemm_coop_1x1_s2.ptx.gz)
    and the seeds build with sv_seed = 9 give the same protocol but for PTX line numbers and header paths:
    the branches on the __constant__ seed change nothing when no seed is chosen, so the safe verdict above is
    the shipped kernel's. Seed 2 differs from it."""
    blob = FIELDS_S2.read_bytes()
    launch = Launch(block=(384, 1, 1), grid=(1, 2, 1), dynamic_smem=100352,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in BOXES_1X1.items()})

    def body(ptx: Path) -> list[str]:
        text = extract(parse_ptx_file(str(ptx)), launch).text
        text = text.replace("cutlass_seeded/", "cutlass_library/source/include/")
        return [re.sub(r", ptx:\d+( \(\+\d+ unrolled cop(y|ies)\))?", "", ln) for ln in text.splitlines()[1:]]

    pristine = body(_ptx(tmp_path, "sm90_gemm_coop_1x1_s2.ptx"))
    assert len(pristine) > 300
    assert body(_seeded_1x1(tmp_path, 9)) == pristine
    assert body(_seeded_1x1(tmp_path, 2)) != pristine


def test_a_wait_folded_from_two_try_waits_names_both(tmp_path):  # type: ignore[no-untyped-def]
    """consumer_try_wait (barrier.h:470) whose false outcome goes to consumer_wait's spin (barrier.h:424) is
    one wait of the protocol; its comment names the retry too, where a hung thread is found. A LAB_WAIT
    spin retries at its own try_wait and names nothing more (the producer's acquire)."""
    blob = FIELDS_S2.read_bytes()
    launch = Launch(block=(384, 1, 1), grid=(1, 2, 1), dynamic_smem=100352,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in BOXES_1X1.items()})
    text = extract(parse_ptx_file(str(_seeded_1x1(tmp_path, 9))), launch).text
    waits = [ln for ln in text.splitlines() if ln.lstrip().startswith("wait ")]
    retried = [ln for ln in waits if "barrier.h:470" in ln]
    assert retried and all("; retried at cutlass_seeded/cutlass/arch/barrier.h:424 (inlined at "
                           "cutlass_seeded/cutlass/arch/barrier.h:371), ptx:" in ln for ln in retried)
    own = [ln for ln in waits if "// cutlass_seeded/cutlass/arch/barrier.h:424" in ln]
    assert own and not any("retried" in ln for ln in own)
