"""`syncverify check` as it runs: findings printed when found, progress, fail-fast, a summary.

Why: a search can run for minutes. Outside a terminal (CI logs, a pre-commit hook)
nothing used to appear until it ended, and a search that had already found the bug
went on looking for others until its budget ran out. Here:

* text and JSON Lines (`--format jsonl`) print each error of the explicit search the
  moment it is recorded (the same diagnostic, trace included, as the final report),
  then each file's remaining findings and verdict as soon as that file is done;
* on stderr, a live status line on a terminal, and outside one a plain progress line
  every few seconds (states, rate, frontier, memory, elapsed); `--quiet` drops both;
* `--fail-fast` stops the search at its first error and checks no further file;
* a closing summary line on stderr: `23 files: 14 safe, 9 violations, 0 inconclusive
  in 16.5 s` (text), or a `summary` record (JSON Lines).

JSON and SARIF are single documents: they are written whole at the end (progress and
the summary still go to stderr).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, Any

from ..diagnostics import Diagnostic
from ..options import Options
from ..result import CheckResult, Verdict, combine_exit

PROGRESS_EVERY = 5.0  # seconds between two plain progress lines


def _key(d: Diagnostic) -> tuple:
    return d.code, d.span.line if d.span else 0, d.message


@dataclass
class Live:
    """The output of one `check` run, file by file."""

    fmt: str  # text | json | jsonl | sarif
    quiet: bool = False
    fail_fast: bool = False
    full_trace: bool = False
    width: int | None = None
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    sources: dict[str, list[str]] = field(default_factory=dict)  # text of inputs that are not files (stdin)
    stopped: bool = False  # --fail-fast hit an error: check no further file
    refused: int = 0  # kernels whose extraction was refused (reported on stderr, no result)
    started: float = field(default_factory=time.monotonic)
    # a kernel's warnings as one line per code (count, first site) rather than each with its trace
    summarize_warnings: bool = True
    _console: Any = None

    # ------------------------------------------------------------------ output streams
    def console(self):
        if self._console is None:
            from . import text

            self._console = text.make_console(self.out, width=self.width)
        return self._console

    def _compact(self) -> bool:
        """One line per step when piped (a table would fold); a table on a terminal or at --width."""
        return self.width is None and not self.out.isatty()

    def emit(self, d: Diagnostic, path: str, protocol: str | None) -> None:
        """One finding, now."""
        if self.fmt == "text":
            from . import text

            text.print_diagnostic(self.console(), d, self.sources, self.full_trace, compact=self._compact())
        elif self.fmt == "jsonl":
            from .json_report import diagnostic_dict

            self._line({"kind": "diagnostic", "path": path, "protocol": protocol, **diagnostic_dict(d)})
        self.out.flush()

    def _line(self, record: dict) -> None:
        print(json.dumps(record), file=self.out)

    # ------------------------------------------------------------------ one file
    def check(self, path: str, options: Options, run: Callable[[str, Options], CheckResult],
              sweep: tuple[tuple[str, int], ...] = ()) -> CheckResult:
        """Check one file (at one point of a `-D` sweep) with findings streamed and progress shown;
        print what was not streamed."""
        streamed: set[tuple] = set()
        protocol_name: list[str | None] = [None]

        def on_finding(d: Diagnostic) -> bool:
            if self.fmt in ("text", "jsonl") and _key(d) not in streamed:
                streamed.add(_key(d))
                self.emit(d, path, protocol_name[0])
            return self.fail_fast

        opts = replace(options, on_finding=on_finding)
        result = self._with_progress(path, opts, run)
        if not isinstance(result, CheckResult):  # a kernel whose extraction was refused: the caller says so
            return result
        if sweep:
            result = replace(result, sweep=sweep)
        if self.fail_fast and any(d.is_error for d in result.diagnostics):
            self.stopped = True
        self._file_done(result, streamed)
        return result

    def report(self, result: CheckResult) -> CheckResult:
        """Print a check that ran elsewhere (a worker process, a kernel's extraction): nothing of it
        was streamed."""
        if self.fail_fast and any(d.is_error for d in result.diagnostics):
            self.stopped = True
        self._file_done(result, set())
        return result

    def _with_progress(self, path: str, options: Options, run: Callable[[str, Options], CheckResult]) -> CheckResult:
        if self.quiet:
            return run(path, options)
        if self.err.isatty() and self.fmt == "text" and self.out.isatty():
            from . import text

            console = text.make_console(self.err)
            with console.status(f"{path}: starting") as status:
                def show(states: int, frontier: int, seconds: float, mb: float) -> None:
                    status.update(_progress_text(path, states, frontier, seconds, mb))

                return run(path, replace(options, progress=show))
        last = [time.monotonic()]

        def plain(states: int, frontier: int, seconds: float, mb: float) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY:
                last[0] = now
                print("syncverify: " + _progress_text(path, states, frontier, seconds, mb), file=self.err, flush=True)

        return run(path, replace(options, progress=plain))

    def _file_done(self, r: CheckResult, streamed: set[tuple]) -> None:
        if self.fmt == "text":
            from . import text

            rest = replace(r, diagnostics=tuple(d for d in r.diagnostics if _key(d) not in streamed))
            summary: list[str] = []
            if self.summarize_warnings and r.path.endswith(KERNEL_SUFFIXES):
                rest, summary = summarized(rest)
            text.render([rest], self.console(), full_trace=self.full_trace, sources=self.sources,
                        compact=self._compact())
            for line in summary:
                print(line, file=self.out)
        elif self.fmt == "jsonl":
            from .json_report import result_dict

            for d in r.diagnostics:
                if _key(d) not in streamed:
                    self.emit(d, r.path, r.protocol)
            self._line({"kind": "result", **result_dict(r)})
        self.out.flush()

    # ------------------------------------------------------------------ the end
    def finish(self, results: list[CheckResult]) -> None:
        """Whole documents (json, sarif), then the summary."""
        if self.fmt == "json":
            from .json_report import render

            print(render(results), file=self.out)
        elif self.fmt == "sarif":
            from .sarif import render as render_sarif

            print(render_sarif(results), file=self.out)
        counts = summary_counts(results)
        if self.refused:
            counts["files"] += self.refused
            counts["refused"] = self.refused
        seconds = time.monotonic() - self.started
        if self.fmt == "jsonl":
            self._line({"kind": "summary", **counts, "seconds": round(seconds, 3), "exit_code": combine_exit(results),
                        "stopped_early": self.stopped})
        elif not self.quiet or self.fmt == "text":
            print(summary_line(counts, seconds, self.stopped), file=self.err, flush=True)


KERNEL_SUFFIXES = (".ptx", ".cu")


def summarized(r: CheckResult) -> tuple[CheckResult, list[str]]:
    """The result without its warnings, and one line per warning code: how many, the title, the first
    site. A production kernel's safe verdict comes with warnings about idioms the model cannot confirm
    (SV602 on each remote arrive): eight 30-step traces bury the verdict; `--warning-traces` shows them."""
    from ..diagnostics import CODES, Severity

    warns = [d for d in r.diagnostics if d.severity is Severity.WARNING and d.suppressed is None]
    if not warns:
        return r, []
    by_code: dict[str, list[Diagnostic]] = {}
    for d in warns:
        by_code.setdefault(d.code, []).append(d)
    lines = []
    for code, ds in sorted(by_code.items()):
        first = ds[0].span
        at = f"{first.path}:{first.line}:{first.column}" if first else "?"
        title = CODES.get(code, ("", None))[0]
        lines.append(f"{at}: {code} warning x{len(ds)}: {title} (first here; --warning-traces shows each)")
    kept = tuple(d for d in r.diagnostics if not (d.severity is Severity.WARNING and d.suppressed is None))
    return replace(r, diagnostics=kept), lines


def _progress_text(path: str, states: int, frontier: int, seconds: float, mb: float) -> str:
    return (f"{path}: {states:,} states, {states / max(seconds, 1e-9):,.0f}/s, frontier {frontier:,}, "
            f"{mb:,.0f} MB, {seconds:.1f} s")


def summary_counts(results: list[CheckResult]) -> dict[str, int]:
    counts = {"files": len(results)} | {v.value: 0 for v in Verdict}
    for r in results:
        counts[r.verdict.value] += 1
    return counts


def summary_line(counts: dict[str, int], seconds: float, stopped: bool = False) -> str:
    """`23 files: 14 safe, 9 violations, 0 inconclusive in 16.5 s` (input errors when there are any)."""
    files = counts["files"]
    parts = [f"{counts['safe']} safe", f"{counts['violation']} violation{'s' if counts['violation'] != 1 else ''}",
             f"{counts['inconclusive']} inconclusive"]
    if counts["error"]:
        parts.append(f"{counts['error']} input error{'s' if counts['error'] != 1 else ''}")
    if counts.get("refused"):
        parts.append(f"{counts['refused']} kernel{'s' if counts['refused'] != 1 else ''} not extracted")
    tail = " (stopped at the first error: --fail-fast)" if stopped else ""
    return f"{files} file{'s' if files != 1 else ''}: {', '.join(parts)} in {seconds:.1f} s{tail}"
