"""`syncverify trace`: the swimlane page's structure, its errors, and a real render in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from syncverify import Options, check_protocol, load
from syncverify.cli import main
from syncverify.report.swimlane import process_lanes, render_html, views_for

SPECS = Path(__file__).resolve().parent.parent / "specs"
RACE = SPECS / "cutlass_ws_ring_no_empty_wait.sync"
RACE_DEFINES = ["-D", "STAGES=1", "-D", "ITERS=2"]
SAFE = SPECS / "cutlass_ws_ring.sync"
DEADLOCK = SPECS / "tilelang_bar_h_deadlock.sync"


class _Elements(HTMLParser):
    """Every element with its attributes, its parent chain, and the text of <title> children."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self._stack: list[dict] = []

    def handle_starttag(self, tag, attrs):
        el = {"tag": tag, "attrs": dict(attrs), "parents": list(self._stack), "title": "", "text": ""}
        self.elements.append(el)
        if tag not in ("meta", "br"):  # HTML void elements; SVG ones are written self-closed
            self._stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "parents": list(self._stack), "title": "",
                              "text": ""})

    def handle_endtag(self, tag):
        while self._stack:
            el = self._stack.pop()
            if el["tag"] == tag:
                break

    def handle_data(self, data):
        if self._stack:
            self._stack[-1]["text"] += data
            if self._stack[-1]["tag"] == "title" and len(self._stack) > 1:
                self._stack[-2]["title"] += data


def parse(page: str) -> list[dict]:
    p = _Elements()
    p.feed(page)
    return p.elements


def classes(el: dict) -> set[str]:
    return set(el["attrs"].get("class", "").split())


def in_section(elements: list[dict], n: int) -> list[dict]:
    section = [e for e in elements if e["tag"] == "section"][n]
    return [e for e in elements if any(p is section for p in e["parents"])]


def trace(tmp_path: Path, spec: Path, *extra: str) -> tuple[int, str]:
    out = tmp_path / "trace.html"
    rc = main(["trace", str(spec), "-o", str(out), *extra])
    return rc, out.read_text(encoding="utf-8") if out.exists() else ""


# ----------------------------------------------------------------------------- structure


def test_counterexample_page_has_a_lane_per_process_and_the_failing_step(tmp_path, capsys):
    rc, page = trace(tmp_path, RACE, *RACE_DEFINES, "--code", "SV302")
    assert rc == 1  # the verdict's exit code, as for check
    assert "SV302" in capsys.readouterr().out
    protocol = load(RACE, {"STAGES": 1, "ITERS": 2})
    source = protocol.source.splitlines()
    elements = parse(page)
    (section,) = [e for e in elements if e["tag"] == "section"]
    assert section["attrs"]["data-code"] == "SV302"
    inside = in_section(elements, 0)
    lanes = [e for e in inside if "lane" in classes(e)]
    procs = [e for e in lanes if e["attrs"]["data-kind"] == "process"]
    members = [m for e in procs for m in e["attrs"]["data-members"].split()]
    assert sorted(members) == sorted(process_lanes(protocol)) and len(members) == 12  # 1 + 3 idle + 8 consumers
    assert len(procs) < 12 and sum(int(e["attrs"]["data-count"]) for e in procs) == 12  # identical warps folded
    assert any(e["attrs"]["data-lane"] == "cta.w1 … cta.w3 (×3)" for e in procs)  # the three idle warps
    assert [e for e in lanes if e["attrs"]["data-kind"] == "agent"], "the TMA copy has a lane of its own"
    steps = [e for e in inside if "step" in classes(e)]
    assert len(steps) == int(section["attrs"]["data-steps"]) > 10
    failing = [e for e in steps if "fail" in classes(e)]
    assert len(failing) == 1 and failing[0] is steps[-1]
    result = check_protocol(protocol, Options(full_trace=True))
    race = next(d for d in result.diagnostics if d.code == "SV302")
    assert failing[0]["attrs"]["data-line"] == str(race.span.line)
    for el in steps:  # hover text: the step, then `line N: <the spec line>`
        line = int(el["attrs"]["data-line"])
        assert f"line {line}: {' '.join(source[line - 1].split())}" in el["title"], el["title"]
    tracks = {e["attrs"]["data-barrier"] for e in inside if "barrier-track" in classes(e)}
    assert {"full[0]", "empty[0]", "bar 0"} <= tracks
    phases = [e for e in inside if "phase" in classes(e) and e["attrs"]["data-barrier"] == "full[0]"]
    assert len(phases) >= 2, "full[0] completes phase 0 in this trace"


def test_every_counterexample_gets_a_section_by_default(tmp_path):
    rc, page = trace(tmp_path, RACE, *RACE_DEFINES)
    assert rc == 1
    codes = [e["attrs"]["data-code"] for e in parse(page) if e["tag"] == "section"]
    assert sorted(codes) == ["SV302", "SV303", "SV504", "SV505"]  # the early arrive: the SV505 warning


def test_deadlock_marks_every_blocked_lane(tmp_path):
    rc, page = trace(tmp_path, DEADLOCK)
    assert rc == 1
    elements = in_section(parse(page), 0)
    blocked = [e["attrs"]["data-lane"] for e in elements if "blocked" in classes(e)]
    result = check_protocol(load(DEADLOCK), Options(full_trace=True))
    (dl,) = [d for d in result.diagnostics if d.code == "SV201"]
    assert blocked and all(f"{lane} line " in dl.message for lane in blocked)
    assert len(blocked) == dl.message.count(" line ")


def test_safe_protocol_shows_one_complete_schedule(tmp_path):
    # two stages: the check behind the page proves every trip count in about 2,000 states (59,000 at four)
    rc, page = trace(tmp_path, SAFE, "-D", "ITERS=2", "-D", "STAGES=2")
    assert rc == 0
    elements = parse(page)
    (section,) = [e for e in elements if e["tag"] == "section"]
    assert section["attrs"]["data-code"] == ""
    assert "every process ran to its end" in page
    inside = in_section(elements, 0)
    steps = [e for e in inside if "step" in classes(e)]
    assert not [e for e in steps if "fail" in classes(e)]
    issued = sum(1 for e in steps if "tma.load" in e["title"].split("\n")[1] and e["attrs"]["data-kind"] == "async")
    completed = sum(1 for e in steps if e["attrs"]["data-kind"] == "complete")
    assert issued == completed == 2  # ITERS copies, each completes in the schedule
    by_lane = Counter(e["title"].split(" · ")[1].split("\n")[0] for e in steps if e["attrs"]["data-kind"] != "complete")
    assert set(by_lane) == set(process_lanes(load(SAFE, {"ITERS": 2, "STAGES": 2})))  # every warp ran


def test_page_is_self_contained(tmp_path):
    _, page = trace(tmp_path, RACE, *RACE_DEFINES)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')
    assert not [e for e in parse(page) if "src" in e["attrs"] or "href" in e["attrs"]]


def test_builder_protocol_trace_quotes_the_generated_lines():
    from syncverify import ProtocolBuilder

    b = ProtocolBuilder("tiny")
    b.cta_threads(64)
    w = b.role("w", "warp", 0, 2)
    buf = b.smem("buf", 16)
    with b.if_(w):
        line = b.write(buf, comment="store from node %12")
    protocol = b.build()
    result = check_protocol(protocol, Options(full_trace=True))
    page = render_html(protocol, result, views_for(protocol, result))
    assert f"line {line}: write buf; // store from node %12" in page  # WAW between the two warps
    assert "SV303" in page


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("args, why", [
    (["trace", str(SPECS / "no_such.sync")], "no such file"),
    (["trace", str(SAFE), "-D", "ITERS=x"], "not an integer"),
    (["trace", str(SAFE), "-D", "NOPE=1"], "NOPE"),
    (["trace", str(RACE), *RACE_DEFINES, "--code", "SV201"], "no counterexample for SV201"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, args, why):
    out = tmp_path / "t.html"
    assert main([*args, "-o", str(out)]) == 2
    assert why in capsys.readouterr().err
    assert not out.exists()


def test_unwritable_output_exits_2(tmp_path, capsys):
    """Said before the search (which proves the safe spec for every iteration count first)."""
    assert main(["trace", str(SAFE), "-D", "ITERS=1", "-o", str(tmp_path)]) == 2  # a directory
    assert f"cannot write {tmp_path}: Is a directory" in capsys.readouterr().err
    assert main(["trace", str(SAFE), "-D", "ITERS=1", "-o", str(tmp_path / "gone" / "t.html")]) == 2
    assert f"cannot write {tmp_path / 'gone' / 't.html'}: no folder {tmp_path / 'gone'}" in capsys.readouterr().err


# ----------------------------------------------------------------------------- rendering


def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        cur = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                cur[i] = (cur[i] + cur[i - channels]) & 0xFF
        elif f == 2:
            cur = bytearray((a + b) & 0xFF for a, b in zip(cur, prev, strict=True))
        elif f == 3:
            for i in range(stride):
                left = cur[i - channels] if i >= channels else 0
                cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = cur[i - channels] if i >= channels else 0
                b, c = prev[i], prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(cur) if channels == 3 else bytes(v for i, v in enumerate(cur) if i % 4 != 3))
        prev = cur
    return width, height, rows


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def screenshot(browser: str, page: Path, png: Path, tmp: Path) -> tuple[float, int, int]:
    """Render a page headless; return (non-white pixel fraction, distinct colours, strong-red pixels)."""
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", f"--user-data-dir={tmp / 'profile'}", f"--screenshot={png}",
                    "--window-size=900,640", page.as_uri()], capture_output=True, timeout=120, check=False)
    assert png.exists(), "chromium wrote no screenshot"
    width, height, rows = read_png(png.read_bytes())
    assert (width, height) == (900, 640)
    pixels = Counter(row[i:i + 3] for row in rows for i in range(0, len(row), 3))
    total = width * height
    white = sum(n for px, n in pixels.items() if min(px) >= 245)
    red = sum(n for px, n in pixels.items() if px[0] > 190 and px[1] < 90 and px[2] < 90)
    return 1 - white / total, len(pixels), red


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (Debian package `chromium`)")
def test_headless_chromium_renders_a_non_blank_swimlane(tmp_path):
    browser = _chromium()
    assert browser is not None
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    empty_ink, empty_colours, _ = screenshot(browser, blank, tmp_path / "blank.png", tmp_path)
    assert empty_ink < 0.01 and empty_colours <= 2  # the measure can tell a blank page

    rc, _ = trace(tmp_path, RACE, *RACE_DEFINES, "--code", "SV302")
    assert rc == 1
    ink, colours, red = screenshot(browser, tmp_path / "trace.html", tmp_path / "trace.png", tmp_path)
    assert ink > 0.05, f"only {ink:.1%} of the page is not white"
    assert colours >= 12, f"only {colours} distinct colours"
    assert red > 20, "the failing step's red outline is not visible"


def test_warning_only_protocol_shows_the_warning_and_a_schedule(tmp_path):
    rc, page = trace(tmp_path, SPECS / "fa3_pingpong.sync")
    assert rc == 0  # warnings do not change the verdict
    codes = [e["attrs"]["data-code"] for e in parse(page) if e["tag"] == "section"]
    assert codes == ["SV203", ""]


def test_schedule_stops_at_a_deadlock_or_a_violation_and_says_so():
    from syncverify.report.swimlane import schedule

    stuck = schedule(load(DEADLOCK))
    assert stuck.failing is None and stuck.notes[0].startswith("deadlock: ")
    assert set(stuck.blocked) == set(process_lanes(load(DEADLOCK)))  # every warp waits on a barrier
    racy = schedule(load(SPECS / "wgmma_release_before_wait.sync"))
    assert racy.failing == len(racy.steps) and racy.steps[-1].note.endswith("<- SV302")
    assert "violation, SV302" in racy.notes[0]
    whole = schedule(load(SAFE, {"ITERS": 2, "STAGES": 2}))
    assert whole.failing is None and not whole.blocked and whole.notes == ("every process ran to its end",)


def test_long_schedules_get_narrower_steps():
    from syncverify.report.swimlane import TraceView, render_svg, schedule

    protocol = load(SAFE, {"ITERS": 2, "STAGES": 2})
    view = schedule(protocol)
    lanes = process_lanes(protocol)
    narrow = render_svg(protocol, TraceView(title="t", steps=view.steps * 30), lanes)
    wide = render_svg(protocol, view, lanes)
    assert 'width="28" height="18"' in wide and 'width="6" height="18"' in narrow
    assert 'class="step-label"' in wide and 'class="step-label"' not in narrow


# ----------------------------------------------------------------------------- what explains the bug

PER_WARP = SPECS / "cutlass_ws_ring_per_warp_release.sync"


def test_page_draws_the_reported_steps_both_accesses_and_release_acquire_edges(tmp_path, capsys):
    rc, page = trace(tmp_path, PER_WARP)
    assert rc == 1
    elements = in_section(parse(page), 0)
    steps = [e for e in elements if "step" in classes(e) and e["tag"] == "rect"]
    numbers = [int(e["attrs"]["data-step"]) for e in steps]
    # the same steps as the JSON report (whose rows of one operation by several warps are merged)
    capsys.readouterr()
    main(["check", "--format", "json", str(PER_WARP)])
    report = json.loads(capsys.readouterr().out)["results"][0]
    (race,) = [d for d in report["diagnostics"] if d["code"] == "SV302"]
    reported = [s["step"] for s in race["trace"]]
    assert set(reported) <= set(numbers)
    merged = {(s["line"], s["op"]) for s in race["trace"] if " warps: " in s["role"]}
    for e in steps:
        if int(e["attrs"]["data-step"]) not in reported:
            line = int(e["attrs"]["data-line"])
            assert any(m[0] == line for m in merged), "a step the report does not show"
    # every box carries a label
    labels = {int(e["attrs"]["data-step"]): e["text"] for e in elements if "step-label" in classes(e)}
    assert set(labels) == set(numbers) and labels[numbers[-1]] == "tma"
    # both accesses: the failing copy, and the read by the warp the message names
    reader = re.search(r"read at line 49 by (\S+);", race["message"])[1]
    (other,) = [e for e in steps if "other-access" in classes(e)]
    assert other["attrs"]["data-line"] == "49" and reader in other["title"]
    assert next(e for e in steps if "fail" in classes(e))["attrs"]["data-step"] == str(numbers[-1])
    # release -> acquire: the copy's completion to the consumer's wait on full[0], the last
    # consumer arrival on empty[0] to the producer's wait
    edges = {(e["attrs"]["data-barrier"], int(e["attrs"]["data-from"]), int(e["attrs"]["data-to"]))
             for e in elements if "edge" in classes(e)}
    by_step = {s["step"]: s for s in race["trace"]}
    assert any(b == "full[0]" and by_step[f]["role"] == "async agent" and by_step[t]["role"] == reader
               for b, f, t in edges)
    assert any(b == "empty[0]" and by_step[t]["role"] == "producer.w0" and by_step[t]["op"].startswith("wait")
               for b, f, t in edges)
    # copies still in flight at the race have lanes
    pending = [e for e in elements if "inflight" in classes(e) and "pending" in classes(e)]
    assert pending and all("still in flight" in e["title"] for e in pending)


def test_full_trace_option_draws_every_step(tmp_path):
    _, trimmed = trace(tmp_path, PER_WARP)
    _, full = trace(tmp_path, PER_WARP, "--full-trace")
    n = [len([e for e in in_section(parse(p), 0) if "step" in classes(e) and e["tag"] == "rect"])
         for p in (trimmed, full)]
    assert n[0] < n[1] == 22


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (Debian package `chromium`)")
def test_failing_step_and_other_access_are_in_view_at_1600_px(tmp_path):
    """A 50-step trace is wider than the window: the page opens scrolled to its end, where the
    failing step (red) and the other access (amber outline) are."""
    browser = _chromium()
    rc, _ = trace(tmp_path, RACE, "--code", "SV302", "--full-trace")
    assert rc == 1
    png = tmp_path / "wide.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
                    "--window-size=1600,900", (tmp_path / "trace.html").as_uri()], capture_output=True, timeout=120,
                   check=False)
    width, _, rows = read_png(png.read_bytes())
    assert width == 1600
    pixels = Counter(row[i:i + 3] for row in rows for i in range(0, len(row), 3))
    red = sum(n for px, n in pixels.items() if px[0] > 190 and px[1] < 60 and px[2] < 60)
    amber = sum(n for px, n in pixels.items() if px[0] > 230 and 140 < px[1] < 175 and px[2] < 30)
    assert red > 20, "the failing step's red outline is off-screen"
    assert amber > 20, "the other access's outline is off-screen"
