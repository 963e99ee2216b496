"""A release that comes too early, named at its own line: the arrive that frees a buffer before the
warp has read it.

The search sees the consequence -- a WAR race (SV302) at the producer's next write of the buffer, with
the consumer's read as the other access -- but the line to change is the consumer's arrive above that
read. Like the other root causes (diagnose.py), this one is counterfactual and certain before it
speaks: when an arrive stands between the read's wait and the read (nothing but other operations in
between), the protocol is searched again with that arrive -- every statement written from the same
source site (Options.sites: one CUDA line unrolled per stage) -- moved down to just before the block's
next wait (or its end), after the read; the cause is named only when that search is complete and finds
no error. The finding carries the race's code (SV302) at the arrive, ahead of the race itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from . import ir
from .diagnose_ir import blocks
from .diagnostics import Diagnostic, Related, make
from .result import CheckResult

if TYPE_CHECKING:
    from .options import Options


def _arrive_of(s: ir.Stmt) -> ir.MbarArrive | None:
    """The plain arrive a statement is (or an elect block holding only one)."""
    if isinstance(s, ir.MbarArrive) and s.tx_bytes is None and not s.drop:
        return s
    if isinstance(s, ir.Elect) and len(s.body) == 1:
        return _arrive_of(s.body[0])
    return None


def _early_arrive(protocol: ir.Protocol, read_line: int) -> tuple[ir.MbarArrive, ir.Access] | None:
    """The arrive between a read at `read_line` and the wait before it, in the read's own block."""
    for block in blocks(protocol.body):
        for i, s in enumerate(block):
            if not (isinstance(s, ir.Access) and s.kind == "read" and s.span.line == read_line):
                continue
            for prev in reversed(block[:i]):
                if isinstance(prev, ir.MbarWait | ir.For | ir.If | ir.BarSync):
                    break
                got = _arrive_of(prev)
                if got is not None:
                    return got, s
    return None


def _moved(stmts: tuple[ir.Stmt, ...], lines: set[int]) -> tuple[tuple[ir.Stmt, ...], int]:
    """The body with each arrive statement at one of `lines` moved down to just before its block's next
    wait (or the block's end), past the accesses after it; and how many arrives passed an access."""
    out: list[ir.Stmt] = []
    held: list[ir.Stmt] = []
    passed = False  # has an access gone by since the held arrives were taken out?
    moved = 0

    def release() -> None:
        nonlocal held, passed, moved
        moved += len(held) if passed else 0
        out.extend(held)
        held, passed = [], False

    for s in stmts:
        a = _arrive_of(s)
        if a is not None and a.span.line in lines:
            held.append(s)
            continue
        if isinstance(s, ir.MbarWait):
            release()
        elif isinstance(s, ir.For | ir.Elect):
            body, n = _moved(s.body, lines)
            moved += n
            s = replace(s, body=body)
        elif isinstance(s, ir.If):
            then, n1 = _moved(s.then, lines)
            orelse, n2 = _moved(s.orelse, lines)
            moved += n1 + n2
            s = replace(s, then=then, orelse=orelse)
        elif isinstance(s, ir.Access):
            passed = passed or bool(held)
        out.append(s)
    release()
    return tuple(out), moved


def early_release(protocol: ir.Protocol, result: CheckResult, options: Options,
                  search_clean: Callable[[ir.Protocol, Options, float], bool],
                  same_site: Callable[[Options, int, list[int]], list[int]]) -> list[Diagnostic]:
    """An arrive above the read it should follow, when moving it below the read makes the protocol clean
    (`search_clean` and `same_site`: diagnose.py's, passed in so that the two modules import one way)."""
    out: list[Diagnostic] = []
    tried: set[int] = set()
    arrive_lines = sorted({s.span.line for block in blocks(protocol.body) for s in block
                           if _arrive_of(s) is not None})
    for d in result.diagnostics:
        if d.code != "SV302" or not d.related or d.span is None:
            continue
        found = _early_arrive(protocol, d.related[0].span.line)
        if found is None:
            continue
        arrive, read = found
        if arrive.span.line in tried:
            continue
        group = set(same_site(options, arrive.span.line, arrive_lines))
        tried |= group
        body, moved = _moved(protocol.body, group)
        if not moved or not search_clean(replace(protocol, body=body), options, result.stats.seconds):
            continue
        bar = arrive.bar.name + ("[…]" if arrive.bar.index is not None else "")
        buf = read.buf.name + ("[…]" if read.buf.index is not None else "")
        out.append(make(
            "SV302", f"the arrive on `{bar}` releases `{buf}` before this warp's read of it at "
            f"line {read.span.line}: the buffer may be overwritten while it is read (the WAR race at line "
            f"{d.span.line}). Release it after the last access: with the arrive after the read, the protocol "
            "checks without error at this bound", arrive.span,
            related=(Related(read.span, "the read it comes before"), Related(d.span, "the race it causes (SV302)"))))
    return out
