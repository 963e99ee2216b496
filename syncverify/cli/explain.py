"""`syncverify explain CODE`: print the documentation of a diagnostic code (exit 2 for an unknown code)."""

from __future__ import annotations

import argparse
import os
import sys

from ..diagnostics import CODES


def add_subcommand(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code")


def cmd_explain(args: argparse.Namespace) -> int:
    from ..docs import explain

    code = args.code.upper()
    if code not in CODES:
        print(f"syncverify: unknown code {args.code}; codes are {', '.join(CODES)}", file=sys.stderr)
        return 2
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from rich.markdown import Markdown

        from ..report import text

        text.make_console(sys.stdout).print(Markdown(explain(code)))
    else:
        print(explain(code))
    return 0


HANDLERS = {"explain": cmd_explain}
