"""CTAs that meet through global memory, checked from PTX as one protocol over the grid (#34).

`--whole-grid` runs every CTA of the grid and extracts the flags, spins, fences and the workspace they share
(syncverify/ptx/gridsync.py, gridextract.py). The kernels are under `tests/data/ptx/gridsync/`, compiled by
`build.sh` there (nvcc 13.0, CUTLASS's `cutlass/barrier.h` from pip nvidia-cutlass 4.2.0.0 as it ships):

* `splitk_flag.cu`: the stream-K fixup's hand-off -- each peer stores its partials and `arrive_inc`s the tile's
  flag, the reducing CTA `wait_eq`s it and reads them; seeds: without the wait (`-DNO_WAIT`), waiting for a
  count that never comes (`-DFLAG_COUNT=2` with one peer);
* `grid_barrier.cu`: FlashInfer's software grid barrier (`red_release` + `wait_ge` on an arrival counter) over two
  rounds of a histogram every CTA writes a part of and reads whole; seeds: the leading CTA's reset of the counter
  while a peer may still spin (`-DRESET_RACE`, flashinfer#3615), the second round without its barrier.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.lang import load
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError

DATA = Path(__file__).parent / "data" / "ptx" / "gridsync"
SPLITK = DATA / "splitk_flag.ptx"
BASES = ["--param", "1=0x10000000", "--param", "2=0x20000000"]
GRID2 = ["--block", "64", "--grid", "2", "--whole-grid", *BASES]


def _line(cu: str, marker: str) -> int:
    lines = (DATA / cu).read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
    return n


def _check(ptx: Path, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    rc = main(["check", str(ptx), *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _launch(**kw: object) -> Launch:
    base: dict[str, object] = {"block": (64, 1, 1), "grid": (2, 1, 1), "whole_grid": True,
                               "params": {"1": 0x10000000, "2": 0x20000000}}
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


# ---- the split-K hand-off through cutlass/barrier.h ----------------------------------------------------

def test_the_hand_off_extracts_as_one_protocol_over_the_grid():
    """The wait is `wait.until` on the flag, the signal CUTLASS's release pattern, the partials a global
    buffer each CTA's warps touch their own piece of; the two CTAs' programs differ (`block == k`)."""
    text = extract(load_module(str(SPLITK)), _launch(grid_launch="persistent")).text
    assert "grid 2;" in text and "launch persistent;" in text
    assert re.search(r"flag p2;\s+// 32-bit words at byte 0x0", text), text
    assert "global g1[2] bytes 128;" in text
    assert "wait.until.acquire.gpu p2 == 1;" in text
    assert re.search(r"fence\.acq_rel\.gpu;.*\n\s+red\.add\.relaxed\.gpu p2, 1;", text), text
    assert "if w0 && block == 0 {" in text and "if w0 && block == 1 {" in text
    assert "write g1[0];" in text and "read g1[0];" in text and "read g1[1];" in text
    assert "cluster" not in text.split("protocol", 1)[1].split("\n", 2)[1]
    load(text, path="k.sync")  # the language takes it as written


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_the_hand_off_is_safe_on_a_persistent_grid(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(SPLITK, *GRID2, "--grid-launch", "persistent", "--engine", engine, capsys=capsys)
    assert rc == 0 and "(splitk_fixup): safe" in out, out


def test_without_a_co_residency_promise_the_wait_may_hang(capsys):  # type: ignore[no-untyped-def]
    """CTA 0 spins on CTA 1's progress: with no launch promise CTA 1 may never be resident (SV803)."""
    rc, out = _check(SPLITK, *GRID2, capsys=capsys)
    assert rc == 1 and "SV803" in out, out


def test_the_fixup_without_its_wait_races_on_the_partials(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(DATA / "splitk_flag_no_wait.ptx", *GRID2, "--grid-launch", "persistent", capsys=capsys)
    assert rc == 1, out
    read, write = _line("splitk_flag.cu", "acc += partials["), _line("splitk_flag.cu", "partials[(blockIdx.x")
    assert re.search(rf"splitk_flag\.cu:{read}:\d+: SV301 RAW race on g1\[0\]: read by w0\.w0@cta0 is not ordered "
                     rf"with the write at splitk_flag\.cu:{write} by w0\.w0@cta1", out), out
    assert "safe" not in out.split("SV301")[0]


def test_a_flag_count_never_reached_names_the_flag_the_value_and_its_writer(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(DATA / "splitk_flag_flag_count_2.ptx", *GRID2, "--grid-launch", "persistent", capsys=capsys)
    assert rc == 1, out
    wait, arrive = _line("splitk_flag.cu", "wait_eq(flags"), _line("splitk_flag.cu", "arrive_inc(flags")
    # at the fixup's call of wait_eq, naming the flag, the value, what it is and who writes it (arrive_inc)
    assert re.search(rf"splitk_flag\.cu:{wait}:\d+: SV801 deadlock through global memory: .*wait\.until p2 == 2 — "
                     rf"p2 is 1; written by w0\.w0@cta1 \(splitk_flag\.cu:{arrive}", out), out
    m = re.search(r"barrier\.h:(\d+):\d+: in barrier\.h, a library header", out)  # the barrier.h line, a note
    assert m, out
    barrier = Path(__import__("cutlass_library").__file__).parent / "source" / "include" / "cutlass" / "barrier.h"
    if barrier.is_file():
        assert "ld.global.acquire.gpu" in barrier.read_text().splitlines()[int(m.group(1)) - 1]  # the wait's load


def test_the_right_count_is_one_per_peer_and_a_wider_grid_needs_more(capsys):  # type: ignore[no-untyped-def]
    """The correct kernel waits for gridDim.x - 1: three CTAs wait for 2 arrivals, and stay safe."""
    text = extract(load_module(str(SPLITK)), _launch(grid=(3, 1, 1), grid_launch="persistent")).text
    assert "wait.until.acquire.gpu p2 == 2;" in text and "global g1[4] bytes 128;" in text
    rc, out = _check(SPLITK, "--block", "64", "--grid", "3", "--whole-grid", *BASES, "--grid-launch", "persistent",
                     capsys=capsys)
    assert rc == 0 and "safe" in out, out


# ---- a software grid barrier and its reset --------------------------------------------------------------

BARRIER = ["--block", "64", "--grid", "2", "--whole-grid", "--param", "0=0x10000000", "--param", "2=0x20000000",
           "--grid-launch", "persistent"]


def test_the_grid_barrier_extracts_its_rounds_and_is_safe(capsys):  # type: ignore[no-untyped-def]
    text = extract(load_module(str(DATA / "grid_barrier.ptx")),
                   _launch(params={"0": 0x10000000, "2": 0x20000000}, grid_launch="persistent")).text
    assert "wait.until.acquire.gpu p2 >= 2;" in text and "wait.until.acquire.gpu p2 >= 4;" in text  # (r+1)*CTAs
    assert text.count("red.add.relaxed.gpu p2, 1;") == 4  # one per round, per CTA
    rc, out = _check(DATA / "grid_barrier.ptx", *BARRIER, capsys=capsys)
    assert rc == 0 and "(radix_rounds): safe" in out, out


def test_the_reset_while_a_peer_spins_is_the_reset_race(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(DATA / "grid_barrier_reset_race.ptx", *BARRIER, capsys=capsys)
    assert rc == 1, out
    reset, spin = _line("grid_barrier.cu", "st_relaxed(counter, 0);"), _line("grid_barrier.cu", "while (ld_acquire")
    assert re.search(rf"grid_barrier\.cu:{reset}:\d+: SV802 reset race: this write changes p2 from 4 to 0 while "
                     rf"w0\.w0@cta1 spins at grid_barrier\.cu:{spin} for p2 >= 4", out), out


def test_a_round_without_its_barrier_races_on_the_histogram(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check(DATA / "grid_barrier_no_barrier.ptx", *BARRIER, capsys=capsys)
    assert rc == 1 and "SV301 RAW race on g0[" in out, out
    write, read = _line("grid_barrier.cu", "part[blockIdx.x * n + t]"), _line("grid_barrier.cu", "acc += part[c")
    assert re.search(rf"grid_barrier\.cu:({write}|{read}):\d+: SV301", out), out
    assert "SV802" not in out and "SV801" not in out


# ---- what is refused ------------------------------------------------------------------------------------

def test_an_unbound_flag_pointer_is_refused_at_the_flag_operation():
    with pytest.raises(PtxError, match=r"at an address that is not known: bind the pointer parameter"):
        extract(load_module(str(SPLITK)), _launch(params={"1": 0x10000000}))


def test_an_unbound_workspace_pointer_is_refused_at_the_read():
    """The partials through a pointer that is not bound: their bytes are not known, and a peer writes through
    the same pointer: refused as before, never dropped."""
    with pytest.raises(PtxError, match="threads communicate through global memory"):
        extract(load_module(str(SPLITK)), _launch(params={"2": 0x20000000}))


def test_the_whole_grid_needs_a_grid_of_one_cta_clusters():
    mod = load_module(str(SPLITK))
    with pytest.raises(PtxError, match="needs the grid"):
        extract(mod, _launch(grid=None))
    with pytest.raises(PtxError, match="at most 16"):
        extract(mod, _launch(grid=(17, 1, 1)))


# ---- CUTLASS's stream-K GEMM ------------------------------------------------------------------------------
#
# tests/data/ptx/sm90_gemm_coop_streamk.cu instantiates the cooperative sm90 GEMM with StreamKScheduler from
# CUTLASS's headers as they ship; its PTX (two stages) and the output of its host program
# (syncverify/data/cutlass_sm90_streamk_params.cu at 128x128x1024 on two SMs: two stream-K units of 8 k-tiles
# share the one output tile) are committed, so these tests need no nvcc. The seeds are copies of the PTX:
# `_no_wait` without the final unit's two wait_eq spins (the loads, compares and branches deleted), `_flag_count`
# with warpgroup 0's spin comparing with 9 instead of the lock value its peer's arrive_inc leaves (8).

PTX = Path(__file__).parent / "data" / "ptx"
HOST = "sm90_gemm_coop_streamk_host_128x128x1024"


def _streamk_args(tmp_path: Path, seed: str = "") -> tuple[Path, list[str]]:
    """The PTX (unzipped) and the command line of its launch, from the committed host output."""
    import gzip

    from syncverify.ptx.cutlass_host import parse_output
    from syncverify.ptx.parse import parse_ptx

    ptx = tmp_path / f"sm90_gemm_coop_streamk_s2{seed}.ptx"
    ptx.write_bytes(gzip.decompress((PTX / f"sm90_gemm_coop_streamk_s2{seed}.ptx.gz").read_bytes()))
    fn = parse_ptx(ptx.read_text(), str(ptx)).entries()[0]
    host = parse_output(str(ptx), fn, (PTX / f"{HOST}.txt").read_text(), (PTX / f"{HOST}.bin").read_bytes())
    args = ["--grid", "x".join(map(str, host.grid)), "--block", "x".join(map(str, host.block)),
            "--dynamic-smem", str(host.dynamic_smem), "--whole-grid", "--grid-launch", "persistent"]
    image = PTX / f"{HOST}.bin"
    for off, n, _name in host.fields:
        args += ["--param", f"0[{off}:{n}]=@{image}"]
    for off, n, _name in host.boxes:
        args += ["--tensor-bytes", f"0[{off}]={n}"]
    return ptx, args


def test_the_stream_k_host_output_is_two_units_on_one_tile():
    """The committed host output is stream-K (not data-parallel): two units, one stream-K tile, two CTAs, and a
    workspace of the 128x128 fp32 partials and the locks behind them at the fixed fake address."""
    from syncverify.ptx.cutlass_host import WORKSPACE_BASE

    words = {ln.split()[0]: ln.split()[1:] for ln in (PTX / f"{HOST}.txt").read_text().splitlines()}
    assert words["decomposition"][:3] == ["2", "2", "1"]  # stream-K, 2 units, 1 stream-K tile
    assert words["launch"][:3] == ["1", "2", "1"]
    base, size, _off = map(int, words["workspace"])
    assert base == WORKSPACE_BASE and size >= 128 * 128 * 4 + 2 * 4


def test_the_stream_k_gemm_extracts_its_fixup_over_the_grid(tmp_path, capsys):  # type: ignore[no-untyped-def]
    ptx, args = _streamk_args(tmp_path)
    rc = main(["extract", str(ptx), *args, "-o", str(tmp_path / "sk.sync")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    text = (tmp_path / "sk.sync").read_text()
    assert "grid 2;" in text and "launch persistent;" in text
    assert re.search(r"flag flags\[2\];\s+// 32-bit words at address 0x300000010000, 0x300000010004", text), text
    # the final unit waits for the 8 k-tiles its peer adds, on each math warpgroup's lock
    assert "wait.until.acquire.gpu flags[0] == 8;" in text and "wait.until.acquire.gpu flags[1] == 8;" in text
    assert re.search(r"fence\.acq_rel\.gpu;.*\n\s+red\.add\.relaxed\.gpu flags\[0\], 8;", text), text
    assert "global g[8] bytes 8192;" in text  # the partials: one stripe per math warp
    assert "write g[0];" in text and "read g[0];" in text
    load(text, path="sk.sync")


def _extracted(tmp_path: Path, seed: str, capsys) -> str:  # type: ignore[no-untyped-def]
    ptx, args = _streamk_args(tmp_path, seed)
    rc = main(["extract", str(ptx), *args, "-o", str(tmp_path / "sk.sync")])
    assert rc == 0, capsys.readouterr().err
    return (tmp_path / "sk.sync").read_text()


def test_the_seed_without_the_wait_extracts_without_it(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The seed's protocol carries its defect: no wait before the final unit reads the partials."""
    text = _extracted(tmp_path, "_no_wait", capsys)
    assert "wait.until" not in text and "red.add.relaxed.gpu flags[0], 8;" in text and "read g[0];" in text


@pytest.mark.skipif(not __import__("os").environ.get("SYNCVERIFY_SLOW"),
                    reason="a second extraction of the whole GEMM (about 12 s); the seed above runs in CI")
def test_the_seed_with_a_count_never_reached_extracts_it(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """A wait on lock 0 for 9 where the peer's arrive_inc adds 8 (lock 1 unchanged)."""
    text = _extracted(tmp_path, "_flag_count", capsys)
    assert "wait.until.acquire.gpu flags[0] == 9;" in text and "wait.until.acquire.gpu flags[1] == 8;" in text
    assert "red.add.relaxed.gpu flags[0], 8;" in text


# The searches of the whole GEMM over two CTAs take many minutes on a two-core host (docs/cutlass.md, stream-K):
# run with SYNCVERIFY_SLOW=1.
SLOW = pytest.mark.skipif(not __import__("os").environ.get("SYNCVERIFY_SLOW"),
                          reason="a search over two whole GEMM CTAs takes many minutes; run with SYNCVERIFY_SLOW=1")


@SLOW
def test_the_stream_k_fixup_without_its_wait_races_on_the_partials(tmp_path, capsys):  # type: ignore[no-untyped-def]
    ptx, args = _streamk_args(tmp_path, "_no_wait")
    rc = main(["check", str(ptx), *args, "--after-first-error", "10", "--timeout", "3000"])
    out = capsys.readouterr().out
    assert rc == 1 and re.search(r"SV301 \w+ race on g\[\d\]", out), out


@SLOW
def test_the_stream_k_wait_for_a_count_never_reached_deadlocks(tmp_path, capsys):  # type: ignore[no-untyped-def]
    ptx, args = _streamk_args(tmp_path, "_flag_count")
    rc = main(["check", str(ptx), *args, "--after-first-error", "10", "--timeout", "3000"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert re.search(r"SV801 deadlock through global memory: .*wait\.until flags\[0\] == 9 — flags\[0\] is 8; "
                     r"written by", out), out


def test_cutlass_problem_computes_the_committed_host_output(tmp_path):  # type: ignore[no-untyped-def]
    """`--cutlass-problem 128x128x1024` on the stream-K GEMM builds cutlass_sm90_streamk_params.cu (nvcc, once,
    minutes) and gives the launch, fields, boxes and workspace committed beside the PTX; `--cutlass-splits 2`
    gives split-K (two CTAs on the tile too)."""
    import gzip
    import shutil

    from syncverify.ptx.cutlass_host import cutlass_include, host_launch, parse_output
    from syncverify.ptx.extract import find_nvcc
    from syncverify.ptx.parse import parse_ptx

    if find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None:
        pytest.skip("needs nvcc, the nvidia-cutlass package and c++filt")
    ptx = tmp_path / "sm90_gemm_coop_streamk_s2.ptx"
    ptx.write_bytes(gzip.decompress((PTX / "sm90_gemm_coop_streamk_s2.ptx.gz").read_bytes()))
    fn = parse_ptx(ptx.read_text(), str(ptx)).entries()[0]
    got = host_launch(str(ptx), fn, [], (128, 128, 1024, 1), None, quiet=True)
    want = parse_output(str(ptx), fn, (PTX / f"{HOST}.txt").read_text(), (PTX / f"{HOST}.bin").read_bytes())
    assert (got.grid, got.block, got.fields, got.boxes, got.workspace, got.decomposition) == \
        (want.grid, want.block, want.fields, want.boxes, want.workspace, want.decomposition)
    assert got.param_bytes() == want.param_bytes()
    split = host_launch(str(ptx), fn, [], (128, 128, 128, 1), None, quiet=True, splits=2)
    assert split.decomposition[0] == 1 and split.decomposition[-1] == 2 and split.grid == (1, 2, 1)


def test_the_whole_grid_is_refused_with_symbolic_extraction():
    from syncverify.ptx.symextract import extract_symbolic
    from syncverify.ptx.symvalues import SymParam

    with pytest.raises(PtxError, match="not available with --symbolic"):
        extract_symbolic(load_module(str(SPLITK)), _launch(), None, SymParam("1", 0, None, 1))


@pytest.mark.parametrize("kernel, opcode, why", [
    ("reset_under_data", "st.relaxed.gpu.global.b32", "may change a flag in global memory, and whether it runs is "
                                                      "decided by a value that is not known"),
    ("cas_spin", "atom.global.cas.b32", "reads a flag in global memory: its value decides the branch"),
])
def test_what_the_whole_grid_cannot_model_is_refused_at_its_line(kernel, opcode, why, capsys):  # type: ignore[no-untyped-def]
    """A flag reset under a branch decided by data, and a compare-and-swap spin: refused at the instruction,
    naming the CTA (of the grid) that reaches it, never skipped."""
    rc, out = _check(DATA / "refused.ptx", "--kernel", kernel, "--block", "32", "--grid", "2", "--whole-grid",
                     "--param", "0=0x10000000", "--param", "1=0x20000000", capsys=capsys)
    assert rc == 2 and why in out, out
    cta = 1 if kernel == "cas_spin" else 0
    assert re.search(rf"refused\.ptx:\d+:\d+: error: cannot extract \(warp 0 of CTA {cta}\)", out), out
    assert f"\t{opcode}" in out.replace(" \t", "\t") and "^" in out
