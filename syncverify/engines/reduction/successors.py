"""The reduced successor function: of the steps the model offers in a state, the ones a search
explores (partial-order reduction).

The model (semantics/machine.py) says what can happen: ``Machine.successors`` yields every enabled
step, and the machine's footprint queries (semantics/footprint.py) say what a step touches. The
search decides what to explore: ``Reduction(machine).successors`` yields one step where that step
may be taken alone (a persistent set of size one) and every enabled step otherwise. The rules it
asks are the modules beside it: element.py (what a program can still touch, per barrier element),
tx.py (byte counts and landings), arrive_tx.py (an arrive.expect_tx among other processes' byte
counts), named.py (named-barrier arrivals), exit.py (exits), first_wait.py
(a plain arrive that completes a phase before a first wait), cp_arrive.py (cp.async arrive-ons),
probe_pair.py (both outcomes of a completed probe, a persistent set of two), and the walk
of what can come before a step (precede_walk.py, remembered by precede_memo.py). Why each rule is
sound is in docs/model.md, "The search and its reductions".
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from ... import ir
from ...semantics.core import StepResult, Violation
from ...semantics.program import END, OP, Instr
from ...semantics.state import AG_CPARRIVE, AG_TMA, M_K, M_PEND, P_PC, P_VARS, State
from .arrive_tx import lone_arrive_tx_among_byte_counts
from .cp_arrive import lone_cp_arrival, lone_cp_arrive_issue, lone_cp_copy
from .cta_local import CtaLocalSteps
from .element import ElementRules, _elements_ahead, _must_pass, counts_bytes, reuse_warnings_only
from .exit import lone_early_exit, lone_exit_after_arrive, lone_exit_after_wait, lone_final_exit
from .first_wait import lone_completing_arrive
from .hooked import governed_loops
from .init_alone import InitAlone
from .loop_envs import loop_envs
from .named import lone_named_arrival
from .precede_memo import PrecedeMemo
from .precede_walk import _ANY_UPDATE, _NO_ARRIVAL, can_precede
from .probe_outcome import KeptProbeOutcomes
from .probe_pair import probe_outcomes
from .rendezvous import AllocRendezvous
from .tc_warning import unfenced_tmem_warnings_only
from .tx import LandingRules

if TYPE_CHECKING:
    from ...semantics.machine import Machine


# How successors() treats the instruction at a pc: not an operation (no step), an operation of
# LOCAL_OPS, an mbarrier wait or an arrive that may be taken alone when no init/inval of its barrier
# lies ahead, an arrive.expect_tx on the CTA's own barrier (taken alone when nothing that conflicts
# with it can come first, _can_precede), or any other operation (never taken alone).
_POR_NONE, _POR_LOCAL, _POR_REACHES, _POR_WAIT, _POR_ARRIVE, _POR_ARRIVE_TX, _POR_CLUSTER, _POR_OTHER = (
    "none", "local", "reaches", "wait", "arrive", "arrive_tx", "cluster", "other")
_POR_NAMED = "named"  # bar.sync / bar.arrive: taken alone when the generation cannot complete first (named.py)
_POR_INIT = "init"  # an mbarrier init: taken alone when no other actor may still touch its barrier (init_alone.py)
_POR_RELINQUISH = "relinquish"  # tmem.relinquish: alone where no other process of the CTA may allocate (rendezvous.py)
_POR_CP_ARRIVE = "cp_arrive"  # cp.async.mbarrier.arrive: alone where its barrier's phase is frozen (cp_arrive.py)
_POR_CP_COPY = "cp_copy"  # cp.async: local, alone where no other process reaches its slot before a wait (cp_arrive.py)
_POR_PROBE = "probe"  # a probe: both outcomes together where its phase has completed (probe_pair.py)


# Operations that only touch their own process, their slot's records and agents they create.
LOCAL_OPS = frozenset({
    ir.Access, ir.Fence, ir.Syncwarp, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad,
    ir.UmmaCommit, ir.TcMma, ir.TmemAccess, ir.TcWait, ir.TcFence, ir.TensormapReplace, ir.TensormapFence,
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
    if isinstance(op, ir.CpAsync):
        return _POR_CP_COPY
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
    if isinstance(op, ir.MbarInit):
        return _POR_INIT
    if isinstance(op, ir.TmemRelinquish):
        return _POR_RELINQUISH
    if isinstance(op, ir.CpAsyncArrive):
        return _POR_CP_ARRIVE
    if isinstance(op, ir.MbarProbe):
        return _POR_PROBE
    return _POR_OTHER


class Reduction(ElementRules, LandingRules):
    """The partial-order reduction of one machine's steps: ``successors`` is the search's successor
    function; the tables it reads of each program, fixed by the program, are computed here once."""

    def __init__(self, machine: Machine, cover_probes: bool = True) -> None:
        self.machine = machine
        # (a test_wait counts: whether it acquires depends on what comes first, as for an init)
        envs = [loop_envs(prog, ctx, governed_loops(machine, q))
                for q, (prog, ctx) in enumerate(zip(machine.programs, machine.ctx, strict=True))]
        self.lifecycle_ahead = [_elements_ahead(prog, (ir.MbarInit, ir.MbarInval, ir.MbarTestWait), ctx, env)
                                for prog, ctx, env in zip(machine.programs, machine.ctx, envs, strict=True)]
        # (a probe counts as the wait it is when it returns true: families/mbarrier_probe.py)
        self.waits_ahead = [_elements_ahead(prog, (ir.MbarWait, ir.MbarTestWait, ir.MbarProbe), ctx, env)
                            for prog, ctx, env in zip(machine.programs, machine.ctx, envs, strict=True)]
        # barriers that bytes can still be counted on (expect/complete_tx, copies, commits, arrive.expect_tx)
        self.tx_ahead = [_elements_ahead(prog, counts_bytes, ctx, env)
                         for prog, ctx, env in zip(machine.programs, machine.ctx, envs, strict=True)]
        self._bytes_memo: dict[tuple, frozenset[int] | None] = {}  # (q, pc, vars) -> element._bytes_ahead
        self._hooked_bytes_memo: dict[tuple, tuple] = {}  # the same under a loop hook, with its tests
        self._hooked_slots_memo: dict[tuple, tuple] = {}  # cp_arrive._slots_before_wait under a loop hook
        self.cluster_wait_ahead = [_must_pass(prog, ir.ClusterWait) for prog in machine.programs]
        # Does every cluster arrive of every program have a cluster wait after it on every path
        # to the end? Then no thread can count on the cluster barrier and exit (an exited
        # thread's arrival still counts, so such an exit could complete a generation without
        # a warp that has not arrived): see successors() on taking cluster operations alone.
        # It must come before the warp's next arrive: a warp may arrive again once the generation
        # of its earlier arrival has completed (rules.cb_arrives_twice), so whether a second arrive
        # breaks SV205 depends on the order of other warps' arrivals, which must all be explored.
        waited_before_next = [_must_pass(prog, ir.ClusterWait, ir.ClusterArrive) for prog in machine.programs]
        self.cluster_arrivals_waited = all(
            waited_before_next[q][pc + 1] for q, prog in enumerate(machine.programs)
            for pc, ins in enumerate(prog.code) if ins.kind == OP and isinstance(ins.op, ir.ClusterArrive))
        # what successors() needs to know of each instruction, fixed by the program
        self._por_class = [[_por_class(ins) for ins in prog.code] for prog in machine.programs]
        if not self.cluster_arrivals_waited:  # cluster operations are then never taken alone
            self._por_class = [[_POR_OTHER if c is _POR_CLUSTER else c for c in cs] for cs in self._por_class]
        # the processes that are parts of one warp split between roles (Machine.warp_parts): their
        # syncwarps meet (op_syncwarp), so those are not local steps
        for q in machine.warp_parts:
            self._por_class[q] = [_POR_OTHER if ins.kind == OP and isinstance(ins.op, ir.Syncwarp) else c
                                  for ins, c in zip(machine.programs[q].code, self._por_class[q], strict=True)]
        # what can come before a step (_can_precede): the walk of precede_walk (its segments kept
        # in the dict), answered from a table keyed by what it reads (precede_memo)
        self._precede = PrecedeMemo(machine, partial(can_precede, machine, {}))
        self._cp_slots: dict[tuple, frozenset | None] = {}  # (q, pc, vars) -> cp_arrive._slots_before_wait
        self._ends_memo: dict[tuple, bool] = {}  # (p, pc, vars) -> does the arrive there end p (_arrive_ends)
        self.cta_local = CtaLocalSteps(machine)  # the steps of one CTA as a persistent set (init_alone.py)
        self.rendezvous = AllocRendezvous(machine)  # a CTA pair's tensor-memory allocation (rendezvous.py)
        self.inits = InitAlone(machine)  # an mbarrier init no other actor may still touch, alone (init_alone.py)
        # a kept probe's true step, left out where its false step covers it (probe_outcome.py)
        self.full = True  # whether the last successors() yielded every step the model offers
        self.kept_probes = KeptProbeOutcomes(machine, [[c is _POR_LOCAL for c in cs] for cs in self._por_class],
                                             cover_probes)

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
        as it stands, not after other steps that might turn it into another one). Under a loop hook
        (the all-iterations lift) each walk's answer holds for the trip counts its tests leave open
        (hooked.py; docs/model.md, "Lone steps under the lift").

        Where no step is taken alone, every enabled step of one CTA whose steps touch only its own
        objects while no other CTA can touch them (cta_local.py, docs/model.md "Steps of one CTA"),
        or else every step the model offers (Machine.successors), those computed here handed on
        rather than computed again.

        ``full`` says afterwards whether the steps yielded were every step the model offers (the lift
        recomputes a reduced set, not a full expansion, with its trip count fixed: search.py)."""
        machine = self.machine
        self.full = False
        tried: dict[int, StepResult | None] = {}  # steps computed for the reduction, reused below
        procs = state.procs
        landed: dict[tuple, StepResult] = {}  # landings computed for the reduction, reused below
        observing: list[int] = []  # passing waits that observe a phase first: taken alone below, maybe
        unstepped: set[int] = set()  # ... of them, the waits whose step the first loop left to there
        arriving: list[int] = []  # arrive.expect_tx: taken alone below, maybe
        naming: list[int] = []  # named-barrier arrivals: taken alone below, maybe
        completing: list[int] = []  # plain arrives that complete a phase before a first wait (first_wait.py)
        cp_arriving: list[int] = []  # cp.async.mbarrier.arrive issues (cp_arrive.py)
        probing: list[int] = []  # probes whose phase has completed: both outcomes together, maybe (probe_pair.py)
        armed: list[tuple[int, int]] = []  # arrive.expect_tx refused only by the walk, and its barrier (arrive_tx.py)
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
                if machine.wait_cannot_be_lone(state, p):
                    # at best an observing wait, asked about below: its step is computed there, if at all
                    observing.append(p)
                    unstepped.add(p)
                    continue
            elif cls is _POR_CP_COPY:
                lone_wait = False
                if not lone_cp_copy(self, state, p, self._cp_slots):
                    continue
            elif cls is _POR_INIT:
                lone_wait = False
                if not self.inits.lone(state, p):
                    continue
            elif cls is _POR_RELINQUISH:
                lone_wait = False
                if not self.rendezvous.relinquish_alone(state, p):
                    continue
            elif cls is _POR_ARRIVE:
                lone_wait = False
                if (self._arrive_ends(p, procs[p]) and not lone_exit_after_arrive(self, state, p)) or \
                        not self._lone_reaching_op(state, p):
                    continue
                if self._arrive_set_aside(state, p):
                    completing.append(p)
                    continue
            else:
                if cls is _POR_ARRIVE_TX:
                    arriving.append(p)
                elif cls is _POR_NAMED:
                    naming.append(p)
                elif cls is _POR_CP_ARRIVE:
                    cp_arriving.append(p)
                elif cls is _POR_PROBE:
                    probing.append(p)
                continue
            res = tried[p] = machine.step_process(state, p)
            if res is None or res.violation is not None or res.soft or \
                    (res.warnings and not (cls is _POR_ARRIVE and reuse_warnings_only(res)) and
                     not (cls is _POR_LOCAL and unfenced_tmem_warnings_only(res))):
                continue
            early = False  # an exit taken alone while others run (exit.lone_early_exit)
            if machine.programs[p].code[res.state.procs[p][P_PC]].kind == END:
                if cls is _POR_WAIT:
                    if not lone_exit_after_wait(self, state, p):
                        continue
                elif cls is _POR_ARRIVE:
                    if not lone_exit_after_arrive(self, state, p):
                        continue
                elif cls is not _POR_CLUSTER:
                    continue
                elif not lone_final_exit(self, state, p):
                    early = lone_early_exit(self, state, p)
                    if not early:
                        continue
            if lone_wait:
                if not res.lone:
                    observing.append(p)
                    continue
                if not self._no_lifecycle_ahead(state, p, machine.element_of(
                        p, machine.programs[p].code[procs[p][P_PC]].op.bar, procs[p][P_VARS])):
                    continue
            elif cls is _POR_CLUSTER and not res.lone and not early:
                continue
            if cls is _POR_ARRIVE and self._completes_fresh_phase_before_a_first_wait(state, res, p):
                completing.append(p)
                continue
            if cls is _POR_INIT and not self.inits.result_alone(state, res, p):
                continue
            if cls is _POR_RELINQUISH and not self.rendezvous.keeps_to(state, res, p):
                continue
            yield res
            return
        if (observing or arriving or naming or completing or cp_arriving or probing or state.agents) and \
                not self._some_step_breaks_a_rule(state, tried):
            # Steps taken alone when nothing that could come first conflicts with them (_can_precede);
            # not where another process's step breaks a rule: that is reported here, as it stands.
            for p in observing:
                if p in unstepped and not self._observing_wait(state, p, tried):
                    continue
                m = machine.wait_barrier(state, p)
                # in phase 0 the wait may pass without observing (a first wait with parity 1): then
                # nothing may change the phase first; later it observes, and only arrivals conflict,
                # unless no arrival is pending: bytes alone may then complete the unobserved phase
                # first, the SV502 that order reports and this one does not (docs/model.md)
                forbidden = _ANY_UPDATE if state.mbars[m][M_K] == 0 or state.mbars[m][M_PEND] <= 0 else _NO_ARRIVAL
                if self._can_precede(state, m, p, None, forbidden, False) is not None:
                    yield tried[p]  # type: ignore[misc]
                    return
            # The conditions on each candidate are pure and all must hold, so they are asked cheapest
            # first: the step itself is already in ``tried`` (_some_step_breaks_a_rule computed it), and
            # one that warns (the SV204 of a CUTLASS epilogue's bar.sync) needs no walk. On the 1x1
            # ping-pong GEMM that skips most of the walks the named arrivals asked for.
            for p in arriving:
                m = machine.arrive_target(state, p)
                if m is None or not self._landings_commute(state, m, None, p):
                    continue
                res = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
                if res is not None and res.violation is None and not res.warnings and not res.soft and \
                        machine.programs[p].code[res.state.procs[p][P_PC]].kind != END and \
                        not self._completes_fresh_phase_before_a_first_wait(state, res, p):
                    if self._can_precede(state, m, p, None, _ANY_UPDATE, False, landings_ok=True) is not None:
                        yield res
                        return
                    armed.append((p, m))  # asked again below, among byte counts (arrive_tx.py)
            for p in naming:
                if self._named_step_clean(state, p, tried) and lone_named_arrival(self, state, p):
                    yield tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
                    return
            for a in state.agents:
                if a[0] != AG_TMA or a in landed or not self._lands_first(state, a):
                    continue
                res = landed[a] = machine.step_agent(state, a)
                if res.violation is None and not res.warnings and not res.soft:
                    yield res
                    return
            for p in completing:  # after the others: each of those, where it applies, is taken first
                res = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
                if lone_completing_arrive(self, state, p, res):
                    yield res  # type: ignore[misc]
                    return
            for p in cp_arriving:  # cp.async arrive issues, then arrive-ons, after the others (cp_arrive.py)
                if lone_cp_arrive_issue(self, state, p, tried[p] if p in tried else
                                        tried.setdefault(p, machine.step_process(state, p))):
                    yield tried[p]  # type: ignore[misc]
                    return
            for a in state.agents:
                if a[0] == AG_CPARRIVE and a not in landed and \
                        lone_cp_arrival(self, state, a, landed.setdefault(a, machine.step_agent(state, a))):
                    yield landed[a]
                    return
            for p in probing:  # last: a set of two, where no step above goes alone
                pair = probe_outcomes(self, state, p, tried)
                if pair is not None:
                    yield from self.kept_probes.without_covered(state, pair)
                    return
            # last, so that where a rule above applies its step is still the one taken (arrive_tx.py)
            for p, m in armed:
                if lone_arrive_tx_among_byte_counts(self, state, m, p):
                    yield tried[p]  # type: ignore[misc]
                    return
        # the warps at a CTA pair's tensor-memory allocation (rendezvous.py), else one CTA's steps, where they
        # qualify (cta_local.py); not where a step breaks a rule (as above)
        local = self.rendezvous.steps(state, tried) or self.cta_local.steps(state, tried, landed)
        if local is not None and not self._some_step_breaks_a_rule(state, tried):
            yield from self.kept_probes.without_covered(state, local)
            return
        self.full = not self.kept_probes.may_leave_out()
        yield from self.kept_probes.without_covered(state, machine.successors(state, tried, landed))

    def _observing_wait(self, state: State, p: int, tried: dict[int, StepResult | None]) -> bool:
        """The first loop's conditions on a wait it puts among the observing waits, asked of one whose
        step it did not compute (Machine.wait_cannot_be_lone: its step cannot be taken alone there).

        Why the step is left. The first loop takes the first process's step that may go alone; a
        wait whose step cannot say that it commutes (``lone``) is at best an observing wait, asked
        about only once no step was taken alone by the first loop, after every process's step is
        computed anyway (_some_step_breaks_a_rule). On the 2x1 ping-pong GEMM such waits were most
        of the steps the first loop computed and set aside in the states where it then took a later
        process's step. The conditions are the first loop's, in its order, on the same step (a step
        is a function of the state), so the same waits are observing, in the same order."""
        res = tried[p] if p in tried else tried.setdefault(p, self.machine.step_process(state, p))
        if res is None or res.violation is not None or res.soft or res.warnings:
            return False
        if res.lone:  # Machine.wait_cannot_be_lone is exact, so this never holds
            raise AssertionError(f"the wait of process {p} commutes although its barrier said it cannot")
        return self.machine.programs[p].code[res.state.procs[p][P_PC]].kind != END or \
            lone_exit_after_wait(self, state, p)

    def _arrive_ends(self, p: int, pstate: tuple) -> bool:
        """Does process p's plain arrive (class _POR_ARRIVE) end the process? Such a step is not
        taken alone (an exit has effects on barriers) unless p may leave early
        (exit.lone_exit_after_arrive), so where it may not, the first loop of successors() need not
        compute it: on the 2x1 ping-pong GEMM the last arrive of the math warps (their final
        consumer release) was computed, and set aside, in nearly every state while they sat
        before it, a third of the steps computed.

        An arrive never moves its process but to the next instruction and changes no variable
        (MbarrierOps.op_arrive returns True), so the pc after it is the local control flow from
        pc + 1 (Machine._run_local), a function of (p, pc, vars) remembered here, but under a loop
        hook (its trip counts keep state of their own: the control flow is run each time, and its
        tests recorded, as the step's would be). Not where that control flow cannot be run (the
        step reports that): the step is then computed as before."""
        machine = self.machine
        hooked = machine.loop_hook is not None
        key = (p, pstate[P_PC], pstate[P_VARS])
        ends = None if hooked else self._ends_memo.get(key)
        if ends is None:
            try:
                npc, _ = machine._run_local(p, pstate[P_PC] + 1, pstate[P_VARS])
            except Violation:
                return False
            ends = machine.programs[p].code[npc].kind == END
            if not hooked:
                self._ends_memo[key] = ends
        return ends

    def _some_step_breaks_a_rule(self, state: State, tried: dict[int, StepResult | None]) -> bool:
        """Does the step of some process break a rule (a violation, whether it ends its path or is
        a soft finding the search goes on past)? The steps are computed into ``tried`` (a blocked
        wait costs a lookup), for the expansion to reuse, except a named arrival that
        Machine.named_arrival_quiet knows to leave its generation open (it breaks no rule) and an
        mbarrier arrive, arrive.expect_tx or wait whose findings Machine.mbar_arrival_findings or
        Machine.mbar_wait_findings knows. A soft
        finding counts too: taking another step alone first would report it later than on its
        shortest path, or (a fence the other step issues) not at all."""
        machine = self.machine
        procs = state.procs
        for p, classes in enumerate(self._por_class):
            cls = classes[procs[p][P_PC]]
            if cls is _POR_NONE:
                continue
            if p in tried:
                res = tried[p]
            elif cls is _POR_NAMED and machine.named_arrival_quiet(state, p) is not None:
                continue  # a named arrival that leaves its generation open: it breaks no rule
            elif (cls is _POR_ARRIVE or cls is _POR_ARRIVE_TX) and \
                    (found := machine.mbar_arrival_findings(state, p)) is not None:
                if found.violation is not None or found.soft:
                    return True
                continue  # an mbarrier arrival known to break no rule
            elif cls is _POR_WAIT and (found := machine.mbar_wait_findings(state, p)) is not None:
                if found.violation is not None or found.soft:
                    return True
                continue  # an mbarrier wait known to break no rule (or blocked)
            else:
                res = tried[p] = machine.step_process(state, p)
            if res is not None and (res.violation is not None or res.soft):
                return True
        return False

    def _named_step_clean(self, state: State, p: int, tried: dict[int, StepResult | None]) -> bool:
        """Does the step of process p's named-barrier arrival report nothing and leave p running
        (the conditions on its step before lone_named_arrival is asked)? From the step where it is
        computed, else from Machine.named_arrival_quiet, which answers without the step's knowledge
        updates where the arrival leaves its generation open (and the step is then computed only
        if it is taken). On the 2x1 cooperative GEMM the epilogue's `bar.sync` steps were computed
        in most states to learn that they break no rule, and set aside there."""
        machine = self.machine
        if p not in tried:
            quiet = machine.named_arrival_quiet(state, p)
            if quiet is not None:
                return not quiet
            tried[p] = machine.step_process(state, p)
        res = tried[p]
        return res is not None and res.violation is None and not res.warnings and not res.soft and \
            machine.programs[p].code[res.state.procs[p][P_PC]].kind != END

    def _can_precede(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                     freeze: bool, named: tuple[int, list] | None = None,
                     landings_ok: bool = False, updates: list | None = None,
                     goal: tuple[int, ...] = ()) -> list[bool] | None:
        """What the other actors can execute before one step (of process ``frozen``, or the
        landing of ``agent``) that concerns mbarrier m: for each process, whether it can reach
        its end first; None when some actor can first reach an event on m of a kind in
        ``forbidden`` (or an operation whose target cannot be evaluated). ``freeze``: the caller
        has made sure that nothing else can complete m's current phase first (a landing with
        every update of m forbidden), so a wait on m passes only if it passes now.

        Control flow depends only on loop variables, so each process runs a fixed sequence of
        operations from where it stands (``Machine.future``); the frozen process does not move. The
        set computed is the least fixpoint of: a process can execute the next operation of its
        sequence if that is not an mbarrier wait, or a wait that can pass first. A wait on m'
        passes only if it passes now or once a phase of m' completes, which requires as many
        arrivals on m' from what can run first (operations of the sequences so far, commits in
        flight) as m' has pending, or, when none is pending, a byte count that can change (a
        copy in flight or issued, an expect_tx or complete_tx). An inval, init or arrive_drop of
        m', a non-positive arrival count, an invalid m' and every other kind of wait (all-thread
        named barriers, cluster barriers, tensor memory) are taken to pass, except the wait of a
        `bar.sync` with an explicit count, which passes only when its generation can fill
        (precede_walk.py). Every execution that avoids the step
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
        caller (named.py) takes the step only where the open generation cannot complete before
        it, so such a wait cannot pass first.

        ``goal``: the processes whose ends are all the caller reads (with nothing forbidden or
        collected): the walk may stop once they all reach their ends (precede_walk.can_precede).

        The walk is precede_walk.py; its answers are remembered by what it reads
        (precede_memo.py, kept as ``_precede``)."""
        return self._precede(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates, goal)


__all__ = ["LOCAL_OPS", "Reduction"]
