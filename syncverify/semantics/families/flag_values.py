"""A value read from a flag that decides control flow: `let v = atom.add.acq_rel F, 1;` and
`let v = ld.acquire F;`, then `if v == N - 1 { … }` -- "the last CTA to arrive reduces" of CUDA's
threadFenceReduction sample, of PyTorch's `mark_block_finished` and of split-K "last block" fixups.

Which write a read returns is not defined here: families/globalmem_views.py defines it once (``readable``:
a `ld` may read any write from the thread's view on, each older write than the latest a step of its own
labelled ``("p", p, "r", index)``; an atomic reads the latest write, PTX's atomicity). The handler of
families/globalmem.py keeps the value of the write the step reads. This module only

* ``keep_flag_value``: makes the read value the `let` variable's;
* ``check_kept_read``: refuses to keep one value for several threads where the load may return several
  (inconclusive: the threads could disagree, and the language keeps one value per process);
* ``check_flag_values``: where such a variable may be used (SV806). The value is data written during the
  kernel; the language lets it decide an `if` (and flow into another `let` or a flag operation's value),
  never an object's index, a byte count, a parity or a loop bound: the static checks and the reductions
  read those from the program alone (footprint.py, static/), which a value of the run would invalidate.

A read whose result is kept is executed by one thread (`first thread { }`, `elect { }`, or a process of one
thread) for an atomic: the threads of a warp that each add get different old values, and the language keeps
one value per process. A load kept by several threads is modelled where it can return one value only (a
warp reading a flag after a barrier that ordered the write, so that its view is the latest write); where
it could return several, the threads could disagree, and the check is inconclusive.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from ... import ir
from ...diagnostics import InputError, make
from ...expr import free_names
from ..core import ModelBound, _Work
from ..state import P_PC, P_VARS


class FlagValueOps:
    """Explicit-state handlers of a kept flag value (a mixin of Machine, beside GlobalMemOps, which
    calls them where a read happens)."""

    def keep_flag_value(self, w: _Work, p: int, ins, value: int) -> None:
        """The read value is the `let` variable's (``ins.slot``)."""
        ps = w.procs[p]
        vars_ = ps[P_VARS]
        w.procs[p] = (ps[P_PC], (*vars_[:ins.slot], value, *vars_[ins.slot + 1:]), *ps[P_VARS + 1:])

    def check_kept_read(self, ins, e: int, n: int) -> None:
        """A `let v = ld…` of flag element ``e`` whose threads may read ``n`` writes: one value for the
        process only where n == 1 or one thread reads (ModelBound otherwise: inconclusive)."""
        if n > 1 and ins.threads > 1:
            raise ModelBound(
                f"line {ins.line}: `ld` of {self.flag_label(e)} kept in a variable by {ins.threads} threads at once "
                f"may read {n} writes here, and the threads could disagree: keep the value in one thread "
                "(`first thread { }`) or order the write before the load")


def check_flag_values(protocol: ir.Protocol) -> None:
    """SV806: a variable that holds a flag's value (or one computed from it) used where the language
    cannot take a value of the run: an object's index, a byte count, a parity, a count, a region bound.
    It may decide an `if`, flow into a `let`, and be a flag operation's value."""
    errors = []

    def walk(body: tuple[ir.Stmt, ...], kept: frozenset[str]) -> None:
        for s in body:
            if isinstance(s, ir.Let):
                if isinstance(s.probe, ir.FlagOp):
                    uses(s.probe, kept)
                    kept = kept | {s.name}
                elif s.probe is None and free_names(s.value) & kept:
                    kept = kept | {s.name}
                elif s.probe is not None:
                    uses(s.probe, kept)
            elif isinstance(s, ir.For):
                for bound in (s.lo, s.hi):
                    refuse(bound, kept, "a loop bound")
                walk(s.body, kept)
            elif isinstance(s, ir.If):
                if s.probe is not None:
                    uses(s.probe, kept)
                walk(s.then, kept)
                walk(s.orelse, kept)
            elif isinstance(s, ir.Elect):
                walk(s.body, kept)
            else:
                uses(s, kept)

    def refuse(expr: ir.Expr, kept: frozenset[str], where: str) -> None:
        names = free_names(expr) & kept
        if names:
            errors.append(make("SV806", f"`{sorted(names)[0]}` holds a value read from a flag during the kernel, "
                               f"and {where} cannot take one: it may decide an `if` (and be a flag operation's "
                               "value); an index, a count, a byte range or a loop bound is fixed by the program",
                               expr.span))

    def uses(op: object, kept: frozenset[str]) -> None:
        if not kept:
            return
        for f in fields(op):  # type: ignore[arg-type]
            v = getattr(op, f.name)
            if isinstance(op, ir.FlagOp) and f.name == "operands":
                continue  # a flag operation's values are evaluated when it runs
            for item in v if isinstance(v, tuple) else (v,):
                if isinstance(item, ir.Ref):
                    if item.index is not None:
                        refuse(item.index, kept, f"the index of `{item.name}`")
                elif is_expr(item):
                    refuse(item, kept, f"the `{f.name}` of this operation")
                elif is_dataclass(item) and not isinstance(item, type) and hasattr(item, "span") \
                        and not isinstance(item, ir.Const):
                    uses(item, kept)

    walk(protocol.body, frozenset())
    if errors:
        raise InputError(errors)


_EXPR_TYPES = (ir.Const, ir.Var, ir.Builtin, ir.InRole, ir.BinOp, ir.UnOp, ir.Cond, ir.Pick)


def is_expr(v: object) -> bool:
    return isinstance(v, _EXPR_TYPES)
