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
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .. import ir
from ..diagnostics import Severity
from ..expr import Context, EvalError, evaluate
from . import rules
from .named_por import lone_named_arrival
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
    own_part_hidden,
    part_lanes,
    processes,
    wgmma_teams,
)
from .state import (
    AG_TMA,
    AG_UMMA,
    F_ASYNC,
    F_INFLIGHT,
    F_REPEAT,
    F_RETIRED,
    F_SUPERSEDED,
    FULL,
    LANES,
    LEADER,
    M_EXP,
    M_JPREV,
    M_K,
    M_OBSERVED,
    M_PEND,
    M_RDATA,
    M_TX,
    M_VALID,
    P_BULK,
    P_CLTOKEN,
    P_PC,
    P_TOKEN,
    P_VARS,
    P_WGMMA,
    R_AKNOWN,
    R_CTA,
    R_EPOCH,
    R_FLAGS,
    R_GRP,
    R_KIND,
    R_KNOWN,
    R_LINE,
    R_OBJ,
    R_OWNER,
    R_PART,
    R_SLOT,
    R_SPACE,
    READ,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    SPACE_START,
    WRITE,
    Holders,
    State,
    acquire,
    carry_obs,
    clear_bits,
    release,
    release_partial,
    shift_phase,
)
from .tx_por import landings_commute

TMEM_COLUMNS = 512  # tensor-memory columns per CTA (PTX tcgen05 "Tensor Memory": 512 columns x 128 lanes)
STAY = 2  # a handler's answer: the state changed, but the process stays at this instruction
# A handler's answer: the handler placed the process itself (bar.sync parks it at the BAR_WAIT
# after it, or its own arrival completed the generation and moved it on). Its pc is final even
# where it equals the one it started at: a loop whose body is only the barrier comes back to it.
PLACED = 3
_MEMO_LIMIT = 1 << 16  # entries a per-machine memo table holds before it starts over


class BudgetExceeded(Exception):
    """A budget ran out inside one step (the search then ends inconclusive, never safe)."""


class Violation(Exception):
    """A step that breaks a rule. ``span`` is the offending operation."""

    def __init__(self, code: str, message: str, span: ir.Span | None = None,
                 related: tuple[tuple[int, str], ...] = (), severity: Severity = Severity.ERROR,
                 procs: tuple[int, ...] = ()):
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
        self.related = related
        self.severity = severity
        self.procs = procs  # other processes involved (e.g. the other side of a race), for trimming traces


def _detached(v: Violation) -> Violation:
    """The finding without the traceback and exception context it was raised with. A kept
    traceback references the frame that holds the exception itself — a reference cycle per
    finding, which the searches (run with the cyclic collector paused) would never free."""
    v.__traceback__ = None
    v.__context__ = None
    v.__cause__ = None
    return v


@dataclass
class StepResult:
    """One step: its label, the state it leads to (None if it ends the path in a violation),
    and findings that do not end the path: warnings, and errors after which the model
    stays well defined (``soft``: a consumption-rule breach, a scope error)."""

    label: tuple
    state: State | None
    violation: Violation | None = None
    warnings: list[Violation] = field(default_factory=list)
    soft: list[Violation] = field(default_factory=list)
    lone: bool = False  # the step may be taken alone (partial-order reduction), decided by its rule


class _Env(dict):
    """The variables of one process at one program point, as the operation handlers read them
    (never written once built). ``key`` = (process, variable values) determines every value
    in it, so an expression evaluated in it with that process's context can be remembered."""

    __slots__ = ("key",)


@dataclass(frozen=True)
class Assumptions:
    """Readings of behaviour PTX does not settle that production kernels rely on (§10.8)."""

    tcgen05_commit_in_order: bool = True
    dealloc_blocks: bool = True


class _Work:
    """A mutable view of one state while a step is being applied."""

    __slots__ = ("agents", "base", "cluster", "lone", "mbars", "named", "procs", "records", "soft", "tmem",
                 "warnings")

    def __init__(self, s: State):
        self.base = s
        self.procs = list(s.procs)
        self.mbars = list(s.mbars)
        self.named = list(s.named)
        self.cluster = s.cluster
        self.agents = list(s.agents)
        self.records = s.records
        self.tmem = list(s.tmem)
        self.warnings: list[Violation] = []
        self.soft: list[Violation] = []
        self.lone = False

    def freeze(self) -> State:
        """The state after the step. Parts the step left unchanged are passed on as the very
        objects of the state before it (the named barriers: nearly always), which the search's
        interning recognizes without hashing them. Built with tuple.__new__, not through
        State's Python-level constructor: this runs on every step."""
        base = self.base
        named = tuple(self.named)
        if named == base.named:  # (element by element, each an identity test when unchanged)
            named = base.named
        agents = self.agents
        return _new_tuple(State, (tuple(self.procs), tuple(self.mbars), named, self.cluster,
                                  tuple(sorted(agents)) if agents else (), tuple(sorted(self.records)),
                                  tuple(self.tmem)))


_new_tuple = tuple.__new__  # tuple.__new__(State, parts): a State without the Python-level constructor


def _key_bounds(w: _Work, key: tuple) -> tuple[int, int]:
    """Where in ``w.records`` the records with (space, cta, obj, slot) = key can be: while the step
    has not changed the records of its state, which are sorted (every State's are), the run of
    that key, found by bisection ((space, cta, obj, slot) sorts before every record that begins
    with it, and (space, cta, obj, slot + 1) after them); otherwise anywhere. Callers still test
    each record's key."""
    records = w.records
    if records is not w.base.records:
        return 0, len(records)
    space, cta, obj, slot = key
    lo = bisect_left(records, key)
    return lo, bisect_left(records, (space, cta, obj, slot + 1), lo)


class Machine:
    """The transition system of one protocol."""

    def __init__(self, protocol: ir.Protocol, assumptions: Assumptions = Assumptions(), reduce: bool = True):
        self.protocol = protocol
        self.reduce = reduce
        self.assume = assumptions
        self.procs: list[Process] = processes(protocol)
        self.programs: list[Program] = [compile_program(protocol, p) for p in self.procs]
        self.ncta = protocol.cluster
        # mbarrier layout: one global index per (cta, name, element)
        self.mb_index: dict[tuple[int, str, int], int] = {}
        self.mb_decl: dict[str, ir.Mbarrier] = {b.name: b for b in protocol.mbarriers}
        self._wait_targets: dict[tuple, tuple[int, int] | bool] = {}  # see _wait_target
        self.mb_names: list[tuple[int, str, int]] = []
        for cta in range(self.ncta):
            for mb in protocol.mbarriers:
                for i in range(mb.size or 1):
                    self.mb_index[(cta, mb.name, i)] = len(self.mb_names)
                    self.mb_names.append((cta, mb.name, i))
        self.buf_index = {b.name: n for n, b in enumerate(protocol.buffers)}
        self.holders = Holders(len(self.procs), len(self.mb_names), self.ncta)
        self.ctx = [Context(p.cta, max(p.instance, 0), frozenset({p.role} if p.role else ())) for p in self.procs]
        self.cta_threads = protocol.threads
        self.procs_of_cta = [[p.index for p in self.procs if p.cta == c] for c in range(self.ncta)]
        self.lifecycle_ahead = [_names_ahead(prog, (ir.MbarInit, ir.MbarInval)) for prog in self.programs]
        self.waits_ahead = [_names_ahead(prog, (ir.MbarWait,)) for prog in self.programs]
        # barriers that bytes can still be counted on (expect/complete_tx, copies, commits)
        self.tx_ahead = [_names_ahead(prog, (ir.MbarTx, ir.TmaLoad, ir.UmmaCommit)) for prog in self.programs]
        self.cluster_wait_ahead = [_must_pass(prog, ir.ClusterWait) for prog in self.programs]
        # Does every cluster arrive of every program have a cluster wait after it on every path
        # to the end? Then no thread can count on the cluster barrier and exit (an exited
        # thread's arrival still counts, so such an exit could complete a generation without
        # a warp that has not arrived): see successors() on taking cluster operations alone.
        # It must come before the warp's next arrive: a warp may arrive again once the generation
        # of its earlier arrival has completed (rules.cb_arrives_twice), so whether a second arrive
        # breaks SV205 depends on the order of other warps' arrivals, which must all be explored.
        waited_before_next = [_must_pass(prog, ir.ClusterWait, ir.ClusterArrive) for prog in self.programs]
        self.cluster_arrivals_waited = all(
            waited_before_next[q][pc + 1] for q, prog in enumerate(self.programs)
            for pc, ins in enumerate(prog.code) if ins.kind == OP and isinstance(ins.op, ir.ClusterArrive))
        # the CTAs an operation of process p at (pc, vars) targets: see _targets
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
        # what successors() needs to know of each instruction for the reduction, fixed by the program
        self._por_class = [[_por_class(ins) for ins in prog.code] for prog in self.programs]
        if not self.cluster_arrivals_waited:  # cluster operations are then never taken alone
            self._por_class = [[_POR_OTHER if c is _POR_CLUSTER else c for c in cs] for cs in self._por_class]
        # the processes that are parts of one warp split between roles: their syncwarps meet (op_syncwarp),
        # so those are not local steps
        self.warp_parts = {p.index: tuple(q.index for q in self.procs if q.cta == p.cta and q.warp == p.warp)
                           for p in self.procs if not p.whole_warp}
        for q in self.warp_parts:
            self._por_class[q] = [_POR_OTHER if ins.kind == OP and isinstance(ins.op, ir.Syncwarp) else c
                                  for ins, c in zip(self.programs[q].code, self._por_class[q], strict=True)]
        # Loop bounds as the symbolic engine sees them: (process, pc of FOR_INIT/FOR_NEXT, lo, hi,
        # value about to be tested) -> (lo, hi). None (the default) runs the loops as written; the
        # periodicity proof installs a hook that answers the trip-count test for a symbolic ITERS.
        self.loop_hook: Callable[[int, int, int, int, int], tuple[int, int]] | None = None
        # time.monotonic() after which local control flow stops with BudgetExceeded (set by a search)
        self.deadline: float | None = None
        # Local control flow and expression values are functions of (process, pc, variables): the
        # search meets the same ones in many states, so they are remembered (see _run_local, _eval).
        self._local_memo: dict[tuple[int, int, tuple], tuple[int, tuple]] = {}
        self._envs: dict[tuple[int, tuple], _Env] = {}
        self._evals: dict[tuple[int, tuple[int, tuple]], tuple[ir.Expr, int]] = {}
        # the mbarrier events of each instruction and the next one, by (process, pc, variables): see _future
        self._future_memo: dict[tuple, tuple[tuple, tuple | None] | None] = {}

    # ------------------------------------------------------------------ names
    def mb_label(self, m: int) -> str:
        cta, name, i = self.mb_names[m]
        decl = self.protocol.mbarrier(name)
        idx = f"[{i}]" if decl.size is not None else ""
        return f"{name}{idx}" + (f"@cta{cta}" if self.ncta > 1 else "")

    def slot_label(self, cta: int, buf: int, slot: int) -> str:
        b = self.protocol.buffers[buf]
        idx = f"[{slot}]" if b.slots is not None else ""
        return f"{b.name}{idx}" + (f"@cta{cta}" if self.ncta > 1 else "")

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
            procs.append((pc, vars_, -1, -1, 0, 0))
        mbars = [(0, 0, 0, 0, 0, 1, (), 0)] * len(self.mb_names)
        named = [rules.NB_FRESH] * (16 * self.ncta)
        # Each CTA's start is a record its own threads know: peers learn it from a cluster barrier.
        records = []
        for c in range(self.ncta):
            mask = 0
            for p in self.procs_of_cta[c]:
                mask |= self.holders.proc_mask(p)
            records.append((SPACE_START, c, 0, 0, WRITE, -1, FULL, 0, 0, 0, -1, mask, mask))
        # the cta_group 2 rendezvous of each pair, then each CTA's allocated columns (as (columns, 0))
        tmem = [(0, 0)] * (2 * ((self.ncta + 1) // 2) + self.ncta)
        state = State(tuple(procs), tuple(mbars), tuple(named), tuple(rules.CB_FRESH), (), tuple(sorted(records)),
                      tuple(tmem))
        return state

    def _run_local(self, p: int, pc: int, vars_: tuple) -> tuple[int, tuple]:
        """Run local control flow (let/for/if) until the next visible instruction.

        Without a loop hook the result depends only on (p, pc, vars_), so it is remembered; a
        hook (the periodicity proof's trip counts) keeps state of its own, so with one installed
        every call runs the code. A run that raises (an expression error, the time budget) is
        not remembered."""
        if self.loop_hook is not None:
            return self._run_local_code(p, pc, vars_)
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
                    lo, hi = self.loop_hook(p, pc, lo, hi, lo)
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
                    hi = self.loop_hook(p, pc, 0, hi, value)[1]
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
        return self.programs[p].code[state.procs[p][P_PC]].kind == END

    def successors(self, state: State) -> Iterator[StepResult]:
        """Every step enabled in ``state`` — or, by partial-order reduction, just one.

        Partial-order reduction: an operation in LOCAL_OPS touches only its own
        process, the records of the slot it accesses and agents it creates. It is
        never blocked, and it commutes with every step of every other process or
        agent: two accesses to one slot that are both enabled are concurrent, so
        if they conflict each order reports the race (records are checked in both
        directions), and if they do not, both orders reach the same state. Such a
        step can therefore be taken alone (a persistent set of size one, [Godefroid
        1996]); since it stays enabled, no deadlock is lost either. Steps that end
        the process (exit has effects on barriers) or that violate a rule are not
        taken alone. The state graph is acyclic (loops are bounded), so the
        cycle proviso holds trivially. Passing mbarrier waits, arrives, operations that
        reach another CTA and cluster-barrier arrives and passing waits are taken alone under
        the conditions their handlers and _lone_reaching_op state (docs/model.md).

        Where none of those applies, three more steps are taken alone when nothing they do not
        commute with can run before them (_can_precede, docs/model.md): a passing wait that
        observes its phase first, an arrive.expect_tx on the CTA's own barrier, a bulk copy's
        landing. Not while some process's step breaks a rule (that violation is then reported
        as it stands, not after other steps that might turn it into another one), and not under
        a loop hook (with a symbolic trip count the processes' sequences are not fixed)."""
        tried: dict[int, StepResult | None] = {}  # steps computed for the reduction, reused below
        procs = state.procs
        landed: dict[tuple, StepResult] = {}  # landings computed for the reduction, reused below
        if self.reduce:
            observing: list[int] = []  # passing waits that observe a phase first: taken alone below, maybe
            arriving: list[int] = []  # arrive.expect_tx: taken alone below, maybe
            naming: list[int] = []  # named-barrier arrivals: taken alone below, maybe
            for p, classes in enumerate(self._por_class):
                cls = classes[procs[p][P_PC]]
                if cls is _POR_LOCAL or cls is _POR_CLUSTER:
                    lone_wait = False
                elif cls is _POR_REACHES:
                    lone_wait = False
                    if not self._lone_reaching_op(state, p):
                        continue
                elif cls is _POR_WAIT:
                    lone_wait = True
                elif cls is _POR_ARRIVE:
                    lone_wait = False
                    if not self._lone_reaching_op(state, p):
                        continue
                else:
                    if cls is _POR_ARRIVE_TX:
                        arriving.append(p)
                    elif cls is _POR_NAMED:
                        naming.append(p)
                    continue
                res = tried[p] = self.step_process(state, p)
                if res is None or res.violation is not None or res.warnings or res.soft or \
                        self.programs[p].code[res.state.procs[p][P_PC]].kind == END:
                    continue
                if lone_wait:
                    if not res.lone:
                        observing.append(p)
                        continue
                    if not self._no_lifecycle_ahead(state, p, self.programs[p].code[procs[p][P_PC]].op.bar.name):
                        continue
                elif cls is _POR_CLUSTER and not res.lone:
                    continue
                if cls is _POR_ARRIVE and self._completes_fresh_phase_before_a_first_wait(state, res, p):
                    continue
                yield res
                return
            if self.loop_hook is None and (observing or arriving or naming or state.agents) and \
                    not self._some_step_breaks_a_rule(state, tried):
                # Steps taken alone when nothing that could come first conflicts with them (_can_precede);
                # not where another process's step breaks a rule: that is reported here, as it stands.
                for p in observing:
                    pstate = procs[p]
                    m = self._wait_targets[(p, pstate[P_PC], pstate[P_VARS])][0]
                    # in phase 0 the wait may pass without observing (a first wait with parity 1): then
                    # nothing may change the phase first; later it observes, and only arrivals conflict
                    forbidden = _ANY_UPDATE if state.mbars[m][M_K] == 0 else _NO_ARRIVAL
                    if self._can_precede(state, m, p, None, forbidden, False) is not None:
                        yield tried[p]  # type: ignore[misc]
                        return
                for p in arriving:
                    m = self._arrive_target(state, p)
                    # the cheap condition first: both are pure, the order only saves work
                    if m is None or not self._landings_commute(state, m, None, p) or \
                            self._can_precede(state, m, p, None, _ANY_UPDATE, False, landings_ok=True) is None:
                        continue
                    res = tried[p] = self.step_process(state, p)
                    if res is not None and res.violation is None and not res.warnings and not res.soft and \
                            self.programs[p].code[res.state.procs[p][P_PC]].kind != END and \
                            not self._completes_fresh_phase_before_a_first_wait(state, res, p):
                        yield res
                        return
                for p in naming:
                    if not lone_named_arrival(self, state, p):
                        continue
                    res = tried[p]
                    if res is not None and res.violation is None and not res.warnings and not res.soft and \
                            self.programs[p].code[res.state.procs[p][P_PC]].kind != END:
                        yield res
                        return
                for a in state.agents:
                    if a[0] != AG_TMA or a in landed or not self._lands_first(state, a):
                        continue
                    res = landed[a] = self.step_agent(state, a)
                    if res.violation is None and not res.warnings and not res.soft:
                        yield res
                        return
        for p, classes in enumerate(self._por_class):
            if classes[procs[p][P_PC]] is _POR_NONE:
                continue
            res = tried[p] if p in tried else self.step_process(state, p)
            if res is not None:
                yield res
        seen = set()
        for a in state.agents:
            if a in seen:
                continue
            seen.add(a)
            if not self._agent_enabled(state, a):
                continue
            yield landed[a] if a in landed else self.step_agent(state, a)

    def _some_step_breaks_a_rule(self, state: State, tried: dict[int, StepResult | None]) -> bool:
        """Does the step of some process break a rule (a violation that ends its path)? The steps
        are computed into ``tried`` (a blocked wait costs a lookup), for the expansion to reuse."""
        procs = state.procs
        for p, classes in enumerate(self._por_class):
            if classes[procs[p][P_PC]] is _POR_NONE:
                continue
            res = tried[p] if p in tried else tried.setdefault(p, self.step_process(state, p))
            if res is not None and res.violation is not None:
                return True
        return False

    def _lone_reaching_op(self, state: State, p: int) -> bool:
        """May this operation, which reaches a barrier or another CTA, be taken alone?

        A plain arrive (on this CTA's barrier or a peer's) commutes with every other
        step except a wait, init or inval of that barrier. Against a wait, taking the
        arrive first reports any violation the other order would (an arrive that
        completes the phase makes a late wait stale, SV501; an arrive before the
        wait that observes the previous phase breaks the consumption rule, SV502)
        and otherwise reaches the same state. A bulk-tensor load or tensor-core
        commit checks that its barriers are usable when issued. Neither commutes
        with an init or inval of the barrier, so these are taken alone only when no
        other process of a target CTA can still reach an init or inval of that
        barrier array.

        An operation on a peer CTA (a remote arrive or access, a multicast copy or
        commit) is also checked against the peer's exit (SV404): taking it first
        would hide the order in which the peer exits before it. So it is taken alone
        only when the peer cannot exit first (_peer_cannot_exit_first)."""
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        targets = self._targets(p, ins.op, pstate[P_PC], pstate[P_VARS])
        if targets is None:
            return False  # not evaluable here: the step reports it, and is not taken alone
        op = ins.op
        own = self.procs[p].cta
        name = op.bar.name if isinstance(op, ir.MbarArrive | ir.TmaLoad | ir.UmmaCommit) else None
        for d in targets:
            if name is not None and not self._no_lifecycle_ahead(state, p, name, d):
                return False
            if d != own and not self._peer_cannot_exit_first(state, p, d):
                return False
        if isinstance(op, ir.MbarArrive) and not self._no_bytes_ahead(state, p, targets[0], op.bar):
            return False
        return True

    def _no_bytes_ahead(self, state: State, p: int, cta: int, bar: ir.Ref) -> bool:
        """Can no other step count bytes or arrive asynchronously on the barrier of an arrive
        before it? An arrive and a copy's landing (or a complete_tx) on one barrier do not
        commute: with the tx-count at 0, the arrive first completes the phase and the bytes
        land in the next one, while the landing first leaves the phase waiting for bytes that
        never come (and a landing in the next phase, unlike an arrive, breaks no consumption
        rule that would report it). So the arrive is taken alone only when nothing in flight
        completes on that barrier and no other process can still count bytes on it."""
        m = self._arrive_target(state, p, cta)
        if m is None:
            return False
        if any(a[4] == m for a in state.agents):
            return False
        return not any(q != p and bar.name in self.tx_ahead[q][state.procs[q][P_PC]]
                       for q in range(len(self.procs)))

    def _arrive_target(self, state: State, p: int, cta: int | None = None) -> int | None:
        """The barrier index of process p's arrive (on ``cta``, default its own CTA), or None when
        it cannot be evaluated (the step reports that). Remembered: it depends only on (p, pc, vars)."""
        pstate = state.procs[p]
        key = (p, pstate[P_PC], pstate[P_VARS])
        if key not in self._arrive_bar_memo:
            bar = self.programs[p].code[pstate[P_PC]].op.bar
            try:
                self._arrive_bar_memo[key] = self._mbar(None, p, bar, self.procs[p].cta if cta is None else cta,
                                                        self.env(p, pstate[P_VARS]), self.ctx[p])
            except Violation:
                self._arrive_bar_memo[key] = None
        return self._arrive_bar_memo[key]

    def _targets(self, p: int, op: ir.Op, pc: int, vars_: tuple) -> tuple[int, ...] | None:
        """The CTAs that an arrive, access, bulk-tensor load or tensor-core commit of process
        p reaches, under its variables (None when they cannot be evaluated or are out of range:
        the step itself reports that). Remembered: it depends only on (p, pc, vars)."""
        key = (p, pc, vars_)
        if key in self._target_memo:
            return self._target_memo[key]
        own = self.procs[p].cta
        out: tuple[int, ...] | None
        try:
            env, ctx = self.env(p, vars_), self.ctx[p]
            if isinstance(op, ir.MbarArrive | ir.Access):
                out = (own,) if op.remote is None else (evaluate(op.remote, env, ctx),)
            elif op.multicast is not None:  # TmaLoad, UmmaCommit
                mask = evaluate(op.multicast, env, ctx)
                out = tuple(c for c in range(self.ncta) if mask >> c & 1)
                if not 0 < mask < 1 << self.ncta:
                    out = None
            else:
                out = (own,)
        except EvalError:
            out = None
        if out is not None and not all(0 <= d < self.ncta for d in out):
            out = None
        self._target_memo[key] = out
        return out

    def _peer_cannot_exit_first(self, state: State, p: int, cta: int) -> bool:
        """Can CTA ``cta`` not exit before process p's next step, whatever the others do?

        True when p has not arrived on the cluster barrier's current generation, and some
        process of that CTA must pass a cluster wait before it can end, for the current
        generation or a later one (it has not arrived yet, or arrived on the current one).
        Such a generation completes only once every thread not yet exited has arrived —
        p's included, and p cannot arrive (or exit) before taking its next step."""
        if state.procs[p][P_CLTOKEN] >= 0:
            return False
        gen = state.cluster[0]
        for q in self.procs_of_cta[cta]:
            qs = state.procs[q]
            if self.cluster_wait_ahead[q][qs[P_PC]] and (qs[P_CLTOKEN] < 0 or qs[P_CLTOKEN] >= gen):
                return True
        return False

    def _completes_fresh_phase_before_a_first_wait(self, state: State, res: StepResult, p: int) -> bool:
        """Does this arrive complete a phase of a barrier that another process may still wait on
        without any history? Such a first wait means the phase of PTX's window with its parity
        (rules.first_wait_phase), which the completion moves: with parity 1 on a fresh barrier it
        passes at once (the CUTLASS producer start) but blocks once phase 0 has completed; with
        parity 0 it observes phase 0 in phase 1 but waits for phase 2 once phase 1 has completed.
        Neither is stale, so nothing reports the difference on the path that takes the arrive
        first (the causal SV501 check needs the path where the wait observes early). The two
        orders then reach different behaviours, so the arrive must not be taken alone."""
        for m, (before, after) in enumerate(zip(state.mbars, res.state.mbars, strict=True)):
            if before[M_K] == after[M_K]:
                continue
            cta, name, _ = self.mb_names[m]  # the barrier's CTA: the arrive may be remote
            for q in self.procs_of_cta[cta]:
                if q != p and name in self.waits_ahead[q][state.procs[q][P_PC]] and self._jprev(before, q) is None:
                    return True
        return False

    def _lands_first(self, state: State, a: tuple) -> bool:
        """May the landing of bulk copy ``a`` be taken alone (partial-order reduction)?

        A landing writes its slot's in-flight record and counts its bytes on its barrier m
        (completing the phase, maybe). It does not commute with another update of m (an
        arrive, expect_tx, complete_tx, another copy's landing or a commit's arrival: the
        intermediate tx-count decides whether and when the phase completes), with an init or
        inval of m, or with the exit of its CTA (an exit before it is SV404). So it is taken
        alone only when none of these can happen before it, whatever the other actors do: in
        what can run before it (``_can_precede``, with m's phase frozen), no other agent counts
        on m, no process reaches an operation on m, and some process of the copy's CTA does
        not reach its end. What can come first otherwise commutes with it or, taken after it,
        reports a violation of its own (docs/model.md). Other copies in flight on m may land
        first where no set of them short of all completes m's phase (_landings_commute)."""
        if not self._landings_commute(state, a[4], a, -1):  # the cheap condition first
            return False
        ends = self._can_precede(state, a[4], -1, a, _ANY_UPDATE, True, landings_ok=True)
        return ends is not None and not all(ends[q] for q in self.procs_of_cta[a[1]])

    def _landings_commute(self, state: State, m: int, agent: tuple | None, p: int) -> bool:
        """Do the copies in flight on m (other than ``agent``) commute with the step: the landing
        of ``agent``, or process p's arrive.expect_tx on m (tx_por.landings_commute)?"""
        landings = []
        skip = agent is not None
        for b in state.agents:
            if skip and b is agent:
                skip = False
                continue
            if b[4] == m and b[0] == AG_TMA:
                landings.append(b[5])
        if not landings:
            return True
        mb = state.mbars[m]
        if agent is not None:
            return landings_commute(mb[M_PEND], mb[M_TX], 0, -agent[5], landings)
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        env, ctx = self.env(p, pstate[P_VARS]), self.ctx[p]
        try:
            arrivals = self._eval(ins.op.count, env, ctx) * ins.threads
            nbytes = self._eval(ins.op.tx_bytes, env, ctx) * ins.threads
        except (EvalError, Violation):
            return False
        return landings_commute(mb[M_PEND], mb[M_TX], arrivals, nbytes, landings)

    def _can_precede(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                     freeze: bool, named: tuple[int, list] | None = None,
                     landings_ok: bool = False) -> list[bool] | None:
        """What the other actors can execute before one step (of process ``frozen``, or the
        landing of ``agent``) that concerns mbarrier m: for each process, whether it can reach
        its end first; None when some actor can first reach an event on m of a kind in
        ``forbidden`` (or an operation whose target cannot be evaluated). ``freeze``: the caller
        has made sure that nothing else can complete m's current phase first (a landing with
        every update of m forbidden), so a wait on m passes only if it passes now.

        Control flow depends only on loop variables, so each process runs a fixed sequence of
        operations from where it stands (``_future``); the frozen process does not move. The
        set computed is the least fixpoint of: a process can execute the next operation of its
        sequence if that is not an mbarrier wait, or a wait that can pass first. A wait on m'
        passes only if it passes now or once a phase of m' completes, which requires as many
        arrivals on m' from what can run first (operations of the sequences so far, commits in
        flight) as m' has pending, or, when none is pending, a byte count that can change (a
        copy in flight or issued, an expect_tx or complete_tx). An inval, init or arrive_drop of
        m', a non-positive arrival count, an invalid m' and every other kind of wait (named and
        cluster barriers, tensor memory) are taken to pass. Every execution that avoids the step
        runs, per process, a prefix of its sequence inside this set: by induction along the
        execution, a wait in it passed either in the phase it sees now or after a completion,
        whose arrivals or bytes came from the actors' earlier moves, all inside the set. So
        this over-approximates what can happen before the step.

        With ``freeze``, a wait on m that passes now while m is in phase 0, or that is its
        process's first wait on m, answers None: a first wait means the phase of PTX's window
        (rules.first_wait_phase), so one that passes now (the CUTLASS producer start on a fresh
        barrier, or parity 0 observing phase 0 in phase 1) blocks once the step completes the
        phase, reporting nothing.

        ``landings_ok``: copies in flight may land on m first (the caller checks with
        _landings_commute that their sums never complete m's phase early).

        ``named`` = (index, out): the step is an arrival on named barrier ``index`` (m is -1 and
        nothing is forbidden); every arrival on it that can come first is appended to ``out`` as
        its event, and a process stops after a `bar.sync` on it and at a wait parked on it: the
        caller (named_por) takes the step only where the open generation cannot complete before
        it, so such a wait cannot pass first."""
        mbars = state.mbars
        names = self.mb_names
        m_life = names[m][:2] if m >= 0 else None  # m = -1: a named-barrier arrival (``named``)
        arrivals: dict[int, int] = {}
        bytes_move: set[int] = set()
        free: set[int] = set()  # barriers whose phases arrivals do not bound (lifecycle, drops)
        lives: set[tuple[int, str]] = set()
        skip = agent is not None
        for b in state.agents:
            if skip and b is agent:
                skip = False  # the step itself (an identical copy in flight is another agent)
                continue
            kind = _EV_BYTES if b[0] == AG_TMA else _EV_ARRIVE
            if b[4] == m and kind in forbidden and not (landings_ok and kind == _EV_BYTES):
                return None
            if kind == _EV_BYTES:
                bytes_move.add(b[4])
            else:
                arrivals[b[4]] = arrivals.get(b[4], 0) + 1

        def passes(m2: int, parity: int, q: int) -> bool:
            mb = mbars[m2]
            if not mb[M_VALID]:
                return True
            if mb[M_K] % 2 != parity % 2:
                if freeze and m2 == m and (mb[M_K] == 0 or self._jprev(mb, q) is None):
                    raise _FreshPass
                return True
            if freeze and m2 == m:
                return False
            if m2 in free or names[m2][:2] in lives:
                return True
            pend = mb[M_PEND]
            if pend > 0:
                return arrivals.get(m2, 0) >= pend
            return m2 in bytes_move

        nprocs = len(self.procs)
        procs = state.procs
        pos: list[tuple | None] = [None if q == frozen else (q, procs[q][P_PC], procs[q][P_VARS])
                                   for q in range(nprocs)]
        if named is not None:
            parked = named[0] * 65536 + state.named[named[0]].gen
            for q in range(nprocs):
                if procs[q][P_TOKEN] == parked and self.programs[q].code[procs[q][P_PC]].kind == BAR_WAIT:
                    pos[q] = None
        ends = [False] * nprocs
        future = self._future
        try:
            grew = True
            while grew:
                grew = False
                for q in range(nprocs):
                    key = pos[q]
                    while key is not None:
                        fut = future(key)
                        if fut is None:
                            return None
                        events, nxt = fut
                        if events is _END:
                            ends[q] = True
                            key = None
                            break
                        if events and events[0][0] == _EV_WAIT and not passes(events[0][1], events[0][2], q):
                            break
                        stop = False
                        for ev in events:
                            kind = ev[0]
                            if kind == _EV_WAIT:
                                continue
                            if kind == _EV_NAMED:
                                if named is not None and ev[1] == named[0]:
                                    named[1].append(ev)
                                    stop = ev[4]  # a bar.sync on it waits for the generation
                                continue
                            grew = True
                            if kind == _EV_LIFE:
                                if ev[1] == m_life and kind in forbidden:
                                    return None
                                lives.add(ev[1])
                                continue
                            target = ev[1]
                            if target == m and kind in forbidden:
                                return None
                            if kind == _EV_ARRIVE:
                                arrivals[target] = arrivals.get(target, 0) + ev[2]
                            elif kind == _EV_BYTES:
                                bytes_move.add(target)
                            else:  # _EV_FREE
                                free.add(target)
                        key = None if stop else nxt
                    pos[q] = key
        except _FreshPass:
            return None
        return ends

    def _future(self, key: tuple) -> tuple[tuple, tuple | None] | None:
        """The mbarrier events of the instruction at ``key`` = (process, pc, variables), and the
        key of the process's next instruction: (_END, None) at the end; None when a target or
        the local control flow after it cannot be evaluated. It depends only on the key (control
        flow depends only on loop variables), so it is remembered.

        Events: (_EV_WAIT, m, parity), (_EV_ARRIVE, m, arrivals), (_EV_BYTES, m) for a tx update
        or a copy that will count on m, (_EV_FREE, m) for an arrive_drop or a non-positive count,
        (_EV_LIFE, (cta, name)) for an init or inval; (_EV_NAMED, index, count, site, sync) for a
        named-barrier arrival (see named_arrival), which only named_por reads."""
        out = self._future_memo.get(key, _MISSING)
        if out is not _MISSING:
            return out
        q, pc, vars_ = key
        ins = self.programs[q].code[pc]
        try:
            if ins.kind == END:
                out = (_END, None)
            else:
                events = self._events(q, ins, vars_) if ins.kind == OP else ()
                npc, nvars = self._run_local(q, pc + 1, vars_)
                out = (events, (q, npc, nvars))
        except (EvalError, Violation, KeyError):
            out = None
        if len(self._future_memo) >= _MEMO_LIMIT:
            self._future_memo.clear()
        self._future_memo[key] = out
        return out

    def _events(self, q: int, ins: Instr, vars_: tuple) -> tuple:
        """The mbarrier events of operation ``ins`` of process q under its variables (see _future)."""
        op = ins.op
        env, ctx = self.env(q, vars_), self.ctx[q]
        own = self.procs[q].cta

        def index(ref: ir.Ref, cta: int) -> int:
            i = evaluate(ref.index, env, ctx) if ref.index is not None else 0
            if not 0 <= i < (self.mb_decl[ref.name].size or 1) or not 0 <= cta < self.ncta:
                raise KeyError(ref.name)
            return self.mb_index[(cta, ref.name, i)]

        def dests(mask_expr: ir.Expr | None) -> list[int]:
            if mask_expr is None:
                return [own]
            mask = evaluate(mask_expr, env, ctx)
            if not 0 < mask < 1 << self.ncta:
                raise KeyError("multicast")
            return [c for c in range(self.ncta) if mask >> c & 1]

        if isinstance(op, ir.MbarWait):
            return ((_EV_WAIT, index(op.bar, own), evaluate(op.parity, env, ctx)),)
        if isinstance(op, ir.MbarArrive):
            cta = own if op.remote is None else evaluate(op.remote, env, ctx)
            m2 = index(op.bar, cta)
            count = evaluate(op.count, env, ctx) * ins.threads
            events = [(_EV_FREE, m2) if op.drop or count <= 0 else (_EV_ARRIVE, m2, count)]
            if op.tx_bytes is not None:
                events.append((_EV_BYTES, m2))
            return tuple(events)
        if isinstance(op, ir.MbarTx):
            return ((_EV_BYTES, index(op.bar, own if op.remote is None else evaluate(op.remote, env, ctx))),)
        if isinstance(op, ir.TmaLoad):
            return tuple((_EV_BYTES, index(op.bar, c)) for c in dests(op.multicast))
        if isinstance(op, ir.UmmaCommit):
            return tuple((_EV_ARRIVE, index(op.bar, c), ins.threads) for c in dests(op.multicast))
        if isinstance(op, ir.MbarInit | ir.MbarInval):
            return ((_EV_LIFE, (own, op.bar.name)),)
        if isinstance(op, ir.BarSync | ir.BarArrive):
            return ((_EV_NAMED, *self.named_arrival(q, op, vars_)),)
        return ()

    def _no_lifecycle_ahead(self, state: State, p: int, name: str, cta: int | None = None) -> bool:
        """No other process of ``cta`` (default: p's CTA) can still init or inval the barrier array ``name``."""
        for q in self.procs_of_cta[self.procs[p].cta if cta is None else cta]:
            if q != p and name in self.lifecycle_ahead[q][state.procs[q][P_PC]]:
                return False
        return True

    def step(self, state: State, label: tuple) -> StepResult | None:
        if label[0] == "p":
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

    def _target_cta(self, w: _Work, p: int, remote: ir.Expr | None, env, ctx, span) -> int:
        if remote is None:
            return self.procs[p].cta
        cta = self._eval(remote, env, ctx)
        if not 0 <= cta < self.ncta:
            raise Violation("SV405", f"remote operation targets CTA rank {cta}, outside the cluster "
                            f"(ranks 0..{self.ncta - 1})", span)
        return cta

    def _mbar(self, w: _Work, p: int, ref: ir.Ref, cta: int, env, ctx) -> int:
        decl = self.mb_decl[ref.name]
        idx = 0
        if ref.index is not None:
            idx = self._eval(ref.index, env, ctx)
            if not 0 <= idx < (decl.size or 1):
                raise Violation("SV104", f"index {idx} is out of range for `{ref.name}[{decl.size}]`", ref.span)
        return self.mb_index[(cta, ref.name, idx)]

    def _slot(self, ref: ir.Ref, env, ctx) -> tuple[int, int]:
        buf = self.buf_index[ref.name]
        decl = self.protocol.buffers[buf]
        slot = 0
        if ref.index is not None:
            slot = self._eval(ref.index, env, ctx)
            if not 0 <= slot < (decl.slots or 1):
                raise Violation("SV104", f"index {slot} is out of range for `{ref.name}[{decl.slots}]`", ref.span)
        return buf, slot

    def _cta_exited(self, w: _Work, cta: int) -> bool:
        procs, programs = w.procs, self.programs
        for q in self.procs_of_cta[cta]:
            if programs[q].code[procs[q][P_PC]].kind != END:
                return False
        return True

    def _check_peer_alive(self, w: _Work, p: int, cta: int, span, what: str) -> None:
        if cta != self.procs[p].cta and self._cta_exited(w, cta):
            raise Violation("SV404", f"{what} targets CTA {cta}, which may already have exited "
                            "(nothing makes it wait for this access; end with a cluster barrier)", span)

    def _knows(self, records: tuple, key: tuple, mask: int) -> bool:
        """Do all holders in ``mask`` know the record with (space, cta, obj, slot) = key?

        Asked of init and CTA-start records (on every barrier use and every blocked wait), of
        which the records hold at most one per key: op_init drops a barrier's old init record
        before it adds the new one, and the start records are made once. A state's records are
        sorted, and the key sorts just before every record that begins with it, so bisection
        finds that record. Records that a step is changing may be out of order: where bisection
        does not land on the key, they are scanned."""
        i = bisect_left(records, key)
        if i < len(records) and records[i][:4] == key:
            return (records[i][R_KNOWN] & mask) == mask
        space, cta, obj, slot = key
        for r in records:
            # field by field, the space first (most records are data, not the key's), without slicing
            if r[R_SPACE] == space and r[R_OBJ] == obj and r[R_CTA] == cta and r[R_SLOT] == slot:
                return (r[R_KNOWN] & mask) == mask
        return True  # no such record: nothing to order after

    def _check_barrier_usable(self, w: _Work, p: int, m: int, lanes: int, span, what: str) -> None:
        """SV401/SV402: the barrier must be valid and its init must happen-before this use."""
        cta = self.mb_names[m][0]
        remote = cta != self.procs[p].cta
        if remote:
            self._check_peer_alive(w, p, cta, span, what)
        mb = w.mbars[m]
        init_key = (SPACE_INIT, cta, m, 0)
        if not mb[M_VALID] or not self._knows(w.records, init_key, lanes):
            if remote:
                raise Violation("SV402", f"{what} on {self.mb_label(m)} in peer CTA {cta} may run before that "
                                "CTA's init of it is visible (needs init; fence.mbarrier_init; a cluster barrier "
                                "that both sides pass before the remote use)", span)
            state = "not initialized" if not mb[M_VALID] else "initialized, but nothing orders the init before it"
            raise Violation("SV401", f"{what} on {self.mb_label(m)}: the barrier is {state}", span)

    def _check_consumption(self, w: _Work, m: int, span, what: str) -> None:
        """§1.3 consumption rule (SV502): the previous phase must have been observed by a wait."""
        mb = w.mbars[m]
        if not mb[M_OBSERVED]:
            w.soft.append(Violation("SV502", f"{what} on {self.mb_label(m)} lands in phase {mb[M_K]} although no wait "
                            f"observed the completion of phase {mb[M_K] - 1} (PTX consumption rule)", span))

    def _set_mb(self, w: _Work, m: int, mb: rules.Mbar, old: tuple, release_mask: int = 0,
                rdata: int | None = None, contributor: int = 0) -> None:
        """Store a barrier after a rule was applied, with knowledge and phase bookkeeping.

        ``contributor``: the lanes whose step this is (0 for an async agent); what they have
        observed is causally before this contribution, whatever its memory semantics."""
        rd = old[M_RDATA] if rdata is None else rdata
        observed = old[M_OBSERVED]
        cur = self.holders.mb_cur(m)
        if release_mask:
            w.records = release(w.records, release_mask, cur)
        if contributor and contributor != release_mask:
            # (after a release from the same lanes it would change nothing: every record those
            # lanes know, observations included, is then known by the current phase)
            w.records = carry_obs(w.records, contributor, cur)
        if mb.k != old[M_K]:
            self._check_observations(w, m, old[M_K])
            w.records = shift_phase(w.records, self.holders.mb_cur(m), self.holders.mb_last(m))
            observed = 0
            rd = (rd & 1) << 1
        w.mbars[m] = (mb.valid, mb.k, mb.pend, mb.exp, mb.tx, observed, old[M_JPREV], rd)

    def _check_observations(self, w: _Work, m: int, phase: int) -> None:
        """Phase ``phase`` of barrier m completes. Every wait that observed phase − 1 must be
        causally before some contribution to this phase; otherwise another interleaving runs
        that wait after this completion, where its parity names a later phase (stale waiter,
        SV501). Checking it here, on causality, makes SV501 independent of the interleaving
        explored — which is what lets partial-order reduction take passing waits alone."""
        cta = self.mb_names[m][0]
        last = phase - 1
        cur = self.holders.mb_cur(m)
        # One pass finds both the stale observation (the first, in record order) and the observations
        # of earlier phases that are dropped; the records are copied only when some are dropped.
        drop = False
        for r in w.records:
            if r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m and r[R_CTA] == cta and r[R_SLOT] <= last:
                drop = True
                if r[R_SLOT] == last and not r[R_KNOWN] & cur:
                    raise Violation("SV501", f"the wait at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} for "
                                    f"phase {last} of {self.mb_label(m)} is not ordered before the completion of "
                                    f"phase {phase}: in another interleaving it runs after it, and its parity then "
                                    "names a later phase (stale waiter)", self._agent_span(r[R_LINE]),
                                    procs=(r[R_OWNER],))
        if drop:
            w.records = tuple([r for r in w.records if not (r[R_SPACE] == SPACE_OBS and r[R_OBJ] == m
                                                            and r[R_CTA] == cta and r[R_SLOT] <= last)])

    @staticmethod
    def _rule_state(mb: tuple) -> rules.Mbar:
        # the first five fields of a state's barrier are rules.Mbar's (state.py), in its order
        return _new_tuple(rules.Mbar, mb[:5])

    def _tx_check(self, m: int, tx: int, span) -> None:
        if rules.tx_out_of_range(tx):
            raise Violation("SV503", f"tx-count of {self.mb_label(m)} would reach {tx}, outside ±(2^20-1)", span)

    # ---- mbarrier
    def op_init(self, w, p, proc, op: ir.MbarInit, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        count = decl.count if op.count is None else self._eval(op.count, env, ctx)
        if not 1 <= count <= rules.MAX_COUNT:
            raise Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
        elems = range(decl.size or 1) if op.bar.every else None
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in elems] if elems is not None else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        part = self._part(p, ins)
        # One pass over the records for all targets (`init B[*]` of thousands of barriers stays linear);
        # the same records as one pass per target: the new init records carry no barrier bits.
        mask = 0
        for m in targets:
            if w.mbars[m][M_VALID] or ins.threads > 1:
                why = "it is still live (inval it first)" if w.mbars[m][M_VALID] else \
                    f"{ins.threads} threads init it at once (wrap the init in `first thread`)"
                raise Violation("SV403", f"init of {self.mb_label(m)}: {why}", op.span)
            mb = rules.mb_init(count)
            w.mbars[m] = (mb.valid, mb.k, mb.pend, mb.exp, mb.tx, 1, (), 0)
            mask |= self.holders.mb_cur(m) | self.holders.mb_last(m)
        inited = set(targets)
        w.records = clear_bits(w.records, mask)
        w.records = tuple(r for r in w.records
                          if not (r[R_SPACE] in (SPACE_INIT, SPACE_OBS) and r[R_CTA] == proc.cta
                                  and r[R_OBJ] in inited and (r[R_SPACE] == SPACE_OBS or r[R_SLOT] == 0)))
        w.records = (*w.records, *((SPACE_INIT, proc.cta, m, 0, WRITE, p, part, op.span.line, 0, 0, -1, 0, lanes)
                                   for m in targets))
        return True

    def op_inval(self, w, p, proc, op: ir.MbarInval, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in range(decl.size or 1)] if op.bar.every else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        for m in targets:
            self._check_barrier_usable(w, p, m, lanes, op.span, "inval")
            mb = rules.mb_inval(self._rule_state(w.mbars[m]))
            w.mbars[m] = (mb.valid, *w.mbars[m][1:])
            w.records = tuple(r for r in w.records if r[:4] != (SPACE_INIT, proc.cta, m, 0))
        return True

    def op_arrive(self, w, p, proc, op: ir.MbarArrive, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        m = self._mbar(w, p, op.bar, cta, env, ctx)
        what = "arrive_drop" if op.drop else "arrive"
        self._check_barrier_usable(w, p, m, lanes, op.span, what)
        self._check_consumption(w, m, op.span, what)
        count = self._eval(op.count, env, ctx) * ins.threads
        old = w.mbars[m]
        s = self._rule_state(old)
        if op.drop and count >= s.exp:
            raise Violation("SV504", f"arrive_drop of {count} on {self.mb_label(m)} takes its expected count "
                            f"{s.exp} to {s.exp - count} (UB at 0)", op.span)
        if rules.arrive_overflows(s, count):
            raise Violation("SV504", f"{count} arrival(s) on {self.mb_label(m)} but only {s.pend} pending in "
                            f"phase {s.k} (the extra ones would land in the next phase)", op.span)
        if op.tx_bytes is not None:
            nbytes = self._eval(op.tx_bytes, env, ctx) * ins.threads
            self._tx_check(m, s.tx + nbytes, op.span)
            s = (rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx)(s, nbytes, count)
        else:
            s = rules.mb_arrive_drop(s, count) if op.drop else rules.mb_arrive(s, count)
        rdata = None
        release_mask = lanes if op.sem == "release" else 0
        if cta != proc.cta and release_mask:
            rdata = self._check_cross_cta_release(w, p, m, op, lanes)
        if release_mask and self._part(p, ins) >= LANES:
            # some lanes of the warp (a lane guard): each publishes its own part only
            releasing = ins.lanes & proc.lane_mask
            w.records = release_partial(
                w.records, lanes, lanes & self.holders.leader(p), self.holders.mb_cur(m),
                lambda r: r[R_SPACE] == SPACE_DATA and own_part_hidden(proc, r[R_OWNER], r[R_PART],
                                                                       bool(r[R_FLAGS] & F_ASYNC), releasing))
            release_mask = 0
        self._set_mb(w, m, s, old, release_mask, rdata, contributor=lanes)
        return True

    def _check_cross_cta_release(self, w, p, m, op: ir.MbarArrive, lanes: int) -> int:
        """SV602: a release into a peer CTA's barrier. Returns the barrier's new rdata bits."""
        # data crosses CTAs when the release publishes a generic write made outside the barrier's CTA
        bar_cta = self.mb_names[m][0]
        carries_data = any(r[R_SPACE] == SPACE_DATA and r[R_KIND] == WRITE and not r[R_FLAGS] & F_ASYNC
                           and r[R_KNOWN] & lanes and r[R_OWNER] >= 0 and self.procs[r[R_OWNER]].cta != bar_cta
                           for r in w.records)
        if op.scope == "cta":
            if carries_data:
                w.soft.append(Violation("SV602", f"remote arrive on {self.mb_label(m)} publishes generic-proxy data "
                                        "to another CTA with a .cta-scope release; use arrive.release.cluster",
                                        op.span))
            else:
                w.warnings.append(Violation(
                    "SV602", f"remote arrive on {self.mb_label(m)} uses the default .cta scope; it only guards "
                    "buffer reuse here, which CUTLASS relies on but PTX does not settle (prefer .release.cluster)",
                    op.span, severity=Severity.WARNING))
        return w.mbars[m][M_RDATA] | (1 if carries_data else 0)

    def op_tx(self, w, p, proc, op: ir.MbarTx, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        m = self._mbar(w, p, op.bar, cta, env, ctx)
        what = f"{op.kind}_tx"
        self._check_barrier_usable(w, p, m, lanes, op.span, what)
        nbytes = self._eval(op.tx_bytes, env, ctx) * ins.threads
        old = w.mbars[m]
        s = self._rule_state(old)
        if op.kind == "expect":
            self._tx_check(m, s.tx + nbytes, op.span)
            s = rules.mb_expect_tx(s, nbytes)
        else:
            self._tx_check(m, s.tx - nbytes, op.span)
            s = rules.mb_complete_tx(s, nbytes)
        self._set_mb(w, m, s, old, contributor=lanes)
        return True

    def _wait_blocked(self, state: State, p: int, ins, pstate: tuple) -> bool:
        """Fast path: a wait that would simply block (valid barrier, parity not passing, not
        stale). Anything else — including an expression that cannot be evaluated — goes
        through op_wait, which decides and reports."""
        key = (p, pstate[P_PC], pstate[P_VARS])
        target = self._wait_targets.get(key)
        if target is None:
            target = self._wait_targets[key] = self._wait_target(p, ins.op, pstate[P_VARS])
        if target is False:
            return False
        m, parity = target
        mb = state.mbars[m]
        if not mb[M_VALID] or rules.mb_wait_passes(self._rule_state(mb), parity):
            return False  # invalid (reported by op_wait) or passing
        if not self._knows(state.records, (SPACE_INIT, self.procs[p].cta, m, 0), self._lanes(p, ins)):
            return False  # the init is not ordered before this wait: op_wait reports it
        jprev = self._jprev(mb, p)
        intended = rules.first_wait_phase(mb[M_K], parity) if jprev is None else \
            rules.intended_phase(jprev, parity)
        return mb[M_K] <= intended + 1  # not stale: it just blocks

    def _wait_target(self, p: int, op: ir.MbarWait, vars_: tuple) -> tuple[int, int] | bool:
        """The barrier index and parity of a wait of process p under its variables, or False
        when they cannot be evaluated or are out of range (op_wait reports that). It depends
        only on the process's program position and variables, so it is remembered."""
        try:
            env = self.env(p, vars_)
            ctx = self.ctx[p]
            idx = evaluate(op.bar.index, env, ctx) if op.bar.index is not None else 0
            if not 0 <= idx < (self.mb_decl[op.bar.name].size or 1):
                return False
            return self.mb_index[(self.procs[p].cta, op.bar.name, idx)], evaluate(op.parity, env, ctx)
        except EvalError:
            return False

    def _jprev(self, mb: tuple, p: int) -> int | None:
        for q, j in mb[M_JPREV]:
            if q == p:
                return j
        return None

    def op_wait(self, w, p, proc, op: ir.MbarWait, ins, env, ctx, lanes) -> bool:
        m = self._mbar(w, p, op.bar, proc.cta, env, ctx)
        self._check_barrier_usable(w, p, m, lanes, op.span, "wait")
        parity = self._eval(op.parity, env, ctx)
        mb = w.mbars[m]
        s = self._rule_state(mb)
        jprev = self._jprev(mb, p)
        if jprev is None:
            # A first wait has no history: it means the phase of PTX's window (the current one
            # or the one before) with its parity. The CUTLASS producer start (parity 1 on a
            # fresh barrier) passes at once and keeps no history; nvFuser's first WAR wait
            # (parity 1 after a pre-arrived phase 0) means 1; a warp that first waits once the
            # barrier is past phase 1 (ordered after it by other synchronization) means the
            # phase it finds. Could it also run earlier, it observes an earlier phase there,
            # and the next completion reports that it is not ordered after it (SV501).
            intended = rules.first_wait_phase(s.k, parity)
            jprev = -1
        else:
            intended = rules.intended_phase(jprev, parity)
        if rules.wait_aliases(s, intended):
            raise Violation("SV501", f"wait on {self.mb_label(m)} for parity {parity % 2} means phase {intended}, "
                            f"but the barrier is already in phase {s.k}: that phase completed and was overtaken, "
                            "so the parity now names a later phase (stale waiter)", op.span)
        if not rules.mb_wait_passes(s, parity):
            return False
        observed_phase = s.k - 1
        new_j = max(jprev, observed_phase if intended == observed_phase else jprev)
        jprevs = tuple(sorted([(q, j) for q, j in mb[M_JPREV] if q != p] + [(p, new_j)]))
        observed = mb[M_OBSERVED] or intended == observed_phase
        w.mbars[m] = (*mb[:M_OBSERVED], int(observed), jprevs, mb[M_RDATA])
        if intended == observed_phase:
            # the observation, checked against the next phase's completion (_check_observations)
            key = (SPACE_OBS, proc.cta, m, observed_phase)
            part = self._part(p, ins)
            records = w.records
            lo, hi = _key_bounds(w, key)  # (a filter of the whole tuple, where it is not sorted)
            w.records = (*records[:lo], *[r for r in records[lo:hi] if r[R_OWNER] != p or r[:4] != key],
                         *records[hi:], (*key, READ, p, part, op.span.line, 0, 0, -1, lanes, lanes))
            # Taken alone by partial-order reduction when another wait already observed the phase
            # (so no arrive can depend on this one for the consumption rule): every other step
            # commutes with it, and a completion of the next phase is checked on causality.
            w.lone = bool(mb[M_OBSERVED])
        if op.sem != "acquire":
            w.records = carry_obs(w.records, self.holders.mb_last(m), lanes)
        if op.sem == "acquire":
            if op.scope == "cta" and mb[M_RDATA] & 2:
                # A warning, not an error: the release side is at .cluster scope here (a .cta one is
                # the error at the arrive), and CUTLASS's ClusterBarrier::wait acquires at the default
                # .cta scope on barriers its peers release at .cluster scope (docs/model.md, "Scopes").
                w.warnings.append(Violation(
                    "SV602", f"wait on {self.mb_label(m)} acquires generic-proxy data another CTA released into "
                    "it, with the default .cta scope; PTX's memory model pairs a release and an acquire only when "
                    "each scope includes the other thread, so prefer wait.acquire.cluster (CUTLASS relies on "
                    "the .cta form)", op.span, severity=Severity.WARNING))
            w.records = acquire(w.records, self.holders.mb_last(m), lanes)
        return True

    # ---- named barriers
    def _nb_expected(self, w: _Work, cta: int, nb: rules.NamedBar) -> int:
        if nb.count is not None:
            return nb.count
        return sum(self.procs[q].nthreads for q in self.procs_of_cta[cta]
                   if self.programs[q].code[w.procs[q][P_PC]].kind != END)

    def _nb_arrive(self, w: _Work, p: int, proc: Process, bar_id: int, count: int | None, span, aligned: bool,
                   lanes: int) -> None:
        idx = proc.cta * 16 + bar_id
        nb = w.named[idx]
        if nb.arrived and nb.count != count:
            show = lambda c: "all threads" if c is None else str(c)  # noqa: E731
            raise Violation("SV202", f"barrier {bar_id}: this arrival says {show(count)} threads but the open "
                            f"generation was started with {show(nb.count)}", span)
        bit = 1 << proc.warp
        if nb.warps & bit:
            w.warnings.append(Violation("SV203", f"warp {proc.warp} arrives a second time in one generation of "
                                        f"barrier {bar_id} (legal: the barrier counts threads, but check that it "
                                        "is intended)", span, severity=Severity.WARNING))
        site = span.line * 4096 + span.column  # a static site: line and column
        if aligned and nb.arrived and nb.site and nb.site != site:
            w.warnings.append(Violation("SV204", f"aligned barrier {bar_id} reached at line {span.line}, column "
                                        f"{span.column} while other warps of this generation reached it at line "
                                        f"{nb.site // 4096}, column {nb.site % 4096}", span,
                                        severity=Severity.WARNING))
        w.records = release(w.records, lanes, self.holders.nb(proc.cta, bar_id))
        w.named[idx] = rules.nb_arrive(nb, count, proc.nthreads, bit, site if aligned else 0)
        self._nb_try_complete(w, proc.cta, bar_id)

    def _nb_try_complete(self, w: _Work, cta: int, bar_id: int) -> None:
        idx = cta * 16 + bar_id
        nb = w.named[idx]
        if not nb.arrived:
            return
        done = rules.nb_complete(nb, self._nb_expected(w, cta, nb))
        if done == nb:
            return
        w.named[idx] = done
        bit = self.holders.nb(cta, bar_id)
        for q in self.procs_of_cta[cta]:
            qs = w.procs[q]
            ins = self.programs[q].code[qs[P_PC]]
            if ins.kind == BAR_WAIT and qs[P_TOKEN] == idx * 65536 + nb.gen:
                w.records = acquire(w.records, bit, self.holders.proc_mask(q))
                pc, vars_ = self._run_local(q, qs[P_PC] + 1, qs[P_VARS])
                w.procs[q] = (pc, vars_, -1, *qs[3:])
                if self.programs[q].code[pc].kind == END:
                    self._exit(w, q)
        w.records = clear_bits(w.records, bit)

    def _bar_id(self, expr: ir.Expr, env, ctx, span) -> int:
        bar_id = self._eval(expr, env, ctx)
        if not 0 <= bar_id <= 15:
            raise Violation("SV106", f"named-barrier id {bar_id} is outside 0..15", span)
        return bar_id

    def _bar_count(self, expr: ir.Expr | None, env, ctx, span) -> int | None:
        if expr is None:
            return None
        count = self._eval(expr, env, ctx)
        if count <= 0 or count % 32 or count > self.cta_threads:
            raise Violation("SV106", f"named-barrier count {count} is not a positive multiple of 32 within the "
                            "CTA", span)
        return count

    def named_arrival(self, p: int, op: ir.BarSync | ir.BarArrive, vars_: tuple) -> tuple[int, int | None, int, bool]:
        """What an arrival of process p on a named barrier writes into its generation, the way
        _nb_arrive does: (barrier index cta * 16 + id, count, the site an open generation keeps,
        whether the warp then waits). Raises Violation (or EvalError) where the step reports one."""
        env, ctx = self.env(p, vars_), self.ctx[p]
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        sync = isinstance(op, ir.BarSync)
        site = op.span.line * 4096 + op.span.column if sync else 0
        return self.procs[p].cta * 16 + bar_id, count, site, sync

    def op_bar_sync(self, w, p, proc, op: ir.BarSync, ins, env, ctx, lanes) -> bool:
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        idx = proc.cta * 16 + bar_id
        gen = w.named[idx].gen
        ps = w.procs[p]
        # park at the BAR_WAIT that follows; completion (maybe right now, by this very arrival)
        # moves us on — possibly around a loop back to this bar.sync, hence PLACED
        w.procs[p] = (ps[P_PC] + 1, ps[P_VARS], idx * 65536 + gen, *ps[3:])
        self._nb_arrive(w, p, proc, bar_id, count, op.span, op.aligned, lanes)
        return PLACED

    def op_bar_arrive(self, w, p, proc, op: ir.BarArrive, ins, env, ctx, lanes) -> bool:
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        self._nb_arrive(w, p, proc, bar_id, count, op.span, False, lanes)
        return True

    # ---- cluster barrier
    def _cluster_expected(self, w: _Work) -> int:
        return sum(self.procs[q].nthreads for q in range(len(self.procs))
                   if self.programs[q].code[w.procs[q][P_PC]].kind != END)

    def _cb_try_complete(self, w: _Work) -> None:
        cb = rules.ClusterBar(*w.cluster)
        if not cb.arrived:
            return  # (nothing can complete: spares counting the threads still running)
        done = rules.cb_complete(cb, self._cluster_expected(w))
        if done.gen != cb.gen:
            w.records = shift_phase(w.records, 1 << self.holders.cl_cur, 1 << self.holders.cl_last)
            w.cluster = tuple(done)

    def op_cluster_arrive(self, w, p, proc, op: ir.ClusterArrive, ins, env, ctx, lanes) -> bool:
        ps = w.procs[p]
        cb = rules.ClusterBar(*w.cluster)
        if rules.cb_arrives_twice(ps[P_CLTOKEN], cb.gen):
            raise Violation("SV205", "cluster barrier arrive a second time before the generation of this warp's "
                            "earlier arrival completed (PTX: each thread must arrive only once before the barrier "
                            "completes)", op.span)
        cur = 1 << self.holders.cl_cur
        # A relaxed arrive orders nothing, except inits published by fence.mbarrier_init; any arrive
        # shows that this CTA is running (its start record travels).
        w.records = release(w.records, lanes, cur, relaxed=op.relaxed)
        w.procs[p] = (*ps[:P_CLTOKEN], cb.gen, *ps[P_CLTOKEN + 1:])
        w.cluster = tuple(rules.cb_arrive(cb, proc.nthreads, 1 << p))
        self._cb_try_complete(w)
        # Taken alone by partial-order reduction where every arrival is waited on before an exit
        # (cluster_arrivals_waited): then the generation cannot complete without this arrival —
        # the threads that arrived have not exited, and this warp runs — so no wait of it can
        # pass and no exit can complete it first; arrivals add up and releases accumulate in
        # any order.
        w.lone = True
        return True

    def op_cluster_wait(self, w, p, proc, op: ir.ClusterWait, ins, env, ctx, lanes) -> bool:
        ps = w.procs[p]
        if ps[P_CLTOKEN] < 0 or w.cluster[0] <= ps[P_CLTOKEN]:
            return False
        w.records = acquire(w.records, 1 << self.holders.cl_last, lanes)
        w.procs[p] = (*ps[:P_CLTOKEN], -1, *ps[P_CLTOKEN + 1:])
        # Taken alone by partial-order reduction where every arrival is waited on before an exit
        # (cluster_arrivals_waited): what it reads (the generation, the knowledge of the
        # completed one) changes only when the next generation completes, which then needs this
        # warp's next arrival; what it writes is its own.
        w.lone = True
        return True

    def op_syncwarp(self, w, p, proc, op: ir.Syncwarp, ins, env, ctx, lanes) -> bool:
        # __syncwarp orders the memory accesses of the participating lanes: the leader
        # and the other lanes learn what each other knows.
        if p in self.warp_parts:
            return self._syncwarp_parts(w, p)
        mask = self.holders.proc_mask(p)
        w.records = acquire(w.records, self.holders.leader(p), mask)
        w.records = acquire(w.records, self.holders.lanes(p), mask)
        return True

    def _syncwarp_parts(self, w: _Work, p: int):
        """`__syncwarp()` (full mask) by one part of a warp split between roles. PTX bar.warp.sync:
        the thread waits "until all threads corresponding to membermask have executed a
        bar.warp.sync with the same membermask value" — any bar.warp.sync, at any site (sm_70+) —
        and it "also guarantee[s] memory ordering among threads participating in barrier". A part
        marks its arrival (its token) and stays; the last part to arrive orders every part's
        accesses before every part's later ones and moves them all on. A part that exits
        without one leaves the others waiting (a deadlock)."""
        ps = w.procs[p]
        if ps[P_TOKEN] >= 0:
            return False  # arrived: waiting for the other parts
        parts = self.warp_parts[p]
        code = self.programs
        waiting = [q for q in parts if q != p and w.procs[q][P_TOKEN] >= 0
                   and isinstance(code[q].code[w.procs[q][P_PC]].op, ir.Syncwarp)]
        if len(waiting) < len(parts) - 1:
            w.procs[p] = (*ps[:P_TOKEN], 0, *ps[P_TOKEN + 1:])
            return STAY
        mask = 0
        for q in parts:
            mask |= self.holders.proc_mask(q)
        w.records = acquire(w.records, mask, mask)
        for q in waiting:
            qs = w.procs[q]
            pc, vars_ = self._run_local(q, qs[P_PC] + 1, qs[P_VARS])
            w.procs[q] = (pc, vars_, -1, *qs[3:])
            if code[q].code[pc].kind == END:
                self._exit(w, q)
        return True

    # ---- data
    def _conflicts(self, w: _Work, p: int, part: int, lanes: int, key: tuple, kind: int, span,
                   what: str, async_op: bool = False) -> None:
        """Check a new access against the live records of its slot (happens-before, §10.4)."""
        space, cta, obj, slot = key
        lo, hi = _key_bounds(w, key)
        run = w.records[lo:hi]  # (the records in their order: a scan meets the key's as a scan of all would)
        for r in run:
            # (r[:4] != key, field by field without slicing: most records differ in the first test)
            if r[R_SLOT] != slot or r[R_OBJ] != obj or r[R_CTA] != cta or r[R_SPACE] != space or \
                    (r[R_KIND] == READ and kind == READ) or r[R_FLAGS] & F_SUPERSEDED:
                continue
            if self._ordered(r, p, part, lanes):
                continue
            self._raise_race(w, p, lanes, key, kind, r, span, what)
        if async_op:
            for r in run:
                if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj and r[R_CTA] == cta and \
                        r[R_SPACE] == space and not r[R_FLAGS] & (F_ASYNC | F_SUPERSEDED) and \
                        (r[R_AKNOWN] & lanes) != lanes:
                    raise Violation("SV601", f"{what} reads {self.slot_label(*key[1:])} through the async proxy, but "
                                    f"the generic write at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])} was not "
                                    "followed by that writer's fence.proxy.async", span,
                                    related=((r[R_LINE], "the unfenced generic write"),))

    @staticmethod
    def _ordered(r: tuple, p: int, part: int, lanes: int) -> bool:
        if r[R_FLAGS] & F_INFLIGHT:
            return False
        if r[R_OWNER] == p and not r[R_FLAGS] & F_ASYNC and r[R_PART] == part:
            return True  # program order (lanes of a whole-warp access touch their own part: language doc)
        return (r[R_KNOWN] & lanes) == lanes

    def _raise_race(self, w, p, lanes, key, kind, r, span, what) -> None:
        slot = self.slot_label(*key[1:])
        other = f"{'write' if r[R_KIND] == WRITE else 'read'} at line {r[R_LINE]} by {self._owner_label(r)}"
        if kind == WRITE and r[R_KIND] == WRITE:
            code, name = "SV303", "WAW"
        elif kind == WRITE:
            # A read of an epoch its reader had already consumed was waiting for this write (RAW);
            # otherwise the write came too early for a read that was due (WAR).
            code, name = ("SV301", "RAW") if r[R_FLAGS] & F_REPEAT else ("SV302", "WAR")
        else:
            code, name = ("SV302", "WAR") if self._read_intends_older(w, p, lanes, key, r) else ("SV301", "RAW")
        inflight = " (still in flight)" if r[R_FLAGS] & F_INFLIGHT else ""
        raise Violation(code, f"{name} race on {slot}: {what} by {self.proc_label(p)} is not ordered with the "
                        f"{other}{inflight}; no release/acquire chain, barrier or async-completion wait orders "
                        "them", span, related=((r[R_LINE], f"the other access ({other})"),),
                        procs=(r[R_OWNER],) if r[R_OWNER] >= 0 else ())

    def _read_intends_older(self, w: _Work, p: int, lanes: int, key: tuple, unordered_write: tuple) -> bool:
        """Was this read meant for an older write that the unordered one overwrote too early?"""
        known_epoch = max((r[R_EPOCH] for r in w.records if r[:4] == key and r[R_KIND] == WRITE
                           and self._ordered(r, p, LEADER if lanes == self.holders.leader(p) else FULL, lanes)),
                          default=0)
        last_read = max((r[R_EPOCH] for r in w.records if r[:4] == key and r[R_KIND] == READ and r[R_OWNER] == p),
                        default=0)
        return known_epoch > last_read and known_epoch < unordered_write[R_EPOCH]

    def _owner_label(self, r: tuple) -> str:
        who = self.proc_label(r[R_OWNER]) if r[R_OWNER] >= 0 else "an async agent"
        if r[R_FLAGS] & F_ASYNC:
            return f"the async operation issued by {who}"
        return who

    def _epoch(self, records: tuple, key: tuple) -> int:
        space, cta, obj, slot = key  # (r[:4] == key, field by field without slicing)
        return max((r[R_EPOCH] for r in records if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj
                    and r[R_CTA] == cta and r[R_SPACE] == space), default=0)

    def _add_read(self, w, p, part, lanes, key, line, flags=0, grp=-1) -> None:
        space, cta, obj, slot = key  # (r[:4] == key, field by field without slicing)
        records = w.records
        lo, hi = _key_bounds(w, key)  # only the key's run is searched and filtered
        run = records[lo:hi]
        epoch = max((r[R_EPOCH] for r in run if r[R_KIND] == WRITE and r[R_SLOT] == slot and r[R_OBJ] == obj
                     and r[R_CTA] == cta and r[R_SPACE] == space and self._ordered(r, p, part, lanes)), default=0)
        repeat = 0
        keep = list(records[:lo])
        for r in run:
            if r[R_KIND] == READ and r[R_OWNER] == p and r[R_SLOT] == slot and r[R_OBJ] == obj and \
                    r[R_CTA] == cta and r[R_SPACE] == space and r[R_PART] == part and \
                    not r[R_FLAGS] & F_ASYNC and not flags & F_ASYNC:
                if r[R_EPOCH] == epoch:
                    repeat = F_REPEAT
                continue  # subsumed by the new read of the same lanes
            keep.append(r)
        keep += records[hi:]
        if epoch == 0:
            repeat = F_REPEAT  # nothing was written yet: the read waits for a write to come
        known = 0 if flags & F_ASYNC else (lanes if part == LEADER else self.holders.lanes(p))
        keep.append((*key, READ, p, part, line, flags | repeat, epoch, grp, known, known))
        w.records = tuple(keep)

    def _add_write(self, w, p, part, lanes, key, line, flags=0) -> None:
        records = w.records
        lo, hi = _key_bounds(w, key)  # only the key's run is searched and dropped
        run = records[lo:hi]
        epoch = self._epoch(run, key) + 1
        if flags & F_INFLIGHT:
            keep = list(records)
            known = 0
        else:
            # Every older access is ordered before this write (checked), so none can race with a
            # later access that this write does not race with. The latest older write is kept,
            # marked superseded, only so that a late read that acquired it is named WAR (it was
            # meant for that write) rather than RAW.
            latest = max((r for r in run if r[:4] == key and r[R_KIND] == WRITE), default=None,
                         key=lambda r: r[R_EPOCH])
            keep = [*records[:lo], *[r for r in run if r[:4] != key], *records[hi:]]
            if latest is not None:
                keep.append((*latest[:R_FLAGS], latest[R_FLAGS] | F_SUPERSEDED, *latest[R_FLAGS + 1:]))
            known = lanes if part == LEADER else self.holders.lanes(p)
        # a generic write is visible to the async proxy only after its writer's fence.proxy.async
        aknown = known if flags & F_ASYNC else 0
        keep.append((*key, WRITE, p, part, line, flags, epoch, -1, aknown, known))
        w.records = tuple(keep)

    def op_access(self, w, p, proc, op: ir.Access, ins, env, ctx, lanes) -> bool:
        cta = self._target_cta(w, p, op.remote, env, ctx, op.span)
        if cta != proc.cta:
            self._check_peer_alive(w, p, cta, op.span, f"{op.kind} of distributed shared memory")
            if not self._knows(w.records, (SPACE_START, cta, 0, 0), lanes):
                raise Violation("SV404", f"{op.kind} of CTA {cta}'s shared memory before anything shows that CTA "
                                "is running (PTX: make sure the peer's shared memory exists; use a cluster "
                                "barrier first)", op.span)
        buf, slot = self._slot(op.buf, env, ctx)
        key = (SPACE_DATA, cta, buf, slot)
        part = self._part(p, ins)
        kind = WRITE if op.kind == "write" else READ
        self._conflicts(w, p, part, lanes, key, kind, op.span, op.kind)
        if kind == WRITE:
            self._add_write(w, p, part, lanes, key, op.span.line)
        else:
            self._add_read(w, p, part, lanes, key, op.span.line)
        return True

    def op_tma_load(self, w, p, proc, op: ir.TmaLoad, ins, env, ctx, lanes) -> bool:
        buf, slot = self._slot(op.buf, env, ctx)
        nbytes = self._eval(op.tx_bytes, env, ctx)
        if nbytes <= 0 or nbytes % 16:
            raise Violation("SV107", f"copy of {nbytes} bytes: bulk copies need a positive multiple of 16", op.span)
        dests = [proc.cta]
        if op.multicast is not None:
            mask = self._eval(op.multicast, env, ctx)
            if mask <= 0 or mask >= 1 << self.ncta:
                raise Violation("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster", op.span)
            dests = [c for c in range(self.ncta) if mask >> c & 1]
        part = self._part(p, ins)
        for cta in dests:
            m = self._mbar(w, p, op.bar, cta, env, ctx)
            self._check_barrier_usable(w, p, m, lanes, op.span, "tma.load completion")
            key = (SPACE_DATA, cta, buf, slot)
            self._conflicts(w, p, part, lanes, key, WRITE, op.span, "tma.load write", async_op=True)
            for _ in range(ins.threads):
                self._add_write(w, p, part, lanes, key, op.span.line, F_ASYNC | F_INFLIGHT)
                w.agents.append((AG_TMA, cta, buf, slot, m, nbytes, p, op.span.line, 0))
        return True

    def _async_read(self, w, p, proc, op: ir.TmaStore | ir.WgmmaRead, ins, env, ctx, lanes, unit: int,
                    what: str) -> bool:
        """An async-proxy read of a slot that lasts until a group wait retires it (§5, §6): it
        belongs to the process's open group of ``unit`` (0 bulk, 1 wgmma)."""
        buf, slot = self._slot(op.buf, env, ctx)
        key = (SPACE_DATA, proc.cta, buf, slot)
        part = self._part(p, ins)
        self._conflicts(w, p, part, lanes, key, READ, op.span, what, async_op=True)
        seq = w.procs[p][P_BULK if unit == 0 else P_WGMMA]
        self._add_read(w, p, part, lanes, key, op.span.line, F_ASYNC, grp=2 * seq + unit)
        return True

    def op_tma_store(self, w, p, proc, op: ir.TmaStore, ins, env, ctx, lanes) -> bool:
        return self._async_read(w, p, proc, op, ins, env, ctx, lanes, 0, "tma.store source read")

    def op_wgmma_read(self, w, p, proc, op: ir.WgmmaRead, ins, env, ctx, lanes) -> bool:
        self._async_read(w, p, proc, op, ins, env, ctx, lanes, 1, "wgmma operand read")
        if self.wgmma_team[p]:
            self._mark_issue(w, p, lanes, w.procs[p][P_WGMMA])
        return True

    def _mark_issue(self, w: _Work, p: int, lanes: int, group: int) -> None:
        """The warpgroup's MMA of ``group`` runs only once this warp has issued it, so a wait
        that sees the group complete is causally after what this warp had observed by now: each
        observation the issuing lanes know is marked (R_EPOCH, _issue_mark) with the team and the
        least group issued after it, and _wgmma_wait passes it on. One mark per observation: one
        of another team stays, which only passes on less (sound)."""
        team = self.team_index[p]
        nteams = len(self.teams)
        out = None
        for i, r in enumerate(w.records):
            if r[R_SPACE] == SPACE_OBS and r[R_KNOWN] & lanes:
                mark = r[R_EPOCH]
                if mark and ((mark - 1) % nteams != team or (mark - 1) // nteams <= group):
                    continue
                if out is None:
                    out = list(w.records)
                out[i] = (*r[:R_EPOCH], 1 + group * nteams + team, *r[R_EPOCH + 1:])
        if out is not None:
            w.records = tuple(out)

    def op_commit(self, w, p, proc, op: ir.GroupCommit, ins, env, ctx, lanes) -> bool:
        """`cp.async.bulk.commit_group` / `wgmma.commit_group` (§5, §6): the executing threads'
        uncommitted async operations become one group — per thread, not per warp.

        The process keeps one group counter, which is exact for the leader lane (it takes part
        in every commit). When the leader commits alone, lanes 1..31 commit nothing and their
        numbering falls behind; their operations (records of the whole warp) then lose their
        group number (UNCOMMITTED), so no wait retires them, until a commit by the whole warp
        files them under the group it closes. That is never earlier than the real group, so a
        wait retires them no sooner than PTX does (sound; at worst a race is reported that a
        more exact per-lane count would rule out)."""
        field_ = P_BULK if op.unit == "bulk" else P_WGMMA
        unit = 0 if op.unit == "bulk" else 1
        ps = w.procs[p]
        seq = ps[field_]
        leader_alone = self._part(p, ins) == LEADER and proc.nthreads > 1
        out = []
        for r in w.records:
            grp = r[R_GRP]
            if r[R_OWNER] == p and grp >= 0 and grp % 2 == unit and r[R_PART] == FULL:
                if leader_alone:
                    r = (*r[:R_GRP], UNCOMMITTED + unit, *r[R_GRP + 1:])
                elif grp == UNCOMMITTED + unit:
                    r = (*r[:R_GRP], 2 * seq + unit, *r[R_GRP + 1:])
            out.append(r)
        w.records = tuple(out)
        w.procs[p] = (*ps[:field_], seq + 1, *ps[field_ + 1:])
        return True

    def op_group_wait(self, w, p, proc, op: ir.GroupWait, ins, env, ctx, lanes) -> bool:
        """`cp.async.bulk.wait_group.read n` / `wgmma.wait_group n` (§5, §6): every committed
        group but the n most recent is complete; its async reads become ordered before
        the waiting lanes' later accesses."""
        unit = 0 if op.unit == "bulk" else 1
        committed = w.procs[p][P_BULK if unit == 0 else P_WGMMA]
        limit = committed - self._eval(op.pending, env, ctx)
        if unit == 1 and self.wgmma_team[p]:
            return self._wgmma_wait(w, p, ins, lanes, limit)
        waiter = self._part(p, ins)
        leader = self.holders.leader(p)
        out = []
        for r in w.records:
            grp = r[R_GRP]
            # Groups are per thread (PTX: "per-thread bulk async-group"): an elected lane's wait does
            # not retire the other lanes' reads, and a warp's wait orders an elected lane's read
            # before that lane alone.
            if r[R_OWNER] == p and grp >= 0 and grp % 2 == unit and grp // 2 < limit \
                    and not (waiter == LEADER and r[R_PART] == FULL):
                learn = lanes & leader if r[R_PART] == LEADER else lanes
                r = (*r[:R_GRP], -1, r[R_AKNOWN] | learn, r[R_KNOWN] | learn)
            out.append(r)
        w.records = tuple(out)
        return True

    def _wgmma_wait(self, w: _Work, p: int, ins: Instr, lanes: int, limit: int) -> bool:
        """wgmma.wait_group of a warp of a warpgroup (program.wgmma_teams): the groups before
        ``limit`` are the warpgroup's, so every warp's reads in them are complete once the wait
        returns, and the waiting lanes learn them all. A group's operations start only when every
        warp of the warpgroup has issued them, so the wait blocks until each other warp has
        issued all of its groups before ``limit`` (committed them, or stands at the commit that
        closes the last). A read stays tagged with its group until every warp of the team knows
        it (a later wait of another warp still learns it); F_RETIRED marks it complete."""
        team = self.wgmma_team[p]
        code = self.programs
        for q in team:
            if q != p:
                count = w.procs[q][P_WGMMA]
                if count < limit - 1:
                    return False
                if count == limit - 1:
                    nxt = code[q].code[w.procs[q][P_PC]]
                    if not (nxt.kind == OP and isinstance(nxt.op, ir.GroupCommit) and nxt.op.unit == "wgmma"):
                        return False
        waiter = self._part(p, ins)
        leader = self.holders.leader(p)
        everyone = self.team_mask[p]
        nteams, team_id = len(self.teams), self.team_index[p]
        out = None
        for i, r in enumerate(w.records):
            grp = r[R_GRP]
            if r[R_SPACE] == SPACE_OBS:
                mark = r[R_EPOCH]  # observed before some warp of the team issued a group before the limit
                if mark and (mark - 1) % nteams == team_id and (mark - 1) // nteams < limit and \
                        (r[R_KNOWN] & lanes) != lanes:
                    if out is None:
                        out = list(w.records)
                    out[i] = (*r[:R_AKNOWN], r[R_AKNOWN] | lanes, r[R_KNOWN] | lanes)
            elif 0 <= grp < UNCOMMITTED and grp % 2 == 1 and grp // 2 < limit and r[R_OWNER] in team \
                    and not (waiter == LEADER and r[R_PART] == FULL):
                learn = lanes & leader if r[R_PART] == LEADER else lanes
                known = r[R_KNOWN] | learn
                r = (*r[:R_FLAGS], r[R_FLAGS] | F_RETIRED, r[R_EPOCH], -1 if (known & everyone) == everyone else grp,
                     r[R_AKNOWN] | learn, known)
                if out is None:
                    out = list(w.records)
                out[i] = r
        if out is not None:
            w.records = tuple(out)
        return True

    def op_fence(self, w, p, proc, op: ir.Fence, ins, env, ctx, lanes) -> bool:
        """fence.proxy.async (§5): the fencing lanes' own generic writes become visible to the
        async proxy. fence.mbarrier_init (§2): the thread's own prior inits are released at
        cluster scope once a cluster barrier arrive follows."""
        space = SPACE_DATA if op.kind == "proxy_async" else SPACE_INIT
        part = self._part(p, ins)
        out = []
        for r in w.records:
            if r[R_SPACE] == space and r[R_OWNER] == p and r[R_KIND] == WRITE and not r[R_FLAGS] & F_ASYNC \
                    and not part_lanes(proc, r[R_PART]) & ~part_lanes(proc, part):
                r = (*r[:R_AKNOWN], r[R_AKNOWN] | (r[R_KNOWN] & self.holders.proc_mask(p)), r[R_KNOWN])
            out.append(r)
        w.records = tuple(out)
        return True

    def op_tmem(self, w, p, proc, op: ir.TmemAlloc, ins, env, ctx, lanes) -> bool:
        """tcgen05.alloc/dealloc (§7). With cta_group 2 the warp pair of the two CTAs acts
        collectively: "the issuing warp must make sure that peer CTA is launched" — so the
        issuer must know the peer's start (SV402) — and each waits for the other."""
        if op.cta_group == 1 or (op.dealloc and not self.assume.dealloc_blocks):
            return self._tmem_columns(w, proc.cta, op)
        idx = self.tmem_rendezvous(proc.cta, op)
        peer = proc.cta ^ 1
        arrived, gen = w.tmem[idx]
        ps = w.procs[p]
        if ps[P_TOKEN] < 0:  # first visit: join the rendezvous
            if not op.dealloc and not self._knows(w.records, (SPACE_START, peer, 0, 0), lanes):
                raise Violation("SV402", f"tmem.alloc cta_group 2 in CTA {proc.cta} may run before peer CTA {peer} "
                                "is running and has initialized its side (PTX: the issuing warp must make sure the "
                                "peer CTA is launched); put a cluster barrier before the allocation", op.span)
            if not self._tmem_columns(w, proc.cta, op):
                return False  # no room in this CTA's tensor memory yet: it joins once it has room
            arrived, new_gen, completes = rules.tm_join(arrived, gen, proc.cta & 1)
            w.tmem[idx] = (arrived, new_gen)
            if completes:
                return True
            w.procs[p] = (*ps[:P_TOKEN], gen, *ps[P_TOKEN + 1:])
            return STAY
        if gen > ps[P_TOKEN]:
            w.procs[p] = (*ps[:P_TOKEN], -1, *ps[P_TOKEN + 1:])
            return True
        return False

    def _tmem_columns_index(self, cta: int) -> int:
        return 2 * ((self.ncta + 1) // 2) + cta

    def _tmem_columns(self, w: _Work, cta: int, op: ir.TmemAlloc) -> bool:
        """Allocate or free op.cols columns of CTA ``cta``'s tensor memory (512 columns). An
        allocation without room cannot move: PTX's tcgen05.alloc "blocks, until the allocation is
        successful" — forever when nothing frees them (a deadlock, SV201). Freeing more than is
        allocated is SV406."""
        idx = self._tmem_columns_index(cta)
        used = w.tmem[idx][0]
        if not op.dealloc:
            if used + op.cols > TMEM_COLUMNS:
                return False
            w.tmem[idx] = (used + op.cols, 0)
            return True
        if op.cols > used:
            raise Violation("SV406", f"tmem.dealloc of {op.cols} columns in CTA {cta}, which has only {used} "
                            "allocated", op.span)
        w.tmem[idx] = (used - op.cols, 0)
        return True

    def tmem_rendezvous(self, cta: int, op: ir.TmemAlloc) -> int:
        """The cta_group 2 rendezvous of CTA ``cta``'s pair (one for allocations, one for
        deallocations): its index into the state's tmem; SV405 where the peer (rank ^ 1) is
        not in the cluster."""
        if cta ^ 1 >= self.ncta:
            raise Violation("SV405", "cta_group 2 needs the peer CTA (rank ^ 1) in the cluster", op.span)
        return (cta // 2) * 2 + int(op.dealloc)

    def op_umma_commit(self, w, p, proc, op: ir.UmmaCommit, ins, env, ctx, lanes) -> bool:
        """tcgen05.commit (§7): an async arrive(1) at cluster scope on each target, once the
        thread's prior tensor-core operations complete."""
        dests = [proc.cta]
        if op.multicast is not None:
            mask = self._eval(op.multicast, env, ctx)
            if mask <= 0 or mask >= 1 << self.ncta:
                raise Violation("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster", op.span)
            dests = [c for c in range(self.ncta) if mask >> c & 1]
        seq = sum(1 for a in w.agents if a[0] == AG_UMMA and a[6] == p)
        for cta in dests:
            m = self._mbar(w, p, op.bar, cta, env, ctx)
            self._check_barrier_usable(w, p, m, lanes, op.span, "umma.commit")
            for _ in range(ins.threads):  # each executing thread commits (and arrives) once; identical
                w.agents.append((AG_UMMA, cta, 0, 0, m, seq, p, op.span.line, 0))  # agents merge
        return True

    # ------------------------------------------------------------------ exit
    def _exit(self, w: _Work, p: int) -> None:
        """A process ran off the end. Only bar/barrier waits are released by exited threads
        (§1.6): a `syncthreads` generation may now be complete, and so may the cluster barrier."""
        cta = self.procs[p].cta
        for bar_id in range(16):
            if w.named[cta * 16 + bar_id].arrived:
                # UNSPECIFIED for explicit counts: we only re-evaluate all-thread generations, so a
                # `bar.sync id, n` that waits for exited warps stays blocked (reported as a deadlock).
                if w.named[cta * 16 + bar_id].count is None:
                    self._nb_try_complete(w, cta, bar_id)
        self._cb_try_complete(w)
        if self._cta_exited(w, cta):
            for r in w.records:
                if r[R_SPACE] == SPACE_DATA and r[R_CTA] == cta and r[R_GRP] >= 0 and not r[R_FLAGS] & F_RETIRED:
                    what = "a bulk store still reads" if r[R_GRP] % 2 == 0 else "a wgmma group still reads"
                    raise Violation("SV404", f"CTA {cta} exits while {what} {self.slot_label(*r[1:4])} (issued at "
                                    f"line {r[R_LINE]}, never retired by a bulk.wait_read / wgmma.wait)",
                                    self.protocol.span, related=((r[R_LINE], "the asynchronous read"),))
            for a in w.agents:
                if a[1] == cta or self.mb_names[a[4]][0] == cta:
                    what = "a bulk copy into its shared memory" if a[0] == AG_TMA else "a tensor-core commit"
                    raise Violation("SV404", f"CTA {cta} exits while {what} (issued at line {a[7]}) is still in "
                                    "flight", self.protocol.span, related=((a[7], "the asynchronous operation"),))

    # ------------------------------------------------------------------ agents
    def _agent_enabled(self, state: State, a: tuple) -> bool:
        if a[0] == AG_UMMA and self.assume.tcgen05_commit_in_order:
            # successive commits of one thread deliver their arrivals in issue order (§10.8)
            return a[5] == min(b[5] for b in state.agents if b[0] == AG_UMMA and b[6] == a[6])
        return True

    def step_agent(self, state: State, a: tuple) -> StepResult:
        w = _Work(state)
        w.agents.remove(a)
        label = ("a", a)
        try:
            if a[0] == AG_TMA:
                self._complete_tma(w, a)
            else:
                self._complete_umma(w, a)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft, w.lone)

    def _agent_span(self, line: int) -> ir.Span:
        return ir.Span(self.protocol.path, line, 1, line, 2)

    def _complete_tma(self, w: _Work, a: tuple) -> None:
        """A bulk copy completes (§5): its weak write lands, then complete_tx(bytes) on its
        barrier with .release at .cluster scope — covering the copy's own write only."""
        _, cta, buf, slot, m, nbytes, issuer, line, _ = a
        if self._cta_exited(w, cta):
            raise Violation("SV404", f"a bulk copy completes into CTA {cta}, which has exited",
                            self._agent_span(line))
        key = (SPACE_DATA, cta, buf, slot)
        cur = self.holders.mb_cur(m)
        # the first matching in-flight write lands (the cheap field tests first; one copy of the records)
        records = w.records
        lo, hi = _key_bounds(w, key)
        for i in range(lo, hi):
            r = records[i]
            if r[R_FLAGS] & F_INFLIGHT and r[R_LINE] == line and r[R_OWNER] == issuer and r[:4] == key:
                w.records = (*records[:i], (*r[:R_FLAGS], r[R_FLAGS] & ~F_INFLIGHT, r[R_EPOCH], r[R_GRP], cur, cur),
                             *records[i + 1:])
                break
        old = w.mbars[m]
        if not old[M_VALID]:
            raise Violation("SV401", f"a bulk copy completes on {self.mb_label(m)}, which is not initialized",
                            self._agent_span(line))
        s = self._rule_state(old)
        if rules.tx_out_of_range(s.tx - nbytes):  # (the span is built only for the report)
            self._tx_check(m, s.tx - nbytes, self._agent_span(line))
        self._set_mb(w, m, rules.mb_complete_tx(s, nbytes), old)

    def _complete_umma(self, w: _Work, a: tuple) -> None:
        m, line = a[4], a[7]
        span = self._agent_span(line)
        old = w.mbars[m]
        if not old[M_VALID]:
            raise Violation("SV401", f"a tensor-core commit arrives on {self.mb_label(m)}, which is not initialized",
                            span)
        self._check_consumption(w, m, span, "umma.commit arrive")
        s = self._rule_state(old)
        if rules.arrive_overflows(s, 1):
            raise Violation("SV504", f"umma.commit arrival on {self.mb_label(m)} with nothing pending", span)
        self._set_mb(w, m, rules.mb_arrive(s, 1), old)

    # ------------------------------------------------------------------ descriptions
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


# The mbarrier events of an operation, as _can_precede sees them (see Machine._future)
_EV_WAIT, _EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE, _EV_NAMED = range(6)
_ANY_UPDATE = frozenset({_EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE})  # every event that changes a barrier
_NO_ARRIVAL = frozenset({_EV_ARRIVE, _EV_FREE, _EV_LIFE})  # what a first observing wait must not follow
_END = ("end",)  # the events of a process's end
_MISSING = object()


class _FreshPass(Exception):
    """_can_precede met a wait that passes on a frozen barrier in phase 0."""


# How successors() treats the instruction at a pc: not an operation (no step), an operation of
# LOCAL_OPS, an mbarrier wait or an arrive that may be taken alone when no init/inval of its barrier
# lies ahead, an arrive.expect_tx on the CTA's own barrier (taken alone when nothing that conflicts
# with it can come first, _can_precede), or any other operation (never taken alone).
_POR_NONE, _POR_LOCAL, _POR_REACHES, _POR_WAIT, _POR_ARRIVE, _POR_ARRIVE_TX, _POR_CLUSTER, _POR_OTHER = (
    "none", "local", "reaches", "wait", "arrive", "arrive_tx", "cluster", "other")
_POR_NAMED = "named"  # bar.sync / bar.arrive: taken alone when the generation cannot complete first (named_por)


def _por_class(ins: Instr) -> str:
    """The static part of successors()' choice of a step to take alone: the operation's type
    and, for an arrive, the form that _lone_arrive accepts (its dynamic part, the barrier's
    lifecycle ahead, is checked on each state)."""
    if ins.kind != OP:
        return _POR_NONE
    op = ins.op
    if isinstance(op, ir.MbarWait):
        return _POR_WAIT
    if isinstance(op, ir.TmaLoad | ir.UmmaCommit) or (isinstance(op, ir.Access) and op.remote is not None):
        return _POR_REACHES  # reaches a barrier's lifecycle or a peer CTA's exit: checked per state
    if type(op) in LOCAL_OPS:
        return _POR_LOCAL
    if isinstance(op, ir.MbarArrive) and op.tx_bytes is None and not op.drop:
        return _POR_ARRIVE
    if isinstance(op, ir.MbarArrive) and not op.drop and op.remote is None:
        return _POR_ARRIVE_TX  # an arrive.expect_tx on its own CTA's barrier: see successors()
    if isinstance(op, ir.ClusterArrive | ir.ClusterWait):
        return _POR_CLUSTER
    if isinstance(op, ir.BarSync | ir.BarArrive):
        return _POR_NAMED
    return _POR_OTHER


def _successor_pcs(prog: Program) -> list[list[int]]:
    """The control-flow graph of a program: every pc's possible next pcs, each branch both ways."""
    code = prog.code
    n = len(code)
    succ: list[list[int]] = []
    for pc, ins in enumerate(code):
        nxt = [] if ins.kind == END else [pc + 1]
        if ins.kind in (FOR_INIT, BRANCH):
            nxt.append(ins.target)
        elif ins.kind == JUMP:
            nxt = [ins.target]
        elif ins.kind == FOR_NEXT:
            nxt.append(ins.target)
        succ.append([t for t in nxt if t < n])
    return succ


def _names_ahead(prog: Program, kinds: tuple[type, ...]) -> list[frozenset[str]]:
    """For every pc: the mbarrier names that ops of the given kinds can still touch from there."""
    code = prog.code
    n = len(code)
    succ = _successor_pcs(prog)
    own = [frozenset({ins.op.bar.name}) if ins.kind == OP and isinstance(ins.op, kinds) else frozenset()
           for ins in code]
    ahead = list(own)
    changed = True
    while changed:  # backward fixpoint over the (small) control-flow graph
        changed = False
        for pc in range(n - 1, -1, -1):
            acc = own[pc].union(*(ahead[t] for t in succ[pc])) if succ[pc] else own[pc]
            if acc != ahead[pc]:
                ahead[pc] = acc
                changed = True
    return ahead


def _must_pass(prog: Program, kind: type, before: type | None = None) -> list[bool]:
    """For every pc: does every path from there to the end pass an op of ``kind`` (and, with
    ``before``, pass it before any op of that kind)?

    The complement of a least fixpoint, "some path reaches END (or ``before``) without passing
    one", over the control-flow graph with every branch taken both ways (so it holds for any
    values)."""
    code = prog.code
    n = len(code)
    succ = _successor_pcs(prog)
    escapes = [ins.kind == END or (before is not None and ins.kind == OP and isinstance(ins.op, before))
               for ins in code]
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            ins = code[pc]
            if escapes[pc] or (ins.kind == OP and isinstance(ins.op, kind)):
                continue
            if any(escapes[t] for t in succ[pc]):
                escapes[pc] = changed = True
    return [not e for e in escapes]


# Operations that only touch their own process, their slot's records and agents they create.
# The group tag (R_GRP = 2 * group + unit) of async reads that lanes 1..31 issued but have not
# committed because their leader committed alone: a group number no wait reaches (see op_commit).
UNCOMMITTED = 2 << 40

LOCAL_OPS = frozenset({
    ir.Access, ir.Fence, ir.Syncwarp, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad,
    ir.UmmaCommit,
})

_HANDLERS = {
    ir.MbarInit: Machine.op_init,
    ir.MbarInval: Machine.op_inval,
    ir.MbarArrive: Machine.op_arrive,
    ir.MbarTx: Machine.op_tx,
    ir.MbarWait: Machine.op_wait,
    ir.BarSync: Machine.op_bar_sync,
    ir.BarArrive: Machine.op_bar_arrive,
    ir.ClusterArrive: Machine.op_cluster_arrive,
    ir.ClusterWait: Machine.op_cluster_wait,
    ir.Syncwarp: Machine.op_syncwarp,
    ir.Access: Machine.op_access,
    ir.TmaLoad: Machine.op_tma_load,
    ir.TmaStore: Machine.op_tma_store,
    ir.GroupCommit: Machine.op_commit,
    ir.GroupWait: Machine.op_group_wait,
    ir.WgmmaRead: Machine.op_wgmma_read,
    ir.Fence: Machine.op_fence,
    ir.TmemAlloc: Machine.op_tmem,
    ir.UmmaCommit: Machine.op_umma_commit,
}
