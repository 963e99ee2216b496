"""Checking a protocol with `choose` values: one check per assignment, one combined answer.

Each assignment is resolved as a protocol of its own (lang/choices.py) and checked by the
engines --engine asks for, within what is left of the time budget. The answer is a
violation when any assignment has one, inconclusive when any assignment is undecided (or
the budget ends before the last), safe only when every assignment was proved safe. Each
finding names the assignment that reaches it, in its message, so text, JSON and SARIF all
carry it; a finding that several assignments reach (same code, same line) is reported once,
for the first of them, with a note counting the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostic, InputError, code_and_line
from ..lang.choices import MAX_ASSIGNMENTS, assignments, count, describe, open_choices, ranges
from ..lang.load import instantiate
from ..result import CheckResult, Stats, Verdict

if TYPE_CHECKING:
    from .. import ir
    from ..options import Options


def check_every(protocol: ir.Protocol, options: Options,
                run_engines: Callable[[ir.Protocol, Options], CheckResult]) -> CheckResult:
    """Check every assignment of ``protocol``'s `choose` values (it was loaded without one) with
    ``run_engines`` (the dispatcher's, passed in: it is the module that calls this one)."""

    n = count(protocol)
    covers = f"every assignment of {ranges(protocol)} ({n})"
    if n > MAX_ASSIGNMENTS:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound="",
                           coverage=f"{open_choices(protocol)}, more than the {MAX_ASSIGNMENTS} a check covers; "
                           "pin values with -D NAME=VALUE or narrow the ranges")
    # The params as resolved (derived ones included) and the pinned choices reproduce the protocol.
    defines = {**dict(protocol.params), **{c.name: c.lo for c in protocol.choices if c.pinned}}
    start = time.monotonic()
    done: list[tuple[ir.Assignment, CheckResult]] = []
    stopped = ""
    for k, (assignment, instance) in enumerate(instantiate(protocol, defines, assignments(protocol))):
        left = options.timeout - (time.monotonic() - start)
        if left <= 0:
            stopped = f"time budget reached after {k} of {n} assignments"
            break
        if isinstance(instance, InputError):
            result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                                 diagnostics=tuple(instance.diagnostics))
        else:
            # the instance is resolved with every param pinned; what a lift reloads is the protocol's own -D
            instance = replace(instance, defines=protocol.defines)
            result = run_engines(instance, replace(options, timeout=left))
        done.append((assignment, result))
    return _combine(protocol, done, covers, stopped)


def _combine(protocol: ir.Protocol, done: list[tuple[ir.Assignment, CheckResult]], covers: str,
             stopped: str) -> CheckResult:
    first: dict[tuple[str, int], int] = {}
    diags: list[Diagnostic] = []
    others: list[int] = []
    for assignment, result in done:
        for d in result.diagnostics:
            key = code_and_line(d)
            if key in first:
                others[first[key]] += 1
                continue
            first[key] = len(diags)
            diags.append(replace(d, message=f"{d.message} [with {describe(protocol, assignment)}]"))
            others.append(0)
    diags = [d if not more else replace(d, notes=(*d.notes, f"also reached with {more} other assignment"
                                                  f"{'s' if more > 1 else ''} of the `choose` values"))
             for d, more in zip(diags, others, strict=True)]
    verdicts = [r.verdict for _, r in done]
    coverage = ""
    if Verdict.ERROR in verdicts:
        verdict = Verdict.ERROR
    elif Verdict.VIOLATION in verdicts:
        verdict = Verdict.VIOLATION
        coverage = stopped
    elif Verdict.INCONCLUSIVE in verdicts or stopped:
        verdict = Verdict.INCONCLUSIVE
        undecided = [(a, r) for a, r in done if r.verdict is Verdict.INCONCLUSIVE]
        parts = [f"with {describe(protocol, a)}: {r.coverage}" for a, r in undecided[:1]]
        if len(undecided) > 1:
            parts.append(f"{len(undecided) - 1} more assignment(s) undecided")
        coverage = "; ".join([*parts, *([stopped] if stopped else [])])
    else:
        verdict = Verdict.SAFE
        # why a bounded `safe` was not lifted (the same for every assignment)
        coverage = "; ".join(dict.fromkeys(r.coverage for _, r in done if r.coverage))
    bounds = list(dict.fromkeys(r.bound for _, r in done if r.bound))
    bound = "; ".join([*bounds, covers]) if verdict is not Verdict.ERROR else ""
    stats = Stats(sum(r.stats.states for _, r in done), sum(r.stats.transitions for _, r in done),
                  sum(r.stats.seconds for _, r in done), max((r.stats.peak_mb for _, r in done), default=0.0))
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=verdict, bound=bound,
                       diagnostics=tuple(diags), stats=stats, coverage=coverage)
