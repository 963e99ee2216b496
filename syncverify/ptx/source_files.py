"""The source file a PTX `.file` entry names, found on this machine and checked to be the one compiled.

Role names and selector comments (role_names.py, selectors.py) read the kernel's source at the lines the
PTX's `.loc` directives give. The `.file` path is the one nvcc was given where the PTX was built: it may
not exist here (a PTX built on another machine, `cutlass_library/source/examples/...` relative to another
site-packages), or exist in another version. So the file is looked for at that path, beside the PTX, and
as a suffix of that path under the installed CUTLASS package's `source/include` and `source/examples`
and under any other directory the caller names, and a candidate is used only when its content is
verifiably the one compiled:

* where nvcc wrote the file's size in the entry (`.file 1 "k.cu", 1712345678, 4096`), the size must match;
* every `.loc` of the file must name a line the candidate has, and the columns must fall at the start of a
  token (not on white space, not inside a word): nvcc's columns point at the expression they describe.
  A file of at least ``MIN_LOCS`` distinct positions passes when ``MIN_SHARE`` of them do (a macro's
  expansion, `assert`, can point past its line), a smaller one only when all of them do. Measured on
  CUTLASS's sm90 GEMM and example 88's FMHA with the installed headers: 94-100 % of the positions of
  every file with eight or more; the same files shifted by one to ten lines: 78 % at most.

A file that is not found or not verified is not read: the roles keep their synthetic names (`w4_7`),
never a name read from another version of the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from .cutlass_headers import cutlass_include
from .parse import Module, _source_file

MIN_LOCS = 8
MIN_SHARE = 0.9

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?', re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)", re.M)


@dataclass(frozen=True)
class _Entries:
    """The `.file` entries of one PTX text: index, size (None when nvcc wrote none) and `.loc` positions."""

    index: dict[str, int]
    size: dict[int, int | None]
    locs: dict[int, frozenset[tuple[int, int]]]


@lru_cache(maxsize=8)
def _entries(text: str) -> _Entries:
    index: dict[str, int] = {}
    size: dict[int, int | None] = {}
    for m in _FILE.finditer(text):
        n = int(m[1])
        index.setdefault(m[2], n)
        size[n] = int(m[4]) if m[4] else None
    locs: dict[int, set[tuple[int, int]]] = {}
    for m in _LOC.finditer(text):
        locs.setdefault(int(m[1]), set()).add((int(m[2]), int(m[3])))
    return _Entries(index, size, {k: frozenset(v) for k, v in locs.items()})


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def at_token(lines: tuple[str, ...], line: int, col: int) -> bool:
    """Does position (line, col) of a `.loc` (1-based; column 0: none given) fall in the file, at the start
    of a token?"""
    if not 0 < line <= len(lines):
        return False
    if col == 0:
        return True
    text = lines[line - 1]
    if col > len(text) or text[col - 1].isspace():
        return False
    return col == 1 or not (_word(text[col - 2]) and _word(text[col - 1]))


def _verified(lines: tuple[str, ...], nbytes: int, size: int | None, locs: frozenset[tuple[int, int]]) -> bool:
    if size is not None and size != nbytes:
        return False
    if not locs or any(line > len(lines) for line, _ in locs):
        return False
    good = sum(at_token(lines, line, col) for line, col in locs)
    return good == len(locs) or (len(locs) >= MIN_LOCS and good >= MIN_SHARE * len(locs))


def _roots(extra: tuple[str, ...]) -> list[str]:
    """Where a `.file` path's suffix is looked for: the caller's directories (the kernel's own, -I), then
    the installed CUTLASS package's headers and examples."""
    out = list(extra)
    inc = cutlass_include()
    if inc is not None:
        out += [inc, os.path.join(os.path.dirname(inc), "examples")]
    return out


def candidates(path: str, base: str, roots: tuple[str, ...] = ()) -> list[str]:
    """The places a `.file` path may be found here, most specific first: the path itself, beside the PTX
    (``base``) for a relative one, then each suffix of it (longest first) under each root."""
    out = [path]
    if base and not os.path.isabs(path):
        out.append(os.path.join(base, path))
    parts = [p for p in os.path.normpath(path.replace("\\", "/")).split("/") if p not in ("", ".")]
    for root in _roots(roots):
        out += [os.path.join(root, *parts[i:]) for i in range(len(parts)) if ".." not in parts[i:]]
    return list(dict.fromkeys(out))


@lru_cache(maxsize=256)
def _located(text: str, ptx_path: str, path: str, roots: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    entries = _entries(text)
    n = _entry(entries, path, ptx_path)
    if n is None:
        return None
    path = next(p for p, k in entries.index.items() if k == n)
    locs = entries.locs.get(n, frozenset())
    base = os.path.dirname(ptx_path)
    for cand in candidates(path, base, (*roots, base) if base else roots):
        try:
            with open(cand, "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        lines = tuple(raw.decode("utf-8", errors="replace").splitlines())
        if _verified(lines, len(raw), entries.size.get(n), locs):
            return cand, lines
    return None


def _entry(entries: _Entries, path: str, ptx_path: str) -> int | None:
    """The `.file` index of ``path``: an entry's own text, or the name a frame gives a moved PTX's file
    (parse._source_file: the file of that name beside the PTX)."""
    if path in entries.index:
        return entries.index[path]
    return next((n for p, n in entries.index.items() if _source_file(p, ptx_path) == path), None)


def source_lines(mod: Module, path: str, roots: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The lines of the file the PTX's `.file` entry ``path`` names, found and verified (module doc), or
    None. ``roots``: more directories to look for the path's suffix under (the kernel's own, -I paths)."""
    got = _located(mod.text, mod.path, path, tuple(roots))
    return None if got is None else got[1]


def source_path(mod: Module, path: str, roots: tuple[str, ...] = ()) -> str | None:
    """Where :func:`source_lines` found the file, or None."""
    got = _located(mod.text, mod.path, path, tuple(roots))
    return None if got is None else got[0]


def placed(mod: Module, path: str, line: int, lines: tuple[str, ...]) -> bool:
    """Does some `.loc` of ``path`` at ``line`` fall at a token of ``lines`` (the line a name is read at is
    itself one the check passed, not only the file as a whole)?"""
    entries = _entries(mod.text)
    n = _entry(entries, path, mod.path)
    return n is not None and any(at_token(lines, ln, col) for ln, col in entries.locs.get(n, ()) if ln == line)
