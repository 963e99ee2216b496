"""What `extract` and `check` on a kernel share, concrete or symbolic (cli/extract.py, cli/symbolic.py).

The launch the command line gives (`launch_of`), and a finding on an extracted protocol placed at the
CUDA source line of the instruction behind its statement (`_at_source`), with the PTX line and the line of
the extracted `.sync` as related locations. Both commands import this module and it imports neither, so
the concrete and the symbolic extraction's command lines do not import each other.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from .. import budget as budgets
from ..demangle import brief
from ..demangle import demangled as demangled  # re-exported: the commands read it from here
from ..diagnostics import Diagnostic, Related, Span
from ..ptx.extract import Extracted
from ..ptx.frames import LIBRARY_PATTERNS, Frame, user_frame
from ..ptx.launch import Launch, ParamBytes
from ..ptx.parse import Instr, PtxError, _source_file
from ..result import CheckResult, Verdict


def not_extracted(path: str, args: argparse.Namespace, out: budgets.OutOfBudget) -> CheckResult:
    """The answer when a budget ran out while the kernel was extracted (the PTX executor and the loop
    roller look at the check's clock): inconclusive, saying in which phase, never a verdict."""
    return CheckResult(path=path, protocol=args.kernel or "", verdict=Verdict.INCONCLUSIVE, bound="",
                       coverage=f"the kernel was not extracted: {out}", stopped_by=out.kind)


def _bind(pairs: list[tuple[str, int | bytes | ParamBytes]]) -> dict[str, int | bytes | ParamBytes]:
    """The --param bindings; the byte ranges of one struct parameter are merged."""
    out: dict[str, int | bytes | ParamBytes] = {}
    for name, v in pairs:
        old = out.get(name)
        out[name] = old.merged(v) if isinstance(old, ParamBytes) and isinstance(v, ParamBytes) else v
    return out


def launch_of(args: argparse.Namespace) -> Launch:
    return Launch(block=args.block, cluster=args.cluster, grid=args.grid, params=_bind(args.param),
                  cluster_index=args.cluster_index, dynamic_smem=args.dynamic_smem,
                  zero_global=tuple(args.zero_global), tensor_bytes=dict(args.tensor_bytes),
                  smem_members=tuple(getattr(args, "smem_members", ())),
                  whole_grid=getattr(args, "whole_grid", False), grid_launch=getattr(args, "grid_launch", None))


def _same_site_sv204(d: Diagnostic, ex: Extracted) -> bool:
    """SV204 between two statements that came from one PTX instruction: the kernel has one site.

    Each warp's statements are written in its role's block, so one `bar.sync`
    of the kernel appears once per role; that is not two sites.
    """
    if d.code != "SV204":
        return False
    lines = [int(x) for x in re.findall(r"line (\d+)", d.message)]
    instrs = {ex.origin[ln].line for ln in lines if ln in ex.origin}
    return len(lines) == 2 and len(instrs) == 1


def _src_span(ins: Instr, ptx_path: str) -> Span | None:
    if ins.src is None:
        return None
    return Span(_source_file(ins.src.file, ptx_path), ins.src.line, max(ins.src.column, 1), ins.src.line,
                max(ins.src.column, 1) + 1)


def _span(f: Frame) -> Span:
    return Span(f.file, f.line, f.column, f.line, f.column + 1)


def place(ins: Instr, ex: Extracted, library: tuple[str, ...] = LIBRARY_PATTERNS) -> tuple[Span, list[Related]]:
    """Where a finding on the statement written from `ins` is reported: the first frame of its inline
    chain in the user's own code (frames.user_frame), the chain's other frames and the PTX line as notes.
    The PTX note names the statement's line in the protocol `syncverify extract` writes for this launch
    (`-o FILE` keeps it): no note cites a file this run did not write."""
    ptx = Span(ex.module.path, ins.line, ins.column, ins.line, ins.column + 1)
    where = user_frame(ins, ex.module, library)
    if where is None:
        return ptx, []
    primary, others = where
    return _span(primary), [Related(_span(f), f.why) for f in others]


def source_of_line(ex: Extracted, line: int, library: tuple[str, ...] = LIBRARY_PATTERNS) -> str | None:
    """`ws_rowsum.cu:57`: the user's source line of the statement at `line` of the extracted protocol."""
    ins = ex.origin.get(line)
    if ins is None:
        return None
    where = user_frame(ins, ex.module, library)
    if where is None:
        return f"ptx:{ins.line}"
    return f"{os.path.basename(where[0].file)}:{where[0].line}"


_LINE_REF = re.compile(r"\bline (\d+)\b")


def _in_source_terms(text: str, ex: Extracted, library: tuple[str, ...]) -> str:
    """A message's `line N` (of the extracted protocol) as the source line it came from."""
    def one(m: re.Match[str]) -> str:
        src = source_of_line(ex, int(m[1]), library)
        return src if src is not None else m[0]
    return _LINE_REF.sub(one, text)


def _at_source(d: Diagnostic, ex: Extracted, sync_name: str = "",
               library: tuple[str, ...] = LIBRARY_PATTERNS) -> Diagnostic:
    """A finding on the extracted protocol, placed in the kernel's source (`place`); `line N` of the
    protocol in its message read as the source line; each trace step noted with its source line."""
    if d.span is None:
        return replace(d, message=_in_source_terms(d.message, ex, library))
    if d.span.line not in ex.origin:  # a declaration of the protocol: no file `check` writes holds it
        return _at_entry(d, ex, library)
    ins = ex.origin[d.span.line]
    span, related = place(ins, ex, library)
    ptx = Span(ex.module.path, ins.line, ins.column, ins.line, ins.column + 1)
    related.append(Related(ptx, f"PTX instruction (line {d.span.line} of the protocol `syncverify extract` "
                                "writes for this launch)"))
    for r in d.related:
        if r.span.line in ex.origin:
            other = ex.origin[r.span.line]
            ospan, _ = place(other, ex, library)
            related.append(Related(ospan, f"{_in_source_terms(r.message, ex, library)} (PTX line {other.line})"))
        elif r.span.path == d.span.path:  # a line of the protocol no instruction is behind: say so, cite none
            continue
        else:
            related.append(r)
    trace = tuple(replace(t, note=" ".join(x for x in (source_of_line(ex, t.line, library) or "", t.note) if x))
                  for t in d.trace)
    return replace(d, span=span, related=tuple(related), trace=trace,
                   message=_in_source_terms(d.message, ex, library))


def _at_entry(d: Diagnostic, ex: Extracted, library: tuple[str, ...]) -> Diagnostic:
    """A finding on a line of the protocol that no instruction is behind (a barrier's or a buffer's declaration):
    placed at the kernel's entry in the PTX, with the protocol's line quoted in a note -- never at the protocol's
    own path, a file `check` does not write (and one of that name left by another launch would be misread)."""
    fn = next((f for f in ex.module.entries() if f.name == ex.kernel), None)
    line = fn.line if fn is not None else 1
    lines = ex.text.splitlines()
    quoted = lines[d.span.line - 1].split("//")[0].strip() if d.span is not None and 0 < d.span.line <= len(lines) \
        else ""
    span = Span(ex.module.path, line, 1, line, 2)
    related = [Related(span, f"line {d.span.line if d.span else '?'} of the protocol `syncverify extract` writes for "
                             f"this launch: `{quoted}`")] if quoted else []
    related += [r for r in d.related if d.span is None or r.span.path != d.span.path]
    trace = tuple(replace(t, note=" ".join(x for x in (source_of_line(ex, t.line, library) or "", t.note) if x))
                  for t in d.trace)
    return replace(d, span=span, related=tuple(related), trace=trace,
                   message=_in_source_terms(d.message, ex, library))


def sites_of(ex: Extracted, library: tuple[str, ...] = LIBRARY_PATTERNS) -> dict[int, object]:
    """Each protocol line's source site: the whole inline chain of the instruction behind it. nvcc unrolls a
    ring's loop by its stages, so one CUDA statement is several PTX instructions and several statements of
    the protocol; the root-cause pass (diagnose.py) changes them together, as an edit of that line would."""
    out: dict[int, object] = {}
    for line, ins in ex.origin.items():
        where = user_frame(ins, ex.module, library)
        out[line] = ("ptx", ins.line) if where is None else (where[0].file, where[0].line, where[0].column)
    return out


_CUDA_NOTE = re.compile(r"^CUDA source: (?P<file>.+):(?P<line>\d+)")


def at_cuda_line(err: PtxError, path: str) -> PtxError:
    """A refusal of a `.cu` input placed at its CUDA line (the PTX was compiled in a temporary directory,
    removed since): the CUDA line with a caret at its first word, the PTX instruction as the note."""
    m = _CUDA_NOTE.match(err.note or "")
    if not path.endswith((".cu", ".cuh")) or m is None:
        return err
    file, line = m["file"].split(" (inlined at ")[0], int(m["line"])
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            text = fh.read().splitlines()
    except OSError:
        return err
    src = text[line - 1] if 0 < line <= len(text) else ""
    col = len(src) - len(src.lstrip()) + 1
    ptx = err.source_line.strip()
    return PtxError(file, line, col, err.message, src, f"PTX instruction: {ptx}" if ptx else "")


# the kernel's C++ name (the ground floor's demangle.py, which the trace page reads too)
_brief = brief


@contextmanager
def ticking(path: str, options: object, every: float = 5.0) -> Iterator[None]:
    """A progress line on stderr every `every` seconds while a kernel is compiled and extracted (the
    search then reports its own progress through options.progress): silent with --quiet, which sets no
    progress callback."""
    if getattr(options, "progress", None) is None:
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def run() -> None:
        while not done.wait(every):
            print(f"syncverify: {path}: compiling and extracting, {time.monotonic() - start:.1f} s",
                  file=sys.stderr, flush=True)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
