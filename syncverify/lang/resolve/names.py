"""The resolver's state, and how names and expressions resolve: what each name is bound to
(params, declared objects, loop variables, `choose` values), constant literals, folding,
and the record of where params are read (ir.ParamSite).

A room of its own because every other stage of the resolver asks it the same question --
what does this name or expression mean here? -- and it answers without knowing any
declaration or operation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lark import Token, Tree

from ... import ir
from ...diagnostics import Diagnostic, Span, make
from ...expr import MAX_MAGNITUDE, EvalError, evaluate, fold


@dataclass
class _Named:
    """A `named` barrier declaration: ids and counts as expressions of the index `i`."""

    size: int | None
    id_expr: ir.Expr
    count_expr: ir.Expr | None
    span: Span


@dataclass
class _Chosen:
    """A `choose` declaration being resolved: its range, and the values of this assignment
    (one row per CTA when chosen per CTA, else one row)."""

    per_cta: bool
    size: int | None
    lo: int
    hi: int
    pinned: bool
    span: Span
    rows: tuple[tuple[int, ...], ...] = ()


@dataclass
class _Scope:
    variables: dict[str, Span] = field(default_factory=dict)


@dataclass
class _Ctx:
    role: str | None = None  # innermost role guard, for `first thread`
    in_elect: bool = False


def _number(text: str) -> tuple[int, str | None]:
    """The value of a NUMBER token, or (0, why it is not a valid literal).

    C reads `010` as octal 8, so decimal literals with leading zeros are refused
    rather than guessed; literals beyond the evaluator's 2^62 are refused before
    Python builds (or refuses to build) a huge integer.
    """
    digits = text.replace("_", "")
    base, body = 10, digits
    if digits[:2].lower() in ("0x", "0b"):
        base, body = (16 if digits[1] in "xX" else 2), digits[2:]
        if not body:
            return 0, f"number `{text}` has no digits after `{text[:2]}`"
    elif len(digits) > 1 and digits[0] == "0":
        return 0, f"number `{text}`: leading zeros are not allowed (C would read it as octal)"
    if len(body) > 64:
        return 0, f"number `{text[:20]}…` is too large (the limit is 2^62)"
    value = int(body, base)
    if value > MAX_MAGNITUDE:
        return 0, f"number {text} is too large (the limit is 2^62)"
    return value, None


def _a(word: str) -> str:
    """`a buffer`, `an mbarrier`, `a tmem region`."""
    if word == "tmem":
        return "a tmem region"
    return ("an " if word[0] in "aeiou" or word.startswith("mbarrier") else "a ") + word


def _suggest(name: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


class Names:
    """The resolver's state (everything __init__ sets), its error list, and name and
    expression resolution; the declaration and statement stages build on it."""

    def __init__(self, path: str, text: str, defines: Mapping[str, int],
                 assignment: Mapping[str, tuple[int, ...]] | None = None):
        self.path = path
        self.text = text
        self.defines = dict(defines)
        self.assignment = assignment
        self.chosen: dict[str, _Chosen] = {}
        self.in_declarations = False
        self.errors: list[Diagnostic] = []
        self.params: dict[str, int] = {}
        self.kinds: dict[str, tuple[str, Span]] = {}  # global name -> (kind, decl span)
        self.roles: list[ir.Role] = []
        self.buffers: dict[str, ir.Buffer] = {}
        self.tmem_regions: dict[str, ir.TmemRegion] = {}
        self.mbarriers: dict[str, ir.Mbarrier] = {}
        self.named: dict[str, _Named] = {}
        self.flags: dict[str, ir.Flag] = {}
        self.cluster = 1
        # `grid N;` (resolve/globalmem.py): N CTAs in clusters of `cluster` CTAs; once the
        # declarations are read, ``cluster`` counts the CTAs of the grid and ``cluster_dim`` keeps
        # the cluster's size (0: the protocol is one cluster)
        self.grid_ctas = 0
        self.cluster_dim = 0
        self.launch = ""
        self.threads: int | None = None
        self.scopes: list[_Scope] = []
        self.loop_params: list[str] = []
        # Where params are read (ir.ParamSite): the kind of site being resolved now (None: do not
        # record), the params the current expression read, and whether params resolve to
        # variables (the second, recording pass over a site) instead of their values.
        self.param_sites: list[ir.ParamSite] = []
        self._site: tuple[str, str] | None = ("value", "")
        self._reads: set[str] = set()
        self._symbolic = False
        self.header = Span(path, 1, 1, 1, 2)  # the protocol's name: where -D errors point

    # ---- helpers ---------------------------------------------------------
    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            line, col = node.line or 1, node.column or 1
            end_line = node.end_line or line
            end_col = node.end_column or col + len(str(node))
            return Span(self.path, line, col, end_line, end_col)
        meta = node.meta
        if getattr(meta, "empty", True):
            return Span(self.path, 1, 1, 1, 2)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def error(self, code: str, message: str, span: Span) -> None:
        self.errors.append(make(code, message, span))

    def declare(self, name: Token, kind: str) -> bool:
        span = self.span(name)
        if str(name) in ("i", "cta", "instance"):
            self.error("SV102", f"`{name}` is a built-in name and cannot be declared", span)
            return False
        if str(name) in self.kinds:
            prev = self.kinds[str(name)][1]
            self.error("SV102", f"`{name}` is already declared (as {_a(self.kinds[str(name)][0])} at line {prev.line})",
                       span)
            return False
        self.kinds[str(name)] = (kind, span)
        return True

    def const(self, tree: Tree | Token, what: str, env: Mapping[str, int] | None = None) -> int | None:
        """Evaluate an expression that must be constant for the given params."""
        before = len(self.errors)
        expr = self.expr(tree, allow_i=env is not None and "i" in env)
        if len(self.errors) > before:  # reported; a placeholder value would only cause follow-on errors
            return None
        return self.value(expr, tree, what, env)

    def value(self, expr: ir.Expr, tree: Tree | Token, what: str, env: Mapping[str, int] | None = None) -> int | None:
        """Evaluate a resolved expression; SV115 if it is not constant."""
        try:
            return evaluate(expr, env or {})
        except EvalError as err:
            self.error("SV115", f"{what} must be a constant integer: {err}", self.span(tree))
            return None

    # ---- expressions -----------------------------------------------------
    def expr(self, tree: Tree | Token, allow_i: bool = False) -> ir.Expr:
        before = len(self.errors)
        outer, self._reads = self._reads, set()
        expr = fold(self._expr(tree, allow_i))
        reads, self._reads = self._reads, outer | self._reads
        if len(self.errors) == before:  # placeholders for bad names would give follow-on errors
            self._check_folded(expr)
            if reads and self._site is not None:
                self._record_site(tree, allow_i)
        return expr

    def _record_site(self, tree: Tree | Token, allow_i: bool) -> None:
        """Record an expression that read params, resolved again with the params as variables."""
        kind, target = self._site or ("value", "")
        errors = len(self.errors)
        self._symbolic = True
        try:
            symbolic = fold(self._expr(tree, allow_i))
        finally:
            self._symbolic = False
            del self.errors[errors:]  # (the first pass reported whatever there was)
        self.param_sites.append(ir.ParamSite(kind, symbolic, self.span(tree), target))  # type: ignore[arg-type]

    def _check_folded(self, expr: ir.Expr) -> None:
        """Report constant sub-expressions that `fold` could not evaluate (x/0, overflow, bad shift)."""
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, ir.UnOp):
                stack.append(e.operand)
            elif isinstance(e, ir.BinOp):
                if isinstance(e.left, ir.Const) and isinstance(e.right, ir.Const):
                    try:
                        evaluate(e, {})
                    except EvalError as err:
                        self.error("SV115", f"bad expression: {err}", e.span)
                else:
                    stack += [e.right, e.left]

    def _expr(self, t: Tree | Token, allow_i: bool) -> ir.Expr:
        span = self.span(t)
        if isinstance(t, Token):  # pragma: no cover - the grammar wraps tokens in rules
            return ir.Const(0, span)
        kind = t.data
        if kind == "num":
            value, problem = _number(str(t.children[0]))
            if problem:
                self.error("SV115", problem, span)
            return ir.Const(value, span)
        if kind == "name":
            return self._name(t.children[0], allow_i)
        if kind == "index_all" and str(t.children[0]) in self.chosen:
            self.error("SV116", f"`{t.children[0]}[*]` (every element) is only allowed with `init` and `inval`", span)
            return ir.Const(0, span)
        if kind == "index" and str(t.children[0]) in self.chosen:
            return self._chosen(t.children[0], t.children[1], span, allow_i)
        if kind in ("index", "index_all"):
            self.error("SV111", f"`{t.children[0]}[…]` names an object; only integers are allowed here", span)
            return ir.Const(0, span)
        if kind == "cond":
            c, a, b = (self._expr(x, allow_i) for x in t.children)
            return ir.Cond(c, a, b, span)
        if kind == "cta_rank":
            if self.cluster_dim:  # a grid: `cta` is still the rank in the cluster (%cluster_ctarank)
                if self.cluster_dim == 1:
                    return ir.Const(0, span)
                return ir.BinOp("%", ir.Builtin("cta", span), ir.Const(self.cluster_dim, span), span)
            return ir.Builtin("cta", span)
        if kind == "instance":
            return ir.Builtin("instance", span)
        if kind == "neg":
            return ir.UnOp("-", self._expr(t.children[0], allow_i), span)
        if kind == "not_":
            return ir.UnOp("!", self._expr(t.children[0], allow_i), span)
        if kind == "or_":
            return ir.BinOp("||", self._expr(t.children[0], allow_i), self._expr(t.children[1], allow_i), span)
        if kind == "and_":
            return ir.BinOp("&&", self._expr(t.children[0], allow_i), self._expr(t.children[1], allow_i), span)
        if kind == "binop":
            left, op, right = t.children
            return ir.BinOp(str(op), self._expr(left, allow_i), self._expr(right, allow_i), span)
        raise AssertionError(f"unexpected expression node {kind}")  # pragma: no cover

    def _name(self, tok: Token, allow_i: bool) -> ir.Expr:
        name, span = str(tok), self.span(tok)
        if name == "i" and allow_i:
            return ir.Var("i", span)
        for scope in reversed(self.scopes):
            if name in scope.variables:
                return ir.Var(name, span)
        if name in self.chosen:
            return self._chosen(tok, None, span, allow_i)
        if name in self.params:
            self._reads.add(name)
            return ir.Var(name, span) if self._symbolic else ir.Const(self.params[name], span)
        if name in self.kinds:
            kind = self.kinds[name][0]
            if kind == "role":
                return ir.InRole(name, span)
            self.error("SV111", f"`{name}` is {_a(kind)}, not an integer", span)
            return ir.Const(0, span)
        if name == "lane":  # a name, not a keyword: specs that call something `lane` keep working
            return ir.Builtin("lane", span)
        if name == "block":  # %ctaid.x: the CTA's index in the grid (= `cta` in a one-cluster protocol)
            return ir.Builtin("cta", span)
        options = [*self.params, *self.kinds, *(v for s in self.scopes for v in s.variables)]
        hint = _suggest(name, options)
        if name == "i" and not hint:
            hint = "; `i` is the element index, only inside the declaration of an array (`role r[2] = warp i;`)"
        self.error("SV101", f"unknown name `{name}`{hint}", span)
        return ir.Const(0, span)

    def _chosen(self, tok: Token, index_t: Tree | None, span: Span, allow_i: bool) -> ir.Expr:
        """A `choose` value in an expression: a constant when one value covers every reader, else a
        table (`ir.Pick`) indexed by the element and, per CTA, by the executing CTA's rank."""
        name = str(tok)
        c = self.chosen[name]
        if self.in_declarations:
            self.error("SV118", f"`{name}` is a `choose` value; declarations fix the kernel's shape for every "
                       "assignment and cannot depend on it (use a `param`)", span)
            return ir.Const(0, span)
        if (c.size is None) != (index_t is None):
            want = f"`{name}` is an array of {c.size} chosen values; index it (`{name}[k]`)" if c.size is not None \
                else f"`{name}` is one chosen value, not an array"
            self.error("SV118" if c.size is not None else "SV104", want, span)
            return ir.Const(0, span)
        if not c.rows:  # the declaration's error is reported already
            return ir.Const(0, span)
        uniform = len(set(c.rows)) == 1
        if index_t is None:
            return ir.Const(c.rows[0][0], span) if uniform else ir.Pick(name, c.rows, ir.Const(0, span), True, span)
        index = fold(self._expr(index_t, allow_i))
        if isinstance(index, ir.Const) and not 0 <= index.value < (c.size or 1):
            self.error("SV104", f"index {index.value} is out of range for `{name}[{c.size}]`", self.span(index_t))
            return ir.Const(0, span)
        return ir.Pick(name, c.rows if not uniform else c.rows[:1], index, c.per_cta and not uniform, span)
