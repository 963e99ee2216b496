"""The one way the seed directories here (cutlass_seeds/, sm100_seeds/, fmha_seeds/) write a seeded copy of a
shipped source tree: the whole tree copied (its headers include each other by relative paths), each edit one
line replaced by one line, so every other line keeps its number and a finding is reported at the shipped line
it is about. An edit whose line is not the expected text stops the build (another version of the source)."""

from __future__ import annotations

import os
import shutil

# (file relative to the tree, line number, the line as shipped, its replacement)
Edit = tuple[str, int, str, str]


def write_overlay(src: str, out: str, edits: list[Edit]) -> None:
    """Copies the tree at src to out with the edits applied."""
    shutil.copytree(src, out)
    files: dict[str, list[str]] = {}
    for rel, line, old, new in edits:
        lines = files.setdefault(rel, open(os.path.join(src, rel), encoding="utf-8").read().split("\n"))
        if lines[line - 1].rstrip() != old:
            raise SystemExit(f"{rel}:{line}: expected {old.strip()!r}, found {lines[line - 1].strip()!r} "
                             "(another version of the source?)")
        lines[line - 1] = new
    for rel, lines in files.items():
        with open(os.path.join(out, rel), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines))
