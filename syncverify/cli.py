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

from . import __version__, budget, cli_extract, cli_gpu, cli_mutate, cli_trace, runs
from .budget import positive_float, positive_int
from .check import Options, check_path
from .diagnostics import CODES, Diagnostic, InputError, Severity, Span, make
from .export import cli as cli_export
from .lang import load_many
from .report import json_report
from .result import CheckResult, Verdict, combine_exit


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and a one-line message (its default is also 2)."""


class _Defaults(argparse.HelpFormatter):
    """Help text that names each option's default, when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, [], argparse.SUPPRESS) and "%(default)" not in text \
                and action.option_strings:
            text += " (default: %(default)s)"
        return text


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
    parser.add_argument("--version", action="version", version=f"syncverify {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="verify .sync protocol specs",
                           formatter_class=_Defaults,
                           epilog="Defaults can be set in a [tool.syncverify] table of pyproject.toml "
                           "(docs/api.md). Exit codes: 0 safe, 1 violation, 2 input error, 3 inconclusive, "
                           "130 interrupted.")
    check.add_argument("paths", nargs="+", metavar="PATH",
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
                       help="check up to N files or sweep points at once (results keep the input order; "
                       "findings are then printed as each check ends)")
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
    parser.check_parser = check  # type: ignore[attr-defined]  # for the [tool.syncverify] defaults
    check.add_argument("--width", type=int, metavar="COLUMNS",
                       help="text width (default: the terminal's; unlimited, one line per step, when piped)")
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
                      full_trace=args.full_trace,
                      assume_tcgen05_commit_order=not args.no_assume, assume_dealloc_blocks=not args.no_assume,
                      assume_commit_release=not args.no_assume)
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
        # kernels: extracted and checked, one sweep point after the other. Their findings are not
        # streamed (they are placed at the CUDA source lines once the check is over), but
        # --fail-fast still ends the search at the first error.
        stop_at_first = (lambda d: True) if args.fail_fast else None
        for path in group:
            for point, sweep in runs.points(args.defines):
                if live.stopped:
                    break
                got = cli_extract.check_kernel(path, args, replace(options, defines=dict(point),
                                                                   on_finding=stop_at_first))
                if isinstance(got, CheckResult):
                    results.append(live.report(replace(got, sweep=sweep) if sweep else got))
                else:
                    cli_extract.print_refusal(got)
                    live.refused += 1
    budget.stop_if_interrupted()  # an interrupt some layer turned into an answer: no verdict is printed
    if not paths:
        _print(results, args)
    else:
        live.finish(results)
    if live.refused:
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


def _live(args: argparse.Namespace):
    """Streamed findings, progress, fail-fast and the summary line (report/live.py)."""
    from .report.live import Live

    return Live(fmt=args.format, quiet=args.quiet, fail_fast=args.fail_fast, full_trace=args.full_trace,
                width=args.width)


def _runner(live):
    """check_path, with `-` read from stdin (once) and named `<stdin>` in reports."""
    from .lang import load

    text = sys.stdin.read()
    live.sources["<stdin>"] = text.splitlines()

    def run(path: str, options: Options) -> CheckResult:
        if path != "-":
            return check_path(path, options)
        from .check import check_protocol

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
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from rich.markdown import Markdown

        from .report import text

        text.make_console(sys.stdout).print(Markdown(explain(code)))
    else:
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
    from .config import ConfigError, check_defaults

    try:
        defaults, _ = check_defaults()
    except ConfigError as err:
        print(f"syncverify: {err}", file=sys.stderr)
        return 2
    if defaults:
        parser.check_parser.set_defaults(**defaults)  # type: ignore[attr-defined]
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
        if not ours:
            return handler(args)
        with budget.sigint_watched():
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
