"""Which asynchronous tcgen05 operations of one thread execute in issue order (PTX ISA §9.7.16.6.2,
"Pipelined tcgen05 Instructions"; docs/model.md, "tcgen05": "Pipelines"), as the records of a
tensor-memory region name them. Used by families/tcgen05.py (Tcgen05Ops._pipelined)."""

from __future__ import annotations

from ..state import F_TCCP, F_TCSHIFT, R_FLAGS, R_KIND, READ, WRITE

# Which earlier asynchronous accesses (mma/cp, as their records show) a later mma or cp of the same
# thread is pipelined after, on the same region (PTX ISA §9.7.16.6.2, with the operand-level pairs of
# its later revisions: "mma (A/metadata reads) -> mma (D writes)", "mma (A/metadata reads) -> cp
# (writes)", "cp -> mma (A/metadata reads)", mma (D) -> mma (C/D) on one accumulator).
# Keys: (later op, its access), values: the earlier accesses ("mma-read", "mma-write", "cp-write").
# tcgen05.shift (§9.7.16.6.2, pairs 3 and 5): "shift -> mma (same N)" and "mma -> shift (same N)";
# "shift -> cp.4x256b" is left out (the cp's shape is not modelled: a cp after a shift needs a commit).
_PIPELINED: dict[tuple[str, int], frozenset[str]] = {
    ("mma", READ): frozenset({"cp-write", "shift-write"}),
    ("mma", WRITE): frozenset({"mma-write", "cp-write", "mma-read", "shift-write"}),
    ("cp", WRITE): frozenset({"mma-read"}),
    ("shift", WRITE): frozenset({"mma-write", "mma-read"}),
}


# the same pairs by the later record's kind: which earlier kinds it executes after
_BEFORE: dict[str, frozenset[str]] = {
    "mma-read": _PIPELINED[("mma", READ)], "mma-write": _PIPELINED[("mma", WRITE)],
    "cp-write": _PIPELINED[("cp", WRITE)], "shift-write": _PIPELINED[("shift", WRITE)]}


def _tc_kind(r: tuple) -> str:
    """An mma/cp record as _PIPELINED names it."""
    if r[R_KIND] == READ:
        return "mma-read"
    if r[R_FLAGS] & F_TCSHIFT:
        return "shift-write"
    return "cp-write" if r[R_FLAGS] & F_TCCP else "mma-write"
