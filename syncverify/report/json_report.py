"""The JSON report (contract: design.md §4, `"version": 1`)."""

from __future__ import annotations

import json
from typing import Any

from ..diagnostics import Diagnostic
from ..result import CheckResult


def diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    span = d.span
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        # the file of the finding: a kernel's findings are in its CUDA source, not in the checked .ptx/.cu
        "file": span.path if span else None,
        "line": span.line if span else None,
        "column": span.column if span else None,
        "end_line": span.end_line if span else None,
        "end_column": span.end_column if span else None,
        "trace": [
            {"step": s.step, "cta": s.cta, "role": s.role, "line": s.line, "op": s.op, "note": s.note,
             "iteration": s.iteration, "state": s.state, "barrier": s.barrier}
            for s in d.trace
        ],
        "related": [{"file": r.span.path, "line": r.span.line, "column": r.span.column, "message": r.message}
                    for r in d.related],
        "notes": list(d.notes),
        "suppressed": d.suppressed,
    }


def result_dict(r: CheckResult) -> dict[str, Any]:
    return {
        "path": r.path,
        "protocol": r.protocol,
        "verdict": r.verdict.value,
        "bound": r.bound,
        "coverage": r.coverage,
        "stopped_by": r.stopped_by or None,
        "sweep": dict(r.sweep),
        "assumed": list(r.assumed),
        "diagnostics": [diagnostic_dict(d) for d in r.diagnostics],
        "stats": {"states": r.stats.states, "transitions": r.stats.transitions,
                  "seconds": round(r.stats.seconds, 4), "peak_mb": round(r.stats.peak_mb, 1)},
    }


def render(results: list[CheckResult]) -> str:
    return json.dumps({"version": 1, "results": [result_dict(r) for r in results]}, indent=2)
