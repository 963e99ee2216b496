"""The operational semantics: initial state and successor function of a protocol.

One step is one atomic action of one process (a warp executing one operation)
or of one asynchronous agent (a bulk copy completing, a tensor-core commit
arriving). Barrier arithmetic comes from ``rules``; this module adds who
executes what, the happens-before knowledge, and the checks that turn
undefined behaviour into diagnostics (raised as ``Violation``).

Where PTX is silent we fail closed and say so in a comment marked
``UNSPECIFIED``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from .. import ir
from ..expr import Context, EvalError, evaluate
from . import rules
from .core import (
    _MEMO_LIMIT,
    PLACED,
    STAY,
    BudgetExceeded,
    ModelBound,
    StepResult,
    Violation,
    _detached,
    _Env,
    _Work,
)
from .families.async_agents import HANDLERS as ASYNC_HANDLERS
from .families.async_agents import TMEM_COLUMNS, UNCOMMITTED, AsyncAgentOps
from .families.async_operands import HANDLERS as OPERAND_HANDLERS
from .families.async_operands import RegisterOps
from .families.barriers import HANDLERS as BARRIER_HANDLERS
from .families.barriers import BarrierOps
from .families.copy_causality import CopyCausalityOps
from .families.cp_async import HANDLERS as CP_ASYNC_HANDLERS
from .families.cp_async import CpAsyncOps
from .families.flag_values import FlagValueOps, check_flag_values
from .families.globalmem import GLOBAL_CTA, GlobalMemOps
from .families.globalmem import HANDLERS as GLOBAL_HANDLERS
from .families.lifecycle import LifecycleOps
from .families.mbarrier import HANDLERS as MBARRIER_HANDLERS
from .families.mbarrier import MbarrierOps
from .families.mbarrier_probe import HANDLERS as PROBE_HANDLERS
from .families.mbarrier_probe import ProbeOps
from .families.memory import HANDLERS as MEMORY_HANDLERS
from .families.memory import MemoryOps
from .families.regions import Parts
from .families.storage import StorageOps
from .families.tcgen05 import HANDLERS as TCGEN05_HANDLERS
from .families.tcgen05 import Tcgen05Ops
from .families.tensormap import HANDLERS as TENSORMAP_HANDLERS
from .families.tensormap import TensormapOps
from .families.warp_collective_order import HANDLERS as COLLECTIVE_HANDLERS
from .families.warp_collective_order import WarpCollectiveOps
from .footprint import Footprint
from .hooked_local import decision, run_local_hooked
from .program import (
    BAR_WAIT,
    BRANCH,
    END,
    FOR_INIT,
    FOR_NEXT,
    JUMP,
    LET,
    OP,
    Instr,
    Process,
    Program,
    compile_program,
    lane_part,
    processes,
    wgmma_teams,
)
from .state import (
    FULL,
    LEADER,
    M_EXP,
    M_K,
    M_PEND,
    M_TX,
    M_VALID,
    P_CLTOKEN,
    P_PC,
    P_TOKEN,
    P_VARS,
    SPACE_START,
    WRITE,
    Holders,
    State,
)

__all__ = ['TMEM_COLUMNS', 'UNCOMMITTED', 'Assumptions', 'BudgetExceeded', 'Machine', 'ModelBound', 'StepResult',
           'Violation']


@dataclass(frozen=True)
class Assumptions:
    """Readings of behaviour PTX does not settle that production kernels rely on (§10.8), each
    dropped by `--no-assume`; one, ``relaxed_arrive_publishes_init``, is off unless asked for.

    ``used`` collects the names of the readings a check relied on (a machine adds a name when a
    step took a reading PTX alone would not give), so that the result can say so; every machine
    built from one Assumptions object adds to the same set."""

    tcgen05_commit_in_order: bool = True
    dealloc_blocks: bool = True
    # a tcgen05.commit's arrive-on releases the committing thread's generic accesses (families/tcgen05.py)
    commit_release: bool = True
    # a release/acquire synchronization orders tcgen05 operations across threads without the fence pair:
    # SV608 (a warning) instead of SV603 (families/tcgen05_sync.py)
    sync_orders_tcgen05: bool = True
    # a wgmma.commit/wait by every lane of a warp orders the lanes' earlier generic accesses (a tcgen05.wait the
    # tcgen05.ld/st it completes) as a syncwarp would: SV609 (a warning) at a release by some lanes it lets
    # publish them (families/warp_collective_order.py)
    warp_collective_orders: bool = True
    # a `bulk.commit` and `bulk.wait_read` retire the tensor-map reads of the thread's earlier TMA loads as they
    # retire its bulk stores' source reads (families/tensormap.py; NVIDIA's answer in cutlass#2912)
    bulk_wait_map_reads: bool = True
    # a CTA's exit waits for the source reads of its bulk stores that no `bulk.wait_read` retired (families/
    # lifecycle.py; DeepGEMM's sm90 epilogues rely on it, PTX does not say it, an H100 does it)
    exit_drains_bulk_reads: bool = True
    # off unless asked for (`--assume relaxed-arrive-publishes-init`): a relaxed cluster arrive publishes the
    # arriving lanes' earlier inits as fence.mbarrier_init would (families/barriers.py; the letter is SV402)
    relaxed_arrive_publishes_init: bool = False
    used: set[str] = field(default_factory=set, compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, options: object) -> Assumptions:
        """The readings a check's Options (check.Options) ask for: each field from its Options field
        (options.READINGS), its own default where the options object has none."""
        return cls(**{f.name: getattr(options, _OPTION_OF.get(f.name, f"assume_{f.name}"), f.default)
                      for f in fields(cls) if f.compare})


# the Assumptions field whose Options field is not `assume_` + its name
_OPTION_OF = {"tcgen05_commit_in_order": "assume_tcgen05_commit_order"}


def _plain(label: tuple, step: Callable[..., Any], *args: Any) -> Any:
    return step(*args)


def _or_cut(label: tuple, step: Callable[..., Any], *args: Any) -> Any:
    """``step(*args)``, or the step labelled ``label`` not taken where it goes past the model's bounds."""
    try:
        return step(*args)
    except ModelBound as exc:
        return StepResult(label, None, cut=str(exc))


class Machine(MbarrierOps, ProbeOps, BarrierOps, MemoryOps, AsyncAgentOps, CopyCausalityOps, Tcgen05Ops, CpAsyncOps,
              LifecycleOps, StorageOps, GlobalMemOps, FlagValueOps, RegisterOps, TensormapOps, WarpCollectiveOps,
              Footprint):
    """The transition system of one protocol: what can happen in a state (``successors``), and what
    each step touches (``Footprint``). Which of the steps a search explores is the search's choice
    (engines/reduction/)."""

    def __init__(self, protocol: ir.Protocol, assumptions: Assumptions = Assumptions()):
        self.protocol = protocol
        self.assume = assumptions
        self.procs: list[Process] = processes(protocol)
        check_flag_values(protocol)  # SV806: where a flag's value may be used (families/flag_values.py)
        self.programs: list[Program] = [compile_program(protocol, p) for p in self.procs]
        self.ncta = protocol.cluster
        # mbarrier layout: one global index per (cta, name, element)
        self.mb_index: dict[tuple[int, str, int], int] = {}
        self.mb_decl: dict[str, ir.Mbarrier] = {b.name: b for b in protocol.mbarriers}
        self._wait_targets: dict[tuple, tuple[int, int] | bool] = {}  # see _wait_target
        self._wait_findings: dict[tuple, tuple] = {}  # (p, pc, vars, barrier) -> see mbar_wait_findings
        # the remote arrives by line, for the SV602 reported at them (ScopeOps._check_cta_scope_data, _unpaired_race)
        self._arrive_spans = {ins.op.span.line: ins.op.span for prog in self.programs for ins in prog.code
                              if isinstance(ins.op, ir.MbarArrive) and ins.op.remote is not None}
        self.mb_names: list[tuple[int, str, int]] = []
        for cta in range(self.ncta):
            for mb in protocol.mbarriers:
                for i in range(mb.size or 1):
                    self.mb_index[(cta, mb.name, i)] = len(self.mb_names)
                    self.mb_names.append((cta, mb.name, i))
        self.buf_index = {b.name: n for n, b in enumerate(protocol.buffers)}
        # tensor maps declared: a copy's completion lands its map read too (families/tensormap.py)
        self.has_tensormaps = any(b.space == "tensormap" for b in protocol.buffers)
        self.holders = Holders(len(self.procs), len(self.mb_names), self.ncta)
        self.parts = Parts(self.procs)  # which part of a slot each process owns (families/regions.py)
        self.ctx = [Context(p.cta, max(p.instance, 0), frozenset({p.role} if p.role else ())) for p in self.procs]
        self.cta_threads = protocol.threads
        self.procs_of_cta = [[p.index for p in self.procs if p.cta == c] for c in range(self.ncta)]
        # the CTAs an operation of process p at (pc, vars) targets: see targets
        self._target_memo: dict[tuple[int, int, tuple], tuple[int, ...] | None] = {}
        self._arrive_bar_memo: dict[tuple[int, int, tuple], int | None] = {}
        # _lanes per process: (whole process, leader alone); a one-thread process is its leader
        self._lane_masks = [(self.holders.leader(p.index) if p.nthreads == 1 else self.holders.proc_mask(p.index),
                             self.holders.leader(p.index)) for p in self.procs]
        # the warps that share each process's wgmma-groups, and all their holders (_wgmma_wait)
        self.wgmma_team = wgmma_teams(self.procs, self.programs)
        self.team_mask = [sum(self.holders.proc_mask(q) for q in team) for team in self.wgmma_team]
        self.teams = sorted({team for team in self.wgmma_team if team})
        self.team_index = [self.teams.index(team) if team else -1 for team in self.wgmma_team]
        # the processes that are parts of one warp split between roles: their syncwarps meet (op_syncwarp)
        self.warp_parts = {p.index: tuple(q.index for q in self.procs if q.cta == p.cta and q.warp == p.warp)
                           for p in self.procs if not p.whole_warp}
        # Loop bounds as the symbolic engine sees them: (process, pc of FOR_INIT/FOR_NEXT, lo, hi,
        # value about to be tested) -> (lo, hi). None (the default) runs the loops as written; the
        # periodicity proof installs a hook that answers the trip-count test for a symbolic ITERS.
        self.loop_hook: Callable[[int, int, int, int, int], tuple[int, int]] | None = None
        # time.monotonic() after which local control flow stops with BudgetExceeded (set by a search)
        self.deadline: float | None = None
        # Local control flow and expression values are functions of (process, pc, variables): the
        # search meets the same ones in many states, so they are remembered (see _run_local, _eval).
        self._local_memo: dict[tuple[int, int, tuple], tuple[int, tuple]] = {}
        # under a loop hook, with the tests each run asked it (semantics/hooked_local.py)
        self._hooked_local_memo: dict[tuple[int, int, tuple], tuple[tuple[int, tuple], tuple]] = {}
        self._hook_log: list | None = None  # the tests of the hooked run being remembered
        self._hooked_future_memo: dict[tuple, tuple] = {}  # future under a loop hook, the same way
        self._envs: dict[tuple[int, tuple], _Env] = {}
        self._evals: dict[tuple[int, tuple[int, tuple]], tuple[ir.Expr, int]] = {}
        # the mbarrier events of each instruction and the next one, by (process, pc, variables): see future
        self._future_memo: dict[tuple, tuple[tuple, tuple | None] | None] = {}
        # the operands of each arrive, by (process, pc, variables): see mbar_arrival_findings
        self._arrival_memo: dict[tuple, tuple | None] = {}
        self._arrival_counts: dict[tuple, object] = {}  # (count, bytes, drop, barrier) -> _arrival_counted
        self._init_global()  # flags, the grid barrier and their knowledge holders (families/globalmem.py)

    # ------------------------------------------------------------------ names
    def mb_label(self, m: int) -> str:
        cta, name, i = self.mb_names[m]
        decl = self.protocol.mbarrier(name)
        idx = f"[{i}]" if decl.size is not None else ""
        return f"{name}{idx}" + (f"@cta{cta}" if self.ncta > 1 else "")

    def slot_label(self, cta: int, buf: int, slot: int) -> str:
        b = self.protocol.buffers[buf]
        idx = f"[{slot}]" if b.slots is not None else ""
        return f"{b.name}{idx}" + (f"@cta{cta}" if self.ncta > 1 and cta != GLOBAL_CTA else "")

    def proc_label(self, p: int) -> str:
        proc = self.procs[p]
        return proc.label() + (f"@cta{proc.cta}" if self.ncta > 1 else "")

    def iteration(self, p: int, vars_: tuple, pc: int) -> str:
        """The loop variables of the loops enclosing pc, e.g. `k=3`."""
        prog = self.programs[p]
        return " ".join(f"{prog.var_names[s]}={vars_[s]}" for s in prog.loops_at[pc])

    # ------------------------------------------------------------------ initial state
    def initial(self) -> State:
        procs = []
        for p, prog in enumerate(self.programs):
            pc, vars_ = self._run_local(p, 0, (0,) * len(prog.var_names))
            procs.append((pc, vars_, -1, -1, 0, 0, 0))
        mbars = [(0, 0, 0, 0, 0, 1, (), 0)] * len(self.mb_names)
        named = [rules.NB_FRESH] * (16 * self.ncta)
        # Each CTA's start is a record its own threads know: peers learn it from a cluster barrier.
        records = []
        for c in range(self.ncta):
            mask = 0
            for p in self.procs_of_cta[c]:
                mask |= self.holders.proc_mask(p)
            records.append((SPACE_START, c, 0, 0, WRITE, -1, FULL, 0, 0, 0, -1, 0, mask, mask))
        # the cta_group 2 rendezvous of each pair, then each CTA's allocated columns (as (columns, 0))
        tmem = [(0, 0)] * (2 * ((self.ncta + 1) // 2) + self.ncta) + self.global_initial()
        state = State(tuple(procs), tuple(mbars), tuple(named), tuple(rules.CB_FRESH), (), tuple(sorted(records)),
                      tuple(tmem))
        return state

    def _run_local(self, p: int, pc: int, vars_: tuple) -> tuple[int, tuple]:
        """Run local control flow (let/for/if) until the next visible instruction.

        Without a loop hook the result depends only on (p, pc, vars_), so it is remembered; a
        hook (the periodicity proof's trip counts) keeps state of its own, so with one installed
        a run is remembered with the tests it asked the hook, and used again only where the hook
        decides them alike (semantics/hooked_local.py). A run that raises (an expression error,
        the time budget) is not remembered."""
        if self.loop_hook is not None:
            return run_local_hooked(self, p, pc, vars_)
        key = (p, pc, vars_)
        out = self._local_memo.get(key)
        if out is None:
            out = self._run_local_code(p, pc, vars_)
            if len(self._local_memo) >= _MEMO_LIMIT:
                self._local_memo.clear()
            self._local_memo[key] = out
        return out

    def _run_local_code(self, p: int, pc: int, vars_: tuple) -> tuple[int, tuple]:
        code = self.programs[p].code
        ctx = self.ctx[p]
        env = None
        spins = 0
        while True:
            ins = code[pc]
            kind = ins.kind
            spins += 1
            if not spins & 0xFFFF and self.deadline is not None and time.monotonic() > self.deadline:
                # a loop whose operations are never reached can run 2^62 rounds inside one step
                raise BudgetExceeded(f"time budget reached in the local control flow of {self.proc_label(p)} "
                                     f"(line {ins.line}: {spins}+ steps of let/for/if without an operation)")
            if kind in (OP, BAR_WAIT, END):
                return pc, vars_
            if env is None:
                env = dict(zip(self.programs[p].var_names, vars_, strict=True))
            if kind == LET:
                value = self._eval(ins.expr, env, ctx)
                vars_ = (*vars_[:ins.slot], value, *vars_[ins.slot + 1:])
                env[self.programs[p].var_names[ins.slot]] = value
                pc += 1
            elif kind == FOR_INIT:
                lo = self._eval(ins.expr, env, ctx)
                hi = self._eval(ins.expr2, env, ctx)
                if self.loop_hook is not None:
                    args = (p, pc, lo, hi, lo)
                    lo, hi = self.loop_hook(*args)
                    if self._hook_log is not None:
                        self._hook_log.append(((True, args), decision(True, args[4], lo, hi)))
                if lo < hi:
                    vars_ = (*vars_[:ins.slot], lo, *vars_[ins.slot + 1:])
                    env[ins.loop_var] = lo
                    pc += 1
                else:
                    pc = ins.target
            elif kind == FOR_NEXT:
                value = vars_[ins.slot] + 1
                hi = self._eval(ins.expr2, env, ctx)
                if self.loop_hook is not None:
                    args = (p, pc, 0, hi, value)
                    hi = self.loop_hook(*args)[1]
                    if self._hook_log is not None:
                        self._hook_log.append(((False, args), decision(False, value, 0, hi)))
                if value < hi:
                    vars_ = (*vars_[:ins.slot], value, *vars_[ins.slot + 1:])
                    env[ins.loop_var] = value
                    pc = ins.target
                else:
                    pc += 1
            elif kind == BRANCH:
                pc = pc + 1 if self._eval(ins.expr, env, ctx) else ins.target
            elif kind == JUMP:
                pc = ins.target

    def _eval(self, expr: ir.Expr, env: dict, ctx: Context) -> int:
        """The value of ``expr``. In an _Env with its own process's context the value is remembered,
        keyed by the expression's identity; the entry holds the expression, so that identity is
        never reused while the entry lives. Errors are not remembered."""
        memo = type(env) is _Env and ctx is self.ctx[env.key[0]]
        if memo:
            key = (id(expr), env.key)
            hit = self._evals.get(key)
            if hit is not None and hit[0] is expr:
                return hit[1]
        try:
            value = evaluate(expr, env, ctx)
        except EvalError as err:
            raise Violation("SV115", f"expression cannot be evaluated: {err}", err.expr.span) from None
        if memo:
            if len(self._evals) >= _MEMO_LIMIT:
                self._evals.clear()
            self._evals[key] = (expr, value)
        return value

    def env(self, p: int, vars_: tuple) -> dict:
        return dict(zip(self.programs[p].var_names, vars_, strict=True))

    def _env_at(self, p: int, vars_: tuple) -> _Env:
        """The variables of process p as the operation handlers read them (shared, remembered)."""
        key = (p, vars_)
        env = self._envs.get(key)
        if env is None:
            env = _Env(zip(self.programs[p].var_names, vars_, strict=True))
            env.key = key
            if len(self._envs) >= _MEMO_LIMIT:
                self._envs.clear()
            self._envs[key] = env
        return env

    # ------------------------------------------------------------------ successors
    def done(self, state: State, p: int) -> bool:
        if self.resident is not None and self.procs[p].cta not in self.resident:
            return True  # never runs in this search (engines/residency.py)
        return self.programs[p].code[state.procs[p][P_PC]].kind == END

    def successors(self, state: State, tried: dict[int, StepResult | None] | None = None,
                   landed: dict[tuple, StepResult] | None = None, cut: bool = False) -> Iterator[StepResult]:
        """Every step enabled in ``state``: the operation of each process that stands at one (unless
        it is blocked), then the completion of each asynchronous agent in flight that can complete
        (equal agents once). ``tried`` (by process) and ``landed`` (by agent): steps the caller has
        already computed in this state, handed out instead of computed again. With ``cut`` a step past
        the model's bounds (ModelBound) is handed out as not taken (``StepResult.cut``) and the others
        still are; without it the exception ends the call."""
        procs = state.procs
        resident = self.resident
        take = _or_cut if cut else _plain
        for p, prog in enumerate(self.programs):
            if prog.code[procs[p][P_PC]].kind != OP:
                continue
            if resident is not None and self.procs[p].cta not in resident:
                continue
            res = tried[p] if tried is not None and p in tried else take(("p", p), self.step_process, state, p)
            if res is not None:
                yield res
                if isinstance(prog.code[procs[p][P_PC]].op, ir.MbarProbe):
                    # the other outcome of a probe whose phase completed: false (families/mbarrier_probe.py)
                    other = take(("p", p, 0), self.step_probe_false, state, p)
                    if other is not None:
                        yield other
            if isinstance(prog.code[procs[p][P_PC]].op, ir.FlagOp):
                # a read of an older write than the latest, its value kept by a `let` where it has one
                # (families/globalmem.py, families/flag_values.py)
                stale = take(("p", p, "r", -1), self.flag_stale_steps, state, p)
                yield from [stale] if isinstance(stale, StepResult) else stale
        seen = set()
        for a in state.agents:
            if a in seen:
                continue
            seen.add(a)
            if not self._agent_enabled(state, a):
                continue
            yield landed[a] if landed is not None and a in landed else take(("a", a), self.step_agent, state, a)

    def step(self, state: State, label: tuple) -> StepResult | None:
        if label[0] == "p":
            if len(label) > 3:  # ("p", p, "r", h): a flag read of an older write (families/globalmem.py)
                return self.step_flag_read(state, label[1], label[3])
            if len(label) > 2:  # ("p", p, 0): a probe that returns false (families/mbarrier_probe.py)
                return self.step_probe_false(state, label[1])
            return self.step_process(state, label[1])
        return self.step_agent(state, label[1])

    def step_process(self, state: State, p: int) -> StepResult | None:
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        if isinstance(ins.op, ir.MbarWait) and self._wait_blocked(state, p, ins, pstate):
            return None
        w = _Work(state)
        label = ("p", p)
        try:
            advanced = self._exec(w, p, ins, pstate)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        if not advanced:
            return None  # blocked
        try:
            pc, vars_ = self._run_local(p, w.procs[p][P_PC], w.procs[p][P_VARS])
            w.procs[p] = (pc, vars_, *w.procs[p][2:])
            if self.programs[p].code[pc].kind == END:
                self._exit(w, p)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft, w.lone)

    # ------------------------------------------------------------------ process operations
    def _exec(self, w: _Work, p: int, ins, pstate: tuple) -> bool:
        """Apply one operation of process p. Returns False if it cannot move (blocked).

        Handlers return True (done: go to the next instruction), False (blocked: no
        step), STAY (a visible effect, but the process stays, e.g. it joined a rendezvous) or
        PLACED (the handler moved the process itself). The pc is advanced here only for True:
        comparing pcs cannot tell "not moved" from "moved around a loop back to this operation"."""
        op = ins.op
        env = self._env_at(p, pstate[P_VARS])
        ctx = self.ctx[p]
        proc = self.procs[p]
        lanes = self._lanes(p, ins)
        handler = _HANDLERS[type(op)]
        moved = handler(self, w, p, proc, op, ins, env, ctx, lanes)
        if moved is STAY or moved is PLACED:
            return True
        if moved:
            pc = w.procs[p][P_PC]
            if pc == pstate[P_PC] and self.programs[p].code[pc].kind == OP:
                w.procs[p] = (pc + 1, *w.procs[p][1:])
        return moved

    def _lanes(self, p: int, ins: Instr) -> int:
        """Holder mask of the lanes executing: the leader alone, the whole process, or for some
        lanes of it (a lane guard) the leader holder if the leader is among them and the
        other-lanes holder if another lane is (program.lane_part)."""
        whole, leader = self._lane_masks[p]
        if ins.leader_only:
            return leader
        proc = self.procs[p]
        if not ins.lanes or ins.lanes == proc.lane_mask:
            return whole
        _, has_leader, others = lane_part(proc, ins.lanes)
        return (leader if has_leader else 0) | (self.holders.lanes(p) if others else 0)

    def _part(self, p: int, ins: Instr) -> int:
        proc = self.procs[p]
        if ins.leader_only or proc.nthreads == 1:
            return LEADER
        return FULL if not ins.lanes or ins.lanes == proc.lane_mask else lane_part(proc, ins.lanes)[0]

    def describe_mbar(self, state: State, m: int) -> str:
        mb = state.mbars[m]
        if not mb[M_VALID]:
            return f"{self.mb_label(m)}: not initialized"
        tx = f" tx {mb[M_TX]}" if mb[M_TX] else ""
        return f"{self.mb_label(m)}: phase {mb[M_K]} pending {mb[M_PEND]}/{mb[M_EXP]}{tx}"

    def blocked_reason(self, state: State, p: int) -> str:
        """What a process that cannot move is waiting for."""
        ps = state.procs[p]
        ins = self.programs[p].code[ps[P_PC]]
        env = self.env(p, ps[P_VARS])
        ctx = self.ctx[p]
        proc = self.procs[p]
        op = ins.op
        line = ins.line
        try:
            reason = self.global_blocked_reason(state, p)
            if reason is not None:
                return reason
            if isinstance(op, ir.MbarWait):
                m = self.mb_index[(proc.cta, op.bar.name, evaluate(op.bar.index, env, ctx) if op.bar.index else 0)]
                parity = evaluate(op.parity, env, ctx) % 2
                return (f"line {line}: wait on {self.mb_label(m)} for parity {parity} — "
                        f"{self.describe_mbar(state, m)}")
            if ins.kind == BAR_WAIT:
                bar_id = evaluate(op.bar_id, env, ctx)
                nb = state.named[proc.cta * 16 + bar_id]
                exp = self._nb_expected(_Work(state), proc.cta, nb)
                return f"line {line}: bar.sync {bar_id} — {nb.arrived} of {exp} threads arrived"
            if isinstance(op, ir.ClusterWait):
                if state.procs[p][P_CLTOKEN] < 0:
                    return f"line {line}: cluster.wait without having arrived (waits on itself)"
                return (f"line {line}: cluster.wait — {state.cluster[1]} of "
                        f"{self._cluster_expected(_Work(state))} threads arrived")
            if isinstance(op, ir.Syncwarp):
                return f"line {line}: syncwarp — the other parts of warp {proc.warp} never reach a syncwarp"
            if isinstance(op, ir.TmemAlloc):
                used = state.tmem[self._tmem_columns_index(proc.cta)][0]
                if not op.dealloc and ps[P_TOKEN] < 0 and used + op.cols > TMEM_COLUMNS:
                    return (f"line {line}: tmem.alloc of {op.cols} columns — {used} of the {TMEM_COLUMNS} "
                            f"tensor-memory columns of CTA {proc.cta} are allocated and never freed")
                return f"line {line}: {'tmem.dealloc' if op.dealloc else 'tmem.alloc'} cta_group 2 — the peer " \
                       "CTA's warp never joins"
        except (EvalError, KeyError):
            pass
        return f"line {line}"



_HANDLERS = {**MBARRIER_HANDLERS, **BARRIER_HANDLERS, **MEMORY_HANDLERS, **ASYNC_HANDLERS, **TCGEN05_HANDLERS,
             **COLLECTIVE_HANDLERS,  # (after them: the collectives wrap wgmma's and tcgen05.wait's handlers)
             **CP_ASYNC_HANDLERS, **GLOBAL_HANDLERS, **PROBE_HANDLERS,
             **OPERAND_HANDLERS,  # (after them: registers first, then shared or global memory's handlers)
             **TENSORMAP_HANDLERS}  # (last: a copy that names a tensor map first, then the copy's family)
