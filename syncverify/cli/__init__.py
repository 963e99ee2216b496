"""Command line: `syncverify check|explain|emit|run|trace|mutate|export|extract …`.

One module per command, each registering its subparser (`add_subcommand`) and
its handler (`HANDLERS`); this package holds what they share: the parser,
`main` (the [tool.syncverify] defaults, SIGINT, a closed pipe) and `entry`, the
`syncverify` script. Every subcommand returns an exit code.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import threading
from collections.abc import Sequence

from .. import __version__, budget
from . import check as cli_check
from . import emit as cli_emit
from . import explain as cli_explain
from . import export as cli_export
from . import extract as cli_extract
from . import kernels as cli_kernels
from . import mutate as cli_mutate
from . import run as cli_run
from . import trace as cli_trace
from .args import define


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and a one-line message (its default is also 2)."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="syncverify", description="Static verifier for GPU kernel synchronization protocols.")
    parser.add_argument("--version", action="version", version=f"syncverify {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    # the check parser is kept for the [tool.syncverify] defaults
    parser.check_parser = cli_check.add_subcommand(sub)  # type: ignore[attr-defined]
    cli_explain.add_subcommand(sub)
    cli_emit.add_subcommand(sub)
    cli_run.add_subcommand(sub)
    cli_trace.add_subcommand(sub, define)
    cli_mutate.add_subcommand(sub, define)
    cli_export.add_subcommand(sub, define)
    cli_extract.add_subcommand(sub)
    cli_kernels.add_subcommand(sub)
    return parser


def _on_sigint(signum: int, frame: object) -> None:
    """SIGINT: remember it (budget.interrupted says why), then interrupt as Python does. From here
    on the process only winds down: what the interrupt breaks in objects being freed (a Z3 context
    cut off in its constructor) is not reported."""
    budget.interrupted = True
    sys.unraisablehook = lambda unraisable: None
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    from ..config import ConfigError, check_defaults

    try:
        defaults, _ = check_defaults()
    except ConfigError as err:
        print(f"syncverify: {err}", file=sys.stderr)
        return 2
    if defaults:
        parser.check_parser.set_defaults(**defaults)  # type: ignore[attr-defined]
    args = parser.parse_args(argv)
    handler = {**cli_check.HANDLERS, **cli_explain.HANDLERS, **cli_emit.HANDLERS, **cli_run.HANDLERS,
               **cli_trace.HANDLERS, **cli_mutate.HANDLERS, **cli_export.HANDLERS,
               **cli_extract.HANDLERS, **cli_kernels.HANDLERS}[args.command]
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


# the collector's first threshold in a syncverify process (Python's default: 700 allocations)
GC_YOUNG_THRESHOLD = 10_000


def collect_less() -> None:
    """The cyclic garbage collector, set for the process of a command (``entry`` only: a program that
    imports syncverify keeps its own settings).

    A check allocates millions of small objects (a kernel's parse tree, the executed warps' registers,
    the search's states and records), nearly all freed by their reference counts or kept to the end; at
    Python's default thresholds the collector ran 488 times in the check of the 1x2 ping-pong GEMM's
    deadlock seed and took 0.11 to 0.18 of its 1.3 to 1.5 CPU seconds, mostly traversing objects that
    were alive and stayed so. So the modules' own objects, imported by now, are frozen (never traversed
    again: they live as long as the process), and a young collection waits for GC_YOUNG_THRESHOLD
    allocations (0.05 CPU s of collection in that check). The older generations keep Python's multipliers
    (10): at 20 the 1x1 ping-pong GEMM's K-symbolic check peaked at 228 MB, not 204. Cycles are still
    collected, later; no answer depends on when (bench/RESULTS-speed.md)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


def entry() -> None:
    collect_less()
    try:
        code = main()
    except KeyboardInterrupt:
        # a Ctrl-C before ``main`` handles its own (while it builds its parser and reads the configuration):
        # an interrupt like a later one, exit 130, not a death by SIGINT (Python's own exit for an interrupt
        # nobody caught: exit status -2 to the caller)
        code = 130
    sys.exit(code)
