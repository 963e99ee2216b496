"""Cluster launch control in extraction (#34, item 3): `clusterlaunchcontrol.try_cancel` as the language's
`clc.try_cancel`, and the count of responses a CTA reads -- decided by the hardware -- as
`choose per cta CLC_RESPONSES` over the clusters of the grid (syncverify/ptx/clc.py, docs/extract.md).

tests/data/ptx/clc/clc_loop.cu is the protocol of CUTLASS's sm100 tile scheduler written out small (a scheduler
warp issuing try_cancel into a two-stage response ring, both warps waiting for each response, reading and
decoding it, and releasing its stage); its PTX builds (committed, no nvcc needed) are the kernel as written
and three seeded bugs. CUTLASS's own 1-SM sm100 GEMM, whose persistent loop is this scheduler, is in
tests/test_cutlass_host_sm100.py (it needs nvcc for its host program) and, checked whole, behind
SYNCVERIFY_SLOW=1 below.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract, find_nvcc
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
CLC = DATA / "clc"
SOURCE = (CLC / "clc_loop.cu").read_text().splitlines()


def _line(text: str) -> int:
    return next(i for i, s in enumerate(SOURCE, 1) if text in s)


def _text(ptx: Path, grid: int, cluster: int = 1) -> str:
    launch = Launch(block=(64, 1, 1), cluster=(cluster, 1, 1), grid=(grid, 1, 1))
    return extract(parse_ptx_file(str(ptx)), launch, source_names=True).text


def _check(capsys, ptx: Path, grid: int) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(["check", str(ptx), "--block", "64", "--grid", str(grid)])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _findings(text: str) -> set[tuple[str, int]]:
    """(code, line of clc_loop.cu) of every finding."""
    return {(m.group(2), int(m.group(1))) for m in re.finditer(r"clc_loop\.cu:(\d+):\d+: (SV\d{3}) ", text)}


def test_the_try_cancel_and_the_count_of_responses_are_extracted():  # type: ignore[no-untyped-def]
    """Three clusters: a CTA reads 1 to 3 responses (its own tile, then up to the two others'), declared as a
    `choose` over that range; the try_cancel is the language's, into the slot the load reads, completing on
    the stage's full barrier; the first request and its response are common to every count, the second
    only where there are two responses or more."""
    text = _text(CLC / "clc_loop_seed0.ptx", 3)
    assert "  choose per cta CLC_RESPONSES in 1..4;" in text
    assert text.count("clc.try_cancel response[0] -> full[0];") == 1  # the first request: every count
    assert "if CLC_RESPONSES == 2 {" in text and "if CLC_RESPONSES == 3 {" in text
    assert "if CLC_RESPONSES == 1 {" not in text  # one response: nothing after the first one
    assert "clc.try_cancel response[1] -> full[1];" in text


def test_one_cluster_reads_one_response():  # type: ignore[no-untyped-def]
    """The near twin: a grid of one cluster has no other cluster to cancel, so its one response fails: no
    `choose`, one request, and the loop runs once."""
    text = _text(CLC / "clc_loop_seed0.ptx", 1)
    assert "CLC_RESPONSES" not in text
    assert text.count("clc.try_cancel") == 1 and "response[1]" not in text


def test_the_loop_as_cutlass_runs_it_is_safe(capsys):  # type: ignore[no-untyped-def]
    """Every count of responses of two and three clusters: safe."""
    for grid in (2, 3):
        rc, out = _check(capsys, CLC / "clc_loop_seed0.ptx", grid)
        assert rc == 0 and "): safe" in out and not _findings(out), out


def test_a_stage_released_before_its_response_is_read_is_flagged(capsys):  # type: ignore[no-untyped-def]
    """Seed 1, consumer_release before the read: with three clusters the third request reuses the first
    slot, and it may write the response another warp is still to read: SV302 at the read's call. With two
    clusters no request reuses a slot, and the same kernel checks safe (the bug needs a third tile)."""
    rc, out = _check(capsys, CLC / "clc_loop_seed1.ptx", 3)
    assert rc == 1 and ("SV302", _line("const bool more")) in _findings(out), out
    rc, out = _check(capsys, CLC / "clc_loop_seed1.ptx", 2)
    assert rc == 0 and not _findings(out), out


def test_a_response_read_without_the_wait_is_a_race(capsys):  # type: ignore[no-untyped-def]
    """Seed 2, no consumer_wait: the read races with the asynchronous write of the try_cancel (SV301 at the
    read's call), at every grid size (the first response already)."""
    rc, out = _check(capsys, CLC / "clc_loop_seed2.ptx", 2)
    assert rc == 1 and ("SV301", _line("const bool more")) in _findings(out), out


def test_a_response_read_from_another_requests_slot_is_refused(capsys):  # type: ignore[no-untyped-def]
    """Seed 3, every response read from slot 0 of a two-slot ring: the second response is in slot 1, so the
    load of slot 0 is not the response the model would give it: refused at the query (exit 2), naming both
    slots, never checked with the wrong value."""
    ptx = CLC / "clc_loop_seed3.ptx"
    capsys.readouterr()
    assert main(["extract", str(ptx), "--block", "64", "--grid", "2"]) == 2
    err = capsys.readouterr().err
    query = next(i for i, s in enumerate(ptx.read_text().splitlines(), 1) if "query_cancel.is_canceled" in s)
    assert f"{ptx}:{query}:2: error: cannot extract" in err, err
    assert "response 2 is loaded from shared byte 0" in err and "writes byte 16" in err, err


def test_without_a_grid_the_query_is_refused():  # type: ignore[no-untyped-def]
    """How many responses say "canceled" depends on the clusters of the grid: without --grid the query is
    refused at its line, never read as "no more tiles"."""
    ptx = CLC / "clc_loop_seed0.ptx"
    with pytest.raises(PtxError) as err:
        extract(parse_ptx_file(str(ptx)), Launch(block=(64, 1, 1)))
    assert "query_cancel.is_canceled" in parse_ptx_file(str(ptx)).source_line(err.value.line)
    assert "decided by the hardware" in err.value.message


def test_the_multicast_form_in_a_cluster_of_several_ctas_is_refused(tmp_path):  # type: ignore[no-untyped-def]
    """`.multicast::cluster::all` writes every CTA's response: with a one-CTA cluster that is the issuing
    CTA's alone (extracted as the unicast form is), with two CTAs it is refused at the try_cancel."""
    src = (CLC / "clc_loop_seed0.ptx").read_text()
    ptx = tmp_path / "multicast.ptx"
    ptx.write_text(src.replace("complete_tx::bytes.b128", "complete_tx::bytes.multicast::cluster::all.b128"))
    shutil.copy(CLC / "clc_loop.cu", tmp_path / "clc_loop.cu")
    body = _text(ptx, 2).split("\n", 1)[1]  # after the line naming the file
    assert body == _text(CLC / "clc_loop_seed0.ptx", 2).split("\n", 1)[1]
    with pytest.raises(PtxError) as err:
        _text(ptx, 2, cluster=2)
    assert "clusterlaunchcontrol.try_cancel" in ptx.read_text().splitlines()[err.value.line - 1]
    assert "one-CTA clusters only" in err.value.message


# ---- CUTLASS's 1-SM sm100 GEMM (its CLC scheduler), checked whole ----------------------------------------

SLOW = pytest.mark.skipif(os.environ.get("SYNCVERIFY_SLOW") != "1", reason="SYNCVERIFY_SLOW=1: minutes each")


def _gemm(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return out


def _needs_host() -> None:
    from syncverify.ptx.cutlass_host import cutlass_include
    if find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None:
        pytest.skip("needs nvcc, the nvidia-cutlass package and c++filt for the GEMM's host program")


@SLOW
def test_the_1sm_gemms_clc_loop_extracts(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The 1-SM GEMM at 256x128x128 (two tiles, two CTAs): extraction goes through the CLC tile loop it was
    refused at (PTX line 2567, the branch on `is_valid` at sm100_tile_scheduler.hpp:433): the scheduler
    warp's try_cancel into each of the two response slots (PTX line 1851, sm100_tile_scheduler.hpp:402), one
    or two responses per CTA; at 128x128x128 (one tile) one response and no `choose`."""
    _needs_host()
    ptx = _gemm(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    capsys.readouterr()
    assert main(["extract", str(ptx), "--cutlass-problem", "256x128x128", "-o", str(tmp_path / "two.sync")]) == 0
    two = (tmp_path / "two.sync").read_text()
    assert "choose per cta CLC_RESPONSES in 1..3;" in two and "if CLC_RESPONSES == 2 {" in two
    tries = re.findall(r"clc\.try_cancel (\S+) -> \S+;.*sm100_tile_scheduler\.hpp:402.*ptx:1851", two)
    assert len(set(tries)) == 2, tries
    assert main(["extract", str(ptx), "--cutlass-problem", "128x128x128", "-o", str(tmp_path / "one.sync")]) == 0
    one = (tmp_path / "one.sync").read_text()
    assert "CLC_RESPONSES" not in one and len(re.findall(r"clc\.try_cancel ", one)) == 1


@SLOW
def test_the_1sm_gemm_with_its_clc_scheduler_finds_nothing(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """`check sm100_gemm_1sm_1x1_s2.ptx --cutlass-problem 256x128x128`: two tiles, two CTAs, each running one
    or two of them. Not decided on a 2-core machine within the default budgets (bench/CASE-STUDIES.md:
    inconclusive, no violation in 3.7 million states), so what is asserted is what holds: no finding that is an
    error, and never a "safe" the search did not finish."""
    if find_nvcc() is None:
        pytest.skip("needs nvcc for the host program")
    ptx = _gemm(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    capsys.readouterr()
    rc = main(["check", str(ptx), "--cutlass-problem", "256x128x128"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc in (0, 3) and "violation" not in text, text
    assert "): safe" in text or "inconclusive" in text, text


@SLOW
def test_the_1sm_gemm_reading_its_response_without_the_wait_is_flagged(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Seed 2 of tests/data/ptx/sm100_seeds/make_overlay.py (fetch_next_work without consumer_wait, one line of
    sm100_tile_scheduler.hpp changed through an include overlay) at one tile: the scheduler warp's read of the
    response races with its own try_cancel's asynchronous write (SV301 at the load, sm100_tile_scheduler.hpp:425,
    in fetch_next_work's call at :463); the MMA warp's query there is decoded in an outcome of its mainloop's
    probe. The unseeded build at the same shape extracts (its check is larger: bench/CASE-STUDIES.md)."""
    _needs_host()
    ptx = tmp_path / "seed2.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm100_seeds" / "sm100_gemm_1sm_1x1_s2_seed2.ptx.gz").read_bytes()))
    capsys.readouterr()
    rc = main(["check", str(ptx), "--cutlass-problem", "128x128x128"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 1, text
    first = re.search(r"^(\S+):(\d+):\d+: (SV\d{3}) ", text, re.M)
    assert first and first.group(1).endswith("sm100_tile_scheduler.hpp") and first.group(2, 3) == ("425", "SV301"), text
    assert "sm100_tile_scheduler.hpp:463" in text and "sm100_tile_scheduler.hpp:402" in text


@SLOW
def test_the_bmc_engine_agrees_on_the_clc_loop(capsys):  # type: ignore[no-untyped-def]
    """The Z3 bmc engine on the extracted protocols (every CLC_RESPONSES of three clusters): the kernel as
    written safe, the stage released before its response is read a violation (a minute or two each)."""
    for name, want in (("clc_loop_seed0.ptx", 0), ("clc_loop_seed1.ptx", 1)):
        capsys.readouterr()
        rc = main(["check", str(CLC / name), "--block", "64", "--grid", "3", "--engine", "bmc"])
        out = capsys.readouterr()
        assert rc == want, (name, out.out + out.err)
