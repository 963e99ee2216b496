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

The members of a dynamic shared-memory struct are named when the host code that lays it out says where
they lie (`Launch.smem_members`: CUTLASS's `SharedStorage`, printed by the host program of
--cutlass-problem with `offsetof`-like address arithmetic): `pipelines.mainloop.full_barrier_` is
`mainloop_full_barrier`, `tensors.mainloop.smem_A` is `smem_A` -- the member's own name, with as many of
its enclosing members as make it unique (the epilogue's load pipeline has a `full_barrier_` too), the
containers every member is in (`pipelines`, `tensors`, the epilogue's `collective`) left out, and the
trailing underscore of CUTLASS's private members dropped. Members that share their bytes (a union:
ReuseSmemC's `smem_C` and `smem_D`) are one object, named after both (`smem_C_D`). A dynamic struct whose
layout no host code reports (an own kernel's `extern __shared__ char smem[]` cast to a struct) keeps the
synthetic names: the PTX has only the byte offsets, and -lineinfo carries no types.
"""

from __future__ import annotations

import re

from .launch import Launch, Memory
from .parse import Module

_LOCAL = re.compile(r"E(\d+)(\w+?)(?:_\d+)?$")
IDENT = _IDENT = re.compile(r"^[A-Za-z_]\w*$")
_RESERVED = frozenset({"protocol", "param", "role", "smem", "mbarrier", "if", "for", "in", "let", "wait", "arrive",
                       "init", "read", "write", "elect", "cta", "cluster", "warp", "warpgroup", "bytes", "count",
                       "parity", "syncthreads", "syncwarp", "tma", "choose", "instance", "lane", "i"})
RESERVED = _RESERVED  # words of the language a name must not be


# names the writer makes up itself: loop variables `k0`, roles `w4_7`, synthetic objects `mb0`, `s3`
SYNTHETIC = _SYNTHETIC = re.compile(r"^(k|w|s|mb)\d+(_\d+)?$")


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


_CONTAINERS = frozenset({"pipelines", "tensors", "collective"})


def member_names(paths: list[str]) -> list[str]:
    """An identifier for each member path (`pipelines.mainloop.full_barrier_` -> `mainloop_full_barrier`):
    its last component, with enclosing ones added until no other member has the same name."""
    parts = [[p.rstrip("_") for p in path.split(".") if p not in _CONTAINERS] or [path.replace(".", "_")]
             for path in paths]
    out = []
    for mine in parts:
        for k in range(1, len(mine) + 1):
            if sum(1 for other in parts if other[-k:] == mine[-k:]) == 1 or k == len(mine):
                out.append("_".join(mine[-k:]))
                break
    return out


def _joined(names: list[str]) -> str:
    """One name for members that share their bytes: `smem_C_D` for `smem_C` and `smem_D`."""
    if len(names) == 1:
        return names[0]
    common = names[0]
    for n in names[1:]:
        while not n.startswith(common):
            common = common[:-1]
    common = common[: common.rfind("_") + 1] if "_" in common else ""
    return common + "_".join(n[len(common):] for n in names) if common else "_or_".join(names)


def member_symbols(mod: Module, kernel: str, launch: Launch) -> list[tuple[str, int, int, str]]:
    """(name, offset, bytes, source path) of each member of the dynamic shared memory the launch's host code
    reported (Launch.smem_members), at the offset ptxas gives the dynamic shared memory."""
    fn = next((f for f in mod.entries() if f.name == kernel), None)
    if fn is None or not launch.smem_members:
        return []
    base = Memory(mod, fn, launch).dynamic_base
    members = sorted(launch.smem_members)
    names = member_names([p for _, _, p in members])
    groups: dict[tuple[int, int], list[int]] = {}
    for k, (off, size, _p) in enumerate(members):
        groups.setdefault((off, size), []).append(k)
    out = []
    for (off, size), ks in sorted(groups.items()):
        name = _joined([names[k] for k in ks])
        if _IDENT.match(name) and name not in _RESERVED and not _SYNTHETIC.match(name):
            paths = [members[k][2] for k in ks]
            head = paths[0].rsplit(".", 1)[0] + "." if "." in paths[0] else ""
            shown = head + "|".join(p.removeprefix(head) for p in paths) if all(p.startswith(head) for p in paths) \
                else " | ".join(paths)
            out.append((name, base + off, size, shown))
    return out


def shared_symbols(mod: Module, kernel: str, launch: Launch) -> list[tuple[str, int, int]]:
    """(source name, offset, bytes) of each named `.shared` variable of the kernel, and of each member of its
    dynamic shared memory the host code reported, by offset."""
    fn = next((f for f in mod.entries() if f.name == kernel), None)
    if fn is None:
        return []
    members = [(name, off, size) for name, off, size, _ in member_symbols(mod, kernel, launch)]
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
    taken = {name for name, _, _ in out}
    out += [m for m in members if m[0] not in taken]
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
                 slots: list[tuple[int, int, int, int]],
                 arrays: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Names for the barrier arrays (start, count) and the slots (count, bytes, start, pieces), in order.
    `arrays`: symbols that are arrays of stages (a SharedStorage member such as `smem_A`, one buffer per
    pipeline stage): slots from their start whose size divides them are their first elements, by the
    source's stage index (`smem_A[k]` is the buffer of stage k even when a small problem uses 4 of 8)."""
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
            bar_names.append(fresh(sym[0], sym[1] == start and (sym[2] == 8 * n or sym[0] in arrays)))
    slot_names = []
    for k, (n, size, start, pieces) in enumerate(slots):
        sym = _symbol_at(symbols, start)
        if sym is None:
            slot_names.append(fresh(f"s{k}", True))
        else:
            whole = sym[2] == n * size or (sym[0] in arrays and sym[2] % size == 0 and n * size <= sym[2])
            slot_names.append(fresh(sym[0], pieces == 1 and sym[1] == start and whole))
    return bar_names, slot_names
