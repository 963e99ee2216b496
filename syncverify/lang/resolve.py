"""Resolve a Lark syntax tree into the IR, reporting every SV1xx input error.

Resolution binds names (params are substituted, objects get their kind),
evaluates declarations for the given params, folds constant expressions,
and validates each operation against OPERATIONS: which qualifiers, operands
and clauses it takes. Errors are collected, not raised one by one, so a user
sees all of a file's mistakes at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from lark import Token, Tree

from .. import ir
from ..diagnostics import Diagnostic, InputError, Span, make
from ..expr import MAX_MAGNITUDE, EvalError, evaluate, fold, free_names, subexpressions, substitute
from . import fences

MAX_COUNT = (1 << 20) - 1  # mbarrier counts and tx-counts (ptx-semantics §1.1)
MAX_THREADS = 1024
MAX_CLUSTER = 16  # non-portable maximum; 8 is portable
MAX_ARRAY = 4096


@dataclass(frozen=True, slots=True)
class OpSpec:
    """What one operation accepts. ``operands``: (min, max) count."""

    quals: frozenset[str] = frozenset()
    operands: tuple[int, int] = (0, 0)
    clauses: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()


def _spec(quals: str = "", operands: tuple[int, int] = (0, 0), clauses: str = "", required: str = "") -> OpSpec:
    return OpSpec(frozenset(quals.split()), operands, frozenset(clauses.split()), frozenset(required.split()))


_MB_ARRIVE = _spec(".release .relaxed .cta .cluster .expect_tx .shared::cta .shared::cluster", (1, 1),
                   "count bytes remote")
OPERATIONS: dict[str, OpSpec] = {
    "init": _spec(".shared::cta", (1, 1), "count"),
    "inval": _spec(".shared::cta", (1, 1)),
    "arrive": _MB_ARRIVE,
    "arrive_drop": _MB_ARRIVE,
    "expect_tx": _spec(".relaxed .cta .cluster", (1, 1), "bytes remote", "bytes"),
    "complete_tx": _spec(".relaxed .cta .cluster", (1, 1), "bytes remote", "bytes"),
    "wait": _spec(".parity .acquire .relaxed .cta .cluster", (1, 1), "parity", "parity"),
    "syncthreads": _spec(),
    "syncwarp": _spec(),
    "bar.sync": _spec(".aligned", (1, 2), "count"),
    "bar.arrive": _spec(".aligned", (1, 2), "count"),
    # PTX's barrier{.cta}.sync{.aligned}: without `.aligned` a distinct, unaligned operation
    "barrier.sync": _spec(".aligned", (1, 2), "count"),
    "barrier.arrive": _spec(".aligned", (1, 2), "count"),
    "cluster.arrive": _spec(".relaxed .release .aligned"),
    "cluster.wait": _spec(".acquire .aligned"),
    "cluster.sync": _spec(".aligned"),
    "read": _spec("", (1, 1), "remote part range"),
    "write": _spec("", (1, 1), "remote part range"),
    "tma.load": _spec(".cta_group::1 .cta_group::2", (1, 1), "bytes target multicast cta_group", "target"),
    "tma.store": _spec("", (1, 1), "bytes"),
    "bulk.commit": _spec(),
    "bulk.wait_read": _spec("", (0, 1)),
    "wgmma.read": _spec("", (1, 1)),
    "wgmma.commit": _spec(),
    "wgmma.wait": _spec("", (0, 1)),
    "fence.proxy.async": _spec(".shared::cta .shared::cluster .global"),
    "fence.proxy.async::generic.release": _spec(".sync_restrict::shared::cta .cluster"),
    "fence.proxy.async::generic.acquire": _spec(".sync_restrict::shared::cluster .cluster"),
    "fence.mbarrier_init": _spec(".release .cluster"),
    "tmem.alloc": _spec("", (0, 0), "cta_group cols"),
    "tmem.dealloc": _spec("", (0, 0), "cta_group cols"),
    "test_wait": _spec(".parity .acquire .relaxed .cta .cluster .shared::cta", (1, 1), "parity", "parity"),
    "cp.async": _spec(".ca .cg .shared .shared::cta .global", (1, 1)),
    "cp.async.commit_group": _spec(),
    "cp.async.wait_group": _spec("", (1, 1)),
    "cp.async.wait_all": _spec(),
    "cp.async.mbarrier.arrive": _spec(".noinc .shared .shared::cta .b64", (1, 1)),
    "cp.async.bulk": _spec(".shared::cta .shared::cluster .global .mbarrier::complete_tx::bytes", (1, 1),
                           "bytes target remote", "target"),
    "umma.commit": _spec("", (1, 1), "multicast cta_group"),
    # tcgen05 (sm_100a), PTX spelling; `tmem.alloc`/`umma.commit` are the older names
    "tcgen05.alloc": _spec(".sync .aligned .cta_group::1 .cta_group::2 .shared::cta .b32", (0, 0), "cta_group cols"),
    "tcgen05.dealloc": _spec(".sync .aligned .cta_group::1 .cta_group::2 .b32", (0, 0), "cta_group cols"),
    "tcgen05.commit": _spec(".cta_group::1 .cta_group::2 .mbarrier::arrive::one .shared::cluster .multicast::cluster "
                            ".b64", (1, 1), "multicast cta_group"),
    "tcgen05.mma": _spec(".cta_group::1 .cta_group::2", (1, 5), "cta_group"),  # ACC, A, B, SFA, SFB
    "tcgen05.cp": _spec(".cta_group::1 .cta_group::2", (2, 2), "cta_group"),
    "tcgen05.ld": _spec(".sync .aligned", (1, 1)),
    "tcgen05.st": _spec(".sync .aligned", (1, 1)),
    "tcgen05.wait::ld": _spec(".sync .aligned"),
    "tcgen05.wait::st": _spec(".sync .aligned"),
    "tcgen05.fence::before_thread_sync": _spec(),
    "tcgen05.fence::after_thread_sync": _spec(),
}
_ALIASES = {"try_wait": "wait", "__syncthreads": "syncthreads", "__syncwarp": "syncwarp"}
_CLAUSE_WORDS = {"c_count": "count", "c_bytes": "bytes", "c_parity": "parity", "c_multicast": "multicast",
                 "c_cta_group": "cta_group", "c_cols": "cols", "c_target": "target", "c_remote": "remote",
                 "c_part": "part", "c_range": "range"}
_CLAUSE_SYNTAX = {"count": "count N", "bytes": "bytes N", "parity": "parity E", "multicast": "multicast MASK",
                  "cta_group": "cta_group N", "cols": "cols N", "target": "-> BARRIER", "remote": "@ CTA",
                  "part": "part warp", "range": "bytes LO..HI"}
# How the operations most often given the wrong operands are written.
_USAGE = {"init": "init BAR [count N]", "inval": "inval BAR", "arrive": "arrive BAR [count N] [@ CTA]",
          "arrive_drop": "arrive_drop BAR [count N] [@ CTA]", "wait": "wait BAR parity E",
          "expect_tx": "expect_tx BAR bytes N", "complete_tx": "complete_tx BAR bytes N [@ CTA]",
          "bar.sync": "bar.sync ID[, N]", "bar.arrive": "bar.arrive ID, N", "barrier.sync": "barrier.sync ID[, N]",
          "barrier.arrive": "barrier.arrive ID, N", "read": "read BUF [part warp | bytes LO..HI] [@ CTA]",
          "write": "write BUF [part warp | bytes LO..HI] [@ CTA]",
          "tma.load": "tma.load BUF [bytes N] -> BAR [multicast MASK]",
          "tma.store": "tma.store BUF [bytes N]", "wgmma.read": "wgmma.read BUF", "umma.commit": "umma.commit BAR",
          "tcgen05.commit": "tcgen05.commit BAR [multicast MASK] [cta_group N]",
          "tcgen05.mma": "tcgen05.mma ACC[, A[, B[, SFA[, SFB]]]] [cta_group N]", "tcgen05.cp": "tcgen05.cp ACC, SRC",
          "tcgen05.ld": "tcgen05.ld REGION", "tcgen05.st": "tcgen05.st REGION",
          "test_wait": "test_wait BAR parity E", "cp.async": "cp.async BUF",
          "cp.async.wait_group": "cp.async.wait_group N", "cp.async.mbarrier.arrive": "cp.async.mbarrier.arrive BAR",
          "cp.async.bulk": "cp.async.bulk BUF [bytes N] -> BAR [@ CTA]"}
# First words of the operations: a bare name like this on the line after an op is a missing `;`.
_OP_WORDS = frozenset(op.split(".")[0] for op in [*OPERATIONS, *_ALIASES])
# Operations that PTX spells `mbarrier.NAME` (also accepted with that prefix).
_MBARRIER_OPS = {"init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "wait", "test_wait"}
# Operations that must be executed by every lane of a warp (.sync.aligned forms).
_WARP_COLLECTIVE = {"syncthreads", "syncwarp", "bar.sync", "bar.arrive", "barrier.sync", "barrier.arrive",
                    "cluster.arrive", "cluster.wait",
                    "cluster.sync", "wgmma.read", "wgmma.commit", "wgmma.wait", "tmem.alloc", "tmem.dealloc",
                    "tcgen05.alloc", "tcgen05.dealloc", "tcgen05.ld", "tcgen05.st", "tcgen05.wait::ld",
                    "tcgen05.wait::st"}


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


class Resolver:
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
        self.cluster = 1
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
        options = [*self.params, *self.kinds, *(v for s in self.scopes for v in s.variables)]
        hint = _suggest(name, options)
        if name == "i" and not hint:
            hint = "; `i` is the element index, only inside the declaration of an array (`role r[2] = warp i;`)"
        self.error("SV101", f"unknown name `{name}`{hint}", span)
        return ir.Const(0, span)

    # ---- declarations ----------------------------------------------------
    def declarations(self, items: list[Tree]) -> None:
        self.in_declarations = True
        for item in items:
            handler = getattr(self, f"decl_{item.data}", None)
            if handler is not None:
                handler(item)
        self.in_declarations = False
        self._assign_choices()
        for name in self.defines:
            if name not in self.params and name not in self.chosen:
                self.errors.append(make("SV114", f"-D {name}: no `param {name}` in this protocol"
                                        + _suggest(name, self.params), self.header))

    def decl_param(self, t: Tree) -> None:
        name, value = t.children
        # (a param set with -D does not depend on what its definition reads)
        self._site = None if str(name) in self.defines else ("param", str(name))
        v = self.const(value, f"param `{name}`")
        self._site = ("value", "")
        if not self.declare(name, "param"):
            return
        if str(name) in self.defines:
            v = self.defines[str(name)]
        self.params[str(name)] = v if v is not None else 0

    def decl_cluster(self, t: Tree) -> None:
        v = self.const(t.children[0], "the cluster size")
        if v is not None:
            if not 1 <= v <= MAX_CLUSTER:
                self.error("SV113", f"cluster size {v} is outside 1..{MAX_CLUSTER}", self.span(t.children[0]))
            else:
                self.cluster = v

    def decl_cta_threads(self, t: Tree) -> None:
        v = self.const(t.children[0], "the CTA thread count")
        if v is None:
            return
        if not 32 <= v <= MAX_THREADS or v % 32:
            self.error("SV113", f"CTA thread count {v} must be a multiple of 32 in 32..{MAX_THREADS}",
                       self.span(t.children[0]))
        else:
            self.threads = v

    def _array(self, t: Tree | None) -> tuple[int | None, bool]:
        if t is None:
            return None, True
        n = self.const(t.children[0], "an array size")
        if n is None:
            return None, False
        if not 1 <= n <= MAX_ARRAY:
            self.error("SV104", f"array size {n} is outside 1..{MAX_ARRAY}", self.span(t.children[0]))
            return None, False
        return n, True

    @staticmethod
    def _split_array(children: list) -> tuple[Token, Tree | None, list]:
        name, rest = children[0], children[1:]
        if rest and isinstance(rest[0], Tree) and rest[0].data == "array":
            return name, rest[0], rest[1:]
        return name, None, rest

    def decl_role(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        rng = rest[0]
        kind = str(rng.children[0].children[0])
        unit = {"thread": 1, "threads": 1, "warp": 32, "warps": 32, "warpgroup": 128, "warpgroups": 128}[kind]
        plural = kind.endswith("s")
        if plural and len(rng.children) != 3:
            self.error("SV100", f"`{kind}` takes a range `A..B`", self.span(rng))
            return
        if not plural and len(rng.children) != 2:
            self.error("SV100", f"`{kind}` takes one index; use `{kind}s A..B` for a range", self.span(rng))
            return
        if not self.declare(name, "role") or not ok:
            return
        before = len(self.errors)
        lo_expr = self.expr(rng.children[1], allow_i=size is not None)
        hi_expr = self.expr(rng.children[2], allow_i=size is not None) if plural else None
        if len(self.errors) > before:
            return
        instances = []
        for i in range(size or 1):
            env = {"i": i}
            label = f"{name}[{i}]" if size is not None else str(name)
            lo = self.value(lo_expr, rng.children[1], "a role range", env)
            hi = (self.value(hi_expr, rng.children[2], "a role range", env) if hi_expr is not None
                  else (lo + 1 if lo is not None else None))
            if lo is None or hi is None:
                return
            if lo < 0:
                self.error("SV103", f"role `{label}` starts at {kind} {lo}; indices start at 0", self.span(rng))
                return
            if hi <= lo:
                self.error("SV103", f"role `{label}` is empty ({kind} {lo}..{hi})", self.span(rng))
                return
            instances.append((lo * unit, hi * unit))
        self.roles.append(ir.Role(str(name), tuple(instances), size is not None, self.span(t)))

    def decl_smem(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        nbytes = self.const(rest[0], "buffer bytes")
        if not self.declare(name, "buffer") or not ok or nbytes is None:
            return
        if nbytes <= 0 or nbytes % 16:
            self.error("SV107", f"buffer `{name}` has {nbytes} bytes; shared-memory buffers used by bulk copies "
                       "need a positive multiple of 16", self.span(rest[0]))
            return
        self.buffers[str(name)] = ir.Buffer(str(name), size, nbytes, self.span(t))

    def decl_tmem_decl(self, t: Tree) -> None:
        """`tmem NAME[N] cols C;`: tensor-memory regions (the 512 columns of a CTA hold them all)."""
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        cols = self.const(rest[0], "tensor-memory columns")
        if not self.declare(name, "tmem") or not ok or cols is None:
            return
        total = sum((r.slots or 1) * r.cols for r in self.tmem_regions.values()) + (size or 1) * cols
        if not 1 <= cols <= 512 or total > 512:
            self.error("SV110", f"tensor-memory region `{name}` of {size or 1} x {cols} columns: a CTA has 512 "
                       f"columns (the regions declared so far would take {total})", self.span(rest[0]))
            return
        self.tmem_regions[str(name)] = ir.TmemRegion(str(name), size, cols, self.span(t))

    def decl_mbarrier(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        count = self.const(rest[0], "an mbarrier count") if rest else None
        if not self.declare(name, "mbarrier") or not ok:
            return
        if count is not None and not 1 <= count <= MAX_COUNT:
            self.error("SV105", f"mbarrier `{name}` count {count} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(rest[0]))
            count = 1  # reported once here; keeps `init` from reporting a missing count again
        self.mbarriers[str(name)] = ir.Mbarrier(str(name), size, count, self.span(t))

    def decl_named(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        if not self.declare(name, "named barrier") or not ok:
            return
        before = len(self.errors)
        id_expr = self.expr(rest[0], allow_i=size is not None)
        count_expr = self.expr(rest[1], allow_i=size is not None) if len(rest) > 1 else None
        if len(self.errors) > before:
            return
        for i in range(size or 1):  # one report per declaration, not one per element
            env = {"i": i}
            bid = self.value(id_expr, rest[0], "a named-barrier id", env)
            cnt = self.value(count_expr, rest[1], "a named-barrier count", env) if count_expr else None
            if (bid is None or (count_expr is not None and cnt is None) or not self._check_bar_id(bid, self.span(
                    rest[0])) or (cnt is not None and not self._check_bar_count(cnt, self.span(rest[1])))):
                return  # reported; its uses are then skipped silently (see _bar_operands)
        self.named[str(name)] = _Named(size, id_expr, count_expr, self.span(t))

    def decl_choose(self, t: Tree) -> None:
        per_cta = isinstance(t.children[0], Tree) and t.children[0].data == "per_cta"
        name, array, rest = self._split_array(t.children[1:] if per_cta else t.children)
        size, ok = self._array(array)
        lo, hi = self.const(rest[0], "a `choose` range"), self.const(rest[1], "a `choose` range")
        if not self.declare(name, "choose value") or not ok or lo is None or hi is None:
            return
        span = self.span(t)
        if hi <= lo:
            self.error("SV118", f"`choose {name}` has no value to choose: the range {lo}..{hi} is empty "
                       "(ranges are half-open, as in `for`)", self.span(rest[1]))
            return
        pinned = str(name) in self.defines
        if pinned:
            v = self.defines[str(name)]
            if lo <= v < hi:
                lo, hi = v, v + 1
            else:  # still declared, so that its uses are not reported as unknown
                self.errors.append(make("SV114", f"-D {name}={v} is outside the range {lo}..{hi} of `choose {name}`",
                                        self.header))
        self.chosen[str(name)] = _Chosen(per_cta, size, lo, hi, pinned, span)

    def _assign_choices(self) -> None:
        """Give each `choose` its values: the assignment asked for, else the first of each range.
        Done after every declaration, since a value per CTA needs the cluster size."""
        for name, c in self.chosen.items():
            width = c.size or 1
            cells = width * (self.cluster if c.per_cta else 1)
            values = (c.lo,) * cells
            if self.assignment is not None:  # (from lang/choices.assignments; a mismatch is a caller's bug)
                values = tuple(self.assignment.get(name, ()))
                if len(values) != cells or not all(c.lo <= v < c.hi for v in values):
                    raise ValueError(f"assignment {name}={values} does not fit `choose {name}`")
            c.rows = tuple(values[r * width:(r + 1) * width] for r in range(cells // width))

    def choices(self) -> tuple[ir.Choice, ...]:
        return tuple(ir.Choice(name, c.per_cta, c.size, c.lo, c.hi, c.pinned, len(c.rows) * (c.size or 1), c.span)
                     for name, c in self.chosen.items())

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

    def _check_bar_id(self, bid: int, span: Span) -> bool:
        if not 0 <= bid <= 15:
            self.error("SV106", f"named-barrier id {bid} is outside 0..15", span)
            return False
        return True

    def _check_bar_count(self, count: int, span: Span) -> bool:
        limit = self.threads or MAX_THREADS
        if count <= 0 or count % 32 or count > limit:
            self.error("SV106", f"named-barrier thread count {count} must be a positive multiple of 32 "
                       f"and at most the CTA's {limit} threads", span)
            return False
        return True

    def check_roles(self) -> None:
        """SV103: every role inside the CTA, no thread in two roles (one report per role)."""
        threads = self.threads
        if threads is None:  # no valid `cta threads`: SV113 says so; without it nothing bounds the ranges
            return
        owner: dict[int, str] = {}
        for role in self.roles:
            for i, (lo, hi) in enumerate(role.instances):
                label = f"{role.name}[{i}]" if role.array else role.name
                if hi > threads:
                    covers = f"thread {lo}" if hi - lo == 1 else f"threads {lo}..{hi - 1}"
                    self.error("SV103", f"role `{label}` covers {covers}, beyond the CTA's {threads} threads",
                               role.span)
                    break
                clash = next((tid for tid in range(lo, hi) if tid in owner), None)
                if clash is not None:
                    self.error("SV103", f"roles `{owner[clash]}` and `{label}` overlap at thread {clash}", role.span)
                    break
                owner.update((tid, label) for tid in range(lo, hi))

    # ---- statements ------------------------------------------------------
    def block(self, items: Iterable[Tree], ctx: _Ctx) -> tuple[ir.Stmt, ...]:
        self.scopes.append(_Scope())
        out: list[ir.Stmt] = []
        for item in items:
            if item.data in ("param", "cluster", "cta_threads", "role", "smem", "mbarrier", "named", "choose",
                             "tmem_decl"):
                if len(self.scopes) > 1:
                    self.error("SV116", "declarations belong at the top level of the protocol", self.span(item))
                continue
            out.extend(self.stmt(item, ctx))
        self.scopes.pop()
        return tuple(out)

    def bind(self, name: Token) -> None:
        n = str(name)
        if n in ("cta", "instance"):  # `i` is special only inside array declarations: a variable may take it
            self.error("SV102", f"`{n}` is a built-in name; pick another name for the variable", self.span(name))
        elif n in self.kinds or n in self.params or any(n in s.variables for s in self.scopes):
            self.error("SV102", f"`{n}` is already declared; pick another name for the variable", self.span(name))
        self.scopes[-1].variables[n] = self.span(name)

    def stmt(self, t: Tree, ctx: _Ctx) -> list[ir.Stmt]:
        span = self.span(t)
        if t.data == "let":
            name, value = t.children
            expr = self.expr(value)
            self.bind(name)
            return [ir.Let(str(name), expr, span)]
        if t.data == "for_":
            var, lo_t, hi_t, body = t.children
            self._site = ("bound", "")
            lo, hi = self.expr(lo_t), self.expr(hi_t)
            self._site = ("value", "")
            for tok in hi_t.scan_values(lambda v: isinstance(v, Token) and v.type == "NAME"):
                if str(tok) in self.params and str(tok) not in self.loop_params:
                    self.loop_params.append(str(tok))
            for bound, tree in ((lo, lo_t), (hi, hi_t)):
                if not isinstance(bound, ir.Const) and any(isinstance(e, ir.Pick) for e in subexpressions(bound)):
                    pass  # a count chosen per CTA or per element (`choose`): fixed before the kernel runs
                elif not isinstance(bound, ir.Const):
                    self.error("SV109", "a loop bound must be a constant (params are fine); "
                               f"this one depends on {', '.join(sorted(free_names(bound)))}", self.span(tree))
                elif bound.value < 0:
                    self.error("SV109", f"loop bound {bound.value} is negative", self.span(tree))
            if isinstance(lo, ir.Const) and isinstance(hi, ir.Const) and hi.value < lo.value:
                self.error("SV109", f"loop range {lo.value}..{hi.value} runs backwards", self.span(hi_t))
            self.scopes.append(_Scope())
            self.bind(var)
            inner = self.block(body.children, ctx)
            self.scopes.pop()
            return [ir.For(str(var), lo, hi, inner, span)]
        if t.data == "if_stmt":
            return [self.if_stmt(t, ctx)]
        if t.data in ("elect", "per_warp", "first_thread"):
            if ctx.in_elect:
                self.error("SV116", "`elect`/`first thread` inside another one: the body already runs on one "
                           "thread of the warp", span)
            inner = self.block(t.children[0].children, _Ctx(ctx.role, True))
            # `per warp` is the old spelling of `elect`: both are `elect.sync` with a full mask.
            return [ir.Elect(inner, ctx.role, t.data != "first_thread", span)]
        if t.data == "op":
            op = self.op(t, ctx)
            if op is None:
                return []
            return op if isinstance(op, list) else [op]
        raise AssertionError(t.data)  # pragma: no cover

    def if_stmt(self, t: Tree, ctx: _Ctx) -> ir.If:
        cond_t, then_t, *rest = t.children
        cond = self.expr(cond_t)
        guard = _guard_role(cond)
        inner_ctx = _Ctx(guard or ctx.role, ctx.in_elect)
        then = self.block(then_t.children, inner_ctx)
        orelse: tuple[ir.Stmt, ...] = ()
        if rest:
            other = rest[0]
            orelse = (self.if_stmt(other, ctx),) if other.data == "if_stmt" else self.block(other.children, ctx)
        return ir.If(cond, then, orelse, self.span(t))

    # ---- operations ------------------------------------------------------
    def op(self, t: Tree, ctx: _Ctx) -> ir.Op | list[ir.Op] | None:
        head = t.children[0]
        span = self.span(t)
        head_span = self.span(head)
        if head.data == "clusterop":
            words = ["cluster", *(str(q)[1:] for q in head.children)]
        elif head.data == "mbarrierop":  # PTX spelling `mbarrier.arrive…`
            words = [str(q)[1:] for q in head.children]
        elif head.data == "tmemop":  # `tmem.alloc`: `tmem` is a keyword (region declarations)
            words = ["tmem", *(str(q)[1:] for q in head.children)]
        else:
            words = [str(head.children[0]), *(str(q)[1:] for q in head.children[1:])]
        name, quals = _split_mnemonic(words)
        if head.data == "mbarrierop" and name not in _MBARRIER_OPS:
            name = None
            words = ["mbarrier", *words]
        if name is None:
            full = ".".join(words)
            self.error("SV110", f"unknown operation `{full}`{_suggest(full, [*OPERATIONS, *_ALIASES])}", head_span)
            return None
        spec = OPERATIONS[name]
        for q in quals:
            if q not in spec.quals:
                allowed = " ".join(sorted(spec.quals)) or "none"
                self.error("SV110", f"`{name}` does not take qualifier `{q}` (allowed: {allowed})", head_span)
                return None
        operands: list[Tree] = []
        clauses: dict[str, Tree] = {}
        for child in t.children[1:]:
            if child.data == "operands":
                operands = list(child.children)
            else:
                word = _CLAUSE_WORDS[child.data]
                if word in clauses:
                    self.error("SV110", f"`{_CLAUSE_SYNTAX[word]}` given twice", self.span(child))
                    return None
                if word not in spec.clauses:
                    allowed = ", ".join(f"`{_CLAUSE_SYNTAX[c]}`" for c in sorted(spec.clauses)) or "none"
                    if word == "remote" and name in ("wait", "init", "inval"):
                        self.error("SV108", f"`{name}` works only on the executing CTA's own barrier "
                                   "(PTX has no .shared::cluster form of it)", self.span(child))
                    else:
                        self.error("SV110", f"`{name}` does not take `{_CLAUSE_SYNTAX[word]}` (it takes: {allowed})",
                                   self.span(child))
                    return None
                clauses[word] = child if child.data == "c_range" else child.children[0]
        # `syncwarp` NEWLINE `syncwarp;` parses as one op with an operand: a `;` is missing after the head.
        word = str(operands[0].children[0]) if operands and operands[0].data == "name" else ""
        if (word in _OP_WORDS and self.span(operands[0]).line > head_span.end_line and word not in self.kinds
                and word not in self.params and not any(word in sc.variables for sc in self.scopes)):
            line, col = head_span.end_line, head_span.end_column
            self.error("SV100", f"missing `;` at the end of the statement (next comes `{word}`)",
                       Span(self.path, line, col, line, col + 1))
            return None
        lo, hi = spec.operands
        if not lo <= len(operands) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            usage = f"; write `{_USAGE[name]}`" if name in _USAGE else ""
            self.error("SV110", f"`{name}` takes {want} operand(s), got {len(operands)}{usage}", span)
            return None
        for req in spec.required:
            if req not in clauses:
                self.error("SV110", f"`{name}` needs `{_CLAUSE_SYNTAX[req]}`", span)
                return None
        if name in _WARP_COLLECTIVE and ctx.in_elect:
            self.error("SV116", f"`{name}` must be executed by every lane of a warp; it cannot sit inside "
                       "`elect`/`first thread`", span)
            return None
        if "remote" in clauses and self.cluster == 1:
            self.error("SV108", "remote operation (`@ CTA`) in a protocol whose cluster has 1 CTA", self.span(
                clauses["remote"]))
            return None
        builder = getattr(self, "op_" + name.replace("::", "__").replace(".", "_"))
        return builder(span, set(quals), operands, clauses)

    def ref(self, t: Tree, kind: str, *, every_ok: bool = False) -> ir.Ref | None:
        span = self.span(t)
        if t.data not in ("name", "index", "index_all"):
            self.error("SV111", f"expected {_a(kind)} here", span)
            return None
        name = str(t.children[0])
        if name not in self.kinds:
            if name in self.params or any(name in s.variables for s in self.scopes):
                self.error("SV111", f"`{name}` is an integer, but this operation needs {_a(kind)}", span)
                return None
            options = [n for n, (k, _) in self.kinds.items() if k == kind]
            self.error("SV101", f"unknown {kind} `{name}`{_suggest(name, options)}", span)
            return None
        actual = self.kinds[name][0]
        if actual != kind:
            self.error("SV111", f"`{name}` is {_a(actual)}, but this operation needs {_a(kind)}", span)
            return None
        table: Mapping[str, ir.Buffer | ir.Mbarrier | ir.TmemRegion] = \
            self.buffers if kind == "buffer" else self.tmem_regions if kind == "tmem" else self.mbarriers
        if name not in table:
            return None  # its declaration was rejected, and that error is reported already
        obj = table[name]
        size = obj.size if isinstance(obj, ir.Mbarrier) else obj.slots
        if t.data == "index_all":
            if not every_ok:
                self.error("SV116", f"`{name}[*]` (every element) is only allowed with `init` and `inval`", span)
                return None
            if size is None:
                self.error("SV104", f"`{name}` is not an array", span)
                return None
            return ir.Ref(kind, name, None, True, span)  # type: ignore[arg-type]
        if t.data == "name":
            if size is not None:
                every = f" (or `{name}[*]` for every element)" if every_ok else ""
                self.error("SV104", f"`{name}` is an array of {size}; give an index{every}", span)
                return None
            return ir.Ref(kind, name, None, False, span)  # type: ignore[arg-type]
        if size is None:
            self.error("SV104", f"`{name}` is not an array", span)
            return None
        index = self.expr(t.children[1])
        if isinstance(index, ir.Const) and not 0 <= index.value < size:
            self.error("SV104", f"index {index.value} is out of range for `{name}[{size}]`", self.span(t.children[1]))
            return None
        return ir.Ref(kind, name, index, False, span)  # type: ignore[arg-type]

    def _bytes(self, t: Tree, what: str) -> ir.Expr:
        e = self.expr(t)
        if isinstance(e, ir.Const) and (e.value <= 0 or e.value % 16 or e.value > MAX_COUNT):
            if e.value > MAX_COUNT:
                self.error("SV105", f"{what} {e.value} exceeds the tx-count limit 2^20-1", self.span(t))
            else:
                self.error("SV107", f"{what} {e.value} is not a positive multiple of 16", self.span(t))
        return e

    def _remote(self, clauses: Mapping[str, Tree]) -> ir.Expr | None:
        if "remote" not in clauses:
            return None
        # A rank outside the cluster, constant or not, is the checker's SV405 (a violation, exit 1):
        # input errors are SV1xx only.
        return self.expr(clauses["remote"])

    @staticmethod
    def _sem_scope(quals: set[str], default_sem: str) -> tuple[str, str]:
        sem = "relaxed" if ".relaxed" in quals else default_sem
        scope = "cluster" if ".cluster" in quals else "cta"
        return sem, scope

    def _check_sem_scope(self, quals: set[str], span: Span) -> bool:
        sem = {".release", ".relaxed", ".acquire"} & quals
        scope = {".cta", ".cluster"} & quals
        if len(sem) > 1 or len(scope) > 1:
            self.error("SV110", "conflicting qualifiers " + " ".join(sorted(sem | scope)), span)
            return False
        return True

    def op_init(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier", every_ok=True)
        count = self.expr(clauses["count"]) if "count" in clauses else None
        if bar is None:
            return None
        if count is None and self.mbarriers[bar.name].count is None:
            self.error("SV105", f"`init {bar.name}` needs `count N`: the declaration gives none", span)
            return None
        if isinstance(count, ir.Const) and not 1 <= count.value <= MAX_COUNT:
            self.error("SV105", f"init count {count.value} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(clauses["count"]))
            return None
        return ir.MbarInit(bar, count, span)

    def op_inval(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier", every_ok=True)
        return ir.MbarInval(bar, span) if bar else None

    def _arrive(self, span, quals, operands, clauses, drop: bool):
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        tx = None
        if ".expect_tx" in quals:
            if "bytes" not in clauses:
                self.error("SV110", "`arrive.expect_tx` needs `bytes N`", span)
                return None
            tx = self._bytes(clauses["bytes"], "expect_tx bytes")
        elif "bytes" in clauses:
            self.error("SV110", "`bytes N` on an arrive needs the `.expect_tx` qualifier", self.span(clauses["bytes"]))
            return None
        count = self.expr(clauses["count"]) if "count" in clauses else ir.Const(1, span)
        if isinstance(count, ir.Const) and not 1 <= count.value <= MAX_COUNT:
            self.error("SV105", f"arrive count {count.value} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(clauses["count"]))
            return None
        sem, scope = self._sem_scope(quals, "release")
        remote = self._remote(clauses)
        if bar is None:
            return None
        # the local form on a mapa'd address: legal only where the target is the executing CTA (SV407)
        local_form = ".shared::cta" in quals and remote is not None
        return ir.MbarArrive(bar, count, tx, drop, sem, scope, remote, span,  # type: ignore[arg-type]
                             local_form=local_form)

    def op_arrive(self, span, quals, operands, clauses):
        return self._arrive(span, quals, operands, clauses, drop=False)

    def op_arrive_drop(self, span, quals, operands, clauses):
        return self._arrive(span, quals, operands, clauses, drop=True)

    def _tx(self, kind, span, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        nbytes = self.expr(clauses["bytes"])
        if isinstance(nbytes, ir.Const) and not 0 <= nbytes.value <= MAX_COUNT:
            self.error("SV105", f"tx bytes {nbytes.value} are outside 0..{MAX_COUNT}", self.span(clauses["bytes"]))
        remote = self._remote(clauses)
        return ir.MbarTx(kind, bar, nbytes, remote, span) if bar else None

    def op_expect_tx(self, span, quals, operands, clauses):
        return self._tx("expect", span, operands, clauses)

    def op_complete_tx(self, span, quals, operands, clauses):
        return self._tx("complete", span, operands, clauses)

    def op_wait(self, span, quals, operands, clauses):
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        parity = self.expr(clauses["parity"])
        sem, scope = self._sem_scope(quals, "acquire")
        return ir.MbarWait(bar, parity, sem, scope, span) if bar else None  # type: ignore[arg-type]

    def op_test_wait(self, span, quals, operands, clauses):
        """`mbarrier.test_wait.parity` used once (its result unused): see ir.MbarTestWait. A loop
        spinning on test_wait until it returns true is written `wait`."""
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        parity = self.expr(clauses["parity"])
        sem, scope = self._sem_scope(quals, "acquire")
        return ir.MbarTestWait(bar, parity, sem, scope, span) if bar else None  # type: ignore[arg-type]

    def op_syncthreads(self, span, quals, operands, clauses):
        return ir.BarSync(ir.Const(0, span), None, span)

    def op_syncwarp(self, span, quals, operands, clauses):
        return ir.Syncwarp(span)

    def _bar_operands(self, span, operands, clauses, need_count: bool,
                      op: str = "") -> tuple[ir.Expr, ir.Expr | None] | None:
        op = op or ("bar.arrive" if need_count else "bar.sync")
        first = operands[0]
        count: ir.Expr | None = None
        count_span = span
        obj = str(first.children[0]) if first.data in ("name", "index", "index_all") else None
        kind = self.kinds[obj][0] if obj in self.kinds else None
        if kind == "named barrier" and obj not in self.named:
            return None  # its declaration was rejected, and that error is reported already
        if kind in ("mbarrier", "buffer", "tmem"):
            self.error("SV111", f"`{obj}` is {_a(kind)}, but `{op}` needs a barrier id 0..15 or a `named` barrier",
                       self.span(first))
            return None
        if obj is not None and kind == "named barrier":
            decl = self.named[obj]
            if first.data == "index_all":
                self.error("SV116", f"`{obj}[*]` (every element) is only allowed with `init` and `inval`",
                           self.span(first))
                return None
            if first.data == "name" and decl.size is not None:
                self.error("SV104", f"`{obj}` is an array of {decl.size}; give an index", self.span(first))
                return None
            if first.data == "index":
                if decl.size is None:
                    self.error("SV104", f"`{obj}` is not an array", self.span(first))
                    return None
                index = self.expr(first.children[1])
                if isinstance(index, ir.Const) and not 0 <= index.value < decl.size:
                    self.error("SV104", f"index {index.value} is out of range for `{obj}[{decl.size}]`",
                               self.span(first.children[1]))
                    return None
                bar_id = fold(substitute(decl.id_expr, "i", index))
                count = fold(substitute(decl.count_expr, "i", index)) if decl.count_expr is not None else None
            else:
                bar_id, count = decl.id_expr, decl.count_expr
            if len(operands) > 1:
                self.error("SV110", "give the count of a named barrier as `count N`, or in its declaration",
                           self.span(operands[1]))
                return None
        else:
            bar_id = self.expr(first)
            if len(operands) > 1:
                count, count_span = self.expr(operands[1]), self.span(operands[1])
        if "count" in clauses:
            if count is not None and len(operands) > 1:
                self.error("SV110", "thread count given twice", self.span(clauses["count"]))
                return None
            count, count_span = self.expr(clauses["count"]), self.span(clauses["count"])
        if isinstance(bar_id, ir.Const) and not self._check_bar_id(bar_id.value, self.span(first)):
            return None
        if isinstance(count, ir.Const) and not self._check_bar_count(count.value, count_span):
            return None
        if need_count and count is None:
            self.error("SV106", f"`{op}` needs a thread count (`{op} ID, N`)", span)
            return None
        return bar_id, count

    def op_bar_sync(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=False)
        return ir.BarSync(r[0], r[1], span) if r else None

    def op_bar_arrive(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=True)
        return ir.BarArrive(r[0], r[1], span) if r else None  # type: ignore[arg-type]

    def op_barrier_sync(self, span, quals, operands, clauses):
        """`barrier.sync`: unaligned unless spelled `barrier.sync.aligned` (= `bar.sync`)."""
        r = self._bar_operands(span, operands, clauses, need_count=False, op="barrier.sync")
        return ir.BarSync(r[0], r[1], span, ".aligned" in quals) if r else None

    def op_barrier_arrive(self, span, quals, operands, clauses):
        r = self._bar_operands(span, operands, clauses, need_count=True, op="barrier.arrive")
        return ir.BarArrive(r[0], r[1], span, ".aligned" in quals) if r else None  # type: ignore[arg-type]

    def op_cluster_arrive(self, span, quals, operands, clauses):
        return ir.ClusterArrive(".relaxed" in quals, span)

    def op_cluster_wait(self, span, quals, operands, clauses):
        return ir.ClusterWait(span)

    def op_cluster_sync(self, span, quals, operands, clauses):
        return [ir.ClusterArrive(False, span), ir.ClusterWait(span)]

    def _access(self, kind, span, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        remote = self._remote(clauses)
        if buf is None:
            return None
        part, lo, hi = self._region(buf, clauses)
        return ir.Access(kind, buf, remote, span, part, lo, hi)

    def _region(self, buf: ir.Ref, clauses) -> tuple[str | None, ir.Expr | None, ir.Expr | None]:
        """`part warp|warpgroup` or `bytes LO..HI` of an access (regions of a slot, §8.4)."""
        if "part" in clauses and "range" in clauses:
            self.error("SV110", "an access takes `part ...` or `bytes LO..HI`, not both", self.span(clauses["range"]))
            return None, None, None
        if "part" in clauses:
            word = str(clauses["part"])
            if word not in ("warp", "warpgroup"):
                self.error("SV110", f"`part {word}`: a slot is split by `part warp` or `part warpgroup`",
                           self.span(clauses["part"]))
                return None, None, None
            return word, None, None
        if "range" not in clauses:
            return None, None, None
        t = clauses["range"]
        lo, hi = self.expr(t.children[0]), self.expr(t.children[1])
        size = self.buffers[buf.name].bytes
        if isinstance(lo, ir.Const) and isinstance(hi, ir.Const) and not 0 <= lo.value < hi.value <= size:
            self.error("SV104", f"bytes {lo.value}..{hi.value} is not a non-empty range inside `{buf.name}`'s "
                       f"{size}-byte slots (half-open: LO..HI covers LO up to HI-1)", self.span(t))
        return None, lo, hi

    def op_read(self, span, quals, operands, clauses):
        return self._access("read", span, operands, clauses)

    def op_write(self, span, quals, operands, clauses):
        return self._access("write", span, operands, clauses)

    def _buffer_bytes(self, buf: ir.Ref, clauses, span, tx: bool = True) -> ir.Expr:
        if "bytes" in clauses:
            e = self._bytes(clauses["bytes"], "copy bytes")
            size = self.buffers[buf.name].bytes
            if isinstance(e, ir.Const) and e.value > size:
                self.error("SV107", f"copy of {e.value} bytes into `{buf.name}`, whose slots hold {size} bytes",
                           self.span(clauses["bytes"]))
            return e
        nbytes = self.buffers[buf.name].bytes
        if tx and nbytes > MAX_COUNT:  # a whole-buffer copy still completes its bytes on one tx-count
            self.error("SV105", f"copying all of `{buf.name}` ({nbytes} bytes) exceeds the tx-count limit 2^20-1; "
                       "give `bytes N`", span)
        return ir.Const(nbytes, span)

    def op_tma_load(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        bar = self.ref(clauses["target"], "mbarrier")
        mask = self.expr(clauses["multicast"]) if "multicast" in clauses else None
        if mask is not None and self.cluster == 1:
            self.error("SV108", "`multicast` in a protocol whose cluster has 1 CTA", self.span(clauses["multicast"]))
            return None
        group = self._cta_group(span, quals, clauses)
        if buf is None or bar is None or group is None:
            return None
        return ir.TmaLoad(buf, self._buffer_bytes(buf, clauses, span), bar, mask, span, group)

    def op_tma_store(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        return ir.TmaStore(buf, self._buffer_bytes(buf, clauses, span, tx=False), span) if buf else None

    def op_bulk_commit(self, span, quals, operands, clauses):
        return ir.GroupCommit("bulk", span)

    def _pending(self, operands, span) -> ir.Expr:
        n = self.expr(operands[0]) if operands else ir.Const(0, span)
        if not isinstance(n, ir.Const) or not 0 <= n.value <= 7:
            self.error("SV110", "the number of groups left pending must be a constant 0..7", span)
        return n

    def op_bulk_wait_read(self, span, quals, operands, clauses):
        return ir.GroupWait("bulk", self._pending(operands, span), span)

    def op_wgmma_read(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        return ir.WgmmaRead(buf, span) if buf else None

    def op_wgmma_commit(self, span, quals, operands, clauses):
        return ir.GroupCommit("wgmma", span)

    def op_wgmma_wait(self, span, quals, operands, clauses):
        return ir.GroupWait("wgmma", self._pending(operands, span), span)

    def op_cp_async(self, span, quals, operands, clauses):
        buf = self.ref(operands[0], "buffer")
        return ir.CpAsync(buf, span) if buf else None

    def op_cp_async_commit_group(self, span, quals, operands, clauses):
        return ir.GroupCommit("cp_async", span)

    def op_cp_async_wait_group(self, span, quals, operands, clauses):
        return ir.GroupWait("cp_async", self._pending(operands, span), span)

    def op_cp_async_wait_all(self, span, quals, operands, clauses):
        # PTX: "cp.async.wait_all is equivalent to: cp.async.commit_group; cp.async.wait_group 0;"
        return [ir.GroupCommit("cp_async", span), ir.GroupWait("cp_async", ir.Const(0, span), span)]

    def op_cp_async_mbarrier_arrive(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        return ir.CpAsyncArrive(bar, ".noinc" in quals, span) if bar else None

    def op_cp_async_bulk(self, span, quals, operands, clauses):
        """1-D `cp.async.bulk.shared::cta|cluster.global.mbarrier::complete_tx::bytes`: in the model
        a bulk copy is a bulk copy (ptx-semantics §5), so it is `tma.load`: into the executing
        CTA, or with `@ CTA` (`.shared::cluster` on a mapa'd address) into that CTA's slot with
        complete_tx on that CTA's barrier, which is `tma.load` with the multicast mask 1 << CTA."""
        buf = self.ref(operands[0], "buffer")
        bar = self.ref(clauses["target"], "mbarrier")
        remote = self._remote(clauses)
        if remote is not None and ".shared::cta" in quals:
            self.error("SV108", "`cp.async.bulk.shared::cta` writes the executing CTA's shared memory; a peer's "
                       "needs `.shared::cluster`", self.span(clauses["remote"]))
            return None
        if buf is None or bar is None:
            return None
        mask = None if remote is None else ir.BinOp("<<", ir.Const(1, span), remote, span)
        return ir.TmaLoad(buf, self._buffer_bytes(buf, clauses, span), bar, mask, span)

    def op_fence_proxy_async(self, span, quals, operands, clauses):
        return fences.bidirectional(span, quals, self.error)

    def op_fence_proxy_async__generic_release(self, span, quals, operands, clauses):
        return fences.half("release", span, quals, self.error)

    def op_fence_proxy_async__generic_acquire(self, span, quals, operands, clauses):
        return fences.half("acquire", span, quals, self.error)

    def op_fence_mbarrier_init(self, span, quals, operands, clauses):
        return ir.Fence("mbarrier_init", span)

    def _tmem(self, dealloc, span, clauses, quals=frozenset()):
        group = self.const(clauses["cta_group"], "cta_group") if "cta_group" in clauses else \
            2 if ".cta_group::2" in quals else 1
        if group not in (1, 2):
            self.error("SV110", "cta_group must be 1 or 2", span)
            return None
        if group == 2 and self.cluster < 2:
            self.error("SV108", "cta_group 2 needs a cluster of at least 2 CTAs", span)
            return None
        cols = self.const(clauses["cols"], "cols") if "cols" in clauses else 32
        if cols is None:
            return None
        if not 32 <= cols <= 512 or cols & (cols - 1):  # PTX tcgen05.alloc: nCols a power of two in 32..512
            self.error("SV110", f"cols {cols} must be a power of two in 32..512", self.span(clauses["cols"]))
            return None
        return ir.TmemAlloc(dealloc, group, span, cols)

    def op_tmem_alloc(self, span, quals, operands, clauses):
        return self._tmem(False, span, clauses)

    def op_tmem_dealloc(self, span, quals, operands, clauses):
        return self._tmem(True, span, clauses)

    def _cta_group(self, span, quals, clauses) -> int | None:
        """`cta_group N` or the PTX qualifier `.cta_group::N` (default 1)."""
        group = 2 if ".cta_group::2" in quals else 1
        if "cta_group" in clauses:
            group = self.const(clauses["cta_group"], "cta_group")
        if group not in (1, 2):
            self.error("SV110", "cta_group must be 1 or 2", span)
            return None
        if group == 2 and self.cluster < 2:
            self.error("SV108", "cta_group 2 needs a cluster of at least 2 CTAs", span)
            return None
        return group

    def op_umma_commit(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        mask = self.expr(clauses["multicast"]) if "multicast" in clauses else None
        group = self._cta_group(span, quals, clauses)
        return ir.UmmaCommit(bar, mask, span, group) if bar and group else None

    op_tcgen05_commit = op_umma_commit

    def op_tcgen05_alloc(self, span, quals, operands, clauses):
        return self._tmem(False, span, clauses, quals)

    def op_tcgen05_dealloc(self, span, quals, operands, clauses):
        return self._tmem(True, span, clauses, quals)

    def _mma(self, kind, span, quals, operands, clauses):
        acc = self.ref(operands[0], "tmem")
        # an mma's A (and scale-factor) operands may sit in tensor memory; a cp copies from shared memory
        srcs = [self.ref(o, "tmem" if kind == "mma" and self._names_kind(o) == "tmem" else "buffer")
                for o in operands[1:]]
        group = self._cta_group(span, quals, clauses)
        if acc is None or group is None or any(r is None for r in srcs):
            return None
        return ir.TcMma(kind, acc, tuple(srcs), group, span)  # type: ignore[arg-type]

    def _names_kind(self, t: Tree) -> str | None:
        """The declared kind of the object an operand names (None: not a declared name)."""
        if t.data in ("name", "index", "index_all") and str(t.children[0]) in self.kinds:
            return self.kinds[str(t.children[0])][0]
        return None

    def op_tcgen05_mma(self, span, quals, operands, clauses):
        return self._mma("mma", span, quals, operands, clauses)

    def op_tcgen05_cp(self, span, quals, operands, clauses):
        return self._mma("cp", span, quals, operands, clauses)

    def op_tcgen05_ld(self, span, quals, operands, clauses):
        region = self.ref(operands[0], "tmem")
        return ir.TmemAccess("ld", region, span) if region else None

    def op_tcgen05_st(self, span, quals, operands, clauses):
        region = self.ref(operands[0], "tmem")
        return ir.TmemAccess("st", region, span) if region else None

    def op_tcgen05_wait__ld(self, span, quals, operands, clauses):
        return ir.TcWait("ld", span)

    def op_tcgen05_wait__st(self, span, quals, operands, clauses):
        return ir.TcWait("st", span)

    def op_tcgen05_fence__before_thread_sync(self, span, quals, operands, clauses):
        return ir.TcFence("before", span)

    def op_tcgen05_fence__after_thread_sync(self, span, quals, operands, clauses):
        return ir.TcFence("after", span)


def _split_mnemonic(words: list[str]) -> tuple[str | None, list[str]]:
    """Longest known mnemonic prefix of `a.b.c`; the rest are qualifiers (as `.q`)."""
    for n in range(len(words), 0, -1):
        head = ".".join(words[:n])
        head = _ALIASES.get(head, head)
        if head in OPERATIONS:
            return head, ["." + w for w in words[n:]]
    return None, []


def _guard_role(cond: ir.Expr) -> str | None:
    """The role a condition restricts execution to, if it is `ROLE` or `ROLE && …`."""
    if isinstance(cond, ir.InRole):
        return cond.role
    if isinstance(cond, ir.BinOp) and cond.op == "&&":
        return _guard_role(cond.left) or _guard_role(cond.right)
    return None


def resolve(tree: Tree, path: str, text: str, defines: Mapping[str, int],
            expect: ir.Expectation | None, assignment: Mapping[str, tuple[int, ...]] | None = None) -> ir.Protocol:
    """Turn a parse tree into a Protocol, or raise InputError with every problem found.

    ``assignment``: the values of the `choose` declarations (name -> values, CTA-major);
    without one each takes the first value of its range and the protocol records none."""
    res = Resolver(path, text, defines, assignment)
    proto = tree.children[0]
    name, *items = proto.children
    res.header = res.span(name)
    res.declarations(items)
    if res.threads is None and not any(i.data == "cta_threads" for i in items):
        res.error("SV113", "missing `cta threads N;`", res.span(name))
    res.check_roles()
    body = res.block(items, _Ctx())
    if res.errors:
        errors = res.errors
        first = [f"{n}={c.lo}" for n, c in res.chosen.items() if c.hi - c.lo > 1]
        if assignment is None and first:  # a chosen value may be what made it wrong: say which one was used
            note = f"resolved with the first value of each `choose` ({', '.join(first)}; per CTA and per element alike)"
            errors = [replace(d, notes=(*d.notes, note)) for d in errors]
        raise InputError(sorted(errors, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0)))
    return ir.Protocol(
        name=str(name), path=path, params=tuple(res.params.items()), cluster=res.cluster,
        threads=res.threads or 0, roles=tuple(res.roles), buffers=tuple(res.buffers.values()),
        mbarriers=tuple(res.mbarriers.values()), body=body, expect=expect, span=res.span(proto),
        loop_params=tuple(res.loop_params), source=text, choices=res.choices(),
        assignment=tuple((n, tuple(assignment[n])) for n in res.chosen) if assignment is not None else (),
        param_sites=tuple(res.param_sites), tmem_regions=tuple(res.tmem_regions.values()),
    )
