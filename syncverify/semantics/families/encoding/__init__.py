"""What the family modules' Z3 encodings (the bmc engine's) share: ``rules.Arith`` over Z3
terms, and the record spaces; in its modules, the rest of the vocabulary the encodings are written
in: events.py (the unrolled events, their records and copies, ``Unsupported``), effects.py (a
step's updates and a move's effect) and layout.py (the interface of the engine's static layout).

A package of its own so that the bmc encoding consumes the families' semantics and not the
reverse: the families and the engine (engines/bmc/) both import this vocabulary, and nothing here
imports the engine."""

from __future__ import annotations

from typing import Any

from ....z3_lazy import z3


class Z3Arith:
    """``rules.Arith`` over Z3 terms."""

    @staticmethod
    def ite(cond: Any, then: Any, other: Any) -> Any:
        return z3.If(cond, then, other)

    @staticmethod
    def and_(*conds: Any) -> Any:
        return z3.And(*conds)

    @staticmethod
    def or_(*conds: Any) -> Any:
        return z3.Or(*conds)

    @staticmethod
    def mod2(value: Any) -> Any:
        return value & 1  # bit-vectors and ints alike: -1 & 1 == 1 == Python's -1 % 2


Z3A = Z3Arith()

# record spaces of this encoding (semantics.state: SPACE_DATA, SPACE_INIT, SPACE_OBS, SPACE_START);
# COMMIT: a tcgen05.commit's arrival, in flight from the commit until it lands (known by nobody)
DATA, INIT, OBS, START, COMMIT = 0, 1, 2, 3, 4
