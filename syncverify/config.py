"""Defaults for `syncverify check` from a `[tool.syncverify]` table in pyproject.toml.

Why: a repository of specs wants the same budget and format in CI, in the pre-commit
hook and at the terminal without repeating flags. The nearest pyproject.toml at or
above the current directory is read; flags on the command line still win. Unknown
keys and values of the wrong type are input errors (exit 2), never silently ignored.

    [tool.syncverify]
    timeout = 120          # seconds
    max-states = 500000
    engine = "explicit"
    fail-fast = true
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

# key in pyproject.toml -> (argparse dest, type)
KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "timeout": ("timeout", (int, float)),
    "max-states": ("max_states", int),
    "max-memory": ("max_memory", (int, float)),
    "rlimit": ("rlimit", int),
    "jobs": ("jobs", int),
    "engine": ("engine", str),
    "format": ("format", str),
    "strict": ("strict", bool),
    "fail-fast": ("fail_fast", bool),
    "quiet": ("quiet", bool),
    "width": ("width", int),
    "full-trace": ("full_trace", bool),
    "no-assume": ("no_assume", bool),
}


class ConfigError(Exception):
    """A [tool.syncverify] table that cannot be used (reported with exit code 2)."""


def find(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        f = d / "pyproject.toml"
        if f.is_file():
            return f
    return None


def check_defaults(start: Path | None = None) -> tuple[dict[str, Any], Path | None]:
    """argparse defaults for `check` from the nearest pyproject.toml, and that file."""
    path = find(start)
    if path is None:
        return {}, None
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f).get("tool", {}).get("syncverify", {})
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: cannot read it: {err}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.syncverify] must be a table")
    out: dict[str, Any] = {}
    for key, value in table.items():
        norm = key.replace("_", "-")
        if norm not in KEYS:
            raise ConfigError(f"{path}: [tool.syncverify] has an unknown key `{key}` (known: {', '.join(KEYS)})")
        dest, kind = KEYS[norm]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ConfigError(f"{path}: [tool.syncverify] {key} = {value!r}: expected "
                              f"{'true or false' if kind is bool else 'a string' if kind is str else 'a number'}")
        if kind is not bool and kind is not str and not value > 0:  # (NaN, zero and negatives: as on the command line)
            raise ConfigError(f"{path}: [tool.syncverify] {key} = {value!r}: expected a positive number")
        out[dest] = value
    return out, path
