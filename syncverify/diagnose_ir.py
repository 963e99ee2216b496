"""The walks of a protocol's IR that the root-cause passes share (diagnose.py and the diagnose_* modules
beside it): every statement list, every operation, a body rewritten operation by operation, and the codes
of the races whose cause they look for. Written once here so that each pass imports one definition."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from . import ir

RACES = ("SV301", "SV302", "SV303")


def blocks(stmts: tuple[ir.Stmt, ...]) -> Iterator[tuple[ir.Stmt, ...]]:
    """Every statement list of the body (the body itself, loop, branch and elect bodies)."""
    yield stmts
    for s in stmts:
        if isinstance(s, ir.For | ir.Elect):
            yield from blocks(s.body)
        elif isinstance(s, ir.If):
            yield from blocks(s.then)
            yield from blocks(s.orelse)


def operations(stmts: tuple[ir.Stmt, ...]) -> Iterator[ir.Stmt]:
    """Every operation of the body (no control statement, no let)."""
    for block in blocks(stmts):
        for s in block:
            if not isinstance(s, ir.Let | ir.For | ir.If | ir.Elect):
                yield s


def map_ops(stmts: tuple[ir.Stmt, ...], change: Callable[[ir.Stmt], ir.Stmt]) -> tuple[ir.Stmt, ...]:
    """The body with `change` applied to every operation (control statements rebuilt around it)."""
    out = []
    for s in stmts:
        if isinstance(s, ir.For | ir.Elect):
            out.append(replace(s, body=map_ops(s.body, change)))
        elif isinstance(s, ir.If):
            out.append(replace(s, then=map_ops(s.then, change), orelse=map_ops(s.orelse, change)))
        elif isinstance(s, ir.Let):
            out.append(s)
        else:
            out.append(change(s))
    return tuple(out)
