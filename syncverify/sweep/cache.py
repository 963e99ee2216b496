"""A cache by content: a point's compiled code and its verdict, keyed by what determines them.

Why: a library's sweep re-runs on every commit, and most points do not change. A point's verdict is a
function of its inputs' bytes (the spec or kernel, every header a `.cu` includes, every `@FILE` its
arguments read), its arguments and budgets, and the checker's own code; its PTX a function of the source,
its headers, the nvcc flags and nvcc's version. Keys hash exactly these, so an unchanged point is neither
rebuilt nor re-checked, and any change to one of them -- a header edited, a flag added, syncverify
upgraded -- misses. Timing never enters a key.

Layout (plain files, so the cache can live on shared storage and several machines can fill it):
`ptx/KEY.ptx`, `deps/KEY.json` (a `.cu`'s headers with their hashes, as nvcc listed them: the next run
re-hashes the files instead of running the preprocessor), `verdicts/KEY.json`. Entries are written to a
temporary name and renamed, so a reader never sees half a file. An entry that a budget decided (an
inconclusive verdict) is kept like any other: the budgets are part of the key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import __version__


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def file_digest(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@functools.cache
def checker_digest() -> str:
    """syncverify's version and the bytes of its code and grammars: a verdict cached by another build of the
    checker is not this one's."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".lark", ".md") and "__pycache__" not in p.parts)
    return digest(__version__, *(f"{p.relative_to(root)}:{file_digest(p)}" for p in files))


class Cache:
    """The cache folder (created on first write). A sweep run without a cache gets a temporary folder, removed
    when it ends, so that its builds still have a place."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _file(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / f"{key}{suffix}"

    def get_text(self, kind: str, key: str, suffix: str) -> str | None:
        f = self._file(kind, key, suffix)
        if not f.is_file():
            return None
        try:
            return f.read_text(encoding="utf-8")
        except OSError:
            return None

    def put_text(self, kind: str, key: str, suffix: str, text: str) -> Path:
        f = self._file(kind, key, suffix)
        f.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=f".{key}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, f)
        return f

    def path_of(self, kind: str, key: str, suffix: str) -> Path | None:
        f = self._file(kind, key, suffix)
        return f if f.is_file() else None

    def get_json(self, kind: str, key: str) -> Any:
        text = self.get_text(kind, key, ".json")
        if text is None:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:  # a damaged entry is a miss, never a verdict
            return None

    def put_json(self, kind: str, key: str, value: Any) -> None:
        self.put_text(kind, key, ".json", json.dumps(value, indent=1, sort_keys=True))


def files_digest(paths: Iterable[str]) -> str | None:
    """The hash of the files' contents, in the order given; None if one cannot be read (the key is then
    unknown and the point is rebuilt)."""
    parts = []
    for p in paths:
        try:
            parts.append(f"{p}:{file_digest(p)}")
        except OSError:
            return None
    return digest(*parts)


def arg_files(args: Iterable[str]) -> list[str]:
    """The files a point's arguments read: `--param NAME=@FILE` and the like."""
    out = []
    for a in args:
        _, eq, value = a.partition("=")
        if eq and value.startswith("@"):
            out.append(value[1:])
    return out
