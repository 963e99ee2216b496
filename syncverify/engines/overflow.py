"""Up to which trip count do the lift's counter expressions stay within the evaluator's range?

The explicit engine evaluates every expression with C-like integers limited to ±2^62 and
reports SV115 when a value leaves that range (``expr.apply_binary``). The periodic search
never sees large counter values: it shifts them down by a multiple of the period, and the
periodicity proofs (``periodic.periodic``) hold over unbounded integers, so an index
``(k * 10^18) % 2`` is periodic although it overflows at k = 5. What the search does see
is every expression that reads no counter: its value is the same in a state and in the
state it is merged with (only counter slots are shifted), so the machine checks it.

So every expression evaluated at or after the main loop that reads a counter value (and
the `let l = k + c` definitions themselves) is checked here with Z3: for a trip count N,
each counter ranges over what its loop gives it (``lo .. N + c - 1`` for the main loop,
``N + a .. N + c - 1`` for an epilogue, plus the `let`'s constant), every other variable
over the values its definitions can give it (each `let` of that name, inlined with fresh
inputs; each `for` of that name over its constant range; anything else: any integer), and
every binary operation's result must stay within ±2^62. The answer is the smallest trip
count at which some operation can overflow (None: none up to 2^62), found by bisection.
Z3 runs with a resource limit and a fixed seed; ``unknown`` refuses the lift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import z3

from .. import ir
from ..budget import solve
from ..expr import MAX_MAGNITUDE, Context
from ..semantics.program import FOR_INIT, LET, Program
from .carith import z3_binary

RLIMIT = 5_000_000
SEED = 0
MAX_DEPTH = 4  # `let`s inlined into one another before their value is left unconstrained
_BOOLEAN = ("==", "!=", "<", "<=", ">", ">=", "&&", "||")


class OverflowUnknown(Exception):
    """Z3 could not decide whether an expression overflows."""


@dataclass(frozen=True)
class CounterRange:
    """A counter name's values for trip count N: ``lo .. N + hi_off`` (``lo_off``: lo = N + lo_off)."""

    lo: int
    lo_off: int | None
    hi_off: int  # the largest value is N + hi_off


@dataclass(frozen=True)
class Obligation:
    """Expressions of one process that read counter values, with what is known of their variables."""

    exprs: tuple[ir.Expr, ...]
    counters: tuple[tuple[str, tuple[CounterRange, ...]], ...]
    program: Program
    ctx: Context


class _Encoder:
    """Z3 terms for one query: the trip count N, and fresh variables constrained to their values."""

    def __init__(self, ob: Obligation, n: z3.ArithRef):
        self.ob = ob
        self.n = n
        self.counters = dict(ob.counters)
        self.lets: dict[str, list[ir.Expr]] = {}
        self.loops: dict[str, list[tuple[ir.Expr | None, ir.Expr | None]]] = {}
        names = ob.program.var_names
        for ins in ob.program.code:
            if ins.kind == LET:
                self.lets.setdefault(names[ins.slot], []).append(ins.expr)
            elif ins.kind == FOR_INIT:
                self.loops.setdefault(names[ins.slot], []).append((ins.expr, ins.expr2))
        self.facts: list[z3.BoolRef] = []
        self.fresh = 0

    def var(self, name: str, depth: int) -> z3.ArithRef:
        """A fresh variable for one evaluation of ``name``, constrained to the values it can hold."""
        self.fresh += 1
        v = z3.Int(f"{name}#{self.fresh}")
        options: list[z3.BoolRef] = []
        if name in self.counters:
            for r in self.counters[name]:
                lo = z3.IntVal(r.lo) if r.lo_off is None else self.n + r.lo_off
                options.append(z3.And(v >= lo, v <= self.n + r.hi_off))
        else:
            for lo_e, hi_e in self.loops.get(name, []):
                if isinstance(lo_e, ir.Const) and isinstance(hi_e, ir.Const):
                    options.append(z3.And(v >= lo_e.value, v < hi_e.value))
                else:
                    return v  # a bound that is not a constant: any value
            if name in self.lets:
                if depth >= MAX_DEPTH:
                    return v
                for e in self.lets[name]:
                    term, _ = self.term(e, depth + 1)
                    options.append(v == term)
        if options:
            self.facts.append(z3.Or(*options))
        return v

    def term(self, e: ir.Expr, depth: int, env: dict[str, z3.ArithRef] | None = None,
             results: list[z3.ArithRef] | None = None) -> tuple[z3.ArithRef, dict[str, z3.ArithRef]]:
        """e's value (one variable per name within e), collecting every binary result in ``results``."""
        env = {} if env is None else env
        match e:
            case ir.Const(value=v):
                return z3.IntVal(v), env
            case ir.Var(name=n):
                if n not in env:
                    env[n] = self.var(n, depth)
                return env[n], env
            case ir.Builtin(name=n):
                return z3.IntVal(self.ob.ctx.cta if n == "cta" else self.ob.ctx.instance), env
            case ir.InRole(role=r):
                return z3.IntVal(int(r in self.ob.ctx.roles)), env
            case ir.UnOp(op=op, operand=x):
                v, _ = self.term(x, depth, env, results)
                return (-v if op == "-" else z3.If(v == 0, z3.IntVal(1), z3.IntVal(0))), env
            case ir.BinOp(op=op, left=left, right=right):
                a, _ = self.term(left, depth, env, results)
                b, _ = self.term(right, depth, env, results)
                value = z3_binary(op, a, b, right)
                if results is not None and op not in _BOOLEAN and value is not None:
                    results.append(value)
                if value is None:  # an operation the encoding does not model: any value
                    self.fresh += 1
                    value = z3.Int(f"%op#{self.fresh}")
                return value, env
            case ir.Cond(cond=c, then=then, orelse=orelse):
                # both branches' operations are collected: an over-approximation (a limit it
                # states may be spurious; a violation is only ever reported by the explicit engine)
                cv, _ = self.term(c, depth, env, results)
                tv, _ = self.term(then, depth, env, results)
                ov, _ = self.term(orelse, depth, env, results)
                return z3.If(cv != 0, tv, ov), env
        self.fresh += 1
        return z3.Int(f"%unknown#{self.fresh}"), env


def _can_overflow(ob: Obligation, e: ir.Expr, low: int, high: int) -> bool:
    """Can some binary operation of e leave ±2^62 for a trip count in [low, high]?"""
    n = z3.Int("%N")
    enc = _Encoder(ob, n)
    results: list[z3.ArithRef] = []
    enc.term(e, 0, None, results)
    if not results:
        return False
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT)
    solver.set("random_seed", SEED)
    solver.add(n >= low, n <= high, *enc.facts)
    solver.add(z3.Or(*[z3.Or(r > MAX_MAGNITUDE, r < -MAX_MAGNITUDE) for r in results]))
    answer = solve(solver)[0]
    if answer == z3.unknown:
        raise OverflowUnknown(f"Z3 could not decide whether the expression at line {e.span.line} overflows")
    return answer == z3.sat


def first_overflow(obligations: Iterable[Obligation], low: int) -> tuple[int, int] | None:
    """The smallest trip count N ≥ low at which a counter expression can leave ±2^62, with the line of
    that expression; None if there is none up to 2^62. Raises OverflowUnknown."""
    best: tuple[int, int] | None = None
    for ob in obligations:
        for e in dict.fromkeys(ob.exprs):
            high = MAX_MAGNITUDE if best is None else best[0] - 1
            if high < low or not _can_overflow(ob, e, low, high):
                continue
            lo, hi = low, high  # overflow possible for some N in [lo, hi]: bisect for the least
            while lo < hi:
                mid = (lo + hi) // 2
                if _can_overflow(ob, e, low, mid):
                    hi = mid
                else:
                    lo = mid + 1
            best = (lo, e.span.line)
    return best


__all__ = ["CounterRange", "Obligation", "OverflowUnknown", "first_overflow"]
