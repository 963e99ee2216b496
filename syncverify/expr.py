"""Integer expressions: one evaluator for the resolver, the engines and the emitter.

Arithmetic follows C on signed integers (what a kernel author writes in CUDA):
`/` and `%` truncate toward zero; comparisons and `&&`, `||`, `!` give 0 or 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass

from .ir import BinOp, Builtin, Cond, Const, Expr, InRole, Pick, Span, UnOp, Var


class EvalError(Exception):
    """An expression cannot be evaluated (division by zero, unbound variable)."""

    def __init__(self, message: str, expr: Expr):
        super().__init__(message)
        self.expr = expr


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": c_div,
    "%": c_mod,
    "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
}

# Shift amounts and magnitudes are capped so a hostile spec cannot make the
# checker build gigantic integers.
MAX_MAGNITUDE = 1 << 62


@dataclass(frozen=True, slots=True)
class Context:
    """What an expression may depend on besides variables: who is executing it."""

    cta: int
    instance: int
    roles: frozenset[str]


def apply_binary(op: str, a: int, b: int, expr: Expr) -> int:
    if op in ("/", "%") and b == 0:
        raise EvalError("division by zero", expr)
    if op in ("<<", ">>") and not 0 <= b < 63:
        raise EvalError(f"shift by {b} is out of range 0..62", expr)
    value = _BINARY[op](a, b)
    if abs(value) > MAX_MAGNITUDE:
        raise EvalError("integer overflow (value beyond 2^62)", expr)
    return value


def evaluate(expr: Expr, env: Mapping[str, int], ctx: Context | None = None) -> int:
    """Evaluate an expression; raises EvalError if it needs something not given."""
    match expr:
        case Const(value=v):
            return v
        case Var(name=name):
            if name not in env:
                raise EvalError(f"`{name}` has no value here", expr)
            return env[name]
        case Builtin(name=name):
            if ctx is None:
                raise EvalError(f"`{name}` is not a constant", expr)
            if name == "lane":  # compiled away per lane (semantics.program); never evaluated for a whole warp
                raise EvalError("`lane` has one value per lane; it is allowed only in a condition or in an "
                                "operation's operands", expr)
            return ctx.cta if name == "cta" else ctx.instance
        case InRole(role=role):
            if ctx is None:
                raise EvalError(f"role `{role}` is not a constant", expr)
            return int(role in ctx.roles)
        case UnOp(op=op, operand=x):
            v = evaluate(x, env, ctx)
            return -v if op == "-" else int(not v)
        case BinOp(op="&&", left=left, right=right):
            return int(bool(evaluate(left, env, ctx)) and bool(evaluate(right, env, ctx)))
        case BinOp(op="||", left=left, right=right):
            return int(bool(evaluate(left, env, ctx)) or bool(evaluate(right, env, ctx)))
        case BinOp(op=op, left=left, right=right):
            return apply_binary(op, evaluate(left, env, ctx), evaluate(right, env, ctx), expr)
        case Cond(cond=c, then=then, orelse=orelse):
            return evaluate(then if evaluate(c, env, ctx) else orelse, env, ctx)
        case Pick():
            return pick(expr, evaluate(expr.index, env, ctx), ctx)
    raise TypeError(f"not an expression: {expr!r}")


def pick(expr: Pick, index: int, ctx: Context | None) -> int:
    """Element ``index`` of a `choose` value, in the executing CTA's row when it is per CTA."""
    if expr.per_cta and ctx is None:
        raise EvalError(f"`{expr.name}` (chosen per CTA) is not a constant", expr)
    row = expr.values[ctx.cta if expr.per_cta and ctx is not None else 0]
    if not 0 <= index < len(row):
        raise EvalError(f"index {index} is out of range for `{expr.name}[{len(row)}]`", expr)
    return row[index]


def fold(expr: Expr) -> Expr:
    """Fold constant sub-expressions; errors (x/0) are left for evaluation to report."""
    match expr:
        case UnOp(op=op, operand=x, span=span):
            x = fold(x)
            if isinstance(x, Const):
                return Const(-x.value if op == "-" else int(not x.value), span)
            return UnOp(op, x, span)
        case BinOp(op=op, left=left, right=right, span=span):
            left, right = fold(left), fold(right)
            if isinstance(left, Const) and isinstance(right, Const):
                try:
                    return Const(evaluate(BinOp(op, left, right, span), {}), span)
                except EvalError:
                    pass
            return BinOp(op, left, right, span)
        case Cond(cond=c, then=then, orelse=orelse, span=span):
            c = fold(c)
            if isinstance(c, Const):  # only the branch taken is folded (and can fail), as in C
                return fold(then if c.value else orelse)
            return Cond(c, fold(then), fold(orelse), span)
        case Pick(name=name, values=values, index=index, per_cta=per_cta, span=span):
            index = fold(index)
            if isinstance(index, Const) and (not per_cta or len(set(values)) == 1):
                try:
                    return Const(pick(Pick(name, values, index, False, span), index.value, None), span)
                except EvalError:
                    pass
            return Pick(name, values, index, per_cta, span)
    return expr


def substitute(expr: Expr, name: str, value: Expr) -> Expr:
    """Replace variable ``name`` by ``value`` (used for the `i` of array declarations)."""
    match expr:
        case Var(name=n) if n == name:
            return value
        case UnOp(op=op, operand=x, span=span):
            return UnOp(op, substitute(x, name, value), span)
        case BinOp(op=op, left=left, right=right, span=span):
            return BinOp(op, substitute(left, name, value), substitute(right, name, value), span)
        case Cond(cond=c, then=then, orelse=orelse, span=span):
            return Cond(substitute(c, name, value), substitute(then, name, value), substitute(orelse, name, value),
                        span)
        case Pick(name=n, values=values, index=index, per_cta=per_cta, span=span):
            return Pick(n, values, substitute(index, name, value), per_cta, span)
    return expr


def expressions_in(obj: object) -> Iterator[Expr]:
    """Every expression inside an IR node (an operation's indices, counts, parities, ranks, masks; tuples of
    them), outermost only: free_names and subexpressions look inside each."""
    if isinstance(obj, Const | Var | Builtin | InRole | BinOp | UnOp | Cond | Pick):
        yield obj
    elif isinstance(obj, tuple):
        for x in obj:
            yield from expressions_in(x)
    elif is_dataclass(obj) and not isinstance(obj, type | Span):
        for f in fields(obj):
            if f.name != "span":
                yield from expressions_in(getattr(obj, f.name))


def free_names(expr: Expr) -> set[str]:
    """Variables, builtins (as `cta`/`instance`) and roles (as `role:NAME`) an expression uses."""
    match expr:
        case Var(name=n):
            return {n}
        case Builtin(name=n):
            return {n}
        case InRole(role=r):
            return {f"role:{r}"}
        case UnOp(operand=x):
            return free_names(x)
        case BinOp(left=left, right=right):
            return free_names(left) | free_names(right)
        case Cond(cond=c, then=then, orelse=orelse):
            return free_names(c) | free_names(then) | free_names(orelse)
        case Pick(index=index, per_cta=per_cta):
            return free_names(index) | ({"cta"} if per_cta else set())
    return set()


def subexpressions(expr: Expr) -> list[Expr]:
    """``expr`` and every expression inside it, outermost first."""
    match expr:
        case UnOp(operand=x):
            return [expr, *subexpressions(x)]
        case BinOp(left=left, right=right):
            return [expr, *subexpressions(left), *subexpressions(right)]
        case Cond(cond=c, then=then, orelse=orelse):
            return [expr, *subexpressions(c), *subexpressions(then), *subexpressions(orelse)]
        case Pick(index=index):
            return [expr, *subexpressions(index)]
    return [expr]
