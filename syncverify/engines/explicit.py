"""Explicit-state search: breadth-first over every interleaving.

Breadth-first order makes every counterexample a shortest one. Visited states
are kept whole (not hashed to fingerprints) so that no state can be skipped by
a collision: a false "safe" is the one bug this engine must not have. Each
state stores its parent and the step that led to it; traces are rebuilt by
replaying those steps through the machine.

Stored states are packed (store.py): every part is numbered once in a table of its kind and a
stored state is the array of its parts' numbers, one ``bytes`` of a few hundred bytes. The numbering
is a bijection, so two states pack alike only when they are equal: every state is still stored exactly.
The frontier holds at most WHOLE_AHEAD states whole; the others wait as their packed bytes (the
visited set's own objects) and are decoded when popped (store.py, "Why the queue holds whole states").

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
from dataclasses import dataclass, replace

from .. import budget as budgets
from .. import ir
from ..diagnostics import Diagnostic, Severity
from ..result import CheckResult, Stats, Verdict
from ..semantics.machine import BudgetExceeded, Machine, Violation
from ..semantics.program import BAR_WAIT, END
from ..semantics.symmetry import Symmetry
from ..semantics.symmetry_cta import CtaSymmetry, cta_symmetry
from ..semantics.symmetry_perm import symmetry_for
from .reduction import KEEP_TRUE_PROBES, successors_of
from .reduction.probe_outcome import stale_waiter_may_have_moved
from .store import Opened, Visited
from .witness import Replays, deadlock, diagnostic

MAX_DISTINCT_ERRORS = 12
# states the frontier holds whole (the rest packed, decoded when popped): whole, a waiting state of the
# fenced 2-SM sm100 GEMM costs ~15 KB with its share of the level caches (bench/frontier_memory.py), so
# ~16 MB in all; the ping-pong GEMMs' frontiers stay below it, and their searches decode nothing
WHOLE_AHEAD = 1024


@dataclass(frozen=True)
class Budget:
    max_states: int = 2_000_000
    seconds: float = 600.0
    memory_mb: float = 8192.0
    # seconds the search goes on after its first error, looking for others, before it stops (None: to the
    # end or another budget). A violation is certain once found; what a stop here costs is completeness of
    # the list of findings, never a verdict: the result is a violation with `search not finished`.
    after_first_error: float | None = None
    # time.monotonic() when the clock of ``seconds`` started (None: when the search starts). A check sets it
    # before what it does ahead of the search (proving CTAs interchangeable), which the same clock bounds.
    clock: float | None = None


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
           progress: Progress | None = None, on_error: OnError | None = None,
           reduce: bool | str = True, whole_ahead: int = WHOLE_AHEAD) -> SearchOutcome:
    """Explore the machine's states; ``reduce``: with partial-order reduction (engines/reduction/),
    or every step the model offers. ``whole_ahead``: the states the frontier holds whole (the rest
    packed): it changes the memory and the work, never the states, their order or the answer."""
    with cyclic_gc_paused():
        return _search(machine, budget, symmetry, progress, on_error, reduce, whole_ahead)


class Parents:
    """Each stored state's parent and the label of the step from it, by state number: the numbers
    in an array (8 bytes each) and the labels interned (a label is ("p", process) or ("a", agent):
    few distinct values, built afresh by every step). A list of (parent, label) pairs kept a pair
    and a label, about 130 bytes, per stored state. A start has parent -1 and no label: state 0,
    entered here (``root``), or each start a search with several enters itself (the lift's)."""

    def __init__(self, root: bool = True) -> None:
        self.parent = array("q", [-1] if root else [])
        self.label: list[tuple | None] = [None] if root else []
        self._labels: dict[tuple | None, tuple | None] = {}

    def __len__(self) -> int:
        return len(self.parent)

    def append(self, parent: int, label: tuple | None) -> None:
        self.parent.append(parent)
        self.label.append(self._labels.setdefault(label, label))


def _path_to(parents: Parents, sid: int, last: tuple | None) -> list[tuple]:
    labels = [] if last is None else [last]
    while parents.parent[sid] >= 0:
        labels.append(parents.label[sid])
        sid = parents.parent[sid]
    return labels[::-1]


def _search(machine: Machine, budget: Budget, symmetry: Symmetry | None,
            progress: Progress | None, on_error: OnError | None = None, reduce: bool | str = True,
            whole_ahead: int = WHOLE_AHEAD) -> SearchOutcome:
    successors = successors_of(machine, reduce, cut=True)
    start = time.monotonic()
    base_mb = budgets.rss_mb()
    # without interchangeable processes every state is its own representative: no call per successor
    canon = symmetry.canon if symmetry is not None and symmetry.groups else None
    visited = Visited()
    parents = Parents()
    # the states waiting, in the order they were stored (so the n-th popped is state number n): whole with
    # their packed numbers, at most ``whole_ahead`` of them at a time, the others as their packed bytes
    queue: deque[Opened | bytes] = deque()
    whole = 0  # the states the queue holds whole
    errors: dict[tuple, tuple[Violation, int, tuple]] = {}
    warnings: dict[tuple, tuple[Violation, int, tuple]] = {}
    transitions = 0
    peak = base_mb
    stop = kind = ""
    cut, cuts = "", 0  # the first step past the model's bounds met, in the search's order, and how many
    nprocs = len(machine.procs)
    popped = 0
    reported = 0  # errors handed to on_error so far
    last_report = last_memory = start
    first_error_at: float | None = None
    clock = start if budget.clock is None else budget.clock
    machine.deadline = clock + budget.seconds
    try:
        init = visited.add(machine.initial() if canon is None else canon(machine.initial())[0])
        assert init is not None  # the first state stored
        queue.append(init)
        whole = 1
        sid = -1  # the number of the state being expanded
        level_end = 0  # the number of the first state of the level after the one being expanded
        while queue:
            if len(visited) > budget.max_states:
                stop, kind = budgets.reached(budgets.STATES, budget.max_states), budgets.STATES
                break
            popped += 1
            # the clock on every state (a state of a protocol with thousands of barriers can take
            # tens of milliseconds); memory every 256 states or 50 ms
            now = time.monotonic()
            if now - clock > budget.seconds:
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
            waiting = queue.popleft()
            sid += 1
            if type(waiting) is bytes:
                opened = visited.open(waiting)
            else:
                opened = waiting
                whole -= 1
            if sid >= level_end:  # the first state of a level: the states stored from here are the next one's
                visited.next_level()
                level_end = len(parents)
            state = opened.state
            results = successors(state)
            if not results and not all(machine.done(state, p) for p in range(nprocs)):
                v = deadlock(machine, state)
                key = (v.code, v.span.line if v.span else 0, "deadlock")
                if key not in errors:
                    errors[key] = (v, sid, None)
            for res in results:
                if res.cut:
                    cut, cuts = cut or res.cut, cuts + 1
                    continue
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
                nxt = visited.add(res.state if canon is None else canon(res.state)[0], opened, whole < whole_ahead)
                if nxt is not None:
                    queue.append(nxt)
                    whole += type(nxt) is not bytes
                    parents.append(sid, res.label)
    except BudgetExceeded as exc:  # the clock, inside one step
        stop, kind = str(exc), budgets.TIME
    finally:
        machine.deadline = None
    peak = max(peak, budgets.rss_mb())

    def path(sid: int, last: tuple | None) -> list[tuple]:
        return _path_to(parents, sid, last)

    return SearchOutcome(
        complete=not queue and not stop and not cuts, stop_reason=stop or past_bounds(cut, cuts), stopped_by=kind,
        states=len(visited), transitions=transitions,
        seconds=time.monotonic() - start, peak_mb=max(peak - base_mb, 0.0),
        errors=[(v, path(sid, lab)) for v, sid, lab in errors.values()],
        # a finding that is an error on some path is not also a warning at the same operation (the
        # SV602 of a .cta-scope remote arrive is an error where an access needs it, a warning elsewhere;
        # an arrive that completes an unobserved phase on one path, SV502, lands early on another, SV505)
        warnings=[(v, path(sid, lab)) for (code, line), (v, sid, lab) in warnings.items()
                  if not any(k[0] == _ERROR_OF_WARNING.get(code, code) and k[1] == line for k in errors)],
    )


# a warning that names the same operation as an error of another code, where both are found
_ERROR_OF_WARNING = {"SV505": "SV502"}


def past_bounds(first: str, count: int) -> str:
    """Why a search that went on past steps the model cannot take exactly is not complete."""
    if not count:
        return ""
    others = f" and {count - 1} more past the model's bounds" if count > 1 else ""
    return f"{first}; that step{others} not taken, the search went on without {'them' if others else 'it'}"


def explore(protocol: ir.Protocol, budget: Budget, machine: Machine, full_trace: bool = False,
            strict: bool = False, symmetry: bool = True, progress: Progress | None = None,
            on_finding: Callable[[Diagnostic], bool] | None = None, reduce: bool | str = True,
            search_with: Callable[..., SearchOutcome] | None = None) -> CheckResult:
    """Search and report. `on_finding` sees each distinct error as soon as it is found (as it
    will be reported); returning True stops the search there (--fail-fast). `symmetry` and `reduce`:
    the search's reductions (symmetry between identical warps, partial-order reduction).
    `search_with`: a search with `search`'s signature and outcome (parallel.searcher: the same
    search on several cores)."""
    # plain swaps only: with renamings (symmetry_perm.py) a finding at one of two mirrored lines is reported at
    # one of them only (tests/test_properties.py, SV204 from two sites), so that form is not the default yet;
    # exchanges of whole CTAs (symmetry_cta.py) keep every line, so they are
    # The budget's clock starts here: proving CTAs interchangeable can take seconds on a large grid, so it
    # runs under the same deadline (it then gives up the exchange, which only costs states), and the search
    # gets what is left.
    clock = time.monotonic()
    machine.deadline = clock + budget.seconds
    try:
        sym = (cta_symmetry(machine) or symmetry_for(machine, permuted=False)) if symmetry else None
    except BudgetExceeded:
        sym = None  # (the search then stops at once, on the same clock)
    finally:
        machine.deadline = None
    budget = replace(budget, clock=clock)
    replays = Replays(machine)  # the reports' paths share prefixes: their steps replayed once
    on_error = None if on_finding is None else \
        (lambda v, labels: on_finding(diagnostic(machine, v, labels, full_trace, sym, replays)))
    outcome = (search_with or search)(machine, budget, sym, progress, on_error, reduce)
    if reduce is True and outcome.complete and stale_waiter_may_have_moved(machine, (v for v, _ in outcome.errors)):
        # A kept probe's true outcome left out may move a stale waiter's finding from the probe's line to the
        # wait's (engines/reduction/probe_outcome.py): the search again, with every true outcome, reports both.
        seen = {(v.code, v.span.line if v.span else None) for v, _ in outcome.errors}
        on_new = None if on_error is None else \
            (lambda v, labels: (v.code, v.span.line if v.span else None) not in seen and on_error(v, labels))
        # within what is left of the clock (the same one: ``Budget.clock``) and of the states; where it cannot
        # finish, the first search's findings stand (the same verdict and codes, the stale waiter's maybe at the
        # wait's line)
        left = replace(budget, max_states=max(budget.max_states - outcome.states, 0))
        again = (search_with or search)(machine, left, sym, progress, on_new, KEEP_TRUE_PROBES)
        outcome = again if again.complete else outcome
    diags = [diagnostic(machine, v, labels, full_trace, sym, replays) for v, labels in outcome.errors]
    diags += [diagnostic(machine, v, labels, full_trace, sym, replays) for v, labels in outcome.warnings]
    diags.sort(key=lambda d: (d.severity is not Severity.ERROR, d.span.line if d.span else 0, d.code))
    stats = Stats(outcome.states, outcome.transitions, outcome.seconds, outcome.peak_mb)
    bound = bound_of(protocol)
    has_error = any(d.is_error or (strict and d.severity is Severity.WARNING) for d in diags)
    if has_error:
        verdict = Verdict.VIOLATION
        coverage = "" if outcome.complete else f"search not finished ({outcome.stop_reason})"
    elif not outcome.complete:
        verdict = Verdict.INCONCLUSIVE
        # (states counted up to the exchange of interchangeable CTAs: semantics/symmetry_cta.py)
        reduced = f" ({sym.describe()})" if isinstance(sym, CtaSymmetry) else ""
        coverage = f"no violation in {outcome.states} states{reduced}; {outcome.stop_reason}"
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
