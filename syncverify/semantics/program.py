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

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TypeVar

from .. import ir
from ..diagnostics import InputError, Span, make
from ..expr import Context, EvalError, evaluate, free_names
from .state import FULL, LANES, LEADER

_T = TypeVar("_T")


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
    def lane_mask(self) -> int:
        """The lanes of its warp the process covers (bit l: lane l, `threadIdx.x % 32 == l`)."""
        return ((1 << self.nthreads) - 1) << (self.lo - self.warp * 32)

    @property
    def leader_lane(self) -> int:
        """The lane that runs `elect` blocks: the process's first (lane 0 for a whole warp)."""
        return self.lo - self.warp * 32

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
    # OP: the lanes of the warp that execute it (bit l: lane l); see lane_part
    lanes: int = 0
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

    def block(self, stmts: tuple[ir.Stmt, ...], lanes: int) -> None:
        for s in stmts:
            self.stmt(s, lanes)

    def stmt(self, s: ir.Stmt, lanes: int) -> None:
        """Compile one statement run by ``lanes`` (a mask of the warp's lanes) of the process."""
        line = s.span.line
        if isinstance(s, ir.Let) and s.probe is not None:
            if per_lane(s.probe):
                raise InputError([make("SV116", "`lane` in a probe's operands: a try_wait/test_wait whose result "
                                       "is kept is executed by the warp (or its elected lane) as one", s.probe.span)])
            at = len(self.code)
            self.op(s.probe, lanes)  # a token: the step writes the result into the variable (no branch)
            self.code[at] = replace(self.code[at], slot=self.slot(s.name))
            threads = self.code[at].threads
            if isinstance(s.probe, ir.FlagOp) and s.probe.kind == "atom" and threads > 1:
                # a flag's value kept (families/flag_values.py): one value per variable
                raise InputError([make(
                    "SV806", f"`let {s.name} = atom.{s.probe.rmw} …` executed by {threads} threads at once: each "
                    "thread's atomic returns another value, and a variable holds one; put it in `first thread "
                    "{ }` or `elect { }` (as CUDA's `if (threadIdx.x == 0) ticket = atomicInc(…);`) and hand the "
                    "result to the CTA through a flag the others load after a barrier", s.span)])
        elif isinstance(s, ir.Let):
            self.no_lane(s.value, "a `let` value")
            self.code.append(Instr(LET, slot=self.slot(s.name), expr=s.value, line=line))
        elif isinstance(s, ir.For):
            self.no_lane(s.lo, "a loop bound")
            self.no_lane(s.hi, "a loop bound")
            slot = self.slot(s.var)
            init = len(self.code)
            self.code.append(Instr(FOR_INIT, slot=slot, expr=s.lo, expr2=s.hi, line=line, loop_var=s.var))
            new_slot = slot not in self.loop_slots
            if new_slot:
                self.loop_slots.append(slot)
            self.block(s.body, lanes)
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
        elif isinstance(s, ir.If) and s.probe is not None:
            self.probe_if(s, lanes)
        elif isinstance(s, ir.If):
            if "lane" in free_names(s.cond):
                self.lane_guard(s, lanes)
                return
            value = self.static_value(s.cond)
            if value is not None:
                self.block(s.then if value else s.orelse, lanes)
                return
            branch = len(self.code)
            self.code.append(Instr(BRANCH))
            self.block(s.then, lanes)
            if s.orelse:
                jump = len(self.code)
                self.code.append(Instr(JUMP))
                self.code[branch] = Instr(BRANCH, expr=s.cond, target=len(self.code), line=line)
                self.block(s.orelse, lanes)
                self.code[jump] = Instr(JUMP, target=len(self.code), line=line)
            else:
                self.code[branch] = Instr(BRANCH, expr=s.cond, target=len(self.code), line=line)
        elif isinstance(s, ir.Elect):
            if s.per_warp and lanes != self.proc.lane_mask:
                raise InputError([make("SV116", "`elect` inside a lane guard: `elect.sync` with a full mask needs "
                                       "every lane of the warp", s.span)])
            if self.elected(s) and lanes & 1 << self.proc.leader_lane:
                self.block(s.body, 1 << self.proc.leader_lane)
        else:
            self.op(s, lanes)

    def probe_if(self, s: ir.If, lanes: int) -> None:
        """`if try_wait B parity P { then } else { orelse }`: the probe is an operation whose step
        decides the branch (families/mbarrier_probe.py): it goes on at the next instruction when it
        returns true and at its ``target`` when it returns false."""
        probe = s.probe
        assert probe is not None
        wait = probe_then_wait(s)
        if wait is not None:
            self.op(wait, lanes)
            return
        if per_lane(probe):
            raise InputError([make("SV116", "`lane` in a probe's operands: a try_wait/test_wait whose result a "
                                   "branch uses is executed by the warp (or its elected lane) as one", probe.span)])
        at = len(self.code)
        self.op(probe, lanes)
        self.block(s.then, lanes)
        if s.orelse:
            jump = len(self.code)
            self.code.append(Instr(JUMP))
            self.code[at] = replace(self.code[at], target=len(self.code))
            self.block(s.orelse, lanes)
            self.code[jump] = Instr(JUMP, target=len(self.code), line=s.span.line)
        else:
            self.code[at] = replace(self.code[at], target=len(self.code))

    def no_lane(self, expr: ir.Expr, what: str) -> None:
        if "lane" in free_names(expr):
            raise InputError([make("SV116", f"`lane` in {what}: variables are per warp, not per lane; `lane` "
                                   "may be used in a condition or in an operation's operands", expr.span)])

    def lane_guard(self, s: ir.If, lanes: int) -> None:
        """An `if` on the lane id: decided here, per lane, so each branch runs on a known set of
        lanes (warps diverge; nothing is searched). The condition may also use what the process
        is (role, instance, CTA), but no variable: which lanes run a block is fixed per warp."""
        then = 0
        for lane in _bits(lanes):
            value = self.static_value(with_lane(s.cond, lane))
            if value is None:
                raise InputError([make("SV116", "a condition on `lane` may use the lane, the CTA rank, the role "
                                       "and its instance, not variables: which lanes run a block is fixed per "
                                       "warp", s.cond.span)])
            then |= bool(value) << lane
        if then:
            self.block(s.then, then)
        if lanes & ~then:
            self.block(s.orelse, lanes & ~then)

    def op(self, op: ir.Op, lanes: int) -> None:
        if lanes != self.proc.lane_mask and lanes != 1 << self.proc.leader_lane and not isinstance(op, _LANE_OPS) \
                and not is_wgmma(op) and not _lane_bulk_group(op):  # (wgmma by some lanes: SV206)
            raise InputError([make("SV116", f"`{type(op).__name__}` by some lanes of {self.proc.label()}: in a "
                                   "lane guard only data accesses, mbarrier arrivals and tx counts, bulk copies, "
                                   "bulk stores with their bulk groups and fence.proxy.async are modelled (let the "
                                   "whole warp, or its elected lane, wait, sync and run collectives)", op.span)])
        if per_lane(op):
            # an operand that differs per lane: one operation per lane, in lane order (the lanes of
            # a warp are not ordered with one another; their operations reach the objects in some
            # order, and the search covers every order of the other processes' steps around them)
            for lane in _bits(lanes):
                self.emit(with_lane(op, lane), 1 << lane)
        else:
            self.emit(op, lanes)

    def emit(self, op: ir.Op, lanes: int) -> None:
        leader_only = lanes == 1 << self.proc.leader_lane
        threads = lanes.bit_count()
        line = op.span.line
        if isinstance(op, ir.BarSync | ir.BarArrive | ir.ClusterArrive | ir.ClusterWait) and not self.proc.whole_warp:
            # PTX counts barrier arrivals per warp ("marks warps' arrival"); what a warp split
            # between roles does there is not specified, so we refuse rather than guess.
            raise InputError([make("SV116", f"`{type(op).__name__}` executed by {self.proc.label()}, which covers "
                                   "only part of a warp: barrier arrival is per warp and is not modelled for "
                                   "split warps", op.span)])
        self.code.append(Instr(OP, op=op, threads=threads, leader_only=leader_only, line=line, lanes=lanes))
        if isinstance(op, ir.BarSync):
            self.code.append(Instr(BAR_WAIT, op=op, line=line))


# What some (not all) lanes of a warp may run: none of these acquires, waits or is collective, so
# the two knowledge holders of a process (its leader lane, its other lanes) stay exact (lane_part).
_LANE_OPS = (ir.Access, ir.MbarArrive, ir.MbarTx, ir.TmaLoad, ir.Fence)


def _lane_bulk_group(op: ir.Op) -> bool:
    """A bulk store and the bulk async-groups that commit and wait for it, which some lanes may run:
    each thread's groups are its own (families/lane_groups.py), so these acquire nothing for the
    lanes that do not run them."""
    return isinstance(op, ir.TmaStore) or (isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "bulk")


def lane_part(proc: Process, lanes: int) -> tuple[int, bool, bool]:
    """How the lanes ``lanes`` of ``proc`` take part in an operation: (part, leader, others).

    This is the one definition every engine and exporter uses. ``part`` is LEADER when the
    leader lane runs it alone (it touches the whole slot, as an elected lane does), FULL when
    every lane of the process does, and ``LANES + lanes`` for any other set of lanes, which
    touch each its own part of the slot, as the lanes of a whole-warp access do. ``leader``:
    the leader lane is among them; ``others``: some other lane is. A release by lanes that are
    not all of the process publishes what the leader holder knows (when the leader takes part)
    and what the other-lanes holder knows, except the process's own generic accesses by lanes
    that do not all take part in the release (see own_part_hidden): the other-lanes holder
    knows those only as each lane knows its own part."""
    whole = proc.lane_mask
    lanes &= whole
    leader_bit = 1 << proc.leader_lane
    if lanes == leader_bit or proc.nthreads == 1:
        return LEADER, True, False
    if lanes == whole:
        return FULL, True, True
    return LANES + lanes, bool(lanes & leader_bit), bool(lanes & ~leader_bit)


def part_lanes(proc: Process, part: int) -> int:
    """The lanes of ``proc`` that made an access of ``part`` (the inverse of lane_part)."""
    if part == LEADER:
        return 1 << proc.leader_lane
    if part == FULL:
        return proc.lane_mask
    return part - LANES


def own_part_hidden(proc: Process, owner: int, part: int, is_async: bool, releasing: int,
                    synced: bool = False) -> bool:
    """Is a record that ``proc``'s other-lanes holder knows NOT published by a release of the
    lanes ``releasing`` (a partial set)? True for the process's own generic accesses made by some
    lane that does not release: the other-lanes holder knows them as each lane knows its own
    part, so only the lanes that made them can publish them. Everything else the holder knows it
    learnt by an acquire or a group wait, which every lane of it made.

    ``synced``: a `syncwarp` of the process came after the access (PTX bar.warp.sync "also
    guarantee[s] memory ordering among threads participating in barrier"): every lane is then
    ordered after every lane's part of it, so any lane's release publishes it (docs/model.md,
    Lanes). The explicit machine marks such records (state.F_WARPSYNCED); bmc reads it from
    program order."""
    if owner != proc.index or is_async or part == LEADER or synced:
        return False
    return bool(part_lanes(proc, part) & ~releasing)


def lanes_meet_unordered(owner: int, owner_part: int, p: int, part: int) -> bool:
    """Do an earlier generic access of process ``owner`` (by the lanes of ``owner_part``) and a new
    access of ``p`` (``part``) meet as accesses of different lanes of one warp that only a
    `syncwarp` or a barrier of the warp can order?

    The knowledge of a warp is held twice: by its leader lane and by its other lanes together. An
    access by several lanes (`read s`, `if lane < 4 { read s; }`) is each lane's own part of the
    slot, so two of them never meet in other lanes' bytes; an access by one lane alone touches the
    whole slot (or its region), as the leader's does. The leader is kept apart by its own holder;
    but one other lane's access and an access of other lanes (not the same ones) are both known to
    the other-lanes holder from the moment they are made, which says nothing about the lanes that
    did not make them. Under independent thread scheduling those lanes are not ordered: PTX orders
    them by `bar.warp.sync` ("guarantee[s] memory ordering among threads participating in barrier")
    or a barrier, which the engines mark (state.F_LANESYNCED; bmc: a syncwarp or bar.sync of the
    warp between them in program order). An acquire that one lane makes of another lane's release
    inside one warp is not followed here: such a pair is reported (docs/language.md §6.1)."""
    if owner != p or owner_part == part or LEADER in (owner_part, part):
        return False
    return _one_lane(owner_part) or _one_lane(part)


def _one_lane(part: int) -> bool:
    return part >= LANES and (part - LANES).bit_count() == 1


def is_wgmma(op: ir.Op | None) -> bool:
    """wgmma.read, wgmma.commit, wgmma.wait: the warpgroup-collective operations."""
    return isinstance(op, ir.WgmmaRead) or (isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "wgmma")


def wgmma_teams(procs: list[Process], programs: list[Program]) -> list[tuple[int, ...]]:
    """Per process, the processes that share its wgmma-groups: the whole warps of its CTA's
    warpgroup (warps 4k..4k+3) whose programs run wgmma operations, itself included; () for a
    process that runs none.

    wgmma.mma_async is one operation of the warpgroup ("performed collectively by all the
    threads in a warpgroup"), and commit_group / wait_group are `.sync.aligned` over the
    warpgroup: the k-th group each warp commits holds the same operations. So a warp's
    `wgmma.wait_group` that finds group k complete finds every warp's reads in it complete
    (docs/model.md, "Warpgroup-wide wgmma"). This is the one definition the engines, the
    symmetry reduction and the exporters use."""
    runs = [p.whole_warp and any(ins.kind == OP and is_wgmma(ins.op) for ins in prog.code)
            for p, prog in zip(procs, programs, strict=True)]
    teams: dict[tuple[int, int], list[int]] = {}
    for p in procs:
        if runs[p.index]:
            teams.setdefault((p.cta, p.warp // 4), []).append(p.index)
    return [tuple(teams[(p.cta, p.warp // 4)]) if runs[p.index] else () for p in procs]


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _exprs(node: object) -> list[ir.Expr]:
    """Every expression an operation (or reference) holds."""
    out: list[ir.Expr] = []
    for f in fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, ir.Ref):
            out += _exprs(value)
        elif isinstance(value, ir.Const | ir.Var | ir.Builtin | ir.InRole | ir.BinOp | ir.UnOp | ir.Cond | ir.Pick):
            out.append(value)
    return out


def probe_then_wait(s: ir.If) -> ir.MbarWait | None:
    """The wait that `if !try_wait B parity P { wait B parity P; }` is (CUTLASS's `consumer_try_wait`
    then `consumer_wait(stage, phase, token)`, which waits only when the token is false), or None.

    With the same barrier, parity, semantics and scope the two are one wait: a true probe is the
    wait passing (families/mbarrier_probe.py), and a false one is followed by that wait, which passes
    when the phase completes with the same effect; the false probe changes nothing, so the only
    difference is a state where the warp stands between the two, which no other step can tell from
    the one where it stands at the wait. So the pair is compiled as the wait, at the wait's line
    (where a warp that never gets the phase stands), and costs a search what the wait costs."""
    probe = s.probe
    if probe is None or s.then or len(s.orelse) != 1 or not isinstance(s.orelse[0], ir.MbarWait):
        return None
    wait = s.orelse[0]
    same = _unspanned((probe.bar, probe.parity, probe.sem, probe.scope)) == \
        _unspanned((wait.bar, wait.parity, wait.sem, wait.scope))
    return wait if same else None


def _unspanned(node: object) -> object:
    """An IR value without its source spans, to compare what two operands say."""
    if isinstance(node, tuple):
        return tuple(_unspanned(x) for x in node)
    if is_dataclass(node) and not isinstance(node, Span):
        return (type(node).__name__, *(_unspanned(getattr(node, f.name)) for f in fields(node) if f.name != "span"))
    return node


def per_lane(op: ir.Op) -> bool:
    """Does an operand of ``op`` use `lane`? Then every executing lane runs it as an operation of its
    own (``with_lane``), in lane order; the emitter and the replay read the same rule here."""
    return any("lane" in free_names(e) for e in _exprs(op))


def with_lane(node: _T, lane: int) -> _T:
    """``node`` with every `lane` replaced by the lane number: what that lane computes."""
    if isinstance(node, ir.Builtin):
        return ir.Const(lane, node.span) if node.name == "lane" else node  # type: ignore[return-value]
    if not is_dataclass(node) or isinstance(node, Span):
        return node
    changes = {}
    for f in fields(node):
        value = getattr(node, f.name)
        new = with_lane(value, lane) if is_dataclass(value) else value
        if new is not value:
            changes[f.name] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


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
    comp.block(protocol.body, proc.lane_mask)
    comp.code.append(Instr(END, line=protocol.span.end_line))
    loops_at: list[list[int]] = [[] for _ in comp.code]
    for pc, ins in enumerate(comp.code):
        if ins.kind == FOR_INIT:
            for inner in range(pc + 1, ins.target):
                loops_at[inner].append(ins.slot)
    return Program(proc, tuple(comp.code), tuple(comp.slots), tuple(comp.loop_slots),
                   tuple(tuple(x) for x in loops_at))
