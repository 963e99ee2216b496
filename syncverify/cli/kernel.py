"""What `extract` and `check` on a kernel share, concrete or symbolic (cli/extract.py, cli/symbolic.py).

The launch the command line gives (`launch_of`), and a finding on an extracted protocol placed at the
CUDA source line of the instruction behind its statement (`_at_source`), with the PTX line and the line of
the extracted `.sync` as related locations. Both commands import this module and it imports neither, so
the concrete and the symbolic extraction's command lines do not import each other.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import replace

from ..diagnostics import Diagnostic, Related, Span
from ..ptx.extract import Extracted
from ..ptx.launch import Launch, ParamBytes
from ..ptx.parse import Instr, _source_file


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
                  zero_global=tuple(args.zero_global), tensor_bytes=dict(args.tensor_bytes))


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


def _at_source(d: Diagnostic, ex: Extracted, sync_name: str) -> Diagnostic:
    if d.span is None or d.span.line not in ex.origin:
        return d
    ins = ex.origin[d.span.line]
    ptx = Span(ex.module.path, ins.line, ins.column, ins.line, ins.column + 1)
    related = [Related(ptx, "PTX instruction"), Related(d.span, "statement of the extracted protocol")]
    if ins.src and ins.src.inlined_at:
        f, ln, col = ins.src.inlined_at[0]
        f = _source_file(f, ex.module.path)
        related.insert(0, Related(Span(f, ln, max(col, 1), ln, max(col, 1) + 1), "inlined at"))
    for r in d.related:
        if r.span.line in ex.origin:
            other = ex.origin[r.span.line]
            span = _src_span(other, ex.module.path) or Span(ex.module.path, other.line, other.column, other.line,
                                                            other.column + 1)
            related.append(Related(span, f"{r.message} (PTX line {other.line})"))
        else:
            related.append(r)
    return replace(d, span=_src_span(ins, ex.module.path) or ptx, related=tuple(related))
