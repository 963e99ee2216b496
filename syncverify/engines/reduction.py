"""The partial-order reduction's independence conditions: when a step of the explicit search may
be taken alone (Machine.successors asks these; the conditions themselves, with why each is sound,
are in docs/model.md).
"""

from __future__ import annotations

from .. import ir
from ..expr import Context, EvalError, evaluate
from ..semantics.core import (
    _MEMO_LIMIT,
    StepResult,
    Violation,
)
from ..semantics.program import (
    BRANCH,
    END,
    FOR_INIT,
    FOR_NEXT,
    JUMP,
    OP,
    Instr,
    Program,
)
from ..semantics.state import (
    AG_TMA,
    M_K,
    M_PEND,
    M_TX,
    P_CLTOKEN,
    P_PC,
    P_VARS,
    State,
)
from .tx_por import landings_commute, updates_commute

_EV_WAIT, _EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE, _EV_NAMED = range(6)
_ANY_UPDATE = frozenset({_EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE})  # every event that changes a barrier
_NO_ARRIVAL = frozenset({_EV_ARRIVE, _EV_FREE, _EV_LIFE})  # what a first observing wait must not follow
_END = ("end",)  # the events of a process's end
_MISSING = object()


# How successors() treats the instruction at a pc: not an operation (no step), an operation of
# LOCAL_OPS, an mbarrier wait or an arrive that may be taken alone when no init/inval of its barrier
# lies ahead, an arrive.expect_tx on the CTA's own barrier (taken alone when nothing that conflicts
# with it can come first, _can_precede), or any other operation (never taken alone).
_POR_NONE, _POR_LOCAL, _POR_REACHES, _POR_WAIT, _POR_ARRIVE, _POR_ARRIVE_TX, _POR_CLUSTER, _POR_OTHER = (
    "none", "local", "reaches", "wait", "arrive", "arrive_tx", "cluster", "other")
_POR_NAMED = "named"  # bar.sync / bar.arrive: taken alone when the generation cannot complete first (named_por)


# Operations that only touch their own process, their slot's records and agents they create.
LOCAL_OPS = frozenset({
    ir.Access, ir.Fence, ir.Syncwarp, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad,
    ir.UmmaCommit, ir.TcMma, ir.TmemAccess, ir.TcWait, ir.TcFence,
})


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
    if isinstance(op, ir.TcMma) and op.cta_group == 2:
        return _POR_OTHER  # reads and writes the peer CTA's memory
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


def reuse_warnings_only(res: StepResult) -> bool:
    """Are a plain arrive's findings only SV602 warnings (a `.cta`-scope remote arrive that carries
    no data made outside the target CTA, so it only guards reuse)? Such a step may still be taken
    alone: the warning is decided on the records the arriving lanes know that were made outside
    the target CTA. Only the arriving process's own steps (its accesses, waits and barrier waits)
    make a record known to its lanes; another process's step can only remove such a record (a
    covering write) or leave it, so what is a warning here, with the step first, is a warning in
    every order that runs the step later, and the barrier's record of a data-carrying release
    is not set in any of them (docs/model.md)."""
    return all(w.code == "SV602" for w in res.warnings)


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


Element = tuple[str, int | None]  # an element of a barrier or buffer array; index None: any element of it


def ref_element(ref: ir.Ref, env: dict, ctx: Context) -> Element:
    """The element of a barrier or buffer array a reference names under ``env`` (None: not evaluable
    there, or `[*]`: any element)."""
    if ref.every:
        return (ref.name, None)
    if ref.index is None:
        return (ref.name, 0)
    try:
        return (ref.name, evaluate(ref.index, env, ctx))
    except EvalError:
        return (ref.name, None)


def touches(ahead: frozenset[Element], name: str, index: int | None) -> bool:
    """May an operation in ``ahead`` touch element ``index`` of array ``name`` (None: any element)?"""
    if index is None:
        return any(n == name for n, _ in ahead)
    return (name, None) in ahead or (name, index) in ahead


def _elements_ahead(prog: Program, kinds: tuple[type, ...], ctx: Context) -> list[frozenset[Element]]:
    """For every pc: the mbarrier elements that ops of the given kinds can still touch from there.

    An index is evaluated in the process's context alone (its CTA, instance and roles; the
    protocol's parameters are constants by now): one that reads a loop or `let` variable stands
    for every element of its array. Extracted kernels keep all their barriers in one array, so
    a name alone would make every barrier conflict with every other (docs/model.md)."""
    code = prog.code
    n = len(code)
    succ = _successor_pcs(prog)
    own = [frozenset({ref_element(ins.op.bar, {}, ctx)}) if ins.kind == OP and isinstance(ins.op, kinds)
           else frozenset() for ins in code]
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


class Reduction:
    """The reduction's conditions over a Machine's states (a mixin of Machine)."""

    def _some_step_breaks_a_rule(self, state: State, tried: dict[int, StepResult | None]) -> bool:
        """Does the step of some process break a rule (a violation, whether it ends its path or is
        a soft finding the search goes on past)? The steps are computed into ``tried`` (a blocked
        wait costs a lookup), for the expansion to reuse. A soft finding counts too: taking another
        step alone first would report it later than on its shortest path, or (a fence the other step
        issues) not at all."""
        procs = state.procs
        for p, classes in enumerate(self._por_class):
            if classes[procs[p][P_PC]] is _POR_NONE:
                continue
            res = tried[p] if p in tried else tried.setdefault(p, self.step_process(state, p))
            if res is not None and (res.violation is not None or res.soft):
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
        only when the peer cannot exit first (_peer_cannot_exit_first, or failing that
        _peer_cannot_end_first)."""
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        targets = self._targets(p, ins.op, pstate[P_PC], pstate[P_VARS])
        if targets is None:
            return False  # not evaluable here: the step reports it, and is not taken alone
        op = ins.op
        own = self.procs[p].cta
        elem = self._element_of(p, op.bar, pstate[P_VARS]) \
            if isinstance(op, ir.MbarArrive | ir.TmaLoad | ir.UmmaCommit) else None
        for d in targets:
            if elem is not None and not self._no_lifecycle_ahead(state, p, elem, d):
                return False
            if d != own and not (self._peer_cannot_exit_first(state, p, d) or self._peer_cannot_end_first(state, p, d)):
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
        _, name, index = self.mb_names[m]
        return not any(q != p and touches(self.tx_ahead[q][state.procs[q][P_PC]], name, index)
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
        if out is not None and isinstance(op, ir.TmaLoad) and op.cta_group == 2:
            out = tuple(sorted({*out, *(d & ~1 for d in out)}))  # a 2-SM copy signals the pair leader's barrier
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

    def _peer_cannot_end_first(self, state: State, p: int, cta: int) -> bool:
        """Can CTA ``cta`` not exit before process p's next step, by what can run before it?

        A CTA exits when its last process ends. ``_can_precede`` (nothing forbidden, p frozen)
        over-approximates what every execution that avoids p's step runs, and says which processes
        can reach their end in it: if some process of ``cta`` cannot, no such execution has the
        CTA exit first. CUTLASS's producer keeps its CTA alive this way: its load_tail waits on
        every empty barrier for the consumers' releases, the peer's remote ones included
        (docs/model.md). Not under a loop hook, where the sequences are not fixed."""
        if self.loop_hook is not None:
            return False
        ends = self._can_precede(state, -1, p, None, frozenset(), False)
        return ends is not None and not all(ends[q] for q in self.procs_of_cta[cta])

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
            cta, name, index = self.mb_names[m]  # the barrier's CTA: the arrive may be remote
            for q in self.procs_of_cta[cta]:
                if q != p and touches(self.waits_ahead[q][state.procs[q][P_PC]], name, index) and \
                        self._jprev(before, q) is None:
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
        what can run before it (``_can_precede``, with m's phase frozen), no commit counts
        on m, no process reaches an arrive_drop, init or inval of m, and some process of the
        copy's CTA does not reach its end. What can come first otherwise commutes with it or,
        taken after it, reports a violation of its own (docs/model.md). The other updates of m
        that can come first — copies in flight, and the arrivals, tx updates and copies of the
        processes in that set (a peer's multicast copy, the CTA's own arrive.expect_tx) — are
        allowed where no set of them short of all, with the landing, completes m's phase
        (tx_por.updates_commute), and then no wait on m in the set may pass now."""
        if not self._landings_commute(state, a[4], a, -1):  # the cheap condition first
            return False
        updates: list = []
        ends = self._can_precede(state, a[4], -1, a, _ANY_UPDATE, True, landings_ok=True, updates=updates)
        if ends is None or all(ends[q] for q in self.procs_of_cta[a[1]]):
            return False
        if not updates:
            return True
        mb = state.mbars[a[4]]
        updates.extend((0, -nbytes) for nbytes in self._other_landings(state, a[4], a))
        return updates_commute(mb[M_PEND], mb[M_TX], (0, -a[5]), updates)

    def _landings_commute(self, state: State, m: int, agent: tuple | None, p: int) -> bool:
        """Do the copies in flight on m (other than ``agent``) commute with the step: the landing
        of ``agent``, or process p's arrive.expect_tx on m (tx_por.landings_commute)?"""
        landings = self._other_landings(state, m, agent)
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

    @staticmethod
    def _other_landings(state: State, m: int, agent: tuple | None) -> list[int]:
        """The byte counts of the copies in flight on m, less ``agent`` (once: equal copies may be
        one interned tuple)."""
        landings = []
        skip = agent is not None
        for b in state.agents:
            if skip and b is agent:
                skip = False
                continue
            if b[4] == m and b[0] == AG_TMA:
                landings.append(b[5])
        return landings

    def _can_precede(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                     freeze: bool, named: tuple[int, list] | None = None,
                     landings_ok: bool = False, updates: list | None = None) -> list[bool] | None:
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
        m', a non-positive arrival count, an invalid m' and every other kind of wait (all-thread
        named barriers, cluster barriers, tensor memory) are taken to pass, except the wait of a
        `bar.sync` with an explicit count, which passes only when its generation can fill
        (engines/precede_walk.py). Every execution that avoids the step
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

        ``updates``: with ``freeze``, the processes' arrivals and byte counts on m in the set are
        appended to it as (arrivals, tx-count change) instead of answering None (an arrive_drop,
        init or inval of m still answers None), and a wait on m in the set that passes now
        answers None where any was appended; the caller checks their sums (_lands_first).

        ``named`` = (index, out): the step is an arrival on named barrier ``index`` (m is -1 and
        nothing is forbidden); every arrival on it that can come first is appended to ``out`` as
        its event, and a process stops after a `bar.sync` on it and at a wait parked on it: the
        caller (named_por) takes the step only where the open generation cannot complete before
        it, so such a wait cannot pass first.

        The walk is engines/precede_walk.py; its answers are remembered by what it reads
        (engines/precede_memo.py, kept as ``_precede`` by the machine)."""
        return self._precede(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates)

    def _future(self, key: tuple) -> tuple[tuple, tuple | None] | None:
        """The mbarrier events of the instruction at ``key`` = (process, pc, variables), and the
        key of the process's next instruction: (_END, None) at the end; None when a target or
        the local control flow after it cannot be evaluated. It depends only on the key (control
        flow depends only on loop variables), so it is remembered.

        Events: (_EV_WAIT, m, parity), (_EV_ARRIVE, m, arrivals, tx) for an arrival that adds tx
        to the tx-count with it (0 but for an arrive.expect_tx), (_EV_BYTES, m, tx) for a tx update
        or a copy that will count on m (tx: the change it makes, 0 for an arrive.expect_tx, whose
        bytes its arrival carries; one per copy: a copy issued by n threads is n of them), (_EV_FREE,
        m) for an arrive_drop or a non-positive count,
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
            nbytes = 0 if op.tx_bytes is None else evaluate(op.tx_bytes, env, ctx) * ins.threads
            if op.drop or count <= 0:
                events = [(_EV_FREE, m2)]
                if op.tx_bytes is not None:
                    events.append((_EV_BYTES, m2, nbytes))
            else:
                events = [(_EV_ARRIVE, m2, count, nbytes)]
                if op.tx_bytes is not None:
                    events.append((_EV_BYTES, m2, 0))
            return tuple(events)
        if isinstance(op, ir.MbarTx):
            nbytes = evaluate(op.tx_bytes, env, ctx) * ins.threads
            m2 = index(op.bar, own if op.remote is None else evaluate(op.remote, env, ctx))
            return ((_EV_BYTES, m2, nbytes if op.kind == "expect" else -nbytes),)
        if isinstance(op, ir.TmaLoad):
            nbytes = evaluate(op.tx_bytes, env, ctx)
            return tuple((_EV_BYTES, index(op.bar, c & ~1 if op.cta_group == 2 else c), -nbytes)
                         for c in dests(op.multicast) for _ in range(ins.threads))
        if isinstance(op, ir.UmmaCommit):
            return tuple((_EV_ARRIVE, index(op.bar, c), ins.threads, 0) for c in dests(op.multicast))
        if isinstance(op, ir.CpAsyncArrive):
            # .noinc: an arrival per thread; otherwise the increment nets the arrival out, and a
            # pending count that can rise bounds nothing (taken as free)
            m2 = index(op.bar, own)
            return ((_EV_ARRIVE, m2, ins.threads, 0),) if op.noinc else ((_EV_FREE, m2),)
        if isinstance(op, ir.MbarInit | ir.MbarInval | ir.MbarTestWait):
            # (a test_wait acquires or not depending on what came first: no step on its barrier
            # is taken alone while one can come first, as for a lifecycle change)
            return ((_EV_LIFE, (own, op.bar.name)),)
        if isinstance(op, ir.BarSync | ir.BarArrive):
            return ((_EV_NAMED, *self.named_arrival(q, op, vars_)),)
        return ()

    def _element_of(self, p: int, ref: ir.Ref, vars_: tuple) -> Element:
        """The barrier element process p's reference names under its variables."""
        return ref_element(ref, self.env(p, vars_), self.ctx[p])

    def _no_lifecycle_ahead(self, state: State, p: int, elem: Element, cta: int | None = None) -> bool:
        """No other process of ``cta`` (default: p's CTA) can still init or inval barrier element ``elem``."""
        name, index = elem
        for q in self.procs_of_cta[self.procs[p].cta if cta is None else cta]:
            if q != p and touches(self.lifecycle_ahead[q][state.procs[q][P_PC]], name, index):
                return False
        return True
