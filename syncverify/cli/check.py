"""`syncverify check PATH…`: verify specs, or kernels (extracted, then checked).

Registers the command's options (with their [tool.syncverify] defaults applied
by the package's `main`) and runs it: each file or sweep point in input order,
findings streamed by report/live.py, `--expect` compared with each file's
`// expect:` header. Exit codes: 0 safe, 1 violation, 2 input error, 3
inconclusive, 130 interrupted.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace

from .. import budget, runs
from ..budget import positive_float, positive_int
from ..check import Options, check_path
from ..diagnostics import Diagnostic, InputError, Severity, Span, make
from ..lang import load_many
from ..options import READINGS, readings_asked
from ..report import json_report
from ..result import CheckResult, Verdict, combine_exit
from . import extract as cli_extract
from .args import define


class _Defaults(argparse.HelpFormatter):
    """Help text that names each option's default, when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, [], argparse.SUPPRESS) and "%(default)" not in text \
                and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _sweep(value: str) -> tuple[str, tuple[int | str, ...]]:
    """NAME=V1,V2,…: a param swept over the values (one value: a plain override)."""
    name, raw = define(value)
    if isinstance(raw, int):
        return name, (raw,)
    return name, tuple(define(f"{name}={part}")[1] for part in raw.split(","))


def add_subcommand(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register `check`; returns its parser, on which `main` sets the [tool.syncverify] defaults."""
    check = sub.add_parser("check", help="verify .sync protocol specs",
                           formatter_class=_Defaults,
                           epilog="Defaults can be set in a [tool.syncverify] table of pyproject.toml "
                           "(docs/api.md). Exit codes: 0 safe, 1 violation, 2 input error, 3 inconclusive, "
                           "130 interrupted.")
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="spec files or directories (searched for *.sync), or kernels (.ptx, .cu); "
                       "- reads one spec from stdin")
    check.add_argument("--format", choices=["text", "json", "jsonl", "sarif"], default="text",
                       help="report format (jsonl: one JSON record per finding as it is found, per file, and a "
                       "summary)")
    check.add_argument("--engine", choices=["auto", "explicit", "z3", "bmc"], default="auto",
                       help="auto: explicit search, then the all-iterations proof")
    check.add_argument("-D", dest="defines", action="append", type=_sweep, default=[], metavar="NAME=VALUE[,VALUE...]",
                       help="override a param, or pin a `choose` value; several values sweep it "
                            "(several sweeps: every combination)")
    check.add_argument("--jobs", "-j", type=positive_int, default=1, metavar="N",
                       help="check up to N files or sweep points at once, or a --symbolic kernel's residue protocols "
                       "(results keep the input order; findings are then printed as each check ends)")
    check.add_argument("--search-jobs", type=positive_int, default=1, metavar="N",
                       help="run each explicit search on N processes: the same verdict, findings and "
                       "counterexamples as one (docs/engines.md, \"One search on several cores\")")
    check.add_argument("--max-states", type=positive_int, default=Options.max_states, metavar="N",
                       help="states a search may store, per file (deterministic budget)")
    check.add_argument("--rlimit", type=positive_int, default=Options.rlimit, metavar="UNITS",
                       help="Z3 resource units the bmc engine's queries may spend (deterministic budget)")
    check.add_argument("--timeout", type=positive_float, default=Options.timeout, metavar="SECONDS",
                       help="wall-clock limit of each check (depends on the machine's load)")
    check.add_argument("--max-memory", type=positive_float, default=Options.max_memory_mb, metavar="MB",
                       help="memory limit of each check")
    check.add_argument("--fail-fast", action="store_true",
                       help="stop the search at its first error and check no further file")
    check.add_argument("-q", "--quiet", action="store_true",
                       help="no progress on stderr (and no summary line for json/jsonl/sarif)")
    check.add_argument("--width", type=int, metavar="COLUMNS",
                       help="text width (default: the terminal's; unlimited, one line per step, when piped)")
    check.add_argument("--expect", action="store_true",
                       help="exit 0 iff every file's error codes equal its `// expect:` header")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.add_argument("--full-trace", action="store_true", help="print every step of a counterexample")
    check.add_argument("--warning-traces", action="store_true",
                       help="a kernel's warnings each with its trace (default: one line per code, with a count)")
    check.add_argument("--after-first-error", type=float, metavar="SECONDS",
                       help="stop the search this long after its first error (default: "
                       f"{cli_extract.AFTER_FIRST_ERROR:g}; 0: never)")
    check.add_argument("--no-assume", action="store_true",
                       help="drop the readings of unsettled PTX behaviour that production kernels rely on")
    check.add_argument("--assume", action="append", default=[], choices=sorted(READINGS), metavar="READING",
                       help="take a reading of unsettled PTX by name (repeatable; docs/model.md, \"Readings PTX does "
                       "not settle\"): after --no-assume, a name takes that one back")
    check.add_argument("--letter", action="append", default=[], choices=sorted(READINGS), metavar="READING",
                       help="drop one reading by name and check that behaviour to the letter of PTX (repeatable)")
    cli_extract.add_launch_args(check, required=False)
    sweep = check.add_argument_group("sweeps (docs/sweeps.md)")
    sweep.add_argument("--manifest", metavar="FILE",
                       help="check every point of a sweep manifest (TOML), over --jobs local workers or --ray")
    sweep.add_argument("--ray", metavar="auto|ADDRESS",
                       help="run the manifest's points as tasks on this Ray cluster (pip install 'syncverify[ray]')")
    sweep.add_argument("--cache", metavar="DIR",
                       help="where a sweep keeps builds and verdicts by content (default: $SYNCVERIFY_CACHE or "
                       "~/.cache/syncverify); shared storage lets machines share it")
    sweep.add_argument("--no-cache", action="store_true", help="a sweep keeps nothing between runs")
    return check


def expectation_met(result: CheckResult) -> tuple[bool, str]:
    """Compare a result with its file's `// expect:` header (design §4 --expect)."""
    from ..lang.load import parse_expect, read_source

    try:
        expect = parse_expect(read_source(result.path), result.path)
    except InputError as err:
        return False, err.diagnostics[0].message
    if expect is None:
        return False, "no `// expect:` header"
    if result.verdict is Verdict.INCONCLUSIVE:
        return False, f"inconclusive ({result.coverage})"
    errors = {d.code for d in result.diagnostics if d.is_error}
    warnings = {d.code for d in result.diagnostics if d.severity is Severity.WARNING}
    if errors != set(expect.errors):
        return False, f"expected {sorted(expect.errors) or 'safe'}, got {sorted(errors) or 'safe'}"
    missing = set(expect.warnings) - warnings
    if missing:
        return False, f"expected warnings {sorted(missing)} did not appear"
    return True, "as expected"


def _bad_defines(defines: list[tuple[str, int | str]]) -> list[Diagnostic]:
    return [make("SV114", f"-D {name}={raw}: {raw!r} is not an integer", Span("<command line>", 1, 1, 1, 2))
            for name, raw in defines if isinstance(raw, str)]


def cmd_check(args: argparse.Namespace) -> int:
    if args.manifest is not None or args.ray is not None:
        return _cmd_sweep(args)
    if not args.paths:  # a usage error, as argparse reports one (PATH is optional only beside --manifest)
        print("syncverify check: error: the following arguments are required: PATH (or --manifest FILE)",
              file=sys.stderr)
        raise SystemExit(2)
    refused = _search_jobs_refusal(args)
    if refused is not None:
        print(f"syncverify check: {refused}", file=sys.stderr)
        return 2
    try:
        readings = readings_asked(args.no_assume, args.assume, args.letter)
    except ValueError as err:
        print(f"syncverify check: {err}", file=sys.stderr)
        return 2
    bad = _bad_defines([(name, raw) for name, values in args.defines for raw in values])
    if bad:
        results = [CheckResult(path="<command line>", protocol=None, verdict=Verdict.ERROR, bound="",
                               diagnostics=tuple(bad))]
        _print(results, args)
        return 2
    try:
        paths = [p for arg in args.paths for p in (["-"] if arg == "-" else load_many([arg]))]
    except InputError as err:
        paths = []
        results = [CheckResult(path=args.paths[0], protocol=None, verdict=Verdict.ERROR, bound="",
                               diagnostics=tuple(err.diagnostics))]
    else:
        results = []
    options = Options(engine=args.engine, max_states=args.max_states, timeout=args.timeout,
                      max_memory_mb=args.max_memory, rlimit=args.rlimit, strict=args.strict,
                      full_trace=args.full_trace, after_first_error=cli_extract.after_first_error(args),
                      **readings, search_jobs=args.search_jobs)
    live = _live(args)
    run = _runner(live) if "-" in paths else check_path
    jobs = 1 if "-" in paths else args.jobs  # (stdin is read once, in this process)
    for is_kernel, group in itertools.groupby(paths, key=cli_extract.is_kernel):
        if live.stopped:
            break
        if not is_kernel:  # specs: every sweep point, in input order
            todo = runs.tasks(list(group), args.defines)
            if jobs > 1 and len(todo) > 1:  # over worker processes: each result printed as it is collected
                collected = runs.run_all(todo, options, jobs)
                for r in collected:
                    results.append(live.report(r))
                    if live.stopped:  # --fail-fast: closing the generator terminates the pool
                        collected.close()
                        break
                continue
            for task in todo:
                if live.stopped:
                    break
                results.append(live.check(task.path, replace(options, defines=dict(task.defines)), run,
                                          sweep=task.sweep))
            continue
        # kernels: extracted and checked, one sweep point after the other; findings are streamed
        # (placed at the CUDA source lines as they are found) and progress shown as for specs
        for path in group:
            for point, sweep in runs.points(args.defines):
                if live.stopped:
                    break
                got = live.check(path, replace(options, defines=dict(point)),
                                 lambda p, o: cli_extract.check_kernel(p, args, o), sweep=sweep)
                if not isinstance(got, CheckResult):
                    cli_extract.print_refusal(got)
                    live.refused += 1
                else:
                    results.append(got)
    budget.stop_if_interrupted()  # an interrupt some layer turned into an answer: no verdict is printed
    if not paths:
        _print(results, args)
    else:
        live.finish(results)
    if live.refused:
        return 2
    if args.expect:
        from ..report import text

        console = text.make_console(sys.stderr)
        ok_all = True
        for r in results:
            ok, why = expectation_met(r)
            ok_all &= ok
            if not ok or args.format == "text":
                console.print(f"{r.path}{r.point()}: expect {'[green]ok[/]' if ok else '[red]MISMATCH[/]'} — {why}")
        return 0 if ok_all else 1
    return combine_exit(results)


def _search_jobs_refusal(args: argparse.Namespace) -> str | None:
    """Why --search-jobs cannot be honoured with the other options given, or None."""
    if args.search_jobs <= 1:
        return None
    if args.jobs > 1:  # the checks of --jobs run in pool workers, which may not start processes of their own
        return "--search-jobs runs one search on several processes; --jobs runs several checks at once: give one"
    from ..engines.parallel import refusal

    return refusal(args.search_jobs, args.after_first_error or None)


def _cmd_sweep(args: argparse.Namespace) -> int:
    """`check --manifest FILE`: the sweep (syncverify/sweep/); paths and -D belong in the manifest."""
    from .. import sweep

    if args.manifest is None:
        print("syncverify check: --ray runs a sweep: give --manifest FILE", file=sys.stderr)
        return 2
    if args.paths or args.defines:
        print("syncverify check: with --manifest, the points (paths, -D values, launches) are the manifest's",
              file=sys.stderr)
        return 2
    if args.format == "jsonl":
        print("syncverify check: a sweep reports as text, json or sarif", file=sys.stderr)
        return 2
    cache = None if args.no_cache else (args.cache or sweep.default_cache())
    return sweep.main(args.manifest, fmt=args.format, jobs=args.jobs, cache=cache, ray=args.ray,
                      expect=args.expect, quiet=args.quiet, verbose=args.full_trace)


def _live(args: argparse.Namespace):
    """Streamed findings, progress, fail-fast and the summary line (report/live.py)."""
    from ..report.live import Live

    return Live(fmt=args.format, quiet=args.quiet, fail_fast=args.fail_fast, full_trace=args.full_trace,
                width=args.width, summarize_warnings=not args.warning_traces)


def _runner(live):
    """check_path, with `-` read from stdin (once) and named `<stdin>` in reports."""
    from ..lang import load

    text = sys.stdin.read()
    live.sources["<stdin>"] = text.splitlines()

    def run(path: str, options: Options) -> CheckResult:
        if path != "-":
            return check_path(path, options)
        from ..check import check_protocol

        try:
            protocol = load(text, options.defines, path="<stdin>")
        except InputError as err:
            return CheckResult(path="<stdin>", protocol=None, verdict=Verdict.ERROR, bound="",
                               diagnostics=tuple(err.diagnostics))
        return check_protocol(protocol, options)

    return run


def _print(results: list[CheckResult], args: argparse.Namespace) -> None:
    if args.format in ("json", "jsonl"):
        print(json_report.render(results))
    elif args.format == "sarif":
        from ..report import sarif

        print(sarif.render(results))
    else:
        from ..report import text  # (rich, imported only for text output)

        text.render(results, text.make_console(sys.stdout), full_trace=args.full_trace)


HANDLERS = {"check": cmd_check}
