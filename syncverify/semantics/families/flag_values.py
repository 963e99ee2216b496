"""A value read from a flag that decides control flow: `let v = atom.add.acq_rel F, 1;` and
`let v = ld.acquire F;`, then `if v == N - 1 { … }` -- "the last CTA to arrive reduces" of CUDA's
threadFenceReduction sample, of PyTorch's `mark_block_finished` and of split-K "last block" fixups.

What a read returns is not defined here: families/globalmem.py defines it once (``flag_reads``: the
values a load may return in a state; an atomic reads the latest write, PTX's atomicity). This module
only keeps the value in the process's variable and offers a step for each value a load may return
besides the first, which the process's own step takes:

* ``keep_flag_value``: the read value becomes the `let` variable's (the handler of families/globalmem.py
  calls it, where the read happens);
* ``flag_read_alternatives`` / ``step_flag_read``: the other values, labelled ``("p", p, k)`` with k >= 1
  (a probe's false outcome is ``("p", p, 0)``: families/mbarrier_probe.py);
* ``check_flag_values``: where such a variable may be used (SV806). The value is data written during the
  kernel; the language lets it decide an `if` (and flow into another `let` or a flag operation's value),
  never an object's index, a byte count, a parity or a loop bound: the static checks and the reductions
  read those from the program alone (footprint.py, static/), which a value of the run would invalidate.

A read whose result is kept is executed by one thread (`first thread { }`, `elect { }`, or a process of one
thread) for an atomic: the threads of a warp that each add get different old values, and the language keeps
one value per process. A load kept by several threads is modelled where it can return one value only (a
warp reading a flag after a barrier that ordered the write); where it could return several, the threads
could disagree, and the check is inconclusive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass

from ... import ir
from ...diagnostics import InputError, make
from ...expr import free_names
from ..core import BudgetExceeded, StepResult, Violation, _detached, _Work
from ..program import END
from ..state import P_PC, P_VARS, State


class FlagValueOps:
    """Explicit-state handlers of a kept flag value (a mixin of Machine, beside GlobalMemOps, whose
    ``flag_reads``/``flag_read`` it calls)."""

    def keep_flag_value(self, w: _Work, p: int, ins, value: int) -> None:
        """The read value is the `let` variable's (``ins.slot``)."""
        ps = w.procs[p]
        vars_ = ps[P_VARS]
        w.procs[p] = (ps[P_PC], (*vars_[:ins.slot], value, *vars_[ins.slot + 1:]), *ps[P_VARS + 1:])

    def _kept_load(self, state: State, p: int):
        """(instruction, flag element) where process p stands at a kept load (`let v = ld.SEM F;`), else None."""
        ps = state.procs[p]
        ins = self.programs[p].code[ps[P_PC]]
        op = ins.op
        if not isinstance(op, ir.FlagOp) or op.kind != "ld" or ins.slot < 0:
            return None
        try:
            e = self._flag_elem(op.flag, self._env_at(p, ps[P_VARS]), self.ctx[p])
        except Violation:
            return None  # the deterministic step reports it
        return ins, e

    def flag_read_alternatives(self, state: State, p: int) -> Iterator[StepResult]:
        """The steps of process p's kept load that return another value than its deterministic step."""
        at = self._kept_load(state, p)
        if at is None:
            return
        ins, e = at
        n = len(self.flag_reads(state, p, e, ins.op))
        if n > 1 and ins.threads > 1:
            raise BudgetExceeded(
                f"line {ins.line}: `ld` of {self.flag_label(e)} kept in a variable by {ins.threads} threads at once "
                f"may return {n} values here, and the threads could disagree: keep the value in one thread "
                "(`first thread {{ }}`) or order the write before the load")
        for k in range(1, n):
            yield self.step_flag_read(state, p, k)

    def step_flag_read(self, state: State, p: int, choice: int) -> StepResult | None:
        """Process p's kept load returns ``flag_reads(...)[choice]``; None if it cannot here."""
        at = self._kept_load(state, p)
        if at is None:
            return None
        ins, e = at
        if choice >= len(self.flag_reads(state, p, e, ins.op)):
            return None
        w = _Work(state)
        label = ("p", p, choice)
        pstate = state.procs[p]
        try:
            value = self.flag_read(w, p, self.procs[p].cta, self._lanes(p, ins), e, ins.op, choice)
            self.keep_flag_value(w, p, ins, value)
            pc, vars_ = self._run_local(p, pstate[P_PC] + 1, w.procs[p][P_VARS])
            w.procs[p] = (pc, vars_, *w.procs[p][2:])
            if self.programs[p].code[pc].kind == END:
                self._exit(w, p)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft)


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
