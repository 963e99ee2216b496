"""C's integer arithmetic on Z3 integers: the one encoding of IR expressions the lift's Z3 questions share.

The periodicity proofs (``periodic.periodic``: ``e(k + P) = e(k)``), the settle points of
values derived from the trip count (``tripcount.settle_point``) and the overflow bounds
(``overflow.first_overflow``) all ask Z3 about expressions the explicit engine evaluates
with ``expr.evaluate``; each answer is only as good as the encoding's agreement with it
(truncating `/` and `%`, comparisons and `&&`, `||` giving 0 or 1). A room of its own so that
the three share one encoding without importing one another.
"""

from __future__ import annotations

from collections.abc import Mapping

import z3

from .. import ir
from ..expr import Context


def z3_binary(op: str, a: z3.ArithRef, b: z3.ArithRef, right: ir.Expr) -> z3.ArithRef | None:
    """C's binary operation on Z3 integers (truncating `/` and `%`, comparisons and `&&`, `||` giving 0
    or 1, as ``expr.evaluate``); None for what it does not model: bitwise operators, shifts, and a
    divisor that is not a non-zero constant (``right`` is the divisor's expression)."""
    one, zero = z3.IntVal(1), z3.IntVal(0)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if not isinstance(right, ir.Const) or right.value == 0:
            return None
        d = right.value
        q = z3.If(a >= 0, a / abs(d), -((-a) / abs(d)))  # C: truncation toward zero
        q = q if d > 0 else -q
        return q if op == "/" else a - d * q
    cmp = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
    if op in cmp:
        return z3.If(cmp[op], one, zero)
    if op == "&&":
        return z3.If(z3.And(a != 0, b != 0), one, zero)
    if op == "||":
        return z3.If(z3.Or(a != 0, b != 0), one, zero)
    return None


class Unsupported(Exception):
    """An expression the encoding does not model (a bitwise operator, a non-constant divisor, a `choose`
    value, a variable without a value): the question that needed it is refused."""


def z3_term(e: ir.Expr, env: Mapping[str, z3.ArithRef], ctx: Context) -> z3.ArithRef:
    """The value of e as a Z3 integer, with C's truncating `/` and `%` (expr.py)."""
    match e:
        case ir.Const(value=v):
            return z3.IntVal(v)
        case ir.Var(name=n):
            if n not in env:
                raise Unsupported(f"`{n}` has no value")
            return env[n]
        case ir.Builtin(name=n):
            return z3.IntVal(ctx.cta if n == "cta" else ctx.instance)
        case ir.InRole(role=r):
            return z3.IntVal(int(r in ctx.roles))
        case ir.UnOp(op=op, operand=x):
            v = z3_term(x, env, ctx)
            return -v if op == "-" else z3.If(v == 0, z3.IntVal(1), z3.IntVal(0))
        case ir.BinOp(op=op, left=left, right=right):
            value = z3_binary(op, z3_term(left, env, ctx), z3_term(right, env, ctx), right)
            if value is None:
                raise Unsupported("a division by a non-constant" if op in ("/", "%")
                                  else f"operator `{op}` on a loop counter")
            return value
        case ir.Cond(cond=c, then=then, orelse=orelse):
            return z3.If(z3_term(c, env, ctx) != 0, z3_term(then, env, ctx), z3_term(orelse, env, ctx))
        case ir.Pick(name=n):
            raise Unsupported(f"the `choose` value `{n}` on a loop counter")
    raise Unsupported("an unknown expression")


__all__ = ["Unsupported", "z3_binary", "z3_term"]
