"""`syncverify kernels`: check every kernel listed with its launch in `[tool.syncverify]` of pyproject.toml.

Why: a kernel cannot be checked from its file name alone -- its launch (block, cluster, the parameters
that decide its loops) is part of what is checked -- so the pre-commit hook (`syncverify-kernels` in
.pre-commit-hooks.yaml) cannot pass it the changed files. The repository lists its kernels once,

    [[tool.syncverify.kernels]]
    path = "kernels/ws_rowsum.cu"
    args = ["--block", "96", "--param", "2=8"]

and this command checks each as `syncverify check PATH ARGS…` would, with the table's defaults
(timeout, budgets) applied; the exit code is the worst of all (0 safe, 1 violation, 2 input error or
refusal, 3 inconclusive).
"""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError, check_defaults, kernels_of


def add_subcommand(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("kernels", help="check the kernels listed with their launches in [tool.syncverify] "
                       "of pyproject.toml (the pre-commit hook)")
    p.add_argument("files", nargs="*", metavar="FILE", help="ignored (pre-commit passes the changed files; every "
                   "listed kernel is checked, since a header may change any of them)")


def cmd_kernels(args: argparse.Namespace) -> int:
    from .check import add_subcommand as add_check
    from .check import cmd_check

    try:
        listed, where = kernels_of()
        defaults, _ = check_defaults()
    except ConfigError as err:
        print(f"syncverify: {err}", file=sys.stderr)
        return 2
    if not listed:
        print(f"syncverify: no kernels listed in [tool.syncverify] of {where or 'pyproject.toml (none found)'}; "
              "add [[tool.syncverify.kernels]] tables with `path` and `args`", file=sys.stderr)
        return 2
    worst = 0
    for path, extra in listed:
        parser = argparse.ArgumentParser(prog="syncverify")  # `check` alone, with the table's defaults
        add_check(parser.add_subparsers(dest="command")).set_defaults(**defaults)
        try:
            parsed = parser.parse_args(["check", path, *extra])
        except SystemExit:
            print(f"syncverify: {where}: the args of kernel {path} are not options of `check` (see above)",
                  file=sys.stderr)
            return 2
        code = cmd_check(parsed)
        worst = code if _rank(code) > _rank(worst) else worst
    return worst


def _rank(code: int) -> int:
    """Which exit code wins: an input error over a violation over inconclusive over safe."""
    return {0: 0, 3: 1, 1: 2, 2: 3}.get(code, 4)


HANDLERS = {"kernels": cmd_kernels}
