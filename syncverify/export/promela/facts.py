"""What the export knows before it writes a line: one run of every process.

A process's control flow depends only on its own loop variables, so one run of each process visits
every operation instance it can execute, with the values of its expressions there: the run proves
indices, ranks and counts in range (refusing, with the check's code, what `syncverify check` would
report), sizes the record arrays and the waiter slots, and bounds SPIN's search depth. Each family
module reads its own operations (its ``FACTS``, by operation type); what the model does not have at
all (a `syncwarp` of a split warp, non-bulk `cp.async` and `test_wait`, a bulk store group of
several lanes) is refused here, before them. A room of its own: it runs before the model is
written and decides whether it can be.
"""

from __future__ import annotations

from collections.abc import Iterator

from ... import ir
from ...expr import Context, EvalError, evaluate
from ...semantics.machine import Violation
from ...semantics.program import END, OP
from ...semantics.state import LEADER
from .async_agents import FACTS as ASYNC_FACTS
from .barriers import FACTS as BARRIER_FACTS
from .base import INT_LIMIT, ExportError, _Facts
from .mbarrier import FACTS as MBARRIER_FACTS
from .memory import FACTS as MEMORY_FACTS
from .tcgen05 import FACTS as TCGEN05_FACTS


class FactsExport:
    """The run of every process (a mixin of the exporter)."""

    def _dry_run(self) -> _Facts:
        m = self.machine
        facts = _Facts()
        for p in self.live:
            pc, vars_ = self.init_procs[p][0], self.init_procs[p][1]
            code = m.programs[p].code
            steps = 0
            while code[pc].kind != END:
                ins = code[pc]
                if ins.kind == OP:
                    self._visit(facts, p, ins, m.env(p, vars_))
                steps += 1
                facts.steps += 2 if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) else 1
                if steps > 1_000_000:
                    raise ExportError(f"{m.proc_label(p)} runs more than a million operations; too large to export")
                try:
                    pc, vars_ = m._run_local(p, pc + 1, vars_)
                except Violation as v:
                    raise ExportError(f"{v.code}: {v.message}") from None
            facts.steps += 1  # the step that ends the process
        facts.steps += sum(k.copies for k in facts.keys.values())  # every copy completes once
        return facts

    def _val(self, e: ir.Expr | None, p: int, env: dict, what: str = "") -> int:
        """Evaluate as the engine will, and check every sub-expression fits a Promela int."""
        if e is None:
            return 0
        ctx = self.machine.ctx[p]
        for sub in _evaluated(e, env, ctx):
            try:
                v = evaluate(sub, env, ctx)
            except EvalError as err:
                raise ExportError(f"line {e.span.line}: {what or 'expression'} cannot be evaluated: {err}") from None
            if abs(v) > INT_LIMIT:
                raise ExportError(f"line {e.span.line}: value {v} does not fit a 32-bit Promela int")
        return evaluate(e, env, ctx)

    def _refuse(self, code: str, line: int, msg: str) -> ExportError:
        return ExportError(f"line {line}: {code}: {msg} (`syncverify check` reports this; the export needs a "
                           "protocol free of it)")

    def _visit(self, facts: _Facts, p: int, ins, env: dict) -> None:
        op = ins.op
        proc = self.machine.procs[p]
        line = op.span.line
        if isinstance(op, ir.Syncwarp) and p in self.machine.warp_parts:
            raise ExportError(f"line {line}: `syncwarp` by part of a warp split between roles (its parts meet, a "
                              "rendezvous the model does not have)")
        if isinstance(op, ir.MbarProbe):
            raise ExportError(f"line {line}: a branch on a probe's result (`if try_wait`/`if test_wait`) is not "
                              "exported: each Promela process runs one fixed sequence of operations")
        if isinstance(op, ir.CpAsync | ir.CpAsyncArrive | ir.MbarTestWait) or (
                isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "cp_async"):
            raise ExportError(f"line {line}: non-bulk cp.async (with its groups and mbarrier arrive) and test_wait "
                              "are not exported")
        if (isinstance(op, ir.TmaStore) or (isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "bulk")) \
                and self.machine._part(p, ins) != LEADER and proc.lane_mask & (proc.lane_mask - 1):
            # one bulk copy per lane, each retired by its own lane's wait (Machine.op_group_wait, F_LANEWISE):
            # the model's group_wait lets every lane learn them all
            raise ExportError(f"line {line}: a bulk store group of several lanes (one copy per lane, retired lane "
                              "by lane) is not exported; issue it under `elect`")

        part = self.who(p, ins)[0]
        visit = _FACTS.get(type(op))
        if visit is not None:
            visit(self, facts, p, proc, op, ins, env, line, part)

    def _mb_index(self, ref: ir.Ref, p: int, env: dict, line: int) -> None:
        """An mbarrier index in range for its declaration (SV104)."""
        decl = self.protocol.mbarrier(ref.name)
        if ref.index is not None and not ref.every:
            idx = self._val(ref.index, p, env, "barrier index")
            if not 0 <= idx < (decl.size or 1):
                raise self._refuse("SV104", line, f"index {idx} out of range for `{ref.name}`")

    def _target(self, remote: ir.Expr | None, p: int, env: dict, line: int) -> int:
        """The CTA an operation by ``p`` targets: its own, or a rank in the cluster (SV405)."""
        proc = self.machine.procs[p]
        if remote is None:
            return proc.cta
        cta = self._val(remote, p, env, "CTA rank")
        if not 0 <= cta < self.ncta:
            raise self._refuse("SV405", line, f"remote rank {cta} outside the cluster")
        return cta

    def _key(self, ref: ir.Ref, cta: int, p: int, env: dict, line: int) -> int:
        """The model's index of a buffer slot of CTA ``cta`` (cta-major, declaration order); SV104
        for an index out of range."""
        decl = self.protocol.buffer(ref.name)
        slot = 0
        if ref.index is not None:
            slot = self._val(ref.index, p, env, "slot index")
            if not 0 <= slot < (decl.slots or 1):
                raise self._refuse("SV104", line, f"index {slot} out of range for `{ref.name}`")
        return cta * self.spc + self.buf_off[ref.name] + slot

    def _mask_ctas(self, expr: ir.Expr, p: int, env: dict, line: int) -> list[int]:
        """The CTAs a multicast mask names, all in the cluster (SV405)."""
        mask = self._val(expr, p, env, "multicast mask")
        if mask <= 0 or mask >= 1 << self.ncta:
            raise self._refuse("SV405", line, f"multicast mask {mask:#b} outside the cluster")
        return [c for c in range(self.ncta) if mask >> c & 1]

    def max_depth(self) -> int:
        """Every step of every process and copy once, plus creating the processes and the monitor."""
        return self.facts.steps + 2 * len(self.live) + len(self.facts.keys) + 16


def _evaluated(e: ir.Expr, env: dict, ctx: Context) -> Iterator[ir.Expr]:
    """The sub-expressions that evaluating e evaluates: of a conditional, the branch taken only."""
    if isinstance(e, ir.Cond):
        yield e
        yield from _evaluated(e.cond, env, ctx)
        try:
            taken = e.then if evaluate(e.cond, env, ctx) else e.orelse
        except EvalError:
            return  # the condition's own error is reported first
        yield from _evaluated(taken, env, ctx)
        return
    yield e
    children: tuple[ir.Expr, ...] = ()
    if isinstance(e, ir.UnOp):
        children = (e.operand,)
    elif isinstance(e, ir.BinOp):
        children = (e.left, e.right)
    elif isinstance(e, ir.Pick):
        children = (e.index,)
    for sub in children:
        yield from _evaluated(sub, env, ctx)


_FACTS = {**MBARRIER_FACTS, **BARRIER_FACTS, **MEMORY_FACTS, **ASYNC_FACTS, **TCGEN05_FACTS}
