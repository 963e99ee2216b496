"""Processes and their compiled programs.

Each warp of each CTA is a process (design §3): warps of one role are not in
lockstep. A warp split between roles (a `thread` role) becomes one process per
part. Each process runs the whole protocol body; everything that depends only
on who it is (role, instance, CTA rank) is decided here, at compile time, so
the engine only evaluates what depends on loop variables.

The body compiles to a flat list of instructions. Local control flow (`let`,
`for`, `if` on loop variables) never needs a search step of its own: the engine
runs it eagerly after each visible step, which is sound because it touches no
shared object and commutes with every other process's steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..diagnostics import InputError, make
from ..expr import Context, EvalError, evaluate, free_names


@dataclass(frozen=True, slots=True)
class Process:
    index: int
    cta: int
    warp: int
    lo: int  # first thread (CTA-relative)
    hi: int  # one past the last thread
    role: str | None
    instance: int

    @property
    def nthreads(self) -> int:
        return self.hi - self.lo

    @property
    def whole_warp(self) -> bool:
        return self.lo == self.warp * 32 and self.hi == self.warp * 32 + 32

    def label(self) -> str:
        who = self.role or "cta"
        if self.role is not None and self.instance >= 0:
            who = f"{who}[{self.instance}]"
        return f"{who}.w{self.warp}" if self.whole_warp else f"{who}.t{self.lo}-{self.hi - 1}"


# Instruction kinds (small ints: the engine dispatches on them).
OP, LET, FOR_INIT, FOR_NEXT, BRANCH, JUMP, BAR_WAIT, END = range(8)


@dataclass(frozen=True, slots=True)
class Instr:
    kind: int
    op: ir.Op | None = None
    # OP: how many threads execute it and whether only the leader lane does
    threads: int = 0
    leader_only: bool = False
    # LET / FOR: variable slot; FOR_INIT/BRANCH/JUMP/FOR_NEXT: jump target
    slot: int = -1
    expr: ir.Expr | None = None
    expr2: ir.Expr | None = None
    target: int = -1
    line: int = 0
    loop_var: str = ""


@dataclass(frozen=True, slots=True)
class Program:
    process: Process
    code: tuple[Instr, ...]
    var_names: tuple[str, ...]
    loop_slots: tuple[int, ...]  # slots of `for` variables, innermost last (for trace iteration labels)
    loops_at: tuple[tuple[int, ...], ...] = ()  # per pc: slots of the loops enclosing it, outermost first


class _Compiler:
    def __init__(self, protocol: ir.Protocol, proc: Process):
        self.protocol = protocol
        self.proc = proc
        self.ctx = Context(proc.cta, max(proc.instance, 0), frozenset({proc.role} if proc.role else ()))
        self.code: list[Instr] = []
        self.slots: dict[str, int] = {}
        self.loop_slots: list[int] = []

    def slot(self, name: str) -> int:
        if name not in self.slots:
            self.slots[name] = len(self.slots)
        return self.slots[name]

    def static_value(self, expr: ir.Expr) -> int | None:
        """The value of an expression that depends only on who executes it, else None."""
        if any(n not in ("cta", "instance") and not n.startswith("role:") for n in free_names(expr)):
            return None
        try:
            return evaluate(expr, {}, self.ctx)
        except EvalError as err:
            raise InputError([make("SV115", f"cannot evaluate for {self.proc.label()} in CTA {self.proc.cta}: {err}",
                                   err.expr.span)]) from None

    def elected(self, stmt: ir.Elect) -> bool:
        """Does this process hold the thread that runs the block's body?

        This is the one definition of who runs `elect` / `first thread`; every engine, the
        Promela exporter and the CUDA emitter take it from the compiled programs.

        `elect` is `elect.sync` with a full mask: each warp that reaches it elects one of its
        lanes, so every whole-warp process runs the body on one lane (lane 0, see
        docs/model.md). A process that is only part of a warp cannot run it: `elect.sync`
        waits for every lane of its mask, and the other part of the warp is another process
        that need not reach the same instruction (PTX leaves that undefined), so it is refused.
        `first thread` is one thread of the role instance (of the CTA without a role guard).
        """
        if stmt.per_warp:
            if not self.proc.whole_warp:
                raise InputError([make("SV116", f"`elect` reached by {self.proc.label()}, which covers only part "
                                       "of a warp: `elect.sync` with a full mask needs every lane of the warp; "
                                       "use `first thread` for one thread of the role", stmt.span)])
            return True
        if stmt.role is not None and self.proc.role != stmt.role:
            return False
        instance = max(self.proc.instance, 0) if stmt.role is not None else 0
        return self.proc.lo == first_threads(self.protocol, stmt)[instance]

    def block(self, stmts: tuple[ir.Stmt, ...], leader_only: bool) -> None:
        for s in stmts:
            self.stmt(s, leader_only)

    def stmt(self, s: ir.Stmt, leader_only: bool) -> None:
        line = s.span.line
        if isinstance(s, ir.Let):
            self.code.append(Instr(LET, slot=self.slot(s.name), expr=s.value, line=line))
        elif isinstance(s, ir.For):
            slot = self.slot(s.var)
            init = len(self.code)
            self.code.append(Instr(FOR_INIT, slot=slot, expr=s.lo, expr2=s.hi, line=line, loop_var=s.var))
            new_slot = slot not in self.loop_slots
            if new_slot:
                self.loop_slots.append(slot)
            self.block(s.body, leader_only)
            if not any(ins.kind in (OP, BAR_WAIT) for ins in self.code[init + 1:]):
                # No operation of this process in the loop: it has no visible effect. Compiled away,
                # because local control flow runs eagerly inside one search step, where a bound
                # like 2^40 would spin out of reach of every budget.
                del self.code[init:]
                if new_slot:
                    self.loop_slots.remove(slot)
                return
            self.code.append(Instr(FOR_NEXT, slot=slot, expr2=s.hi, target=init + 1, line=line, loop_var=s.var))
            self.code[init] = Instr(FOR_INIT, slot=slot, expr=s.lo, expr2=s.hi, target=len(self.code), line=line,
                                    loop_var=s.var)
        elif isinstance(s, ir.If):
            value = self.static_value(s.cond)
            if value is not None:
                self.block(s.then if value else s.orelse, leader_only)
                return
            branch = len(self.code)
            self.code.append(Instr(BRANCH))
            self.block(s.then, leader_only)
            if s.orelse:
                jump = len(self.code)
                self.code.append(Instr(JUMP))
                self.code[branch] = Instr(BRANCH, expr=s.cond, target=len(self.code), line=line)
                self.block(s.orelse, leader_only)
                self.code[jump] = Instr(JUMP, target=len(self.code), line=line)
            else:
                self.code[branch] = Instr(BRANCH, expr=s.cond, target=len(self.code), line=line)
        elif isinstance(s, ir.Elect):
            if self.elected(s):
                self.block(s.body, True)
        else:
            self.op(s, leader_only)

    def op(self, op: ir.Op, leader_only: bool) -> None:
        threads = 1 if leader_only else self.proc.nthreads
        line = op.span.line
        if isinstance(op, ir.BarSync | ir.BarArrive | ir.ClusterArrive | ir.ClusterWait) and not self.proc.whole_warp:
            # PTX counts barrier arrivals per warp ("marks warps' arrival"); what a warp split
            # between roles does there is not specified, so we refuse rather than guess.
            raise InputError([make("SV116", f"`{type(op).__name__}` executed by {self.proc.label()}, which covers "
                                   "only part of a warp: barrier arrival is per warp and is not modelled for "
                                   "split warps", op.span)])
        self.code.append(Instr(OP, op=op, threads=threads, leader_only=leader_only or threads == 1, line=line))
        if isinstance(op, ir.BarSync):
            self.code.append(Instr(BAR_WAIT, op=op, line=line))


def first_threads(protocol: ir.Protocol, stmt: ir.Elect) -> tuple[int, ...]:
    """The CTA-relative thread that runs a `first thread` block, per instance of its guarding
    role: the first thread of each instance, or thread 0 of the CTA without a role guard.
    The CUDA emitter writes its thread-index test from this too."""
    if stmt.role is None:
        return (0,)
    return tuple(lo for lo, _ in protocol.role(stmt.role).instances)


def processes(protocol: ir.Protocol) -> list[Process]:
    """Every process of the kernel: per CTA, per warp, per role segment of the warp."""
    owner: dict[int, tuple[str, int]] = {}
    for role in protocol.roles:
        for i, (lo, hi) in enumerate(role.instances):
            for t in range(lo, hi):
                owner[t] = (role.name, i if role.array else -1)
    procs: list[Process] = []
    for cta in range(protocol.cluster):
        for warp in range(protocol.warps):
            start = warp * 32
            seg_start = start
            for t in range(start, start + 33):
                end_of_seg = t == start + 32 or owner.get(t) != owner.get(seg_start)
                if end_of_seg:
                    role, inst = owner.get(seg_start, (None, -1))
                    procs.append(Process(len(procs), cta, warp, seg_start, t, role, inst))
                    seg_start = t
    return procs


def compile_program(protocol: ir.Protocol, proc: Process) -> Program:
    comp = _Compiler(protocol, proc)
    comp.block(protocol.body, False)
    comp.code.append(Instr(END, line=protocol.span.end_line))
    loops_at: list[list[int]] = [[] for _ in comp.code]
    for pc, ins in enumerate(comp.code):
        if ins.kind == FOR_INIT:
            for inner in range(pc + 1, ins.target):
                loops_at[inner].append(ins.slot)
    return Program(proc, tuple(comp.code), tuple(comp.slots), tuple(comp.loop_slots),
                   tuple(tuple(x) for x in loops_at))
