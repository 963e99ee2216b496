"""Tensor copies (`cp.async.bulk.tensor`): their byte count is the box of their tensor map, which only the
host knows; it is given per tensor map (`--tensor-bytes PARAM[OFF]=N`), never taken from the paired
expect_tx, so a disagreement between the two is found by the check. Also the PTX forms the CUTLASS
kernels need besides: float comparisons of bound values, packed `mov`, and `stmatrix`/`ldmatrix`."""

from __future__ import annotations

import argparse

import pytest

from syncverify.cli import main
from syncverify.cli.extract import _tensor_bytes
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import PtxError, parse_ptx
from syncverify.ptx.values import UNKNOWN, compute, float_imm_bits

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _tma_kernel(expect: int, copy: str = "") -> str:
    """One warp: init a barrier, arrive.expect_tx EXPECT bytes, one tensor load through the tensor map at
    byte 128 of the by-value parameter (CUTLASS's Params), spin on the barrier, read the tile."""
    copy = copy or ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                    "[%r2], [%rd2, {%r1, %r1}], [%r3];")
    return HEAD + f""".visible .entry k(.param .align 64 .b8 k_param_0[256])
{{
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .reg .pred %p<4>;
  .shared .align 1024 .b8 tile[16];
  .shared .align 8 .b8 bar[8];
  mov.u32 %r1, 0;
  mov.u32 %r2, tile;
  mov.u32 %r3, bar;
  mov.b64 %rd1, k_param_0;
  add.s64 %rd2, %rd1, 128;
  cvta.param.u64 %rd2, %rd2;
  elect.sync %r4|%p1, -1;
  @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], {expect};
  @%p1 {copy}
LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;
  @!%p2 bra LAB_WAIT;
  ld.shared.v4.u32 {{%r5, %r6, %r7, %r8}}, [%r2];
  ret;
}}
"""


def _launch(**tensor_bytes: int) -> Launch:
    return Launch(block=(32, 1, 1), tensor_bytes={(k.split("_")[0], int(k.split("_")[1])): v
                                                  for k, v in tensor_bytes.items()})


def test_tensor_load_moves_the_bytes_given_for_its_tensor_map():
    mod = parse_ptx(_tma_kernel(16), "t.ptx")
    text = extract(mod, Launch(block=(32, 1, 1), tensor_bytes={("0", 128): 16})).text
    assert "arrive.expect_tx mb0 bytes 16;" in text and "tma.load s0 bytes 16 -> mb0;" in text
    assert "; tensor-map boxes 0[128]=16." in text  # the header records the boxes the protocol assumes
    # by the parameter's PTX name as well as by its position
    by_name = extract(mod, Launch(block=(32, 1, 1), tensor_bytes={("k_param_0", 128): 16})).text
    assert by_name.splitlines()[2:] == text.splitlines()[2:] and "boxes k_param_0[128]=16." in by_name


def test_tensor_load_without_its_bytes_is_refused_naming_the_map():
    mod = parse_ptx(_tma_kernel(16), "t.ptx")
    for given in ({}, {("0", 0): 16}):  # nothing, or another tensor map of the same parameter
        with pytest.raises(PtxError) as err:
            extract(mod, Launch(block=(32, 1, 1), tensor_bytes=given))
        assert "--tensor-bytes '0[128]=BYTES'" in err.value.message and err.value.line == 22


def test_tensor_map_that_is_not_a_by_value_parameter_is_refused():
    copy = ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%r2], [%rd3, {%r1, %r1}], [%r3];")
    text = _tma_kernel(16, copy).replace("  mov.u32 %r1, 0;", "  mov.u32 %r1, 0;\n  ld.param.u64 %rd3, [k_param_0];")
    with pytest.raises(PtxError) as err:
        extract(parse_ptx(text, "t.ptx"), Launch(block=(32, 1, 1), tensor_bytes={("0", 128): 16}))
    assert "not a kernel parameter passed by value" in err.value.message


def test_im2col_tensor_copies_are_refused():
    copy = ("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
            "[%r2], [%rd2, {%r1, %r1, %r1}], [%r3], {%rs1};")
    with pytest.raises(PtxError) as err:
        extract(parse_ptx(_tma_kernel(16, copy).replace(".reg .pred", ".reg .b16 %rs<2>;\n  .reg .pred"),
                          "t.ptx"), Launch(block=(32, 1, 1), tensor_bytes={("0", 128): 16}))
    assert "only tile-mode tensor copies" in err.value.message


def test_expect_tx_and_box_that_disagree_are_found(tmp_path, capsys):
    """CUTLASS's expect_tx is a constant of the collective; the box is the tensor map's. The check must
    say when they differ -- here the copy brings half of what the barrier waits for: it never completes."""
    ptx = tmp_path / "t.ptx"
    ptx.write_text(_tma_kernel(16))
    args = ["check", str(ptx), "--block", "32"]
    assert main([*args, "--tensor-bytes", "0[128]=16"]) == 0
    ptx.write_text(_tma_kernel(32))  # expect_tx of two boxes, one copy
    assert main([*args, "--tensor-bytes", "0[128]=16"]) == 1
    got = capsys.readouterr()
    out = got.out + got.err
    # (the barrier by the name of its `.shared` variable, `bar`)
    assert "SV503 `bar` expects 32 bytes per phase but the copies that signal it complete 16" in out


def test_multicast_tensor_load_and_tensor_store():
    load = ("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
            ".L2::cache_hint [%r2], [%rd2, {%r1, %r1, %r1}], [%r3], %rs1, %rd3;")
    text = _tma_kernel(16, load).replace(".reg .pred", ".reg .b16 %rs<2>;\n  .reg .pred")
    text = text.replace("  mov.u32 %r1, 0;", "  mov.u32 %r1, 0;\n  mov.u16 %rs1, 1;\n  mov.u64 %rd3, 0;")
    out = extract(parse_ptx(text, "t.ptx"), Launch(block=(32, 1, 1), tensor_bytes={("0", 128): 16})).text
    assert "tma.load s0 bytes 16 -> mb0 multicast 0x1;" in out
    store = text.replace("  ret;", "  fence.proxy.async.shared::cta;\n"
                         "  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd2, {%r1, %r1}], [%r2];\n"
                         "  @%p1 cp.async.bulk.commit_group;\n  @%p1 cp.async.bulk.wait_group.read 0;\n  ret;")
    # the box it loads is the box it stores through the same map: one CTA (--grid 1), else every other CTA's
    # store may write what this one loads (threads communicating through global memory, refused)
    out = extract(parse_ptx(store, "t.ptx"), Launch(block=(32, 1, 1), grid=(1, 1, 1),
                                                     tensor_bytes={("0", 128): 16})).text
    assert "tma.store s0 bytes 16;" in out
    with pytest.raises(PtxError, match="threads communicate through global memory"):
        extract(parse_ptx(store, "t.ptx"), Launch(block=(32, 1, 1), tensor_bytes={("0", 128): 16}))


def test_tensor_bytes_option():
    assert _tensor_bytes("0[128]=16384") == (("0", 128), 16384)
    assert _tensor_bytes("k_param_0=0x100") == (("k_param_0", 0), 256)
    for bad in ("0[128]", "0[x]=4", "0[4]=0", "0[1:2]=4"):
        with pytest.raises(argparse.ArgumentTypeError):
            _tensor_bytes(bad)


# ---- values CUTLASS's control flow needs ------------------------------------------------------------

def test_float_comparisons_of_known_values():
    one, zero, nan = 0x3F800000, 0, 0x7FC00000
    assert float_imm_bits("0f3F800000") == one and float_imm_bits("1.0") is UNKNOWN
    assert compute("setp", ("eq", "f32"), [zero, zero]) == 1
    assert compute("setp", ("ne", "f32"), [one, zero]) == 1
    assert compute("setp", ("lt", "f32"), [one, zero]) == 0
    assert compute("setp", ("ne", "f32"), [nan, zero]) == 0      # ordered: false with a NaN
    assert compute("setp", ("neu", "f32"), [nan, zero]) == 1     # unordered: true with a NaN
    assert compute("setp", ("nan", "f32"), [nan, zero]) == 1
    assert compute("setp", ("eq", "f32"), [0x80000000, zero]) == 1  # -0 == +0
    assert compute("setp", ("eq", "f16"), [0, 0]) is UNKNOWN    # half precision is left unknown


def test_beta_decides_whether_the_epilogue_loads_c():
    """`if (beta != 0) bar.sync 0;` with beta a float field of the Params: bound, it decides the branch."""
    body = ("  ld.param.f32 %f1, [k_param_0+4];\n  setp.neu.f32 %p1, %f1, 0f00000000;\n  @!%p1 bra $L__BB0_2;\n"
            "  bar.sync 0;\n$L__BB0_2:\n  ret;\n")
    mod = parse_ptx(HEAD + ".visible .entry k(.param .align 8 .b8 k_param_0[8])\n{\n  .reg .f32 %f<2>;\n"
                    "  .reg .pred %p<2>;\n" + body + "}\n", "t.ptx")

    def text(beta: bytes) -> str:
        return extract(mod, Launch(block=(32, 1, 1), params={"0": ParamBytes(((4, beta),))})).text

    assert "syncthreads;" in text(bytes.fromhex("0000803f")) and "syncthreads;" not in text(bytes(4))
    with pytest.raises(PtxError):
        extract(mod, Launch(block=(32, 1, 1)))


def test_packed_mov_builds_a_wgmma_descriptor():
    body = ("  mov.u32 %r1, 64;\n  mov.u32 %r2, 0x40000040;\n  mov.b64 %rd1, {%r1, %r2};\n"
            "  mov.b64 {%r3, %r4}, %rd1;\n  setp.eq.u32 %p1, %r4, 0x40000040;\n  @!%p1 bra $L__BB0_2;\n"
            "  bar.sync 0;\n$L__BB0_2:\n  ret;\n")
    mod = parse_ptx(HEAD + ".visible .entry k()\n{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;\n  .reg .pred %p<4>;\n"
                    + body + "}\n", "t.ptx")
    assert "syncthreads;" in extract(mod, Launch(block=(32, 1, 1))).text


def test_stmatrix_and_ldmatrix_are_shared_memory_accesses():
    """The epilogue writes its tile with stmatrix before the TMA store reads it: an access the skeleton
    must have (left out, a race between the two could not be found)."""
    body = ("  .shared .align 128 .b8 buf[1024];\n  mov.u32 %r1, buf;\n  mov.u32 %r2, %laneid;\n"
            "  shl.b32 %r3, %r2, 4;\n  add.s32 %r4, %r1, %r3;\n"
            "  stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%r4], {%r1, %r1, %r1, %r1};\n"
            "  bar.sync 0;\n"
            "  ldmatrix.sync.aligned.x2.m8n8.shared.b16 {%r5, %r6}, [%r4];\n  ret;\n")
    mod = parse_ptx(HEAD + ".visible .entry k()\n{\n  .reg .b32 %r<8>;\n" + body + "}\n", "t.ptx")
    text = extract(mod, Launch(block=(64, 1, 1))).text
    # x4: 32 rows of 16 bytes (512); x2: the rows of the first 16 lanes only (256)
    assert "smem s0[2] bytes 256;" in text
    assert "for k0 in 0..2 {\n      write s0[k0];" in text and "syncthreads;" in text
    assert text.rstrip().endswith("read s0[0];                                 // ptx:14\n  }\n}")
    unknown = body.replace("  mov.u32 %r2, %laneid;", "  ld.shared.u32 %r2, [%r1];")
    with pytest.raises(PtxError) as err:
        extract(parse_ptx(HEAD + ".visible .entry k()\n{\n  .reg .b32 %r<8>;\n" + unknown + "}\n", "t.ptx"),
                Launch(block=(32, 1, 1)))
    assert "matrix" in err.value.message


def test_k_major_swizzled_wgmma_operand_stays_in_its_atoms():
    """CUTLASS steps K inside a 128-byte swizzled row by moving the descriptor's start (+32, +64, +96 bytes);
    a K-major operand then reads only the rows of its atoms, not 96 bytes into the next stage (which would
    race with that stage's TMA load: a false alarm). A K slice that crosses the row (no CUTLASS layout
    does) reads the first chunk of the next row: 16 bytes past the atoms."""
    from syncverify.ptx.wgmma_desc import operand_ranges

    base = 0x20800
    desc = ((base + 96) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)
    ranges = operand_ranges(desc, 128, 2, 16, True)
    assert base <= ranges[0][0] and ranges[-1][1] <= base + 16 * 1024
    assert sum(hi - lo for lo, hi in ranges) == 128 * 32
    crossing = ((base + 112) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)
    assert operand_ranges(crossing, 128, 2, 16, True)[-1][1] == base + 16 * 1024 + 16
