"""Reading `.sync` sources: files, text, the `// expect:` header, directory search."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import ir
from ..diagnostics import CODES, InputError, Severity, Span, make
from .parse import parse_recovering
from .resolve import resolve

if TYPE_CHECKING:
    from lark import Tree

    from ..diagnostics import Diagnostic

_EXPECT = re.compile(r"^\s*//\s*expect\s*:(.*)$")
MAX_SOURCE_BYTES = 1 << 20


def read_source(path: str | os.PathLike[str]) -> str:
    """Read a spec file as UTF-8 text; every failure is an SV112 input error."""
    p = Path(path)
    span = Span(str(p), 1, 1, 1, 2)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError([make("SV112", f"no such file: {p}", span)]) from None
    except IsADirectoryError:
        raise InputError([make("SV112", f"{p} is a directory", span)]) from None
    except OSError as err:
        raise InputError([make("SV112", f"cannot read {p}: {err.strerror}", span)]) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise InputError([make("SV112", f"{p} is {len(data)} bytes; specs are limited to 1 MiB", span)])
    if b"\0" in data:
        raise InputError([make("SV112", f"{p} is a binary file, not a .sync spec", span)])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise InputError([make("SV112", f"{p} is not UTF-8 text (byte 0x{data[err.start]:02x} at line {line}, "
                               f"offset {err.start}); save it as UTF-8",
                               Span(str(p), line, col, line, col + 1))]) from None


def parse_expect(text: str, path: str) -> ir.Expectation | None:
    """The `// expect: safe` or `// expect: SV201, SV203` line among the leading comments."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            return None
        m = _EXPECT.match(line)
        if not m:
            continue
        span = Span(path, lineno, 1, lineno, len(line) + 1)
        words = [w for w in re.split(r"[\s,]+", m.group(1).strip()) if w]
        usage = "write `// expect: safe` or the codes it must report, like `// expect: SV201, SV302`"
        if not words:
            raise InputError([make("SV117", f"the `expect:` header lists nothing; {usage}", span)])
        safe = "safe" in words
        codes = [w.upper() for w in words if w != "safe"]
        unknown = [w for w in words if w != "safe" and w.upper() not in CODES]
        if unknown:
            raise InputError([make("SV117", f"unknown code{'s' if len(unknown) > 1 else ''} "
                                   f"{', '.join(unknown)} in the `expect:` header; {usage}", span)])
        errors = frozenset(w for w in codes if CODES[w][1] is Severity.ERROR)
        warnings = frozenset(w for w in codes if CODES[w][1] is Severity.WARNING)
        if safe and errors:
            raise InputError([make("SV117", f"the `expect:` header says `safe` but also lists errors "
                                   f"{', '.join(sorted(errors))}; {usage}", span)])
        return ir.Expectation(errors, warnings, span)
    return None


def load(source: str | os.PathLike[str], defines: Mapping[str, int] | None = None, *,
         path: str | None = None, assignment: Mapping[str, tuple[int, ...]] | None = None) -> ir.Protocol:
    """Load a protocol from a file path or from spec text.

    ``source`` is read as a path when it is a PathLike, or a non-blank string of
    one line that has no `{` or ends in `.sync`; otherwise it is the spec text
    itself (``path`` then names it in messages). Raises InputError on any
    problem with the input. ``assignment`` gives the values of the `choose`
    declarations (see lang/choices.py); without one each takes its first value.
    """
    text: str
    if isinstance(source, os.PathLike) or (isinstance(source, str) and source.strip() and "\n" not in source
                                           and ("{" not in source or source.endswith(".sync"))) \
            or (isinstance(source, str) and source.endswith(".sync") and os.path.isfile(source)):
        # (the last case: a file whose name holds a newline is still a file)
        name = str(source)
        text = read_source(name)
    else:
        name = path or "<text>"
        text = str(source)
    expect = parse_expect(text, name)
    tree, syntax_errors = _parsed(text, name)
    if tree is None:
        raise InputError(syntax_errors)
    try:
        protocol = resolve(tree, name, text, defines or {}, expect, assignment)
    except InputError as err:
        raise InputError(_by_position(syntax_errors + err.diagnostics)) from None
    except RecursionError:  # the parser's nesting limits should prevent this; never leak a traceback
        raise InputError([make("SV115", "the protocol is nested too deeply to analyse", Span(name, 1, 1, 1, 2))]) \
            from None
    if syntax_errors:
        raise InputError(syntax_errors)
    return protocol


def instantiate(protocol: ir.Protocol, defines: Mapping[str, int],
                assignments: Iterable[ir.Assignment]) -> Iterator[tuple[ir.Assignment, ir.Protocol | InputError]]:
    """``protocol``'s source resolved at each assignment of its `choose` values, or the input
    error that assignment makes. The source is parsed once: parsing, not resolving, is most of
    the cost of a load, and a check may go through hundreds of assignments."""
    tree, errors = parse_recovering(protocol.source, protocol.path)
    if tree is None or errors:
        raise InputError(errors)
    for assignment in assignments:
        try:
            yield assignment, resolve(tree, protocol.path, protocol.source, defines, protocol.expect, dict(assignment))
        except InputError as err:
            yield assignment, err
        except RecursionError:  # as in load: never leak a traceback
            yield assignment, InputError([make("SV115", "the protocol is nested too deeply to analyse",
                                               Span(protocol.path, 1, 1, 1, 2))])


def _by_position(diags: list) -> list:
    return sorted(diags, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))


# The parse trees of the last few texts loaded (by text and name): one protocol is loaded again and again
# with other defines -- the all-iterations lift loads it at two trip counts for its plan, once more per small
# trip count and per finding replayed, a --symbolic check once per residue -- and parsing is most of a load.
# `resolve` reads a tree and never changes it, so a tree serves every load of its text.
_PARSED_KEPT = 8
_parsed_trees: dict[tuple[str, str], tuple[Tree | None, list[Diagnostic]]] = {}


def _parsed(text: str, name: str) -> tuple[Tree | None, list[Diagnostic]]:
    key = (text, name)
    hit = _parsed_trees.get(key)
    if hit is None:
        hit = parse_recovering(text, name)  # (raises for input with no tree at all: nothing is kept)
        if len(_parsed_trees) >= _PARSED_KEPT:
            del _parsed_trees[next(iter(_parsed_trees))]
        _parsed_trees[key] = hit
    return hit[0], list(hit[1])


def load_many(paths: list[str]) -> list[str]:
    """Expand directories into their `*.sync` files (sorted); files are kept as given."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(f) for f in Path(p).rglob("*.sync") if f.is_file())
            if not found:
                raise InputError([make("SV112", f"no *.sync files under {p}", Span(p, 1, 1, 1, 2))])
            out.extend(found)
        else:
            out.append(p)
    return out
