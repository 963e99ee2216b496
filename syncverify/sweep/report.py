"""One report for a whole sweep: a line per point as it lands, then the points in manifest order.

Formats: text (a summary, each point's findings at their lines, and a table of verdicts by configuration),
JSON (`"kind": "sweep"`, a record per point), SARIF (one run: every point's findings, each result tagged
with its point). Exit codes as `check`'s, over all points: 2 if a point was refused, failed to build or is
not a protocol; else 1 for a violation; else 3 if a point is inconclusive or its checker crashed; else 0.
With ``--expect``, 0 exactly when every point met its `expect`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

STATUSES = ("safe", "violation", "inconclusive", "refused", "error", "build-failed", "crashed")


def exit_code(records: Sequence[dict[str, Any]]) -> int:
    got = {r["status"] for r in records}
    if got & {"refused", "error", "build-failed"}:
        return 2
    if "violation" in got:
        return 1
    if got & {"inconclusive", "crashed"}:
        return 3
    return 0


def expectation(record: dict[str, Any]) -> bool | None:
    """Whether a point met its `expect` (None: it states none), as `check --expect` reads a spec's header: its
    error codes are exactly the expected errors, and each expected warning appears among its warnings."""
    if record.get("expect") is None:
        return None
    from ..diagnostics import CODES, Severity

    errors = sorted(c for c in record["expect"] if CODES.get(c, ("", Severity.ERROR))[1] is Severity.ERROR)
    warnings = {c for c in record["expect"] if c not in errors}
    return (record["status"] in ("safe", "violation") and sorted(record["codes"]) == errors
            and warnings <= set(record.get("warnings", [])))


def progress_line(done: int, total: int, record: dict[str, Any]) -> str:
    how = ", cached" if record.get("cached") else ", built" if record.get("built") else ""
    codes = f" {', '.join(record['codes'])}" if record.get("codes") else ""
    return f"[{done}/{total}] {record['name']}: {record['status']}{codes} ({record['seconds']:.1f} s{how})"


def summary(records: Sequence[dict[str, Any]], seconds: float, about: dict[str, Any]) -> str:
    counts = Counter(r["status"] for r in records)
    parts = [f"{counts[s]} {s}{'s' if s == 'violation' and counts[s] != 1 else ''}" for s in STATUSES if counts[s]]
    cached = sum(1 for r in records if r.get("cached"))
    built = sum(1 for r in records if r.get("built"))
    where = f" on Ray ({about['nodes']} nodes)" if about.get("executor") == "ray" else ""
    return (f"{len(records)} points: {', '.join(parts)}; {cached} from the cache, {built} built, "
            f"in {seconds:.1f} s{where}")


def render_text(records: Sequence[dict[str, Any]], out: IO[str], expect: bool, verbose: bool = False) -> None:
    for r in records:
        mark = ""
        if expect:
            met = expectation(r)
            mark = "  expect " + ("ok" if met else "MISMATCH" if met is False else "MISSING")
        codes = f" {', '.join(r['codes'])}" if r.get("codes") else ""
        print(f"{r['name']}: {r['status']}{codes}{mark}", file=out)
        findings = r.get("findings", [])
        for f in findings:
            if f["level"] != "error" and not verbose:
                continue
            where = f"{_shown(f['file'])}:{f['line']}:{f['column']}" if f.get("line") else _shown(f["file"])
            print(f"  {where}: {f['code']} {f['message']}", file=out)
        warned = Counter(f["code"] for f in findings if f["level"] != "error")
        if warned and not verbose:  # (a safe kernel's warnings, summarized: the JSON and SARIF reports have each)
            print("  warnings: " + ", ".join(f"{code} ×{n}" for code, n in sorted(warned.items())), file=out)
        if r["status"] in ("refused", "build-failed", "crashed", "error") and r.get("message"):
            for line in r["message"].splitlines()[:6]:
                print(f"  {line}", file=out)
    table = by_configuration(records)
    if table:
        print(file=out)
        print(table, file=out)


def _shown(path: str | None) -> str:
    """A finding's file as the user would name it: relative to the current folder when it lies below it."""
    if not path:
        return "?"
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def by_configuration(records: Sequence[dict[str, Any]]) -> str:
    """The verdicts of the points that come from a `[[sweep]]`: one row per point, one column per axis."""
    swept = [r for r in records if r.get("config")]
    if not swept:
        return ""
    axes: list[str] = []
    for r in swept:
        axes += [a for a in r["config"] if a not in axes]
    header = ["point", *axes, "verdict", "seconds"]
    rows = [[r["name"], *[str(r["config"].get(a, "")) for a in axes],
             r["status"] + (f" {','.join(r['codes'])}" if r.get("codes") else ""), f"{r['seconds']:.1f}"]
            for r in swept]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def render_json(records: Sequence[dict[str, Any]], about: dict[str, Any], seconds: float) -> str:
    points = [{k: v for k, v in r.items() if k != "sarif"} | {"expect_met": expectation(r)} for r in records]
    return json.dumps({"version": 1, "kind": "sweep", "executor": about, "seconds": round(seconds, 3),
                       "exit_code": exit_code(records), "points": points}, indent=2)


def render_sarif(records: Sequence[dict[str, Any]]) -> str:
    """The points' SARIF runs as one: rules merged (and re-indexed), each result tagged with its point."""
    from .. import __version__

    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for r in records:
        run = r.get("sarif")
        if not run:
            continue
        for rule in run["tool"]["driver"].get("rules", []):
            rules.setdefault(rule["id"], rule)
        for res in run.get("results", []):
            results.append({**res, "properties": {**res.get("properties", {}), "point": r["name"]}})
    order = sorted(rules)
    index = {code: i for i, code in enumerate(order)}
    for res in results:
        res["ruleIndex"] = index[res["ruleId"]]
    failed = [r for r in records if r["status"] in ("refused", "build-failed", "crashed", "error")]
    invocation: dict[str, Any] = {"executionSuccessful": not failed, "exitCode": exit_code(records)}
    if failed:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": f"{r['name']}: {r['status']}: {r.get('message', '')}"[:2000]}}
            for r in failed]
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "syncverify", "version": __version__,
                                      "rules": [rules[c] for c in order]}},
                  "results": results, "invocations": [invocation],
                  "properties": {"points": [{"name": r["name"], "status": r["status"], "codes": r["codes"],
                                             "config": r.get("config", {})} for r in records]}}],
    }, indent=2)
