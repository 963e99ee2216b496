"""compute-sanitizer (racecheck, synccheck) around the runner's child, and its report parsed into findings.

NVIDIA's dynamic tools see one execution; the checker sees all of them. To compare the two on the same
kernels, `syncverify run --sanitize TOOL` launches the very kernel the plain run launches, with the child
process under ``compute-sanitizer --tool TOOL``, and turns the report into findings: the hazard or
barrier error, how many times it was reported, and where (kernel source line, and the spec line the
kernel's ``/* line N: ... */`` comments name). Pure standard library, like the rest of the runner, so that
it runs on the GPU machine; the parser is unit-tested on captured reports (tests/data/sanitizer/).
"""

from __future__ import annotations

import os
import re
import shutil
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

TOOLS = ("racecheck", "synccheck")
PREFIX = re.compile(r"^=+ ?")
# a race in the default (analysis) report: "Error: Race reported between Write access at ... and Read access at"
RACE = re.compile(r"(?:(Error|Warning): )?Race reported between (\w+) access at (.*?)(?:\s+and (\w+) access at (.*))?$")
RACE_TAIL = re.compile(r"^and (\w+) access at (.*)$")
HAZARD = re.compile(r"(?:(ERROR|WARN|WARNING|INFO|Error|Warning)\s*:?\s*)?(?:\([^)]*\)\s*)?Potential (\w+) hazard "
                    r"detected(.*)$")
BARRIER = re.compile(r"Barrier error detected\.?\s*(.*)$")
OTHER_ERROR = re.compile(r"^(Program hit \S+.*|Invalid .*|Uninitialized .*|Target application returned an error.*|"
                         r"Error: .*)$")
HAZARD_COUNT = re.compile(r"\[(\d+) hazards?\]")
LOCATION = re.compile(r"in ([^\s:]+\.(?:cu|cuh|c|cpp|h|hpp|ptx)):(\d+)")
RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
SPEC_LINE = re.compile(r"(?:/\*|//) line (\d+)")


@dataclass
class Finding:
    """One kind of report at one place: e.g. `race Write/Read`, reported 512 times between two lines."""

    tool: str
    kind: str  # "race Write/Read", "WAR hazard", "barrier error: Missing wait", "error: ..."
    severity: str = "error"
    count: int = 0  # reports of this kind at this place (a race line's "[N hazards]" adds N)
    locations: list[str] = field(default_factory=list)  # "kernel.cu:123"
    spec_lines: list[int] = field(default_factory=list)  # the spec lines those kernel lines implement
    detail: str = ""  # the first report's text, for a reader

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "kind": self.kind, "severity": self.severity, "count": self.count,
                "locations": self.locations, "spec_lines": self.spec_lines, "detail": self.detail}


@dataclass
class Report:
    tool: str
    findings: list[Finding] = field(default_factory=list)
    errors: int | None = None  # the ERROR SUMMARY count, when printed
    hazards: tuple[int, int, int] | None = None  # RACECHECK SUMMARY: displayed, errors, warnings
    ran: bool = True  # False: the sanitizer printed nothing we could read (not installed, killed early)
    note: str = ""

    @property
    def clean(self) -> bool:
        return self.ran and not self.findings

    def summary(self) -> str:
        if not self.ran:
            return f"{self.tool}: no report ({self.note or 'the sanitizer did not run'})"
        if not self.findings:
            return f"{self.tool}: clean" + (f" ({self.note})" if self.note else "")
        parts = []
        for f in self.findings:
            where = f" at spec line{'s' if len(f.spec_lines) > 1 else ''} " + \
                ", ".join(str(x) for x in f.spec_lines) if f.spec_lines else ""
            parts.append(f"{f.kind} x{f.count}{where}")
        return f"{self.tool}: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "ran": self.ran, "clean": self.clean, "errors": self.errors,
                "hazards": list(self.hazards) if self.hazards else None, "note": self.note,
                "summary": self.summary(), "findings": [f.to_json() for f in self.findings]}


def executable() -> str | None:
    """compute-sanitizer on PATH, else where the CUDA toolkit installs it."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        path = os.path.join(root, "bin", "compute-sanitizer") if root else ""
        if path and os.access(path, os.X_OK):
            return path
    return None


def command(tool: str, log_file: str, print_limit: int = 200) -> list[str]:
    """The compute-sanitizer prefix for the child process. The report goes to its own file so that the
    child's stdout stays the runner's JSON protocol."""
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r} (use {' or '.join(TOOLS)})")
    exe = executable() or "compute-sanitizer"
    return [exe, "--tool", tool, "--log-file", log_file, "--print-limit", str(print_limit)]


def spec_line_of(source_lines: list[str], cu_line: int) -> int | None:
    """The spec line a kernel source line belongs to: the nearest `/* line N` or `// line N` above it."""
    for i in range(min(cu_line, len(source_lines)) - 1, -1, -1):
        m = SPEC_LINE.search(source_lines[i])
        if m:
            return int(m.group(1))
        if source_lines[i].startswith("sv_kernel(") or source_lines[i].startswith("SV_DEVICE"):
            return None  # prelude and helper functions belong to no spec line
    return None


def parse(tool: str, text: str, source: str = "") -> Report:
    """Findings of one compute-sanitizer report. Reports of the same kind at the same places are merged."""
    lines = [PREFIX.sub("", raw.rstrip()) for raw in text.splitlines()]
    src = source.splitlines()
    report = Report(tool, ran=any("COMPUTE-SANITIZER" in raw for raw in text.splitlines()) or bool(text.strip()))
    merged: OrderedDict[tuple[str, tuple[str, ...]], Finding] = OrderedDict()
    current: Finding | None = None
    current_locs: list[str] = []

    def flush() -> None:
        nonlocal current, current_locs
        if current is None:
            return
        key = (current.kind, tuple(current_locs))
        f = merged.get(key)
        if f is None:
            current.locations = list(dict.fromkeys(current_locs))
            cu_lines = [int(x.rsplit(":", 1)[1]) for x in current.locations]
            current.spec_lines = sorted({s for s in (spec_line_of(src, n) for n in cu_lines) if s is not None})
            merged[key] = current
        else:
            f.count += current.count
        current, current_locs = None, []

    for line in lines:
        body = line.strip()
        if not body:
            continue
        m = RACECHECK_SUMMARY.search(body)
        if m:
            flush()
            report.hazards = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            continue
        m = ERROR_SUMMARY.search(body)
        if m:
            flush()
            report.errors = int(m.group(1))
            continue
        indented = line.startswith((" ", "\t"))
        m = RACE.search(body) if not indented else None
        if m:
            flush()
            first, second = m.group(2), m.group(4)
            current = Finding(tool, "", "warning" if (m.group(1) or "").lower() == "warning" else "error", 0,
                              detail=body)
            current_locs = [_loc(m.group(3))] if _loc(m.group(3)) else []
            if second:
                current.kind = f"race {first}/{second}"
                loc = _loc(m.group(5) or "")
                current_locs += [loc] if loc else []
                current.count = _hazards(body)
            else:
                current.kind = f"race {first}/?"
            continue
        m = RACE_TAIL.match(body)
        if m and current is not None and current.kind.startswith("race "):
            # each "and <kind> access at ... [N hazards]" line is one more partner of the first access
            if current.kind.endswith("/?"):
                current.kind = current.kind[:-1] + m.group(1)
            elif m.group(1) not in current.kind.split(" ", 1)[1].split("/")[1:]:
                current.kind += "/" + m.group(1)
            loc = _loc(m.group(2))
            if loc and loc not in current_locs:
                current_locs.append(loc)
            current.count += _hazards(body)
            current.detail += " " + body
            continue
        m = HAZARD.search(body) if not indented else None
        if m:
            flush()
            sev = (m.group(1) or "error").lower()
            kind = f"{m.group(2)} hazard" + (" (CUDA barrier operation)" if "barrier operation" in m.group(3) else "")
            current = Finding(tool, kind, "warning" if sev.startswith("warn") else "error", 1, detail=body)
            continue
        m = BARRIER.search(body) if not indented else None
        if m:
            flush()
            current = Finding(tool, f"barrier error: {m.group(1).rstrip('.') or 'unspecified'}", "error", 1,
                              detail=body)
            continue
        m = OTHER_ERROR.match(body) if not indented else None
        if m and not body.startswith("Error: Race"):
            flush()
            current = Finding(tool, "error: " + _short(body), "error", 1, detail=body)
            continue
        if indented and current is not None:
            loc = _loc(body)
            if loc and (body.lstrip().startswith(("at ", "Write", "Read", "and ")) or " at " in body):
                if len(current_locs) < 2 or current.kind.startswith("barrier") or current.kind.startswith("error"):
                    current_locs.append(loc) if loc not in current_locs else None
    flush()
    report.findings = list(merged.values())
    if not report.ran:
        report.note = "empty report"
    return report


def _loc(text: str) -> str:
    m = LOCATION.search(text)
    if not m:
        return ""
    return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"


def _hazards(text: str) -> int:
    m = HAZARD_COUNT.search(text)
    return int(m.group(1)) if m else 1


def _short(text: str) -> str:
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)
    return text[:120]
