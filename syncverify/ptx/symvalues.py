"""Values derived from one kernel parameter left symbolic (`--symbolic`): Z3 bit-vector terms.

Extraction normally executes every value concretely (values.py). With
`--symbolic NAME>=LO` one parameter is a Z3 variable N under the assumption
A: LO <= N <= 2^30 (signed), so that a loop whose trip count is N can be kept
as a loop instead of being run for one value. A `Sym` is a value computed
from N by the instructions below; any other instruction on a `Sym` gives
UNKNOWN (as an unbound value would), which the executor handles soundly. The
concrete path in values.py is not touched: these are only consulted when an
operand is a `Sym`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from ..budget import solve
from .values import UNKNOWN, Value, _types, interp, is_float, is_signed, width

UPPER = 1 << 30  # N's upper bound: counters of 32 bits stay far from overflow below it
RLIMIT = 2_000_000  # Z3 resource units per question (deterministic; `unknown` is never read as an answer)
_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}


@dataclass(frozen=True, eq=False)
class Sym:
    """A value computed from the symbolic parameter: `bits` wide (1 for a predicate)."""

    expr: z3.BitVecRef
    bits: int

    def __repr__(self) -> str:
        return f"<{self.expr}>"


@dataclass(frozen=True)
class SymParam:
    """`--symbolic NAME[OFF:LEN]>=LO`: LEN bytes at OFF of parameter NAME (all of it when LEN is None)."""

    name: str
    off: int
    length: int | None
    lo: int
    ptx_name: str = ""  # the kernel parameter's PTX name, once resolved

    def show(self) -> str:
        part = f"[{self.off}:{self.length}]" if self.length is not None else ""
        return f"{self.name}{part}"


@dataclass
class SymCtx:
    """The symbolic variable N, its assumption, and the questions asked about terms under it."""

    param: SymParam
    bits: int = 32
    hi: int = UPPER  # N's upper bound in this domain (a split at a threshold lowers it)
    n: z3.BitVecRef = field(init=False)
    assume: z3.BoolRef = field(init=False)
    # answers by AST id; the term is kept with its answer, so that its id is not reused by another term
    _const: dict[int, tuple[z3.ExprRef, int | None]] = field(default_factory=dict)
    # the contexts `under` made, by the AST id of their condition (kept with it, as above)
    _under: dict[int, tuple[z3.BoolRef, SymCtx]] = field(default_factory=dict)
    # the answers of _unsat, by the AST ids of the facts (kept with them, as above)
    _asked: dict[tuple[int, ...], tuple[tuple[z3.BoolRef, ...], bool]] = field(default_factory=dict)
    # one model of A, asked once (``constant`` evaluates each term in it); [] until asked, [None] if none
    _model: list[z3.ModelRef | None] = field(default_factory=list)
    # sym_compute's results by operation and operands' AST ids (operands kept with them, as above): shared by
    # the contexts `under` makes, since a result depends on neither the assumption nor the lane
    _computed: dict[tuple[object, ...], tuple[list[Value | Sym], Value | Sym]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.n = z3.BitVec("N", self.bits)
        self.assume = z3.And(self.n >= self.param.lo, self.n <= self.hi)

    def under(self, cond: z3.BoolRef) -> SymCtx:
        """The same N with a stronger assumption (after a loop: the residue of its trip count), so that a
        term that is constant for every N with that trip count is decided.

        One context per condition: every warp of a role leaves its loop under the same residue
        conditions and then reads the same terms (the pipeline state advanced in closed form past
        the loop), so the answers of ``constant`` are shared between them instead of asked of Z3
        again per warp (on the 2x1 ping-pong GEMM with K symbolic most of the extraction's CPU was
        those repeated questions). An answer depends only on the assumption and the term; Z3
        hash-conses terms, so an equal condition has the same AST id."""
        key = cond.get_id()
        hit = self._under.get(key)
        if hit is not None and z3.eq(hit[0], cond):
            return hit[1]
        out = SymCtx(self.param, self.bits, self.hi)
        out.n = self.n
        out.assume = z3.And(self.assume, cond)
        out._computed = self._computed
        self._under[key] = (cond, out)
        return out

    def solver(self) -> z3.Solver:
        s = z3.Solver()
        s.set("rlimit", RLIMIT)
        s.set("random_seed", 0)
        return s

    def _unsat(self, *facts: z3.BoolRef) -> bool:
        """Whether A and `facts` are unsatisfiable (False also when Z3 cannot tell), asked once per
        context: the warps of a role ask the same questions (their trip counts, their suffixes'
        conditions), and an answer depends only on A and the facts (terms hash-consed: equal terms,
        equal AST ids)."""
        key = tuple(f.get_id() for f in facts)
        hit = self._asked.get(key)
        if hit is None or not all(z3.eq(a, b) for a, b in zip(hit[0], facts, strict=True)):
            s = self.solver()
            s.add(self.assume, *facts)
            hit = self._asked[key] = (facts, solve(s)[0] == z3.unsat)
        return hit[1]

    def holds(self, claim: z3.BoolRef, *extra: z3.BoolRef) -> bool:
        """Whether `claim` is valid under A (and `extra`); False also when Z3 cannot tell."""
        return self._unsat(*extra, z3.Not(claim))

    def possible(self, claim: z3.BoolRef, *extra: z3.BoolRef) -> bool:
        """Whether `claim` can hold under A; True also when Z3 cannot tell (never excludes a case)."""
        return not self._unsat(*extra, claim)

    def model_n(self, claim: z3.BoolRef) -> int | None:
        """A value of N under A for which `claim` holds; None when none (or Z3 cannot tell)."""
        s = self.solver()
        s.add(self.assume, claim)
        if solve(s)[0] != z3.sat:
            return None
        return s.model().eval(self.n, model_completion=True).as_signed_long()

    def _some_model(self) -> z3.ModelRef | None:
        """One model of A, the same for every term: the candidate value of a term is its value there, and
        only the proof that it is the only one depends on the term (a fresh solver per term gave this same
        model every time -- the query is A alone -- at the cost of one Z3 call per term)."""
        if not self._model:
            s = self.solver()
            s.add(self.assume)
            self._model.append(s.model() if solve(s)[0] == z3.sat else None)
        return self._model[0]

    def constant(self, v: Sym) -> Value:
        """The term's value when Z3 proves it constant under A, else UNKNOWN."""
        key = v.expr.get_id()
        hit = self._const.get(key)
        if hit is None or not z3.eq(hit[0], v.expr):
            e = z3.simplify(v.expr)
            got: int | None = None
            if z3.is_bv_value(e):
                got = e.as_long()
            else:
                model = self._some_model()
                if model is not None:
                    val = model.eval(e, model_completion=True)
                    if self.holds(e == val):
                        got = val.as_long()
            self._const[key] = (v.expr, got)
        got = self._const[key][1]
        return UNKNOWN if got is None else got

    def threshold(self, pred: Sym) -> int | None:
        """L with lo < L <= hi such that the predicate is `N >= L` or `N < L` for every N under A; None when
        it is not a threshold in N (then splitting the range of N at one point cannot decide it)."""
        e = pred.expr == 1
        lo, hi = self.param.lo, self.hi
        first = self.model_n(e != z3.substitute(e, (self.n, z3.BitVecVal(lo, self.bits))))
        if first is None:
            return None
        a, b = lo, first  # the outcome at a is that of lo; at b it differs: find the first change
        while b - a > 1:
            m = (a + b) // 2
            if self.possible(e != z3.substitute(e, (self.n, z3.BitVecVal(lo, self.bits))), self.n <= m):
                b = m
            else:
                a = m
        if not lo < b <= hi:
            return None
        split = self.n >= b
        return b if self.holds(e == split) or self.holds(e == z3.Not(split)) else None

    def compute(self, base: str, mods: tuple[str, ...], srcs: list[Value | Sym], simplified: bool) -> Value | Sym:
        """``sym_compute``, simplified to a number where it is one when ``simplified``; asked once per
        operation and operands: the 32 lanes of a warp mostly hold the same terms, and every warp of a
        role runs the same instructions on them (in the 2x1 ping-pong GEMM's extraction with K symbolic
        building and simplifying these terms again was a fifth of the CPU)."""
        key = (base, mods, simplified, *((x.expr.get_id(), x.bits) if isinstance(x, Sym) else ("v", x)
                                          for x in srcs))
        hit = self._computed.get(key)
        if hit is None:
            v = sym_compute(base, mods, srcs)
            if isinstance(v, Sym) and simplified:
                e = z3.simplify(v.expr)
                v = e.as_long() if z3.is_bv_value(e) else Sym(e, v.bits)
            hit = self._computed[key] = (srcs, v)
        return hit[1]

    def decide(self, pred: Sym) -> bool | None:
        """A predicate term's value when it is the same for every N under A; None when both can hold."""
        c = self.constant(pred)
        return None if c is UNKNOWN else bool(c)


def as_term(v: Value | Sym, bits: int) -> z3.BitVecRef | None:
    """An operand as a term of `bits` bits (an int as a constant); None for UNKNOWN."""
    if isinstance(v, Sym):
        e = v.expr
        if v.bits < bits:
            return z3.ZeroExt(bits - v.bits, e)
        return z3.Extract(bits - 1, 0, e) if v.bits > bits else e
    if v is UNKNOWN:
        return None
    return z3.BitVecVal(v, bits)  # type: ignore[arg-type]


def _cmp_term(op: str, a: z3.BitVecRef, b: z3.BitVecRef, signed: bool) -> z3.BoolRef | None:
    if op in ("eq", "ne"):
        return a == b if op == "eq" else a != b
    if op in ("lo", "ls", "hi", "hs") or not signed:
        op = {"lt": "lo", "le": "ls", "gt": "hi", "ge": "hs"}.get(op, op)
        return {"lo": z3.ULT, "ls": z3.ULE, "hi": z3.UGT, "hs": z3.UGE}[op](a, b)
    return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}.get(op)


def _bool(b: z3.BoolRef) -> Sym:
    return Sym(z3.If(b, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)), 1)


def _const_int(v: Value | Sym) -> int | None:
    return v if isinstance(v, int) else None


def sym_compute(base: str, mods: tuple[str, ...], srcs: list[Value | Sym]) -> Value | Sym:
    """`base.mods srcs` with at least one operand a `Sym`: a `Sym`, or UNKNOWN when not modelled.

    Modelled (PTX ISA, Integer Arithmetic / Comparison and Selection / Logic and Shift / cvt):
    mov, add, sub, mul (low half, or .wide), mad.lo, neg, min, max, and, or, xor, not, shl/shr by a
    constant, div/rem by a nonzero constant, cvt between integer types, selp, setp (one comparison,
    optionally combined with a predicate).
    """
    types = _types(mods)
    t = types[-1] if types else "b64"
    if any(is_float(x) for x in types):
        return UNKNOWN
    bits = width(t)
    sg = is_signed(t)
    if base == "cvt":
        if len(types) < 2:
            return UNKNOWN
        dst_t, src_t = types[0], types[1]
        a = as_term(srcs[0], width(src_t))
        if a is None:
            return UNKNOWN
        db, sb = width(dst_t), width(src_t)
        if db > sb:
            a = z3.SignExt(db - sb, a) if is_signed(src_t) else z3.ZeroExt(db - sb, a)
        elif db < sb:
            a = z3.Extract(db - 1, 0, a)
        return Sym(a, db)
    if base == "selp":
        if len(srcs) != 3:
            return UNKNOWN
        c = srcs[2]
        x, y = as_term(srcs[0], bits), as_term(srcs[1], bits)
        if x is None or y is None:
            return UNKNOWN
        if isinstance(c, int):
            return Sym(x if c else y, bits)
        ct = as_term(c, 1)
        if ct is None:
            return UNKNOWN
        return Sym(z3.If(ct == 1, x, y), bits)
    if base == "setp":
        op = mods[0]
        if op not in _CMP or len(srcs) < 2:
            return UNKNOWN
        a, b = as_term(srcs[0], bits), as_term(srcs[1], bits)
        if a is None or b is None:
            return UNKNOWN
        r = _cmp_term(op, a, b, sg)
        if r is None:
            return UNKNOWN
        if len(srcs) > 2:
            c = as_term(srcs[2], 1)
            if c is None or len(mods) < 2:
                return UNKNOWN
            cb = c == 1
            r = {"and": z3.And(r, cb), "or": z3.Or(r, cb), "xor": z3.Xor(r, cb)}.get(mods[1])  # type: ignore[assignment]
            if r is None:
                return UNKNOWN
        return _bool(r)
    if t == "pred" and base in ("and", "or", "xor", "not"):
        terms = [as_term(s, 1) for s in srcs]
        if any(x is None for x in terms):
            return UNKNOWN
        x = terms[0]
        if base == "not":
            return Sym(~x, 1)  # type: ignore[operator]
        y = terms[1]
        return Sym(x & y if base == "and" else x | y if base == "or" else x ^ y, 1)  # type: ignore[operator]
    if base == "mov":
        a = as_term(srcs[0], bits)
        return UNKNOWN if a is None else Sym(a, bits)
    if base in ("add", "sub", "mul", "mad", "min", "max", "and", "or", "xor"):
        if base in ("mul", "mad") and "hi" in mods:
            return UNKNOWN
        ob = 2 * bits if "wide" in mods else bits
        terms = [as_term(s, bits) for s in srcs]
        if any(x is None for x in terms) or len(terms) < 2:
            return UNKNOWN
        if ob != bits:
            terms = [z3.SignExt(ob - bits, x) if sg else z3.ZeroExt(ob - bits, x) for x in terms]  # type: ignore[arg-type]
        a, b = terms[0], terms[1]
        if base == "add":
            r = a + b  # type: ignore[operator]
        elif base == "sub":
            r = a - b  # type: ignore[operator]
        elif base == "mul":
            r = a * b  # type: ignore[operator]
        elif base == "mad":
            if len(terms) < 3:
                return UNKNOWN
            r = a * b + terms[2]  # type: ignore[operator]
        elif base in ("min", "max"):
            lt = (a < b) if sg else z3.ULT(a, b)  # type: ignore[operator]
            r = z3.If(lt, a, b) if base == "min" else z3.If(lt, b, a)
        else:
            r = a & b if base == "and" else a | b if base == "or" else a ^ b  # type: ignore[operator]
        return Sym(r, ob)
    if base in ("neg", "not"):
        a = as_term(srcs[0], bits)
        if a is None:
            return UNKNOWN
        return Sym(-a if base == "neg" else ~a, bits)
    if base in ("shl", "shr"):
        k = _const_int(srcs[1]) if len(srcs) > 1 else None
        a = as_term(srcs[0], bits)
        if k is None or a is None:
            return UNKNOWN
        k &= 0xFFFFFFFF
        if k >= bits:
            return UNKNOWN
        if base == "shl":
            return Sym(a << k, bits)
        return Sym(a >> k if sg else z3.LShR(a, k), bits)
    if base in ("div", "rem"):
        k = _const_int(srcs[1]) if len(srcs) > 1 else None
        a = as_term(srcs[0], bits)
        if k is None or a is None or interp(k, t) == 0:
            return UNKNOWN
        d = z3.BitVecVal(k, bits)
        if base == "div":
            return Sym(a / d if sg else z3.UDiv(a, d), bits)  # z3's signed `/` truncates, as PTX's div.s
        return Sym(z3.SRem(a, d) if sg else z3.URem(a, d), bits)
    return UNKNOWN
