"""`--format sarif` validated against the official SARIF 2.1.0 JSON schema (tests/data, see its README)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from jsonschema.validators import validator_for

from syncverify import Options, ProtocolBuilder, check_protocol
from syncverify.cli import main
from syncverify.report import sarif
from syncverify.result import CheckResult, Stats, Verdict

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
OASIS_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

# RFC 3986 URI-reference, checked strictly: jsonschema checks the "uri" and "uri-reference"
# formats only when optional packages are installed, and an unencoded space or `#` in a file
# path is exactly the mistake a SARIF writer makes.
_UNRESERVED = r"A-Za-z0-9\-._~"
_PCHAR = rf"(?:[{_UNRESERVED}!$&'()*+,;=:@]|%[0-9A-Fa-f]{{2}})"
_URI_REF = re.compile(rf"^(?:[A-Za-z][A-Za-z0-9+.\-]*:)?(?:{_PCHAR}|/)*(?:\?(?:{_PCHAR}|[/?])*)?"
                      rf"(?:#(?:{_PCHAR}|[/?])*)?$")
_URI = re.compile(rf"^[A-Za-z][A-Za-z0-9+.\-]*:(?:{_PCHAR}|[/?#])*$")


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = validator_for(schema)
    cls.check_schema(schema)
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    checker.checks("uri-reference")(lambda s: not isinstance(s, str) or bool(_URI_REF.match(s)))
    checker.checks("uri")(lambda s: not isinstance(s, str) or bool(_URI.match(s)))
    return cls(schema, format_checker=checker)


VALIDATOR = _validator()


def assert_valid(doc: dict) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:10])


def run_sarif(capsys, *args: str) -> tuple[int, dict]:
    rc = main(["check", "--format", "sarif", *args])
    return rc, json.loads(capsys.readouterr().out)


def test_schema_is_the_official_one():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"] == OASIS_ID
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert isinstance(VALIDATOR, jsonschema.Draft4Validator)  # the validator the schema declares
    assert {"threadFlow", "threadFlowLocation", "reportingDescriptor", "result", "run"} <= set(schema["definitions"])


def test_violation_with_code_flows_is_valid(capsys):
    results = []
    for args in (["-D", "STAGES=1", "-D", "ITERS=2", str(SPECS / "cutlass_ws_ring_no_empty_wait.sync")],
                 [str(SPECS / "wgmma_release_before_wait.sync"), str(SPECS / "tilelang_bar_h_deadlock.sync")]):
        rc, doc = run_sarif(capsys, *args)
        assert rc == 1
        assert_valid(doc)
        results += doc["runs"][0]["results"]
    assert {"SV201", "SV302", "SV303", "SV504", "SV505"} <= {r["ruleId"] for r in results}
    assert all(r.get("codeFlows") for r in results if r["ruleId"] in ("SV201", "SV302"))


def test_safe_protocol_is_valid(capsys):
    rc, doc = run_sarif(capsys, str(SPECS / "peer_init_fixed.sync"), str(SPECS / "fa3_pingpong.sync"))
    assert rc == 0
    assert_valid(doc)
    results = doc["runs"][0]["results"]
    assert results and {r["level"] for r in results} == {"warning"}  # fa3_pingpong's SV203: safe, with a warning


@pytest.mark.parametrize("args", [
    ["/no/such/file.sync"],  # SV112
    ["-D", "ITERS=x", "specs/cutlass_ws_ring.sync"],  # SV114 at <command line>
])
def test_input_errors_are_valid(capsys, args):
    rc, doc = run_sarif(capsys, *args)
    assert rc == 2
    assert_valid(doc)
    assert doc["runs"][0]["results"][0]["ruleId"] in ("SV112", "SV114")


def test_syntax_error_and_odd_file_names_are_valid(tmp_path, capsys):
    bad = tmp_path / "my specs" / "ring #1.sync"  # a space and a `#`: must be percent-encoded in the URI
    bad.parent.mkdir()
    bad.write_text("protocol p {\n  cta threads 32;\n  read ;\n}\n", encoding="utf-8")
    rc, doc = run_sarif(capsys, str(bad))
    assert rc == 2
    assert_valid(doc)
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.endswith("/my%20specs/ring%20%231.sync")

    race = tmp_path / "a:b.sync"  # a colon would otherwise read as a URI scheme
    shutil.copy(SPECS / "wgmma_release_before_wait.sync", race)
    rc, doc = run_sarif(capsys, str(race))
    assert rc == 1
    assert_valid(doc)


def test_protocol_built_in_code_is_valid():
    b = ProtocolBuilder("tiny")
    b.cta_threads(64)
    w = b.role("w", "warp", 0, 2)
    buf = b.smem("buf", 16)
    with b.if_(w):
        b.write(buf)
    doc = sarif.to_sarif([check_protocol(b.build(), Options())])
    assert_valid(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].startswith("<builder:tiny>:")


def test_the_validation_can_fail(capsys):
    _, doc = run_sarif(capsys, str(SPECS / "wgmma_release_before_wait.sync"))
    broken = copy.deepcopy(doc)
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert list(VALIDATOR.iter_errors(broken))
    broken = copy.deepcopy(doc)
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "a b.sync"
    assert list(VALIDATOR.iter_errors(broken))
    broken = copy.deepcopy(doc)
    broken["runs"][0]["results"][0]["codeFlows"][0]["threadFlows"] = []
    assert list(VALIDATOR.iter_errors(broken))


def test_a_check_ended_by_a_budget_is_valid_and_named(capsys):
    """An inconclusive check has no finding: the invocation's notification carries its budget."""
    code, doc = run_sarif(capsys, str(SPECS / "cluster_multicast_ring.sync"), "-D", "ITERS=64,65",
                          "--max-states", "300")
    assert code == 3
    assert_valid(doc)
    notes = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [(n["properties"]["stoppedBy"], n["properties"]["sweep"]) for n in notes] == \
        [("states", {"ITERS": 64}), ("states", {"ITERS": 65})]


def _stub(monkeypatch, verdict: Verdict, coverage: str = "") -> None:
    def check_protocol(protocol, options):
        return CheckResult(protocol.path, protocol.name, verdict, "ITERS=6", coverage=coverage,
                           stats=Stats(states=1234, seconds=1.5))

    monkeypatch.setattr("syncverify.check.check_protocol", check_protocol)


def test_inconclusive_run_is_not_clean(capsys, monkeypatch):
    """An inconclusive file: a `note` result of rule SV701, a tool notification, executionSuccessful
    false, and the bound and coverage in the run's properties (a run with no results looks clean)."""
    _stub(monkeypatch, Verdict.INCONCLUSIVE, "no violation in 1234 states; time budget of 1s reached")
    rc, doc = run_sarif(capsys, str(SPECS / "cutlass_ws_ring.sync"))
    assert rc == 3
    assert_valid(doc)
    (run,) = doc["runs"]
    (result,) = run["results"]
    assert result["ruleId"] == "SV701" and result["level"] == "note"
    assert "1234 states" in result["message"]["text"] and "not a proof" in result["message"]["text"]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "SV701"
    (inv,) = run["invocations"]
    assert inv["executionSuccessful"] is False and inv["exitCode"] == 3
    (note,) = inv["toolExecutionNotifications"]
    assert note["level"] == "warning" and "inconclusive" in note["message"]["text"]
    (entry,) = run["properties"]["files"]
    assert entry["verdict"] == "inconclusive" and entry["bound"] == "ITERS=6" and "1234" in entry["coverage"]


def test_safe_run_stays_successful_with_no_notification(capsys, monkeypatch):
    _stub(monkeypatch, Verdict.SAFE)
    rc, doc = run_sarif(capsys, str(SPECS / "cutlass_ws_ring.sync"))
    assert rc == 0
    assert_valid(doc)
    (run,) = doc["runs"]
    assert run["results"] == [] and run["tool"]["driver"]["rules"] == []
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 0}]
    assert run["properties"]["files"][0]["verdict"] == "safe"
