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
  data), two lanes of one warp communicating with no CTA barrier between
  them (the language's warp is one process), a weak access of a flag's word
  other than a plain store of a known value by one lane (`st.weak F, V;`,
  the reset of a "last CTA" counter).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import replace
from itertools import pairwise

from .execute import run_cluster
from .globalcomm import GlobalAccesses, _Access, _keys_meet
from .kept_words import kept_words
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
            owned = [_owner(self.bases, w) for w in ws]
            where = ("at byte " + ", ".join(f"{o[1]:#x}" for o in owned if o) + " of the buffer" if all(owned)
                     else "at address " + ", ".join(f"{w:#x}" for w in ws))
            self.flag_decls.append(f"  flag {name}{f'[{len(ws)}]' if len(ws) > 1 else ''};".ljust(40)
                                   + f"// 32-bit words {where} (0 at launch)")
        # a plain store of a known value to a flag's word by one lane (`*counter = 0;`): `st.weak F, V;`, whose
        # order with the flag's other accesses the model checks (semantics/families/flag_weak.py)
        self.weak: set[int] = set()
        unfit: set[int] = set()
        for evs in events.values():
            for e in evs:
                if e.kind == "gdata" and e.args[0] == "write" and any(
                        a < w + 4 and w < b for _l, _r, a, b in e.footprint for w in words):
                    fit = len(e.args) == 2 and len(e.footprint) == 1 and e.footprint[0][2] in words \
                        and e.footprint[0][3] == e.footprint[0][2] + 4
                    (self.weak if fit else unfit).add(id(e.instr))
        self.weak -= unfit
        ran = {(ci, e.instr.line, e.instr.column, w, e.footprint[0][0]) for (ci, w), evs in events.items()
               for e in evs if e.kind == "gdata" and id(e.instr) in self.weak}
        for a in gcomm.accesses:
            t = _thread(a)
            if id(a.ins) in self.weak and (t is None or (t[0], a.ins.line, a.ins.column, t[1], t[2]) not in ran):
                raise gcomm._at(a.ins, f"cannot extract ({a.who}): this store of a flag's word in global memory "
                                "may run where the executor did not run it (under a branch or guard decided by "
                                "data): the protocol would miss a write of the flag")
        data = [a for a in gcomm.accesses if id(a.ins) not in flag_ins and id(a.ins) not in self.weak]
        for a in data:
            if a.span is not None and any(a.span[0] < w + 4 and w < a.span[1] for w in words):
                raise gcomm._at(a.ins, f"cannot extract ({a.who}): a weak access of a flag's word in global "
                                "memory (the language touches flags only with its flag operations)")
        self._loose(gcomm, data)
        marked = self._pairs(gcomm, data, events)
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
        self.kept_words = kept_words(mod, fn, launch, events, gcomm)
        for off, name in self.kept_words.items():
            self.flag_decls.append(f"  flag {name}[{_group(mod, fn, launch)}];".ljust(40)
                                   + f"// the __shared__ word at byte {off:#x} of each CTA: a value read from a flag")

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
    def _pairs(gcomm: GlobalAccesses, data: list[_Access],
               events: dict[tuple[int, int], list[Event]]) -> list[_Access]:
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
                if ta is not None and tb is not None and ta[:2] == tb[:2] and not _barrier_between(
                        events.get(ta[:2], []), a, b, ta[2], tb[2]):
                    r, w = (a, b) if a.reads else (b, a)
                    raise gcomm._at(r.ins, f"cannot extract ({r.who}, lane {ta[2] if r is a else tb[2]}): lanes "
                                    f"of one warp communicate through global memory (with `{w.ins.opcode}` at "
                                    f"PTX line {w.ins.line}); the language's warp is one process")
                marked[id(a)], marked[id(b)] = a, b
            active.append(a)
        return list(marked.values())

    def _chunks(self, events: dict[tuple[int, int], list[Event]]) -> None:
        """The elements of each region: the bytes that the same warps touch in the same steps.

        A warp's step is the count of its other statements before an access (`phase`): two accesses of one
        warp with no statement between them are ordered alike with every other thread's. Bytes with the
        same set of (CTA, warp, read/write, step) are one element (a stripe of a reduction workspace that
        one warp stores in sixteen vector stores is one); so two accesses meet in an element only if they
        share a byte of it, and the races the model finds on the elements are those on the bytes."""
        self.phase: dict[int, int] = {}
        cuts: set[int] = set()
        touches: list[tuple[int, int, tuple[int, int, str, int]]] = []
        for (ci, w), evs in events.items():
            step = 0
            for e in evs:
                if e.kind != "gdata":
                    step += 1
                    continue
                self.phase[id(e)] = step
                for _lane, _r, a, b in e.footprint:
                    for lo, hi in self.regions:
                        if a < hi and lo < b:
                            s, t = max(a, lo), min(b, hi)
                            cuts |= {s, t}
                            touches.append((s, t, (ci, w, str(e.args[0]), step)))
        points = sorted(cuts)
        sig: dict[int, set[tuple[int, int, str, int]]] = {p: set() for p in points}
        for s, t, who in touches:  # every elementary piece [points[i], points[i+1]) inside [s, t)
            i = bisect_left(points, s)
            while i < len(points) and points[i] < t:
                sig[points[i]].add(who)
                i += 1
        self.pieces: list[tuple[int, int, int]] = []  # (start, end, element)
        self.global_decls: list[str] = []
        self.names: list[str] = []
        for lo, hi in self.regions:
            own = _owner(self.bases, lo)
            base = f"g{own[0]}" if own else "g"
            while base in self.names or any(n.startswith(base + "[") for n in self.names):
                base += "_"
            classes: dict[frozenset[tuple[int, int, str, int]], int] = {}
            sizes: list[int] = []
            for a, b in pairwise([p for p in points if lo <= p <= hi]):
                key = frozenset(sig[a])
                if not key:
                    continue
                k = classes.setdefault(key, len(classes))
                if k == len(sizes):
                    sizes.append(0)
                sizes[k] += b - a
                self.pieces.append((a, b, len(self.names) + k))
            n = len(classes)
            self.names += [f"{base}[{k}]" if n > 1 else base for k in range(n)]
            where = f"byte {own[1]:#x}" if own else f"address {lo:#x}"
            self.global_decls.append(f"  global {base}{f'[{n}]' if n > 1 else ''} bytes {max(sizes)};".ljust(40)
                                     + f"// {hi - lo} bytes from {where} of the buffer: each element the bytes "
                                     f"the same warps touch in the same steps ({min(sizes)}..{max(sizes)} bytes)")

    def convert(self, e: Event, full: int, cta: int) -> list[Event]:
        if e.kind == "kflag":  # a __shared__ word that holds a value read from a flag (kept.py): its CTA's flag
            return [Event("text", (str(e.args[0]).replace("{S}", f"{self.kept_words[int(e.args[1])]}[{cta}]"),),  # type: ignore[call-overload]
                          e.lanes, e.instr)]
        if e.kind == "gflag":
            return [Event("text", (str(e.args[0]).replace("{F}", self.flags[int(e.args[1])]),),  # type: ignore[call-overload]
                          e.lanes, e.instr)]
        if e.kind != "gdata":
            return [e]
        if id(e.instr) in self.weak:
            word = e.footprint[0][2]
            return [Event("text", (f"st.weak {self.flags[word]}, {e.args[1]};",), e.lanes, e.instr)]
        lanes: dict[int, int] = {}
        for lane, _r, a, b in e.footprint:
            j = bisect_right(self.pieces, (a, 1 << 62, 0)) - 1
            j = max(j, 0)
            while j < len(self.pieces) and self.pieces[j][0] < b:
                s, t, k = self.pieces[j]
                if a < t and s < b:
                    lanes[k] = lanes.get(k, 0) | 1 << lane
                j += 1
        out = []
        for k, m in sorted(lanes.items()):
            text = f"{e.args[0]} {self.names[k]};"
            if m == e.lanes and (m == full or m & (m - 1) == 0):
                out.append(Event("text", (text, "gdata"), m, e.instr))
            else:
                out.append(Event("text", (f"if {lane_condition(m)} {{ {text} }}", "gdata"), full, e.instr))
        return out


def _barrier_between(evs: list[Event], a: _Access, b: _Access, la: int, lb: int) -> bool:
    """Whether every execution of access ``a`` by lane ``la`` and of ``b`` by lane ``lb`` (two lanes of one
    warp) is separated, in the warp's events, by a CTA barrier or `__syncwarp` both lanes execute: PTX's
    `bar.sync` orders "memory accesses requested by the threads prior to the barrier" for every thread that
    participates, so the lanes' accesses are ordered as the warp's program order (the language's one process)
    orders them. The last CTA of threadFenceReduction reads, in thread 1, the partial its thread 0 stored before
    the `__syncthreads()`."""
    bars = ("bar_sync", "syncwarp")
    both = 1 << la | 1 << lb

    def at(x: _Access, lane: int) -> list[int]:
        return [i for i, e in enumerate(evs) if e.instr is x.ins and e.lanes >> lane & 1]

    pa, pb = at(a, la), at(b, lb)
    if not pa or not pb:
        return False
    fences = [i for i, e in enumerate(evs) if e.kind in bars and e.lanes & both == both]
    return all(any(min(i, j) < f < max(i, j) for f in fences) for i in pa for j in pb)


def _dedupe(evs: list[Event]) -> list[Event]:
    """A data statement that repeats the one just before it (the same element, the same warp, no other
    statement between): one access for the model, whose order with every other thread's is the same. And a
    branch on a value read from a flag (ptx/kept.py) whose arms lost every statement (accesses of bytes no other
    thread touches are dropped): no `if` at all, or no `else`."""
    out: list[Event] = []
    for e in evs:
        if e.kind == "text" and e.args == ("}",) and out and out[-1].kind == "text" and out[-1].instr is e.instr:
            last = str(out[-1].args[0])
            if last == "} else {":
                out.pop()  # an empty else arm
            elif last.startswith("if ") and last.endswith("{"):
                out.pop()  # an if with nothing in it
                continue
        if out and e.kind == "text" and e.args[1:] == ("gdata",) and e.args == out[-1].args \
                and e.lanes == out[-1].lanes:
            continue
        out.append(e)
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
        conv[(ci, w)] = _dedupe([x for e in evs for x in glob.convert(e, full, ci)])
    ctas = sorted({ci for ci, _w in conv})
    per: list[Skeleton] = [build(mod, fn.name, replace(launch, cluster_index=ci),
                                 {(0, w): conv[(ci, w)] for w in range(nwarps) if (ci, w) in conv},
                                 every=dict(conv.items()), source_names=source_names) for ci in ctas]
    shapes = {tuple((r.name, r.first_warp, r.count) for r in sk.roles) for sk in per}
    if len(shapes) == 1:  # every CTA splits its warps into the same roles: each role's body per CTA
        roles = tuple(Role(r.name, r.first_warp, r.count, tuple(sk.roles[i].per_cta[0] for sk in per))
                      for i, r in enumerate(per[0].roles))
        return _grid(per, roles, glob, launch, len(ctas))
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
    return _grid(per, tuple(roles), glob, launch, len(ctas))


def _grid(per: list[Skeleton], roles: tuple[Role, ...], glob: _Global, launch: Launch, n: int) -> Skeleton:
    decls = [f"  grid {n};"]
    if launch.grid_launch:
        decls.append(f"  launch {launch.grid_launch};")
    decls += glob.flag_decls + glob.global_decls
    notes = tuple(dict.fromkeys(n for sk in per for n in sk.notes))
    notes += (f"every CTA of the grid ({n}) is this protocol's, each executed; they meet through global memory",)
    return replace(per[0], roles=roles, notes=notes, grid_decls=tuple(decls))


def _texts(body: tuple[Stmt, ...]) -> list[tuple[str, bool]]:
    return [(s.text, s.elect) for s in body]
