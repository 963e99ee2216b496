"""An mbarrier init taken alone: a persistent set of one step where no other actor may still touch the barrier.

A kernel's prologue initializes its barriers, several warps each a few, before the barrier that publishes them
(a cluster barrier, `bar.sync`): the inits were never taken alone, so each CTA's prologue was the product of its
warps' init sequences — on CUTLASS's sm100 2-SM GEMM the first 100,000 states of the search (bench/RESULTS-speed.md).

Process p's init of barrier element e of CTA c is taken alone when

* no other process may still touch e (``sites``: every mbarrier operation from its pc on, every branch both ways,
  another CTA's through its remote, multicast and 2-SM targets; an index that reads a loop variable stands for
  the elements of the loop's constant range, one that reads any other variable for every element; an operation
  whose objects are not worked out, ANY, touches every barrier), counted — while p has not arrived at the
  cluster barrier's open generation — only up to a process's next `cluster.wait` that waits for that generation;
* no copy or commit in flight completes on e;
* the step breaks no rule, warns of nothing, does not end p, and changes nothing but p, the barriers of c and the
  access records (``result_alone``); e's bytes do not lie in a buffer.

`fence.mbarrier_init` is not counted: it marks its own process's init records released (async_agents.op_fence),
and p's init record is p's own. Why this is a persistent set: docs/model.md, "Steps of one CTA", *An init alone*.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from ... import ir
from ...expr import EvalError, evaluate
from ...semantics.program import FOR_INIT, OP, Program
from ...semantics.state import P_CLTOKEN, P_PC, P_VARS, State
from .cta_local import _blocked
from .cta_sites import ALL_CTAS, op_sites
from .element import union_ahead

if TYPE_CHECKING:
    from ...expr import Context
    from ...semantics.core import StepResult
    from ...semantics.machine import Machine

# The rule on or off (off: the search as before it; tests compare the two)
ENABLED = True
# what the other processes may still touch holds an init back (off only in tests: they show what the condition keeps)
OTHERS = True
# index values of a loop nest enumerated for one reference, at most (more: every element)
_MAX_COMBOS = 256

# a site of an mbarrier: (CTA or ALL_CTAS, name, index or None for every element); ("*", None) for ANY
MbSite = tuple[int, str, "int | None"]


def _loop_ranges(prog: Program, pc: int, ctx: Context) -> dict[str, range] | None:
    """The constant ranges of the loops around ``pc``, by variable name; None where a bound is not constant."""
    out: dict[str, range] = {}
    slots = prog.loops_at[pc] if pc < len(prog.loops_at) else ()
    for slot in slots:
        for q in range(pc - 1, -1, -1):
            ins = prog.code[q]
            if ins.kind == FOR_INIT and ins.slot == slot and ins.target > pc:
                try:
                    out[prog.var_names[slot]] = range(evaluate(ins.expr, {}, ctx), evaluate(ins.expr2, {}, ctx))
                except EvalError:
                    return None
                break
        else:
            return None
    return out


def _elements(prog: Program, pc: int, ref: ir.Ref, ctx: Context) -> list[int | None]:
    """The elements ``ref`` at ``pc`` may name: its index over the constant ranges of its loops ([None]: any)."""
    if ref.every:
        return [None]
    if ref.index is None:
        return [0]
    try:
        return [evaluate(ref.index, {}, ctx)]
    except EvalError:
        pass
    ranges = _loop_ranges(prog, pc, ctx)
    if ranges is None or not ranges:
        return [None]
    names = list(ranges)
    size = 1
    for r in ranges.values():
        size *= len(r)
    if size > _MAX_COMBOS:
        return [None]
    out: set[int | None] = set()
    for values in itertools.product(*(ranges[n] for n in names)):
        try:
            out.add(evaluate(ref.index, dict(zip(names, values, strict=True)), ctx))
        except EvalError:
            return [None]
    return sorted(out)  # type: ignore[type-var]


def _op_mb_sites(machine: Machine, p: int, pc: int) -> frozenset[MbSite]:
    """The mbarrier sites of the operation at ``pc`` of process p (module docstring)."""
    prog = machine.programs[p]
    op = prog.code[pc].op
    if isinstance(op, ir.Fence) and op.kind == "mbarrier_init":
        return frozenset()
    out: set[MbSite] = set()
    ctx = machine.ctx[p]
    for d, (kind, name, index) in op_sites(machine, p, op):
        if kind == "*":
            out.add((d, "*", None))
        elif kind == "mb":
            if index is None and getattr(op, "bar", None) is not None and op.bar.name == name:
                out.update((d, name, i) for i in _elements(prog, pc, op.bar, ctx))
            else:
                out.add((d, name, index))
    return frozenset(out)


class InitAlone:
    """The rule of the module docstring over one machine: per process and pc, the mbarrier sites it may still
    touch (``ahead``), and the same up to its next `cluster.wait` (``ahead_cut``)."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        # (its tables are the programs' own, for every trip count: it applies under a loop hook too)
        self.applies = ENABLED and any(
            ins.kind == OP and isinstance(ins.op, ir.MbarInit) for prog in machine.programs for ins in prog.code)
        self.cta_of = [proc.cta for proc in machine.procs]
        self.mbars_of = [frozenset(m for m, (c, _, _) in enumerate(machine.mb_names) if c == cta)
                         for cta in range(machine.ncta)]
        self.ahead: list[list[frozenset[MbSite]]] = []
        self.ahead_cut: list[list[frozenset[MbSite]]] = []
        if self.applies:
            for p, prog in enumerate(machine.programs):
                here = [_op_mb_sites(machine, p, pc) if ins.kind == OP else frozenset()
                        for pc, ins in enumerate(prog.code)]
                self.ahead.append(union_ahead(prog, here))
                self.ahead_cut.append(union_ahead(prog, here, stop_at_cluster_wait=True))

    def lone(self, state: State, p: int) -> bool:
        """May process p's init be taken alone, as far as the other actors go (module docstring)?"""
        if not self.applies:
            return False
        machine = self.machine
        procs = state.procs
        ps = procs[p]
        op = machine.programs[p].code[ps[P_PC]].op
        if machine.protocol.mbarrier(op.bar.name).storage is not None:
            return False
        name, index = machine.element_of(p, op.bar, ps[P_VARS])
        c = self.cta_of[p]
        cut = ps[P_CLTOKEN] < 0
        for q, qs in enumerate(procs):
            if q == p or not OTHERS:
                continue
            sites = (self.ahead_cut if cut and _blocked(state, qs) else self.ahead)[q][qs[P_PC]]
            for d, n, i in sites:
                if (d == c or d == ALL_CTAS) and (n == "*" or (n == name and (i is None or index is None
                                                                              or i == index))):
                    return False
        for a in state.agents:
            bar_cta, n, i = machine.mb_names[a[4]]
            if bar_cta == c and n == name and (index is None or i == index):
                return False
        return True

    def result_alone(self, state: State, res: StepResult, p: int) -> bool:
        """Does the init's step change nothing but p, the barriers of p's CTA and the records? (An init writes
        one barrier's state and its init record, and clears that barrier's holder bits.)"""
        new = res.state
        if new is None or new.cluster != state.cluster or new.tmem != state.tmem or new.named != state.named or \
                new.agents != state.agents:
            return False
        if any(q != p and a is not b and a != b for q, (a, b) in enumerate(zip(state.procs, new.procs, strict=True))):
            return False
        own = self.mbars_of[self.cta_of[p]]
        return all(a is b or a == b or m in own for m, (a, b) in enumerate(zip(state.mbars, new.mbars, strict=True)))


__all__ = ["ENABLED", "InitAlone"]
