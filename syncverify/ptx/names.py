"""The names the source uses for the objects of an extracted protocol.

A kernel's `__shared__ uint64_t full[STAGES];` is the PTX symbol `_ZZ9ws_rowsumPKfPfiE4full` (a
function-local static, mangled) at a known offset of the CTA's shared memory (launch.Memory lays the
symbols out as ptxas does). An mbarrier array that is exactly such a symbol is called by its name
(`full[3]` rather than `mb0[0..2]`); a run of barriers that spans two symbols is split at the boundary
(`full` and `empty` declared one after the other are two arrays, not one). A buffer slot inside a symbol
is named after it: the symbol's name when the slots cover it exactly, else `NAME_k` (the k-th slot cut
from it, e.g. the part of `tile` one consumer warp reads). Objects in no symbol, or in a dynamic `extern
__shared__` array (whose members -lineinfo does not describe), keep the synthetic names (`mbK`, `sK`).
Names are only names: the protocol's meaning does not depend on them.
"""

from __future__ import annotations

import re

from .launch import Launch, Memory
from .parse import Module

_LOCAL = re.compile(r"E(\d+)(\w+?)(?:_\d+)?$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_RESERVED = frozenset({"protocol", "param", "role", "smem", "mbarrier", "if", "for", "in", "let", "wait", "arrive",
                       "init", "read", "write", "elect", "cta", "cluster", "warp", "warpgroup", "bytes", "count",
                       "parity", "syncthreads", "syncwarp", "tma", "choose", "instance", "lane", "i"})


# names the writer makes up itself: loop variables `k0`, roles `w4_7`, synthetic objects `mb0`, `s3`
_SYNTHETIC = re.compile(r"^(k|w|s|mb)\d+(_\d+)?$")


def short_name(symbol: str) -> str | None:
    """`full` for `_ZZ9ws_rowsumPKfPfiE4full`, the symbol itself when it is a plain identifier; None for a
    name the writer's own names could collide with."""
    name = _short_name(symbol)
    return None if name is None or _SYNTHETIC.match(name) else name


def _short_name(symbol: str) -> str | None:
    if symbol.startswith("_ZZ"):
        m = _LOCAL.search(symbol)
        if m and len(m[2]) >= int(m[1]):
            name = m[2][: int(m[1])]
            return name if _IDENT.match(name) else None
        return None
    if symbol.startswith("_Z") or not _IDENT.match(symbol):
        return None
    return symbol


def shared_symbols(mod: Module, kernel: str, launch: Launch) -> list[tuple[str, int, int]]:
    """(source name, offset, bytes) of each named `.shared` variable of the kernel, by offset."""
    fn = next((f for f in mod.entries() if f.name == kernel), None)
    if fn is None:
        return []
    mem = Memory(mod, fn, launch)
    sizes = {v.name: v.size for v in (*mod.variables, *fn.local_vars) if v.space == "shared"}
    out = []
    for sym, off in mem.shared.items():
        name = short_name(sym)
        size = sizes.get(sym)
        # a dynamic `extern __shared__` array (CUTLASS's SharedStorage carved out of `smem[]`) names no member:
        # its parts keep the synthetic names (the members' names would need DWARF types, which -lineinfo omits)
        if name is not None and name not in _RESERVED and size is not None:
            out.append((name, off, size))
    return sorted(out, key=lambda t: t[1])


def _symbol_at(symbols: list[tuple[str, int, int]], byte: int) -> tuple[str, int, int] | None:
    return next((s for s in symbols if s[1] <= byte < s[1] + s[2]), None)


def split_at_symbols(runs: list[tuple[int, int]], symbols: list[tuple[str, int, int]],
                     stride: int = 8) -> list[tuple[int, int]]:
    """Runs of barriers cut where one symbol ends and the next begins."""
    out: list[tuple[int, int]] = []
    for start, n in runs:
        cur, k = start, 0
        for j in range(n):
            at = start + stride * j
            if j > k and _symbol_at(symbols, at) != _symbol_at(symbols, at - stride):
                out.append((cur, j - k))
                cur, k = at, j
        out.append((cur, n - k))
    return out


def object_names(symbols: list[tuple[str, int, int]], bars: list[tuple[int, int]],
                 slots: list[tuple[int, int, int, int]]) -> tuple[list[str], list[str]]:
    """Names for the barrier arrays (start, count) and the slots (count, bytes, start, pieces), in order."""
    used: set[str] = set()
    per_symbol: dict[str, int] = {}

    def fresh(base: str, exact: bool) -> str:
        if exact and base not in used:
            used.add(base)
            return base
        while True:
            k = per_symbol.get(base, 0)
            per_symbol[base] = k + 1
            name = f"{base}_{k}"
            if name not in used:
                used.add(name)
                return name

    bar_names = []
    for k, (start, n) in enumerate(bars):
        sym = _symbol_at(symbols, start)
        if sym is None or start + 8 * n > sym[1] + sym[2]:
            bar_names.append(fresh(f"mb{k}", True))
        else:
            bar_names.append(fresh(sym[0], sym[1] == start and sym[2] == 8 * n))
    slot_names = []
    for k, (n, size, start, pieces) in enumerate(slots):
        sym = _symbol_at(symbols, start)
        if sym is None:
            slot_names.append(fresh(f"s{k}", True))
        else:
            slot_names.append(fresh(sym[0], pieces == 1 and sym[1] == start and sym[2] == n * size))
    return bar_names, slot_names
