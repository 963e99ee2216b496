"""Concrete integer semantics of the PTX instructions that compute values, lane by lane.

A value is an int (the bit pattern, masked to the instruction's width) or
UNKNOWN. Anything not modelled here yields UNKNOWN, never a guess: an unknown
value that later decides control flow or names a barrier makes extraction
refuse, so leaving an instruction out costs completeness, not soundness.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from functools import lru_cache


class _Unknown:
    """The value of a register that depends on data, time or an unbound parameter."""

    _inst: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()
Value = int | _Unknown

_WIDTH = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "b32": 32, "u32": 32,
          "s32": 32, "b64": 64, "u64": 64, "s64": 64, "f32": 32, "f64": 64, "f16": 16, "bf16": 16,
          "b128": 128, "f16x2": 32, "bf16x2": 32}


def width(t: str) -> int:
    return _WIDTH.get(t, 64)


def is_signed(t: str) -> bool:
    return t.startswith("s")


def is_float(t: str) -> bool:
    return t.startswith("f") or t.startswith("bf")


def mask(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def signed(v: int, bits: int) -> int:
    v = mask(v, bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def interp(v: int, t: str) -> int:
    """The number a bit pattern means for type t."""
    bits = width(t)
    return signed(v, bits) if is_signed(t) else mask(v, bits)


@lru_cache(maxsize=4096)
def _types(mods: tuple[str, ...]) -> list[str]:
    return [m for m in mods if m in _WIDTH]


@lru_cache(maxsize=4096)
def _has_float(mods: tuple[str, ...]) -> bool:
    return any(is_float(x) for x in _types(mods))


def _cmp(op: str, a: int, b: int) -> int | None:
    table: dict[str, Callable[[int, int], bool]] = {
        "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
        "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
        "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y, "hs": lambda x, y: x >= y,
    }
    f = table.get(op)
    return None if f is None else int(f(a, b))


def float_imm_bits(text: str) -> Value:
    """The bit pattern of a PTX float literal in hex form (`0f` + 8 digits: f32, `0d` + 16: f64);
    a decimal literal's width depends on the instruction, so it is left unknown."""
    if len(text) == 10 and text[:2] in ("0f", "0F"):
        return int(text[2:], 16)
    if len(text) == 18 and text[:2] in ("0d", "0D"):
        return int(text[2:], 16)
    return UNKNOWN


def _float(v: int, t: str) -> float | None:
    if t == "f32":
        return struct.unpack("<f", struct.pack("<I", mask(v, 32)))[0]
    if t == "f64":
        return struct.unpack("<d", struct.pack("<Q", mask(v, 64)))[0]
    return None  # f16, bf16: not needed to decide control flow so far


def _float_setp(op: str, x: float, y: float) -> int | None:
    """PTX `setp` on floats: the plain comparisons are false when either side is NaN, the `u` forms true
    (PTX ISA, Floating Point Comparison Operators); `num`/`nan` test for NaN."""
    nan = math.isnan(x) or math.isnan(y)
    if op == "num":
        return int(not nan)
    if op == "nan":
        return int(nan)
    unordered = op in ("equ", "neu", "ltu", "leu", "gtu", "geu")
    plain = op[:-1] if unordered else op
    if plain not in ("eq", "ne", "lt", "le", "gt", "ge"):
        return None
    if nan:
        return int(unordered)
    return _cmp(plain, x, y)  # type: ignore[arg-type]


def _against_extreme(op: str, t: str, srcs: list[Value]) -> Value:
    """`setp` of an unknown value against the smallest or largest value of its type, which every value
    satisfies or none does: `x > 0xffffffffffffffff` (unsigned) is false whatever x is. A watchdog whose
    limit is bound to the type's maximum (`now - t0 > limit`) never fires, so the branch is decided."""
    bits = width(t)
    unsigned = op in ("lo", "ls", "hi", "hs") or not is_signed(t)
    lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    plain = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(op, op)
    x, y = srcs
    if isinstance(y, int):  # unknown OP y
        k = mask(y, bits) if unsigned else signed(y, bits)
        table = {("gt", hi): 0, ("lt", lo): 0, ("ge", lo): 1, ("le", hi): 1}
    elif isinstance(x, int):  # x OP unknown
        k = mask(x, bits) if unsigned else signed(x, bits)
        table = {("gt", lo): 0, ("lt", hi): 0, ("ge", hi): 1, ("le", lo): 1}
    else:
        return UNKNOWN
    r = table.get((plain, k))
    return UNKNOWN if r is None else r


@lru_cache(maxsize=1 << 15, typed=True)
def computed(base: str, mods: tuple[str, ...], srcs: tuple[Value, ...]) -> Value:
    """`compute` of one lane's inputs, UNKNOWN where it gives None; remembered, since the warps of a CTA and
    the CTAs of a cluster compute the same values from the same inputs (on the CUTLASS ping-pong GEMM, nine
    of ten of its 55,000 calls repeat an earlier one). A lane's values are ints or UNKNOWN (registers hold
    masked ints), so equal keys are equal inputs."""
    v = compute(base, mods, list(srcs))
    return UNKNOWN if v is None else v


def compute(base: str, mods: tuple[str, ...], srcs: list[Value]) -> Value | None:
    """The result of `base.mods srcs` or UNKNOWN; None when the instruction is not a computation here."""
    types = _types(mods)
    t = types[-1] if types else "b64"
    if base == "setp" and t in ("f32", "f64") and len(srcs) == 2 and all(isinstance(x, int) for x in srcs):
        fx, fy = _float(srcs[0], t), _float(srcs[1], t)  # type: ignore[arg-type]
        r = None if fx is None or fy is None else _float_setp(mods[0], fx, fy)
        return UNKNOWN if r is None else r
    if _has_float(mods) and base not in ("mov", "selp", "cvt"):
        return UNKNOWN
    bits = width(t)
    if any(s is UNKNOWN for s in srcs):
        if base == "selp" and len(srcs) == 3 and srcs[2] is not UNKNOWN:
            pick = srcs[0] if srcs[2] else srcs[1]
            return UNKNOWN if pick is UNKNOWN else mask(pick, bits)
        if base in ("and", "or") and t == "pred":  # p && 0 = 0, p || 1 = 1
            known = [s for s in srcs if s is not UNKNOWN]
            if base == "and" and 0 in known:
                return 0
            if base == "or" and 1 in known:
                return 1
        if base == "setp" and len(srcs) == 2:
            return _against_extreme(mods[0], t, srcs)
        return UNKNOWN
    s = [x for x in srcs if isinstance(x, int)]
    a = interp(s[0], t) if s else 0
    b = interp(s[1], t) if len(s) > 1 else 0
    if base == "mov":
        return mask(s[0], bits)
    if base in ("add", "sub"):
        return mask(a + b if base == "add" else a - b, bits)
    if base in ("mul", "mul24"):
        if "wide" in mods:
            return mask(a * b, 2 * bits)
        if "hi" in mods:
            return mask((a * b) >> bits, bits)
        return mask(a * b, bits)
    if base in ("mad", "mad24"):
        c = s[2]
        if "wide" in mods:
            return mask(a * b + c, 2 * bits)
        if "hi" in mods:
            return mask(((a * b) >> bits) + c, bits)
        return mask(a * b + c, bits)
    if base in ("div", "rem"):
        if b == 0:
            return UNKNOWN
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return mask(q if base == "div" else a - q * b, bits)
    if base in ("and", "or", "xor"):
        x, y = mask(s[0], bits), mask(s[1], bits)
        return x & y if base == "and" else x | y if base == "or" else x ^ y
    if base == "not":
        return mask(~s[0], bits)
    if base == "cnot":
        return int(mask(s[0], bits) == 0)
    if base == "neg":
        return mask(-a, bits)
    if base == "abs":
        return mask(abs(a), bits)
    if base in ("min", "max"):
        return mask(min(a, b) if base == "min" else max(a, b), bits)
    if base == "shl":
        sh = mask(s[1], 32)
        return 0 if sh >= bits else mask(s[0] << sh, bits)
    if base == "shr":
        sh = min(mask(s[1], 32), bits)
        return mask(a >> sh, bits)
    if base == "selp":
        return mask(s[0] if s[2] else s[1], bits)
    if base == "popc":
        return bin(mask(s[0], bits)).count("1")
    if base == "clz":
        v = mask(s[0], bits)
        return bits - v.bit_length()
    if base == "brev":
        v = mask(s[0], bits)
        return int(format(v, f"0{bits}b")[::-1], 2)
    if base == "bfe":
        pos, ln = mask(s[1], 8), mask(s[2], 8)
        v = mask(s[0], bits) >> pos if pos < bits else 0
        field = mask(v, ln) if ln else 0
        if is_signed(t) and ln and field >> (ln - 1):
            field -= 1 << ln
        return mask(field, bits)
    if base == "bfi":
        pos, ln = mask(s[2], 8), mask(s[3], 8)
        m = mask(((1 << ln) - 1) << pos, bits)
        return (mask(s[1], bits) & ~m) | (mask(s[0] << pos, bits) & m)
    if base == "shf":
        lo, hi, sh = mask(s[0], 32), mask(s[1], 32), mask(s[2], 32)
        sh = min(sh, 32) if "clamp" in mods else sh & 31
        both = (hi << 32) | lo
        return mask(both << sh >> 32, 32) if "l" in mods else mask(both >> sh, 32)
    if base == "lop3":
        a_, b_, c_, lut = mask(s[0], 32), mask(s[1], 32), mask(s[2], 32), s[3] & 0xFF
        out = 0
        for bit in range(32):
            idx = ((a_ >> bit) & 1) << 2 | ((b_ >> bit) & 1) << 1 | ((c_ >> bit) & 1)
            out |= ((lut >> idx) & 1) << bit
        return out
    if base == "cvt":
        if len(types) >= 2 and not is_float(types[1]) and not is_float(types[0]):
            src_t, dst_t = types[1], types[0]
            return mask(interp(s[0], src_t), width(dst_t))
        return UNKNOWN
    if base == "setp":
        op = mods[0]
        r = _cmp(op, a, b)
        if r is None:
            return UNKNOWN
        if len(s) > 2:  # setp.cmp.boolop d, a, b, c
            boolop = mods[1]
            c = s[2]
            r = r & c if boolop == "and" else r | c if boolop == "or" else r ^ c
        return r
    return None
