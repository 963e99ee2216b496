"""Triton's tutorial flash-attention forward, the TMA-descriptor form, as Triton 3.9 compiles it for sm_90
(tests/data/ptx/triton/fused_attention.py: `_attn_fwd_tma` of `python/tutorials/06-fused-attention.py`,
BLOCK_M = BLOCK_N = HEAD_DIM = 64, 4 warps, N_CTX 320: five k tiles; num_stages 2, 3 and 4; PTX committed).

Triton loads Q through a one-shot mbarrier, invalidates it after the wait (`mbarrier.inval`) and its
shared-memory allocator gives the barrier's bytes to K stage 0: the first K load writes over them. Extraction
writes that barrier in the slot holding its bytes (`mbarrier mb0 in s0[0];`) and the checker orders every data
access of them after the inval (SV408, SV409: semantics/families/storage.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.cli import main

DATA = Path(__file__).parent / "data" / "ptx" / "triton"
# desc_q, desc_k, desc_v, desc_o are parameters 4, 9, 14, 19 (a CUtensorMap each); every box is 64 x 64 fp16
BOXES = [a for n in (4, 9, 14, 19) for a in ("--tensor-bytes", f"_attn_fwd_tma_param_{n}=8192")]
# the Q barrier: invalidated at this PTX line (num_stages 3), after the wait of the try_wait loop above it
INVAL = "\t@%p4 mbarrier.inval.shared::cta.b64 [%r12];\n"
Q_WAIT = "\tmbarrier.try_wait.parity.shared::cta.b64 complete, [%r12], %r14;\n\t@!complete bra.uni waitLoop;\n"


def _run(cmd: str, ptx: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([cmd, str(ptx), "--block", "128", "--grid", "1", *BOXES])
    got = capsys.readouterr()
    return code, got.out + got.err


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_attention_forward_extracts_with_the_q_barrier_in_a_k_stage_and_is_safe(stages, capsys):  # type: ignore[no-untyped-def]
    """Each configuration: the Q barrier is declared in the bytes of the slot K stage 0 starts with, and the
    kernel (its stages refilled: five tiles over at most four stages) checks safe."""
    code, text = _run("extract", DATA / f"fused_attention_s{stages}.ptx", capsys)
    assert code == 0, text
    decl = [line for line in text.splitlines() if line.lstrip().startswith("mbarrier mb0")]
    assert decl and " in s" in decl[0] and "data before its init, after its inval" in decl[0]
    assert text.count("inval mb0;") == 1
    code, text = _run("check", DATA / f"fused_attention_s{stages}.ptx", capsys)
    assert code == 0 and "1 file: 1 safe" in text, text


def test_without_the_inval_the_k_load_lands_on_a_live_barrier(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Triton Gluon #10657's bug in this kernel: the barrier's bytes reused without `mbarrier.inval` (one PTX
    line deleted). The first K load writes the live barrier: SV408 at the load, `k = desc_k.load(...)`."""
    src = (DATA / "fused_attention_s3.ptx").read_text()
    assert src.count(INVAL) == 1
    ptx = tmp_path / "fused_attention_s3.ptx"
    ptx.write_text(src.replace(INVAL, "\n"))
    code, text = _run("check", ptx, capsys)
    assert code == 1
    assert "06-fused-attention.py:114:13: SV408 tma.load write" in text and "fused_attention_s3.ptx:188:2" in text
    assert "SV409" not in text


def test_without_the_q_wait_the_barrier_is_invalidated_under_its_copy(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The wait for the Q load deleted (its try_wait loop): the inval runs while the Q copy may still complete
    on the barrier (SV409 at the inval), and the first QK^T wgmma reads Q unordered with the copy (SV301)."""
    src = (DATA / "fused_attention_s3.ptx").read_text()
    assert src.count(Q_WAIT) == 1
    ptx = tmp_path / "fused_attention_s3.ptx"
    ptx.write_text(src.replace(Q_WAIT, "\n\n"))
    code, text = _run("check", ptx, capsys)
    assert code == 1
    assert "06-fused-attention.py:307:9: SV409 inval of mb0 while arrivals may still come" in text
    assert "fused_attention_s3.ptx:129:2" in text and "SV408" not in text
