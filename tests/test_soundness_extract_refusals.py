"""Extraction never reads more synchronization into a kernel than it has (#31).

* A `try_wait` that can give up -- a bounded retry, one more probe, a watchdog on a clock or a flag -- is a
  probe, not a wait: it is extracted as the language's probe (`if try_wait … { }`, ptx/probe.py; this file
  asserted a refusal while extraction had no probes) and the consumer's read after it is the race its
  false outcome allows; a probe whose result decides nothing is dropped. The spin loops (`while
  (!try_wait)`, CUTLASS's `LAB_WAIT`) stay waits.
* A warp-collective `.sync` instruction whose member mask leaves out a lane that executes it is undefined
  (PTX): SV207 at its line, on every engine; a mask that is not known is refused, never assumed full.
* Waits on global memory (a spin on a load, a flag read with `ld.acquire.gpu` or `volatile`, an `atom`
  whose value decides a branch) are refused at the read's line instead of being skipped as data.

The kernels are `tests/data/ptx/soundness/*.cu`, compiled to the PTX beside them by `build.sh` there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.export import export_model
from syncverify.export.spin import run_spin, tools_available
from syncverify.lang import load
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx
from syncverify.ptx.undefined import Undefined

DATA = Path(__file__).parent / "data" / "ptx" / "soundness"
PROBES = str(DATA / "try_wait_probes.ptx")
MASKS = str(DATA / "collective_mask.ptx")
FLAGS = str(DATA / "global_flag.ptx")
ENGINES = ["explicit", "z3", "bmc"]


def _kernel_line(cu: str, marker: str) -> int:
    """The line of the .cu file that holds `marker` (where a kernel is written)."""
    lines = (DATA / cu).read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
    return n


def _check(ptx: str, kernel: str, block: int, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    rc = main(["check", ptx, "--kernel", kernel, "--block", str(block), *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _spin_verdict(text: str, tmp_path: Path) -> str:
    model = export_model(load(text, path="k.sync"))
    out = run_spin(model.text, tmp_path / "spin", timeout=120, memlim_mb=1024, depth=model.max_depth)
    return out.verdict


# ---- a try_wait that can give up ----------------------------------------------------------------------

GIVES_UP = {
    "bounded_retry": "after 3 more failed tests of the phase goes on",  # four tries, then on
    "probe_twice": "after 1 more failed test of the phase goes on",     # if (!try_wait) try_wait;
    "watchdog_clock": "goes on without testing",                        # clock64() deadline
    "watchdog_flag": "goes on without testing",                         # a volatile abort flag
}


@pytest.mark.parametrize("kernel", sorted(GIVES_UP))
def test_a_try_wait_that_can_give_up_is_a_probe_and_the_read_after_it_races(kernel, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(PROBES, kernel, 64, capsys=capsys)
    assert rc == 1, out
    line = _kernel_line("try_wait_probes.cu", f"KERNEL({kernel},")
    assert re.search(rf"try_wait_probes\.cu:{line}:\d+: SV301 RAW race on tile_0: read by w1", out), out
    text = extract(load_module(PROBES), Launch(block=(64, 1, 1)), kernel).text
    assert "if try_wait mb0 parity 0 {" in text or "if !try_wait mb0 parity 0 {" in text
    assert "wait mb0 parity 0;" not in text  # never read as the blocking wait


def test_the_probes_nest_as_the_tries_do():
    """`for (i = 0; i < 4 && !try_wait; ++i);`: three probes nested in each other's false outcome (the
    fourth one's result decides nothing: the loop ends either way); `if (!try_wait) try_wait;`: one
    probe (the second result is not read)."""
    text = extract(load_module(PROBES), Launch(block=(64, 1, 1)), "bounded_retry").text
    assert text.count("if !try_wait mb0 parity 0 {") == 2 and text.count("if try_wait mb0 parity 0 {") == 1
    text = extract(load_module(PROBES), Launch(block=(64, 1, 1)), "probe_twice").text
    assert _code(text).count("try_wait mb0") == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bounded_retry_is_flagged_or_inconclusive_whatever_the_engine(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(PROBES, "bounded_retry", 64, "--engine", engine, capsys=capsys)
    if engine == "bmc":  # the encoding has one fixed sequence of operations per warp: it says so
        assert rc != 0 and "inconclusive" in out and "if try_wait" in out and ": safe" not in out, out
    else:
        assert rc == 1 and "SV301" in out, out


@pytest.mark.parametrize("kernel", ["spin", "lab", "unused_probe"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_spin_is_still_a_wait(kernel, engine, capsys):  # type: ignore[no-untyped-def]
    """`while (!try_wait)`, CUTLASS's LAB_WAIT, and a probe nothing reads before a spin: one wait, safe."""
    rc, out = _check(PROBES, kernel, 64, "--engine", engine, capsys=capsys)
    assert rc == 0 and f"({kernel}): safe" in out, out
    text = extract(load_module(PROBES), Launch(block=(64, 1, 1)), kernel).text
    assert text.count("wait mb0 parity 0;") == 1


@pytest.mark.skipif(tools_available() is not None, reason="SPIN and a C compiler are needed")
def test_the_spin_is_safe_for_spin_too(tmp_path):  # type: ignore[no-untyped-def]
    assert _spin_verdict(extract(load_module(PROBES), Launch(block=(64, 1, 1)), "lab").text, tmp_path) == "safe"


def _kernel(body: str, params: str = ""):  # type: ignore[no-untyped-def]
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            f".visible .entry k({params})\n{{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<8>;\n  .reg .pred %p<4>;\n"
            f"{body}}}\n")
    return parse_ptx(text, "t.ptx")


# nvcc's inlined spin (`LAB_WAIT: try_wait; @!p bra LAB_WAIT`), and the same loop with a counter that gives up
_LOOP = ("  mov.u32 %r1, 0;\n  mov.u32 %r2, 0;\n$L__BB0_1:\n"
         "  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n{false}"
         "$L__BB0_2:\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n")


@pytest.mark.parametrize(("false_path", "wait"), [
    ("  @!%p1 bra $L__BB0_1;\n", True),                                                  # LAB_WAIT
    ("  @%p1 bra $L__BB0_2;\n  add.s32 %r2, %r2, 1;\n  bra.uni $L__BB0_1;\n", True),     # a counter that
    #                                                                                      never decides
    ("  @%p1 bra $L__BB0_2;\n  add.s32 %r2, %r2, 1;\n  setp.lt.u32 %p2, %r2, 100;\n"      # 100 tries
     "  @%p2 bra $L__BB0_1;\n", False),
    ("  @%p1 bra $L__BB0_2;\n  mov.u64 %rd1, %clock64;\n  setp.gt.u64 %p2, %rd1, 5000;\n"  # a deadline
     "  @!%p2 bra $L__BB0_1;\n", False),
    ("  @%p1 bra $L__BB0_2;\n  mov.u64 %rd1, %clock64;\n  setp.gt.u64 %p2, %rd1, 5000;\n"  # one that traps
     "  @%p2 trap;\n  bra.uni $L__BB0_1;\n", True),
])
def test_only_a_loop_that_always_tests_again_is_a_wait(false_path, wait):  # type: ignore[no-untyped-def]
    mod = _kernel(_LOOP.format(false=false_path))
    text = extract(mod, Launch(block=(32, 1, 1))).text
    if wait:
        assert "wait mb0 parity 0;" in text
    else:  # a probe (the 100 tries: 99 nested ones, the last one's result deciding nothing)
        assert "wait mb0 parity 0;" not in text and "if try_wait mb0 parity 0 {" in text


# a watchdog whose limit is a parameter: a wait only when the limit is the type's largest value
_WATCHDOG = ("  ld.param.u64 %rd2, [k_param_0];\n  mov.u32 %r1, 0;\n  mov.u64 %rd3, %globaltimer;\n$L__BB0_1:\n"
             "  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n  @%p1 bra $L__BB0_2;\n"
             "  mov.u64 %rd4, %globaltimer;\n  sub.s64 %rd5, %rd4, %rd3;\n  setp.gt.u64 %p2, %rd5, %rd2;\n"
             "  @!%p2 bra $L__BB0_1;\n$L__BB0_2:\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n")


def test_a_watchdog_is_a_wait_only_when_it_never_fires():
    mod = _kernel(_WATCHDOG, ".param .u64 k_param_0")
    probe = "if try_wait mb0 parity 0 {\n"  # the retry is cut: the probe, then the give-up path
    assert probe in _code(extract(mod, Launch(block=(32, 1, 1), params={"0": 1_000_000})).text)
    assert probe in _code(extract(mod, Launch(block=(32, 1, 1))).text)  # unbound: it may fire
    assert "wait mb0 parity 0;" in extract(mod, Launch(block=(32, 1, 1), params={"0": 2**64 - 1})).text


def _code(text: str) -> str:
    return "\n".join(ln.split("//")[0].strip() for ln in text.splitlines()) + "\n"


def test_a_probe_whose_result_is_only_stored_or_unused_is_dropped():
    """The result stored to global memory decides nothing this kernel synchronizes on (both outcomes run
    alike to the end), as a result that nothing reads: the probe orders nothing the kernel relies on."""
    used = ("  mov.u32 %r1, 0;\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
            "  ld.shared.u32 %r3, [%r1+16];\n  selp.u32 %r4, 1, 0, %p1;\n  st.global.u32 [%rd1], %r4;\n  ret;\n")
    for body in (used, used.replace("selp.u32 %r4, 1, 0, %p1", "mov.u32 %r4, 1")):
        text = extract(_kernel(body), Launch(block=(32, 1, 1))).text
        assert "wait" not in text and "read s0;" in text  # the probe orders nothing: no wait is read into it


# ---- member masks ------------------------------------------------------------------------------------

UB = {"elect_half": "elect.sync", "shfl_half": "shfl.sync.idx.b32", "vote_half": "vote.sync.ballot.b32",
      "syncwarp_half": "bar.warp.sync"}


@pytest.mark.parametrize("kernel", sorted(UB))
@pytest.mark.parametrize("engine", ENGINES)
def test_a_member_mask_that_leaves_out_executing_lanes_is_sv207(kernel, engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(MASKS, kernel, 64, "--engine", engine, capsys=capsys)
    assert rc == 1, out
    assert re.search(rf"SV207 `{re.escape(UB[kernel])}` with member mask 0x0000ffff is executed by lanes 0xffffffff; "
                     r"lanes 0xffff0000 are not in the mask \(PTX: the behavior is undefined", out), out
    line = _kernel_line("collective_mask.cu", f"KERNEL({kernel},")
    # at the kernel's line (the call of the helper or intrinsic); the helper's `asm` statement, or the CUDA
    # header's intrinsic, as a note
    assert re.search(rf"collective_mask\.cu:{line}:\d+: SV207 ", out), out
    assert re.search(r"note: \S+:\d+:\d+: (inside the inline-asm helper|in sm_30_intrinsics\.hpp, a library header)",
                     out), out
    assert f"({kernel}): violation" in out


@pytest.mark.parametrize("kernel", ["elect_full", "shfl_full", "vote_full", "syncwarp_full"])
def test_the_full_mask_twins_are_safe(kernel, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(MASKS, kernel, 64, capsys=capsys)
    assert rc == 0 and f"({kernel}): safe" in out, out


@pytest.mark.skipif(tools_available() is not None, reason="SPIN and a C compiler are needed")
def test_the_full_mask_twin_is_safe_for_spin(tmp_path):  # type: ignore[no-untyped-def]
    text = extract(load_module(MASKS), Launch(block=(64, 1, 1)), "elect_full").text
    assert _spin_verdict(text, tmp_path) == "safe"


def test_extract_writes_no_protocol_for_undefined_behavior(tmp_path, capsys):  # type: ignore[no-untyped-def]
    out = tmp_path / "p.sync"
    assert main(["extract", MASKS, "--kernel", "elect_half", "--block", "64", "-o", str(out)]) == 1
    assert not out.exists()
    assert "error: SV207 undefined behavior (warp 0 of CTA 0)" in capsys.readouterr().err


def test_a_mask_that_is_not_known_is_refused_not_assumed_full(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(MASKS, "elect_param", 64, capsys=capsys)
    assert rc == 2 and "the member mask of `elect.sync` is not known" in out and "not assumed full" in out
    rc, out = _check(MASKS, "elect_param", 64, "--param", "1=0xffffffff", capsys=capsys)
    assert rc == 0 and "(elect_param): safe" in out
    rc, out = _check(MASKS, "elect_param", 64, "--param", "1=0xffff", capsys=capsys)
    assert rc == 1 and "SV207" in out


@pytest.mark.parametrize("ins", ["match.any.sync.b32 %r3, %r2, 0xffff;", "redux.sync.add.u32 %r3, %r2, 0xffff;",
                                 "match.all.sync.b32 %r3|%p1, %r2, 0xffff;"])
def test_match_and_redux_check_their_mask(ins):  # type: ignore[no-untyped-def]
    mod = _kernel(f"  mov.u32 %r2, %tid.x;\n  {ins}\n  ret;\n")
    with pytest.raises(Undefined, match="SV207"):
        extract(mod, Launch(block=(32, 1, 1)))
    extract(_kernel(f"  mov.u32 %r2, %tid.x;\n  {ins.replace('0xffff;', '-1;')}\n  ret;\n"), Launch(block=(32, 1, 1)))


# ---- global memory -----------------------------------------------------------------------------------

REFUSED = {  # kernel -> (opcode read, CUDA line, the kernel's line it is inlined at or None, why)
    "stream_k_fixup": ("ld.global.acquire.gpu.b32", 10, "while (ld_acquire(flag) != val)", "reads a flag"),
    "volatile_flag": ("ld.volatile.global.u32", None, None, "reads a flag"),
    "plain_spin": ("ld.global.b32", 16, "while (ld_plain(flag) == 0)", "a loop waits on global memory"),
    "last_block": ("atom.global.add.u32", None, "last = atomicAdd(counter, 1)", "reads a flag"),
}


@pytest.mark.parametrize("kernel", sorted(REFUSED))
def test_a_wait_on_global_memory_is_refused_at_the_read(kernel, capsys):  # type: ignore[no-untyped-def]
    opcode, line, caller, why = REFUSED[kernel]
    rc, out = _check(FLAGS, kernel, 128, capsys=capsys)
    assert rc == 2, out
    assert re.search(r"global_flag\.ptx:\d+:\d+: error: cannot extract \(warp 0 of CTA 0\): ", out), out
    assert why in out and "not modelled" in out
    assert f"\t{opcode}" in out.replace(" \t", "\t")  # the PTX line of the read, with a caret
    if kernel == "volatile_flag":
        assert f"CUDA source: global_flag.cu:{_kernel_line('global_flag.cu', 'volatile const int*)flag == 0')}" in out
    else:
        inlined = _kernel_line("global_flag.cu", caller)
        at = str(line) if line else r"\d+"
        assert re.search(rf"CUDA source: \S+:{at} \(inlined at global_flag\.cu:{inlined}\)", out), out


@pytest.mark.parametrize("engine", ENGINES)
def test_the_stream_k_wait_is_refused_whatever_the_engine(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(FLAGS, "stream_k_fixup", 128, "--engine", engine, capsys=capsys)
    assert rc == 2 and "reads a flag in global memory" in out


def test_the_fixup_without_its_wait_no_longer_extracts_like_the_one_with_it(capsys):  # type: ignore[no-untyped-def]
    """Both extracted the same protocol when the spin was skipped as data. The one with the wait is refused at
    the wait's load; the one without it at the read of the partials another CTA stores (its threads
    communicate through global memory: tests/test_soundness_global_comm.py)."""
    mod = load_module(FLAGS)
    with pytest.raises(PtxError, match="threads communicate through global memory"):
        extract(mod, Launch(block=(128, 1, 1)), "stream_k_fixup_no_wait")
    with pytest.raises(PtxError, match="reads a flag in global memory"):
        extract(mod, Launch(block=(128, 1, 1)), "stream_k_fixup")


@pytest.mark.parametrize("kernel", ["data_branch", "atomic_accumulate", "trip_from_global"])
@pytest.mark.parametrize("engine", ENGINES)
def test_global_memory_read_as_data_is_still_skipped(kernel, engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(FLAGS, kernel, 128, "--engine", engine, capsys=capsys)
    assert rc == 0 and f"({kernel}): safe" in out, out


@pytest.mark.skipif(tools_available() is not None, reason="SPIN and a C compiler are needed")
def test_global_data_twin_is_safe_for_spin(tmp_path):  # type: ignore[no-untyped-def]
    text = extract(load_module(FLAGS), Launch(block=(128, 1, 1)), "data_branch").text
    assert _spin_verdict(text, tmp_path) == "safe"


_FLAG = ("  ld.param.u64 %rd1, [k_param_0];\n  {load}\n  setp.eq.s32 %p1, %r1, 0;\n  @%p1 bra $L__BB0_2;\n"
         "  st.global.u32 [%rd1+4], %r1;\n$L__BB0_2:\n  bar.sync 0;\n  ret;\n")


@pytest.mark.parametrize(("load", "refused"), [
    ("ld.relaxed.gpu.global.u32 %r1, [%rd1];", True),
    ("ld.acquire.sys.global.u32 %r1, [%rd1];", True),
    ("ld.acquire.gpu.u32 %r1, [%rd1];", True),              # a generic address that is not shared memory
    ("atom.global.cas.b32 %r1, [%rd1], 0, 1;", True),
    ("ld.global.u32 %r1, [%rd1];", False),                   # a weak load, not repeated: data
    ("ld.global.nc.u32 %r1, [%rd1];", False),
])
def test_a_strong_global_load_or_atom_deciding_a_branch_is_a_flag(load, refused):  # type: ignore[no-untyped-def]
    mod = _kernel(_FLAG.format(load=load), ".param .u64 k_param_0")
    launch = Launch(block=(32, 1, 1), params={"0": 0x100000})
    if refused:
        with pytest.raises(PtxError, match="reads a flag in global memory"):
            extract(mod, launch)
    else:
        assert "syncthreads;" in extract(mod, launch).text


def test_a_flag_read_whose_value_decides_nothing_is_data_unless_it_acquires():
    """A relaxed load whose value decides nothing is data; an acquire load is refused wherever it is (#31: it
    exists only to synchronize with a release: tests/test_soundness_global_comm.py)."""
    body = _FLAG.replace("  setp.eq.s32 %p1, %r1, 0;\n  @%p1 bra $L__BB0_2;\n", "")
    mod = _kernel(body.format(load="ld.relaxed.gpu.global.u32 %r1, [%rd1];"), ".param .u64 k_param_0")
    assert "syncthreads;" in extract(mod, Launch(block=(32, 1, 1), params={"0": 0x100000})).text
    mod = _kernel(body.format(load="ld.acquire.gpu.global.u32 %r1, [%rd1];"), ".param .u64 k_param_0")
    with pytest.raises(PtxError, match="acquire semantics"):
        extract(mod, Launch(block=(32, 1, 1), params={"0": 0x100000}))


def test_the_checked_twins_agree_with_the_explicit_engine():
    """The protocols of the twins load and are safe with the explicit engine (the CLI path is tested above)."""
    for ptx, kernel, block in [(PROBES, "spin", 64), (MASKS, "elect_full", 64), (FLAGS, "trip_from_global", 128)]:
        text = extract(load_module(ptx), Launch(block=(block, 1, 1)), kernel).text
        assert check_protocol(load(text, path=f"{kernel}.sync"), Options()).verdict.value == "safe"


def test_an_atom_guarding_a_barrier_operation_is_named_in_the_refusal():
    """`if (atomicAdd(ticket, 1) == 0) arrive(bar)`: refused (as before) at the arrive, naming the atom."""
    body = ("  ld.param.u64 %rd1, [k_param_0];\n  mov.u32 %r2, 0;\n  mbarrier.init.shared::cta.b64 [%r2], 1;\n"
            "  atom.global.add.u32 %r1, [%rd1], 1;\n  setp.eq.s32 %p1, %r1, 0;\n"
            "  @%p1 mbarrier.arrive.shared::cta.b64 %rd2, [%r2];\n  ret;\n")
    mod = _kernel(body, ".param .u64 k_param_0")
    with pytest.raises(PtxError, match=r"guard predicate .* not known \(it derives from `atom.global.add.u32` at "
                                       r"PTX line 12, a flag in global memory"):
        extract(mod, Launch(block=(32, 1, 1), params={"0": 0x100000}))
