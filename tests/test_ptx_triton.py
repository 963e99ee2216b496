"""A second family of real kernels: Triton's own ahead-of-time compile for sm_90 of a TMA-pipelined matmul
(tests/data/ptx/triton/tma_matmul.py: host-side tensor descriptors, a k loop software-pipelined over
`num_stages` buffers with one mbarrier each, wgmma), extracted from the committed PTX and checked.

Triton takes a tensor map's address as nvcc does not -- `mov.b32 %r, PARAM` (the .param-space address),
`cvt.u64.u32`, `cvta.param.u64` -- and ends the module with DWARF sections whose values name other
sections; both are read here."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.cli import main

DATA = Path(__file__).parent / "data" / "ptx" / "triton"
# a_desc (params 0..4), b_desc (5..9), c_desc (10..14), then M, N, K (15, 16, 17); one CTA: a 128x128 tile
BOXES = ["--tensor-bytes", "tma_matmul_param_0=16384", "--tensor-bytes", "tma_matmul_param_5=16384",
         "--tensor-bytes", "tma_matmul_param_10=32768"]


def _check(ptx: Path, k: int, capsys: pytest.CaptureFixture[str], boxes: list[str] = BOXES) -> tuple[int, str]:
    code = main(["check", str(ptx), "--block", "128", "--grid", "1", "--param", f"tma_matmul_param_17={k}", *boxes])
    got = capsys.readouterr()
    return code, got.out + got.err


@pytest.mark.parametrize(("stages", "k"), [(3, 256), (4, 512)])
def test_the_triton_matmul_is_safe_with_its_stages_reused(stages, k, capsys):  # type: ignore[no-untyped-def]
    """K / 64 k tiles over `stages` buffers: each buffer is refilled at least once."""
    code, text = _check(DATA / f"tma_matmul_s{stages}.ptx", k, capsys)
    assert code == 0 and "1 file: 1 safe" in text


def test_waiting_for_one_wgmma_group_fewer_races_the_refill(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Triton refills the buffer of iteration k-1 after `wgmma.wait_group 1` in iteration k, which leaves
    only iteration k's wgmma in flight. Waiting for all but two (one PTX line changed) lets the refill's
    TMA write race the wgmma still reading that buffer: SV302 at the A load of the k loop."""
    src = (DATA / "tma_matmul_s3.ptx").read_text()
    assert src.count("wgmma.wait_group.sync.aligned 1;") == 1
    ptx = tmp_path / "tma_matmul_s3.ptx"
    ptx.write_text(src.replace("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;"))
    code, text = _check(ptx, 256, capsys)
    assert code == 1 and "tma_matmul.py:29:13: SV302 WAR race on s0: tma.load write" in text


def test_a_box_short_of_triton_expect_tx_deadlocks(capsys):  # type: ignore[no-untyped-def]
    """The A box half of what Triton's `arrive.expect_tx` (32 KiB per stage) counts: the bytes never balance."""
    boxes = [b.replace("param_0=16384", "param_0=8192") for b in BOXES]
    code, text = _check(DATA / "tma_matmul_s3.ptx", 256, capsys, boxes)
    assert code == 1 and "SV503" in text


def test_without_k_the_pipeline_prologue_is_refused_at_its_line(capsys):  # type: ignore[no-untyped-def]
    """K decides whether the prologue's loads are issued (`k < cdiv(K, 64)`): unbound, it is refused."""
    code = main(["check", str(DATA / "tma_matmul_s3.ptx"), "--block", "128", *BOXES])
    got = capsys.readouterr()
    assert code == 2
    assert "tma_matmul_s3.ptx:101:2: error: cannot extract" in got.err and "tma_matmul.py:28" in got.err
