"""Statements: blocks and their scopes, `let`, `for`, `if`, `elect`, and the dispatch of an
operation -- its mnemonic split from its qualifiers and each checked against the operation
table -- to its family's builder; with the operand checks the families share (object
references, byte counts, remote ranks, cta_group).

A room of its own because it is the one place that walks the body: the families only build
one operation each from operands this module has already checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lark import Token, Tree

from ... import ir
from ...diagnostics import Span
from ...expr import free_names, subexpressions
from .declarations import Declarations
from .names import _a, _Ctx, _Scope, _suggest
from .operations import (
    _ALIASES,
    _CLAUSE_SYNTAX,
    _CLAUSE_WORDS,
    _MBARRIER_OPS,
    _OP_WORDS,
    _USAGE,
    _WARP_COLLECTIVE,
    MAX_COUNT,
    OPERATIONS,
    _split_mnemonic,
)

# the kinds of name a Buffer declares (the IR tells their spaces apart by the declaration)
_BUFFER_KINDS = ("buffer", "global buffer", "registers", "tensor map")

class Statements(Declarations):
    """The walk over the body, the `op` dispatcher, and the operand checks shared by the
    operation families."""

    # ---- statements ------------------------------------------------------
    def block(self, items: Iterable[Tree], ctx: _Ctx) -> tuple[ir.Stmt, ...]:
        self.scopes.append(_Scope())
        out: list[ir.Stmt] = []
        for item in items:
            if item.data in ("param", "cluster", "cta_threads", "role", "smem", "mbarrier", "named", "choose",
                             "tmem_decl", "grid", "launch", "gmem", "flag_decl", "regs_decl", "tensormap_decl"):
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
        if t.data == "let_probe":
            name, probe_t = t.children
            if probe_t.data == "probe_neg":
                self.error("SV110", "a token holds the probe's result: write `let t = try_wait …;` and test `!t`",
                           span)
                return []
            probe = self.probe(probe_t)
            self.bind(name)
            return [ir.Let(str(name), ir.Const(1, span), span, probe)] if probe is not None else []
        if t.data == "let_flag":
            return self.let_flag(t, ctx)
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
        if t.data in ("if_stmt", "probe_if"):
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
        probe = None
        if t.data == "probe_if":
            probe = self.probe(cond_t)
            cond: ir.Expr = ir.Const(1, self.span(cond_t))
            inner_ctx = ctx
        else:
            cond = self.expr(cond_t)
            guard = _guard_role(cond)
            inner_ctx = _Ctx(guard or ctx.role, ctx.in_elect)
        then = self.block(then_t.children, inner_ctx)
        orelse: tuple[ir.Stmt, ...] = ()
        if rest:
            other = rest[0]
            orelse = (self.if_stmt(other, ctx),) if other.data in ("if_stmt", "probe_if") else \
                self.block(other.children, ctx)
        if probe is not None and cond_t.data == "probe_neg":
            then, orelse = orelse, then  # `if !try_wait`: the first block runs when the probe fails
        return ir.If(cond, then, orelse, self.span(t), probe)

    def let_flag(self, t: Tree, ctx: _Ctx) -> list[ir.Stmt]:
        """`let v = atom.OP.SEM F, V;` / `let v = ld.SEM F;` (the global-memory family's resolver)."""
        raise NotImplementedError

    def probe(self, t: Tree) -> ir.MbarProbe | None:
        """The test of `if [!]try_wait[.SEM][.SCOPE] B parity P` (ir.MbarProbe)."""
        raise NotImplementedError  # the mbarrier family's resolver defines it

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
        elif head.data == "gridop":  # `grid.sync`: `grid` is a keyword (the grid's declaration)
            words = ["grid", *(str(q)[1:] for q in head.children)]
        elif head.data == "tensormapop":  # `tensormap.replace`: `tensormap` is a keyword (its declaration)
            words = ["tensormap", *(str(q)[1:] for q in head.children)]
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
                clauses[word] = child if child.data in ("c_range", "c_lanes", "c_col_range") else child.children[0]
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
        if self.grid_ctas and not self._grid_allows(name, quals, clauses, span):
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
        table: Mapping[str, ir.Buffer | ir.Mbarrier | ir.TmemRegion | ir.Flag] = \
            self.buffers if kind in _BUFFER_KINDS else self.tmem_regions if kind == "tmem" \
            else self.flags if kind == "flag" else self.mbarriers
        if name not in table:
            return None  # its declaration was rejected, and that error is reported already
        obj = table[name]
        size = obj.size if isinstance(obj, ir.Mbarrier | ir.Flag) else obj.slots
        # (the IR tells the spaces apart by the declaration)
        kind = "buffer" if kind in _BUFFER_KINDS else kind
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

    # ---- operands the families share -------------------------------------
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


def _guard_role(cond: ir.Expr) -> str | None:
    """The role a condition restricts execution to, if it is `ROLE` or `ROLE && …`."""
    if isinstance(cond, ir.InRole):
        return cond.role
    if isinstance(cond, ir.BinOp) and cond.op == "&&":
        return _guard_role(cond.left) or _guard_role(cond.right)
    return None

