"""Threads that communicate through global memory are refused, never extracted as if they did not (#31).

Global memory is not modelled: a kernel whose threads read what other threads of it write there (a stream-K
fixup's partials, a buffer one warp stores and another reads after `__syncthreads`) would extract to a protocol
with no trace of it and check safe. Extraction refuses at the read, naming the write; accesses of disjoint bytes
(each CTA its own tile, read-only inputs, one thread reading back its own store) still extract. A load with
acquire semantics of global memory is refused wherever it is (it exists only to synchronize with a release).

The kernels are `tests/data/ptx/soundness/global_comm.cu` and `global_flag.cu`, compiled by `build.sh` there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.export import export_model
from syncverify.export.spin import run_spin, tools_available
from syncverify.lang import load
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx

DATA = Path(__file__).parent / "data" / "ptx" / "soundness"
COMM = str(DATA / "global_comm.ptx")
FLAGS = str(DATA / "global_flag.ptx")
ENGINES = ["explicit", "z3", "bmc"]


def _line(cu: str, marker: str) -> int:
    lines = (DATA / cu).read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
    return n


def _check(ptx: str, kernel: str, block: int, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    rc = main(["check", ptx, "--kernel", kernel, "--block", str(block), *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


# ---- the stream-K fixup -------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_the_fixup_without_its_wait_is_refused_at_the_partials_read(engine, capsys):  # type: ignore[no-untyped-def]
    """CTA 0 reads the partials CTA 1 stores, with no wait: refused at the read, naming the store."""
    rc, out = _check(FLAGS, "stream_k_fixup_no_wait", 128, "--engine", engine, capsys=capsys)
    assert rc == 2, out
    assert re.search(r"global_flag\.ptx:\d+:\d+: error: cannot extract \(warp 0 of CTA 0, lane 0\): threads "
                     r"communicate through global memory \(param 1 \+ offsets\), which the checker does not model "
                     r"yet", out), out
    read = _line("global_flag.cu", "out[threadIdx.x] = mine + partials[threadIdx.x];")
    store = _line("global_flag.cu", "partials[threadIdx.x] = mine;")
    assert f"CUDA source: global_flag.cu:{read} " in out  # refused at the read
    assert re.search(rf"`st\.global\.f32` at PTX line \d+, CUDA global_flag\.cu:{store} ", out), out  # the store
    assert "\tld.global.f32" in out and "^" in out
    assert "safe" not in out.split("error:")[0]


def test_the_fixup_with_its_wait_stays_refused_at_its_spin(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(FLAGS, "stream_k_fixup", 128, capsys=capsys)
    assert rc == 2 and "`ld.global.acquire.gpu.b32` reads a flag in global memory" in out, out
    assert "threads communicate" not in out


def test_with_the_grid_given_the_writer_cta_is_run(capsys):  # type: ignore[no-untyped-def]
    """With --grid 2 the writer CTA is executed (it synchronizes differently, which is refused too, after)."""
    rc, out = _check(FLAGS, "stream_k_fixup_no_wait", 128, "--grid", "2", capsys=capsys)
    assert rc == 2 and "threads communicate through global memory" in out, out
    assert "synchronizes differently" not in out


# ---- disjoint bytes extract ---------------------------------------------------------------------------

@pytest.mark.parametrize("grid", [[], ["--grid", "4"]])
@pytest.mark.parametrize("engine", ENGINES)
def test_each_cta_its_own_tile_from_inputs_is_safe(grid, engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(COMM, "own_tile", 128, "--engine", engine, *grid, capsys=capsys)
    assert rc == 0 and "(own_tile): safe" in out, out


@pytest.mark.skipif(tools_available() is not None, reason="SPIN and a C compiler are needed")
def test_own_tile_is_safe_for_spin(tmp_path):  # type: ignore[no-untyped-def]
    model = export_model(load(extract(load_module(COMM), Launch(block=(128, 1, 1)), "own_tile").text,
                              path="k.sync"))
    out = run_spin(model.text, tmp_path / "spin", timeout=120, memlim_mb=1024, depth=model.max_depth)
    assert out.verdict == "safe"


# ---- two warps through a global buffer -----------------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--grid", "1"], ["--grid", "1", "--param", "1=0x100000"]])
@pytest.mark.parametrize("engine", ENGINES)
def test_two_warps_through_a_global_buffer_are_refused(extra, engine, capsys):  # type: ignore[no-untyped-def]
    """Ordered by __syncthreads on the GPU, but global memory is not modelled: refused, addresses known or not."""
    rc, out = _check(COMM, "warps_via_global", 64, "--engine", engine, *extra, capsys=capsys)
    assert rc == 2, out
    assert "cannot extract (warp 1 of CTA 0, lane 0): threads communicate through global memory" in out
    assert f"CUDA source: global_comm.cu:{_line('global_comm.cu', 'out[threadIdx.x] = buf[threadIdx.x - 32]')}" in out
    assert re.search(rf"CUDA global_comm\.cu:{_line('global_comm.cu', 'if (threadIdx.x < 32) buf[')} \(warp 0 of "
                     r"CTA 0, lane 0\)", out), out


@pytest.mark.parametrize("engine", ENGINES)
def test_one_thread_reading_back_its_own_store_is_safe(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(COMM, "one_thread_readback", 64, "--grid", "1", "--engine", engine, capsys=capsys)
    assert rc == 0 and "(one_thread_readback): safe" in out, out


def test_other_ctas_store_to_the_same_word(capsys):  # type: ignore[no-untyped-def]
    """Without --grid the other CTAs exist and thread 0 of each stores buf[0], which thread 0 of this one reads."""
    rc, out = _check(COMM, "one_thread_readback", 64, capsys=capsys)
    assert rc == 2 and "a thread of a cluster not run" in out, out


@pytest.mark.parametrize(("extra", "safe"), [
    (["--grid", "2", "--param", "1=0x100000"], True),   # each thread its own element: the addresses decide
    (["--grid", "2"], False),                           # pointer not bound: same pointer, offsets unknown
    (["--param", "1=0x100000"], False),                 # other CTAs not run and the index reads blockIdx
])
def test_own_elements_are_compared_by_address_when_known(extra, safe, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(COMM, "own_readback", 64, *extra, capsys=capsys)
    if safe:
        assert rc == 0 and "(own_readback): safe" in out, out
    else:
        assert rc == 2 and "threads communicate through global memory" in out, out


# ---- acquire ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_an_acquire_whose_value_decides_nothing_is_refused(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(COMM, "acquire_unused", 64, "--grid", "1", "--engine", engine, capsys=capsys)
    assert rc == 2, out
    assert re.search(r"global_comm\.ptx:\d+:\d+: error: cannot extract: `ld\.global\.acquire\.gpu\.b32` has acquire "
                     r"semantics on memory that is not shared memory", out), out
    assert "\tld.global.acquire.gpu.b32" in out


@pytest.mark.parametrize("engine", ENGINES)
def test_a_relaxed_load_whose_value_decides_nothing_is_data(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(COMM, "relaxed_unused", 64, "--grid", "1", "--engine", engine, capsys=capsys)
    assert rc == 0 and "(relaxed_unused): safe" in out, out


def _kernel(body: str):  # type: ignore[no-untyped-def]
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)\n{\n  .reg .b32 %r<8>;\n"
            f"  .reg .b64 %rd<8>;\n  .reg .pred %p<4>;\n  ld.param.u64 %rd1, [k_param_0];\n{body}  ret;\n}}\n")
    return parse_ptx(text, "t.ptx")


@pytest.mark.parametrize(("ins", "refused"), [
    ("atom.acquire.gpu.global.add.u32 %r1, [%rd1], 1;", True),
    ("atom.acq_rel.sys.global.exch.b32 %r1, [%rd1], 1;", True),
    ("ld.acquire.cta.global.u32 %r1, [%rd1];", True),
    ("ld.acquire.sys.u32 %r1, [%rd1];", True),                      # generic, not shared memory
    ("ld.acquire.cluster.shared::cluster.u32 %r1, [%r2];", False),  # shared memory
    ("ld.relaxed.gpu.global.u32 %r1, [%rd1];", False),
    ("fence.acq_rel.gpu;\n  red.relaxed.gpu.global.add.u32 [%rd1], 1;", False),  # a release nothing reads
    ("fence.sc.sys;\n  st.volatile.global.u32 [%rd1], 1;", False),              # the emitted status word
])
def test_which_accesses_acquire(ins, refused):  # type: ignore[no-untyped-def]
    mod = _kernel(f"  mov.u32 %r2, 0;\n  {ins}\n")
    launch = Launch(block=(32, 1, 1), grid=(1, 1, 1), params={"0": 0x100000})
    if refused:
        with pytest.raises(PtxError, match="acquire semantics"):
            extract(mod, launch)
    else:
        extract(mod, launch)


def test_an_atomic_whose_old_value_is_read_by_another_thread_is_refused():
    """`n = atomicAdd(&count, 1)` with n stored: each thread reads what another wrote (a ticket)."""
    used = "  atom.global.add.u32 %r1, [%rd1], 1;\n  ld.param.u64 %rd2, [k_param_1];\n  st.global.u32 [%rd2], %r1;\n"
    with pytest.raises(PtxError, match="threads communicate through global memory"):
        extract(_kernel(used), Launch(block=(32, 1, 1), grid=(1, 1, 1)))
    unused = used.replace("st.global.u32 [%rd2], %r1", "st.global.u32 [%rd2], 7")
    extract(_kernel(unused), Launch(block=(32, 1, 1), grid=(1, 1, 1)))  # a histogram add: writes only


def test_a_write_in_a_skipped_data_branch_still_counts():
    """A store the executor skips (a branch decided by data) may run: a read of its bytes is refused."""
    body = ("  ld.global.u32 %r1, [%rd1+64];\n  setp.eq.s32 %p1, %r1, 0;\n  @%p1 bra $L__BB0_2;\n"
            "  mov.u32 %r3, %tid.x;\n  mul.wide.u32 %rd3, %r3, 4;\n  add.s64 %rd4, %rd1, %rd3;\n"
            "  st.global.u32 [%rd4], %r1;\n$L__BB0_2:\n  ld.global.u32 %r4, [%rd1];\n")
    with pytest.raises(PtxError, match=r"threads communicate .* `st\.global\.u32` at PTX line 16"):
        extract(_kernel(body), Launch(block=(32, 1, 1), grid=(1, 1, 1)))


def test_symbolic_extraction_applies_the_same_rules():
    """`--symbolic` records no accesses: every global access of the kernel counts, by any thread."""
    from syncverify.ptx.globalcomm import check_static

    mod = load_module(FLAGS)
    fn = next(f for f in mod.entries() if f.name == "stream_k_fixup_no_wait")
    with pytest.raises(PtxError, match="threads communicate through global memory"):
        check_static(mod, fn, Launch(block=(128, 1, 1)))
    mod = load_module(COMM)
    fn = next(f for f in mod.entries() if f.name == "acquire_unused")
    with pytest.raises(PtxError, match="acquire semantics"):
        check_static(mod, fn, Launch(block=(64, 1, 1)))
    for name in ("own_tile", "relaxed_unused"):
        check_static(mod, next(f for f in mod.entries() if f.name == name), Launch(block=(64, 1, 1)))


def test_a_generic_acquire_of_shared_memory_is_not_refused():
    """`cuda::atomic_ref` on a __shared__ word through a generic address: shared memory, not this rule's."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  .reg .b32 %r<8>;\n"
            "  .reg .b64 %rd<8>;\n  .shared .align 4 .b8 flag[4];\n  mov.u64 %rd1, flag;\n"
            "  cvta.shared.u64 %rd2, %rd1;\n  ld.acquire.cta.u32 %r1, [%rd2];\n  ret;\n}\n")
    extract(parse_ptx(text, "t.ptx"), Launch(block=(32, 1, 1), grid=(1, 1, 1)))
