"""Trimmed counterexamples keep what the message names: both accesses of a race, the releasing
arrive, the step that completes each phase involved; the same steps in text, JSON and SARIF."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from syncverify import Options, TraceStep, load
from syncverify.check import check_protocol
from syncverify.cli import main
from syncverify.engines.witness import completions, merge, trim

SPECS = Path(__file__).resolve().parent.parent / "specs"
WARP = re.compile(r"[A-Za-z_]\w*(?:\[\d+\])?\.w\d+(?:@cta\d+)?")


def diagnostics(name: str, full: bool = False):
    return check_protocol(load(str(SPECS / name)), Options(full_trace=full)).diagnostics


def named_access_kept(d) -> None:
    """Every warp the message names took a step in the trace; for a race, the other access (the
    related line) is a step of the warp the message says made it."""
    roles = {s.role for s in d.trace}
    for warp in set(WARP.findall(d.message)):
        assert warp in roles, f"{d.code}: {warp} named in the message, absent from the trace ({sorted(roles)})"
    m = re.search(r"with the (read|write) at line (\d+) by ([\w\[\].@]+)", d.message)
    if m and "async operation" not in d.message:
        line, who = int(m[2]), m[3]
        assert any(s.line == line and s.role == who for s in d.trace), (d.code, line, who)


@pytest.mark.parametrize("spec", ["cutlass_ws_ring_per_warp_release.sync", "cutlass_ws_ring_no_empty_wait.sync",
                                  "nvfuser_cb_no_war_wait.sync", "wgmma_release_before_wait.sync",
                                  "tilelang_bar_h_deadlock.sync"])
def test_trimmed_trace_shows_the_warps_the_message_names(spec):
    diags = diagnostics(spec)
    assert diags
    for d in diags:
        named_access_kept(d)


def test_per_warp_release_trace_holds_the_named_read_and_the_completing_arrive():
    (d,) = [d for d in diagnostics("cutlass_ws_ring_per_warp_release.sync") if d.code == "SV302"]
    reader = re.search(r"read at line 49 by (\S+);", d.message)[1]
    reads = [s for s in d.trace if s.line == 49 and s.role == reader]
    assert reads, "the read the message names"
    arrives = [s for s in d.trace if s.line == 50]
    assert any("phase 1" in s.state for s in arrives), "the arrive that completed empty[0]'s phase"
    assert d.trace[-1].note.endswith("SV302") and d.trace[-1].line == 41


def test_full_trace_names_the_same_warp():
    """The near twin: --full-trace is not trimmed, and its message is the same as the trimmed one's."""
    trimmed = {d.code: d for d in diagnostics("cutlass_ws_ring_per_warp_release.sync")}
    full = {d.code: d for d in diagnostics("cutlass_ws_ring_per_warp_release.sync", full=True)}
    assert trimmed["SV302"].message == full["SV302"].message
    assert len(full["SV302"].trace) > len(trimmed["SV302"].trace)
    assert {s.step for s in trimmed["SV302"].trace} <= {s.step for s in full["SV302"].trace}
    named_access_kept(full["SV302"])


def test_a_step_that_completes_a_generation_is_never_merged():
    for d in diagnostics("cutlass_ws_ring_no_empty_wait.sync"):
        for s, done in zip(d.trace, completions(d.trace), strict=True):
            if done:
                assert " warps: " not in s.role, (d.code, s)
    (race,) = [d for d in diagnostics("cutlass_ws_ring_no_empty_wait.sync") if d.code == "SV302"]
    sync_rows = [s for s in race.trace if s.op.startswith("syncthreads")]
    assert sync_rows[-1].state.startswith("bar 0: 0 arrived, gen 1")  # the completing one, a row of its own
    assert " warps: " not in sync_rows[-1].role


def _step(n: int, role: str, state: str = "", line: int = 5, op: str = "arrive m;") -> TraceStep:
    return TraceStep(step=n, cta=0, role=role, line=line, op=op, state=state)


def test_merge_counts_warps_and_keeps_the_completion_apart():
    steps = [_step(1, "a.w0", "m: phase 0 pending 3/4"), _step(2, "a.w1", "m: phase 0 pending 2/4"),
             _step(3, "a.w2", "m: phase 0 pending 1/4"), _step(4, "a.w3", "m: phase 1 pending 4/4")]
    rows = merge(steps)
    assert [r.role for r in rows] == ["3 warps: a.w0 … a.w2", "a.w3"]
    assert rows[0].step == 3 and rows[0].state == "m: phase 0 pending 1/4"
    assert completions(steps) == [set(), set(), set(), {"m"}]


def test_merge_leaves_one_warp_repeating_an_operation_alone():
    steps = [_step(1, "a.w0"), _step(2, "a.w0")]
    assert merge(steps) == tuple(steps)


def test_trim_keeps_the_completion_after_the_waiters_arrival():
    """A waiter's own arrival (kept: its warp is named) and a later arrival by another warp that
    completes the generation: that step is kept though no kept step comes after it on the barrier."""
    steps = [_step(1, "p.w0", "bar 0: 32 arrived, gen 0", op="syncthreads;"),
             *[_step(n, f"x.w{n}", "", line=9, op="read t;") for n in range(2, 14)],
             _step(14, "c.w1", "bar 0: 0 arrived, gen 1", op="syncthreads;"),
             _step(15, "p.w0", "", line=20, op="write t;")]
    kept = trim(steps, set())
    assert [s.step for s in kept] == [1, 14, 15]


def test_text_json_and_sarif_carry_the_same_steps(capsys):
    spec = str(SPECS / "cutlass_ws_ring_per_warp_release.sync")
    main(["check", "--format", "json", spec])
    (d,) = [d for d in json.loads(capsys.readouterr().out)["results"][0]["diagnostics"] if d["code"] == "SV302"]
    json_steps = [s["step"] for s in d["trace"]]
    main(["check", "--format", "sarif", spec])
    (r,) = [r for r in json.loads(capsys.readouterr().out)["runs"][0]["results"] if r["ruleId"] == "SV302"]
    sarif_steps = sorted(loc["executionOrder"] for tf in r["codeFlows"][0]["threadFlows"] for loc in tf["locations"])
    assert sarif_steps == json_steps
    reader = re.search(r"by (consumer\[\d\]\.w\d+)", d["message"])[1]
    assert any(reader in loc["location"]["message"]["text"] or tf["id"].startswith(reader)
               for tf in r["codeFlows"][0]["threadFlows"] for loc in tf["locations"])
