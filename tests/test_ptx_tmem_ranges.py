"""TMEM sub-ranges in extraction (#33, item 5): a `tcgen05.ld/st` is the rectangle of lanes x columns it touches.

Its address is `base + (lane << 16) + column` (PTX ISA §9.7.16.2.1, "Tensor Memory Addressing"), its columns the
shape's times `.num` (twice that packed/unpacked to 16 bits, §9.7.16.8.2; `.16x32bx2` up to its second half), its
lanes the warp's quarter of the warpgroup (§9.7.16.8.1, "Access restrictions"); an address that is not known is
the whole allocation. Kernels: tests/data/ptx/tmem/ranges.cu and shapes.cu (build commands in their heads).
"""

from __future__ import annotations

import re
from pathlib import Path

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import parse_ptx_file
from syncverify.result import Verdict

DATA = Path(__file__).parent / "data" / "ptx" / "tmem"
LAUNCH = Launch(block=(256, 1, 1))


def _body(name: str) -> str:
    return re.sub(r" *//[^\n]*", "", extract(parse_ptx_file(str(DATA / name)), LAUNCH).text)


def _check(capsys, name: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(["check", str(DATA / name), "--block", "256"])
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_stores_to_disjoint_rectangles_extract_with_their_ranges():
    """Warps 0 and 4 (both lanes 0-31) store columns 0..31 and 32..63, warp 1 (lanes 32-63) columns 0..31; warp 0's
    later load of columns 30..33 makes the 64 columns one region."""
    body = _body("ranges.ptx")
    assert "tmem t0 cols 64;" in body
    assert "tcgen05.st t0 lanes 0..32 cols 0..32;" in body
    assert "tcgen05.st t0 lanes 0..32 cols 32..64;" in body
    assert "tcgen05.st t0 lanes 32..64 cols 0..32;" in body
    assert "tcgen05.ld t0 lanes 0..32 cols 30..34;" in body


def test_disjoint_rectangles_are_safe_and_the_whole_region_reading_was_a_false_alarm(capsys):  # type: ignore[no-untyped-def]
    rc, text = _check(capsys, "ranges.ptx")
    assert rc == 0 and "1 file: 1 safe" in text
    # the same protocol with every access the whole region (extraction before ranges): the two unordered
    # stores of warps 0 and 4 are a write-write race that the kernel does not have
    whole = re.sub(r" lanes \d+\.\.\d+| cols \d+\.\.\d+(?=;)", "", _body("ranges.ptx"))
    res = check_protocol(syncverify.load(whole, path="whole.sync"), Options(timeout=60))
    assert res.verdict is Verdict.VIOLATION
    assert {d.code for d in res.diagnostics if d.is_error} == {"SV303"}


def test_overlapping_columns_in_one_quarter_race_at_the_store(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_OVERLAP: warp 4 stores from column 16, over warp 0's columns 16..31 in the same lanes."""
    assert "tcgen05.st t0 lanes 0..32 cols 16..48;" in _body("ranges_overlap.ptx")
    rc, text = _check(capsys, "ranges_overlap.ptx")
    assert rc == 1
    line = next(i for i, s in enumerate((DATA / "ranges.cu").read_text().splitlines(), 1)
                if "store32(base + SECOND_COL" in s)
    assert re.search(rf"ranges\.cu:{line}:\d+: SV303 WAW race on tmem t0: tcgen05\.st", text), text
    # warp 1's store (other lanes, same columns as warp 0) is in no finding
    assert "ranges.cu:38" not in text.split("1 file")[0].split("SV303")[1].split("\n")[0]


def test_packed_and_split_shapes_and_an_unknown_address(capsys):  # type: ignore[no-untyped-def]
    """`.32x32b.x8.pack::16b` covers 16 columns, `.16x32bx2.x2` with immHalfSplitoff 32 columns 64..97, a store at a
    column read from global memory every column (no `cols`): three disjoint rectangles, safe."""
    body = _body("shapes.ptx")
    assert "tmem t0 cols 128;" in body
    assert "tcgen05.ld t0 lanes 0..32 cols 0..16;" in body
    assert "tcgen05.st t0 lanes 0..32 cols 64..98;" in body
    assert "tcgen05.st t0 lanes 32..64;" in body
    rc, text = _check(capsys, "shapes.ptx")
    assert rc == 0 and "1 safe" in text


def test_an_unknown_address_in_the_loading_warps_lanes_races(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_UNKNOWN_IN_QUARTER_0: the store at the unknown column is issued by warp 4, in warp 0's lanes: it may
    be any column, so it races with warp 0's load. Every pair of rectangles meets, so the statements name the
    region alone (the same findings, fewer words)."""
    body = _body("shapes_unknown_q0.ptx")
    assert "tcgen05.st t0;" in body and "tcgen05.ld t0;" in body and " lanes " not in body
    rc, text = _check(capsys, "shapes_unknown_q0.ptx")
    assert rc == 1
    assert re.search(r"shapes\.cu:\d+:\d+: SV302 WAR race on tmem t0: tcgen05\.st", text), text


def test_the_lift_agrees_on_both(capsys):  # type: ignore[no-untyped-def]
    for name, rc in (("ranges.ptx", 0), ("ranges_overlap.ptx", 1)):
        capsys.readouterr()
        assert main(["check", str(DATA / name), "--block", "256", "--engine", "z3"]) == rc
