"""Which values of a protocol change with its trip count, and from which trip count on they stop.

The lift (``periodic.plan``) compiles a protocol once, at a large trip count, and runs it
with the trip-count test of its loops left symbolic. That is only exact for the trip counts
N at which the protocol is the same as the compiled one except for loop bounds ``N + c``.
Params are substituted by the front end, so the compiled IR cannot tell which of its
numbers came from the trip count; comparing two instantiations cannot either (a param
``EXTRA = ITERS == 12`` is 0 at both). This module works on the front end's record of
where params are read (``ir.ParamSite``, params kept as variables):

* the params that depend on the trip-count param, through their definitions
  (transitively; a param set with -D depends on nothing);
* every other place that reads the trip count or one of them, as a function of N (the
  definitions inlined, the other params at their values): a loop bound must be
  ``σ·N + h(N)`` with σ the same at every N, anything else ``h(N)``, and h must *settle*:
  ``∀ N ≥ L: h(N) = h(BASE)`` for all values of the loop variables, `i`, the CTA rank,
  the role instance. Z3 gives the smallest such L up to ``MAX_SETTLE``; beyond it, or on
  ``unknown``, the lift is refused naming the param and the line.

The trip counts below the lift's start are then checked one by one with the explicit
engine (``small_trip_counts``), 0 included, so "all-iterations" covers every trip count
from 0 at which the protocol is valid input.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import z3

from .. import ir
from ..budget import solve
from ..diagnostics import Diagnostic, InputError, one_per_code_and_line
from ..expr import MAX_MAGNITUDE, Context, EvalError, evaluate, free_names
from ..lang import load
from ..result import CheckResult, Verdict
from ..semantics.machine import Assumptions, Machine
from .carith import Unsupported, z3_term  # (the same exact C arithmetic as the periodicity proofs)

_NOBODY = Context(0, 0, frozenset())  # (unused: `_inline` turned the built-ins and roles into variables)
MAX_SETTLE = 32  # the largest trip count before which trip-count-derived values may still change
RLIMIT = 5_000_000  # Z3 resource units per query (deterministic)
SEED = 0


class SettleRefusal(Exception):
    """A value changes with the trip count in a way the lift cannot follow; the message says which."""


def dependents(protocol: ir.Protocol, param: str) -> dict[str, ir.ParamSite]:
    """The params whose value depends on ``param`` (through their definitions), with their definitions."""
    defs = {s.target: s for s in protocol.param_sites if s.kind == "param"}
    found: dict[str, ir.ParamSite] = {}
    changed = True
    while changed:
        changed = False
        for name, site in defs.items():
            if name not in found and name != param and free_names(site.expr) & ({param} | found.keys()):
                found[name] = site
                changed = True
    return found


def ancestors(protocol: ir.Protocol, param: str) -> list[str]:
    """The params ``param``'s definition reads, transitively, those read first (a param set with -D
    reads nothing). A loop bound `T` with `param T = ITERS + 1` runs as many trips as ITERS says."""
    defs = {s.target: s for s in protocol.param_sites if s.kind == "param"}
    params = dict(protocol.params)
    out: list[str] = []

    def visit(name: str, depth: int) -> None:
        if name not in defs or depth > 64:
            return
        for read in sorted(free_names(defs[name].expr) & params.keys()):
            if read not in out and read != param:
                visit(read, depth + 1)
                out.append(read)

    visit(param, 0)
    return out


def _inline(e: ir.Expr, param: str, derived: Mapping[str, ir.ParamSite], values: Mapping[str, int],
            depth: int = 0) -> ir.Expr:
    """e as a function of ``param`` alone (besides loop variables and built-ins): derived params
    replaced by their definitions, the other params by their values; built-ins and roles become
    variables (so that what is proved holds for every CTA, instance and role)."""
    if depth > 64:
        raise SettleRefusal("the params' definitions are nested too deeply")
    match e:
        case ir.Var(name=n) if n == param:
            return e
        case ir.Var(name=n) if n in derived:
            return _inline(derived[n].expr, param, derived, values, depth + 1)
        case ir.Var(name=n, span=span) if n in values:
            return ir.Const(values[n], span)
        case ir.Builtin(name=n, span=span):
            return ir.Var(f"%{n}", span)
        case ir.InRole(role=r, span=span):
            return ir.Var(f"%role:{r}", span)
        case ir.UnOp(op=op, operand=x, span=span):
            return ir.UnOp(op, _inline(x, param, derived, values, depth), span)
        case ir.BinOp(op=op, left=left, right=right, span=span):
            return ir.BinOp(op, _inline(left, param, derived, values, depth),
                            _inline(right, param, derived, values, depth), span)
        case ir.Cond(cond=c, then=then, orelse=orelse, span=span):
            return ir.Cond(_inline(c, param, derived, values, depth), _inline(then, param, derived, values, depth),
                           _inline(orelse, param, derived, values, depth), span)
        case ir.Pick(name=n):
            raise SettleRefusal(f"the `choose` value `{n}` is read where the trip count's params are")
    return e


def _settles(h: ir.Expr, param: str, base: int, what: str) -> int:
    """The smallest L ≤ MAX_SETTLE with h(N) = h(base) for every N in [L, 2^62] and every value of
    the other variables; SettleRefusal if there is none (or Z3 cannot tell)."""
    names = sorted(free_names(h) - {param})
    env = {n: z3.Int(n) for n in names}
    n_var = z3.Int(f"%{param}")
    try:
        at_n = z3_term(h, {**env, param: n_var}, _NOBODY)
        at_base = z3_term(h, {**env, param: z3.IntVal(base)}, _NOBODY)
    except Unsupported as err:
        raise SettleRefusal(f"{what} uses an operation the lift does not follow ({err})") from None
    low = 0
    while True:
        solver = z3.Solver()
        solver.set("rlimit", RLIMIT)
        solver.set("random_seed", SEED)
        solver.add(n_var >= low, n_var <= MAX_MAGNITUDE, at_n != at_base)
        answer = solve(solver)[0]
        if answer == z3.unsat:
            return low
        if answer != z3.sat:
            raise SettleRefusal(f"{what} is not settled: Z3 could not decide from which {param} on it stays "
                                "the same (resource limit)")
        changed_at = solver.model().eval(n_var, model_completion=True).as_long()
        low = changed_at + 1
        if low > MAX_SETTLE:
            raise SettleRefusal(f"{what} still changes at {param} = {changed_at} (the lift follows values "
                                f"that settle by {param} = {MAX_SETTLE})")


def settle_point(protocol: ir.Protocol, param: str, base: int) -> int:
    """The smallest L such that, for every trip count N ≥ L, the protocol at N is the protocol at
    ``base`` except for loop bounds that move with N. ``protocol`` is loaded with the user's
    params (``param`` itself at any value). Raises SettleRefusal naming what does not settle."""
    derived = dependents(protocol, param)
    moving = {param} | derived.keys()
    values = {n: v for n, v in protocol.params if n not in moving}
    settle = 0
    seen: set[tuple[str, ir.Expr]] = set()
    for site in protocol.param_sites:
        reads = free_names(site.expr) & moving
        if site.kind == "param" or not reads or (site.kind, site.expr) in seen:
            continue
        seen.add((site.kind, site.expr))
        g = _inline(site.expr, param, derived, values)
        line = site.span.line
        via = sorted(reads - {param})
        if via:
            origin = ", ".join(f"`{d}` (derived from {param} at line {derived[d].span.line})" for d in via)
            what = f"{origin}, read at line {line},"
        else:
            what = f"the trip count {param}, read at line {line},"
        if site.kind == "bound":
            try:
                step = evaluate(g, {param: base + 1}) - evaluate(g, {param: base})
            except EvalError:
                raise SettleRefusal(f"a loop bound at line {line} cannot be evaluated for large {param}") from None
            if step not in (0, 1):
                raise SettleRefusal(f"a loop bound is not of the form {param} + c (line {line})")
            h = ir.BinOp("-", g, ir.Var(param, site.span), site.span) if step else g
            settle = max(settle, _settles(h, param, base, f"the loop bound at line {line}"))
        else:
            try:
                settle = max(settle, _settles(g, param, base, what))
            except SettleRefusal as why:
                if via:
                    raise
                raise SettleRefusal(f"the trip count is used outside a loop bound (line {line}): {why}") from None
    return settle


# ---------------------------------------------------------------------- the trip counts below the lift
@dataclass(frozen=True)
class SmallCheck:
    """The explicit engine's answers for the trip counts below the lift's start."""

    checked: tuple[int, ...]  # trip counts checked, all safe (unless ``failed``)
    invalid: tuple[int, ...]  # trip counts at which the protocol is not valid input (nothing to check)
    failed: CheckResult | None = None  # the first trip count that was not safe (violation or inconclusive)
    failed_at: int = -1
    states: int = 0
    transitions: int = 0
    seconds: float = 0.0
    # the findings of the safe trip counts (warnings, or errors the suppressions allow), the first of each
    # code and line, in the order of the trip counts: they are the check's findings too (with
    # ``--strict`` a warning is an error), so the lift's answer reports them (symbolic/answers.py)
    findings: tuple[Diagnostic, ...] = ()


def check_one(protocol: ir.Protocol, param: str, n: int, defines: Mapping[str, int], assumptions: Assumptions,
              max_states: int, seconds: float, full_trace: bool = False) -> CheckResult | None:
    """The explicit engine at ``param`` = n, with the static findings there (as `check` at that
    trip count reports them); None where the protocol is not valid input there."""
    from ..static.checks import static_outcome
    from .explicit import Budget, explore
    from .merging import merge_static, searched

    try:
        concrete = load(protocol.source, {**defines, param: n}, path=protocol.path)
    except InputError:
        return None
    deadline = time.monotonic() + max(0.0, seconds)
    machine = Machine(concrete, assumptions)
    result = explore(concrete, Budget(max(1, max_states), max(0.0, seconds)), machine, full_trace=full_trace)
    return merge_static(result, searched(static_outcome(concrete, machine.programs, deadline)))


def small_trip_counts(protocol: ir.Protocol, param: str, below: int, defines: Mapping[str, int],
                      assumptions: Assumptions, max_states: int, seconds: float,
                      full_trace: bool = False, first: int = 0) -> SmallCheck:
    """Check ``param`` = first, …, below - 1 one by one with the explicit engine, within the given
    budget (shared by all of them). A trip count at which the protocol does not load is invalid
    input: there is nothing to check, and the bound says it is left out."""
    start = time.monotonic()
    checked: list[int] = []
    invalid: list[int] = []
    found: list[Diagnostic] = []
    states = transitions = 0
    for n in range(first, below):
        result = check_one(protocol, param, n, defines, assumptions, max_states - states,
                           seconds - (time.monotonic() - start), full_trace)
        if result is None:
            invalid.append(n)
            continue
        states += result.stats.states
        transitions += result.stats.transitions
        if result.verdict is not Verdict.SAFE:
            return SmallCheck(tuple(checked), tuple(invalid), result, n, states, transitions,
                              time.monotonic() - start, one_per_code_and_line(found))
        checked.append(n)
        found += [replace(d, notes=(*d.notes, f"found at {param}={n}")) for d in result.diagnostics]
    return SmallCheck(tuple(checked), tuple(invalid), None, -1, states, transitions, time.monotonic() - start,
                      one_per_code_and_line(found))


def describe_range(param: str, invalid: tuple[int, ...], below: int, upper: int | None) -> str:
    """The trip counts an all-iterations bound covers, when that is not simply every N ≥ 0:
    ``ITERS >= 1``, ``ITERS != 3``, ``ITERS <= 4611686018427387901``."""
    parts = []
    low = 0
    while low in invalid:
        low += 1
    if low:
        parts.append(f"{param} >= {low}")
    holes = [n for n in invalid if n > low and n < below]
    if holes:
        parts.append(f"{param} != " + ", ".join(map(str, holes)))
    if upper is not None:
        parts.append(f"{param} <= {upper}")
    return ", ".join(parts)


__all__ = ["MAX_SETTLE", "SettleRefusal", "SmallCheck", "ancestors", "check_one", "dependents", "describe_range",
           "settle_point", "small_trip_counts"]
