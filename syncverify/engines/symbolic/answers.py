"""What the lift concludes about one protocol: the plan, the trip counts around the search, the replay of its findings.

What it answers. A complete search without findings proves the protocol safe
for every ITERS ≥ the smallest valid one (``all-iterations``). A finding lies
on a real path of the machine for a concrete ITERS (the one its branch
fixed, or one above every value tested on the path); it is replayed through
``Machine.step`` on the protocol loaded at that ITERS and reported with the
explicit engine's trace only if the replay reproduces it. Anything else is
inconclusive.

The trip counts below the periodic search's start are checked one by one with the explicit
engine (``tripcount.small_trip_counts``); a counter overflow within reach of the start is run
concretely. A room of its own: it turns a search into an answer (``Lift``) and knows nothing of
how the search merges states.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ... import budget as budgets
from ... import ir
from ...diagnose_ir import operations
from ...diagnostics import Diagnostic, Severity, code_and_line, one_per_code_and_line
from ...lang import load
from ...result import Stats, Verdict
from ...semantics.machine import Assumptions, Machine, Violation
from ...semantics.symmetry import Symmetry
from ..periodic import Plan, Refusal, liftable_params, plan
from ..tripcount import SmallCheck, ancestors, check_one, dependents, describe_range, small_trip_counts
from ..witness import Replays, deadlock, diagnostic
from .search import DEFAULT_ASSUMPTIONS, Finding, lifted_search

OVERFLOW_REACH = 64  # an overflow this far past the periodic search's start is run concretely
# The least trip count the periodic search could start at is first tried with the explicit engine, within this many
# states; where that check finishes, the search starts one higher. With ITERS fixed at its least value the search
# branches off a concrete search from every state of its not-yet-fixed part that tests it, each from a state reduced
# for ITERS = ∞, and the explicit engine reduces that one trip count from its start: on residue 0 of the 2x1
# ping-pong GEMM with K symbolic, 12,890 of the search's 20,662 keys had ITERS = 1, which the explicit engine checks
# in 1,412 states. Not always: on the 1x1 GEMM's residue 0 the explicit engine needs 7,067 states at ITERS = 1 and
# the search from 2 saves 435 keys. A cap in states keeps the answer deterministic (bench/RESULTS-speed.md).
EXPLICIT_START_STATES = 2048


# ---------------------------------------------------------------------- concretization
def replay(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], finding: Finding,
           assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
           loaded: dict[int, tuple[Machine, Symmetry, Replays] | None] | None = None,
           ) -> tuple[Machine, Symmetry, Violation, Replays] | None:
    """Replay a finding's path through ``Machine.step`` on the protocol loaded at its ITERS.
    Returns the concrete machine and the violation it reports, or None if it does not reproduce.

    ``loaded``: the machines already loaded for the findings of one search, by ITERS. A search's
    warnings mostly share their trip count, and the protocol was parsed and compiled again for each:
    a quarter of the check of one residue protocol of the 2x1 ping-pong GEMM with K symbolic (38
    SV602 warnings, a 1,162-line protocol; bench/RESULTS-speed.md). A machine's steps depend on
    the state they are given only, so one machine replays every finding at its ITERS, and its steps
    are remembered across them (witness.Replays: the findings' paths are branches of the one tree the
    search built, and the report of each replays its path again); the Replays is returned for the report."""
    loaded = {} if loaded is None else loaded
    if finding.iters not in loaded:
        try:
            concrete = load(protocol.source, {**defines, p.param: finding.iters}, path=protocol.path)
        except Exception:  # an input the front end refuses reproduces nothing
            loaded[finding.iters] = None
        else:
            machine = Machine(concrete, assumptions)
            loaded[finding.iters] = (machine, Symmetry(machine.procs, machine.programs, machine.holders),
                                     Replays(machine))
    got = loaded[finding.iters]
    if got is None:
        return None
    machine, sym, replays = got
    state = replays.canon(sym, replays.initial())[0]
    want = finding.violation
    for n, label in enumerate(finding.labels):
        res = replays.step(state, label)
        if res is None:
            return None
        if finding.final and n == len(finding.labels) - 1:
            for v in [res.violation, *res.soft, *res.warnings]:
                if v is not None and v.code == want.code and v.span == want.span:
                    return machine, sym, v, replays
            return None
        if res.state is None:
            return None
        state = replays.canon(sym, res.state)[0]
    # no final step: a deadlock in the state reached
    # a deadlock: the model offers no step (a reduced search offers one exactly when it does)
    if list(machine.successors(state)) or all(machine.done(state, q) for q in range(len(machine.procs))):
        return None
    v = deadlock(machine, state)
    return (machine, sym, v, replays) if v.code == want.code else None


# ---------------------------------------------------------------------- the engine's answers
@dataclass(frozen=True)
class Lift:
    """What the unbounded method concluded about one protocol."""

    verdict: Verdict  # SAFE (all iterations), VIOLATION (replayed), INCONCLUSIVE (refused or budget)
    bound: str
    reason: str  # why it was refused / inconclusive; empty when it decided
    diagnostics: tuple[Diagnostic, ...] = ()
    stats: Stats = field(default_factory=Stats)
    stopped_by: str = ""  # the budget that ended the search (budget.KINDS), if one did


def _bound_all(protocol: ir.Protocol, p: Plan, small: SmallCheck) -> str:
    """``all-iterations``, with the trip counts left out (invalid input below the lift's start, or
    beyond the largest one without an overflow) and the values of the params held fixed: the other
    loop params (not those derived from the lifted one: they follow it) and the params the lifted
    one is derived from (with `param T = ITERS + 1` lifted as T, ITERS stays at its value)."""
    derived = dependents(protocol, p.param)
    others = [n for n in ancestors(protocol, p.param) if n not in protocol.loop_params]
    others += [n for n in protocol.loop_params if n != p.param and n not in derived]
    values = dict(protocol.params)
    text = "all-iterations"
    left_out = describe_range(p.param, small.invalid, p.min_iters, p.max_iters)
    if left_out:
        text += f" ({left_out})"
    if others:
        text += ", " + ", ".join(f"{n}={values[n]}" for n in others)
    return text


def lift(protocol: ir.Protocol, defines: Mapping[str, int], assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
         max_states: int = 2_000_000, seconds: float = 600.0, full_trace: bool = False,
         only: int | None = None, memory_mb: float = math.inf) -> Lift:
    """Try to prove ``protocol`` for every trip count (or, with ``only``, search exactly ITERS = only)."""
    start = time.monotonic()
    free = [c.name for c in protocol.choices if not c.pinned]
    if free:
        # The plan reloads the source at a large trip count, where a `choose` range may hold
        # other values than at these params: its answer would not be about this assignment.
        return Lift(Verdict.INCONCLUSIVE, "", "not lifted to all iterations (the protocol has `choose` values: "
                    f"{', '.join(free)}; each assignment is checked at these params)",
                    stats=Stats(seconds=time.monotonic() - start))
    if any(isinstance(op, ir.CpAsyncArrive) for op in operations(protocol.body)):
        # its agents name the copies they cover by write epoch, which the lift's normalization renumbers
        return Lift(Verdict.INCONCLUSIVE, "", "not lifted to all iterations (cp.async.mbarrier.arrive is "
                    "checked at the given trip counts only)", stats=Stats(seconds=time.monotonic() - start))
    reasons = []
    chosen: Plan | None = None
    for param in liftable_params(protocol):
        try:
            chosen = plan(protocol.source, defines, param, source_path=protocol.path)
            break
        except Refusal as why:
            reasons.append(f"{param}: {why}")
    if chosen is None:
        why = "; ".join(reasons) if reasons else "no loop bound is a param"
        return Lift(Verdict.INCONCLUSIVE, "", f"not lifted to all iterations ({why})",
                    stats=Stats(seconds=time.monotonic() - start))
    # the trip counts below the periodic search's start: one by one with the explicit engine (and,
    # with ``only`` outside the search's range, that one trip count)
    outside = only is not None and (only < chosen.min_iters or (chosen.max_iters is not None
                                                                and only > chosen.max_iters))
    below = chosen.min_iters if only is None else (only + 1 if outside else 0)
    first = 0 if only is None else only
    small = small_trip_counts(protocol, chosen.param, below, defines, assumptions, max_states,
                              max(0.0, seconds - (time.monotonic() - start)), full_trace, first)
    if only is None and small.failed is None:
        small, chosen = _explicit_start(protocol, chosen, defines, assumptions, small, max_states,
                                        max(0.0, seconds - (time.monotonic() - start)), full_trace)
    if small.failed is not None or (only is not None and below):
        return _small_answer(chosen.param, small, only, time.monotonic() - start, max_states)
    if chosen.max_iters is not None and only is None:
        over = _overflow_answer(protocol, chosen, defines, assumptions, max_states - small.states,
                                seconds - (time.monotonic() - start), full_trace)
        if over is not None:
            return over
    out = lifted_search(chosen, assumptions, max(1, max_states - small.states),
                        max(0.0, seconds - (time.monotonic() - start)), only, memory_mb,
                        stop_at_error=only is None)
    stats = Stats(out.states + small.states, out.transitions + small.transitions, time.monotonic() - start, 0.0)
    diags: list[Diagnostic] = []
    loaded: dict[int, tuple[Machine, Symmetry, Replays] | None] = {}
    iters: list[int] = []
    for f in sorted(out.errors, key=lambda f: (f.iters, len(f.labels))):
        rep = replay(protocol, chosen, defines, f, assumptions, loaded)
        if rep is not None:
            machine, sym, v, replays = rep
            diags.append(diagnostic(machine, v, f.labels, full_trace, sym, replays))
            iters.append(f.iters)
    if iters and out.first_error:
        least = _least_failing(protocol, chosen, defines, assumptions, min(iters), max_states - stats.states,
                               seconds - (time.monotonic() - start), full_trace, stats)
        if least is not None:
            return least
    # the findings of the trip counts the explicit engine checked are the check's too; where one has the code
    # and line of a warning of the search, the search's is not replayed again for its report
    diags += small.findings
    reported = {code_and_line(d) for d in diags}
    for f in out.warnings:
        if code_and_line(f.violation) in reported:
            continue
        rep = replay(protocol, chosen, defines, f, assumptions, loaded)
        if rep is not None:
            machine, sym, v, replays = rep
            diags.append(diagnostic(machine, v, f.labels, full_trace, sym, replays))
    diags = list(one_per_code_and_line(diags))
    diags.sort(key=lambda d: (d.severity is not Severity.ERROR, d.span.line if d.span else 0, d.code))
    if iters:
        return Lift(Verdict.VIOLATION, f"{chosen.param}={min(iters)}", "", tuple(diags), stats)
    if out.errors:
        return Lift(Verdict.INCONCLUSIVE, "", "a counterexample of the periodic search did not replay at its "
                    "trip count (internal error)", stats=stats)
    if not out.complete:
        # the explicit runs below the search's start drew on the same state budget: name the whole
        stop = budgets.reached(budgets.STATES, max_states) if out.stopped_by == budgets.STATES else out.stop_reason
        return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: no violation in {stats.states} "
                    f"states; {stop}", stats=stats, stopped_by=out.stopped_by)
    bound = f"{chosen.param}={only}" if only is not None else _bound_all(protocol, chosen, small)
    return Lift(Verdict.SAFE, bound, "", tuple(diags), stats)


def _explicit_start(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], assumptions: Assumptions,
                    small: SmallCheck, max_states: int, seconds: float, full_trace: bool) -> tuple[SmallCheck, Plan]:
    """The least trip count the periodic search could start at, tried with the explicit engine within
    EXPLICIT_START_STATES states: where that check finishes (safe, or not valid input there) the search
    starts one higher; a violation there is the answer; where it does not finish, the search covers it as
    it could. The states it took count against the check's budget either way."""
    n = p.min_iters
    room = min(EXPLICIT_START_STATES, max_states - small.states)
    if room <= 0 or (p.max_iters is not None and p.max_iters < n + 1):
        return small, p
    tried = small_trip_counts(protocol, p.param, n + 1, defines, assumptions, room, seconds, full_trace, n)
    states, transitions = small.states + tried.states, small.transitions + tried.transitions
    elapsed = small.seconds + tried.seconds
    if tried.failed is None:
        findings = one_per_code_and_line((*small.findings, *tried.findings))
        return SmallCheck(small.checked + tried.checked, small.invalid + tried.invalid, None, -1, states, transitions,
                          elapsed, findings), replace(p, min_iters=n + 1)
    if tried.failed.verdict is Verdict.VIOLATION:
        return SmallCheck(small.checked, small.invalid, tried.failed, n, states, transitions, elapsed,
                          small.findings), p
    return SmallCheck(small.checked, small.invalid, None, -1, states, transitions, elapsed, small.findings), p


def _least_failing(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], assumptions: Assumptions,
                   found: int, max_states: int, seconds: float, full_trace: bool, spent: Stats) -> Lift | None:
    """The answer once the periodic search stopped at its first error, at trip count ``found``
    (replayed): the explicit engine at p.min_iters, …, found, one by one within what is left of the
    budgets, and the first that fails is the answer, with every error the explicit engine reports
    there and its shortest traces. So the bound is the least failing trip count, and the findings
    are those of `check -D ITERS=n` at it. None (the replayed findings stand, at ``found``) where a
    check there did not finish or, which would be an internal error, none fails."""
    start = time.monotonic()
    small = small_trip_counts(protocol, p.param, found + 1, defines, assumptions, max(1, max_states),
                              max(0.0, seconds), full_trace, p.min_iters)
    res = small.failed
    if res is None or res.verdict is not Verdict.VIOLATION:
        return None
    stats = Stats(spent.states + small.states, spent.transitions + small.transitions,
                  spent.seconds + time.monotonic() - start, 0.0)
    return Lift(Verdict.VIOLATION, f"{p.param}={small.failed_at}", "", res.diagnostics, stats)


def _overflow_answer(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], assumptions: Assumptions,
                     max_states: int, seconds: float, full_trace: bool) -> Lift | None:
    """A counter expression can exceed 2^62 from trip count n = max_iters + 1 on: where n is within
    reach, the explicit engine there gives the concrete SV115; where the periodic search would have
    no trip count left to cover, the answer is inconclusive. Otherwise (None) the search goes on,
    and its bound stops at max_iters."""
    assert p.max_iters is not None
    start = time.monotonic()
    n = p.max_iters + 1
    if n <= p.min_iters + OVERFLOW_REACH:
        res = check_one(protocol, p.param, n, defines, assumptions, max_states, seconds, full_trace)
        if res is not None and res.verdict is Verdict.VIOLATION:
            return Lift(Verdict.VIOLATION, f"{p.param}={n}", "", res.diagnostics,
                        Stats(res.stats.states, res.stats.transitions, time.monotonic() - start, 0.0))
    if p.max_iters < p.min_iters:
        return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: {p.overflow}",
                    stats=Stats(seconds=time.monotonic() - start))
    return None


def _small_answer(param: str, small: SmallCheck, only: int | None, seconds: float, max_states: int) -> Lift:
    """The answer when the explicit checks of small trip counts decide it: a violation (or a search
    that did not finish) at one of them, or, with ``only`` below the periodic search's start, the
    explicit engine's verdict there. The trip counts draw on the check's one state budget
    (``max_states``): a search they left too little of names that budget, not what was left of it."""
    stats = Stats(small.states, small.transitions, seconds, 0.0)
    res = small.failed
    if res is None:
        if only is not None and only in small.invalid:
            return Lift(Verdict.INCONCLUSIVE, "", f"{param}={only} is not valid input", stats=stats)
        return Lift(Verdict.SAFE, f"{param}={only}", "", small.findings, stats)
    if res.verdict is Verdict.VIOLATION:
        findings = one_per_code_and_line((*res.diagnostics, *small.findings))
        return Lift(Verdict.VIOLATION, f"{param}={small.failed_at}", "", findings, stats)
    why = res.coverage
    if res.stopped_by == budgets.STATES:
        why = f"no violation in {res.stats.states} states; {budgets.reached(budgets.STATES, max_states)}"
    return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: the explicit search at "
                f"{param}={small.failed_at} did not finish ({why})", res.diagnostics, stats,
                stopped_by=res.stopped_by)
