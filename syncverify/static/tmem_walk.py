"""The tensor-memory columns each CTA allocates and deallocates, added up without running every trip.

SV406 ("all of the Tensor Memory that was allocated … must be explicitly deallocated … before the
kernel exits", ptx-semantics.md §7) is decided on the compiled programs: control flow depends only
on loop variables and on who executes, so each process runs one fixed sequence of operations and
the column totals are the same in every execution that runs to the end.

Adding them up by stepping through that sequence does not scale: a loop of 10^8 trips is 10^8
steps, and a walk cut off after a fixed number of them reports what it saw before the cut — an
allocation after it is never seen (a false "safe"), a deallocation after it makes a balanced
kernel look leaky (a false alarm). The walk here is exact instead, and summarises loops:

* a loop with no `tmem.alloc`/`tmem.dealloc` anywhere in its body adds nothing: it is skipped
  whatever its trip count (variables do not outlive their block, docs/language.md §5.1, so
  nothing after the loop reads what the body computed);
* a loop whose body adds the same columns on every trip — no branch condition and no nested loop
  bound in it reads the loop variable, or a `let` computed from it — adds its trip count times
  what one trip adds (that trip walked once, its own loops summarised the same way);
* any other loop (a branch on `k % 2`) is walked trip by trip.

The walk counts the instructions it visits against a deterministic budget (``WALK_STEPS``) and
looks at the clock (``deadline``, the user's --timeout) as it goes. A walk that runs out of
either raises :class:`WalkIncomplete`: the totals are then unknown, and the check that needed them
is inconclusive — never "safe", never SV406 on what was not seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .. import budget as budgets
from .. import ir
from ..expr import EvalError, evaluate, free_names
from ..semantics.machine import Machine
from ..semantics.program import BRANCH, END, FOR_INIT, JUMP, LET, OP, Program

# Instructions the walk may visit in one check (all processes together; about a second of work). A
# summarised loop costs the instructions of one trip, so only a loop whose trips allocate
# differently (walked trip by trip) spends much of it: one of ~50,000 trips, whose explicit search
# would be as long; the all-iterations lift decides such a loop at every trip count instead.
WALK_STEPS = 250_000
_CLOCK_EVERY = 4096


class WalkIncomplete(Exception):
    """The totals could not be added up within the budget; ``kind`` is budget.STATES (the
    deterministic step budget) or budget.TIME (the clock)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Totals:
    """Columns one process allocates and deallocates, and its first alloc or dealloc."""

    alloc: int = 0
    free: int = 0
    first: ir.TmemAlloc | None = None

    def plus(self, other: Totals, times: int = 1) -> Totals:
        return Totals(self.alloc + times * other.alloc, self.free + times * other.free, self.first or other.first)


class _Walk:
    """The exact walk of one process's program (see the module docstring)."""

    def __init__(self, machine: Machine, p: int, spent: list[int], limit: int, deadline: float | None):
        self.machine, self.p = machine, p
        self.prog: Program = machine.programs[p]
        self.ctx = machine.ctx[p]
        self.spent, self.limit, self.deadline = spent, limit, deadline
        self._tmem_in: dict[int, bool] = {}
        self._uniform: dict[int, bool] = {}

    def tick(self, line: int) -> None:
        self.spent[0] += 1
        if self.spent[0] > self.limit:
            raise WalkIncomplete(budgets.STATES, f"the tensor-memory walk of {self.machine.proc_label(self.p)} "
                                 f"stopped after {self.limit:,} steps (line {line}: a loop whose trips allocate "
                                 "or free different columns)")
        if not self.spent[0] % _CLOCK_EVERY and self.deadline is not None and time.monotonic() > self.deadline:
            raise WalkIncomplete(budgets.TIME, f"time budget reached in the tensor-memory walk of "
                                 f"{self.machine.proc_label(self.p)} (line {line})")

    def value(self, expr: ir.Expr, env: dict[str, int]) -> int:
        return evaluate(expr, env, self.ctx)

    def has_tmem(self, init: int) -> bool:
        """Does the loop starting at ``init`` hold an alloc or dealloc?"""
        hit = self._tmem_in.get(init)
        if hit is None:
            code = self.prog.code
            hit = any(ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) for ins in code[init + 1:code[init].target])
            self._tmem_in[init] = hit
        return hit

    def uniform(self, init: int) -> bool:
        """Does every trip of the loop at ``init`` take the same branches and nested trip counts?
        True when no condition or nested bound reads the loop variable or a `let` derived from it."""
        hit = self._uniform.get(init)
        if hit is None:
            code = self.prog.code
            names = self.prog.var_names
            tainted = {code[init].loop_var}
            hit = True
            for ins in code[init + 1:code[init].target]:
                if ins.kind == LET and free_names(ins.expr) & tainted:  # type: ignore[arg-type]
                    tainted.add(names[ins.slot])
                elif ins.kind == BRANCH and free_names(ins.expr) & tainted:  # type: ignore[arg-type]
                    hit = False
                    break
                elif ins.kind == FOR_INIT and (free_names(ins.expr) | free_names(ins.expr2)) & tainted:  # type: ignore[arg-type]
                    hit = False
                    break
            self._uniform[init] = hit
        return hit

    def run(self, pc: int, end: int, env: dict[str, int]) -> Totals:
        """What the code from ``pc`` up to ``end`` (or the program's END) adds, with ``env``."""
        code = self.prog.code
        alloc = free = 0
        first: ir.TmemAlloc | None = None
        while pc < end:
            ins = code[pc]
            self.tick(ins.line)
            kind = ins.kind
            if kind == END:
                break
            if kind == OP:
                op = ins.op
                if isinstance(op, ir.TmemAlloc):
                    first = first or op
                    if op.dealloc:
                        free += op.cols
                    else:
                        alloc += op.cols
                pc += 1
            elif kind == LET:
                env[self.prog.var_names[ins.slot]] = self.value(ins.expr, env)  # type: ignore[arg-type]
                pc += 1
            elif kind == BRANCH:
                pc = pc + 1 if self.value(ins.expr, env) else ins.target  # type: ignore[arg-type]
            elif kind == JUMP:
                pc = ins.target
            elif kind == FOR_INIT:
                inner = self.loop(pc, env)
                alloc, free, first = alloc + inner.alloc, free + inner.free, first or inner.first
                pc = ins.target
            else:  # BAR_WAIT (FOR_NEXT is never reached: loops are summarised by ``loop``)
                pc += 1
        return Totals(alloc, free, first)

    def loop(self, init: int, env: dict[str, int]) -> Totals:
        ins = self.prog.code[init]
        lo, hi = self.value(ins.expr, env), self.value(ins.expr2, env)  # type: ignore[arg-type]
        if lo >= hi or not self.has_tmem(init):
            return Totals()
        body_end = ins.target - 1  # the FOR_NEXT
        var = ins.loop_var
        if self.uniform(init):
            return Totals().plus(self.run(init + 1, body_end, {**env, var: lo}), hi - lo)
        out = Totals()
        for k in range(lo, hi):
            out = out.plus(self.run(init + 1, body_end, {**env, var: k}))
        return out


def process_totals(machine: Machine, p: int, spent: list[int], limit: int = WALK_STEPS,
                   deadline: float | None = None) -> Totals:
    """The columns process p allocates and frees over its whole run. An expression that cannot be
    evaluated ends the walk where it stands: the search reports it (SV115), so no execution runs to
    the end there."""
    walk = _Walk(machine, p, spent, limit, deadline)
    env: dict[str, int] = {}
    try:
        return walk.run(0, len(machine.programs[p].code), env)
    except EvalError:
        return Totals()


def tmem_totals(machine: Machine, limit: int = WALK_STEPS,
                deadline: float | None = None) -> dict[int, tuple[int, int, ir.Op]]:
    """Per CTA that uses tensor memory: (columns allocated, columns deallocated, its first alloc or
    dealloc) over every execution that runs to the end (each side of a cta_group 2 operation
    allocates in its own CTA). Raises WalkIncomplete when the budget or the clock runs out."""
    if not any(ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) for prog in machine.programs for ins in prog.code):
        return {}
    spent = [0]
    totals: dict[int, tuple[int, int, ir.Op]] = {}
    for p, proc in enumerate(machine.procs):
        t = process_totals(machine, p, spent, limit, deadline)
        if t.first is None:
            continue
        alloc, free, first = totals.get(proc.cta, (0, 0, t.first))
        totals[proc.cta] = (alloc + t.alloc, free + t.free, first)
    return totals


__all__ = ["WALK_STEPS", "Totals", "WalkIncomplete", "process_totals", "tmem_totals"]
