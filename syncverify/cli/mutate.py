"""`syncverify mutate SPEC`: mutation testing of a safe spec (see syncverify.mutate for the outcomes).

Exit codes: 0 every mutant killed, warned, equivalent or invalid; 1 at least
one mutant survived (checked safe: an equivalent mutant or a missed bug —
the report prints each survivor as a diff to look at); 3 no survivor but some
mutant ran out of its budget; 2 the spec cannot be mutation-tested (an input
error, or the spec is not safe itself).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ..budget import positive_float, positive_int
from ..diagnostics import InputError


def add_subcommand(sub: Any, define: Callable[[str], tuple[str, int | str]]) -> None:
    from ..mutate import OPERATORS

    p = sub.add_parser("mutate", help="mutation-test a safe spec: which protocol bugs does the check catch?",
                       description="Apply protocol mutations (" + ", ".join(OPERATORS) + ") at every applicable "
                       "site of a safe spec, check each mutant and report which are flagged and which survive. "
                       "Exit 0: no survivor; 1: survivors; 3: inconclusive mutants; 2: input error or unsafe spec.")
    p.add_argument("path", metavar="SPEC")
    p.add_argument("-D", dest="defines", action="append", type=define, default=[], metavar="NAME=VALUE",
                   help="override a param")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--operators", metavar="LIST", help="comma-separated subset of: " + ", ".join(OPERATORS))
    p.add_argument("--max-states", type=positive_int, default=None,
                   help="state budget per mutant (default: 20x the original's states, at least 50,000)")
    p.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS", help="time budget per mutant")
    p.add_argument("--show", choices=["survivors", "all", "none"], default="survivors",
                   help="which mutants to print as a diff of the spec (text format)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def cmd_mutate(args: argparse.Namespace) -> int:
    from ..mutate import OPERATORS, Outcome, report_dict, run
    from ..report.live import PROGRESS_EVERY

    bad = [f"-D {name}={raw}: {raw!r} is not an integer" for name, raw in args.defines if isinstance(raw, str)]
    operators = None
    if args.operators:
        operators = {o.strip() for o in args.operators.split(",") if o.strip()}
        bad += [f"unknown mutation operator `{o}`; operators are {', '.join(OPERATORS)}"
                for o in sorted(operators - set(OPERATORS))]
    if bad:
        for line in bad:
            print(f"syncverify mutate: {line}", file=sys.stderr)
        return 2
    text_out = args.format == "text"

    last = [time.monotonic()]

    def progress(n: int, total: int, r: Any) -> None:
        if args.quiet:
            return
        if text_out and sys.stderr.isatty():
            print(f"\r{n}/{total} mutants checked", end="", file=sys.stderr, flush=True)
        elif time.monotonic() - last[0] >= PROGRESS_EVERY or n == total:
            # outside a terminal (CI, a hook): a plain line every few seconds, never silence for minutes
            last[0] = time.monotonic()
            what = f" (last: {r.mutant.ident} {r.outcome.value})" if hasattr(r, "mutant") else ""
            print(f"syncverify mutate: {n}/{total} mutants checked{what}", file=sys.stderr, flush=True)

    try:
        rep = run(args.path, dict(args.defines), max_states=args.max_states, timeout=args.timeout,
                  operators=operators, progress=progress)
    except InputError as err:
        for d in err.diagnostics:
            where = f"{d.span.path}:{d.span.line}:{d.span.column}: " if d.span else ""
            print(f"{where}{d.code}: {d.message}", file=sys.stderr)
        return 2
    if text_out and sys.stderr.isatty() and not args.quiet:
        print(file=sys.stderr)
    if args.format == "json":
        print(json.dumps(report_dict(rep), indent=2))
        return rep.exit_code()
    base = rep.baseline
    if base.verdict.value != "safe":
        codes = ", ".join(sorted(base.codes())) or base.coverage
        print(f"{rep.path}: the spec itself is {base.verdict.value} ({codes}); mutation testing needs a safe spec")
        return rep.exit_code()
    print(f"{rep.path}: {len(rep.results)} mutants of a safe spec ({base.stats.states:,} states)")
    for r in rep.results:
        codes = f" [{', '.join(r.codes)}]" if r.codes else ""
        print(f"  {r.outcome.value:<12} {r.mutant.ident:<28} {r.mutant.description}{codes}")
        if r.outcome is Outcome.INCONCLUSIVE or r.outcome is Outcome.INVALID:
            print(f"  {'':<12} {'':<28} ({r.detail})")
        if args.show == "all" or (args.show == "survivors" and r.outcome is Outcome.SURVIVED):
            for line in rep.diff(r).splitlines():
                print(f"      {line}")
    summary = ", ".join(f"{v} {k}" for k, v in rep.counts.items() if v)
    print(f"summary: {summary or 'no mutants'}")
    if rep.survivors:
        print("a survivor is checked safe: either the spec does not depend on what was mutated (equivalent), "
              "or the check misses a bug — look at each one")
    return rep.exit_code()


HANDLERS = {"mutate": cmd_mutate}
