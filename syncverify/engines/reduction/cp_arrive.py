"""`cp.async.mbarrier.arrive.noinc` and its per-thread arrive-ons taken alone (issue #36).

A warp's `cp.async.mbarrier.arrive.noinc` leaves one asynchronous arrive-on per thread in flight
(families/cp_async.py): 32 arrivals of one each, which a producer warpgroup of four warps makes 128
a phase. Their interleavings with one another, with the other warps' issues and with everything
else were all explored: the arrival counts of four warps alone make 33^4 orders of landings per
phase. Unit arrivals on one barrier add up, so two of them commute unless one completes the phase
(then the other counts in the next phase in one order only); the rule below takes an arrive-on, or
the issue that creates them, alone where no update of its barrier that can come first completes
the phase before the last of them. The argument is the landing rule's (tx.py, precede_walk.py;
docs/model.md, "The search and its reductions", *cp.async arrive-ons*).

A `cp.async` is a local step (it touches its process, its slot's records and nothing else); it is taken
alone where no other process can reach its slot before its next mbarrier wait (lone_cp_copy), so that a race
on the slot is still met, and reported, where the unreduced search first meets it.

The sums are of many equal updates (32 arrive-ons of one warp, one arrival each), so they are
counted as a multiset: the sums of its sub-multisets, each with whether it is the whole multiset,
where tx.py enumerates subsets (and stops at ten updates).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ... import ir
from ...semantics.footprint import ref_element, touches
from ...semantics.hooked_local import remembered
from ...semantics.program import END, OP
from ...semantics.state import AG_CPARRIVE, M_PEND, M_TX, P_PC, P_VARS, State
from .hooked import walk_under_hook
from .precede_walk import _ANY_UPDATE
from .tx import Update, only_whole_completes

if TYPE_CHECKING:
    from ...semantics.core import StepResult
    from .successors import Reduction

WALK_LIMIT = 4096  # steps of a process's sequence walked to its next wait before it counts as unknown
def _updates_first(red: Reduction, state: State, m: int, frozen: int) -> list[Update] | None:
    """The updates of barrier m that can come before a step (the arrive-on being taken, or process
    ``frozen``'s issue): the other arrive-ons in flight on m, one arrival each, and the arrivals and
    byte counts the processes reach in what can run first (Reduction._can_precede with m frozen,
    every update of m collected). None where something else can come first that the rule does not
    sum: another kind of agent on m, an init, inval, `arrive_drop` or increment of m, a wait on m that
    passes first in phase 0 or as a first wait (or, with an update collected, any wait on m that
    passes now), or where every process of m's CTA can end first (its exit, SV404)."""
    own = [a for a in state.agents if a[4] == m and a[0] == AG_CPARRIVE]
    walked = state._replace(agents=tuple(a for a in state.agents if not (a[4] == m and a[0] == AG_CPARRIVE)))
    # (with m frozen its waits pass only if they pass now, so the arrive-ons left out of the walk's
    # state change nothing it reads but the refusal of any update of m in flight)
    updates: list[Update] = []
    ends = red._can_precede(walked, m, frozen, None, _ANY_UPDATE, True, updates=updates)
    cta = red.machine.mb_names[m][0]
    if ends is None or all(ends[q] for q in red.machine.procs_of_cta[cta]):
        return None
    updates.extend((1, 0) for _ in own)
    return updates


def lone_cp_arrival(red: Reduction, state: State, a: tuple, res: StepResult) -> bool:
    """May the arrive-on ``a`` of a `cp.async.mbarrier.arrive` (one thread's, on barrier m) be taken
    alone? Its step ``res`` must report nothing, and no set of m's updates that can come first, with
    or without it, may complete m's phase but all of them with it (only_whole_completes): then m's
    phase is frozen until the arrive-on, which commutes with each of them (docs/model.md)."""
    if res.violation is not None or res.warnings or res.soft:
        return False
    m = a[4]
    updates = _updates_first(red, state, m, -1)
    if updates is None:  # (the walk's updates include the other arrive-ons: ``a`` is one of ``own``)
        return False
    mb = state.mbars[m]
    return only_whole_completes(mb[M_PEND], mb[M_TX], updates)


def lone_cp_arrive_issue(red: Reduction, state: State, p: int, res: StepResult | None) -> bool:
    """May process p's `cp.async.mbarrier.arrive[.noinc]` be taken alone? With .noinc the issue changes
    no count: it checks that m is usable, carries what p's lanes have observed into m's current phase
    and leaves its threads' arrive-ons in flight. Without it, it also raises m's pending count by its
    threads (their arrive-ons net out). Either commutes with every step that cannot change m's phase or
    validity before it, and an increment with every arrival short of a completion; so with the issue
    counted as one more update (its arrive-ons' arrivals, or the increment as negative arrivals), no
    set of the updates that can come first may complete the phase (only_whole_completes: stronger
    than needed, which is sound)."""
    machine = red.machine
    if res is None or res.violation is not None or res.warnings or res.soft or \
            machine.programs[p].code[res.state.procs[p][P_PC]].kind == END:
        return False  # (an exit has effects on barriers)
    m = machine.arrive_target(state, p)
    if m is None:
        return False
    updates = _updates_first(red, state, m, p)
    if updates is None:
        return False
    ins = machine.programs[p].code[state.procs[p][P_PC]]
    updates.append((ins.threads if ins.op.noinc else -ins.threads, 0))
    mb = state.mbars[m]
    return only_whole_completes(mb[M_PEND], mb[M_TX], updates)


def lone_cp_copy(red: Reduction, state: State, p: int, memo: dict) -> bool:
    """May process p's `cp.async` be taken alone, as the local step it is? Always, for soundness (docs/model.md);
    but where another process may access the copy's slot before its next mbarrier wait, the two are left to be
    explored in both orders, as before the rule, so that the race is met where both are enabled and reported as
    the unreduced search first meets it (a warp with no barrier would otherwise run its whole program before
    the other copies). A wait is where the walk stops even where it can pass without p: then an access after it
    is met only after the copy, and a race between them is reported at the access alone, not also at the copy
    (the verdict is the same: p has not published the copy, so the access races in either order;
    bench/RESULTS-soundness.md). ``memo``: the slots each (process, pc, variables) may access before its next
    wait."""
    machine = red.machine
    pstate = state.procs[p]
    op = machine.programs[p].code[pstate[P_PC]].op
    name, index = ref_element(op.buf, machine.env(p, pstate[P_VARS]), machine.ctx[p])
    for q, qstate in enumerate(state.procs):
        if q == p:
            continue
        ahead = _slots_before_wait(red, q, qstate, memo)
        if ahead is None or touches(ahead, name, index):
            return False
    return True


def _slots_before_wait(red: Reduction, q: int, qstate: tuple, memo: dict) -> frozenset | None:
    """The array elements (buffers and barriers: every reference an operation names) that process q's fixed
    sequence reaches before it stands at an mbarrier wait or its end, each index evaluated under the variables q
    will have there; None where the sequence cannot be followed (Machine.future) or is longer than WALK_LIMIT.
    Under a loop hook the sequence is the hook's for its trip count of the moment: the answer is remembered with
    the tests its walk asked the hook, and used again only where the hook decides them alike
    (semantics/hooked_local.py); a walk that goes too far for the hook is None too (hooked.py)."""
    machine = red.machine
    key = (q, qstate[P_PC], qstate[P_VARS])
    if machine.loop_hook is not None:
        return walk_under_hook(machine, lambda: remembered(machine, red._hooked_slots_memo, key,
                                                           lambda: _slots_walk(red, key, {})))
    if key in memo:
        return memo[key]
    return _slots_walk(red, key, memo)


def _slots_walk(red: Reduction, key: tuple, memo: dict) -> frozenset | None:
    """_slots_before_wait's walk from ``key``, its answer remembered in ``memo``."""
    machine = red.machine
    out: set = set()
    at: tuple | None = key
    for _ in range(WALK_LIMIT):
        q_, pc, vars_ = at
        ins = machine.programs[q_].code[pc]
        if ins.kind == END or (ins.kind == OP and isinstance(ins.op, ir.MbarWait)):
            break
        if ins.kind == OP:
            env = machine.env(q_, vars_)
            for f in dataclasses.fields(ins.op):
                ref = getattr(ins.op, f.name)
                if isinstance(ref, ir.Ref):
                    out.add(ref_element(ref, env, machine.ctx[q_]))
        fut = machine.future(at)
        if fut is None or fut[1] is None:
            out = None  # type: ignore[assignment]
            break
        at = fut[1]
    else:
        out = None  # type: ignore[assignment]
    if len(memo) >= 1 << 16:
        memo.clear()
    memo[key] = None if out is None else frozenset(out)
    return memo[key]


__all__ = ["WALK_LIMIT", "lone_cp_arrival", "lone_cp_arrive_issue", "lone_cp_copy"]
