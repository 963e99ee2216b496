"""The protocol IR's expressions and object references: what every operation's operands are.

Split from ``syncverify.ir`` (which re-exports every name here; import them from there) so that the
operations, statements and declarations read without one screenful of operand grammar.
Expressions are folded by the front end as far as they are constant; an engine only evaluates what
depends on the executing CTA, role instance, lane or loop variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from .diagnostics import Span


@dataclass(frozen=True, slots=True)
class Const:
    value: int
    span: Span


@dataclass(frozen=True, slots=True)
class Var:
    """A `let` or `for` variable."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Builtin:
    """`cta` (rank of the executing CTA in its cluster), `instance` (role instance index) or
    `lane` (the executing thread's lane, `threadIdx.x % 32`; semantics.program compiles it away,
    one value per lane, so engines never meet it)."""

    name: Literal["cta", "instance", "lane"]
    span: Span


@dataclass(frozen=True, slots=True)
class InRole:
    """True when the executing warp belongs to the named role."""

    role: str
    span: Span


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # + - * / % ^ & | << >> == != < <= > >= && ||
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class UnOp:
    op: Literal["-", "!"]
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Cond:
    """C's conditional `cond ? then : orelse`: only the branch taken is evaluated, so
    `n == 0 ? 0 : 64 / n` is defined for every n, as in C."""

    cond: Expr
    then: Expr
    orelse: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Pick:
    """A `choose` value that is not one number for the whole launch: per CTA (`choose per cta`)
    or per element (`choose NAME[N]`). The value is ``values[row][index]``, row being the
    executing CTA's rank when ``per_cta``, else 0. An index outside the row is an evaluation
    error, as for any other out-of-range expression."""

    name: str
    values: tuple[tuple[int, ...], ...]
    index: Expr
    per_cta: bool
    span: Span


Expr: TypeAlias = Const | Var | Builtin | InRole | BinOp | UnOp | Cond | Pick

ObjKind = Literal["mbarrier", "buffer", "tmem", "flag"]


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to a declared mbarrier, buffer or tensor-memory region: `full[s]`, `tile`, or `full[*]`.

    ``index`` is None for a scalar object; ``every`` is set for `[*]`.
    """

    kind: ObjKind
    name: str
    index: Expr | None
    every: bool
    span: Span
