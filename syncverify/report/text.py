"""Terminal report via rich: `file:line:col: SVnnn message`, the source line, a caret.

Colour only when writing to a terminal. With NO_COLOR set nothing is styled at
all (rich's own NO_COLOR handling drops colours but keeps bold, and FORCE_COLOR
would still bring escapes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..budget import DETERMINISTIC
from ..diagnostics import Diagnostic, Severity
from ..result import CheckResult, Verdict

_VERDICT_STYLE = {Verdict.SAFE: "bold green", Verdict.VIOLATION: "bold red", Verdict.ERROR: "bold red",
                  Verdict.INCONCLUSIVE: "bold yellow"}


def make_console(stream=None, width: int | None = None) -> Console:
    """A console on `stream`. Width: `width` if given (`--width`), else the terminal's, else
    $COLUMNS, else unlimited when piped (a log or a file should not be folded at 80 columns)."""
    no_color = bool(os.environ.get("NO_COLOR"))
    if width is None and not (stream or sys.stdout).isatty() and not os.environ.get("COLUMNS", "").isdigit():
        width = 1000
    # emoji=False: rich reads `:100:` as an emoji code, and `file.cu:100:9` would print as `file.cu💯9`
    return Console(file=stream, highlight=False, soft_wrap=True, no_color=no_color, emoji=False,
                   color_system=None if no_color else "auto", width=width)


def _source_line(path: str, line: int, cache: dict[str, list[str]]) -> str | None:
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as f:
                cache[path] = f.read().splitlines()
        except (OSError, UnicodeDecodeError):
            cache[path] = []
    lines = cache[path]
    text = lines[line - 1] if 0 < line <= len(lines) else None
    if text is not None and any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in text):
        return None  # a binary file: nothing readable to show
    return text


def _snippet(console: Console, span, sources: dict[str, list[str]], style: str, indent: str = "    ") -> None:
    """The source line of a span and a caret under it."""
    src = _source_line(span.path, span.line, sources)
    if src is None:
        return
    width = max(1, (span.end_column - span.column) if span.end_line == span.line else 1)
    at = len(src[: span.column - 1].expandtabs(4))  # the caret's column once tabs are expanded
    console.print(indent + escape(src.expandtabs(4)))
    console.print(indent + " " * at + f"[{style}]^" + "~" * (width - 1) + "[/]")


def print_diagnostic(console: Console, d: Diagnostic, sources: dict[str, list[str]], full_trace: bool,
                     compact: bool = False) -> None:
    style = "red" if d.severity is Severity.ERROR else "yellow"
    where = f"{d.span}: " if d.span else ""
    if getattr(d, "suppressed", None) is not None:
        console.print(f"{escape(where)}[dim]{d.code} suppressed ({escape(d.suppressed)}): {escape(d.message)}[/]")
        return
    console.print(f"{escape(where)}[bold {style}]{d.code}[/] {escape(d.message)}")
    if d.span:
        _snippet(console, d.span, sources, style)
    for rel in d.related:
        console.print(f"  [dim]note:[/] {escape(str(rel.span))}: {escape(rel.message)}")
        _snippet(console, rel.span, sources, "cyan", "      ")
    for note in d.notes:
        console.print(f"  [dim]note:[/] {escape(note)}")
    if d.trace:
        print_trace(console, d, full_trace, compact)


def print_trace(console: Console, d: Diagnostic, full_trace: bool, compact: bool = False) -> None:
    if compact:
        _print_compact_trace(console, d)
        return
    table = Table(title=f"counterexample ({len(d.trace)} steps)", title_justify="left", show_edge=False,
                  pad_edge=False, box=None)
    for col in ("step", "cta", "role", "line", "iter", "op", "state after"):
        table.add_column(col, overflow="fold")
    for s in d.trace:
        table.add_row(str(s.step), str(s.cta), escape(s.role), str(s.line), escape(s.iteration),
                      escape(s.op) + (f" [dim]{escape(s.note)}[/]" if s.note else ""), escape(s.state))
    console.print(table)


def _print_compact_trace(console: Console, d: Diagnostic) -> None:
    """One line per step (for logs and pipes, where a table folds): step, who, iteration, line,
    operation, and the barrier state after it."""
    console.print(f"  counterexample ({len(d.trace)} steps):")
    who_w = max(len(s.role) for s in d.trace)
    for s in d.trace:
        cta = f"cta{s.cta} " if any(t.cta for t in d.trace) else ""
        it = f" {s.iteration}" if s.iteration else ""
        note = f" [dim]{escape(s.note)}[/]" if s.note else ""
        state = f"  [dim]→ {escape(s.state)}[/]" if s.state else ""
        console.print(f"    {s.step:>4}  {cta}{escape(s.role):<{who_w}}  line {s.line:<4}{escape(it)}  "
                      f"{escape(s.op)}{note}{state}")


def render(results: Iterable[CheckResult], console: Console, full_trace: bool = False,
           sources: dict[str, list[str]] | None = None, compact: bool = False) -> None:
    sources = {} if sources is None else sources
    for r in results:
        for d in r.diagnostics:
            print_diagnostic(console, d, sources, full_trace, compact)
        name = r.point() + (f" ({r.protocol})" if r.protocol else "")
        extra = f" — {r.coverage}" if r.coverage else ""
        if r.stopped_by:  # which budget ended it, and whether a rerun ends the same way
            kind = "deterministic" if r.stopped_by in DETERMINISTIC else "depends on the machine"
            extra += f" [stopped by: {r.stopped_by} budget, {kind}]"
        stats = ""
        if r.stats.states:
            stats = f" [dim][{r.stats.states} states, {r.stats.seconds:.2f}s][/]"
        bound = f" [dim]bound: {r.bound}[/]" if r.verdict in (Verdict.SAFE, Verdict.VIOLATION) else ""
        if r.assumed:  # the readings of unsettled PTX the verdict relied on (--no-assume drops them)
            bound += f" [dim](assumed: {escape(', '.join(r.assumed))})[/]"
        console.print(f"{escape(r.path)}{escape(name)}: [{_VERDICT_STYLE[r.verdict]}]{r.verdict.value}[/]"
                      f"{bound}{escape(extra)}{stats}")
