"""Budgets: what may end a check before it decides, and how every engine measures them.

Two kinds of budget, kept apart on purpose:

* *Deterministic* budgets decide when an engine gives up: the states a search stores
  (``--max-states``: the explicit search and the all-iterations lift) and the Z3 resource
  units its solver queries spend (``--rlimit``: the bmc engine; Z3's ``rlimit`` counts work,
  not time). The same file with the same options ends the same way on a quiet machine and on
  a loaded one.
* *Outer* limits protect the user's machine: the wall clock (``--timeout``) and the memory
  (``--max-memory``). They are checked everywhere an engine can spend long — inside a search,
  while the bmc engine builds its encoding, and inside Z3 (its own ``timeout`` and
  ``memory_max_size``) — but a verdict they end can depend on the machine's load.

Whichever runs out first ends the check as *inconclusive* (never safe), and the result says
which one (``CheckResult.stopped_by``: one of ``KINDS``).

SIGINT: left to itself, Z3 catches SIGINT while it solves and cancels the query, and the signal
never reaches Python. A query that ends anyway (the cancel is looked at only at some points of
the search) answers sat or unsat, and the interrupt is lost: the check went on and printed its
verdict. The command line therefore watches SIGINT itself (``sigint_watched``): Z3 is told not
to catch it, and a thread woken by the signal (``signal.set_wakeup_fd``) marks the check
interrupted and interrupts the queries running. ``solve`` turns an interrupted query back into
a ``KeyboardInterrupt``, so an interrupted check never becomes a verdict.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from . import z3_lazy

STATES = "states"
RLIMIT = "rlimit"
TIME = "time"
MEMORY = "memory"
KINDS = (STATES, RLIMIT, TIME, MEMORY)
DETERMINISTIC = (STATES, RLIMIT)

# Z3 takes an unsigned 32-bit rlimit per query; a larger budget is spent over several queries
Z3_RLIMIT_MAX = 4_000_000_000
# The default Z3 resource budget of one check. Z3 counts units at very different rates on different
# queries (the bmc engine's bit-blasted queries: 0.4 to 5 million a second on this project's
# machine), so this is no time in disguise: it is what the slowest spec in bench/RESULTS-bmc.md
# needs with room to spare (each of its queries stayed under the 4e9 a query may take).
DEFAULT_RLIMIT = 10_000_000_000


# Set by the command line's SIGINT handler. Its KeyboardInterrupt can be lost: raised inside a
# __del__ (Z3's objects have one, run wherever the collector frees them) Python prints and drops
# it; raised inside a ctypes call it becomes a ctypes.ArgumentError. The engines look at this flag
# where they look at the clock, so an interrupt that was lost still stops the check at once.
interrupted = False


def stop_if_interrupted() -> None:
    if interrupted:
        raise KeyboardInterrupt


_solving: set[Any] = set()  # the Z3 contexts of the queries running now (``solve``)
_watched = False  # is SIGINT watched (``sigint_watched``)? Then Z3 must not catch it


def _interrupt_queries() -> None:
    """Mark the check interrupted and cancel the Z3 queries running (from the watching thread:
    Z3_interrupt is made to be called from another thread while a query runs)."""
    global interrupted
    interrupted = True
    z3 = z3_lazy.loaded()
    contexts = list(_solving) + ([z3.main_ctx()] if z3 is not None else [])
    for ctx in contexts:
        ctx.interrupt()


@contextmanager
def sigint_watched() -> Iterator[None]:
    """Watch SIGINT for as long as a command runs (main thread only).

    Python's own handler runs only when the main thread is back in the interpreter, which it is
    not while Z3 solves; the C-level handler writes the signal's number to the wakeup fd at once,
    whatever the main thread does. A thread reading that fd interrupts the running queries, and
    Z3's own catching of SIGINT is turned off (``solve``), so no signal can end up with Z3 alone.
    The Python handler still runs and raises KeyboardInterrupt where the main thread is."""
    global _watched
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and (data := os.read(read_end, 64)):
            if signal.SIGINT in data and not done.is_set():
                _interrupt_queries()

    thread = threading.Thread(target=watch, name="sigint-watch", daemon=True)
    thread.start()
    _watched = True
    try:
        yield
    finally:
        _watched = False
        signal.set_wakeup_fd(previous)
        done.set()
        try:  # wake the reader (worker processes forked meanwhile may hold the pipe open: no EOF)
            os.write(write_end, b"\0")
        except BlockingIOError:
            pass
        thread.join(timeout=1.0)
        os.close(write_end)
        os.close(read_end)
        z3 = z3_lazy.loaded()
        if z3 is not None:
            z3.set_param("ctrl_c", True)  # Z3's default again, for whoever uses it next in this process


# The wall clock of the check running now, for phases that take no budget argument (extraction:
# the PTX executor, the loop roller): (deadline by time.monotonic, the --timeout it came from).
_clock: ContextVar[tuple[float, float] | None] = ContextVar("syncverify_clock", default=None)


@contextmanager
def clock(seconds: float) -> Iterator[None]:
    """Run the body under a --timeout of ``seconds``; ``check_clock`` inside it raises OutOfBudget."""
    token = _clock.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _clock.reset(token)


def check_clock(doing: str) -> None:
    """Raise OutOfBudget(TIME) when the clock of ``clock`` has run out; ``doing`` says where."""
    stop_if_interrupted()
    now = _clock.get()
    if now is not None and time.monotonic() > now[0]:
        raise OutOfBudget(TIME, f"{reached(TIME, now[1])} while {doing}")


class OutOfBudget(Exception):
    """A budget ran out; ``kind`` says which (one of KINDS)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def reached(kind: str, limit: float) -> str:
    """The one wording of "this budget ran out", used by every engine's coverage text."""
    if kind == STATES:
        return f"state budget of {int(limit)} reached"
    if kind == RLIMIT:
        return f"Z3 resource budget of {int(limit)} units reached"
    if kind == TIME:
        return f"time budget of {limit:g}s reached"
    return f"memory budget of {limit:g} MB reached"


def problem(max_states: int, seconds: float, memory_mb: float, rlimit: int) -> str | None:
    """Why these budgets cannot be used, or None. A NaN would silently switch a limit off (every
    comparison with it is false); a zero or negative one would end every check before it starts."""
    for name, value in (("max_states", max_states), ("rlimit", rlimit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{name} must be a positive integer, not {value!r}"
    for name, value in (("timeout", seconds), ("max_memory", memory_mb)):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value <= 0:
            return f"{name} must be a positive number (inf for no limit), not {value!r}"
    return None


def positive_int(text: str) -> int:
    """argparse type of --max-states and --rlimit: a usage error (exit 2) unless a positive integer."""
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type of --timeout and --max-memory: a usage error (exit 2) unless a positive number
    (``inf`` for no limit); ``nan``, zero and negative values are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number (inf for no limit), got {text!r}")
    return value


def rss_mb() -> float:
    """Resident memory of this process, in MB."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Meter:
    """The outer limits of one check, measured from when it started: wall clock and memory
    (the growth of this process's resident memory since the start)."""

    seconds: float
    memory_mb: float
    start: float = 0.0
    base_mb: float = 0.0
    peak_mb: float = 0.0
    _memory_read: float = 0.0  # when the memory was last read (check reads it at most every MEMORY_EVERY s)

    MEMORY_EVERY = 0.05

    def __post_init__(self) -> None:
        self.start = self.start or time.monotonic()
        self.base_mb = self.base_mb or rss_mb()
        self.peak_mb = self.base_mb

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def memory_left(self) -> float:
        now = rss_mb()
        self.peak_mb = max(self.peak_mb, now)
        return self.memory_mb - (now - self.base_mb)

    def check(self) -> None:
        """Raise OutOfBudget when the clock or the memory has run out."""
        stop_if_interrupted()
        now = time.monotonic()
        if now - self.start >= self.seconds:
            raise OutOfBudget(TIME, reached(TIME, self.seconds))
        if now - self._memory_read >= self.MEMORY_EVERY:
            self._memory_read = now
            if self.memory_left() <= 0:
                raise OutOfBudget(MEMORY, reached(MEMORY, self.memory_mb))

    def grown_mb(self) -> float:
        return max(self.peak_mb - self.base_mb, 0.0)


@dataclass
class Units:
    """A Z3 resource budget spent over several queries (each query is charged what it used)."""

    total: int
    spent: int = 0

    def left(self) -> int:
        return self.total - self.spent


def solve(solver: Any, meter: Meter | None = None, units: Units | None = None) -> tuple[Any, str, str]:
    """``solver.check()`` under the budgets: Z3's rlimit from ``units`` (deterministic), its timeout
    and memory limit from ``meter``. Returns the answer, why it is ``unknown`` (the ``reached``
    wording when a budget ended it) and the kind of budget that ended it ("" when none did).
    A keyboard interrupt Z3 caught becomes KeyboardInterrupt."""
    import z3

    if _watched:
        z3.set_param("ctrl_c", False)  # SIGINT is watched (sigint_watched): Z3 must not take it
    stop_if_interrupted()
    given = 0
    if units is not None:
        if units.left() <= 0:
            return z3.unknown, reached(RLIMIT, units.total), RLIMIT
        given = min(Z3_RLIMIT_MAX, units.left())
        solver.set("rlimit", given)
    if meter is not None:
        meter.check()
        # (unsigned 32-bit in Z3; an infinite budget, --timeout inf, is the largest value)
        solver.set("timeout", int(max(1, min(2**32 - 1, meter.left() * 1000))))
        # Z3's own memory limit, in MB; left unset for a budget past a terabyte (--max-memory inf),
        # which Z3 does not take as a limit correctly (measured: "out of memory" at once)
        memory = meter.memory_left()
        if memory < 2**20:
            z3.set_param("memory_max_size", int(max(1, memory)))
    _solving.add(solver.ctx)
    try:
        answer = solver.check()
        stop_if_interrupted()  # interrupted while it ran: whatever it answered, no verdict
    except z3.Z3Exception as err:
        text = str(err)
        if "interrupt" in text:
            raise KeyboardInterrupt from err
        if meter is not None and "memory" in text:
            return z3.unknown, reached(MEMORY, meter.memory_mb), MEMORY
        raise
    finally:
        _solving.discard(solver.ctx)
        if meter is not None:
            z3.set_param("memory_max_size", 0)
    spent = _rlimit_spent(solver)
    if units is not None:
        units.spent += spent
    if answer != z3.unknown:
        return answer, "", ""
    reason = solver.reason_unknown()
    if "interrupted from keyboard" in reason:
        raise KeyboardInterrupt
    # Z3 says "canceled" for both its rlimit and its timeout: the units spent tell them apart
    if units is not None and spent >= given:
        return answer, reached(RLIMIT, units.total), RLIMIT
    if meter is not None and "memory" in reason:
        return answer, reached(MEMORY, meter.memory_mb), MEMORY
    if meter is not None and ("timeout" in reason or "canceled" in reason or meter.left() <= 0):
        return answer, reached(TIME, meter.seconds), TIME
    return answer, reason, ""


def _rlimit_spent(solver: Any) -> int:
    """Z3's count of resource units, which is per context: with ``units``, each query must have a
    context of its own (the bmc engine's do) for this to be what the query spent."""
    stats = solver.statistics()
    for key in stats.keys():
        if key == "rlimit count":
            return int(stats.get_key_value(key))
    return 0
