"""A persistent set of one CTA's steps: CTAs that meet only through global memory cost a sum, not a
product.

Where no single step may be taken alone (successors.py), the reduction used to explore every
enabled step. On a grid whose CTAs interact only through global memory (flags, atomics, global
buffers: CUTLASS's stream-K GEMM), that is the product of the CTAs' pipelines, although each CTA's
mainloop touches nothing any other CTA can touch. This rule explores, instead, the enabled steps T of
the processes of one CTA c that are *held*, with the landings of c's copies, when

* the machine has at least two CTAs, no loop hook, and no program has an operation that reaches
  another CTA's objects (a remote access or arrive, a multicast or 2-SM copy, commit or mma, a
  cluster-barrier operation, a `shared::cluster` proxy fence): then no process of another CTA can
  ever touch c's shared memory, mbarriers, named barriers or processes (a static table: the whole
  program, an over-approximation of the rest of it from any pc);
* the processes of c that are *free* — those that stand at an operation that is not of c's own
  objects (``local_op``: a global access, a flag operation, a `.gpu`/`.cluster`/`.sys` thread fence
  or any `fence.sc`, `grid.sync`, a tensor-map or tcgen05 operation...), and, to a fixpoint, those
  whose current operation touches an object that a free process may still touch (``ahead``: every
  object of every operation from its pc to its end; an exit touches the CTA's all-thread named
  barriers, ``_exits``) — may still touch nothing that a step of T touches: then every step a free
  process can take before T is independent of T, and a held process cannot move before T (its step
  is in T, or it waits on an object only T or a held process can release);
* every copy in flight issued by or landing in c lands in c's shared memory on c's barrier (a bulk
  copy or a `cp.async.mbarrier.arrive`; tensor-core commits are not counted local);
* T is not empty, and each of its steps breaks no rule (no violation, no soft finding) and changes no
  part of the state that belongs to another CTA, to the grid or to a free process (checked on the
  step's result: the other CTAs' and the free processes' states, the other CTAs' mbarriers and named
  barriers, the cluster barrier, tensor memory, flags and the grid barrier are those of the state
  before it). A held process whose step would bring a process onto a spin on a flag (a write elsewhere
  may be a reset race, SV802, only while a process spins: families/globalmem.py ``_check_reset``), or
  end a process whose exit touches what a free process may (an all-thread named barrier whose
  generation is open or still ahead), is counted free instead, and the split is made again.

Of the CTAs that qualify, the one of lowest index is taken, so that the choice stays with one CTA from
state to state until it no longer qualifies (``STABLE``; the CTA with the fewest steps, which changes
with the state, interleaves the CTAs again along different paths). Why T is persistent, and what it
keeps of every finding, is in docs/model.md ("The search and its reductions", *Steps of one CTA*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from ...expr import Context, EvalError, evaluate
from ...semantics.core import StepResult
from ...semantics.program import BAR_WAIT, END, OP, Instr
from ...semantics.state import AG_CPARRIVE, AG_TMA, P_PC, State
from .element import _successor_pcs

if TYPE_CHECKING:
    from ...semantics.machine import Machine

# The rule on or off (off: the search as before it; tests compare the two)
ENABLED = True
# the qualifying CTA of lowest index (True), or the one with the fewest steps in T (False; measured in
# bench/RESULTS-ptx.md)
STABLE = True

# operations of the executing CTA's own shared memory and barriers, whatever their operands
_OWN_BARRIER_OPS = (ir.MbarInit, ir.MbarInval, ir.MbarWait, ir.MbarTestWait, ir.MbarProbe, ir.CpAsyncArrive,
                    ir.BarSync, ir.BarArrive, ir.Syncwarp, ir.GroupCommit, ir.GroupWait)


def reaches_peer(op: object) -> bool:
    """Can this operation touch another CTA's objects (shared memory, barriers, tensor memory)? A
    remote access or arrive, a multicast or 2-SM copy, commit, mma or allocation, a cluster-barrier
    operation, a proxy fence over the cluster's shared memory."""
    if isinstance(op, ir.ClusterArrive | ir.ClusterWait):
        return True
    if getattr(op, "remote", None) is not None or getattr(op, "multicast", None) is not None:
        return True
    if getattr(op, "cta_group", 1) != 1:
        return True
    return isinstance(op, ir.Fence) and op.space == "shared::cluster"


def local_op(machine: Machine, ins: Instr) -> bool:
    """Does this instruction touch only the executing CTA's own objects? Anything not known to be is
    not (module docstring)."""
    if ins.kind != OP:
        return False
    op = ins.op
    if reaches_peer(op):
        return False
    if isinstance(op, _OWN_BARRIER_OPS):
        return True
    if isinstance(op, ir.MbarArrive | ir.MbarTx):
        return op.remote is None
    if isinstance(op, ir.Access | ir.WgmmaRead | ir.TmaStore | ir.CpAsync):
        return machine.protocol.buffer(op.buf.name).space == "shared" and getattr(op, "remote", None) is None
    if isinstance(op, ir.TmaLoad):
        return (machine.protocol.buffer(op.buf.name).space == "shared" and op.tmap is None and not op.clc)
    if isinstance(op, ir.Fence):
        return op.kind == "mbarrier_init" or op.space == "shared::cta"
    if isinstance(op, ir.ThreadFence):
        return op.scope == "cta" and op.sem == "acq_rel"
    return False


_IN_T, _NO, _FREE = 0, 1, 2  # what _keeps_to says of a step


def _spins_on_flag(ins: Instr) -> bool:
    return ins.kind == OP and isinstance(ins.op, ir.FlagOp) and ins.op.kind == "wait"


# An object of a CTA that a step may touch: (kind, name, index), index None for every element; ANY for an
# operation whose objects are not worked out here (it touches everything).
Key = tuple[str, str, "int | None"]
ANY: Key = ("*", "", None)
# An exit: it may complete the open generation of an all-thread named barrier of its CTA (lifecycle.py
# ``_exit``), so it touches those that are open or that a process of the CTA may still arrive at (Objects)
EXIT: Key = ("exit", "", None)


def _index(expr: ir.Expr | None, ctx: Context) -> int | None:
    """An index evaluated in the process's context alone; None where it reads a loop or `let` variable."""
    if expr is None:
        return 0
    try:
        return evaluate(expr, {}, ctx)
    except EvalError:
        return None


def _ref(kind: str, ref: ir.Ref, ctx: Context) -> Key:
    return (kind, ref.name, None if ref.every else _index(ref.index, ctx))


def op_keys(machine: Machine, p: int, op: object) -> frozenset[Key]:
    """The objects of process p's CTA that this operation touches (over-approximated; ANY where not
    known). A fence, thread fence, flag operation or `grid.sync` touches none: what it changes of the
    CTA is its own process's knowledge (release, acquire and fence bits), or objects of the grid."""
    ctx = machine.ctx[p]
    if isinstance(op, ir.Access | ir.WgmmaRead | ir.TmaStore | ir.CpAsync):
        return frozenset({_ref("buf", op.buf, ctx)})
    if isinstance(op, ir.TmaLoad):
        return frozenset({_ref("buf", op.buf, ctx), _ref("mb", op.bar, ctx)})
    if isinstance(op, ir.MbarInit | ir.MbarInval | ir.MbarWait | ir.MbarTestWait | ir.MbarProbe | ir.MbarArrive
                  | ir.MbarTx | ir.CpAsyncArrive):
        if machine.protocol.mbarrier(op.bar.name).storage is not None:
            return frozenset({ANY})  # its bytes lie in a buffer (families/storage.py)
        return frozenset({_ref("mb", op.bar, ctx)})
    if isinstance(op, ir.BarSync | ir.BarArrive):
        bar_id = _index(op.bar_id, ctx)
        return frozenset({("nb", "", bar_id)})
    if isinstance(op, ir.Syncwarp):
        return frozenset({("warp", "", machine.procs[p].warp)})
    if isinstance(op, ir.GroupCommit | ir.GroupWait):
        return machine.__dict__.setdefault("_cta_local_async", {}).get(p) or _async_buffers(machine, p)
    if isinstance(op, ir.Fence):
        return frozenset({ANY}) if op.kind == "mbarrier_init" else frozenset()
    if isinstance(op, ir.ThreadFence | ir.FlagOp | ir.GridSync | ir.TensormapReplace | ir.TensormapFence):
        return frozenset()
    return frozenset({ANY})


def _async_buffers(machine: Machine, p: int) -> frozenset[Key]:
    """The buffers whose records a group commit or wait of process p may change: those its program reads
    or writes asynchronously (its groups' reads and copies)."""
    out = frozenset(_ref("buf", ins.op.buf, machine.ctx[p]) for ins in machine.programs[p].code
                    if ins.kind == OP and isinstance(ins.op, ir.WgmmaRead | ir.TmaStore | ir.CpAsync | ir.TmaLoad))
    machine.__dict__.setdefault("_cta_local_async", {})[p] = out or frozenset({("buf", "", -1)})
    return machine.__dict__["_cta_local_async"][p]


class Objects:
    """A set of Keys, asked whether it meets another key (an index None meets every index). ``exits``:
    what an exit touches in the state at hand (EXIT stands for them)."""

    def __init__(self, exits: frozenset[Key] = frozenset()) -> None:
        self.any = False
        self.exits = exits
        self.by_name: dict[tuple[str, str], set[int | None]] = {}

    def add(self, keys: frozenset[Key]) -> None:
        for kind, name, i in keys:
            if kind == "*":
                self.any = True
            elif kind == "exit":
                self.add(self.exits)
            else:
                self.by_name.setdefault((kind, name), set()).add(i)

    def meets(self, keys: frozenset[Key]) -> bool:
        for kind, name, i in keys:
            if kind == "exit":
                if self.meets(self.exits):
                    return True
                continue
            if kind == "*":
                if self.any or self.by_name:
                    return True
                continue
            if self.any:
                return True
            got = self.by_name.get((kind, name))
            if got and (i is None or None in got or i in got):
                return True
        return False


class CtaLocalSteps:
    """The rule of the module docstring over one machine: its static tables, and ``steps``."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        programs = machine.programs
        self.applies = ENABLED and machine.ncta >= 2 and not any(
            reaches_peer(ins.op) for prog in programs for ins in prog.code if ins.kind == OP)
        # per process and pc: 1 an operation of the CTA's own objects, 2 the end, 3 parked at the wait of a
        # `bar.sync` (its own CTA's named barrier: no step of its own, released by the CTA's arrivals), 0 else
        self.where = [[1 if local_op(machine, ins) else 2 if ins.kind == END else 3 if ins.kind == BAR_WAIT else 0
                       for ins in prog.code] for prog in programs]
        self.spin = [[_spins_on_flag(ins) for ins in prog.code] for prog in programs]
        self.cta_of = [proc.cta for proc in machine.procs]
        self.mbars_of = [[m for m, (c, _, _) in enumerate(machine.mb_names) if c == cta]
                         for cta in range(machine.ncta)]
        self.here: list[list[frozenset[Key]]] = []  # the objects of the operation at each pc
        self.ahead: list[list[frozenset[Key]]] = []  # the objects of every operation from each pc on
        if self.applies:
            self._tables()
        self.stats = [0, 0]  # states where the rule applied, states where it was asked (tests, bench)

    def _tables(self) -> None:
        """``here`` and ``ahead``, and each CTA's all-thread named barriers (``all_thread``)."""
        machine = self.machine
        self.all_thread: list[set[int | None]] = [set() for _ in range(machine.ncta)]
        for p, prog in enumerate(machine.programs):
            for ins in prog.code:
                if ins.kind == OP and isinstance(ins.op, ir.BarSync) and ins.op.count is None:
                    self.all_thread[self.cta_of[p]].add(_index(ins.op.bar_id, machine.ctx[p]))
        for prog_index, prog in enumerate(machine.programs):
            here = [op_keys(machine, prog_index, ins.op) if ins.kind in (OP, BAR_WAIT)
                    else frozenset({EXIT}) if ins.kind == END else frozenset() for ins in prog.code]
            succ = _successor_pcs(prog)
            ahead = list(here)
            changed = True
            while changed:  # backward fixpoint over the control-flow graph, every branch both ways
                changed = False
                for pc in range(len(here) - 1, -1, -1):
                    acc = here[pc].union(*(ahead[t] for t in succ[pc])) if succ[pc] else here[pc]
                    if acc != ahead[pc]:
                        ahead[pc] = acc
                        changed = True
            self.here.append(here)
            self.ahead.append(ahead)

    def _exits(self, state: State, c: int, members: list[int]) -> frozenset[Key]:
        """What an exit of a process of CTA c touches in ``state``: the all-thread named barriers of c
        whose generation is open, or that a process of c that has not ended may still arrive at."""
        ids = self.all_thread[c]
        if not ids:
            return frozenset()
        out: set[Key] = set()
        for i in ids:
            if i is None or state.named[16 * c + i].arrived:
                out.add(("nb", "", i))
        procs = state.procs
        for p in members:
            for key in self.ahead[p][procs[p][P_PC]]:
                if key[0] == "nb" and (key[2] in ids or key[2] is None or None in ids):
                    out.add(key)
        return frozenset(out)

    def steps(self, state: State, tried: dict[int, StepResult | None],
              landed: dict[tuple, StepResult]) -> list[StepResult] | None:
        """The steps T of the qualifying CTA with the fewest of them, or None where no CTA qualifies.
        Steps computed are kept in ``tried`` / ``landed`` for the full expansion."""
        machine = self.machine
        if not self.applies or machine.loop_hook is not None:
            return None
        self.stats[1] += 1
        agent_ctas: dict[int, bool] = {}  # CTA -> are all its copies in flight its own (False: some is not)
        for a in state.agents:
            mine = (a[1], machine.mb_names[a[4]][0], self.cta_of[a[6]])
            own = a[0] in (AG_TMA, AG_CPARRIVE) and mine[0] == mine[1] == mine[2]
            for c in set(mine):
                agent_ctas[c] = agent_ctas.get(c, True) and own
        best: list[StepResult] | None = None
        for c, members in enumerate(machine.procs_of_cta):
            if not agent_ctas.get(c, True):
                continue
            forced: set[int] = set()
            found: list[StepResult] | int | None = None
            while True:
                held, free = self._split(state, members, forced)
                if not held:
                    found = None
                    break
                found = self._cta_steps(state, c, held, free, tried, landed)
                if not isinstance(found, int):
                    break
                forced.add(found)  # a held process whose step may not be in T: counted free, split again
            if found and (best is None or (not STABLE and len(found) < len(best))):
                best = found
                if STABLE:
                    break
        if best is not None:
            self.stats[0] += 1
        return best

    def _split(self, state: State, members: list[int], forced: set[int]) -> tuple[list[int], Objects]:
        """CTA c's held processes, and what its free ones (those of ``forced`` among them) may still touch
        (module docstring)."""
        procs = state.procs
        free_objs = Objects(self._exits(state, self.cta_of[members[0]], members))
        free = [p for p in members if not self.where[p][procs[p][P_PC]] or p in forced]
        rest = [p for p in members if p not in forced and self.where[p][procs[p][P_PC]] not in (0, 2)]
        for p in free:
            free_objs.add(self.ahead[p][procs[p][P_PC]])
        grew = bool(free)
        while grew and rest:
            grew = False
            for p in list(rest):
                if free_objs.meets(self.here[p][procs[p][P_PC]]):
                    rest.remove(p)
                    free_objs.add(self.ahead[p][procs[p][P_PC]])
                    grew = True
        return rest, free_objs

    def _cta_steps(self, state: State, c: int, held: list[int], free: Objects, tried: dict[int, StepResult | None],
                   landed: dict[tuple, StepResult]) -> list[StepResult] | int | None:
        """The enabled steps of CTA c's held processes and of its copies in flight, in the order
        Machine.successors gives them; None where one of them disqualifies the CTA, or the held
        process whose step may not be in T but may be taken as a free one's (``_keeps_to``)."""
        machine = self.machine
        out: list[StepResult] = []
        for p in held:
            if self.where[p][state.procs[p][P_PC]] != 1:
                continue
            res = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
            if res is None:
                continue
            verdict = self._keeps_to(state, res, c, held, free)
            if verdict != _IN_T:
                return p if verdict == _FREE else None
            out.append(res)
            if isinstance(machine.programs[p].code[state.procs[p][P_PC]].op, ir.MbarProbe):
                other = machine.step_probe_false(state, p)
                if other is not None:
                    verdict = self._keeps_to(state, other, c, held, free)
                    if verdict != _IN_T:
                        return p if verdict == _FREE else None
                    out.append(other)
        seen = set()
        for a in state.agents:
            if a[1] != c or a in seen:
                continue
            seen.add(a)
            if not machine._agent_enabled(state, a):
                continue
            _, name, i = machine.mb_names[a[4]]
            if free.meets(frozenset({("mb", name, i), ("buf", machine.protocol.buffers[a[2]].name, a[3])})):
                return None
            res = landed[a] if a in landed else landed.setdefault(a, machine.step_agent(state, a))
            if self._keeps_to(state, res, c, held, free) != _IN_T:
                return None
            out.append(res)
        return out or None

    def _keeps_to(self, state: State, res: StepResult, c: int, held: list[int], free: Objects) -> int:
        """May this step of CTA c be in T (_IN_T)? Not where it breaks a rule or changes the state of
        another CTA, of the grid or of a free process (_NO: the CTA does not qualify). Not either where
        it brings a process to a spin on a flag, or ends a process whose exit touches what a free
        process may (an all-thread named barrier): the process is then counted free (_FREE)."""
        if res.violation is not None or res.soft or res.state is None:
            return _NO
        new = res.state
        mine = set(held)
        verdict = _IN_T
        for q, (a, b) in enumerate(zip(state.procs, new.procs, strict=True)):
            if a is b or a == b:
                continue
            if q not in mine:
                return _NO  # another CTA's process, or a free one of c
            pc = b[P_PC]
            if self.spin[q][pc] or (self.where[q][pc] == 2 and free.meets(self.here[q][pc])):
                verdict = _FREE
        if new.cluster != state.cluster or new.tmem != state.tmem:
            return _NO
        lo, hi = 16 * c, 16 * (c + 1)
        if new.named is not state.named and any(
                a != b for i, (a, b) in enumerate(zip(state.named, new.named, strict=True)) if not lo <= i < hi):
            return _NO
        if new.mbars is not state.mbars:
            own = set(self.mbars_of[c])
            if any(a is not b and m not in own and a != b
                   for m, (a, b) in enumerate(zip(state.mbars, new.mbars, strict=True))):
                return _NO
        if any(a[1] != c for a in set(new.agents) - set(state.agents)):
            return _NO
        return verdict


__all__ = ["ANY", "CtaLocalSteps", "Objects", "local_op", "op_keys", "reaches_peer"]
