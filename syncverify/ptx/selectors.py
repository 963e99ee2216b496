"""What selects a role in the source: the `if` or `else` a role's own statements stand under.

Extraction groups warps into roles by what they execute; the kernel chose that by a branch on the warp
index (`if (warp == 0) { … } else { … }`, CUTLASS's `if (warp_group_role == WarpGroupRole::Producer)`).
PTX keeps no trace of the condition's source text, only the lines of the statements. The last statement of
a role that not every role executes is inside the branch that selects it; the nearest line above it, in its
source file, that is less indented and opens an `if`/`else`/`switch`/`case` is shown as that branch.
It is a reading of the source's layout for the protocol's comments, nothing is decided from it, and it is
left out when the line cannot be found (no line info, a file not at hand, a layout it does not recognize).
"""

from __future__ import annotations

import re

from .frames import LIBRARY_PATTERNS, user_frame
from .parse import Module
from .skeleton import Role
from .source_files import source_lines

_OPENS = re.compile(r"^\s*(}\s*)?(if\b|else\b|switch\b|case\b|default\s*:)")


def _indent(s: str) -> int:
    return len(s) - len(s.lstrip())


def _enclosing_branch(mod: Module, path: str, line: int) -> tuple[int, str] | None:
    lines = source_lines(mod, path)  # the file compiled, wherever it is here (source_files.py)
    if lines is None or not 0 < line <= len(lines):
        return None
    width = _indent(lines[line - 1])
    for n in range(line - 1, 0, -1):
        text = lines[n - 1]
        if not text.strip() or text.lstrip().startswith(("#", "//")):
            continue
        if _indent(text) < width:
            if _OPENS.match(text):
                return n, text.strip()
            width = _indent(text)
    return None


def selectors(roles: tuple[Role, ...], mod: Module) -> dict[str, str]:
    """Role name -> `` `if (warp == 0) {` (ws_rowsum.cu:34)`` for the roles whose branch is found."""
    sites: dict[str, list[tuple[str, int]]] = {}
    for r in roles:
        seen = []
        for body in r.per_cta:
            for s in body:
                got = user_frame(s.instr, mod, LIBRARY_PATTERNS)
                if got is not None:
                    seen.append((got[0].file, got[0].line))
        sites[r.name] = seen
    everyone = set.intersection(*(set(ss) for ss in sites.values())) if sites else set()
    out: dict[str, str] = {}
    for r in roles:
        # the role's last statement that not every role has: inside its main loop, not its set-up (the
        # barrier init under `if (threadIdx.x == 0)` is warp 0's too, but does not make it the producer)
        own = [site for site in sites[r.name] if site not in everyone]
        if not own or len(sites) < 2:
            continue
        found = _enclosing_branch(mod, *own[-1])
        if found is not None:
            n, text = found
            short = own[-1][0].replace("\\", "/").rsplit("/", 1)[-1]
            out[r.name] = f"`{text.split('//')[0].strip()}` ({short}:{n})"
    return out
