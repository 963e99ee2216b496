"""The barrier rules over Promela text: ``semantics.rules`` run on Promela expressions.

Every mbarrier update the model makes (init, inval, the arrive forms, expect/complete_tx, a copy
landing) is a function of ``semantics.rules`` applied to ``_Term`` operands, so the export states
no barrier arithmetic of its own. A room of its own because both the mbarrier steps and the copy
agents (async_agents.py) write updates with it, and it knows nothing else of the model.
"""

from __future__ import annotations

import inspect

from ...semantics import rules


class _Term:
    """A Promela expression, built by running a rule of ``semantics.rules`` over text."""

    def __init__(self, text: str):
        self.text = text

    def _op(self, op: str, other: object) -> _Term:
        return _Term(f"({self.text} {op} {_promela(other)})")

    def __add__(self, other: object) -> _Term:
        return self._op("+", other)

    def __sub__(self, other: object) -> _Term:
        return self._op("-", other)

    def __eq__(self, other: object) -> _Term:  # type: ignore[override]
        return self._op("==", other)

    def __ne__(self, other: object) -> _Term:  # type: ignore[override]
        return self._op("!=", other)

    __hash__ = None  # type: ignore[assignment]


def _promela(value: object) -> str:
    return value.text if isinstance(value, _Term) else str(int(value))  # type: ignore[call-overload]


class _PromelaArith:
    """``rules.Arith`` over Promela expressions."""

    @staticmethod
    def ite(cond: object, then: object, other: object) -> _Term:
        return _Term(f"({_promela(cond)} -> {_promela(then)} : {_promela(other)})")

    @staticmethod
    def and_(*conds: object) -> _Term:
        return _Term("(" + " && ".join(_promela(c) for c in conds) + ")")

    @staticmethod
    def or_(*conds: object) -> _Term:
        return _Term("(" + " || ".join(_promela(c) for c in conds) + ")")

    @staticmethod
    def mod2(value: object) -> _Term:
        return _Term(f"({_promela(value)} % 2)")


_MB_FIELDS = ("mvalid", "mk", "mpend", "mexp", "mtx")


def mb_update(rule, *args: str) -> str:
    """Promela statements that apply ``rule`` (a function of ``semantics.rules`` on an ``Mbar``) to
    barrier ``_m``, with Promela expressions ``args`` as its other operands. The rule runs over
    Promela terms, so the export states no barrier arithmetic of its own. Every changed field is
    computed into a hidden temporary first, so all of them read the barrier before the step."""
    old = rules.Mbar(*(_Term(f"{f}[_m]") for f in _MB_FIELDS))
    state = () if rule is rules.mb_init else (old,)  # init makes a barrier from its count alone
    arith = {"A": _PromelaArith()} if "A" in inspect.signature(rule).parameters else {}
    new = rule(*state, *(_Term(a) for a in args), **arith)
    changed = [(i, _promela(v)) for i, (v, o) in enumerate(zip(new, old, strict=True)) if _promela(v) != o.text]
    temps = " ".join(f"_mb{i} = {text};" for i, text in changed)
    stores = " ".join(f"{_MB_FIELDS[i]}[_m] = _mb{i};" for i, _ in changed)
    return f"{temps} {stores}   /* rules.{rule.__name__} */"
