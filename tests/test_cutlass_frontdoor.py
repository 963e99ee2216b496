"""`--cutlass-problem MxNxK`: a CUTLASS sm90 GEMM checked with one command given only the problem shape.

The launch, the Params fields that decide control flow and the tensor maps' boxes come from CUTLASS's own
host code (syncverify/data/cutlass_sm90_params.cu, built with nvcc for the kernel type its PTX entry names,
run on the CPU). The hand-written harnesses of tests/test_ptx_cutlass.py and tests/test_ptx_pingpong.py
(the *_fields.cu programs, their printed bindings, the committed .bin images) are the reference: the same
launch, the same bytes at every bound field, the same boxes, and so the same verdicts.

The first run builds the host program of each kernel type (nvcc, two to three minutes each on two cores);
later runs find it in the cache ($SYNCVERIFY_CACHE, else ~/.cache/syncverify/cutlass).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.cutlass_host import cutlass_include, host_launch
from syncverify.ptx.extract import extract, find_nvcc
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import parse_ptx_file

pytestmark = pytest.mark.skipif(find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None,
                                reason="needs nvcc, the nvidia-cutlass package and c++filt")

DATA = Path(__file__).parent / "data" / "ptx"
# the Params fields the hand-written harness binds (offset, length), and its boxes by Params offset
PARAM_FIELDS = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]
COOP_BOXES = {128: 16384, 384: 8192, 896: 4096, 1152: 4096}
PINGPONG_BOXES = {128: 8192, 384: 16384, 896: 4096, 1152: 4096}


def _unzip(tmp_path: Path, gz: Path) -> Path:
    out = tmp_path / gz.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(gz.read_bytes()))
    return out


def _host(ptx: Path, problem: tuple[int, int, int, int], sms: int | None = None):  # type: ignore[no-untyped-def]
    mod = parse_ptx_file(str(ptx))
    return mod, host_launch(str(ptx), mod.entries()[0], [], problem, sms, quiet=True)


def test_the_2x1_gemm_gets_the_hand_written_harness_launch(tmp_path):  # type: ignore[no-untyped-def]
    """Cooperative, cluster 2x1, M=256 N=128 K=128: the launch the harness printed (`fields 256 128 128
    132`), the same bytes at every field it binds -- the hardware info aside, which holds the SM count (one
    cluster's 2 SMs here, 132 there) -- and the same boxes. The protocol extracted is the same text."""
    ptx = _unzip(tmp_path, DATA / "sm90_gemm_coop_2x1.ptx.gz")
    mod, host = _host(ptx, (256, 128, 128, 1))
    assert (host.grid, host.block, host.cluster, host.dynamic_smem) == ((2, 1, 1), (384, 1, 1), (2, 1, 1), 231424)
    assert sorted((o, n) for o, n, _ in host.fields) == sorted(PARAM_FIELDS)
    hand = (DATA / "sm90_gemm_coop_2x1_fields_256x128x128.bin").read_bytes()
    for off, n, name in host.fields:
        if name != "hw_info":
            assert host.image[off: off + n] == hand[off: off + n], name
    assert host.image[1536 + 4: 1536 + 8] == (2).to_bytes(4, "little")  # hw_info.sm_count
    assert {o: n for o, n, _ in host.boxes} == COOP_BOXES
    ours = Launch(block=host.block, cluster=host.cluster, grid=host.grid, dynamic_smem=host.dynamic_smem,
                  params={"0": host.param_bytes()}, tensor_bytes={("0", o): n for o, n, _ in host.boxes})
    theirs = Launch(block=(384, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=231424,
                    params={"0": ParamBytes(tuple((o, hand[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in COOP_BOXES.items()})
    assert _strip(extract(mod, ours).text) == _strip(extract(mod, theirs).text)


def _strip(text: str) -> str:
    """The protocol without its comments (the header names the bindings, which are spelled differently)."""
    return re.sub(r" *//[^\n]*", "", text)


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="27 s of a 20-minute CI on two cores; the cooperative 2x1 GEMM's launch (above) runs in"
                           " CI; run with SYNCVERIFY_SLOW=1")
def test_the_2x1_pingpong_gemm_gets_the_hand_written_harness_launch(tmp_path):  # type: ignore[no-untyped-def]
    """Ping-pong, cluster 2x1, M=256 N=128 K=128 (`fields 256 128 128 2` in tests/test_ptx_pingpong.py:
    B multicast to both CTAs in 8 KiB slices): the same launch, bytes and boxes, the same protocol."""
    ptx = _unzip(tmp_path, DATA / "sm90_gemm_pingpong_2x1.ptx.gz")
    mod, host = _host(ptx, (256, 128, 128, 1))
    assert (host.grid, host.block, host.cluster, host.dynamic_smem) == ((2, 1, 1), (384, 1, 1), (2, 1, 1), 215040)
    hand = (DATA / "sm90_gemm_pingpong_2x1_fields_256x128x128.bin").read_bytes()
    assert all(host.image[o: o + n] == hand[o: o + n] for o, n, _ in host.fields)
    boxes = {128: 8192, 384: 8192, 896: 4096, 1152: 4096}
    assert {o: n for o, n, _ in host.boxes} == boxes
    ours = Launch(block=host.block, cluster=host.cluster, grid=host.grid, dynamic_smem=host.dynamic_smem,
                  params={"0": host.param_bytes()}, tensor_bytes={("0", o): n for o, n, _ in host.boxes})
    theirs = Launch(block=(384, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=215040,
                    params={"0": ParamBytes(tuple((o, hand[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in boxes.items()})
    assert _strip(extract(mod, ours).text) == _strip(extract(mod, theirs).text)


def test_a_seeded_2x1_gemm_is_flagged_from_the_problem_shape_alone(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The consumer_wait-skipped build (tests/test_ptx_cutlass.py's seed 1), checked with one command:
    the hand-harness test's finding, SV301 at the A copy with the wgmma as the other access."""
    ptx = _unzip(tmp_path, DATA / "cutlass_seeds" / "sm90_gemm_coop_2x1_seed1.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-problem", "256x128x128", "--fail-fast"])
    text = "".join(capsys.readouterr())
    assert code == 1
    # the buffer by its SharedStorage member (the hand harness, which gives none, calls it s32)
    assert "cutlass_seeded/cute/arch/copy_sm90_tma.hpp:185:13: SV301 RAW race on smem_A[" in text
    assert "mma_sm90_gmma.hpp:1697:14: the other access" in text


def test_the_pingpong_gemm_is_safe_from_the_problem_shape_alone(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Ping-pong, cluster 1x1, M=128 N=128 K=128: two 64x128 tiles, both in the one CTA of one cluster's
    SMs -- one per consumer warpgroup, the launch the hand harness chose (`fields 128 128 128 1`). Safe,
    as tests/test_ptx_pingpong.py finds with the hand-written bindings; the same boxes and bytes."""
    ptx = _unzip(tmp_path, DATA / "sm90_gemm_pingpong_1x1.ptx.gz")
    _, host = _host(ptx, (128, 128, 128, 1))
    hand = (DATA / "sm90_gemm_pingpong_1x1_fields_128x128x128.bin").read_bytes()
    assert all(host.image[o: o + n] == hand[o: o + n] for o, n, _ in host.fields)
    assert {o: n for o, n, _ in host.boxes} == PINGPONG_BOXES
    assert main(["check", str(ptx), "--cutlass-problem", "128x128x128"]) == 0
    assert "1 file: 1 safe" in "".join(capsys.readouterr())


def test_without_the_epilogue_order_wait_the_pingpong_epilogues_race(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The near twin: the order-barrier spin before the epilogue replaced by a predicate already true (the
    one-line change of tests/test_ptx_pingpong.py) -- the epilogues race, found from the shape alone."""
    text = gzip.decompress((DATA / "sm90_gemm_pingpong_1x1.ptx.gz").read_bytes()).decode().split("\n")
    assert text[2455] == "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r43], %r1196, %r544; "
    text[2455] = "\tsetp.eq.u32 P1, 0, 0;"
    ptx = tmp_path / "sm90_gemm_pingpong_1x1.ptx"
    ptx.write_text("\n".join(text))
    assert main(["check", str(ptx), "--cutlass-problem", "128x128x128", "--fail-fast"]) == 1
    assert "cute/arch/copy_sm90.hpp:153:15: SV303 WAW race on s" in "".join(capsys.readouterr())


def test_a_kernel_that_is_not_a_cutlass_gemm_is_refused_at_its_entry(capsys):  # type: ignore[no-untyped-def]
    assert main(["check", str(DATA / "ring.ptx"), "--cutlass-problem", "128x128x64"]) == 2
    err = capsys.readouterr().err
    assert "ring.ptx:" in err and "error: --cutlass-problem: the kernel is not a CUTLASS" in err


def test_a_bad_problem_shape_is_an_input_error(capsys):  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["check", str(DATA / "ring.ptx"), "--cutlass-problem", "128x0x64"])
    assert exc.value.code == 2
    assert "expected MxNxK or MxNxKxL of positive numbers" in capsys.readouterr().err
