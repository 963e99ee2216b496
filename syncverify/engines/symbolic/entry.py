"""The engine's entries: `--engine z3` (the proof for every trip count alone) and `auto`'s lift of a bounded result.

Both turn a ``Lift`` into a ``CheckResult``: ``check`` with the static findings merged in,
``lift_result`` by keeping the bounded run's answer where the lift cannot improve on it. A room
of its own because it is the only part of the lift that reads the command's ``Options``.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ... import budget as budgets
from ... import ir
from ...diagnostics import Severity, code_and_line
from ...result import CheckResult, Stats, Verdict
from ...semantics.machine import Assumptions, Machine
from ..explicit import Budget, explore
from .answers import Lift, lift

LIFT_MIN_STATES = 150_000  # the least states `auto` gives the lift (see lift_result)


def check(protocol: ir.Protocol, options, machine: Machine | None = None) -> CheckResult:
    """`--engine z3`: the proof for every trip count alone (no bounded search first)."""
    from ...static.checks import static_outcome
    from ..merging import merge_static, searched

    deadline = time.monotonic() + options.timeout
    machine = machine or Machine(protocol, Assumptions.of(options))
    assumptions = machine.assume
    if not protocol.loop_params:
        # nothing to lift: the exhaustive search already covers every iteration
        result = explore(protocol, Budget(options.max_states, options.timeout, options.max_memory_mb), machine,
                         full_trace=options.full_trace, strict=options.strict)
        return merge_static(result, searched(static_outcome(protocol, machine.programs, deadline)))
    res = lift(protocol, dict(protocol.defines), assumptions, options.max_states, options.timeout, options.full_trace,
               memory_mb=options.max_memory_mb)
    result = as_result(protocol, res, options.strict)
    if res.verdict is Verdict.VIOLATION:
        result = _with_given_params(result, protocol, res, options, machine, deadline)
    return merge_static(result, searched(static_outcome(protocol, machine.programs, deadline)))


def _with_given_params(result: CheckResult, protocol: ir.Protocol, res: Lift, options,
                       machine: Machine, deadline: float) -> CheckResult:
    """A violation at the least failing trip count k (answers._least_failing) lists the findings there; where the
    protocol's own trip count is another, the errors the explicit engine finds at it are added, so that `--engine
    z3` reports at least what `--engine explicit` does (a race that needs the ring to wrap, beside a missing fence
    that fails from the first round on). Within what is left of the budgets; the bound stays k."""
    param, _, at = res.bound.partition("=")  # a violation's bound is `PARAM=k` (answers.lift)
    if not at.isdigit() or dict(protocol.params).get(param) == int(at) or time.monotonic() >= deadline:
        return result
    left = max(1, options.max_states - res.stats.states)
    given = explore(protocol, Budget(left, max(0.0, deadline - time.monotonic()), options.max_memory_mb), machine,
                    full_trace=options.full_trace, strict=options.strict)
    seen = {code_and_line(d) for d in result.diagnostics}
    extra = tuple(d for d in given.diagnostics if d.is_error and code_and_line(d) not in seen)
    stats = Stats(result.stats.states + given.stats.states, result.stats.transitions + given.stats.transitions,
                  result.stats.seconds + given.stats.seconds, result.stats.peak_mb)
    return replace(result, diagnostics=result.diagnostics + extra, stats=stats)


def as_result(protocol: ir.Protocol, res: Lift, strict: bool) -> CheckResult:
    verdict = res.verdict
    if verdict is Verdict.SAFE and any(d.is_error or (strict and d.severity is Severity.WARNING)
                                       for d in res.diagnostics):
        verdict = Verdict.VIOLATION
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=verdict, bound=res.bound,
                       diagnostics=res.diagnostics, stats=res.stats, coverage=res.reason, stopped_by=res.stopped_by)


def lift_result(result: CheckResult, protocol: ir.Protocol, options,
                assumptions: Assumptions | None = None) -> CheckResult:
    """`--engine auto`: a bounded `safe` from the explicit search, lifted to every trip count where possible.

    A violation the lift finds beyond the bounded check (replayed at its ITERS) replaces the
    safe verdict; a refusal or a budget keeps the bounded verdict and says why in its coverage."""
    if result.verdict is not Verdict.SAFE or not protocol.loop_params:
        return result
    assumptions = assumptions or Assumptions.of(options)
    # The lift costs about as much as a bounded run over a few periods. Its budget is in states, so
    # that whether it proves a file does not depend on the machine's load: ten times the bounded
    # run's states (at least LIFT_MIN_STATES), within --max-states, so that a protocol whose
    # abstraction does not close does not hold up the bounded answer for long. The clock is only
    # the user's outer limit: what --timeout leaves after the bounded run.
    seconds = options.timeout - result.stats.seconds
    states = min(options.max_states, max(LIFT_MIN_STATES, 10 * result.stats.states))
    if seconds <= 0:
        return replace(result, coverage="not proved for all iterations: "
                       + budgets.reached(budgets.TIME, options.timeout), stopped_by=budgets.TIME)
    res = lift(protocol, dict(protocol.defines), assumptions, states, seconds, options.full_trace,
               memory_mb=options.max_memory_mb)
    stats = Stats(result.stats.states + res.stats.states, result.stats.transitions + res.stats.transitions,
                  result.stats.seconds + res.stats.seconds, result.stats.peak_mb)
    if res.verdict in (Verdict.SAFE, Verdict.VIOLATION):
        seen = {code_and_line(d) for d in result.diagnostics}
        extra = tuple(d for d in res.diagnostics if code_and_line(d) not in seen)
        verdict = Verdict.VIOLATION if any(d.is_error or (options.strict and d.severity is Severity.WARNING)
                                           for d in extra) else result.verdict
        if res.verdict is Verdict.SAFE or verdict is Verdict.VIOLATION:
            return replace(result, verdict=verdict, bound=res.bound, diagnostics=result.diagnostics + extra,
                           stats=stats, coverage="")
        return replace(result, diagnostics=result.diagnostics + extra, stats=stats)
    return replace(result, stats=stats, coverage=res.reason, stopped_by=res.stopped_by)
