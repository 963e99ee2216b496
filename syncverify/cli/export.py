"""`syncverify export --promela SPEC [-D NAME=VALUE]… [-o FILE]`.

Exit codes follow the design contract: 0 the model was written; 2 the input
is bad (syntax, unknown name, a -D that is not an integer) or the protocol
uses something the export cannot mirror faithfully — it says what, and
writes nothing, rather than a model that could call a buggy protocol safe.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {}


def add_subcommand(sub: argparse._SubParsersAction, define: Callable[[str], tuple[str, int | str]]) -> None:
    exp = sub.add_parser("export", help="write a model of a protocol for another verifier (SPIN)")
    exp.add_argument("--promela", action="store_true", required=True,
                     help="a Promela model (the only format so far)")
    exp.add_argument("spec", metavar="SPEC", help="a .sync file")
    exp.add_argument("-D", dest="defines", action="append", type=define, default=[], metavar="NAME=VALUE",
                     help="override a param")
    exp.add_argument("-o", dest="output", metavar="FILE", help="write here instead of standard output")


def cmd_export(args: argparse.Namespace) -> int:
    from ..diagnostics import InputError
    from ..export.promela import ExportError, export_model
    from ..lang import load

    bad = [f"-D {name}={raw}: {raw!r} is not an integer" for name, raw in args.defines if isinstance(raw, str)]
    if bad:
        print("syncverify export: SV114: " + "; ".join(bad), file=sys.stderr)
        return 2
    try:
        protocol = load(args.spec, dict(args.defines))
        model = export_model(protocol)
    except InputError as err:
        for d in err.diagnostics:
            where = f"{d.span.path}:{d.span.line}:{d.span.column}: " if d.span else ""
            print(f"{where}{d.code}: {d.message}", file=sys.stderr)
        return 2
    except ExportError as err:
        print(f"syncverify export: {args.spec}: cannot export faithfully: {err}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(model.text)
        print(f"wrote {args.output}; verify with: spin -a {args.output} && gcc -DSAFETY -O2 -o pan pan.c && "
              f"./pan -m{model.max_depth}", file=sys.stderr)
    else:
        sys.stdout.write(model.text)
    return 0


HANDLERS["export"] = cmd_export
