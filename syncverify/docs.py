"""The diagnostics reference: one section per code of `syncverify.diagnostics.CODES`.

The text lives in package data (`syncverify/data/diagnostics.md`, which
`docs/diagnostics.md` links to); `syncverify explain SVnnn` prints a section.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADING = re.compile(r"^## (SV\d{3}) — ", re.M)


@cache
def reference() -> str:
    """The whole of diagnostics.md."""
    return resources.files("syncverify.data").joinpath("diagnostics.md").read_text(encoding="utf-8")


@cache
def sections() -> dict[str, str]:
    """Code -> its section, from its `## SVnnn — title` heading up to the next heading."""
    text = reference()
    starts = [(m.group(1), m.start()) for m in _HEADING.finditer(text)]
    ends = [start for _, start in starts[1:]] + [len(text)]
    return {code: text[start:end].strip() for (code, start), end in zip(starts, ends, strict=True)}


def explain(code: str) -> str:
    """The documentation of one diagnostic code (case-insensitive); KeyError if it has none."""
    key = code.strip().upper()
    found = sections().get(key)
    if found is None:
        raise KeyError(f"no documentation for {code!r}")
    return found
