"""The manifest of a sweep: what to check, at which launches and problem shapes, and what to expect.

A kernel library's CI holds hundreds of instantiations; a manifest names them once, in TOML (read with the
standard library's `tomllib`), and `syncverify check --manifest FILE` checks every point. Two tables:

    [defaults]                 # what every point has unless it says otherwise
    timeout = 600              # the budgets of one check (as `check --timeout/--max-states/--max-memory`)
    max_states = 2000000
    engine = "auto"

    [[point]]                  # one check
    name = "ring stages=2"
    path = "specs/ring.sync"   # a .sync, .ptx or .cu, relative to the manifest
    define = { STAGES = 2 }    # -D values
    args = ["--block", "384"]  # further `check` arguments: a kernel's launch, params, tensor maps
    nvcc_flags = ["-I", "include"]   # how a .cu is built (with the flags `check` always uses)
    expect = "safe"            # or a list of error codes, e.g. ["SV201"]; left out: no expectation

    [[sweep]]                  # a generator: one point per combination of `axes`
    name = "ring stages={STAGES} iters={ITERS}"
    path = "specs/ring.sync"
    define = { STAGES = "{STAGES}", ITERS = "{ITERS}" }
    axes = { STAGES = [2, 4], ITERS = [4, 8] }

A `[[sweep]]`'s strings may name its axes in braces; a string that is exactly `{AXIS}` takes the axis value
with its type (an integer stays an integer). Points are checked and reported in the manifest's order, the
points of a sweep in the order of its axes (the first axis varies slowest). Every mistake is an input error
at its line (`file:line:col`, what was expected, a caret; exit 2), never a traceback.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnostics import InputError, Span, make
from .points import BUDGETS, Point, common_fields, fill

SUFFIXES = (".sync", ".ptx", ".cu")


@dataclass(frozen=True)
class Manifest:
    path: str
    points: tuple[Point, ...] = field(default_factory=tuple)


class _Lines:
    """Where each `[[point]]` / `[[sweep]]` table starts, and where a key is written in it (tomllib keeps no
    positions): errors then point at the line that says the wrong thing."""

    HEADER = re.compile(r"^\s*\[\[\s*(point|sweep|triton)\s*\]\]")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.starts: dict[str, list[int]] = {"point": [], "sweep": [], "triton": []}
        for i, line in enumerate(self.lines, 1):
            m = self.HEADER.match(line)
            if m:
                self.starts[m[1]].append(i)

    def span(self, kind: str, index: int, key: str | None = None) -> Span:
        starts = self.starts[kind]
        if index >= len(starts):
            return Span(self.path, 1, 1, 1, 2)
        first = starts[index]
        if key is not None:
            heads = sorted(line for lines in self.starts.values() for line in lines)
            end = next((s for s in heads if s > first), len(self.lines) + 1)
            for i in range(first, end):
                text = self.lines[i - 1]
                m = re.match(rf"^(\s*){re.escape(key)}\s*=", text)
                if m:
                    return Span(self.path, i, len(m[1]) + 1, i, len(m[1]) + 1 + len(key))
        return Span(self.path, first, 1, first, 1 + len(self.lines[first - 1].rstrip()))


def _fail(span: Span, message: str) -> InputError:
    return InputError([make("SV119", message, span)])


def load(path: str | Path) -> Manifest:
    """Read and check a manifest; every point's path must exist (a typo is found before any check runs)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError([make("SV112", f"cannot read the manifest {path}: {err.strerror}",
                               Span(str(path), 1, 1, 1, 2))]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        line, col = _toml_position(str(err))
        raise _fail(Span(str(path), line, col, line, col + 1), f"the manifest is not valid TOML: {err}") from None
    where = _Lines(str(path), text)
    unknown = set(data) - {"defaults", "point", "sweep", "triton"}
    if unknown:
        raise _fail(Span(str(path), 1, 1, 1, 2), f"unknown table(s) {sorted(unknown)}: expected [defaults], "
                    "[[point]], [[sweep]] and [[triton]]")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise _fail(Span(str(path), 1, 1, 1, 2), "[defaults] must be a table")
    base = path.resolve().parent
    points: list[Point] = []
    # the manifest's order: points and sweeps as they appear in the file
    order = sorted((line, kind, i) for kind, lines in where.starts.items() for i, line in enumerate(lines))
    for _, kind, index in order:
        table = data.get(kind, [])[index]
        if kind == "point":
            points.append(_point(table, defaults, base, where, kind, index, {}))
        elif kind == "sweep":
            points.extend(_sweep(table, defaults, base, where, index))
        else:
            from .triton_table import triton_points

            points.extend(triton_points(table, defaults, base, lambda key, msg, i=index: _fail(
                where.span("triton", i, key), msg), where.span("triton", index).line))
    names = [p.name for p in points]
    for i, name in enumerate(names):
        if name in names[:i]:
            p = points[i]
            raise _fail(Span(str(path), p.line, 1, p.line, 2), f"two points are named {name!r}: names must differ")
    if not points:
        raise _fail(Span(str(path), 1, 1, 1, 2), "the manifest names no [[point]] and no [[sweep]]")
    return Manifest(str(path), tuple(points))


def _toml_position(message: str) -> tuple[int, int]:
    m = re.search(r"line (\d+), column (\d+)", message)
    return (int(m[1]), int(m[2])) if m else (1, 1)


_KEYS = {"name", "path", "define", "args", "nvcc_flags", "expect", "engine", *BUDGETS}


def _point(table: Mapping[str, Any], defaults: Mapping[str, Any], base: Path, where: _Lines, kind: str,
           index: int, config: Mapping[str, Any]) -> Point:
    def bad(key: str | None, message: str) -> InputError:
        return _fail(where.span(kind, index, key), message)

    allowed = _KEYS | ({"axes"} if kind == "sweep" else set())
    for key in table:
        if key not in allowed:
            raise bad(key, f"unknown key `{key}` (expected one of: {', '.join(sorted(allowed))})")
    merged = {**{k: v for k, v in defaults.items() if k != "name"}, **table}
    if "path" not in merged or not isinstance(merged["path"], str):
        raise bad("path" if "path" in table else None, "each point needs `path = \"FILE\"` (.sync, .ptx or .cu)")
    file = (base / merged["path"]).resolve()
    if not str(file).endswith(SUFFIXES):
        raise bad("path", f"{merged['path']}: expected a .sync, .ptx or .cu file")
    if not file.is_file():
        raise bad("path", f"{merged['path']}: no such file (relative to the manifest's folder {base})")
    name = merged.get("name", merged["path"] + "".join(f" {k}={v}" for k, v in config.items()))
    if not isinstance(name, str) or not name:
        raise bad("name", "`name` must be a non-empty string")
    define = merged.get("define", {})
    if not isinstance(define, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in define.values()):
        raise bad("define", "`define` must be a table of integers, e.g. { STAGES = 2 }")
    args = merged.get("args", [])
    flags = merged.get("nvcc_flags", [])
    for key, value in (("args", args), ("nvcc_flags", flags)):
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise bad(key, f"`{key}` must be a list of strings")
    if flags and not str(file).endswith(".cu"):
        raise bad("nvcc_flags", "`nvcc_flags` are for a .cu point")
    expect, engine, budgets = common_fields(merged, bad)
    return Point(name=name, path=str(file), define=tuple(sorted(define.items())), args=tuple(args),
                 nvcc_flags=tuple(flags), expect=expect, engine=engine, budgets=budgets,
                 config=tuple((k, str(v)) for k, v in config.items()),
                 line=where.span(kind, index).line)


def _sweep(table: Mapping[str, Any], defaults: Mapping[str, Any], base: Path, where: _Lines,
           index: int) -> list[Point]:
    axes = table.get("axes")
    if not isinstance(axes, dict) or not axes or not all(isinstance(v, list) and v for v in axes.values()):
        raise _fail(where.span("sweep", index, "axes" if "axes" in table else None),
                    "a [[sweep]] needs `axes`, a table of non-empty lists, e.g. { STAGES = [2, 4] }")
    names = list(axes)
    out = []
    for combo in itertools.product(*(axes[n] for n in names)):
        config = dict(zip(names, combo, strict=True))
        filled = {k: fill(v, config) for k, v in table.items() if k != "axes"}
        out.append(_point(filled, defaults, base, where, "sweep", index, config))
    return out
