"""`cooperative_groups::this_grid().sync()` read from PTX as the language's `grid.sync` (#34).

`tests/data/ptx/gridsync/grid_sync.cu` (compiled by `build.sh` there, nvcc 13.0 with CUDA 13's own
cooperative_groups.h) is a two-phase kernel: every CTA writes its partials, the grid meets at
`this_grid().sync()`, every CTA reads its neighbour's. Its seed `-DREAD_EARLY` reads before the grid barrier.
syncverify/ptx/cg_grid_sync.py recognises the barrier's compiled shape (the workspace from %envreg, thread 0's
`atom.add.release.gpu` and its `ld.acquire.gpu` spin on bit 31 between two `barrier.sync 0`) and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from syncverify.cli import main
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch

DATA = Path(__file__).parent / "data" / "ptx" / "gridsync"
GRID_SYNC = DATA / "grid_sync.ptx"
READ_EARLY = DATA / "grid_sync_read_early.ptx"
ARGS = ["--block", "64", "--grid", "2", "--whole-grid", "--param", "0=0x10000000", "--param", "1=0x20000000"]


def _check(ptx: Path, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    rc = main(["check", str(ptx), *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _line(marker: str) -> int:
    lines = (DATA / "grid_sync.cu").read_text().splitlines()
    found = [i + 1 for i, text in enumerate(lines) if marker in text]
    return found[0]


def test_the_grid_barrier_is_extracted_as_grid_sync_for_every_warp():
    launch = Launch(block=(64, 1, 1), grid=(2, 1, 1), whole_grid=True, grid_launch="cooperative",
                    params={"0": 0x10000000, "1": 0x20000000})
    text = extract(load_module(str(GRID_SYNC)), launch).text
    assert "launch cooperative;" in text
    assert text.count("grid.sync;") == 4  # two warps in each of two CTAs, each once
    # no trace of the barrier's own word: no flag, no spin, no atomic, and the CTA barriers are part of it
    for gone in ("flag ", "wait.until", "atom.", "syncthreads"):
        assert gone not in text, gone


def test_the_two_phases_are_safe_on_a_cooperative_launch(capsys):
    rc, out = _check(GRID_SYNC, *ARGS, "--grid-launch", "cooperative", capsys=capsys)
    assert rc == 0, out
    assert "safe" in out


def test_reading_before_the_grid_sync_races_with_the_neighbours_write(capsys):
    rc, out = _check(READ_EARLY, *ARGS, "--grid-launch", "cooperative", capsys=capsys)
    assert rc == 1, out
    assert "SV301" in out
    read, write = _line("const float theirs"), _line("partials[blockIdx.x * blockDim.x + t] =")
    assert f"grid_sync.cu:{read}" in out and f"grid_sync.cu:{write}" in out


def test_without_a_cooperative_launch_the_grid_sync_is_sv804_at_the_call(capsys):
    rc, out = _check(GRID_SYNC, *ARGS, capsys=capsys)
    assert rc == 1, out
    assert f"grid_sync.cu:{_line('grid.sync();')}:" in out and "SV804" in out


def test_the_grid_barrier_needs_the_whole_grid(capsys):
    rc, out = _check(GRID_SYNC, "--block", "64", "--grid", "2", capsys=capsys)
    assert rc == 2, out
    assert "--whole-grid" in out


def test_a_shape_that_differs_is_not_a_grid_sync_and_stays_refused(tmp_path, capsys):
    # the same barrier with a relaxed arrival: no longer CUDA's grid barrier (it would order nothing), so the
    # recognizer leaves it, and extraction refuses it at its first instruction it cannot model: the branch on
    # the driver's workspace pointer (unknown) before the trap, placed at the user's grid.sync() call
    text = GRID_SYNC.read_text()
    assert text.count("atom.add.release.gpu.u32") == 1
    twin = tmp_path / "grid_sync.ptx"
    twin.write_text(text.replace("atom.add.release.gpu.u32", "atom.add.relaxed.gpu.u32"))
    rc, out = _check(twin, *ARGS, "--grid-launch", "cooperative", capsys=capsys)
    assert rc == 2, out
    assert "cannot extract" in out and f"grid_sync.cu:{_line('grid.sync();')}" in out
    lines = twin.read_text().splitlines()
    trap = next(i for i, t in enumerate(lines) if t.strip() == "trap;")
    branch = max(i for i in range(trap) if "bra" in lines[i]) + 1
    assert f"grid_sync.ptx:{branch}:" in out


# ---- "the last CTA to arrive": an atomic's value that decides a branch ---------------------------------------

LAST_ARGS = [*ARGS, "--param", "2=0x30000000", "--grid-launch", "persistent"]


def test_the_last_cta_reduces_safely_with_its_fences(capsys):
    """tests/data/ptx/gridsync/last_block.cu (threadFenceReduction's last block): the ticket is `let v =
    atom.inc…`, it reaches the CTA through the __shared__ flag written by thread 0 and read after
    `__syncthreads()`, and the reset is `st.weak` (ptx/kept.py, semantics/families/flag_weak.py). This test
    asserted a refusal at the atomicInc until the value was extracted; it now asserts the verdicts."""
    rc, out = _check(DATA / "last_block.ptx", *LAST_ARGS, capsys=capsys)
    assert rc == 0, out
    assert "safe" in out


def test_without_the_fences_the_last_cta_reads_a_partial_before_it_is_ordered(capsys):
    rc, out = _check(DATA / "last_block_no_fence.ptx", *LAST_ARGS, capsys=capsys)
    assert rc == 1, out
    lines = (DATA / "last_block.cu").read_text().splitlines()
    read = next(i + 1 for i, t in enumerate(lines) if "sum += partials[i]" in t)
    write = next(i + 1 for i, t in enumerate(lines) if "partials[blockIdx.x] =" in t)
    codes = {c for c in ("SV301", "SV807", "SV801") if c in out}
    assert codes == {"SV301"}, out
    assert f"last_block.cu:{read}:" in out and f"last_block.cu:{write}" in out
