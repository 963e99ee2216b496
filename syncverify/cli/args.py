"""The `-D NAME=VALUE` argument type that several commands share.

A module of its own so that `check` (whose -D sweeps values) and the package's
parser (which hands `define` to trace, mutate and export) both import it, and
neither imports the other.
"""

from __future__ import annotations

import argparse


def define(value: str) -> tuple[str, int | str]:
    """NAME=VALUE; a VALUE that is not an integer is kept as text and reported as SV114."""
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"-D {value}: expected NAME=VALUE")
    name, _, raw = value.partition("=")
    try:
        return name.strip(), int(raw.strip(), 0)
    except ValueError:
        return name.strip(), raw
