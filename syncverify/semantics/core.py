"""What a step of the explicit machine is made of: the mutable view of a state it is applied to
(``_Work``), its result (``StepResult``), and the findings it raises (``Violation``). Shared by
the machine core and the family modules."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from .. import ir
from ..diagnostics import Severity
from .state import (
    State,
    sorted_records,
)

STAY = 2  # a handler's answer: the state changed, but the process stays at this instruction
# A handler's answer: the handler placed the process itself (bar.sync parks it at the BAR_WAIT
# after it, or its own arrival completed the generation and moved it on). Its pc is final even
# where it equals the one it started at: a loop whose body is only the barrier comes back to it.
PLACED = 3
_MEMO_LIMIT = 1 << 16  # entries a per-machine memo table holds before it starts over


class BudgetExceeded(Exception):
    """A budget ran out inside one step (the search then ends inconclusive, never safe)."""


class ModelBound(BudgetExceeded):
    """The step would take the state past what the model keeps exactly (a flag past its declared range, more
    copies or commits in flight than it numbers, a store by many threads at once). The step is not taken; the
    search goes on without it and can no longer say "safe", but a violation it reaches on other paths stands:
    its path never passes the step (docs/model.md, "Steps past the model's bounds")."""


class Violation(Exception):
    """A step that breaks a rule. ``span`` is the offending operation."""

    def __init__(self, code: str, message: str, span: ir.Span | None = None,
                 related: tuple[tuple[int, str], ...] = (), severity: Severity = Severity.ERROR,
                 procs: tuple[int, ...] = ()):
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
        self.related = related
        self.severity = severity
        self.procs = procs  # other processes involved (e.g. the other side of a race), for trimming traces


def _detached(v: Violation) -> Violation:
    """The finding without the traceback and exception context it was raised with. A kept
    traceback references the frame that holds the exception itself — a reference cycle per
    finding, which the searches (run with the cyclic collector paused) would never free."""
    v.__traceback__ = None
    v.__context__ = None
    v.__cause__ = None
    return v


@dataclass
class StepResult:
    """One step: its label, the state it leads to (None if it ends the path in a violation),
    and findings that do not end the path: warnings, and errors after which the model
    stays well defined (``soft``: a consumption-rule breach, a scope error)."""

    label: tuple
    state: State | None
    violation: Violation | None = None
    warnings: list[Violation] = field(default_factory=list)
    soft: list[Violation] = field(default_factory=list)
    lone: bool = False  # its rule says the step commutes with the others (the reduction may take it alone)
    cut: str = ""  # why the step was not taken (ModelBound), with ``state`` None: the search cannot say safe


class _Env(dict):
    """The variables of one process at one program point, as the operation handlers read them
    (never written once built). ``key`` = (process, variable values) determines every value
    in it, so an expression evaluated in it with that process's context can be remembered."""

    __slots__ = ("key",)


class _Work:
    """A mutable view of one state while a step is being applied."""

    __slots__ = ("agents", "base", "cluster", "lone", "mbars", "named", "procs", "records", "soft", "tmem",
                 "warnings")

    def __init__(self, s: State):
        self.base = s
        self.procs = list(s.procs)
        self.mbars = list(s.mbars)
        self.named = list(s.named)
        self.cluster = s.cluster
        self.agents = list(s.agents)
        self.records = s.records
        self.tmem = list(s.tmem)
        self.warnings: list[Violation] = []
        self.soft: list[Violation] = []
        self.lone = False

    def freeze(self) -> State:
        """The state after the step. Parts the step left unchanged are passed on as the very
        objects of the state before it (the named barriers: nearly always), which the search's
        interning recognizes without hashing them. Built with tuple.__new__, not through
        State's Python-level constructor: this runs on every step."""
        base = self.base
        named = tuple(self.named)
        if named == base.named:  # (element by element, each an identity test when unchanged)
            named = base.named
        agents = self.agents
        # records the step left alone are the state's own, sorted already (every State's are): no sort
        records = self.records
        return _new_tuple(State, (tuple(self.procs), tuple(self.mbars), named, self.cluster,
                                  tuple(sorted(agents)) if agents else (),
                                  records if records is base.records else sorted_records(records),
                                  tuple(self.tmem)))


_new_tuple = tuple.__new__  # tuple.__new__(State, parts): a State without the Python-level constructor


def _key_bounds(w: _Work, key: tuple) -> tuple[int, int]:
    """Where in ``w.records`` the records with (space, cta, obj, slot) = key can be: while the step
    has not changed the records of its state, which are sorted (every State's are), the run of
    that key, found by bisection ((space, cta, obj, slot) sorts before every record that begins
    with it, and (space, cta, obj, slot + 1) after them); otherwise anywhere. Callers still test
    each record's key."""
    records = w.records
    if records is not w.base.records:
        return 0, len(records)
    space, cta, obj, slot = key
    lo = bisect_left(records, key)
    return lo, bisect_left(records, (space, cta, obj, slot + 1), lo)

