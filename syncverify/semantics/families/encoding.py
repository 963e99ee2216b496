"""What the family modules' Z3 encodings (the bmc engine's) share: ``rules.Arith`` over Z3
terms, and the record spaces."""

from __future__ import annotations

from typing import Any

import z3


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
