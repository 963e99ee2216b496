"""Explicit-state search on N cores, with the one-core search's answer (``check --search-jobs N``).

Why the answer is the same. The sequential search (explicit.py) is a breadth-first search with a
FIFO queue over a successor function that depends on the state alone: the partial-order
reduction (reduction/) chooses a state's steps from that state (its memo, precede_memo.py, is keyed
by what the choice reads), never from the states visited or the path that led there, and the state
graph is acyclic (loops are bounded), so no cycle proviso ties the choice to the search order. A
FIFO breadth-first search pops every state of level L (the states first reached in L steps) before
any of level L+1, and numbers the states as it first meets them. So the level sets, and the order
within each level, are fixed by the graph:

* level L+1 is the set of successors of level L that no earlier level holds;
* a state s of level L+1 is first met from its *first discoverer*: the pair (rank of the parent
  within level L, index of the step among the parent's successors) that is least among all pairs
  leading to s; s's parent in the sequential search is that parent, its rank in level L+1 is the
  rank of that pair among the first discoverers of level L+1.

This search computes exactly that, level-synchronously. Each worker process owns the states whose
hash (of their processes and agents in flight, the same part explicit.Visited buckets by; the
workers are forked, so they hash alike) falls to it. Each level, every worker expands the states
it owns in rank order and sends each successor, with its key (parent rank, step index), to the
successor's owner; each owner merges what it receives in key order, so that the first copy of a
state it stores is the one with the least key, and tells the coordinator the keys of its new
states. The coordinator merges the keys of all owners: that is level L+1 in the sequential order,
each state's parent and step label with it. There is one barrier per level.

Findings, budgets and the rest of the search's bookkeeping are then replayed by the coordinator,
per level, in the sequential search's order: the states of level L in rank order, each with the
number of steps it took, the number of new states it was the first discoverer of, and its findings
(errors, warnings, deadlocks) in the order its steps produced them. The checks the sequential
search makes before each pop that depend on nothing but that order are made at the same points: the
state budget (``len(visited) > max_states``), the limit of MAX_DISTINCT_ERRORS errors, and
``on_error`` (--fail-fast) with the errors found so far. So the verdict, the findings, the state
with which each finding is reported (the first in search order, with its path: the same shortest
counterexample), the state and transition counts, and a state budget's inconclusive are those of
the sequential search, for every N. Only the clocks differ: the time and memory budgets are checked
per level (and per state inside each worker), and what either ends is inconclusive, never safe.
``after_first_error`` (a time after the first error) cannot be replayed and is refused.

Why not a shared visited set. Python processes share no objects; the owner-computes split sends
each successor once, pickled, and keeps each stored state in one process only, so the memory of
the stored states is split N ways as well.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import signal
import time
from array import array
from collections.abc import Callable
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any

from .. import budget as budgets
from ..semantics.machine import BudgetExceeded, Machine, Violation
from ..semantics.state import State
from ..semantics.symmetry import Symmetry
from .explicit import (
    MAX_DISTINCT_ERRORS,
    WHOLE_AHEAD,
    Budget,
    OnError,
    Parents,
    Progress,
    SearchOutcome,
    _path_to,
    cyclic_gc_paused,
    past_bounds,
)
from .reduction import successors_of
from .store import Opened, Visited
from .witness import deadlock

SHIFT = 24  # bits of a step's index in a key: key = parent rank << SHIFT | step index
POLL = 0.25  # seconds between looks at the interrupt flag while the workers run


class Refused(ValueError):
    """A combination the parallel search cannot answer as the sequential one would."""


def available() -> str | None:
    """None if the parallel search can run here, else why not: its workers are forked, so that they
    start with the machine built and hash the states alike (a spawned process has its own string
    hash seed: equal states would then fall to different owners)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return "the parallel search forks its workers, and this platform cannot fork"
    return None


def refusal(jobs: int, after_first_error: float | None) -> str | None:
    """Why ``jobs`` search processes cannot answer this check as one would, or None."""
    if jobs <= 1:
        return None
    if after_first_error is not None:
        return ("--after-first-error stops the search by the clock, which the parallel search cannot "
                "replay in the one-core order: give --after-first-error 0 (search to the end) or "
                "--search-jobs 1")
    return available()


def searcher(jobs: int) -> Callable[..., SearchOutcome]:
    """A search function with explicit.search's signature that uses ``jobs`` processes."""
    return partial(search, jobs=jobs)


def search(machine: Machine, budget: Budget, symmetry: Symmetry | None = None,
           progress: Progress | None = None, on_error: OnError | None = None, reduce: bool | str = True,
           whole_ahead: int = WHOLE_AHEAD, *, jobs: int = 2) -> SearchOutcome:
    """explicit.search's outcome, computed by ``jobs`` worker processes (see the module's doc).
    ``whole_ahead``: the states each worker's frontier holds whole (the rest packed), as explicit.search's."""
    if jobs <= 1:
        from .explicit import search as sequential

        return sequential(machine, budget, symmetry, progress, on_error, reduce, whole_ahead)
    why = refusal(jobs, budget.after_first_error)
    if why is not None:
        raise Refused(why)
    with cyclic_gc_paused():
        return _Coordinator(machine, budget, symmetry, progress, on_error, reduce, jobs, whole_ahead).run()


def _owner(state: State, jobs: int) -> int:
    return hash((state.procs, state.agents)) % jobs


def _portable(v: Violation) -> tuple:
    """A finding as it crosses a process boundary: an exception pickles as its class and args, and
    Violation's constructor takes more than its message."""
    return type(v), v.args, dict(v.__dict__)


def _restored(parts: tuple) -> Violation:
    cls, args, fields = parts
    v = cls.__new__(cls)
    v.args = args
    v.__dict__.update(fields)
    return v


def _error_key(v: Violation, kind: Any) -> tuple:
    return (v.code, v.span.line if v.span else 0, kind)


# An event: (rank, E or W, key, violation, label) — E: an error, W: a warning, in the order the
# sequential search records them (explicit._search: a deadlock; per step its warnings, its soft
# errors, its violation) — or (rank, C, None, why, None): a step past the model's bounds, not taken.
E, W, C = 0, 1, 2


def _worker(me: int, jobs: int, machine: Machine, successors: Callable, canon: Callable | None,
            init: State, deadline: float, memory_mb: float, ctl: Any, inboxes: list, whole_ahead: int) -> None:
    """One worker: owns the states that hash to ``me``; expands its share of each level when told."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator handles an interrupt and ends us
    base = budgets.rss_mb()
    peak = base
    machine.deadline = deadline
    visited = Visited()
    # the states of the current level this worker owns: whole with their packed numbers, at most
    # WHOLE_AHEAD of them, the others as their packed bytes (decoded when expanded), as explicit.py holds them
    frontier: list[Opened | bytes] = []
    if _owner(init, jobs) == me:
        frontier.append(visited.add(init))  # type: ignore[arg-type]
    seen_errors: set[tuple] = set()
    seen_warnings: set[tuple] = set()
    while True:
        msg = ctl.recv()
        if msg[0] == "stop":
            break
        ranks: array = msg[1]
        out: list[list[tuple]] = [[] for _ in range(jobs)]
        steps = array("q")
        events: list[tuple] = []
        stopped = ""
        raised: tuple | None = None
        try:
            _expand(machine, successors, canon, jobs, frontier, visited.open, ranks, deadline, memory_mb, base, out,
                    steps, events, seen_errors, seen_warnings)
        except _Stopped as stop:
            stopped = stop.kind
        except Exception as exc:  # the sequential search would raise it: the coordinator raises it there
            raised = _portable(exc)
        for j in range(jobs):  # always, so that no owner waits for a batch that never comes
            if j != me:
                inboxes[j].put(out[j])
        batches = [out[me]] + [inboxes[me].get() for _ in range(jobs - 1)]
        keys = array("q")
        labels: list[tuple] = []
        fresh: list[Opened | bytes] = []
        whole = 0
        visited.next_level()
        # in key order: the first copy of a state stored is its first discoverer's
        for key, state, label in heapq.merge(*batches, key=itemgetter(0)):
            stored = visited.add(state, None, whole < whole_ahead)
            if stored is not None:
                keys.append(key)
                labels.append(label)
                fresh.append(stored)
                whole += type(stored) is not bytes
        del batches, out
        frontier = fresh
        peak = max(peak, budgets.rss_mb())
        ctl.send((steps, events, keys, labels, stopped, peak - base, raised))
    ctl.close()


class _Stopped(Exception):
    """A worker's budget (time or memory) ran out in the middle of a level."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _expand(machine: Machine, successors: Callable, canon: Callable | None, jobs: int,
            frontier: list[Opened | bytes], open_packed: Callable[[bytes], Opened], ranks: array, deadline: float,
            memory_mb: float, base: float, out: list[list[tuple]], steps: array, events: list[tuple],
            seen_errors: set[tuple], seen_warnings: set[tuple]) -> None:
    """A worker's share of one level: its states in rank order, each successor to its owner's batch in
    ``out``, the steps taken per state in ``steps``, the findings first met here in ``events``."""
    nprocs = len(machine.procs)
    for n, (waiting, rank) in enumerate(zip(frontier, ranks, strict=True)):
        state = (open_packed(waiting) if type(waiting) is bytes else waiting).state
        if time.monotonic() > deadline:
            raise _Stopped(budgets.TIME)
        if n % 256 == 255 and budgets.rss_mb() - base > memory_mb:
            raise _Stopped(budgets.MEMORY)
        try:
            results = list(successors(state))
        except BudgetExceeded as exc:
            raise _Stopped(budgets.TIME) from exc
        if len(results) >> SHIFT:  # a key holds the step's index in SHIFT bits
            raise ValueError(f"a state with {len(results)} successors: more than the parallel search numbers")
        steps.append(sum(not res.cut for res in results))
        if not results and not all(machine.done(state, p) for p in range(nprocs)):
            v = deadlock(machine, state)
            key = _error_key(v, "deadlock")
            if key not in seen_errors:
                seen_errors.add(key)
                events.append((rank, E, key, _portable(v), None))
        for i, res in enumerate(results):
            if res.cut:
                events.append((rank, C, None, res.cut, None))
                continue
            for warn in res.warnings:
                key = (warn.code, warn.span.line if warn.span else 0)
                if key not in seen_warnings:
                    seen_warnings.add(key)
                    events.append((rank, W, key, _portable(warn), res.label))
            for v in res.soft:
                key = _error_key(v, 0)
                if key not in seen_errors:
                    seen_errors.add(key)
                    events.append((rank, E, key, _portable(v), res.label))
            if res.violation is not None:
                v = res.violation
                key = _error_key(v, v.related[0][0] if v.related else 0)
                if key not in seen_errors:
                    seen_errors.add(key)
                    events.append((rank, E, key, _portable(v), res.label))
                continue
            nxt = res.state if canon is None else canon(res.state)[0]
            out[_owner(nxt, jobs)].append(((rank << SHIFT) | i, nxt, res.label))


class _Coordinator:
    """Starts the workers, runs the levels, and replays each level in the sequential order."""

    def __init__(self, machine: Machine, budget: Budget, symmetry: Symmetry | None, progress: Progress | None,
                 on_error: OnError | None, reduce: bool | str, jobs: int, whole_ahead: int = WHOLE_AHEAD) -> None:
        self.machine, self.budget, self.progress, self.on_error = machine, budget, progress, on_error
        self.jobs = jobs
        self.whole_ahead = whole_ahead
        self.successors = successors_of(machine, reduce, cut=True)
        self.canon = symmetry.canon if symmetry is not None and symmetry.groups else None
        self.parents = Parents()
        self.errors: dict[tuple, tuple[Violation, int, tuple | None]] = {}
        self.warnings: dict[tuple, tuple[Violation, int, tuple | None]] = {}
        self.visited = 1  # len(visited) of the sequential search at this point of the replay
        self.transitions = 0
        self.reported = 0
        self.stop = self.kind = ""
        self.cut, self.cuts = "", 0  # the first step past the model's bounds in the sequential order, and how many

    def run(self) -> SearchOutcome:
        start = time.monotonic()
        base = budgets.rss_mb()
        init = self.machine.initial()
        init = init if self.canon is None else self.canon(init)[0]
        ctx = multiprocessing.get_context("fork")
        pipes = [ctx.Pipe() for _ in range(self.jobs)]
        inboxes = [ctx.Queue() for _ in range(self.jobs)]
        clock = start if self.budget.clock is None else self.budget.clock  # (explicit.Budget.clock)
        deadline = clock + self.budget.seconds
        share = self.budget.memory_mb / self.jobs
        workers = [ctx.Process(target=_worker, daemon=True,
                               args=(w, self.jobs, self.machine, self.successors, self.canon, init, deadline,
                                     share, pipes[w][1], inboxes, self.whole_ahead))
                   for w in range(self.jobs)]
        ctl = [p[0] for p in pipes]
        worker_mb = [0.0] * self.jobs
        peak = base
        # the ranks of the current level's states, per owner; level 0 is the initial state
        ranks = [array("q", [0] if _owner(init, self.jobs) == w else []) for w in range(self.jobs)]
        offset, size = 0, 1  # the current level: its first state number and its number of states
        complete = False
        try:
            for w in workers:
                w.start()
            for p in pipes:
                p[1].close()  # the workers' ends: a worker that dies then shows as EOF
            while True:
                for w in range(self.jobs):
                    ctl[w].send(("expand", ranks[w]))
                replies = [self._receive(c, workers) for c in ctl]
                raised = next((r[6] for r in replies if r[6] is not None), None)
                if raised is not None:
                    raise _restored(raised)
                worker_mb = [max(m, r[5]) for m, r in zip(worker_mb, replies, strict=True)]
                peak = max(peak, budgets.rss_mb())
                stopped = next((r[4] for r in replies if r[4]), "")
                if stopped or time.monotonic() - clock > self.budget.seconds:
                    kind = stopped or budgets.TIME
                    limit = self.budget.seconds if kind == budgets.TIME else self.budget.memory_mb
                    self.stop, self.kind = budgets.reached(kind, limit), kind
                    break
                if sum(worker_mb) + peak - base > self.budget.memory_mb:
                    self.stop, self.kind = budgets.reached(budgets.MEMORY, self.budget.memory_mb), budgets.MEMORY
                    break
                ranks, nxt = self._level(offset, size, ranks, replies)
                if self.stop:
                    break
                offset, size = offset + size, nxt
                if self.progress is not None:
                    self.progress(self.visited, size, time.monotonic() - start, sum(worker_mb) + peak - base)
                if size == 0:
                    complete = True
                    break
                budgets.stop_if_interrupted()
        finally:
            self.machine.deadline = None
            for c in ctl:
                try:
                    c.send(("stop",))
                except OSError:
                    pass
            for w in workers:
                w.join(timeout=1.0)
                if w.is_alive():
                    w.terminate()
                    w.join()
            for q in inboxes:
                q.close()
                q.cancel_join_thread()
        peak = max(peak, budgets.rss_mb())

        def path(sid: int, last: tuple | None) -> list[tuple]:
            return _path_to(self.parents, sid, last)

        return SearchOutcome(
            complete=complete and not self.stop and not self.cuts, states=self.visited, transitions=self.transitions,
            seconds=time.monotonic() - start, peak_mb=max(sum(worker_mb) + peak - base, 0.0),
            errors=[(v, path(sid, lab)) for v, sid, lab in self.errors.values()],
            warnings=[(v, path(sid, lab)) for (code, line), (v, sid, lab) in self.warnings.items()
                      if not any(k[0] == code and k[1] == line for k in self.errors)],
            stop_reason=self.stop or past_bounds(self.cut, self.cuts), stopped_by=self.kind)

    @staticmethod
    def _receive(conn: Any, workers: list) -> tuple:
        """A worker's reply to one level; the interrupt flag and the workers' lives looked at meanwhile."""
        while not conn.poll(POLL):
            budgets.stop_if_interrupted()
            dead = [w for w in workers if w.exitcode is not None]
            if dead:
                raise RuntimeError(f"a search worker ended (exit code {dead[0].exitcode})")
        return conn.recv()

    def _level(self, offset: int, size: int, ranks: list[array], replies: list[tuple]) -> tuple[list[array], int]:
        """Merge the owners' new states into the next level (ranks per owner, its size), record their
        parents, and replay this level's pops in the sequential order."""
        steps = array("q", bytes(8 * size))
        for own, reply in zip(ranks, replies, strict=True):
            for rank, n in zip(own, reply[0], strict=True):
                steps[rank] = n
        discovered = array("q", bytes(8 * size))  # per state of this level: new states it first reached
        nxt: list[array] = [array("q") for _ in range(self.jobs)]
        labels = [r[3] for r in replies]
        rank = 0
        streams = [zip(r[2], repeat(w), range(len(r[2]))) for w, r in enumerate(replies)]
        for key, w, i in heapq.merge(*streams):
            parent = key >> SHIFT
            discovered[parent] += 1
            self.parents.append(offset + parent, labels[w][i])
            nxt[w].append(rank)
            rank += 1
        events = sorted((e for r in replies for e in r[1]), key=itemgetter(0))  # a worker's are in its order
        self._replay(offset, size, steps, discovered, events)
        return nxt, rank

    def _replay(self, offset: int, size: int, steps: array, discovered: array, events: list[tuple]) -> None:
        """The sequential search's loop over this level's pops: the checks before each pop, then its
        counts and findings (explicit._search)."""
        budget, e = self.budget, 0
        for r in range(size):
            if self.visited > budget.max_states:
                self.stop, self.kind = budgets.reached(budgets.STATES, budget.max_states), budgets.STATES
                return
            if len(self.errors) >= MAX_DISTINCT_ERRORS:
                self.stop = f"stopped after {MAX_DISTINCT_ERRORS} distinct violations"
                return
            if self.on_error is not None and len(self.errors) > self.reported:
                told, self.reported = list(self.errors.values())[self.reported:], len(self.errors)
                if any([self.on_error(v, _path_to(self.parents, sid, lab)) for v, sid, lab in told]):
                    self.stop = "stopped at the first error (--fail-fast)"
                    return
            self.visited += discovered[r]
            self.transitions += steps[r]
            while e < len(events) and events[e][0] == r:
                _, kind, key, v, label = events[e]
                e += 1
                if kind == C:
                    self.cut, self.cuts = self.cut or v, self.cuts + 1
                    continue
                table = self.errors if kind == E else self.warnings
                if key not in table:
                    table[key] = (_restored(v), offset + r, label)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


__all__ = ["Refused", "available", "cores", "refusal", "search", "searcher"]
