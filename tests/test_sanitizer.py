"""The compute-sanitizer report parser, on reports captured on an H200 (tests/data/sanitizer/).

Each report is the log file written by compute-sanitizer 2025.3.1 (CUDA 13.0) around the runner's child,
kept verbatim, with a copy of the kernel source it ran (the spec lines come from its `/* line N` comments).
No GPU needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.gpu import sanitizer as sz

DATA = Path(__file__).resolve().parent / "data" / "sanitizer"


def _parse(tool: str, log: str, kernel: str = "") -> sz.Report:
    source = (DATA / kernel).read_text() if kernel else ""
    return sz.parse(tool, (DATA / log).read_text(), source)


def test_clean_report_has_no_findings():
    rep = _parse("racecheck", "racecheck_clean_cutlass_ws_ring.txt")
    assert rep.ran and rep.clean and rep.findings == []
    assert rep.summary() == "racecheck: clean"


def test_race_with_several_partners_is_one_finding_with_every_hazard_counted():
    rep = _parse("racecheck", "racecheck_cutlass_ws_ring_no_empty_wait.txt", "cutlass_ws_ring_no_empty_wait.cu")
    assert len(rep.findings) == 1
    f = rep.findings[0]
    assert f.kind == "race Read/Write" and f.severity == "error"
    assert f.count == 28672 + 3 * 32768  # "[N hazards]" of each "and Write access" line
    assert f.locations == ["cutlass_ws_ring_no_empty_wait.cu:108", "cutlass_ws_ring_no_empty_wait.cu:245"]
    # line 245 is the tma.load of spec line 47; line 108 is inside sv_check, which belongs to no spec line
    assert f.spec_lines == [47]


def test_race_in_a_replay_counts_both_read_sites():
    rep = _parse("racecheck", "racecheck_cutlass_ws_ring_per_warp_release_replay.txt",
                 "cutlass_ws_ring_per_warp_release_replay.cu")
    (f,) = rep.findings
    assert f.kind == "race Write/Read" and f.count == 63488 + 15872 and f.spec_lines == [41]
    assert "racecheck: race Write/Read x79360 at spec line 41" == rep.summary()


def test_synccheck_reports_are_merged_per_kind_and_place():
    rep = _parse("synccheck", "synccheck_nvfuser_cb_no_war_wait.txt", "nvfuser_cb_no_war_wait.cu")
    (f,) = rep.findings  # 32 reports, one per thread of the warp, same place
    assert f.kind == "barrier error: Missing wait" and f.count == 32
    assert f.locations == ["nvfuser_cb_no_war_wait.cu:282"] and f.spec_lines == [63]
    assert "device.py" not in " ".join(f.locations)  # host backtrace frames are not kernel locations


def test_missing_init_in_the_peer_init_replay():
    rep = _parse("synccheck", "synccheck_peer_init_race_replay.txt", "peer_init_race_replay.cu")
    (f,) = rep.findings
    assert (f.kind, f.count, f.spec_lines) == ("barrier error: Missing init", 1, [34])


def test_summary_lines_are_read_when_the_child_exits_by_itself():
    """Reports of a child that ran to its end end with the sanitizer's summary (the runner waits for it)."""
    clean = _parse("racecheck", "racecheck_clean_cutlass_ws_ring_with_summary.txt")
    assert clean.clean and clean.hazards == (0, 0, 0)
    race = _parse("racecheck", "racecheck_cutlass_ws_ring_per_warp_release_replay_with_summary.txt",
                  "cutlass_ws_ring_per_warp_release_replay.cu")
    assert race.hazards == (1, 1, 0) and race.findings[0].count == 79360
    text = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert sz.parse("synccheck", text).errors == 0


def test_an_empty_log_is_no_report():
    rep = sz.parse("synccheck", "")
    assert not rep.ran and not rep.clean


def test_spec_line_of_stops_at_helper_functions():
    src = ["SV_DEVICE void sv_check() {", "  x;", "}", "sv_kernel(u32* status) {", "  {  /* line 49: read */", "  y;"]
    assert sz.spec_line_of(src, 6) == 49
    assert sz.spec_line_of(src, 2) is None


def test_command_writes_the_report_to_its_own_file():
    cmd = sz.command("racecheck", "/tmp/report.txt")
    assert cmd[1:5] == ["--tool", "racecheck", "--log-file", "/tmp/report.txt"]
    with pytest.raises(ValueError):
        sz.command("memcheck", "/tmp/x")


def test_report_json_shape():
    rep = _parse("synccheck", "synccheck_peer_init_race_replay.txt", "peer_init_race_replay.cu")
    js = rep.to_json()
    assert js["tool"] == "synccheck" and js["clean"] is False
    assert js["findings"][0]["kind"] == "barrier error: Missing init"
