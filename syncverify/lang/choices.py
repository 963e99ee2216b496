"""`choose` values: the assignments a check covers, and how a finding names one.

A `choose` declaration stands for every value of its range at once. The checker covers
them by instantiation: each assignment of values to the declarations is resolved as a
protocol of its own (where a chosen value is a constant, or a table per CTA or per element)
and checked as one; a finding names the assignment that reaches it. This is exact, and
its cost is the number of assignments times the cost of one check.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from .. import ir

MAX_ASSIGNMENTS = 1024  # beyond this a check is inconclusive: pin values with -D or narrow the ranges


HUGE = 1 << 64  # counts are saturated here: `choose kv[4096] in 0..1 << 40` need not be computed exactly


def count(protocol: ir.Protocol) -> int:
    """How many assignments the protocol's `choose` declarations allow (at most HUGE)."""
    if sum(c.cells * (c.hi - c.lo - 1).bit_length() for c in protocol.choices) > 64:
        return HUGE
    return min(HUGE, math.prod((c.hi - c.lo) ** c.cells for c in protocol.choices))


def _count_text(n: int) -> str:
    return "at least 2^64" if n >= HUGE else str(n)


def open_choices(protocol: ir.Protocol) -> str:
    """Why ``protocol`` stands for several assignments; empty when it is one (pinned, or
    built with a given assignment)."""
    if protocol.assignment:
        return ""
    free = [c.name for c in protocol.choices if c.hi - c.lo > 1]
    if not free:
        return ""
    names = ", ".join(f"`{n}`" for n in free)
    verb = "allow" if len(free) > 1 else "allows"
    return f"the `choose` value{'s' if len(free) > 1 else ''} {names} {verb} {_count_text(count(protocol))} assignments"


def assignments(protocol: ir.Protocol) -> Iterator[ir.Assignment]:
    """Every assignment, smallest values first (the last cell of the last declaration varies fastest)."""
    cells = [range(c.lo, c.hi) for c in protocol.choices for _ in range(c.cells)]
    for combo in itertools.product(*cells):
        out, at = [], 0
        for c in protocol.choices:
            out.append((c.name, tuple(combo[at:at + c.cells])))
            at += c.cells
        yield tuple(out)


def describe(protocol: ir.Protocol, assignment: ir.Assignment) -> str:
    """`NBLK=0`, `NT@cta0=1, NT@cta1=2`, `kv=[0, 2, 1]`: the values as a finding names them."""
    values = dict(assignment)
    parts: list[str] = []
    for c in protocol.choices:
        vals = values.get(c.name, ())
        per = c.cells // protocol.cluster if c.per_cta else c.cells
        rows = [vals[r * per:(r + 1) * per] for r in range(len(vals) // per)] if per else []
        for r, row in enumerate(rows):
            where = f"@cta{r}" if c.per_cta else ""
            text = str(row[0]) if c.size is None else "[" + ", ".join(map(str, row)) + "]"
            parts.append(f"{c.name}{where}={text}")
    return ", ".join(parts)


def ranges(protocol: ir.Protocol) -> str:
    """`NBLK in 0..4, NT in 1..3 per CTA`: the declarations, for a check's bound."""
    out = []
    for c in protocol.choices:
        shape = f"[{c.size}]" if c.size is not None else ""
        out.append(f"{c.name}{shape}" + (f"={c.lo}" if c.hi - c.lo == 1 else f" in {c.lo}..{c.hi}")
                   + (" per CTA" if c.per_cta else ""))
    return ", ".join(out)
