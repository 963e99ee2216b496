"""`check` as it runs and its conventions: streamed findings (text, JSON Lines), progress outside a
terminal, --fail-fast, the summary line, --version, help with defaults, stdin, width, per-site
suppression, [tool.syncverify] defaults."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from syncverify.check import Options
from syncverify.cli import main
from syncverify.diagnostics import make
from syncverify.report.live import Live, summary_line
from syncverify.result import CheckResult, Verdict

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
RACE = SPECS / "cutlass_ws_ring_per_warp_release.sync"
SAFE = SPECS / "peer_init_fixed.sync"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["check", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


# ---------------------------------------------------------------------------- streaming


def test_findings_are_streamed_before_the_search_ends():
    """The finding reaches the output while the search is still running: `on_finding` writes it,
    and the file's verdict line comes only after."""
    out = io.StringIO()
    seen_during: list[str] = []

    def check(path: str, options: Options) -> CheckResult:
        d = make("SV302", "WAR race on t", None)
        options.on_finding(d)
        seen_during.append(out.getvalue())
        return CheckResult(path, "p", Verdict.VIOLATION, "ITERS=1", diagnostics=(d,))

    live = Live(fmt="text", quiet=True, out=out, err=io.StringIO())
    live.finish([live.check("x.sync", Options(), check)])
    assert "SV302 WAR race on t" in seen_during[0] and "violation" not in seen_during[0]
    assert out.getvalue().count("SV302") == 1  # not printed again at the end


def test_jsonl_records(capsys):
    rc, out, _ = run(capsys, "--format", "jsonl", RACE, SAFE)
    assert rc == 1
    records = [json.loads(line) for line in out.splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds[-1] == "summary" and kinds.count("result") == 2
    first_result = kinds.index("result")
    assert {"SV302", "SV508"} <= {r["code"] for r in records[:first_result] if r["kind"] == "diagnostic"}
    assert records[-1] | {"seconds": 0} == {"kind": "summary", "files": 2, "safe": 1, "violation": 1, "error": 0,
                                           "inconclusive": 0, "seconds": 0, "exit_code": 1, "stopped_early": False}
    result = records[first_result]
    assert result["verdict"] == "violation" and result["path"].endswith(RACE.name)


def test_fail_fast_stops_the_search_and_the_run(capsys):
    spec = SPECS / "cutlass_ws_ring_no_empty_wait.sync"  # four distinct errors when searched whole
    rc, out, _err = run(capsys, "--format", "jsonl", "--fail-fast", spec, SAFE)
    assert rc == 1
    records = [json.loads(line) for line in out.splitlines()]
    (result,) = [r for r in records if r["kind"] == "result"]  # the second file is not checked
    searched = [d for d in result["diagnostics"] if d["trace"]]
    assert len(searched) == 1 and "--fail-fast" in result["coverage"]
    assert records[-1]["stopped_early"] is True and records[-1]["files"] == 1
    rc, out, _ = run(capsys, "--format", "jsonl", spec)  # the near twin: without it, all four
    (result,) = [json.loads(line) for line in out.splitlines() if '"kind": "result"' in line]
    assert {d["code"] for d in result["diagnostics"]} >= {"SV302", "SV303", "SV504", "SV505"}


def test_plain_progress_lines_outside_a_terminal(monkeypatch):
    monkeypatch.setattr("syncverify.report.live.PROGRESS_EVERY", 0.0)
    err = io.StringIO()

    def check(path: str, options: Options) -> CheckResult:
        if options.progress is not None:
            options.progress(1000, 50, 2.0, 64.0)
        return CheckResult(path, "p", Verdict.SAFE, "")

    Live(fmt="text", out=io.StringIO(), err=err).check("x.sync", Options(), check)
    assert "syncverify: x.sync: 1,000 states, 500/s, frontier 50, 64 MB, 2.0 s" in err.getvalue()
    err = io.StringIO()
    Live(fmt="text", quiet=True, out=io.StringIO(), err=err).check("x.sync", Options(), check)
    assert err.getvalue() == ""


def test_summary_line(capsys):
    rc, _out, err = run(capsys, RACE, SAFE)
    assert rc == 1
    assert err.strip().splitlines()[-1].startswith("2 files: 1 safe, 1 violation, 0 inconclusive in ")
    assert summary_line({"files": 23, "safe": 14, "violation": 9, "inconclusive": 0, "error": 0}, 16.5) == \
        "23 files: 14 safe, 9 violations, 0 inconclusive in 16.5 s"


# ---------------------------------------------------------------------------- conventions


def test_version_and_help_with_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("syncverify 0.")
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "wall-clock limit of each check (depends on the machine's load) (default: 600.0)" in text
    assert "(default: text)" in text
    assert "(default: False)" not in text


def test_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(RACE.read_text()))
    rc, out, _ = run(capsys, "-")
    assert rc == 1
    assert "<stdin>:41:9: SV302" in out and "tma.load tile[s]" in out  # the snippet from the text read


def test_piped_text_is_not_folded_and_steps_are_one_line_each(capsys):
    _rc, out, _ = run(capsys, RACE)
    steps = [line for line in out.splitlines() if line.strip().startswith("16 ")]
    assert steps and "read tile[s];" in steps[0] and "consumer[0].w1" in steps[0]
    assert max(map(len, out.splitlines())) > 120  # the long message stays on its line


def test_width_option_lays_the_trace_out_as_a_table_of_that_width(capsys):
    _rc, out, _ = run(capsys, "--width", "70", RACE)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("step"))
    table = lines[start:start + 10]
    assert all(len(line) <= 70 for line in table) and "state after" in table[0]


def test_explain_renders_on_a_terminal_only(capsys):
    assert main(["explain", "SV508"]) == 0
    assert capsys.readouterr().out.startswith("## SV508 — per-warp release without syncwarp")


# ---------------------------------------------------------------------------- suppression

SCOPE = SPECS / "cluster_multicast_ring_cta_scope.sync"


def _allowing(tmp_path: Path, spec: Path, line: int, comment: str) -> Path:
    lines = spec.read_text().splitlines()
    lines[line - 1] += "  " + comment
    out = tmp_path / spec.name
    out.write_text("\n".join(lines) + "\n")
    return out


def test_allowed_error_that_goes_on_is_reported_suppressed(tmp_path, capsys):
    spec = _allowing(tmp_path, SPECS / "nvfuser_cb_prologue_unobserved_phase.sync", 70,
                     "// syncverify: allow SV502 — the prologue's phase is consumed by design")
    rc, out, _ = run(capsys, "--format", "json", spec)
    (r,) = json.loads(out)["results"]
    (d,) = [d for d in r["diagnostics"] if d["code"] == "SV502"]
    assert d["suppressed"] == "the prologue's phase is consumed by design"
    assert r["verdict"] == "safe" and rc == 0
    rc, out, _ = run(capsys, "--format", "sarif", spec)
    (res,) = [x for x in json.loads(out)["runs"][0]["results"] if x["ruleId"] == "SV502"]
    assert res["suppressions"] == [{"kind": "inSource", "justification": "the prologue's phase is consumed by design"}]


def test_allowed_error_that_ends_paths_leaves_the_verdict_inconclusive(tmp_path, capsys):
    spec = _allowing(tmp_path, SPECS / "wgmma_release_before_wait.sync", 37, "// syncverify: allow SV302 — reviewed")
    rc, out, _ = run(capsys, "--format", "json", spec)
    (r,) = json.loads(out)["results"]
    assert r["verdict"] == "inconclusive" and rc == 3 and "SV302 at line 37" in r["coverage"]


def test_allow_for_another_code_or_line_changes_nothing(tmp_path, capsys):
    spec = _allowing(tmp_path, SPECS / "wgmma_release_before_wait.sync", 37, "// syncverify: allow SV303 — wrong code")
    rc, out, _ = run(capsys, "--format", "json", spec)
    assert rc == 1 and all(d["suppressed"] is None for d in json.loads(out)["results"][0]["diagnostics"])
    spec = _allowing(tmp_path, SPECS / "wgmma_release_before_wait.sync", 38, "// syncverify: allow SV302 — wrong line")
    assert run(capsys, spec)[0] == 1


# ---------------------------------------------------------------------------- [tool.syncverify]


def test_pyproject_defaults_and_flags_win(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.syncverify]\nformat = "json"\nfail-fast = true\n')
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, SPECS / "cutlass_ws_ring_no_empty_wait.sync")
    (r,) = json.loads(out)["results"]
    assert rc == 1 and "--fail-fast" in r["coverage"]
    rc, out, _ = run(capsys, "--format", "text", SAFE)
    assert rc == 0 and "safe" in out and not out.startswith("{")


def test_pyproject_unknown_key_is_an_input_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.syncverify]\ntimout = 5\n")
    monkeypatch.chdir(tmp_path)
    rc, _out, err = run(capsys, SAFE)
    assert rc == 2 and "unknown key `timout`" in err


def test_hook_budget_is_short():
    hook = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "--timeout 60" in hook


def test_progress_line_from_a_real_pipe():
    """A search of several seconds, its stderr a pipe: plain progress lines appear."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "syncverify", "check", "-D", "ITERS=1024", "--timeout", "6",
                           str(SPECS / "cluster_multicast_ring.sync")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 3
    assert any(line.startswith("syncverify: ") and " states, " in line and " MB, " in line
               for line in proc.stderr.splitlines())


def test_explain_is_rendered_markdown_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["explain", "SV508"]) == 0
    out = capsys.readouterr().out
    assert "per-warp release without syncwarp" in out and "## SV508" not in out and "**Meaning.**" not in out


def test_summary_counts_a_kernel_whose_extraction_was_refused(tmp_path, capsys):
    """A refused kernel prints no result, but the summary still counts it, and the exit code is 2."""
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.visible .entry k( { ret; }\n")
    assert main(["check", str(ROOT / "specs" / "peer_init_fixed.sync"), str(bad), "--block", "32"]) == 2
    err = capsys.readouterr().err
    assert "2 files: 1 safe, 0 violations, 0 inconclusive, 1 kernel not extracted" in err


def test_fail_fast_with_workers_checks_no_further_file(capsys):
    """--jobs 2 --fail-fast: the first violation stops the run, as without workers."""
    names = ("peer_init_race.sync", "peer_init_fixed.sync", "tma_store_epilogue.sync")
    specs = [str(ROOT / "specs" / n) for n in names]
    assert main(["check", "--jobs", "2", "--fail-fast", "-q", *specs]) == 1
    captured = capsys.readouterr()
    assert "1 file: 0 safe, 1 violation" in captured.err and "peer_init_fixed" not in captured.out
