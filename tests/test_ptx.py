"""PTX front end and extraction: parsing real nvcc output, the extracted protocol, its verdict,
findings at the CUDA source line, and refusals with the PTX and source positions."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.lang import load
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import Addr, Name, PtxError, parse_ptx, parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
RING = str(DATA / "ring.ptx")
RING_BUG = str(DATA / "ring_no_empty_wait.ptx")
LAUNCH = ["--block", "64", "--param", "2=4"]


# ---- parsing ----------------------------------------------------------------------------------------

def test_parses_nvcc_output_with_inline_asm_blocks():
    mod = parse_ptx_file(RING)
    (fn,) = mod.entries()
    assert fn.name == "ring"
    assert [p.name for p in fn.params] == ["ring_param_0", "ring_param_1", "ring_param_2"]
    assert fn.directives[".maxntid"] == (64, 1, 1)
    waits = [i for i in fn.body if i.opcode == "mbarrier.try_wait.parity.shared::cta.b64"]
    assert len(waits) >= 2
    # each inlined wait has its own `LAB_WAIT`/`DONE` labels and its own block-local P1
    targets = {fn.labels[i.operands[-1].name] for i in fn.body
               if i.base == "bra" and isinstance(i.operands[-1], Name) and "DONE" in i.operands[-1].name}
    assert len(targets) == len({w.operands[0] for w in waits}) >= 2
    assert all(w.src is not None and w.src.file == "ring.cu" and w.src.inlined_at for w in waits)


def test_operands_and_initializers():
    text = """
.version 8.0
.target sm_90a
.address_size 64
.const .align 4 .b8 table[16] = {1, 0, 0, 0, 2};
.visible .entry k(.param .u64 k_param_0)
{
  .reg .b32 %r<4>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [k_param_0+8];
  st.shared.v4.u32 [%r1+-16], {%r2, %r2, %r2, %r2};
  shfl.sync.idx.b32 %r3|%p1, %r2, 0, 31, -1;
  @!%p1 bra $L__BB0_2;
$L__BB0_2:
  ret;
}
"""
    mod = parse_ptx(text, "t.ptx")
    (fn,) = mod.entries()
    st = fn.body[1]
    assert st.operands[0] == Addr("%r1", -16)
    assert fn.body[3].guard == "%p1" and fn.body[3].guard_neg
    assert fn.labels["$L__BB0_2"] == 4
    (table,) = mod.variables
    assert table.init == bytes([1, 0, 0, 0, 2])  # the initializer as written; the rest is zero


def test_syntax_error_has_position_and_caret(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.visible .entry k()\n{\n  add.s32 %r1, %r2 %r3;\n}\n")
    with pytest.raises(PtxError) as err:
        parse_ptx_file(str(bad))
    assert (err.value.line, err.value.column) == (5, 20)
    assert main(["extract", str(bad), "--block", "32"]) == 2
    out = capsys.readouterr().err
    assert f"{bad}:5:20: error: PTX syntax" in out and "^" in out


def test_syntax_error_names_what_was_expected_in_ptx_words(tmp_path, capsys):
    """The expected tokens are PTX text (`)`, `.param`), never the parser's internal terminal names."""
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.visible .entry k( { ret; }\n")
    assert main(["extract", str(bad), "--block", "32"]) == 2
    out = capsys.readouterr().err
    assert "unexpected `{`; expected one of `)`" in out and "__ANON" not in out and "RPAR" not in out


# ---- extraction -------------------------------------------------------------------------------------

def _refusal(mod, threads: int) -> str:  # type: ignore[no-untyped-def]
    """The message extraction refuses `mod` with, at a block of `threads`."""
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(threads, 1, 1)))
    return err.value.message


def _kernel(params: str, body: str, name: str = "t.ptx"):  # type: ignore[no-untyped-def]
    """A one-kernel module `k(params)` with the given body (registers %r, %rd, %p declared)."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            f".visible .entry k({params})\n{{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;\n  .reg .pred %p<4>;\n"
            f"{body}}}\n")
    return parse_ptx(text, name)


def _extract(path: str, **kw) -> str:  # type: ignore[no-untyped-def]
    launch = Launch(block=(64, 1, 1), params={"2": 4}, **kw)
    return extract(load_module(path), launch).text


def test_ring_extracts_to_a_reviewable_protocol():
    text = _extract(RING)
    protocol = load(text, path="ring.sync")  # valid .sync
    assert protocol is not None
    assert "role w0 = warp 0;" in text and "role w1 = warp 1;" in text
    # the producer's loop (unrolled by nvcc) comes back as a loop, with CUTLASS's producer phase
    assert "for k0 in 0..4 {\n      wait mb0[2 + k0 % 2] parity (k0 / 2 + 1) % 2;" in text
    # the producer's elected lane issues the copy; every consumer lane releases
    assert "elect {\n        arrive.expect_tx mb0[k0 % 2] bytes 1024;" in text
    assert "tma.load s0[k0 % 2] bytes 1024 -> mb0[k0 % 2];" in text
    assert "      wait mb0[k0 % 2] parity (k0 / 2) % 2;" in text and "      arrive mb0[2 + k0 % 2];" in text
    # every statement names its CUDA line and PTX line
    assert "ring.cu:26 (inlined at ring.cu:66), ptx:" in text


def test_loops_mean_exactly_the_statements_they_replace(monkeypatch):
    """The written loops check exactly like the statements extracted one by one."""
    import syncverify.ptx.writer as writer
    from syncverify.check import Options, check_protocol

    def codes(text: str) -> tuple[set[str], str]:
        res = check_protocol(load(text, path="r.sync"), Options(engine="explicit"))
        return {d.code for d in res.diagnostics if d.is_error}, res.verdict.value

    rolled = [_extract(p) for p in (RING, RING_BUG)]
    monkeypatch.setattr(writer, "roll", lambda body, names: list(body))
    flat = [_extract(p) for p in (RING, RING_BUG)]
    assert "for k" not in flat[0] and "for k" in rolled[0]
    assert [codes(t) for t in rolled] == [codes(t) for t in flat] == [
        (set(), "safe"), ({"SV302", "SV303", "SV504"}, "violation")]


def test_loop_formulas():
    from syncverify.ptx.roll import _evaluate, _formulas

    assert _formulas("k0", [0, 1, 0, 1]) == "k0 % 2"
    assert _formulas("k0", [2, 3, 2, 3, 2]) == "2 + k0 % 2"
    assert _formulas("k0", [1, 1, 0, 0, 1, 1]) == "(k0 / 2 + 1) % 2"
    assert _formulas("k0", [0, 0, 1, 1]) == "k0 / 2" and _formulas("k0", [0, 0, 1, 1], parity=True) == "(k0 / 2) % 2"
    assert _formulas("k0", [7, 7, 7]) == "7"
    assert _formulas("k0", [0, 5, 1]) is None  # no form fits: the statements stay as they are
    for seq in ([0, 1, 2, 0, 1, 2], [1, 1, 1, 0, 0, 0, 1], [3, 4, 5, 6]):
        form = _formulas("k0", seq)
        assert form is not None and [_evaluate(form, k) for k in range(len(seq))] == seq


def test_trip_count_comes_from_the_parameter():
    short = extract(load_module(RING), Launch(block=(64, 1, 1), params={"ring_param_2": 2})).text
    assert "    for k0 in 0..2 {\n      wait mb0[2 + k0] parity 1;" in short
    assert "    for k0 in 0..4 {\n      wait mb0[2 + k0 % 2] parity (k0 / 2 + 1) % 2;" in _extract(RING)


def test_unbound_trip_count_is_refused_with_both_lines(capsys):
    assert main(["extract", RING, "--block", "64"]) == 2
    err = capsys.readouterr().err
    assert "ring.ptx:" in err and "a branch is decided by a value that is not known" in err
    assert "CUDA source: ring.cu:" in err


def test_check_ring_is_safe_for_the_launch_it_was_extracted_at(capsys):
    assert main(["check", RING, *LAUNCH]) == 0
    out = capsys.readouterr().out
    assert "safe" in out and "launch block 64x1x1, cluster 1x1x1, 2=4" in out and "all-iterations" not in out


def test_check_seeded_missing_empty_wait_at_the_source_line(capsys):
    assert main(["check", RING_BUG, *LAUNCH, "--format", "json"]) == 1
    import json

    (res,) = json.loads(capsys.readouterr().out)["results"]
    codes = {d["code"] for d in res["diagnostics"]}
    # the same set as specs/cutlass_ws_ring_no_empty_wait.sync, the hand-written protocol of this bug: the race, the
    # overflow, and the early arrive into an unobserved phase as the SV505 warning (the search stops at the race
    # before that phase completes, which would be SV502)
    assert codes == {"SV302", "SV303", "SV504", "SV505"}
    lines = {d["code"]: d["line"] for d in res["diagnostics"]}
    assert lines["SV505"] == lines["SV504"]  # the arrive.expect_tx of the next round
    # at the kernel's call of the inline-asm helper (the line to change), not inside the helper
    assert lines["SV302"] == 70      # ring.cu: bulk_load(tile[s], …), whose cp.async.bulk writes the tile
    assert lines["SV504"] == 69      # ring.cu: mbar_arrive_expect_tx(&full[s], BYTES)
    assert main(["check", RING_BUG, *LAUNCH]) == 1
    out = capsys.readouterr().out
    assert "ring.cu:70:9: SV302 WAR race" in out
    assert "ring.cu:39:23: inside the inline-asm helper" in out
    assert "ring_no_empty_wait.ptx:" in out and "PTX instruction" in out


def test_fail_fast_ends_a_kernel_check_at_its_first_error(capsys):  # type: ignore[no-untyped-def]
    """--fail-fast on a PTX input ends the search at the first error, as on a protocol file (it used
    to be passed to the report only, and the search went on to the end of its budget)."""
    import json

    assert main(["check", RING_BUG, *LAUNCH, "--format", "json"]) == 1
    (whole,) = json.loads(capsys.readouterr().out)["results"]
    assert main(["check", RING_BUG, *LAUNCH, "--format", "json", "--fail-fast"]) == 1
    (first,) = json.loads(capsys.readouterr().out)["results"]
    errors = [d for d in first["diagnostics"] if d["severity"] == "error"]
    assert len(errors) == 1 and errors[0]["code"] in {"SV302", "SV303", "SV502", "SV504"}
    assert first["stats"]["states"] < whole["stats"]["states"]


@pytest.mark.parametrize(("ptx", "codes", "line"), [
    ("ring_no_full_wait.ptx", {"SV201", "SV301", "SV502"}, {"SV301": 70}),   # consumer_wait skipped
    ("ring_empty_count_16.ptx", {"SV504"}, {"SV504": 82}),                   # wrong arrival count: the arrive
])
def test_seeded_ring_bugs_at_their_source_lines(ptx, codes, line, capsys):
    import json

    assert main(["check", str(DATA / ptx), *LAUNCH, "--format", "json"]) == 1
    (res,) = json.loads(capsys.readouterr().out)["results"]
    assert {d["code"] for d in res["diagnostics"] if d["severity"] == "error"} == codes
    for code, ln in line.items():
        assert {d["line"] for d in res["diagnostics"] if d["code"] == code} == {ln}


def test_unknown_branch_without_synchronization_is_skipped_and_with_it_refused():
    head = """  ld.param.u64 %rd1, [k_param_0];
  ld.global.u32 %r1, [%rd1];
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L__BB0_2;
"""
    tail = """$L__BB0_2:
  bar.sync 0;
  ret;
"""
    # the store goes to another buffer: every lane storing to the word all lanes read would be threads
    # communicating through global memory, refused (tests/test_soundness_global_comm.py)
    quiet = _kernel(".param .u64 k_param_0, .param .u64 k_param_1", head + "  ld.param.u64 %rd2, [k_param_1];\n"
                    "  add.s32 %r2, %r1, 1;\n  st.global.u32 [%rd2], %r2;\n" + tail)
    text = extract(quiet, Launch(block=(32, 1, 1))).text
    assert "syncthreads;" in text
    loud = _kernel(".param .u64 k_param_0", head + "  bar.sync 1, 32;\n" + tail)
    with pytest.raises(PtxError) as err:
        extract(loud, Launch(block=(32, 1, 1)))
    assert err.value.line == 12 and "bar.sync" in err.value.message


def test_unmodelled_synchronization_is_refused():
    mod = _kernel("", "  mov.u32 %r1, 0;\n  cp.async.commit_group;\n  ret;\n")
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(32, 1, 1)))
    assert err.value.line == 10 and "not modelled" in err.value.message


def test_missing_nvcc_is_a_clear_error(monkeypatch, capsys, tmp_path):
    import syncverify.ptx.extract as ex

    monkeypatch.setattr(ex, "find_nvcc", lambda: None)
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    assert main(["extract", str(src), "--block", "32"]) == 2
    assert "nvcc was not found" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_check_a_cu_file_compiles_it(capsys):
    assert main(["check", str(DATA / "ring.cu"), *LAUNCH]) == 0
    assert "safe" in capsys.readouterr().out


def test_wgmma_descriptor_footprint_covers_the_operand():
    """The operand's bytes, decoded exactly (ptx/wgmma_desc.py; every layout CUTLASS builds is checked in
    tests/test_soundness_wgmma_desc.py)."""
    from syncverify.ptx.wgmma_desc import operand_ranges

    # no swizzle, K-major 64 x 32 bytes: 8 row groups 256 bytes apart, 2 core matrices 128 bytes apart
    desc = (0x880 >> 4) | ((128 >> 4) << 16) | ((256 >> 4) << 32)
    assert operand_ranges(desc, 64, 2, 16, True) == ((0x880, 0x880 + 2048),)
    # 128-byte swizzle: 32 bytes of each of the 64 rows, permuted within the row, in the atoms from 0x1000
    desc = (0x1020 >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)
    ranges = operand_ranges(desc, 64, 2, 16, True)
    assert sum(hi - lo for lo, hi in ranges) == 64 * 32
    assert 0x1000 <= ranges[0][0] and ranges[-1][1] <= 0x1000 + 8 * 1024


# ---- round trip over kernels/ -----------------------------------------------------------------------

ROUND_TRIP = ["peer_init_race", "peer_init_fixed", "tma_store_no_fence", "tma_store_epilogue",
              "nvfuser_cb_no_war_wait", "tilelang_bar_h_deadlock",
              # the clearing prologue's stores released to the peer CTA (was SV303), cleared by one warp
              # (was a split warpgroup, SV206, and 12 slots per stage)
              "cluster_multicast_ring", "wgmma_release_after_wait", "wgmma_release_before_wait",
              # the clearing prologue's stores, published by its cluster barrier (release/acquire), are not
              # data that the consumers' .cta-scope remote arrives carry to the peer (was SV602)
              "cluster_multicast_ring_cta_scope"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", ROUND_TRIP)
def test_emitted_kernel_round_trip_gives_its_specs_codes(name, tmp_path):
    """kernels/NAME.cu, compiled, extracted and checked, reports exactly its spec's error codes."""
    import json

    from syncverify.check import Options, check_protocol
    from syncverify.lang.load import parse_expect, read_source
    from syncverify.ptx.extract import compile_cu

    root = Path(__file__).resolve().parent.parent
    meta = json.loads((root / "kernels" / f"{name}.json").read_text())
    spec = str(root / meta["spec"])
    expect = parse_expect(read_source(spec), spec)
    ptx = compile_cu(str(root / "kernels" / f"{name}.cu"), out_dir=str(tmp_path))
    launch = Launch(block=(meta["block"], 1, 1), cluster=(meta["cluster"], 1, 1),
                    params={"sv_kernel_param_7": 0, "sv_kernel_param_5": WATCHDOG_OFF},
                    zero_global=("sv_kernel_param_1",))
    text = extract(load_module(ptx), launch, "sv_kernel").text
    res = check_protocol(load(text, path=f"{name}.sync"), Options(timeout=120))
    assert res.verdict.value != "inconclusive"
    # the root causes named after the search (SV506-SV508) depend on how the protocol is written
    # (an extracted kernel has a role per warp): the findings themselves must be the spec's
    got = {d.code for d in res.diagnostics if d.is_error}
    assert got - ROOT_CAUSES == set(expect.errors) - ROOT_CAUSES
    assert not got & ROOT_CAUSES or got - ROOT_CAUSES  # a cause is only ever named beside its symptom


ROOT_CAUSES = frozenset({"SV506", "SV507", "SV508"})
# An emitted kernel's waits give up when the watchdog (parameter 5, nanoseconds) fires: with a finite one
# each wait is a probe (extracted with its give-up path, docs/extract.md "Probes"). Extracted at the largest
# value, the watchdog never fires (`now - t0 > 2^64 - 1` is false for every time) and each wait is the spin
# it stands for.
WATCHDOG_OFF = 2**64 - 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_clearing_prologue_ordered_only_by_a_relaxed_cluster_arrive_is_a_race(tmp_path):
    """The twin of the cluster_multicast_ring round trip: the same kernel with its prologue ending in
    __syncthreads() (as it was emitted before) leaves the clearing stores ordered before the peer CTA's
    multicast copy only by the protocol's barrier.cluster.arrive.relaxed, which orders no earlier access."""
    import json

    from syncverify.check import Options, check_protocol
    from syncverify.codegen import ptx as cg
    from syncverify.ptx.extract import compile_cu

    root = Path(__file__).resolve().parent.parent
    meta = json.loads((root / "kernels" / "cluster_multicast_ring.json").read_text())
    src = (root / "kernels" / "cluster_multicast_ring.cu").read_text()
    released = (f'  asm volatile("{cg.CLUSTER_ARRIVE}" ::: "memory");  // .release: the peers\' copies come after\n'
                f'  asm volatile("{cg.CLUSTER_WAIT}" ::: "memory");\n  // ---- the protocol body')
    assert src.count(released) == 1
    cu = tmp_path / "unreleased.cu"
    cu.write_text(src.replace(released, "  __syncthreads();\n  // ---- the protocol body"))
    ptx = compile_cu(str(cu), out_dir=str(tmp_path))
    launch = Launch(block=(meta["block"], 1, 1), cluster=(meta["cluster"], 1, 1),
                    params={"sv_kernel_param_7": 0, "sv_kernel_param_5": WATCHDOG_OFF},
                    zero_global=("sv_kernel_param_1",))
    res = check_protocol(load(extract(load_module(ptx), launch, "sv_kernel").text, path="u.sync"),
                         Options(timeout=120))
    assert {d.code for d in res.diagnostics if d.is_error} == {"SV303"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_emitted_kernel_needs_its_control_block_declared(tmp_path):
    """Without --zero-global the abort flag the harness polls is unknown and decides an arrive: refused."""
    from syncverify.ptx.extract import compile_cu

    root = Path(__file__).resolve().parent.parent
    ptx = compile_cu(str(root / "kernels" / "peer_init_fixed.cu"), out_dir=str(tmp_path))
    with pytest.raises(PtxError) as err:
        extract(load_module(ptx), Launch(block=(32, 1, 1), cluster=(2, 1, 1)), "sv_kernel")
    assert "not known" in err.value.message and "peer_init_fixed.cu" in err.value.note


def test_grid_clusters_that_differ_are_refused_and_alike_ones_accepted():
    """A CTA past the problem edge exits early: its cluster synchronizes differently."""
    mod = _kernel(".param .u32 k_param_0", """  ld.param.u32 %r1, [k_param_0];
  mov.u32 %r2, %ctaid.x;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra $L__BB0_2;
  bar.sync 0;
$L__BB0_2:
  ret;
""")
    ok = extract(mod, Launch(block=(32, 1, 1), grid=(4, 1, 1), params={"0": 4})).text
    assert "all 4 clusters of the grid synchronize like this one" in ok
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(32, 1, 1), grid=(4, 1, 1), params={"0": 3}))
    assert "cluster 3 of the grid synchronizes differently" in err.value.message


def test_cutlass_gemm_ptx_parses_and_extraction_asks_for_the_params(tmp_path):
    """The real CUTLASS kernel: every line parses; the persistent tile scheduler's loop depends on the
    problem shape in the kernel's Params, so without them extraction stops there and says where."""
    import gzip

    ptx = tmp_path / "sm90_gemm_coop_2x1.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm90_gemm_coop_2x1.ptx.gz").read_bytes()))
    mod = parse_ptx_file(str(ptx))
    (fn,) = mod.entries()
    assert fn.params[0].size == 1792 and fn.directives[".maxntid"] == (384, 1, 1)
    ops = {i.opcode for i in fn.body}
    assert {"elect.sync", "mbarrier.try_wait.parity.shared::cta.b64", "wgmma.commit_group.sync.aligned",
            "fence.mbarrier_init.release.cluster", "barrier.cluster.arrive.relaxed.aligned"} <= ops
    assert any(o.startswith("cp.async.bulk.tensor.3d") and "multicast::cluster" in o for o in ops)
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(384, 1, 1), cluster=(2, 1, 1)))
    assert "not known" in err.value.message
    assert "sm90_gemm_tma_warpspecialized_cooperative.hpp:591" in err.value.note  # while (work_tile_info.is_valid())


def test_cutlass_gemm_with_its_scheduler_fields_runs_to_the_first_tensor_copy(tmp_path):
    """With the Params fields CUTLASS's host code computes without a driver (sm90_gemm_coop_2x1_fields.cu:
    mode, problem shape, hardware info, tile scheduler, the mainloop's transaction bytes), the producer
    gets past the tile loop (:591) and its expect_tx, and stops at the first tensor copy, whose byte count
    is in the tensor map. Without the scheduler's bytes it stops at :591 as before."""
    import gzip

    ptx = tmp_path / "sm90_gemm_coop_2x1.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm90_gemm_coop_2x1.ptx.gz").read_bytes()))
    mod = parse_ptx_file(str(ptx))
    blob = (DATA / "sm90_gemm_coop_2x1_fields_256x128x128.bin").read_bytes()
    fields = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12)]

    def launch(parts):  # type: ignore[no-untyped-def]
        return Launch(block=(384, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=231424,
                      params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in parts))})

    with pytest.raises(PtxError) as err:
        extract(mod, launch(fields))
    assert "tensor map" in err.value.message and "copy_sm90_tma.hpp:185" in err.value.note
    with pytest.raises(PtxError) as err:
        extract(mod, launch([f for f in fields if f[0] != 1576]))  # the tile scheduler left unbound
    assert "sm90_gemm_tma_warpspecialized_cooperative.hpp:591" in err.value.note


def test_a_parameter_read_through_its_address_is_known():
    """nvcc takes a by-value struct's address (`mov.b64 %rd, PARAM`) and loads fields through it, also as
    vectors; a bound field read that way is known, an unbound one is not."""
    body = ("  mov.b64 %rd1, k_param_0;\n  add.s64 %rd2, %rd1, 8;\n  ld.param.v2.u32 {%r1, %r2}, [%rd2];\n"
            "  mov.u32 %r3, %ctaid.x;\n  setp.le.u32 %p1, %r2, %r3;\n  @%p1 bra $L__BB0_2;\n  bar.sync 0;\n"
            "$L__BB0_2:\n  ret;\n")
    mod = _kernel(".param .align 8 .b8 k_param_0[16]", body)
    one = ParamBytes(((12, b"\1\0\0\0"),))
    assert "syncthreads;" in extract(mod, Launch(block=(32, 1, 1), params={"0": one})).text
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(32, 1, 1), params={"0": ParamBytes(((8, b"\1\0\0\0"),))}))
    assert "not known" in err.value.message


def test_tensor_copy_parses_and_is_refused_for_its_byte_count():
    mod = _kernel(".param .u64 k_param_0", """  ld.param.u64 %rd1, [k_param_0];
  mov.u32 %r1, 0;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1+128], [%rd1, {%r1, %r1}], [%r1];
  ret;
""")
    with pytest.raises(PtxError) as err:
        extract(mod, Launch(block=(32, 1, 1)))
    assert err.value.line == 12 and "tensor map" in err.value.message


def test_diverged_lanes_reconverge_before_a_barrier_and_a_partial_barrier_is_refused():
    branchy = """  mov.u32 %r1, %laneid;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra $L__BB0_2;
  mov.u32 %r2, 2;
  bra.uni $L__BB0_3;
$L__BB0_2:
  mov.u32 %r2, 1;
$L__BB0_3:
  BARRIER
  ret;
"""
    whole = _kernel("", branchy.replace("BARRIER", "bar.sync 0;"))
    assert "syncthreads;" in extract(whole, Launch(block=(64, 1, 1))).text
    half = _kernel("", branchy.replace("$L__BB0_3:\n  BARRIER", "  bar.sync 0;\n$L__BB0_3:"))
    assert "16 of the warp's lanes" in _refusal(half, 64)


def test_shfl_broadcast_makes_a_lane_value_warp_uniform():
    """CUTLASS's canonical_warp_idx: a value broadcast from lane 0 decides a branch for the whole warp."""
    body = """  mov.u32 %r1, %tid.x;
  SHFL
  setp.ne.s32 %p1, %r2, 32;
  @%p1 bra $L__BB0_2;
  bar.sync 1, 32;
$L__BB0_2:
  ret;
"""
    shfl = _kernel("", body.replace("SHFL", "shfl.sync.idx.b32 %r2|%p2, %r1, 0, 31, -1;"))
    text = extract(shfl, Launch(block=(64, 1, 1))).text
    assert "role w1 = warp 1;" in text and "bar.sync 1, 32;" in text and "role w0" not in text
    # without the broadcast only thread 32 (lane 0 of warp 1) takes the branch: a one-lane barrier
    lanes = _kernel("", body.replace("SHFL", "mov.u32 %r2, %r1;"))
    assert "1 of the warp's lanes" in _refusal(lanes, 64)


def test_elected_lane_from_elect_sync_and_a_single_lane_barrier_refused():
    body = """  elect.sync %r1|%p1, -1;
  @!%p1 bra $L__BB0_2;
  OP
$L__BB0_2:
  ret;
"""
    arrive = _kernel("", body.replace("OP", "mov.u32 %r2, 0;\n  mbarrier.init.shared::cta.b64 [%r2], 1;"))
    assert "elect {\n      init mb0 count 1;" in extract(arrive, Launch(block=(32, 1, 1))).text
    bar = _kernel("", body.replace("OP", "bar.sync 0;"))
    assert "1 of the warp's lanes" in _refusal(bar, 32)


def test_arrive_qualifiers_are_kept():
    """A relaxed arrive publishes nothing: writing it as the default release would hide races."""
    mod = _kernel("", """  mov.u32 %r1, 0;
  elect.sync %r3|%p1, -1;
  @!%p1 bra $L__BB0_2;
  mbarrier.init.shared::cta.b64 [%r1], 2;
  mbarrier.arrive.expect_tx.relaxed.cluster.shared::cta.b64 _, [%r1], 16;
  mbarrier.arrive.release.cluster.shared::cta.b64 _, [%r1];
  mbarrier.arrive.shared::cta.b64 _, [%r1];
$L__BB0_2:
  ret;
""")
    text = extract(mod, Launch(block=(32, 1, 1))).text
    assert "arrive.expect_tx.relaxed.cluster mb0 bytes 16;" in text
    assert "arrive.release.cluster mb0;" in text and "      arrive mb0;" in text
    load(text, path="q.sync")


@pytest.mark.parametrize(("false_path", "blocking"), [
    ("  @!%p1 bra $L__BB0_1;\n", True),                                                      # the spin loop
    ("  @%p1 bra $L__BB0_2;\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
     "  @!%p1 bra $L__BB0_1;\n", True),                                                     # try, then wait
    ("  @%p1 bra $L__BB0_2;\n  add.s32 %r2, %r2, 1;\n", None),                                # a probe: goes on
    ("  @%p1 bra $L__BB0_2;\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 1;\n"
     "  @!%p1 bra $L__BB0_1;\n", False),                                                    # re-tests another phase
])
def test_try_wait_is_read_as_a_wait_only_in_a_spin(false_path, blocking):
    """A spin is a wait; a try_wait that goes on is a probe (docs/extract.md, "Probes"); one that tests
    another phase in turn until one passes is a wait for either phase, which is refused."""
    mod = _kernel("", "  mov.u32 %r1, 0;\n$L__BB0_1:\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
                  + false_path + "$L__BB0_2:\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n")
    if blocking:
        text = extract(mod, Launch(block=(32, 1, 1))).text
        assert re.search(r"\n    wait mb0 parity 0; .*\n    read s0; ", text)
    elif blocking is None:
        text = extract(mod, Launch(block=(32, 1, 1))).text
        assert re.search(r"\n    if try_wait mb0 parity 0 \{ .*\n    \} .*\n    read s0; ", text), text
    else:
        assert "comes back to it in the same state through other probes" in _refusal(mod, 32)


def test_unaligned_barrier_keeps_its_form():
    """`barrier.sync` without .aligned may be reached from different sites; `bar.sync` is the aligned form."""
    mod = _kernel("", "  barrier.sync 1, 32;\n  barrier.sync.aligned 2, 32;\n  bar.sync 0;\n  ret;\n")
    text = extract(mod, Launch(block=(32, 1, 1))).text
    assert re.search(r"\n    barrier.sync 1, 32; .*\n    bar.sync 2, 32; .*\n    syncthreads; ", text)
    load(text, path="b.sync")


# ---- fields of a by-value struct parameter ----------------------------------------------------------


# `if (params.tiles > blockIdx.x) __syncthreads();` with `tiles` at byte 8 of a 16-byte struct
STRUCT_FIELD = ("  ld.param.u32 %r1, [k_param_0+8];\n  mov.u32 %r2, %ctaid.x;\n  setp.le.u32 %p1, %r1, %r2;\n"
                "  @%p1 bra $L__BB0_2;\n  bar.sync 0;\n$L__BB0_2:\n  ret;\n")


def _struct_kernel():  # type: ignore[no-untyped-def]
    return _kernel(".param .align 8 .b8 k_param_0[16]", STRUCT_FIELD)


def test_a_bound_struct_field_decides_the_branch():
    text = extract(_struct_kernel(), Launch(block=(32, 1, 1), params={"0": ParamBytes(((8, b"\1\0\0\0"),))})).text
    assert "syncthreads;" in text
    text = extract(_struct_kernel(), Launch(block=(32, 1, 1), params={"0": ParamBytes(((8, b"\0\0\0\0"),))})).text
    assert "syncthreads;" not in text


@pytest.mark.parametrize("bound", [
    ParamBytes(((0, bytes(8)), (10, bytes(6)))),  # every byte but 8..9: the field is partly unbound
    bytes(8),                                      # a file shorter than the struct binds only its bytes
], ids=["partly-bound-field", "short-file"])
def test_an_unbound_struct_field_deciding_a_barrier_is_refused(bound):
    with pytest.raises(PtxError) as err:
        extract(_struct_kernel(), Launch(block=(32, 1, 1), params={"0": bound}))
    assert "not known" in err.value.message


def test_cli_binds_struct_fields_by_offset(tmp_path):
    """--param NAME[OFFSET:LENGTH]=VALUE|@FILE; the parts of one parameter are merged."""
    import argparse

    from syncverify.cli.extract import _param
    from syncverify.cli.kernel import _bind

    blob = tmp_path / "params.bin"
    blob.write_bytes(bytes(range(16)))
    got = _bind([_param("0[8:4]=@" + str(blob)), _param("0[0:2]=0x102")])
    assert got == {"0": ParamBytes(((8, bytes([8, 9, 10, 11])), (0, b"\2\1")))}
    for bad in ("0[8:4]=300000000000", "0[12:8]=@" + str(blob), "0[x]=1", "0[-1:2]=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            _param(bad)


def test_a_text_parsed_again_is_the_same_module_under_its_own_path(tmp_path: Path) -> None:
    """parse_ptx keeps the modules of the last texts it parsed (a kernel's PTX is read by the host program's
    launch, then by extraction, and a CUTLASS sm100 kernel takes seconds): the same text under another path
    is the same module but for its path, and a changed text is parsed afresh."""
    text = Path(RING).read_text()
    first, again = parse_ptx(text, "a.ptx"), parse_ptx(text, "b.ptx")
    assert (first.path, again.path) == ("a.ptx", "b.ptx") and again.functions is first.functions
    changed = parse_ptx(text.replace("mbarrier.try_wait", "mbarrier.try_wait", 1) + "\n// edited\n", "a.ptx")
    assert changed.functions is not first.functions and changed.functions == first.functions
    with pytest.raises(PtxError) as err:  # an error names the path it was read from
        parse_ptx(text + "\n bogus;", "b.ptx")
    assert err.value.path == "b.ptx"
