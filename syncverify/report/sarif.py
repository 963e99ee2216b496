"""SARIF 2.1.0 report, for code-scanning services.

One rule per diagnostic code (its help text is the code's section of the
diagnostics reference); one result per diagnostic; a counterexample becomes a
code flow with one thread flow per role instance or agent that took part; the
other access of a race or the peer barrier is a related location. Fingerprints
are stable across runs: they hash the code, the file, the line and the message
without its trace.

Validity: the output is checked against the official SARIF 2.1.0 JSON schema
(tests/data/sarif-schema-2.1.0.json). Artifact URIs must be URI references, so
file paths are percent-encoded (a space or `#` in a path would otherwise make
an invalid or a different URI); a location that is no file (`<command line>`,
a protocol built in code, `<builder:NAME>`) becomes a logical location.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..budget import DETERMINISTIC
from ..diagnostics import CODES, Diagnostic, Severity
from ..result import CheckResult, Verdict, combine_exit

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INCONCLUSIVE = "SV701"  # the rule of an inconclusive file (never a diagnostic of a result)


def _rule(code: str) -> dict[str, Any]:
    from ..docs import explain

    title, severity = CODES[code]
    return {
        "id": code,
        "name": title.title().replace(" ", "").replace("`", "").replace(".", "").replace("/", "")
        .replace("-", "").replace(",", ""),
        "shortDescription": {"text": title},
        "fullDescription": {"text": title},
        "help": {"text": explain(code), "markdown": explain(code)},
        "defaultConfiguration": {"level": "note" if code == INCONCLUSIVE else
                                 "error" if severity is Severity.ERROR else "warning"},
    }


def _region(line: int, column: int = 1, end_line: int | None = None, end_column: int | None = None) -> dict:
    region = {"startLine": max(line, 1), "startColumn": max(column, 1)}
    if end_line is not None and end_column is not None and (end_line, end_column) > (line, column):
        region |= {"endLine": end_line, "endColumn": end_column}
    return region


def _is_pseudo(path: str) -> bool:
    """`<command line>`, `<text>`, `<builder:ring>`: a source that is not a file."""
    return path.startswith("<") and path.endswith(">")


def _uri(path: str) -> str:
    """A file path as a URI reference (RFC 3986): `/` separators, everything else unsafe percent-encoded
    (a `:` too, so that `a:b.sync` is not read as a URI with scheme `a`)."""
    return quote(path.replace(os.sep, "/"), safe="/")


def _location(path: str, line: int, column: int = 1, end_line: int | None = None, end_column: int | None = None,
              message: str | None = None) -> dict:
    loc: dict[str, Any]
    if _is_pseudo(path):
        loc = {"logicalLocations": [{"fullyQualifiedName": f"{path}:{max(line, 1)}", "kind": "module"}]}
    else:
        loc = {"physicalLocation": {"artifactLocation": {"uri": _uri(path)},
                                    "region": _region(line, column, end_line, end_column)}}
    if message:
        loc["message"] = {"text": message}
    return loc


def _code_flow(uri: str, d: Diagnostic) -> dict:
    """One thread flow per role instance / agent, each holding its own steps in trace order."""
    flows: dict[str, list[dict]] = {}
    for step in d.trace:
        text = f"step {step.step}: {step.op}".strip()
        if step.iteration:
            text += f" ({step.iteration})"
        if step.note:
            text += f" {step.note}"
        if step.state:
            text += f" — {step.state}"
        flows.setdefault(f"{step.role} (CTA {step.cta})", []).append({
            "location": _location(uri, step.line or 1, message=text),
            "executionOrder": step.step,
        })
    return {"message": {"text": f"counterexample of {len(d.trace)} steps"},
            "threadFlows": [{"id": who, "message": {"text": who}, "locations": locs} for who, locs in flows.items()]}


def _fingerprint(path: str, d: Diagnostic) -> str:
    line = d.span.line if d.span else 0
    return hashlib.sha256(f"{d.code}|{path}|{line}|{d.message}".encode()).hexdigest()[:32]


def _result(r: CheckResult, d: Diagnostic, rule_index: dict[str, int]) -> dict:
    uri = d.span.path if d.span else r.path
    res: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index[d.code],
        "level": "error" if d.severity is Severity.ERROR else "warning",
        "message": {"text": d.message},
        "locations": [_location(uri, d.span.line, d.span.column, d.span.end_line, d.span.end_column)
                      if d.span else _location(uri, 1)],
        "partialFingerprints": {"syncverify/v1": _fingerprint(uri, d)},
        "properties": _properties(r),
    }
    if d.related:
        res["relatedLocations"] = [dict(_location(rel.span.path, rel.span.line, rel.span.column,
                                                  message=rel.message), id=i)
                                   for i, rel in enumerate(d.related)]
    if d.trace:
        res["codeFlows"] = [_code_flow(uri, d)]
    if d.suppressed is not None:
        res["suppressions"] = [{"kind": "inSource", "justification": d.suppressed}]
    return res


def _properties(r: CheckResult) -> dict[str, Any]:
    """What a file's verdict covers: its bound, the sweep point, and the budget that ended it."""
    props: dict[str, Any] = {"protocol": r.protocol, "verdict": r.verdict.value, "bound": r.bound}
    if r.sweep:
        props["sweep"] = dict(r.sweep)
    if r.stopped_by:
        props["stoppedBy"] = r.stopped_by
        props["deterministic"] = r.stopped_by in DETERMINISTIC
    return props


def _budget_notification(r: CheckResult) -> dict[str, Any]:
    """A decided check whose proof a budget ended (a bounded `safe` not lifted to every trip count):
    SARIF results are findings, so the invocation says which budget ended it."""
    return {"level": "note", "message": {"text": f"{r.path}: {r.verdict.value} — {r.coverage}"},
            "locations": [_location(r.path, 1)], "properties": _properties(r)}


def _inconclusive_text(r: CheckResult) -> str:
    covered = r.coverage or "a budget ran out"
    bound = f" (bound {r.bound})" if r.bound else ""
    return (f"{r.protocol or r.path}: verification inconclusive{bound}: {covered}. This is not a proof of safety: "
            "raise --timeout / --max-states / --max-memory or lower the params")


def _inconclusive_result(r: CheckResult, rule_index: dict[str, int]) -> dict:
    """An inconclusive file as a result of level `note`: code scanning shows it, and a run
    with nothing but inconclusive files does not look like a clean one."""
    text = _inconclusive_text(r)
    return {
        "ruleId": INCONCLUSIVE, "ruleIndex": rule_index[INCONCLUSIVE], "level": "note", "kind": "open",
        "message": {"text": text},
        "locations": [_location(r.path, 1)],
        "partialFingerprints": {"syncverify/v1": hashlib.sha256(f"{INCONCLUSIVE}|{r.path}".encode()).hexdigest()[:32]},
        "properties": {**_properties(r), "coverage": r.coverage, "states": r.stats.states,
                       "seconds": round(r.stats.seconds, 3)},
    }


def _run_properties(results: list[CheckResult]) -> dict[str, Any]:
    """What each file's verdict covers: its bound (the params it was checked at) and, when
    inconclusive, how far the search got."""
    return {"files": [{"path": r.path, **_properties(r), "coverage": r.coverage, "states": r.stats.states,
                       "seconds": round(r.stats.seconds, 3)} for r in results]}


def to_sarif(results: list[CheckResult]) -> dict[str, Any]:
    inconclusive = [r for r in results if r.verdict is Verdict.INCONCLUSIVE]
    codes = sorted({d.code for r in results for d in r.diagnostics} | ({INCONCLUSIVE} if inconclusive else set()))
    rule_index = {code: i for i, code in enumerate(codes)}
    invocation: dict[str, Any] = {"executionSuccessful": not inconclusive, "exitCode": combine_exit(results)}
    if inconclusive:
        invocation["toolExecutionNotifications"] = [
            {"level": "warning", "message": {"text": _inconclusive_text(r)},
             "descriptor": {"id": INCONCLUSIVE, "index": rule_index[INCONCLUSIVE]},
             "locations": [_location(r.path, 1)], "properties": _properties(r)} for r in inconclusive]
    decided_early = [_budget_notification(r) for r in results if r.stopped_by and r.verdict is not Verdict.INCONCLUSIVE]
    if decided_early:
        invocation.setdefault("toolExecutionNotifications", []).extend(decided_early)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "syncverify", "version": __version__,
                                "rules": [_rule(code) for code in codes]}},
            "results": [_result(r, d, rule_index) for r in results for d in r.diagnostics]
            + [_inconclusive_result(r, rule_index) for r in inconclusive],
            "invocations": [invocation],
            "properties": _run_properties(results),
        }],
    }


def render(results: list[CheckResult]) -> str:
    return json.dumps(to_sarif(results), indent=2)
