"""A grid of CTAs extracted as one protocol (`--whole-grid`): CTAs that meet through global memory.

A protocol extracted per cluster (extract.py) describes one cluster and
compares the others with it; CTAs that wait for each other through global
memory (a stream-K or split-K fixup, a software grid barrier) are one protocol
over the grid, and their programs may differ (the CTA that reduces a tile
waits, its peers signal). Here every CTA of the grid (one-CTA clusters, at most
16 CTAs: every CTA is modelled, docs/language.md §3.7) runs, and the protocol
says `grid N;`, the launch's promise (`launch persistent;` ...), the flags and
global buffers the CTAs share, and each role's statements per CTA (`if w0 &&
block == 1 { ... }`).

Global memory (gridsync.py gives the events):

* flags: every 32-bit word a flag operation touches, one `flag` array per
  pointer parameter, named after it (`p2[0]`), initially 0 (a workspace the
  host clears, as CUTLASS's `initialize_workspace` does);
* data: the bytes that a thread reads and a *different* thread writes (found
  over every access of every thread, globalcomm.py's record) are `global`
  buffers, split at the bounds of the warps' accesses; each access of those
  bytes is a `read`/`write` of the pieces it touches, for the lanes that touch
  them. Accesses of other bytes (inputs, outputs, each thread's own) are not
  communication and are dropped;
* refused, at the access: bytes another thread may touch reached through an
  address that is not known (a pointer not bound with `--param`), an access
  of those bytes that the executor did not run (under a branch decided by
  data), two lanes of one warp communicating (the language's warp is one
  process), a weak access of a flag's word.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from .execute import run_cluster
from .globalcomm import GlobalAccesses, _Access, _keys_meet
from .lanes import lane_condition
from .launch import WARP, Event, Launch
from .parse import Function, Module, PtxError
from .skeleton import Role, Skeleton, Stmt, build

MAX_GRID = 16
LAUNCHES = ("cooperative", "persistent", "ordered")


def _param_bases(fn: Function, launch: Launch) -> list[tuple[int, int]]:
    """(address, parameter index) of every pointer parameter bound to an integer."""
    out = []
    for k, p in enumerate(fn.params):
        v = launch.params.get(p.name, launch.params.get(str(k)))
        if isinstance(v, int) and p.size == 8:
            out.append((v, k))
    return sorted(out)


def _owner(bases: list[tuple[int, int]], addr: int) -> tuple[int, int] | None:
    """(parameter index, byte offset) of the bound pointer an address lies above (the nearest)."""
    best = None
    for base, k in bases:
        if base <= addr:
            best = (k, addr - base)
    return best


def _group(mod: Module, fn: Function, launch: Launch) -> int:
    if launch.grid is None:
        raise PtxError(mod.path, fn.line, 1, "--whole-grid needs the grid: --grid N")
    if launch.cluster != (1, 1, 1):
        raise PtxError(mod.path, fn.line, 1, f"--whole-grid models CTAs that meet through global memory only; "
                       f"a cluster of {launch.cluster} CTAs is not one of them (extract one cluster instead)")
    n = launch.grid[0] * launch.grid[1] * launch.grid[2]
    if n > MAX_GRID:
        raise PtxError(mod.path, fn.line, 1, f"--whole-grid: a grid of {n} CTAs; at most {MAX_GRID} are modelled "
                       "(every CTA in full): choose a smaller problem")
    if launch.grid_launch is not None and launch.grid_launch not in LAUNCHES:
        raise PtxError(mod.path, fn.line, 1, f"--grid-launch {launch.grid_launch}: expected one of "
                       + ", ".join(LAUNCHES))
    return n


def run_grid(mod: Module, fn: Function, launch: Launch) -> tuple[dict[tuple[int, int], list[Event]], GlobalAccesses]:
    """The events of every warp of every CTA of the grid, keyed (CTA index, warp)."""
    n = _group(mod, fn, launch)
    gcomm = GlobalAccesses(launch)
    events: dict[tuple[int, int], list[Event]] = {}
    for ci in range(n):
        for (_rank, w), evs in run_cluster(mod, fn, replace(launch, cluster_index=ci), gcomm).items():
            events[(ci, w)] = evs
    return events, gcomm


def _thread(a: _Access) -> tuple[int, int, int] | None:
    return None if a.thread is None else (a.thread[0], a.thread[2], a.thread[3])


class _Global:
    """The flags and the communicating bytes of one grid's events and accesses."""

    def __init__(self, mod: Module, fn: Function, launch: Launch, events: dict[tuple[int, int], list[Event]],
                 gcomm: GlobalAccesses):
        self.bases = _param_bases(fn, launch)
        flag_ins = {id(e.instr) for evs in events.values() for e in evs if e.kind == "gflag"}
        words = sorted({int(e.args[1]) for evs in events.values() for e in evs if e.kind == "gflag"})  # type: ignore[call-overload]
        self.flags: dict[int, str] = {}
        self.flag_decls: list[str] = []
        by_param: dict[str, list[int]] = {}
        for w in words:
            own = _owner(self.bases, w)
            by_param.setdefault(f"p{own[0]}" if own else "flags", []).append(w)
        for name, ws in by_param.items():
            for j, w in enumerate(ws):
                self.flags[w] = f"{name}[{j}]" if len(ws) > 1 else name
            offs = ", ".join(f"{_owner(self.bases, w)[1] if _owner(self.bases, w) else w:#x}" for w in ws)  # type: ignore[index]
            self.flag_decls.append(f"  flag {name}{f'[{len(ws)}]' if len(ws) > 1 else ''};".ljust(40)
                                   + f"// 32-bit words at byte {offs} of the buffer (0 at launch)")
        data = [a for a in gcomm.accesses if id(a.ins) not in flag_ins]
        for a in data:
            if a.span is not None and any(a.span[0] < w + 4 and w < a.span[1] for w in words):
                raise gcomm._at(a.ins, f"cannot extract ({a.who}): a weak access of a flag's word in global "
                                "memory (the language touches flags only with its flag operations)")
        self._loose(gcomm, data)
        marked = self._pairs(gcomm, data)
        emitted = {(ci, e.instr.line, e.instr.column, w, lane) for (ci, w), evs in events.items()
                   for e in evs if e.kind == "gdata" for lane, *_ in e.footprint}
        for a in marked:
            t = _thread(a)
            assert t is not None and a.span is not None
            if (t[0], a.ins.line, a.ins.column, t[1], t[2]) not in emitted:
                raise gcomm._at(a.ins, f"cannot extract ({a.who}, lane {t[2]}): this access of global memory "
                                "meets another thread's, and the executor did not run it (it lies under a "
                                "branch or guard decided by data): the protocol would miss it")
        self.regions = _merge([a.span for a in marked if a.span is not None])
        self._chunks(events)

    @staticmethod
    def _loose(gcomm: GlobalAccesses, data: list[_Access]) -> None:
        """An access at an unknown address that may meet another thread's: refused (as globalcomm.py)."""
        for a in data:
            if a.span is not None:
                continue
            for b in data:
                if b is a or not _keys_meet(a.keys, b.keys):
                    continue
                if _thread(a) == _thread(b) and a.thread is not None:
                    continue
                if a.reads and b.writes:
                    raise gcomm._refusal(a, b)
                if a.writes and b.reads:
                    raise gcomm._refusal(b, a)

    @staticmethod
    def _pairs(gcomm: GlobalAccesses, data: list[_Access]) -> list[_Access]:
        """The placed accesses of bytes that a different thread writes (or reads, for a write)."""
        placed = sorted((a for a in data if a.span is not None), key=lambda a: a.span[0])  # type: ignore[index]
        marked: dict[int, _Access] = {}
        active: list[_Access] = []
        for a in placed:
            lo = a.span[0]  # type: ignore[index]
            active = [b for b in active if b.span[1] > lo]  # type: ignore[index]
            for b in active:
                ta, tb = _thread(a), _thread(b)
                if ta == tb or not ((a.reads and b.writes) or (a.writes and b.reads)):
                    continue
                if ta is not None and tb is not None and ta[:2] == tb[:2]:
                    r, w = (a, b) if a.reads else (b, a)
                    raise gcomm._at(r.ins, f"cannot extract ({r.who}, lane {ta[2] if r is a else tb[2]}): lanes "
                                    f"of one warp communicate through global memory (with `{w.ins.opcode}` at "
                                    f"PTX line {w.ins.line}); the language's warp is one process")
                marked[id(a)], marked[id(b)] = a, b
            active.append(a)
        return list(marked.values())

    def _chunks(self, events: dict[tuple[int, int], list[Event]]) -> None:
        """Each region cut at the bounds of the accesses of it, named after its pointer parameter."""
        bounds: list[set[int]] = [{lo, hi} for lo, hi in self.regions]
        for evs in events.values():
            for e in evs:
                if e.kind != "gdata":
                    continue
                lo, hi = min(f[2] for f in e.footprint), max(f[3] for f in e.footprint)
                for j, (a, b) in enumerate(self.regions):
                    if lo < b and a < hi:
                        bounds[j] |= {max(lo, a), min(hi, b)}
        self.chunks: list[tuple[int, int, str]] = []
        self.global_decls: list[str] = []
        per_param: dict[str, int] = {}
        for j, (a, b) in enumerate(self.regions):
            own = _owner(self.bases, a)
            base = f"g{own[0]}" if own else "g"
            k = per_param.get(base, 0)
            per_param[base] = k + 1
            name = base if k == 0 else f"{base}_{k}"
            cuts = sorted(bounds[j])
            pieces = list(pairwise(cuts))
            sizes = {t - s for s, t in pieces}
            where = f"byte {own[1]:#x}" if own else f"address {a:#x}"
            if len(sizes) == 1:
                n = len(pieces)
                self.global_decls.append(f"  global {name}{f'[{n}]' if n > 1 else ''} bytes {sizes.pop()};".ljust(40)
                                         + f"// {b - a} bytes from {where} of the buffer")
                self.chunks += [(s, t, f"{name}[{i}]" if n > 1 else name) for i, (s, t) in enumerate(pieces)]
            else:
                for i, (s, t) in enumerate(pieces):
                    self.global_decls.append(f"  global {name}_{i} bytes {t - s};".ljust(40)
                                             + f"// from {where} of the buffer + {s - a}")
                    self.chunks.append((s, t, f"{name}_{i}"))

    def convert(self, e: Event, full: int) -> list[Event]:
        if e.kind == "gflag":
            return [Event("text", (str(e.args[0]).replace("{F}", self.flags[int(e.args[1])]),),  # type: ignore[call-overload]
                          e.lanes, e.instr)]
        if e.kind != "gdata":
            return [e]
        out = []
        for s, t, name in self.chunks:
            m = 0
            for lane, _r, a, b in e.footprint:
                if a < t and s < b:
                    m |= 1 << lane
            if not m:
                continue
            text = f"{e.args[0]} {name};"
            if m == e.lanes and (m == full or m & (m - 1) == 0):
                out.append(Event("text", (text,), m, e.instr))
            else:
                out.append(Event("text", (f"if {lane_condition(m)} {{ {text} }}",), full, e.instr))
        return out


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def grid_skeleton(mod: Module, fn: Function, launch: Launch, source_names: bool = False) -> Skeleton:
    """The skeleton of the whole grid: one per CTA over the same objects, their roles merged."""
    events, gcomm = run_grid(mod, fn, launch)
    glob = _Global(mod, fn, launch, events, gcomm)
    nwarps = (launch.threads + WARP - 1) // WARP
    conv: dict[tuple[int, int], list[Event]] = {}
    for (ci, w), evs in events.items():
        full = (1 << max(0, min(WARP, launch.threads - WARP * w))) - 1
        conv[(ci, w)] = [x for e in evs for x in glob.convert(e, full)]
    ctas = sorted({ci for ci, _w in conv})
    per: list[Skeleton] = [build(mod, fn.name, replace(launch, cluster_index=ci),
                                 {(0, w): conv[(ci, w)] for w in range(nwarps) if (ci, w) in conv},
                                 every=dict(conv.items()), source_names=source_names) for ci in ctas]
    per_warp: dict[int, list[tuple[Stmt, ...]]] = {w: [() for _ in ctas] for w in range(nwarps)}
    for ci, sk in enumerate(per):
        for r in sk.roles:
            if any(s.only for s in r.per_cta[0]):
                raise PtxError(mod.path, fn.line, 1, f"--whole-grid: role {r.name} of CTA {ci} is a warpgroup "
                               "whose warps differ; a grid of such CTAs is not extracted yet")
            for w in range(r.first_warp, r.first_warp + r.count):
                per_warp[w][ci] = r.per_cta[0]
    roles: list[Role] = []
    w = 0
    while w < nwarps:
        key = per_warp[w]
        if not any(key):
            w += 1
            continue
        n = 1
        while w + n < nwarps and [_texts(b) for b in per_warp[w + n]] == [_texts(b) for b in key]:
            n += 1
        roles.append(Role(f"w{w}" if n == 1 else f"w{w}_{w + n - 1}", w, n, tuple(key)))
        w += n
    decls = [f"  grid {len(ctas)};"]
    if launch.grid_launch:
        decls.append(f"  launch {launch.grid_launch};")
    decls += glob.flag_decls + glob.global_decls
    notes = tuple(dict.fromkeys(n for sk in per for n in sk.notes))
    notes += (f"every CTA of the grid ({len(ctas)}) is this protocol's, each executed; they meet through "
              "global memory",)
    return replace(per[0], roles=tuple(roles), notes=notes, grid_decls=tuple(decls))


def _texts(body: tuple[Stmt, ...]) -> list[tuple[str, bool]]:
    return [(s.text, s.elect) for s in body]
