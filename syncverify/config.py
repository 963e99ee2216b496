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
    "search-jobs": ("search_jobs", int),
    "engine": ("engine", str),
    "format": ("format", str),
    "strict": ("strict", bool),
    "fail-fast": ("fail_fast", bool),
    "quiet": ("quiet", bool),
    "width": ("width", int),
    "full-trace": ("full_trace", bool),
    "no-assume": ("no_assume", bool),
    "after-first-error": ("after_first_error", (int, float)),
    "warning-traces": ("warning_traces", bool),
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
        if key == "kernels":  # the kernels the pre-commit hook checks (kernels_of), not a default of `check`
            continue
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


def kernels_of(start: Path | None = None) -> tuple[list[tuple[str, list[str]]], Path | None]:
    """The kernels listed with their launches in the nearest pyproject.toml, for `syncverify kernels`
    (the pre-commit hook): each `[[tool.syncverify.kernels]]` entry's `path` (relative to that file)
    and `args` (the options of `check KERNEL`: --block, --param, --nvcc-flag, …).

        [[tool.syncverify.kernels]]
        path = "kernels/ws_rowsum.cu"
        args = ["--block", "96", "--param", "2=8"]
    """
    path = find(start)
    if path is None:
        return [], None
    try:
        with open(path, "rb") as f:
            listed = tomllib.load(f).get("tool", {}).get("syncverify", {}).get("kernels", [])
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: cannot read it: {err}") from None
    if not isinstance(listed, list):
        raise ConfigError(f"{path}: [tool.syncverify] kernels must be an array of tables "
                          "([[tool.syncverify.kernels]] with `path` and `args`)")
    out = []
    for n, entry in enumerate(listed, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ConfigError(f"{path}: kernel {n} of [tool.syncverify] kernels needs `path = \"KERNEL.cu\"`")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{path}: kernel {n} ({entry['path']}): `args` must be an array of strings")
        unknown = set(entry) - {"path", "args"}
        if unknown:
            raise ConfigError(f"{path}: kernel {n} ({entry['path']}): unknown key(s) {', '.join(sorted(unknown))} "
                              "(known: path, args)")
        out.append((str(path.parent / entry["path"]), list(args)))
    return out, path
