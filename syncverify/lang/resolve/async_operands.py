"""Operands of asynchronous operations that are not shared memory: `regs NAME[N];`, the registers an
RS-form wgmma reads (its A fragment, its accumulator), and the `read`/`write` of them by their own
threads (docs/language.md §3.3b; semantics/families/async_operands.py).

A room of its own because registers are neither a slot of shared memory nor a global buffer: they
have no bytes, no CTA and no proxy, and only `read`, `write` and `wgmma.read` take them.
"""

from __future__ import annotations

from lark import Token, Tree

from ... import ir
from .statements import Statements

REG_BYTES = 16  # the nominal size of a register region (no rule reads it: registers are accessed whole)


class OperandOps(Statements):
    """The `regs` declaration and the accesses of registers."""

    def decl_regs_decl(self, t: Tree) -> None:
        name, array, _ = self._split_array(t.children)  # type: ignore[attr-defined]
        size, ok = self._array(array)  # type: ignore[attr-defined]
        if not self.declare(name, "registers") or not ok:
            return
        self.buffers[str(name)] = ir.Buffer(str(name), size, REG_BYTES, self.span(t), "register")

    def register_access(self, kind: str, span, t: Tree | Token, clauses: dict):
        """`read`/`write` of registers: the executing threads' own, whole (no `@ CTA`, no region)."""
        for clause in ("remote", "part", "range"):
            if clause in clauses:
                word = {"remote": "`@ CTA`", "part": "`part ...`", "range": "`bytes LO..HI`"}[clause]
                self.error("SV108" if clause == "remote" else "SV110",
                           f"registers are the executing thread's own: an access of them takes no {word}",
                           self.span(clauses[clause]))
                return None
        buf = self.ref(t, "registers")  # type: ignore[arg-type]
        if buf is None:
            return None
        return ir.Access(kind, buf, None, span)  # type: ignore[arg-type]
