"""Resolve a Lark syntax tree into the IR, reporting every SV1xx input error.

Resolution binds names (params are substituted, objects get their kind),
evaluates declarations for the given params, folds constant expressions,
and validates each operation against OPERATIONS: which qualifiers, operands
and clauses it takes. Errors are collected, not raised one by one, so a user
sees all of a file's mistakes at once.

The stages, one module each, build on one another: operations (the table every op is
checked against), names (the state, names and expressions), declarations, statements
(the body and the op dispatcher), then one module per operation family (mbarrier,
barriers, memory, tcgen05, async_operands, tensormap); this module joins the families into the Resolver and runs
the stages in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lark import Tree

from ... import ir
from ...diagnostics import InputError
from .async_operands import OperandOps
from .barriers import BarrierOps
from .globalmem import GlobalOps
from .mbarrier import MbarrierOps
from .memory import MemoryOps
from .names import _Ctx
from .tcgen05 import Tcgen05Ops
from .tensormap import TensormapOps


class Resolver(TensormapOps, GlobalOps, MbarrierOps, BarrierOps, MemoryOps, Tcgen05Ops, OperandOps):
    """A lark tree's resolver: every stage and every operation family, on one state."""


def resolve(tree: Tree, path: str, text: str, defines: Mapping[str, int],
            expect: ir.Expectation | None, assignment: Mapping[str, tuple[int, ...]] | None = None) -> ir.Protocol:
    """Turn a parse tree into a Protocol, or raise InputError with every problem found.

    ``assignment``: the values of the `choose` declarations (name -> values, CTA-major);
    without one each takes the first value of its range and the protocol records none."""
    res = Resolver(path, text, defines, assignment)
    proto = tree.children[0]
    name, *items = proto.children
    res.header = res.span(name)
    res.declarations(items)
    if res.threads is None and not any(i.data == "cta_threads" for i in items):
        res.error("SV113", "missing `cta threads N;`", res.span(name))
    res.check_roles()
    body = res.block(items, _Ctx())
    if res.errors:
        errors = res.errors
        first = [f"{n}={c.lo}" for n, c in res.chosen.items() if c.hi - c.lo > 1]
        if assignment is None and first:  # a chosen value may be what made it wrong: say which one was used
            note = f"resolved with the first value of each `choose` ({', '.join(first)}; per CTA and per element alike)"
            errors = [replace(d, notes=(*d.notes, note)) for d in errors]
        raise InputError(sorted(errors, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0)))
    return ir.Protocol(
        name=str(name), path=path, params=tuple(res.params.items()), cluster=res.cluster,
        threads=res.threads or 0, roles=tuple(res.roles), buffers=tuple(res.buffers.values()),
        mbarriers=tuple(res.mbarriers.values()), body=body, expect=expect, span=res.span(proto),
        loop_params=tuple(res.loop_params), source=text, choices=res.choices(),
        assignment=tuple((n, tuple(assignment[n])) for n in res.chosen) if assignment is not None else (),
        param_sites=tuple(res.param_sites), tmem_regions=tuple(res.tmem_regions.values()),
        flags=tuple(res.flags.values()), cluster_dim=res.cluster_dim, launch=res.launch,
        defines=tuple(sorted((str(k), int(v)) for k, v in defines.items())),
    )
