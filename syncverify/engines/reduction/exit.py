"""Partial-order reduction for the exits after a kernel's last cluster barrier.

Steps that end a process are otherwise never taken alone: an exit re-evaluates the open
generations of all-thread named barriers and of the cluster barrier (exited threads no longer
count), and the last exit of a CTA checks that nothing still reads or lands in its shared
memory (SV404). A kernel that ends with `cluster.sync` (DeepGEMM, CUTLASS cluster kernels, and
the warps that do nothing but take the cluster barriers) then explores every order of the
final passes and exits: with n warps in the cluster, 2^n states after the last generation
completes. On the 2-CTA multicast GEMM with 4 math and 3 idle warps per CTA those were 16,384
of its 86,431 states (the whole +22 % the idle warps cost).

A passing `cluster.wait` of process p whose next operation is the end is taken alone when, in
the state s:

* every other process has ended or stands at such a final `cluster.wait` itself;
* no copy or commit is in flight;
* no named barrier of any CTA and not the cluster barrier has an open generation (no arrivals).

Then the only steps enabled in s and after are those final waits (with exits), each of another
process, and no other step can ever become enabled: the others do nothing but pass their wait
and end. Two of them commute: a passing wait makes the records its generation's holder knows
known to its own lanes (an update of knowledge bits that reads only the holder's bits, which no
wait changes) and clears its own token; the exit finds no open generation to re-evaluate
(none can open: nobody arrives any more); the last exit of a CTA reads the CTA's outstanding
asynchronous reads in the records (their kind, owner, line and group, which knowledge updates
leave alone) and the agents (none), so it reports SV404 with the same record in every order.
A wait that cannot pass stays unable to (the cluster generation does not move), so deadlocks
are kept. p's step stays enabled, ends p, and the caller does not take it alone if it breaks a
rule or warns. So {p's step} is a persistent set, and the graph is acyclic (cycle proviso).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ... import ir
from ...expr import EvalError
from ...semantics.core import Violation
from ...semantics.program import END, OP
from ...semantics.state import P_PC, P_VARS, State

if TYPE_CHECKING:
    from ...semantics.machine import Machine


class ReductionView(Protocol):
    """What these rules read of the reduction that asks them (successors.Reduction)."""

    machine: Machine
    cluster_arrivals_waited: bool


def _at_final_cluster_wait(machine: Machine, state: State, q: int) -> bool:
    """Is process q at a `cluster.wait` after which its program ends?"""
    qs = state.procs[q]
    pc = qs[P_PC]
    ins = machine.programs[q].code[pc]
    if ins.kind != OP or not isinstance(ins.op, ir.ClusterWait):
        return False
    try:
        npc, _ = machine._run_local(q, pc + 1, qs[P_VARS])
    except (EvalError, Violation):
        return False
    return machine.programs[q].code[npc].kind == END


def lone_final_exit(reduction: ReductionView, state: State, p: int) -> bool:
    """May process p's passing final `cluster.wait`, which ends p, be taken alone? (module docstring)"""
    machine = reduction.machine
    # (under a loop hook _run_local answers for the hook's trip count of the moment and records its tests,
    # as the step's own control flow does: docs/model.md, "Lone steps under the lift")
    if state.agents or state.cluster[1] or any(nb.arrived for nb in state.named):
        return False
    if not _at_final_cluster_wait(machine, state, p):
        return False
    code = machine.programs
    for q, qs in enumerate(state.procs):
        if q != p and code[q].code[qs[P_PC]].kind != END and not _at_final_cluster_wait(machine, state, q):
            return False
    return True


def lone_early_exit(reduction: ReductionView, state: State, p: int) -> bool:
    """May process p's passing final `cluster.wait`, which ends p, be taken alone while other
    processes still run (an idle warp leaving after the prologue's cluster barrier)?

    Conditions (docs/model.md, "Exits taken alone"): p stands at a `cluster.wait` after which it
    ends; some other process of p's CTA has not ended; p shares no state with other processes (not
    part of a warp split between roles, nor of a wgmma team); every cluster arrive of every program
    is waited on before that warp's next arrive and its end (Reduction.cluster_arrivals_waited); and
    no program of p's CTA uses an all-thread named barrier (`syncthreads`, `bar.sync` without a
    count), whose generations an exit re-evaluates.

    Why: the step passes the wait (p's token names generation g, which completed; it stays
    enabled) and ends p. It reads the cluster barrier's last-generation holder, which only the
    completion of generation g+1 changes, and g+1 cannot complete before p ends (p never arrives
    at it). It writes p's own knowledge bits and token, which no other step reads once p has
    ended. Its exit can complete the open cluster generation; with p gone first, the same
    procedure (_cb_try_complete) completes it at its last arrival, and since every arrival is
    waited on before the warp arrives again or ends, no step of another process can tell when the
    generation completed, except a wait, which is enabled no later. So every path of the
    unreduced search from this state has a counterpart that starts with p's step and performs the
    same steps with the same results, with one exception: the exit of p's CTA, which happens at the
    last of its processes to end, may come earlier (at the end of the last other process, where p
    could also have left first). There a copy or an unretired read in flight is SV404 on that
    path, a finding of an interleaving the kernel allows; the unreduced search finds it as well,
    and may find further findings on paths where p stays longer. So the verdict is preserved, the
    reduced findings are among the unreduced ones, and they differ only where the reduced ones
    include that SV404 (tests/test_exit_por.py checks both on exhaustive programs)."""
    return _at_final_cluster_wait(reduction.machine, state, p) and _may_leave_early(reduction, state, p)


def lone_exit_after_wait(reduction: ReductionView, state: State, p: int) -> bool:
    """May process p's passing mbarrier wait, after which p ends, be taken alone while other
    processes still run (CUTLASS's producer leaving at the last wait of its load_tail)? Where the
    wait itself may be taken alone (the caller decides that by the rules for passing waits) and
    p may leave early as for lone_early_exit: the wait part commutes with every step that can
    come before it, and the exit part as in lone_early_exit, with the same one exception (the
    exit of p's CTA may come earlier, SV404). p need not have arrived on an open cluster
    generation: its exit then lowers the generation's count, and since every arrival is waited
    on before that warp arrives again or ends, no step but a wait, enabled no later, can tell
    when the generation completed (docs/model.md, "Exits taken alone while others run")."""
    return _may_leave_early(reduction, state, p)


def lone_exit_after_arrive(reduction: ReductionView, state: State, p: int) -> bool:
    """May process p's plain mbarrier arrive, after which p ends, be taken alone while other processes
    still run (the CuTe-DSL consumers' last release, each warp's last operation)? Where the arrive
    itself may be taken alone by the rules for plain arrives (the caller asks them) and p may leave
    early as for lone_early_exit. As for lone_exit_after_wait: each step u that can come before it
    commutes with the arrive part, or taken after it reports what the other order reports (those
    rules), and with the exit part (lone_early_exit), with the same one exception (the exit of p's
    CTA may come earlier, SV404) (docs/model.md, "Exits taken alone while others run")."""
    return _may_leave_early(reduction, state, p)


def _may_leave_early(reduction: ReductionView, state: State, p: int) -> bool:
    """The conditions of lone_early_exit on p's exit (its docstring), but where p stands."""
    machine = reduction.machine
    if not reduction.cluster_arrivals_waited:
        return False
    if p in machine.warp_parts or machine.wgmma_team[p]:
        return False
    cta = machine.procs[p].cta
    if not _no_all_thread_named_barrier(reduction)[cta]:
        return False
    code = machine.programs
    return any(q != p and code[q].code[state.procs[q][P_PC]].kind != END for q in machine.procs_of_cta[cta])


def _no_all_thread_named_barrier(reduction: ReductionView) -> list[bool]:
    """Per CTA: no program of it has a named-barrier operation without a thread count (remembered)."""
    memo = getattr(reduction, "_early_exit_ctas", None)
    if memo is None:
        machine = reduction.machine
        memo = [not any(ins.kind == OP and isinstance(ins.op, ir.BarSync | ir.BarArrive) and ins.op.count is None
                        for q in machine.procs_of_cta[c] for ins in machine.programs[q].code)
                for c in range(machine.ncta)]
        reduction._early_exit_ctas = memo
    return memo


__all__ = ["lone_early_exit", "lone_exit_after_arrive", "lone_exit_after_wait", "lone_final_exit"]
