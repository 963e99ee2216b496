"""The CLI contract of design.md §4: the JSON schema, exit codes per verdict, -D,
directory search, --expect, and plain output when NO_COLOR is set or stdout is
not a terminal.

Where a verdict other than `error` is needed, `check_protocol` (the engines) is replaced by a stub
that returns it, so these tests pin the contract, not the model checker.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from syncverify import ir
from syncverify.cli import main
from syncverify.diagnostics import Diagnostic, Severity, Span, TraceStep, make
from syncverify.report import json_report
from syncverify.result import CheckResult, Stats, Verdict

NULLABLE_INT = {"type": ["integer", "null"], "minimum": 1}

TRACE_STEP = {
    "type": "object",
    "required": ["step", "cta", "role", "line", "op", "note"],
    "properties": {
        "step": {"type": "integer", "minimum": 0},
        "cta": {"type": "integer", "minimum": 0},
        "role": {"type": "string"},
        "line": {"type": "integer", "minimum": 0},
        "op": {"type": "string"},
        "note": {"type": "string"},
    },
}

DIAGNOSTIC = {
    "type": "object",
    "required": ["code", "severity", "message", "line", "column", "end_line", "end_column", "trace"],
    "properties": {
        "code": {"type": "string", "pattern": "^SV[1-6][0-9][0-9]$"},
        "severity": {"enum": ["error", "warning"]},
        "message": {"type": "string", "minLength": 1},
        "line": NULLABLE_INT,
        "column": NULLABLE_INT,
        "end_line": NULLABLE_INT,
        "end_column": NULLABLE_INT,
        "trace": {"type": "array", "items": TRACE_STEP},
    },
}

# design.md §4: {"version": 1, "results": [{"path", "protocol", "verdict", "bound", "diagnostics", "stats"}]}
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "results"],
    "properties": {
        "version": {"const": 1},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "protocol", "verdict", "bound", "diagnostics", "stats"],
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "protocol": {"type": ["string", "null"]},
                    "verdict": {"enum": ["safe", "violation", "error", "inconclusive"]},
                    "bound": {"type": "string"},
                    "diagnostics": {"type": "array", "items": DIAGNOSTIC},
                    "stats": {
                        "type": "object",
                        "required": ["states", "transitions", "seconds", "peak_mb"],
                        "properties": {
                            "states": {"type": "integer", "minimum": 0},
                            "transitions": {"type": "integer", "minimum": 0},
                            "seconds": {"type": "number", "minimum": 0},
                            "peak_mb": {"type": "number", "minimum": 0},
                        },
                    },
                },
            },
        },
    },
}

VALID = """\
// expect: safe
protocol small {
  param C = 1;
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  mbarrier m count C;
  if a { elect { init m; } }
  syncthreads;
  if a { arrive m; }
  if b { wait m parity 0; }
}
"""

TYPO = "// expect: safe\nprotocol typo {\n  cta threads 32;\n  syncwrap;\n}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(capsys, *argv: str | Path) -> tuple[int, str, str]:
    rc = main(["check", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def run_json(capsys, *argv: str | Path) -> tuple[int, dict]:
    rc, out, _ = run(capsys, "--format", "json", *argv)
    report = json.loads(out)
    jsonschema.validate(report, REPORT_SCHEMA)
    return rc, report


def stub_engine(monkeypatch, verdict: Verdict, diagnostics: tuple[Diagnostic, ...] = (), bound: str = "ITERS=4"):
    def check_protocol(protocol: ir.Protocol, options: object) -> CheckResult:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=verdict, bound=bound,
                           diagnostics=tuple(diagnostics), stats=Stats(10, 12, 0.01, 1.5),
                           coverage="stub" if verdict is Verdict.INCONCLUSIVE else "")

    monkeypatch.setattr("syncverify.check.check_protocol", check_protocol)


def deadlock(path: Path) -> Diagnostic:
    trace = (TraceStep(0, 0, "a", 8, "init m"), TraceStep(1, 0, "b", 11, "wait m parity 0", note="blocks"))
    return make("SV201", "deadlock: `b` waits on `m` forever", Span(str(path), 11, 10, 11, 25), trace=trace)


# ---------------------------------------------------------------------------
# JSON


def test_json_schema_for_an_input_error(tmp_path, capsys):
    path = write(tmp_path / "typo.sync", TYPO)
    rc, report = run_json(capsys, path)
    assert rc == 2
    (result,) = report["results"]
    assert result["path"] == str(path) and result["protocol"] is None and result["verdict"] == "error"
    (d,) = result["diagnostics"]
    assert (d["code"], d["severity"], d["line"], d["column"], d["end_line"], d["end_column"]) == \
        ("SV110", "error", 4, 3, 4, 11)
    assert d["message"] == "unknown operation `syncwrap`; did you mean `syncwarp`?" and d["trace"] == []


def test_json_schema_with_the_real_engine(tmp_path, capsys):
    rc, report = run_json(capsys, write(tmp_path / "small.sync", VALID))
    (result,) = report["results"]
    assert result["protocol"] == "small" and result["verdict"] != "error" and rc != 2


def test_json_schema_with_a_trace(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "small.sync", VALID)
    warning = make("SV203", "a warp contributes twice", Span(str(path), 10, 3, 10, 12))
    stub_engine(monkeypatch, Verdict.VIOLATION, (deadlock(path), warning))
    rc, report = run_json(capsys, path)
    assert rc == 1
    (result,) = report["results"]
    assert (result["verdict"], result["bound"], result["protocol"]) == ("violation", "ITERS=4", "small")
    assert result["stats"] == {"states": 10, "transitions": 12, "seconds": 0.01, "peak_mb": 1.5}
    err, warn = result["diagnostics"]
    assert [s["op"] for s in err["trace"]] == ["init m", "wait m parity 0"]
    assert err["trace"][1] | {"step": 1, "cta": 0, "role": "b", "line": 11, "note": "blocks"} == err["trace"][1]
    assert warn["severity"] == "warning" and warn["trace"] == []


def test_json_schema_for_a_diagnostic_without_location():
    d = Diagnostic("SV404", Severity.ERROR, "CTA 1 exits while CTA 0 still writes to it")
    report = json.loads(json_report.render([CheckResult("k.sync", "k", Verdict.VIOLATION, "all-iterations", (d,))]))
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["results"][0]["diagnostics"][0]["line"] is None


def test_json_for_several_files(tmp_path, capsys):
    good, bad = write(tmp_path / "a.sync", VALID), write(tmp_path / "b.sync", TYPO)
    rc, report = run_json(capsys, good, bad, tmp_path / "missing.sync")
    assert rc == 2
    assert [(r["path"], r["verdict"]) for r in report["results"]][1:] == [
        (str(bad), "error"), (str(tmp_path / "missing.sync"), "error")]
    assert report["results"][2]["diagnostics"][0]["code"] == "SV112"


# ---------------------------------------------------------------------------
# Exit codes


@pytest.mark.parametrize(("verdict", "code"), [(Verdict.SAFE, 0), (Verdict.VIOLATION, 1),
                                               (Verdict.INCONCLUSIVE, 3)])
def test_exit_code_per_verdict(verdict, code, tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "small.sync", VALID)
    stub_engine(monkeypatch, verdict, (deadlock(path),) if verdict is Verdict.VIOLATION else ())
    rc, out, _ = run(capsys, path)
    assert rc == code
    assert out.splitlines()[-1].startswith(f"{path} (small): {verdict.value}")


def test_input_errors_exit_2_and_dominate(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.VIOLATION)
    good, bad = write(tmp_path / "a.sync", VALID), write(tmp_path / "b.sync", TYPO)
    assert run(capsys, good)[0] == 1
    assert run(capsys, good, bad)[0] == 2
    assert run(capsys, bad)[0] == 2
    assert run(capsys, tmp_path / "nope.sync")[0] == 2


def test_violation_dominates_inconclusive(tmp_path, capsys, monkeypatch):
    a, b = write(tmp_path / "a.sync", VALID), write(tmp_path / "b.sync", VALID.replace("small", "other"))

    def check_protocol(protocol, options):
        verdict = Verdict.VIOLATION if protocol.name == "other" else Verdict.INCONCLUSIVE
        return CheckResult(protocol.path, protocol.name, verdict, "")

    monkeypatch.setattr("syncverify.check.check_protocol", check_protocol)
    assert run(capsys, a)[0] == 3
    assert run(capsys, a, b)[0] == 1


def test_usage_errors_exit_2(capsys):
    for argv in (["check"], ["check", "--format", "xml", "x.sync"], ["frobnicate"], []):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "Traceback" not in "".join(capsys.readouterr())


# ---------------------------------------------------------------------------
# -D


def test_define_overrides_a_param(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.SAFE)
    path = write(tmp_path / "small.sync", VALID)
    assert run(capsys, path, "-D", "C=2")[0] == 0
    assert run(capsys, path, "-D", "C=0x3")[0] == 0
    rc, report = run_json(capsys, path, "-D", "C=0")
    assert rc == 2
    (d,) = report["results"][0]["diagnostics"]
    assert (d["code"], d["message"], d["line"]) == ("SV105", "mbarrier `m` count 0 is outside 1..1048575 (2^20-1)", 7)
    rc, report = run_json(capsys, path, "-D", f"C={1 << 20}")
    assert rc == 2 and report["results"][0]["diagnostics"][0]["code"] == "SV105"


def test_define_reaches_the_engine(tmp_path, capsys, monkeypatch):
    seen: list[int] = []

    def check_protocol(protocol, options):
        seen.append(protocol.mbarrier("m").count)
        return CheckResult(protocol.path, protocol.name, Verdict.SAFE, "")

    monkeypatch.setattr("syncverify.check.check_protocol", check_protocol)
    path = write(tmp_path / "small.sync", VALID)
    assert run(capsys, path, "-D", "C=5", "-D", "C=7")[0] == 0  # the last -D wins
    assert run(capsys, path)[0] == 0
    assert seen == [7, 1]


def test_define_applies_to_every_file(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.SAFE)
    write(tmp_path / "a.sync", VALID)
    write(tmp_path / "b.sync", "protocol b { cta threads 32; }\n")
    rc, report = run_json(capsys, tmp_path, "-D", "C=2")
    assert rc == 2
    assert [(Path(r["path"]).name, r["verdict"]) for r in report["results"]] == [("a.sync", "safe"),
                                                                                ("b.sync", "error")]
    assert report["results"][1]["diagnostics"][0]["message"] == "-D C: no `param C` in this protocol"


# ---------------------------------------------------------------------------
# Directories


def test_directories_are_searched_recursively(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.SAFE)
    for name in ("z.sync", "a/b/deep.sync", "a/first.sync", "m/other.sync"):
        write(tmp_path / name, VALID)
    for name in ("notes.txt", "a/old.sync.bak", "a/sync", "x.SYNC.txt"):
        write(tmp_path / name, "not a spec")
    (tmp_path / "dir.sync").mkdir()  # a directory named like a spec is not a file
    single = write(tmp_path.parent / f"{tmp_path.name}-single.sync", VALID)
    rc, report = run_json(capsys, single, tmp_path)
    assert rc == 0
    assert [r["path"] for r in report["results"]] == [str(single)] + [
        str(tmp_path / n) for n in ("a/b/deep.sync", "a/first.sync", "m/other.sync", "z.sync")]


def test_directory_with_a_broken_spec(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.SAFE)
    write(tmp_path / "ok.sync", VALID)
    write(tmp_path / "sub/bad.sync", TYPO)
    rc, out, _ = run(capsys, tmp_path)
    assert rc == 2
    assert f"{tmp_path / 'sub/bad.sync'}:4:3: SV110" in out and f"{tmp_path / 'ok.sync'} (small): safe" in out


# ---------------------------------------------------------------------------
# --expect


def test_expect_header_mismatch(tmp_path, capsys):
    path = write(tmp_path / "typo.sync", TYPO)  # says safe, has an input error
    rc, _out, err = run(capsys, "--expect", path)
    assert rc == 1
    assert f"{path}: expect MISMATCH — expected safe, got ['SV110']" in err


def test_expect_header_lists_the_input_error(tmp_path, capsys):
    path = write(tmp_path / "typo.sync", TYPO.replace("expect: safe", "expect: SV110"))
    rc, _out, err = run(capsys, "--expect", path)
    assert rc == 0 and f"{path}: expect ok — as expected" in err


def test_expect_without_header(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.SAFE)
    path = write(tmp_path / "plain.sync", VALID.replace("// expect: safe\n", ""))
    rc, _, err = run(capsys, "--expect", path)
    assert rc == 1 and "no `// expect:` header" in err


def test_expect_with_malformed_header(tmp_path, capsys):
    path = write(tmp_path / "bad.sync", VALID.replace("expect: safe", "expect: sometimes"))
    rc, out, err = run(capsys, "--expect", path)
    assert rc == 1 and "MISMATCH" in err and "SV117" in out


@pytest.mark.parametrize(("header", "ok"), [
    ("SV201", True),  # an unlisted warning does not fail the expectation
    ("SV201, SV203", True),  # a listed warning must appear, and does
    ("SV201 SV204", False),  # a listed warning that does not appear
    ("SV302", False),
    ("safe", False),
])
def test_expect_against_engine_findings(header, ok, tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "small.sync", VALID.replace("expect: safe", f"expect: {header}"))
    warning = make("SV203", "a warp contributes twice", Span(str(path), 10, 3, 10, 12))
    stub_engine(monkeypatch, Verdict.VIOLATION, (deadlock(path), warning))
    rc, _, err = run(capsys, "--expect", path)
    assert rc == (0 if ok else 1)
    assert ("expect ok" in err) is ok


def test_expect_fails_when_inconclusive(tmp_path, capsys, monkeypatch):
    stub_engine(monkeypatch, Verdict.INCONCLUSIVE)
    rc, _, err = run(capsys, "--expect", write(tmp_path / "small.sync", VALID))
    assert rc == 1 and "inconclusive (stub)" in err


def test_expect_json_stays_valid(tmp_path, capsys):
    path = write(tmp_path / "typo.sync", TYPO)
    rc, out, err = run(capsys, "--expect", "--format", "json", path)
    jsonschema.validate(json.loads(out), REPORT_SCHEMA)
    assert rc == 1 and "MISMATCH" in err


# ---------------------------------------------------------------------------
# Colour


def test_non_terminal_output_is_plain(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    _rc, out, err = run(capsys, "--expect", write(tmp_path / "typo.sync", TYPO))
    assert "SV110" in out and "MISMATCH" in err
    assert "\x1b" not in out + err


def test_no_color_wins_over_force_color(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "typo.sync", TYPO)
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, out, _ = run(capsys, path)
    assert "\x1b[" in out  # the check below can see escapes when there are some
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, err = run(capsys, "--expect", path)
    assert "SV110" in out and "\x1b" not in out + err


def test_search_reports_progress_to_a_callback():
    from syncverify import load
    from syncverify.check import Options, check_protocol

    seen = []
    # an explicit search long enough to report progress (every 0.25 s): the ring at ITERS=128, some 6,700
    # states (the default engines would first prove it for every ITERS, a lifted search of 59,000 states)
    protocol = load(str(Path(__file__).resolve().parent.parent / "bench" / "ring_family.sync"),
                    {"STAGES": 2, "CONSUMERS": 4, "ITERS": 128})
    result = check_protocol(protocol, Options(engine="explicit", progress=lambda *a: seen.append(a)))
    assert result.verdict.value == "safe" and result.bound == "ITERS=128"
    assert seen and all(states > 0 and seconds >= 0 for states, _, seconds, _ in seen)
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)


def test_time_budget_ends_in_inconclusive(capsys):
    # a search of some 43,000 states (the 2-CTA multicast ring at ITERS=1024: 25 s or so)
    spec = Path(__file__).resolve().parent.parent / "specs" / "cluster_multicast_ring.sync"
    assert main(["check", str(spec), "-D", "ITERS=1024", "--timeout", "1"]) == 3
    assert "time budget of 1s reached" in capsys.readouterr().out
