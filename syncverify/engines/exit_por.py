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

from typing import TYPE_CHECKING

from .. import ir
from ..expr import EvalError
from ..semantics.core import Violation
from ..semantics.program import END, OP
from ..semantics.state import P_PC, P_VARS, State

if TYPE_CHECKING:
    from ..semantics.machine import Machine


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


def lone_final_exit(machine: Machine, state: State, p: int) -> bool:
    """May process p's passing final `cluster.wait`, which ends p, be taken alone? (module docstring)"""
    if machine.loop_hook is not None:  # a symbolic trip count: _run_local must not be asked here
        return False
    if state.agents or state.cluster[1] or any(nb.arrived for nb in state.named):
        return False
    if not _at_final_cluster_wait(machine, state, p):
        return False
    code = machine.programs
    for q, qs in enumerate(state.procs):
        if q != p and code[q].code[qs[P_PC]].kind != END and not _at_final_cluster_wait(machine, state, q):
            return False
    return True


__all__ = ["lone_final_exit"]
