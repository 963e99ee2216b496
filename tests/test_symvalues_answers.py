"""The Z3 answers of a symbolic extraction are asked once per assumption (ptx/symvalues.py), and stay the
answers of their own assumption: a context made by `under` for one residue class never answers for another."""

from __future__ import annotations

import z3

from syncverify.ptx.symvalues import UNKNOWN, Sym, SymCtx, SymParam


def _ctx() -> SymCtx:
    return SymCtx(SymParam("0", 12, 4, 64), 32)


def _residue(ctx: SymCtx, r: int) -> z3.BoolRef:
    """`(N - 65) / 64 ≡ r (mod 4)`: the condition a warp's suffix is run under (symloop.py, _suffix)."""
    return z3.URem(z3.UDiv(ctx.n - 65, 64), 4) == r


def test_an_equal_condition_gives_the_same_context_and_its_answers():
    ctx = _ctx()
    a, b = ctx.under(_residue(ctx, 1)), ctx.under(_residue(ctx, 1))   # built twice: equal terms, one context
    assert a is b
    stage = Sym(z3.URem(z3.UDiv(ctx.n - 65, 64), 4), 32)
    assert a.constant(stage) == 1
    assert b._const and b.holds(z3.URem(z3.UDiv(ctx.n - 65, 64), 4) == 1)


def test_another_condition_keeps_its_own_answers():
    ctx = _ctx()
    stage = Sym(z3.URem(z3.UDiv(ctx.n - 65, 64), 4), 32)
    assert ctx.constant(stage) is UNKNOWN                  # every residue: not a constant
    one, two = ctx.under(_residue(ctx, 1)), ctx.under(_residue(ctx, 2))
    assert one is not two
    assert one.constant(stage) == 1 and two.constant(stage) == 2
    claim = z3.URem(z3.UDiv(ctx.n - 65, 64), 4) == 1
    assert one.holds(claim) and not two.holds(claim) and not ctx.holds(claim)
    assert two.possible(z3.Not(claim)) and not one.possible(z3.Not(claim))
