"""The periodic search: breadth-first over the abstraction, one branch per trip count a step can tell apart.

What is searched. The machine of ``semantics.machine`` is run unchanged, except
that the trip-count test of the loops found by ``periodic.plan`` is answered
by a :class:`TripCount` instead of a constant bound (``Machine.loop_hook``):

* while ITERS is *not yet fixed*, the state carries T, the largest counter
  value already tested true ("ITERS > T"). A test ``u < ITERS`` with u ≤ T is
  true. A step whose tests reach values above T has, besides its successors
  for every ITERS beyond them (all tests true), the successors for each
  ITERS = n with T < n ≤ the largest value tested — computed concretely with
  ITERS fixed at n. So every abstract successor is a concrete successor for
  the ITERS it stands for, and every concrete successor for every ITERS is
  one of them: the abstraction is exact on finite prefixes.
* Partial-order reduction and symmetry act per concrete ITERS (each branch
  asks ``Reduction.successors`` with its own trip count), so they keep the
  guarantees they have for the explicit engine. The reduction's walks of the
  processes' futures read, with ITERS not fixed, the sequences of ITERS = ∞ a
  few iterations past T; the values they test join the branches with ITERS
  fixed, and a reduced set is computed again for each of them
  (reduction/hooked.py; docs/model.md, "Lone steps under the lift").

A room of its own: the search drives the machine and the key; what its findings mean for the
protocol (replayed at their trip count) is decided in ``answers``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from ... import budget as budgets
from ...semantics.machine import Assumptions, BudgetExceeded, Machine, StepResult, Violation
from ...semantics.state import P_PC, P_VARS, State
from ...semantics.symmetry import Symmetry
from ..explicit import Parents, _path_to, cyclic_gc_paused
from ..periodic import Plan
from ..reduction import Reduction
from ..witness import deadlock
from .hook import FIXED, UNFIXED, TripCount, _Unexpected
from .key import _shape, held_key

MAX_ERRORS = 12
DEFAULT_ASSUMPTIONS = Assumptions()


# ---------------------------------------------------------------------- the search
@dataclass
class Finding:
    violation: Violation
    labels: list[tuple]
    iters: int  # the concrete trip count its path runs with
    final: bool = True  # the last label is the step that reports it (False: a deadlock in the state reached)


@dataclass
class LiftOutcome:
    complete: bool
    states: int
    transitions: int
    seconds: float
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    stop_reason: str = ""
    stopped_by: str = ""  # the budget that ended the search (budget.KINDS), if one did
    first_error: bool = False  # asked to stop at its first error (``stop_at_error``), and one was recorded


def lifted_search(p: Plan, assumptions: Assumptions = DEFAULT_ASSUMPTIONS, max_states: int = 2_000_000,
                  seconds: float = 600.0, only: int | None = None, memory_mb: float = math.inf,
                  stop_at_error: bool = False) -> LiftOutcome:
    """Search every trip count ≥ ``p.min_iters`` (or exactly ``only``) on the periodic abstraction.

    With ``stop_at_error`` the search ends after the expansion that records its first error: the
    answer then only needs a trip count at which the protocol fails, and ``answers.lift`` finds the
    least one with the explicit engine. Without it the search goes on to MAX_ERRORS distinct errors,
    its end or a budget; a violating protocol's abstraction often does not close, so that was to
    the budget."""
    with cyclic_gc_paused():
        return _lifted_search(p, assumptions, max_states, seconds, only, memory_mb, stop_at_error)


def _lifted_search(p: Plan, assumptions: Assumptions, max_states: int, seconds: float,
                   only: int | None, memory_mb: float, stop_at_error: bool) -> LiftOutcome:
    start = time.monotonic()
    base_mb = budgets.rss_mb()
    machine = Machine(p.protocol, assumptions)
    hook = TripCount(p)
    machine.loop_hook = hook  # (before the reduction reads the machine: its rules see the hook)
    reduction = Reduction(machine)
    successors = reduction.successors
    machine.deadline = start + seconds
    sym = Symmetry(machine.procs, machine.programs, machine.holders)
    sh = _shape(p, machine)
    nprocs = len(machine.procs)
    floor = p.min_iters - 1  # ITERS > floor

    mains = [(q, pp.main.init_pc, pp.main.slot, pp.main.hi_off) for q, pp in p.procs]

    def counter_top(state: State) -> int:
        """The largest trip-count test value the counters of processes in their main loop stand for."""
        return max((state.procs[q][P_VARS][slot] - hi_off for q, init_pc, slot, hi_off in mains
                    if state.procs[q][P_PC] > init_pc), default=-1)

    def keep(mode: tuple[int, int], shift: int) -> bool:
        """Whether a branch of a state whose counters stand ``shift`` above their values is searched."""
        if only is None:
            return True
        return mode[1] + shift < only if mode[0] == UNFIXED else mode[1] + shift == only

    def expand(state: State, mode: tuple[int, int],
               shift: int) -> list[tuple[list[StepResult], tuple[int, int], int]]:
        """Per branch of the trip count: the successors, the mode after them, the ITERS they run with
        (all three as the state's counters read: ``shift`` below the path's)."""
        if mode[0] == FIXED:
            hook.fixed = mode[1]
            return [(list(successors(state)), mode, mode[1])]
        hook.fixed, hook.known, hook.tested = None, mode[1], []
        results = list(successors(state))
        full = reduction.full
        top = max([mode[1], *hook.tested])
        # Each result stands for every ITERS above the tests of its own step, which its counters
        # show (a test answered true moved a counter to the value tested). Tests made by steps
        # partial-order reduction probed but did not take, and by the walks of the processes'
        # futures whose answers it used (reduction/hooked.py), only add branches with ITERS fixed.
        by_known: dict[int, list[StepResult]] = {}
        for res in results:
            # a step that ends in a violation shows no counters: it stands for ITERS above every test
            known = top if res.state is None else max(mode[1], counter_top(res.state))
            by_known.setdefault(known, []).append(res)
        # with ``only``, an unfixed branch is kept only while it stands for ITERS = only too
        out = [(group, (UNFIXED, known), known + 1 if only is None else only - shift)
               for known, group in by_known.items()]
        if not results:
            out.append(([], (UNFIXED, top), top + 1 if only is None else only - shift))
        if not full or not results:
            # A set partial-order reduction took alone (one step, or one CTA's steps): it is persistent
            # for every ITERS above every test made (``top``: the walks whose answers took it read the
            # sequences of ITERS = ∞ that far; docs/model.md, "Lone steps under the lift"). With ITERS
            # fixed at n ≤ top its rules may not take it, so the expansion is computed again there; the
            # unfixed branches above stay, each of their steps a step of the machine at those n too.
            for n in range(mode[1] + 1, top + 1):
                hook.fixed = n
                out.append((list(successors(state)), (FIXED, n), n))
            return out
        # A full expansion: with ITERS = n every step is enabled as before, and a step whose own
        # tests stayed below n has the same result (it is among the unfixed ones, which stand for
        # n too). Only the steps that tested n or more are recomputed with ITERS fixed at n.
        for n in range(mode[1] + 1, top + 1):
            hook.fixed = n
            changed = []
            for res in results:
                if res.state is None or counter_top(res.state) >= n:
                    again = machine.step(state, res.label)
                    if again is not None:
                        changed.append(again)
            if changed:
                out.append((changed, (FIXED, n), n))
        return out

    # initial states: the initial local runs may already test the trip count
    hook.fixed, hook.known, hook.tested = None, floor, []
    try:
        init0 = machine.initial()
        top = max([floor, *hook.tested])
        starts = [(init0, (UNFIXED, top))]
        for n in range(floor + 1, top + 1):
            hook.fixed = n
            starts.append((machine.initial(), (FIXED, n)))
    except (_Unexpected, BudgetExceeded) as err:
        return LiftOutcome(False, 0, 0, time.monotonic() - start, stop_reason=str(err),
                           stopped_by=budgets.TIME if isinstance(err, BudgetExceeded) else "")
    # A state is searched as its merge key (``normalize``: its counters, T or the fixed ITERS, phases
    # and group numbers shifted down, what no later step observes dropped), whose futures are the
    # state's up to that translation (key.py): the same steps by the same labels, so a path of labels
    # is one of the machine's. The keys are held packed (packed.py: exact, each opened to be expanded).
    # ``shifts``: how far the counters of a path to each key stand above the key's (what its trip
    # count is, as the path runs it).
    held = sh.table
    index: dict[bytes, int] = {}
    parents = Parents(root=False)
    nodes: list[bytes] = []
    shifts: list[int] = []
    queue: deque[int] = deque()
    for st, mode in starts:
        if not keep(mode, 0):
            continue
        key = held_key(sh, sym.canon(st)[0], mode)
        if key not in index:
            index[key] = len(nodes)
            nodes.append(key)
            shifts.append(mode[1] - held.mode(key)[1])
            parents.append(-1, None)
            queue.append(index[key])
    # The successors met (canonical, with their mode) while the level being built was expanded, and
    # the level before, by hash: a successor equal to one of them is known without normalizing it
    # (nearly every duplicate is one: two interleavings of the same steps are equally long). A cache:
    # a successor not found there is normalized and looked up in ``index``, so it changes the work,
    # never the states. Whole over the search it kept every successor's raw records alive.
    reached: dict[int, tuple] = {}
    reached_before: dict[int, tuple] = {}
    level_end = 0  # the number of the first key of the level after the one being expanded
    errors: dict[tuple, Finding] = {}
    warnings: dict[tuple, Finding] = {}
    pending: list[tuple[dict, tuple, Violation, int, tuple | None, int]] = []
    transitions = 0
    stop = kind = ""
    popped = 0
    while queue:
        if errors and stop_at_error:
            break  # (before the budgets: a search that found its error is not one a budget ended)
        if len(nodes) > max_states:
            stop, kind = budgets.reached(budgets.STATES, max_states), budgets.STATES
            break
        popped += 1
        if popped % 256 == 0:
            budgets.stop_if_interrupted()
            if budgets.rss_mb() - base_mb > memory_mb:
                stop, kind = budgets.reached(budgets.MEMORY, memory_mb), budgets.MEMORY
                break
        if popped % 256 == 0 and time.monotonic() - start > seconds:
            stop, kind = budgets.reached(budgets.TIME, seconds), budgets.TIME
            break
        if len(errors) >= MAX_ERRORS:
            stop = f"stopped after {MAX_ERRORS} distinct violations"
            break
        sid = queue.popleft()
        if sid >= level_end:
            reached_before, reached = reached, {}
            level_end = len(nodes)
        state, mode = held.open(nodes[sid])
        shift = shifts[sid]
        try:
            branches = expand(state, mode, shift)
        except (_Unexpected, BudgetExceeded) as err:
            stop, kind = str(err), budgets.TIME if isinstance(err, BudgetExceeded) else ""
            break
        for results, new_mode, iters in branches:
            if not keep(new_mode, shift):
                continue
            iters += shift
            if not results and not all(machine.done(state, q) for q in range(nprocs)):
                v = deadlock(machine, state)
                pending.append((errors, (v.code, v.span.line if v.span else 0, "deadlock"), v, sid, None, iters))
            for res in results:
                transitions += 1
                for w in res.warnings:
                    pending.append((warnings, (w.code, w.span.line if w.span else 0), w, sid, res.label, iters))
                for v in res.soft:
                    pending.append((errors, (v.code, v.span.line if v.span else 0, 0), v, sid, res.label, iters))
                if res.violation is not None:
                    v = res.violation
                    pending.append((errors, (v.code, v.span.line if v.span else 0,
                                             v.related[0][0] if v.related else 0), v, sid, res.label, iters))
                    continue
                nxt = sym.canon(res.state)[0]
                raw = (nxt, new_mode)
                h = hash(raw)  # (once: a tuple's hash is not kept)
                hit = reached.get(h)
                if hit is None:
                    hit = reached_before.get(h)
                if hit is not None and hit == raw:
                    continue  # this very state was reached before: its key is known
                reached[h] = raw
                key = held_key(sh, nxt, new_mode)
                new = len(nodes)
                if index.setdefault(key, new) == new:
                    nodes.append(key)
                    shifts.append(shift + new_mode[1] - held.mode(key)[1])
                    parents.append(sid, res.label)
                    queue.append(new)
            for table, key, v, at, label, n in pending:
                if key not in table:
                    table[key] = Finding(v, _path_to(parents, at, label), n, label is not None)
            pending.clear()

    return LiftOutcome(complete=not queue and not stop, states=len(nodes), transitions=transitions,
                       seconds=time.monotonic() - start, errors=list(errors.values()),
                       warnings=list(warnings.values()), stop_reason=stop, stopped_by=kind,
                       first_error=stop_at_error and bool(errors))
