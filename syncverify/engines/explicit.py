"""Explicit-state search: breadth-first over every interleaving.

Breadth-first order makes every counterexample a shortest one. Visited states
are kept whole (not hashed to fingerprints) so that no state can be skipped by
a collision: a false "safe" is the one bug this engine must not have. Each
state stores its parent and the step that led to it; traces are rebuilt by
replaying those steps through the machine.

Stored states share their equal parts (see ``Interner``): the search meets the same
access record, the same process states, the same barrier states in many states, built
again by every path that reaches them. Sharing one object per value keeps the memory of
a stored state to what is new in it, with every state still stored whole.

Budgets (states, seconds, memory) end the search as *inconclusive*, with what
was covered, never as safe. A violating step is reported and not explored
further; the search goes on to find the other distinct violations.
"""

from __future__ import annotations

import gc
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from operator import is_not

from .. import budget as budgets
from .. import ir
from ..diagnostics import Diagnostic, Severity
from ..result import CheckResult, Stats, Verdict
from ..semantics.machine import BudgetExceeded, Machine, StepResult, Violation
from ..semantics.program import BAR_WAIT, END
from ..semantics.state import State
from ..semantics.symmetry import Symmetry
from ..semantics.symmetry_perm import symmetry_for
from .reduction import successors_of
from .witness import deadlock, diagnostic

MAX_DISTINCT_ERRORS = 12
_new_tuple = tuple.__new__  # tuple.__new__(State, parts): without State's Python-level constructor


@dataclass(frozen=True)
class Budget:
    max_states: int = 2_000_000
    seconds: float = 600.0
    memory_mb: float = 8192.0
    # seconds the search goes on after its first error, looking for others, before it stops (None: to the
    # end or another budget). A violation is certain once found; what a stop here costs is completeness of
    # the list of findings, never a verdict: the result is a violation with `search not finished`.
    after_first_error: float | None = None


@dataclass
class SearchOutcome:
    complete: bool
    states: int
    transitions: int
    seconds: float
    peak_mb: float
    errors: list[tuple[Violation, list[tuple]]]  # violation, path of labels
    warnings: list[tuple[Violation, list[tuple]]]
    stop_reason: str = ""
    stopped_by: str = ""  # the budget that ended the search (budget.KINDS), if one did


Progress = Callable[[int, int, float, float], None]  # states, frontier, seconds, MB


class Interner:
    """One object per distinct value among the parts of the stored states.

    A successor is built from fresh tuples (each step copies what it changes, and every
    knowledge update rebuilds the records it touches), so two paths to equal states, or to
    states equal in most parts, leave equal but separate objects behind. On the 2-CTA
    multicast ring at ITERS=16, 54,754 stored states held 1,028,391 access-record tuples of
    only 41,338 distinct values. Interning each record, and each of the other components of
    a state, when the state is first stored keeps one of each. Equality and hashing are
    unchanged (the interned parts are equal to the originals), so no state can be merged
    with a different one: this is sharing, not fingerprinting."""

    def __init__(self) -> None:
        self.records: dict[tuple, tuple] = {}
        # one table per component, so that values of different components never stand in for each other
        self.procs: dict[tuple, tuple] = {}
        self.mbars: dict[tuple, tuple] = {}
        self.named: dict[tuple, tuple] = {}
        self.cluster: dict[tuple, tuple] = {}
        self.agents: dict[tuple, tuple] = {}
        self.tmem: dict[tuple, tuple] = {}
        # The named barriers of the last state interned: a step nearly always passes its state's
        # on as the same object (_Work.freeze), so most states are recognized by identity, without
        # hashing the 16 barriers per CTA. It is interned, so it is the one object of its value.
        self._last_named: tuple = ()

    def __call__(self, state: State, like: tuple = ()) -> State:
        """The state with its parts replaced by the interned ones. ``like``: the records of an
        interned state, the parent's. A successor's records mostly are its parent's very
        objects, and where the step kept their positions (a knowledge update, a copy landing)
        they are at the same positions: those need no interning, and are found by identity
        without hashing them (position by position, in C). The others are interned one by one.
        (On the 2-CTA multicast ring at ITERS=16, 71% of the new states have as many records as
        their parent, and 68% of their records are found so.) Identity is a sound test: the
        parent's records are interned, so they are the one object of their value."""
        intern = self.records.setdefault
        named = state.named
        if named is not self._last_named:
            named = self._last_named = self.named.setdefault(named, named)
        # the records tuple itself is nearly always new (it is the state's own), its records are not
        records = state.records
        if len(like) == len(records):
            out = list(records)
            for i in compress(range(len(out)), map(is_not, records, like)):
                r = out[i]
                out[i] = intern(r, r)
            records = tuple(out)
        else:
            records = tuple(map(intern, records, records))
        return _new_tuple(State, (self.procs.setdefault(state.procs, state.procs),
                                  self.mbars.setdefault(state.mbars, state.mbars), named,
                                  self.cluster.setdefault(state.cluster, state.cluster),
                                  self.agents.setdefault(state.agents, state.agents), records,
                                  self.tmem.setdefault(state.tmem, state.tmem)))


CROWDED = 8  # states of one bucket of Visited compared one by one before the bucket becomes a dict


class Visited:
    """The stored states, exact: a state is a duplicate only when it is equal to a stored one.

    A hash table with its chaining spelled out: buckets by the hash of a state's processes and
    its agents in flight, then a whole-state comparison with each state of the bucket. A hash
    only finds candidates, so no two different states are ever merged (this is not hash
    compaction), whatever the hashes are.

    Why not a dict keyed by the states: Python does not keep a tuple's hash, so a dict hashed
    each successor whole on lookup and each new state again on insert, and the records (dozens of
    13-field tuples), the 16 named barriers per CTA and the mbarriers are most of that work. The
    part hashed tells the stored states apart nearly everywhere: on every spec in specs/ and the
    ring family no two stored states share it (on the 2-CTA multicast ring at ITERS=16: 44,776
    states, 44,776 such parts; the mbarriers, hashed too, separated none), except on the
    named-barrier ping-pong, where pairs of states differ only in their named barriers
    (ROUNDS=16: 3,744 states, 2,199 parts). So a bucket holds one or two states and a comparison
    or two settles a duplicate. Where many states differ only in what is not hashed, their
    bucket grows; past CROWDED states it becomes a dict keyed by the (interned) states, which
    costs what a dict keyed by all states did."""

    def __init__(self, shared: Interner) -> None:
        self.states: list[State] = []  # number -> stored (interned) state
        self._shared = shared
        self._buckets: dict[int, int | list[int] | dict[State, int]] = {}

    def __len__(self) -> int:
        return len(self.states)

    def add(self, state: State, like: tuple = ()) -> State | None:
        """The stored copy of ``state`` (its parts interned) if it is new, with the next number;
        None if an equal state is stored. ``like``: the parent's records (see Interner)."""
        h = hash((state.procs, state.agents))
        states = self.states
        bucket = self._buckets.get(h)
        if bucket is None:
            self._buckets[h] = len(states)
        elif type(bucket) is int:
            if states[bucket] == state:
                return None
            self._buckets[h] = [bucket, len(states)]
        elif type(bucket) is list:
            for n in bucket:
                if states[n] == state:
                    return None
            if len(bucket) < CROWDED:
                bucket.append(len(states))
            else:
                crowded = self._buckets[h] = {states[n]: n for n in bucket}
                stored = self._shared(state, like)
                crowded[stored] = len(states)
                states.append(stored)
                return stored
        else:
            if state in bucket:
                return None
            stored = self._shared(state, like)
            bucket[stored] = len(states)
            states.append(stored)
            return stored
        stored = self._shared(state, like)
        states.append(stored)
        return stored


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (reference counting still frees everything).

    The search keeps every state it stores alive until it ends, and allocates millions of
    short-lived tuples, none of them in reference cycles. The collector's full passes rescan
    all the stored states again and again for nothing: about a sixth of the all-iterations proof
    of the canonical ring, a tenth of the explicit search of the 2-CTA cluster ring. Memory is
    unchanged, since acyclic objects are freed by reference counting.
    The collector's previous setting is restored on every exit."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# called with each distinct error as the search records it and the path to it; True stops the search
OnError = Callable[[Violation, list[tuple]], bool]


def search(machine: Machine, budget: Budget, symmetry: Symmetry | None = None,
           progress: Progress | None = None, on_error: OnError | None = None, reduce: bool = True) -> SearchOutcome:
    """Explore the machine's states; ``reduce``: with partial-order reduction (engines/reduction/),
    or every step the model offers."""
    with cyclic_gc_paused():
        return _search(machine, budget, symmetry, progress, on_error, reduce)


class Parents:
    """Each stored state's parent and the label of the step from it, by state number: the numbers
    in an array (8 bytes each) and the labels interned (a label is ("p", process) or ("a", agent):
    few distinct values, built afresh by every step). A list of (parent, label) pairs kept a pair
    and a label, about 130 bytes, per stored state."""

    def __init__(self) -> None:
        self.parent = array("q", [-1])
        self.label: list[tuple | None] = [None]
        self._labels: dict[tuple, tuple] = {}

    def __len__(self) -> int:
        return len(self.parent)

    def append(self, parent: int, label: tuple) -> None:
        self.parent.append(parent)
        self.label.append(self._labels.setdefault(label, label))


def _path_to(parents: Parents, sid: int, last: tuple | None) -> list[tuple]:
    labels = [] if last is None else [last]
    while sid > 0:
        labels.append(parents.label[sid])
        sid = parents.parent[sid]
    return labels[::-1]


def _search(machine: Machine, budget: Budget, symmetry: Symmetry | None,
            progress: Progress | None, on_error: OnError | None = None, reduce: bool = True) -> SearchOutcome:
    successors = successors_of(machine, reduce)
    start = time.monotonic()
    base_mb = budgets.rss_mb()
    # without interchangeable processes every state is its own representative: no call per successor
    canon = symmetry.canon if symmetry is not None and symmetry.groups else None
    visited = Visited(Interner())
    parents = Parents()
    queue: deque[tuple[State, int]] = deque()  # (state, its index): no second hash when popped
    errors: dict[tuple, tuple[Violation, int, tuple]] = {}
    warnings: dict[tuple, tuple[Violation, int, tuple]] = {}
    transitions = 0
    peak = base_mb
    stop = kind = ""
    nprocs = len(machine.procs)
    popped = 0
    reported = 0  # errors handed to on_error so far
    last_report = last_memory = start
    first_error_at: float | None = None
    machine.deadline = start + budget.seconds
    try:
        init = visited.add(machine.initial() if canon is None else canon(machine.initial())[0])
        queue.append((init, 0))
        while queue:
            if len(visited) > budget.max_states:
                stop, kind = budgets.reached(budgets.STATES, budget.max_states), budgets.STATES
                break
            popped += 1
            # the clock on every state (a state of a protocol with thousands of barriers can take
            # tens of milliseconds); memory every 256 states or 50 ms
            now = time.monotonic()
            if now - start > budget.seconds:
                stop, kind = budgets.reached(budgets.TIME, budget.seconds), budgets.TIME
                break
            if popped % 256 == 0 or now - last_memory >= 0.05:
                last_memory = now
                budgets.stop_if_interrupted()
                peak = max(peak, budgets.rss_mb())
                if peak - base_mb > budget.memory_mb:
                    stop, kind = budgets.reached(budgets.MEMORY, budget.memory_mb), budgets.MEMORY
                    break
                if progress is not None and now - last_report >= 0.25:
                    progress(len(visited), len(queue), now - start, peak - base_mb)
                    last_report = now
            if errors and budget.after_first_error is not None:
                first_error_at = now if first_error_at is None else first_error_at
                if now - first_error_at > budget.after_first_error:
                    stop, kind = (f"stopped {budget.after_first_error:g} s after the first error "
                                  "(--after-first-error)"), budgets.TIME
                    break
            if len(errors) >= MAX_DISTINCT_ERRORS:
                stop = f"stopped after {MAX_DISTINCT_ERRORS} distinct violations"
                break
            if on_error is not None and len(errors) > reported:
                told, reported = list(errors.values())[reported:], len(errors)
                if any([on_error(v, _path_to(parents, sid, lab)) for v, sid, lab in told]):
                    stop = "stopped at the first error (--fail-fast)"
                    break
            state, sid = queue.popleft()
            results: list[StepResult] = list(successors(state))
            if not results and not all(machine.done(state, p) for p in range(nprocs)):
                v = deadlock(machine, state)
                key = (v.code, v.span.line if v.span else 0, "deadlock")
                if key not in errors:
                    errors[key] = (v, sid, None)
            for res in results:
                transitions += 1
                for warn in res.warnings:
                    key = (warn.code, warn.span.line if warn.span else 0)
                    if key not in warnings:
                        warnings[key] = (warn, sid, res.label)
                for v in res.soft:
                    key = (v.code, v.span.line if v.span else 0, 0)
                    if key not in errors:
                        errors[key] = (v, sid, res.label)
                if res.violation is not None:
                    v = res.violation
                    key = (v.code, v.span.line if v.span else 0, v.related[0][0] if v.related else 0)
                    if key not in errors:
                        errors[key] = (v, sid, res.label)
                    continue
                nxt = visited.add(res.state if canon is None else canon(res.state)[0], state.records)
                if nxt is not None:
                    queue.append((nxt, len(parents)))
                    parents.append(sid, res.label)
    except BudgetExceeded as exc:  # the clock, inside one step
        stop, kind = str(exc), budgets.TIME
    finally:
        machine.deadline = None
    peak = max(peak, budgets.rss_mb())

    def path(sid: int, last: tuple | None) -> list[tuple]:
        return _path_to(parents, sid, last)

    return SearchOutcome(
        complete=not queue and not stop, states=len(visited), transitions=transitions,
        seconds=time.monotonic() - start, peak_mb=max(peak - base_mb, 0.0),
        errors=[(v, path(sid, lab)) for v, sid, lab in errors.values()],
        # a finding that is an error on some path is not also a warning at the same operation (the
        # SV602 of a .cta-scope remote arrive is decided per acquiring wait: data on one, reuse on another)
        warnings=[(v, path(sid, lab)) for (code, line), (v, sid, lab) in warnings.items()
                  if not any(k[0] == code and k[1] == line for k in errors)],
        stop_reason=stop, stopped_by=kind,
    )


def explore(protocol: ir.Protocol, budget: Budget, machine: Machine, full_trace: bool = False,
            strict: bool = False, symmetry: bool = True, progress: Progress | None = None,
            on_finding: Callable[[Diagnostic], bool] | None = None, reduce: bool = True,
            search_with: Callable[..., SearchOutcome] | None = None) -> CheckResult:
    """Search and report. `on_finding` sees each distinct error as soon as it is found (as it
    will be reported); returning True stops the search there (--fail-fast). `symmetry` and `reduce`:
    the search's reductions (symmetry between identical warps, partial-order reduction).
    `search_with`: a search with `search`'s signature and outcome (parallel.searcher: the same
    search on several cores)."""
    sym = symmetry_for(machine) if symmetry else None  # with renamings when verified (symmetry_perm.py)
    on_error = None if on_finding is None else \
        (lambda v, labels: on_finding(diagnostic(machine, v, labels, full_trace, sym)))
    outcome = (search_with or search)(machine, budget, sym, progress, on_error, reduce)
    diags = [diagnostic(machine, v, labels, full_trace, sym) for v, labels in outcome.errors]
    diags += [diagnostic(machine, v, labels, full_trace, sym) for v, labels in outcome.warnings]
    diags.sort(key=lambda d: (d.severity is not Severity.ERROR, d.span.line if d.span else 0, d.code))
    stats = Stats(outcome.states, outcome.transitions, outcome.seconds, outcome.peak_mb)
    bound = bound_of(protocol)
    has_error = any(d.is_error or (strict and d.severity is Severity.WARNING) for d in diags)
    if has_error:
        verdict = Verdict.VIOLATION
        coverage = "" if outcome.complete else f"search not finished ({outcome.stop_reason})"
    elif not outcome.complete:
        verdict = Verdict.INCONCLUSIVE
        coverage = f"no violation in {outcome.states} states; {outcome.stop_reason}"
    else:
        verdict = Verdict.SAFE
        coverage = ""
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=verdict, bound=bound,
                       diagnostics=tuple(diags), stats=stats, coverage=coverage, stopped_by=outcome.stopped_by)


def bound_of(protocol: ir.Protocol) -> str:
    """What an explicit check covers: the loop-bound params at their values, or all iterations."""
    if not protocol.loop_params:
        return "all-iterations"
    values = dict(protocol.params)
    return ", ".join(f"{name}={values[name]}" for name in protocol.loop_params)


__all__ = ["BAR_WAIT", "END", "Budget", "explore", "search"]
