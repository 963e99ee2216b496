"""Many checks in one command: files × the points of a `-D` sweep, over several processes.

`check -D STAGES=2,4,8 -D ITERS=8,16 a.sync b.sync` checks each file at each point of the
cross product (the first swept name varies slowest), file by file in the order given. With
``--jobs N`` the checks run in N worker processes, but the results are collected in that same
order, so the output does not depend on N (only the measured seconds differ). Each check runs
with the whole budget of one check; the exit status is the worst of all (``combine_exit``).

Interrupts: the workers ignore SIGINT (and tell Z3 not to catch it), so a Ctrl-C at the
terminal reaches only the parent, which stops the pool and exits 130.
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from .check import Options, check_path
from .result import CheckResult

_In = TypeVar("_In")
_Out = TypeVar("_Out")


@dataclass(frozen=True)
class Task:
    """One check: a file at one point of the sweep."""

    path: str
    defines: tuple[tuple[str, int], ...]  # every -D, at this point's values
    sweep: tuple[tuple[str, int], ...]  # the swept names only (what tells this point from the others)


def points(defines: Sequence[tuple[str, tuple[int, ...]]]) -> list[tuple[tuple[tuple[str, int], ...],
                                                                          tuple[tuple[str, int], ...]]]:
    """The points of a sweep, in order: (every define, the swept ones) per point. A name given twice
    keeps its last values, at the place of its first."""
    merged: dict[str, tuple[int, ...]] = {}
    for name, values in defines:
        merged[name] = values
    names = list(merged)
    swept = {n for n in names if len(merged[n]) > 1}
    out = []
    for combo in itertools.product(*(merged[n] for n in names)):
        point = tuple(zip(names, combo, strict=True))
        out.append((point, tuple((n, v) for n, v in point if n in swept)))
    return out


def tasks(paths: Sequence[str], defines: Sequence[tuple[str, tuple[int, ...]]]) -> list[Task]:
    return [Task(path, point, sweep) for path in paths for point, sweep in points(defines)]


def _quiet_worker() -> None:
    """Worker start: leave SIGINT to the parent (it terminates the pool), including inside Z3."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import z3

        z3.set_param("ctrl_c", False)
    except ImportError:
        pass


def _check(args: tuple[Task, Options]) -> CheckResult:
    task, options = args
    return _run_one(task, options, check_path)


def _run_one(task: Task, options: Options, run: Callable[[str, Options], CheckResult]) -> CheckResult:
    result = run(task.path, replace(options, defines=dict(task.defines)))
    return replace(result, sweep=task.sweep) if task.sweep else result


def run_all(todo: Sequence[Task], options: Options, jobs: int,
            run: Callable[[str, Options], CheckResult] = check_path) -> Generator[CheckResult, None, None]:
    """The results of ``todo``, in its order. ``run`` checks one file in this process (jobs == 1,
    where the caller may show progress); with jobs > 1 each check runs in a worker process."""
    if jobs <= 1 or len(todo) <= 1:
        for task in todo:
            yield _run_one(task, options, run)
        return
    yield from in_order(_check, [(task, replace(options, progress=None)) for task in todo], jobs)


def in_order(fn: Callable[[_In], _Out], items: Sequence[_In], jobs: int) -> Generator[_Out, None, None]:
    """``fn`` of each item, yielded in the items' order; with jobs > 1 computed in that many worker
    processes (``fn`` must be a module-level function, its items and results picklable). Closing the
    generator early terminates the workers."""
    if jobs <= 1 or len(items) <= 1:
        for item in items:
            yield fn(item)
        return
    import multiprocessing

    # fork: the workers start at once, with the modules already imported; nothing here holds a lock
    # or a thread that a fork could break (the parent is single-threaded: Z3 answers its queries in the
    # calling thread, and each check makes its own solvers inside the worker)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(min(jobs, len(items)), initializer=_quiet_worker) as pool:  # exit: terminate()
        yield from pool.imap(fn, items, chunksize=1)
