"""`python -m syncverify` and the `syncverify` command.

The command line's modules (z3, lark, the engines) take a second or more to import, longer on a loaded
machine. A Ctrl-C in that time is an interrupt like any other: exit 130 with no traceback, as
`cli.main` answers one that comes later."""

import sys


def run() -> None:
    try:
        from .cli import entry
    except KeyboardInterrupt:
        sys.exit(130)
    entry()


if __name__ == "__main__":
    run()
