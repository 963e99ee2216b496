"""Registers that hold a value read from a flag during the kernel: the language's kept value (`let v = …`).

In a whole-grid extraction (gridextract.py) the old value of an `atom` on a flag in global memory, and what a
thread computes from it, is not a number the executor knows: it is the value of the run that the language keeps
in a `let` variable (docs/language.md §3.7, semantics/families/flag_values.py). A register holding it is
UNKNOWN among the executor's values, and beside them, per lane, it carries a `Kept`: the language expression it
is (`v55`, `v55 == 1`, `v55 == 1 ? 1 : 0`). kept.py says which instructions may compute with it and where it
becomes a statement; this module is only the table, which warp.py keeps up to date: any write of a register
(an instruction's result, a havoc of an unknown region) drops the entry of the lanes written, so an entry is
never older than its register.

The table is replaced, never changed in place, so that the copies of a warp made for the two outcomes of a
branch (probe.py `clone`, a shallow copy) never share a change.
"""

from __future__ import annotations

from dataclasses import dataclass

from .parse import Instr, Name, operand_registers


@dataclass(frozen=True)
class Kept:
    """A register's value as a language expression over kept variables.

    ``expr``: the expression text; ``boolean``: whether it is 0 or 1 only (a comparison, or a `selp` of 0
    and 1), which is what a narrowing conversion or a store narrower than 32 bits may carry unchanged;
    ``line``/``opcode``: the read of the flag it comes from (PTX line, for the messages)."""

    expr: str
    boolean: bool
    line: int
    opcode: str

    def term(self) -> str:
        """The expression as an operand of another one (parenthesised unless it is one name)."""
        return self.expr if self.expr.isidentifier() else f"({self.expr})"


KeptTable = dict[str, dict[int, Kept]]


def without(table: KeptTable, name: str, lanes: list[int] | tuple[int, ...]) -> KeptTable:
    """The table with register ``name``'s entries of ``lanes`` dropped (the same table if it has none)."""
    got = table.get(name)
    if not got or not any(lane in got for lane in lanes):
        return table
    rest = {lane: k for lane, k in got.items() if lane not in lanes}
    out = {n: m for n, m in table.items() if n != name}
    if rest:
        out[name] = rest
    return out


def with_entry(table: KeptTable, name: str, lanes: list[int] | tuple[int, ...], k: Kept) -> KeptTable:
    """The table with register ``name`` holding ``k`` in ``lanes``."""
    m = dict(table.get(name, {}))
    for lane in lanes:
        m[lane] = k
    return {**table, name: m}


def result_read(body: list[Instr], name: str) -> bool:
    """Whether some instruction of the function reads register ``name`` (as an operand past the destination,
    an address's base or a guard): flow-insensitive, so it may say yes where no path reads it, never no where
    one does."""
    for ins in body:
        if ins.guard == name:
            return True
        for o in ins.operands[1:] if ins.base not in ("st", "red") else ins.operands:
            if name in operand_registers(o):
                return True
        if ins.operands and not isinstance(ins.operands[0], Name) and name in operand_registers(ins.operands[0]):
            return True
    return False


def merged(tables: list[KeptTable]) -> KeptTable:
    """The entries every table agrees on (the copies of a warp joining after a branch)."""
    first, rest = tables[0], tables[1:]
    out: KeptTable = {}
    for name, m in first.items():
        keep = {lane: k for lane, k in m.items() if all(t.get(name, {}).get(lane) == k for t in rest)}
        if keep:
            out[name] = keep
    return out
