"""Where in the user's own code an instruction comes from: the line a kernel engineer changes.

nvcc's `.loc … inlined_at` gives every instruction a chain of source frames, innermost first: the
`asm volatile` of a helper such as `mbar_wait`, the helper's call in the kernel, and for a library
the library's wrappers (`cutlass/barrier.h:424` inlined at `barrier.h:371` inlined at
`pipeline.hpp`…). The innermost frame is rarely the line to change: a helper that wraps one PTX
instruction is correct, and what a bug changes is its call; a library header is not the user's to
edit. `user_frame` picks the first frame, innermost first, that is neither in a library (a path that
contains one of the library patterns, configurable) nor the body of an inline-asm helper whose call
site is known; the frames it skips become notes. When every frame is a library's, the innermost is
kept (nothing better is known).
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass
from functools import lru_cache

from .parse import Instr, Module, SrcLoc, _source_file

# Path pieces that mark a library header. CUTLASS/CuTe, CCCL (cub, thrust, libcu++), Triton, and the
# CUDA toolkit's own headers (`sm_30_intrinsics.hpp` holds `__syncwarp`, `crt/` the device functions).
LIBRARY_PATTERNS: tuple[str, ...] = (
    "cutlass/", "cute/", "cub/", "thrust/", "cuda/std/", "cuda/__", "cccl/", "libcudacxx/", "triton/language/",
    "triton/runtime/", "triton/experimental/",
    "crt/", "sm_20_intrinsics", "sm_30_intrinsics", "sm_32_intrinsics", "sm_60_atomic", "sm_90_rt",
    "cuda_runtime", "device_functions", "cooperative_groups", "/cuda/include/", "/targets/",
)


@dataclass(frozen=True)
class Frame:
    """One source position of an instruction's inline chain; `why` says why it is not the primary one."""

    file: str
    line: int
    column: int
    why: str = ""


def is_library(path: str, patterns: tuple[str, ...]) -> bool:
    """Does the path contain a pattern, starting at a directory boundary (`cute/` is not `execute/`)?"""
    norm = "/" + path.replace("\\", "/")
    return any(("/" + p if not p.startswith("/") else p) in norm for p in patterns)


@lru_cache(maxsize=16)
def _asm_lines(text: str) -> frozenset[int]:
    """The PTX lines (1-based) between nvcc's `// begin inline asm` and `// end inline asm` markers."""
    out: set[int] = set()
    inside = False
    for n, ln in enumerate(text.splitlines(), 1):
        s = ln.strip()
        if s.startswith("// begin inline asm"):
            inside = True
        elif s.startswith("// end inline asm"):
            inside = False
        elif inside:
            out.add(n)
    return frozenset(out)


def frames(ins: Instr, mod: Module) -> list[Frame]:
    """The instruction's source frames, innermost first (empty without `.loc`)."""
    return [] if ins.src is None else list(_chain(ins.src, ins.src.outer, mod.path))


def _chain(src: SrcLoc, outer: tuple[tuple[str, int, int], ...], ptx_path: str) -> tuple[Frame, ...]:
    raw = [(src.file, src.line, src.column), *src.inlined_at, *outer]
    return tuple(Frame(_source_file(f, ptx_path), ln, max(col, 1)) for f, ln, col in raw)


def user_frame(ins: Instr, mod: Module,
               patterns: tuple[str, ...] = LIBRARY_PATTERNS) -> tuple[Frame, list[Frame]] | None:
    """The primary frame (the first in the user's own code) and the other frames of the chain as notes,
    each saying what it is; None without line info."""
    if ins.src is None:
        return None
    primary, notes = _user_frame(ins.src, ins.src.outer, ins.line in _asm_lines(mod.text), mod.path, patterns,
                                 os.getcwd())
    return primary, list(notes)


@lru_cache(maxsize=4096)
def _user_frame(src: SrcLoc, outer: tuple[tuple[str, int, int], ...], in_asm: bool, ptx_path: str,
                patterns: tuple[str, ...], cwd: str) -> tuple[Frame, tuple[Frame, ...]]:
    """user_frame, remembered by the source position: a check asks it of one instruction several times
    (its finding's place, the role names, the sites of its lines), and the answer reads the file system
    and the source (whose lines ``linecache`` keeps once read) for each frame of a chain ten deep in a
    CUTLASS kernel. ``outer`` is a field the position's equality leaves out, and a relative `.file` is
    found from the working directory (`_source_file`), so the key names both."""
    chain = _chain(src, outer, ptx_path)
    marked: list[Frame] = []
    pick = None
    for i, f in enumerate(chain):
        if is_library(f.file, patterns):
            marked.append(Frame(f.file, f.line, f.column, f"in {os.path.basename(f.file)}, a library header"))
            continue
        if i == 0 and in_asm and len(chain) > 1 and _is_asm_statement(f):
            marked.append(Frame(f.file, f.line, f.column, "inside the inline-asm helper"))
            continue
        if pick is None:
            pick = i
    if pick is None:
        pick = 0
    primary = chain[pick]
    notes = []
    for i, f in enumerate(chain):
        if i == pick:
            continue
        why = next((m.why for m in marked if (m.file, m.line, m.column) == (f.file, f.line, f.column)), "")
        notes.append(Frame(f.file, f.line, f.column, why or ("called from" if i > pick else "inlined into it")))
    return primary, tuple(notes)


def _is_asm_statement(f: Frame) -> bool:
    """Is the frame's source line an `asm` statement (a CUDA helper's body)? A compiler that lowers its own
    operations to inline asm (Triton's TMA loads) marks them so in the PTX too, but their frame is the user's
    call (`desc_k.load(...)`), which is the line to change. nvcc may place the frame on an operand line of a
    statement that spans several lines: the statement's earlier lines count too. A source that cannot be read is
    not skipped."""
    statement = [linecache.getline(f.file, f.line)]
    for back in range(f.line - 1, max(f.line - 8, 0), -1):  # nvcc's line may be an operand line of the asm
        prev = linecache.getline(f.file, back).rstrip()
        if not prev or prev.endswith((";", "{", "}")):
            break
        statement.append(prev)
    return any("asm" in part for part in statement)


def patterns_of(extra: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The default library patterns and the user's (`--library PATTERN`, `library = [...]`)."""
    return LIBRARY_PATTERNS + tuple(p for p in extra or () if p)


