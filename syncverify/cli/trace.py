"""`syncverify trace SPEC -o trace.html`: the swimlane view of a counterexample or of one schedule.

One module per command, as the others are: the package (cli/__init__.py) only
registers the subcommand and its handler.

Exit codes follow `check`: 0 safe, 1 violation, 3 inconclusive — the page is
written in all three cases — and 2 for bad input or an unwritable output path
(then nothing is written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..budget import positive_float, positive_int
from ..check import Options, check_protocol
from ..diagnostics import InputError, Span, make
from ..options import READINGS, readings_asked
from ..result import CheckResult, Verdict


def add_subcommand(sub: argparse._SubParsersAction, define: Callable[[str], tuple[str, int | str]]) -> None:
    p = sub.add_parser("trace", help="write an HTML/SVG swimlane view of a counterexample (or of one schedule)")
    p.add_argument("path", metavar="SPEC", help="a .sync file")
    p.add_argument("-o", "--output", metavar="HTML",
                   help="the page to write (default: SPEC's name with .trace.html, in the current directory)")
    p.add_argument("-D", dest="defines", action="append", type=define, default=[], metavar="NAME=VALUE",
                   help="override a param")
    p.add_argument("--code", action="append", default=[], metavar="SVnnn",
                   help="draw only the counterexamples of this code (repeatable)")
    p.add_argument("--max-states", type=positive_int, default=Options.max_states)
    p.add_argument("--timeout", type=positive_float, default=Options.timeout, metavar="SECONDS")
    p.add_argument("--max-memory", type=positive_float, default=Options.max_memory_mb, metavar="MB")
    p.add_argument("--full-trace", action="store_true",
                   help="draw every step of a counterexample (default: the steps `check` reports)")
    p.add_argument("--no-assume", action="store_true",
                   help="drop the readings of unsettled PTX behaviour that production kernels rely on")
    p.add_argument("--assume", action="append", default=[], choices=sorted(READINGS), metavar="READING",
                   help="take a reading of unsettled PTX by name (repeatable; docs/model.md, \"Readings PTX does "
                   "not settle\"): after --no-assume, a name takes that one back")
    p.add_argument("--letter", action="append", default=[], choices=sorted(READINGS), metavar="READING",
                   help="drop one reading by name and check that behaviour to the letter of PTX (repeatable)")


def _fail(results: list[CheckResult]) -> int:
    from ..report import text

    text.render(results, text.make_console(sys.stderr))
    return 2


def _cannot_write(out: Path) -> str | None:
    """Why the page could not be written to ``out`` (a directory, a folder that is not there or not
    writable), or None. The write itself still reports what this cannot foresee."""
    if out.is_dir():
        return "Is a directory"
    folder = out.parent  # (Path("page.html").parent is Path("."))
    if not folder.is_dir():
        return f"no folder {folder}"
    if not os.access(out if out.exists() else folder, os.W_OK):
        return "Permission denied"
    return None


def cmd_trace(args: argparse.Namespace) -> int:
    from ..lang import load
    from ..lang.choices import open_choices
    from ..report.swimlane import process_lanes, render_html, views_for
    from ..semantics.machine import Assumptions

    try:
        readings = readings_asked(args.no_assume, args.assume, args.letter)
    except ValueError as err:
        print(f"syncverify trace: {err}", file=sys.stderr)
        return 2
    bad = [make("SV114", f"-D {name}={raw}: {raw!r} is not an integer", Span("<command line>", 1, 1, 1, 2))
           for name, raw in args.defines if isinstance(raw, str)]
    if bad:
        return _fail([CheckResult(path="<command line>", protocol=None, verdict=Verdict.ERROR, bound="",
                                  diagnostics=tuple(bad))])
    try:
        protocol = load(args.path, dict(args.defines))
    except InputError as err:
        return _fail([CheckResult(path=args.path, protocol=None, verdict=Verdict.ERROR, bound="",
                                  diagnostics=tuple(err.diagnostics))])
    several = open_choices(protocol)
    if several:  # the page replays traces on one protocol: the assignment must be fixed
        return _fail([CheckResult(path=args.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                                  diagnostics=(make("SV118", f"{several}; a trace page shows one assignment: pin each "
                                                "with -D NAME=VALUE (`syncverify check` names the assignment of "
                                                "each finding)", protocol.choices[0].span),))])
    out = Path(args.output) if args.output else Path(Path(args.path).stem + ".trace.html")
    cannot = _cannot_write(out)
    if cannot:  # said before the search, which can take minutes, not after it
        print(f"syncverify: cannot write {out}: {cannot}", file=sys.stderr)
        return 2
    options = Options(max_states=args.max_states, timeout=args.timeout, max_memory_mb=args.max_memory,
                      full_trace=True, defines=dict(args.defines),
                      **readings)
    result = check_protocol(protocol, options)
    if result.verdict is Verdict.ERROR:
        return _fail([result])
    codes = [c.upper() for c in args.code]
    traced = sorted({d.code for d in result.diagnostics if d.trace})
    missing = [c for c in codes if c not in traced]
    if missing:
        found = ", ".join(traced) if traced else "none"
        print(f"syncverify: {args.path}: no counterexample for {', '.join(missing)} (counterexamples found: {found})",
              file=sys.stderr)
        return 2
    lanes = process_lanes(protocol)
    views = views_for(protocol, result, codes, lanes=lanes, trimmed=not args.full_trace,
                      assumptions=Assumptions.of(options))
    page = render_html(protocol, result, views, lanes)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as err:
        print(f"syncverify: cannot write {out}: {err.strerror or err}", file=sys.stderr)
        return 2
    what = ", ".join(f"{v.code} ({len(v.steps)} steps)" if v.code else f"one schedule ({len(v.steps)} steps)"
                     for v in views)
    print(f"{out}: {result.verdict.value}; {what}")
    return result.verdict.exit_code


HANDLERS = {"trace": cmd_trace}
