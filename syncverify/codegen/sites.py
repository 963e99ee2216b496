"""Operation sites: a stable number for every operation of a protocol body.

The emitted kernel and the schedule computed through the model must name the
same event the same way, so an event is identified by (process, site,
occurrence): the process that executes it, the operation's site number, and how
many times that process executed that site before. Both sides count
occurrences by running the same control flow, so no loop variable needs to be
matched between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir


@dataclass(frozen=True, slots=True)
class Site:
    index: int
    op: ir.Op
    line: int
    text: str  # the operation as written in the spec (for messages)


def op_text(protocol: ir.Protocol, span: ir.Span) -> str:
    return protocol.text_of(span) or type(span).__name__


def comment_safe(text: str) -> str:
    """Spec text made fit to quote inside a C comment of the generated kernel: printable ASCII only
    (no newline that would end a `//` comment, no bidi controls that would make the source read
    differently from how it compiles), and no `*/` that would end a block comment."""
    clean = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return clean.replace("*/", "* /")


def collect_sites(protocol: ir.Protocol) -> list[Site]:
    """Every operation of the body in source order (a `cluster.sync` gives two sites)."""
    sites: list[Site] = []

    def walk(stmts: tuple[ir.Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, ir.For):
                walk(s.body)
            elif isinstance(s, ir.If):
                walk(s.then)
                walk(s.orelse)
            elif isinstance(s, ir.Elect):
                walk(s.body)
            elif isinstance(s, ir.Let):
                continue
            else:
                sites.append(Site(len(sites), s, s.span.line, op_text(protocol, s.span)))

    walk(protocol.body)
    return sites


def site_index(sites: list[Site]) -> dict[int, int]:
    """id(op) -> site number: the compiled programs share the IR's op objects."""
    return {id(s.op): s.index for s in sites}


def lane_site_index(sites: list[Site]) -> dict[tuple[type, ir.Span], int]:
    """(operation type, span) -> site, for the per-lane copies of an operation whose operand uses
    `lane` (``semantics.program.with_lane``): they are new objects with the original's span."""
    return {(type(s.op), s.op.span): s.index for s in sites}


def site_of_instr(site_of: dict[int, int], lane_sites: dict[tuple[type, ir.Span], int],
                  op: ir.Op) -> tuple[int | None, bool]:
    """The site of a compiled operation, and whether it is one lane's copy of a per-lane operation."""
    site = site_of.get(id(op))
    if site is not None:
        return site, False
    site = lane_sites.get((type(op), op.span))
    return site, site is not None
