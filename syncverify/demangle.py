"""A kernel's C++ name from its PTX entry's mangled one, whole and in the short forms the reports use.

Kept on the ground floor (the standard library only) because both the kernel commands (cli/kernel.py,
the name a check reports) and the trace page (report/swimlane.py, its title and heading) read it, and
the trace page must not import a command.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache

TITLE_WIDTH = 100  # a browser tab or window title shows far less; the page body has the whole name


@lru_cache(maxsize=64)
def demangle(name: str) -> str | None:
    """The whole C++ name of a mangled (`_Z…`) symbol, or None when it is not mangled or no demangler
    reads it. GNU c++filt first, then llvm-cxxfilt (GNU's gives up on some of CUTLASS's names) and the
    CUDA toolkit's cu++filt."""
    if not name.startswith("_Z"):
        return None
    for tool in ("c++filt", "llvm-cxxfilt", "cu++filt"):
        path = shutil.which(tool)
        if path is None:
            continue
        try:
            out = subprocess.run([path, name], capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if out and out != name:
            return out
    return None


def demangled(name: str) -> str:
    """The kernel's C++ name (`ws_rowsum(float const*, float*, int)`), its template arguments past the second
    level shown as `…` when it is long (a CUTLASS kernel's full name runs to thousands of characters); the name
    as it is when no demangler reads it."""
    full = demangle(name)
    return name if full is None else brief(full)


def brief(full: str, width: int = 160, depth: int = 2) -> str:
    """Template arguments nested ``depth`` deep or more as `…`, when the name is longer than `width`."""
    if len(full) <= width:
        return full
    out, level = [], 0
    for c in full:
        if c == "<":
            level += 1
            if level == depth:
                out.append("<…")
            if level >= depth:
                continue
        elif c == ">":
            level -= 1
            if level >= depth - 1:
                if level == depth - 1:
                    out.append(">")
                continue
        elif level >= depth:
            continue
        out.append(c)
    return "".join(out)


def _without_signature(full: str) -> str:
    """The name without its return type (`void `) and its parameter list: what names the kernel."""
    text = full.strip()
    level, cut = 0, len(text)
    for i, c in enumerate(text):  # the parameter list is the first `(` outside template arguments
        if c == "<":
            level += 1
        elif c == ">":
            level -= 1
        elif c == "(" and level == 0:
            cut = i
            break
    head, level, start = text[:cut], 0, 0
    for i, c in enumerate(head):  # the return type ends at the last space outside template arguments
        if c == "<":
            level += 1
        elif c == ">":
            level -= 1
        elif c == " " and level == 0:
            start = i + 1
    return head[start:].replace("> >", ">>") or text


def title_name(name: str, width: int = TITLE_WIDTH) -> tuple[str, str | None]:
    """(short, whole) for a page's title and heading: a mangled kernel name demangled, and, when that is
    longer than ``width``, without its return type and parameters and with template arguments elided
    from the second level (`cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<…>>`), then from
    the first if still too long. ``whole`` is the full C++ name where it differs from ``short`` (for the
    page body), else None. A name that is not mangled is returned as it is."""
    full = demangle(name)
    if full is None:
        return name, None
    if len(full) <= width:
        return full, None
    core = _without_signature(full)
    for depth in (2, 1):
        short = brief(core, 0, depth)
        if len(short) <= width:
            return short, full
    return short[: width - 1] + "…", full
