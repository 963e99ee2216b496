""""The last CTA to arrive reduces", read from PTX (#34): an atomic's result that decides a branch.

tests/data/ptx/gridsync/last_block.cu is CUDA's threadFenceReduction sample (NVIDIA/cuda-samples,
Samples/2_Concepts_and_Techniques/threadFenceReduction/threadFenceReduction_kernel.cuh, `reduceSinglePass`):
thread 0 stores the CTA's partial, `__threadfence()`, takes a ticket with `atomicInc`, stores `ticket ==
gridDim.x - 1` to a `__shared__` flag, `__syncthreads()`, and the last CTA reads every partial and resets the
counter with a plain store. Extraction (ptx/kept.py) writes the ticket as `let v = atom.inc…`, the flag as the
CTA's flag of that word beside its shared-memory accesses, the branch as `if … { }`, and the reset as `st.weak`
(semantics/families/flag_weak.py). Compiled by build.sh there; its seeds: -DNO_FENCE, -DOFF_BY_ONE.
last_block_refused.cu holds what is refused at its line: the ticket through `shfl`, through a ballot, as an
address, the `__shared__` flag also written by another warp or read before the barrier, and a plain reset of
the counter that a CTA's input decides.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch

DATA = Path(__file__).parent / "data" / "ptx" / "gridsync"
PARAMS = {"0": 0x10000000, "1": 0x20000000, "2": 0x30000000}
ARGS = ["--block", "64", "--grid", "2", "--whole-grid", "--grid-launch", "persistent",
        *(x for k, v in PARAMS.items() for x in ("--param", f"{k}={v:#x}"))]


def _check(ptx: Path, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    rc = main(["check", str(ptx), *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _line(cu: str, marker: str) -> int:
    return next(i + 1 for i, t in enumerate((DATA / cu).read_text().splitlines()) if marker in t)


def _text(ptx: str, kernel: str | None = None) -> str:
    launch = Launch(block=(64, 1, 1), grid=(2, 1, 1), whole_grid=True, grid_launch="persistent",
                    params=dict(PARAMS))
    return extract(load_module(str(DATA / ptx)), launch, kernel).text


def test_the_ticket_the_shared_flag_the_branch_and_the_reset_are_written_as_the_language_says():
    text = _text("last_block.ptx")
    tickets = re.findall(r"let (v\d+) = atom\.inc\.relaxed\.gpu p2, 2;", text)
    assert len(tickets) == 2 and len(set(tickets)) == 1  # thread 0 of each CTA, gridDim.x = 2
    v = tickets[0]
    assert "flag am_last_value[2];" in text
    slot = re.search(r"smem (\w+) bytes 16;", text).group(1)  # type: ignore[union-attr]  # the word's bytes
    for c in (0, 1):
        assert f"st.relaxed.cta am_last_value[{c}], {v} == 1;" in text  # ticket == gridDim.x - 1
        assert len(re.findall(rf"let v\d+ = ld\.relaxed\.cta am_last_value\[{c}\];", text)) == 2  # both warps
    loaded = re.findall(r"let (v\d+) = ld\.relaxed\.cta", text)[0]
    assert f"if {loaded} != 0 {{" in text
    assert text.count("st.weak p2, 0;") == 2  # each CTA's reset, under its branch
    assert text.count(f"write {slot};") == 2 and text.count(f"read {slot};") == 4  # the slot's race rules


def test_off_by_one_no_cta_ever_reduces_which_is_no_synchronization_error(capsys):
    """`ticket == gridDim.x` (-DOFF_BY_ONE): atomicInc wraps at gridDim.x, so no ticket equals it; the branch
    is extracted (`v == 2`) and never taken. Nothing reads a partial or resets the counter: safe, as it is (a
    wrong result is not a synchronization error)."""
    text = _text("last_block_off_by_one.ptx")
    assert re.search(r"st\.relaxed\.cta am_last_value\[0\], v\d+ == 2;", text)
    rc, out = _check(DATA / "last_block_off_by_one.ptx", *ARGS, capsys=capsys)
    assert rc == 0 and "safe" in out, out


def test_the_reset_moved_before_the_branch_races_with_the_other_ctas_atomic(tmp_path, capsys):
    """The near twin of the reset: every CTA resets (the extracted protocol with `st.weak` out of the branch).
    Its store is not ordered with the other CTA's atomic: SV807, where the last CTA's is ordered after both."""
    text = _text("last_block.ptx")
    twin = re.sub(r"(if v\d+ != 0 \{[^\n]*\n)", r"elect { st.weak p2, 0; }\n\1", text)
    assert twin != text
    path = tmp_path / "reset_everywhere.sync"
    path.write_text(twin)
    rc, out = _check(path, capsys=capsys)
    assert rc == 1 and "SV807" in out, out
    path.write_text(text)
    rc, out = _check(path, capsys=capsys)
    assert rc == 0, out


def test_without_the_whole_grid_the_ticket_stays_refused_at_the_atomic(capsys):
    rc, out = _check(DATA / "last_block.ptx", "--block", "64", "--grid", "2", capsys=capsys)
    assert rc == 2, out
    assert f"last_block.cu:{_line('last_block.cu', 'atomicInc(')}" in out and "decides the branch" in out


@pytest.mark.parametrize("kernel, opcode, why", [
    ("shfl_ticket", "shfl.sync.idx.b32", "hands it to other lanes"),
    ("ballot_ticket", "vote.sync.ballot.b32", "hands it to other lanes"),
    ("ticket_index", "mul.wide.u32", "is not one of the computations"),
    ("flag_overwritten", "st.shared.u8", "would change the word and not the flag"),
    ("early_read", "ld.shared.u8", "may run before every store of it"),
    ("reset_by_data", "st.global.u32", "may run where the executor did not run it"),
])
def test_what_the_value_reaches_that_the_language_cannot_say_is_refused_at_its_line(kernel, opcode, why, capsys):  # type: ignore[no-untyped-def]
    args = [*ARGS]
    if kernel == "reset_by_data":
        args[1] = "32"  # its __launch_bounds__
    rc, out = _check(DATA / "last_block_refused.ptx", "--kernel", kernel, *args, capsys=capsys)
    assert rc == 2, out
    assert why in out and "cannot extract" in out, out
    first = out.splitlines()[0]
    line = int(re.search(r"last_block_refused\.ptx:(\d+):", first).group(1))  # type: ignore[union-attr]
    assert opcode in (DATA / "last_block_refused.ptx").read_text().splitlines()[line - 1], first
    markers = {"ticket_index": "partials[ticket] =", "flag_overwritten": "am_last = false;",
               "early_read": "const bool early = am_last;", "reset_by_data": "*count = 0;"}
    if kernel in markers:
        marker = markers[kernel]
        assert f"last_block_refused.cu:{_line('last_block_refused.cu', marker)}" in out, out


# ---- the sample with its shared-memory block reductions ------------------------------------------------------

SMEM_PARAMS = ["--param", "1=0x10000000", "--param", "2=0x20000000"]  # partials (g_odata), the counter


def _smem_args(block: int) -> list[str]:
    return ["--block", str(block), "--grid", "2", "--whole-grid", "--grid-launch", "persistent", *SMEM_PARAMS]


def test_the_sample_as_it_ships_reads_the_partials_without_an_acquire(capsys):
    """last_block_smem.cu: threadFenceReduction's reduceSinglePass with its `sdata` reductions. The sample has a
    __threadfence() before the atomicInc only: the last CTA's reads of the others' partials are SV301 (the
    ticket's reader has no acquire: PTX §8.8); the per-lane `sdata` traffic beside the kept word is ordinary."""
    rc, out = _check(DATA / "last_block_smem.ptx", *_smem_args(32), capsys=capsys)
    assert rc == 1, out
    read = _line("last_block_smem.cu", "sdata[t] = t < gridDim.x ? partials[t]")
    write = _line("last_block_smem.cu", "partials[blockIdx.x] = sdata[0];")
    assert f"last_block_smem.cu:{read}:" in out and f"last_block_smem.cu:{write}" in out
    assert {c for c in ("SV301", "SV807", "SV801", "SV204") if c in out} == {"SV301"}, out


def test_with_the_acquire_fence_the_sample_is_safe(capsys):
    rc, out = _check(DATA / "last_block_smem_acquire_fence.ptx", *_smem_args(32), capsys=capsys)
    assert rc == 0 and "safe" in out, out


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="two warps per CTA: about 10 s; SYNCVERIFY_SLOW=1")
def test_with_the_acquire_fence_the_sample_is_safe_with_two_warps_per_cta(capsys):
    rc, out = _check(DATA / "last_block_smem_acquire_fence.ptx", *_smem_args(64), capsys=capsys)
    assert rc == 0 and "safe" in out, out


@pytest.mark.parametrize("ptx, rc, code", [("last_block.ptx", 0, None), ("last_block_no_fence.ptx", 1, "SV301")])
def test_the_z3_engine_gives_the_same_verdicts_and_bmc_refuses_with_the_reason(ptx, rc, code, capsys):  # type: ignore[no-untyped-def]
    """--engine z3 runs the flag family as the explicit engine does (the extracted protocol has no loop count to
    lift); the bmc engine does not model global memory and says so: inconclusive, never safe."""
    got, out = _check(DATA / ptx, *ARGS, "--engine", "z3", capsys=capsys)
    assert got == rc and (code is None or code in out), out
    got, out = _check(DATA / ptx, *ARGS, "--engine", "bmc", capsys=capsys)
    assert "inconclusive" in out and "global memory" in out and "safe bound" not in out, out
