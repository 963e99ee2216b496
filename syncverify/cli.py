"""Command line: `syncverify check|explain …`. Every subcommand returns an exit code."""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace

from . import budget, cli_extract, cli_gpu, cli_mutate, cli_trace, runs
from .budget import positive_float, positive_int
from .check import Options, check_path
from .diagnostics import CODES, Diagnostic, InputError, Span, make
from .export import cli as cli_export
from .lang import load_many
from .report import json_report
from .result import CheckResult, Verdict, combine_exit


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and a one-line message (its default is also 2)."""


def _define(value: str) -> tuple[str, int | str]:
    """NAME=VALUE; a VALUE that is not an integer is kept as text and reported as SV114."""
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"-D {value}: expected NAME=VALUE")
    name, _, raw = value.partition("=")
    try:
        return name.strip(), int(raw.strip(), 0)
    except ValueError:
        return name.strip(), raw


def _sweep(value: str) -> tuple[str, tuple[int | str, ...]]:
    """NAME=V1,V2,…: a param swept over the values (one value: a plain override)."""
    name, raw = _define(value)
    if isinstance(raw, int):
        return name, (raw,)
    return name, tuple(_define(f"{name}={part}")[1] for part in raw.split(","))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="syncverify", description="Static verifier for GPU kernel synchronization protocols.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="verify .sync protocol specs")
    check.add_argument("paths", nargs="+", metavar="PATH",
                       help="spec files or directories (searched for *.sync), or kernels (.ptx, .cu)")
    check.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    check.add_argument("--engine", choices=["auto", "explicit", "z3", "bmc"], default="auto")
    check.add_argument("-D", dest="defines", action="append", type=_sweep, default=[], metavar="NAME=VALUE[,VALUE...]",
                       help="override a param, or pin a `choose` value; several values sweep it "
                            "(several sweeps: every combination)")
    check.add_argument("--jobs", "-j", type=positive_int, default=1, metavar="N",
                       help="check up to N files or sweep points at once (results keep the input order)")
    check.add_argument("--max-states", type=positive_int, default=Options.max_states, metavar="N",
                       help="states a search may store (deterministic budget)")
    check.add_argument("--rlimit", type=positive_int, default=Options.rlimit, metavar="UNITS",
                       help="Z3 resource units the bmc engine's queries may spend (deterministic budget)")
    check.add_argument("--timeout", type=positive_float, default=Options.timeout, metavar="SECONDS",
                       help="wall-clock limit of each check (depends on the machine's load)")
    check.add_argument("--max-memory", type=positive_float, default=Options.max_memory_mb, metavar="MB",
                       help="memory limit of each check")
    check.add_argument("--expect", action="store_true",
                       help="exit 0 iff every file's error codes equal its `// expect:` header")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.add_argument("--full-trace", action="store_true", help="print every step of a counterexample")
    check.add_argument("--no-assume", action="store_true",
                       help="drop the readings of unsettled PTX behaviour that production kernels rely on")
    cli_extract.add_launch_args(check, required=False)
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code")
    cli_gpu.add_subcommands(sub)
    cli_trace.add_subcommand(sub, _define)
    cli_mutate.add_subcommand(sub, _define)
    cli_export.add_subcommand(sub, _define)
    cli_extract.add_subcommand(sub)
    return parser


def expectation_met(result: CheckResult) -> tuple[bool, str]:
    """Compare a result with its file's `// expect:` header (design §4 --expect)."""
    from .lang.load import parse_expect, read_source

    try:
        expect = parse_expect(read_source(result.path), result.path)
    except InputError as err:
        return False, err.diagnostics[0].message
    if expect is None:
        return False, "no `// expect:` header"
    if result.verdict is Verdict.INCONCLUSIVE:
        return False, f"inconclusive ({result.coverage})"
    errors = {d.code for d in result.diagnostics if d.is_error}
    warnings = {d.code for d in result.diagnostics if not d.is_error}
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
    bad = _bad_defines([(name, raw) for name, values in args.defines for raw in values])
    if bad:
        results = [CheckResult(path="<command line>", protocol=None, verdict=Verdict.ERROR, bound="",
                               diagnostics=tuple(bad))]
        _print(results, args)
        return 2
    try:
        paths = load_many(args.paths)
    except InputError as err:
        paths = []
        results = [CheckResult(path=args.paths[0], protocol=None, verdict=Verdict.ERROR, bound="",
                               diagnostics=tuple(err.diagnostics))]
    else:
        results = []
    options = Options(engine=args.engine, max_states=args.max_states, timeout=args.timeout,
                      max_memory_mb=args.max_memory, rlimit=args.rlimit, strict=args.strict,
                      full_trace=args.full_trace,
                      assume_tcgen05_commit_order=not args.no_assume, assume_dealloc_blocks=not args.no_assume)
    one = lambda path, opts: _check_with_progress(path, opts, args.format)  # noqa: E731
    refused = 0
    for is_kernel, group in itertools.groupby(paths, key=cli_extract.is_kernel):
        if not is_kernel:  # specs: every sweep point, over --jobs workers, in input order
            results += runs.run_all(runs.tasks(list(group), args.defines), options, args.jobs, one)
            continue
        for path in group:  # kernels: extracted and checked here, one sweep point after the other
            for point, sweep in runs.points(args.defines):
                got = cli_extract.check_kernel(path, args, replace(options, defines=dict(point)))
                if isinstance(got, CheckResult):
                    results.append(replace(got, sweep=sweep) if sweep else got)
                else:
                    cli_extract.print_refusal(got)
                    refused += 1
    budget.stop_if_interrupted()  # an interrupt some layer turned into an answer: no verdict is printed
    _print(results, args)
    if refused:
        return 2
    if args.expect:
        from .report import text

        console = text.make_console(sys.stderr)
        ok_all = True
        for r in results:
            ok, why = expectation_met(r)
            ok_all &= ok
            if not ok or args.format == "text":
                console.print(f"{r.path}{r.point()}: expect {'[green]ok[/]' if ok else '[red]MISMATCH[/]'} — {why}")
        return 0 if ok_all else 1
    return combine_exit(results)


def _check_with_progress(path: str, options: Options, fmt: str) -> CheckResult:
    """Check one file; on a terminal (text output) show a live status line while it runs."""
    if fmt != "text" or not sys.stderr.isatty():  # a real terminal only, not a forced one
        return check_path(path, options)
    from .report import text

    console = text.make_console(sys.stderr)
    with console.status(f"{path}: starting") as status:
        def show(states: int, frontier: int, seconds: float, mb: float) -> None:
            status.update(f"{path}: {states:,} states, {states / max(seconds, 1e-9):,.0f}/s, "
                          f"frontier {frontier:,}, {mb:,.0f} MB, {seconds:.1f}s")

        return check_path(path, replace(options, progress=show))


def _print(results: list[CheckResult], args: argparse.Namespace) -> None:
    if args.format == "json":
        print(json_report.render(results))
    elif args.format == "sarif":
        from .report import sarif

        print(sarif.render(results))
    else:
        from .report import text  # (rich, imported only for text output)

        text.render(results, text.make_console(sys.stdout), full_trace=args.full_trace)


def cmd_explain(args: argparse.Namespace) -> int:
    from .docs import explain

    code = args.code.upper()
    if code not in CODES:
        print(f"syncverify: unknown code {args.code}; codes are {', '.join(CODES)}", file=sys.stderr)
        return 2
    print(explain(code))
    return 0


def _on_sigint(signum: int, frame: object) -> None:
    """SIGINT: remember it (budget.interrupted says why), then interrupt as Python does. From here
    on the process only winds down: what the interrupt breaks in objects being freed (a Z3 context
    cut off in its constructor) is not reported."""
    budget.interrupted = True
    sys.unraisablehook = lambda unraisable: None
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = {"check": cmd_check, "explain": cmd_explain, **cli_gpu.HANDLERS, **cli_trace.HANDLERS,
               **cli_mutate.HANDLERS, **cli_export.HANDLERS, **cli_extract.HANDLERS}[args.command]
    budget.interrupted = False
    hook = sys.unraisablehook
    previous = signal.getsignal(signal.SIGINT)
    ours = previous is signal.default_int_handler and threading.current_thread() is threading.main_thread()
    if ours:  # (not when the caller chose its own handling, nor off the main thread, where it cannot)
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`syncverify … | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        if budget.interrupted:  # whatever the interrupt became on its way up (exit 130 either way)
            return 130
        raise
    finally:
        if ours:
            signal.signal(signal.SIGINT, previous)
        if not budget.interrupted:  # (after an interrupt the process is winding down: stay quiet)
            sys.unraisablehook = hook


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
