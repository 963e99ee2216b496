"""The real CUTLASS sm_90 ping-pong GEMM (KernelTmaWarpSpecializedPingpong, tile 64x128x64, cluster 1x1,
TMA epilogue; tests/data/ptx/sm90_gemm_pingpong_1x1.cu) extracted from its committed PTX at M=128 N=128
K=128 on one CTA (`fields 128 128 128 1`: both tiles in one CTA, one per consumer warpgroup), with the
Params fields CUTLASS's own host code computes (sm90_gemm_coop_2x1_fields.cu built with
-DSV_GEMM_TU='"sm90_gemm_pingpong_1x1.cu"').

The two consumer warpgroups take turns through the kernel's OrderedSequenceBarrier<2, 2>
(sm90_pipeline.hpp, `math_wg_order_barrier`): group 0 starts with the opposite phase, so its first wait
passes on the fresh barrier and group 1's waits for group 0's arrive; one stage orders the mainloops, the
other the epilogues, which share the named barrier 1 and the epilogue's shared memory."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
FIELDS = DATA / "sm90_gemm_pingpong_1x1_fields_128x128x128.bin"
# what `fields 128 128 128 1 FIELDS` prints: A's box (64x64 halves) at byte 128, B's at 384, C and D
PARAM_FIELDS = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]
BOXES = {128: 8192, 384: 16384, 896: 4096, 1152: 4096}
# the epilogue's order wait (math_wg_order_barrier.wait() before the epilogue, pingpong.hpp:882)
EPILOGUE_ORDER_WAIT = "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r43], %r1196, %r544; "


def _ptx(tmp_path: Path, patch: str | None = None) -> Path:
    text = gzip.decompress((DATA / "sm90_gemm_pingpong_1x1.ptx.gz").read_bytes()).decode()
    if patch is not None:
        lines = text.split("\n")
        assert lines[2455] == EPILOGUE_ORDER_WAIT  # PTX line 2456
        lines[2455] = patch
        text = "\n".join(lines)
    out = tmp_path / "sm90_gemm_pingpong_1x1.ptx"
    out.write_text(text)
    return out


def _args() -> list[str]:
    out = ["--grid", "1x1x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "215040"]
    for off, n in PARAM_FIELDS:
        out += ["--param", f"0[{off}:{n}]=@{FIELDS}"]
    for off, n in BOXES.items():
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return out


def _strip(text: str) -> str:
    return re.sub(r" *//[^\n]*", "", text)


def test_the_order_barrier_extracts_as_cutlass_sequences_the_warpgroups(tmp_path):  # type: ignore[no-untyped-def]
    blob = FIELDS.read_bytes()
    launch = Launch(block=(384, 1, 1), grid=(1, 1, 1), dynamic_smem=215040,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in BOXES.items()})
    text = extract(parse_ptx_file(str(_ptx(tmp_path))), launch).text
    body = _strip(text)
    # OrderedSequenceBarrier<2, 2>: 2 stages x 2 groups, each barrier counting a warpgroup's 128 threads
    assert "for k3 in 0..4 {\n      elect {\n        init mb0[24 + k3] count 128;" in body
    assert "OrderedSequenceBarrier" not in text and "sm90_pipeline.hpp:1328" in text  # its constructor
    consumers = body.split("if w4_7 {")[1]
    group0, group1 = consumers.split("if w8_11 {")
    # group 0 waits on its own barrier with the opposite phase (passes at once), then signals group 1
    assert group0.index("wait mb0[24] parity 1;") < group0.index("wgmma.read") < group0.index("arrive mb0[25];")
    # group 1 first waits for that signal, and after its mainloop signals group 0
    assert group1.index("wait mb0[25] parity 0;") < group1.index("wgmma.read") < group1.index("arrive mb0[24];")
    # the epilogue stage: group 0 waits on mb0[26] (passes), stores, and releases group 1 through mb0[27]
    assert group0.index("wait mb0[26] parity 1;") < group0.index("tma.store") < group0.index("arrive mb0[27];")
    assert group1.index("wait mb0[27] parity 0;") < group1.index("tma.store") < group1.index("arrive mb0[26];")
    # both epilogues use named barrier 1 for their 128 threads: only the order barrier keeps them apart
    assert "bar.sync 1, 128;" in group0 and "bar.sync 1, 128;" in group1


def test_the_pingpong_gemm_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    assert main(["check", str(_ptx(tmp_path)), *_args()]) == 0
    got = capsys.readouterr()
    assert "1 file: 1 safe" in got.out + got.err


def test_without_the_epilogue_order_wait_the_epilogues_race(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The spin on the order barrier before the epilogue replaced by a predicate that is already true (one
    PTX line): the second warpgroup writes the epilogue's shared memory while the first one still writes
    it (SV303) and while its TMA store still reads it (SV302), both at the stmatrix (copy_sm90.hpp:153)."""
    ptx = _ptx(tmp_path, "\tsetp.eq.u32 P1, 0, 0;")
    assert main(["check", str(ptx), *_args(), "--fail-fast"]) == 1
    got = capsys.readouterr()
    assert "cute/arch/copy_sm90.hpp:153:15: SV303 WAW race on s" in got.out + got.err  # the first one found
    assert main(["check", str(ptx), *_args()]) == 1  # the whole search
    got = capsys.readouterr()
    assert "cute/arch/copy_sm90.hpp:153:15: SV302 WAR race on s" in got.out + got.err


# ---- cluster 2x1 (tests/data/ptx/sm90_gemm_pingpong_2x1.cu): `fields 256 128 128 2`, one cluster of two
# CTAs, each with two 64x128 tiles (one per consumer warpgroup), B multicast to both CTAs in 8 KiB slices
FIELDS_2X1 = DATA / "sm90_gemm_pingpong_2x1_fields_256x128x128.bin"
BOXES_2X1 = {128: 8192, 384: 8192, 896: 4096, 1152: 4096}


def _args_2x1() -> list[str]:
    out = ["--grid", "2x1x1", "--block", "384x1x1", "--cluster", "2x1x1", "--dynamic-smem", "215040"]
    for off, n in PARAM_FIELDS:
        out += ["--param", f"0[{off}:{n}]=@{FIELDS_2X1}"]
    for off, n in BOXES_2X1.items():
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return out


def test_the_2x1_pingpong_gemm_extracts_with_its_multicast(tmp_path, capsys):  # type: ignore[no-untyped-def]
    ptx = tmp_path / "sm90_gemm_pingpong_2x1.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm90_gemm_pingpong_2x1.ptx.gz").read_bytes()))
    out = tmp_path / "pp2x1.sync"
    assert main(["extract", str(ptx), *_args_2x1(), "-o", str(out)]) == 0
    body = _strip(out.read_text())
    assert "cluster 2;" in body
    # the roles by the kernel's branches that select them (ptx/role_names.py; the hand harness gives no
    # SharedStorage members, so the barriers keep the synthetic `mbK`)
    for role in ("role producer_mainloop = warp 0;", "role consumer0[4] = warp 4 + i;",
                 "role consumer1[4] = warp 8 + i;"):
        assert role in body
    # B's slices go to both CTAs of the cluster; A's copies stay in their own CTA
    assert re.search(r"tma\.load \S+ bytes 8192 -> \S+ multicast 0x3;", body)
    assert re.search(r"tma\.load \S+ bytes 8192 -> mb0\[\S+\];", body)


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="about two minutes of CPU; the 1x2 ping-pong GEMM's safe verdict "
                           "(tests/test_cutlass_names.py) runs in CI, this one with SYNCVERIFY_SLOW=1")
def test_the_2x1_pingpong_gemm_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Both CTAs' warpgroups take turns through their order barriers while B's slices land in both:
    safe, with CUTLASS's SV602 (`.cta`-scope remote releases that only guard reuse). Decided once
    the reduction asked per barrier element (tests/test_element_por.py): 169,151 states, about a
    minute of CPU (bench/RESULTS-ptx.md); by array name it was not decided in 3.1 million."""
    ptx = tmp_path / "sm90_gemm_pingpong_2x1.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm90_gemm_pingpong_2x1.ptx.gz").read_bytes()))
    assert main(["check", str(ptx), *_args_2x1()]) == 0
    got = capsys.readouterr()
    text = got.out + got.err
    assert "1 file: 1 safe" in text
    assert "SV602" in text
