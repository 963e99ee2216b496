"""Threads that communicate through global memory, which the checker does not model: found and refused.

The model knows shared memory (its races, its barriers and async-proxy
completions). Global memory is data to it: a kernel's loads of inputs and
stores of outputs are skipped. That is sound only while no thread of the kernel
reads what another thread of it writes there. A stream-K fixup that reads its
peers' partial sums without waiting for them (or a warp that reads a buffer
another warp stored, ordered by a `bar.sync` or not ordered at all) would
otherwise extract to a protocol with no trace of that communication and check
safe. So extraction records every global-memory access the threads it runs
make, and refuses, at the read, when the bytes a thread reads may be bytes a
*different* thread writes (another lane, warp, CTA or cluster), naming the
write.

Where an access is:

* its bytes, when the executor knows its address (a bound pointer
  parameter): two such accesses overlap when their bytes do;
* otherwise the pointer it goes through: the kernel parameter (and byte
  offset, for a pointer field of a by-value Params struct) its address derives
  from, found by a flow-insensitive def-use walk over the whole function
  (`PointerFlow`), or the tensor map of a TMA copy. Two accesses through the
  same pointer may overlap (the offsets are not compared); accesses through
  different pointer parameters are taken to be different buffers (the
  no-aliasing reading of docs/extract.md: a kernel passed one buffer as two
  parameters is extracted with its pointers bound, `--param`, so that the
  addresses decide);
* an address derived from no parameter (a pointer loaded from memory, passed
  through a shuffle) may be anything: it may overlap every access.

Writes that no thread reads (outputs) and reads of bytes no other thread
writes (inputs, alpha/beta, each thread's own read-back) are not
communication. Two writes of the same bytes are not either: no thread of the
kernel observes which one lands last. An `atom` reads and writes, unless
nothing reads the old value it returns.

Accesses the executor does not execute -- those in a region it skips (a
branch decided by data) or under a guard it does not know -- are recorded for
the lanes that reach them, at their address when the region does not change
its register, else with their pointer only. When some clusters of the grid
are not run (no `--grid`, or more clusters than are compared), their threads'
accesses are not known: if no branch or guard depends on which CTA or cluster
runs (`identity_taint`), each of them repeats the accesses of the cluster run,
at the same address where that does not depend on it either; otherwise every
global-memory instruction of the kernel counts as executed by a thread of
another cluster, with its pointer only.

Memory declared with `--zero-global` is outside this rule: the user states its
reads see zero, and the executor refuses a write to bytes whose zero decided
synchronization (run_cluster).

Loads and atomics with acquire semantics (`.acquire`, `.acq_rel`) of memory
other than shared memory are refused wherever they are in the kernel: an
acquire exists only to synchronize with another thread's release, which is not
modelled (docs/model.md, "Kernels read from PTX").
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from .access import shared_target
from .cfg import Cfg
from .launch import (
    LOCAL_GEN,
    PARAM_BASE,
    Launch,
    Memory,
    Refusal,
    _access_bytes,
    _params,
    lanes_of,
    source_of,
    vector_count,
)
from .parse import Addr, Imm, Instr, Module, Name, NegName, Operand, Pair, PtxError, TensorAddr
from .spin import result_unused
from .warp import WarpState

ANY = ("any",)
SHARED = ("shared",)  # not global memory: shared, local, constant or parameter memory
Key = tuple[object, ...]
# a thread: (cluster index, CTA rank, warp, lane); None for a thread of a cluster that was not run
Thread = tuple[int, int, int, int] | None


def _size(mods: tuple[str, ...]) -> int:
    return _access_bytes(mods) * vector_count(mods)


def _is_64(ins: Instr) -> bool:
    return any(m in ("u64", "s64", "b64") for m in ins.mods)


class PointerFlow:
    """For each register, the pointers its value may derive from, over the whole function.

    Keys: ("p", param, off) a pointer loaded from parameter `param` at byte `off`; ("pa", param, off) the
    address of a parameter (+off; None when not constant), through which pointer fields and tensor maps
    are reached; SHARED an address of shared, local or constant memory; ANY a value loaded from memory
    that may be a pointer. Products, shifts and 32-bit loads are offsets, not pointers.
    """

    def __init__(self, cfg: Cfg, params: tuple[str, ...], symbols: frozenset[str]):
        self.keys: dict[str, set[Key]] = {}
        self.params = params
        changed = True
        body = cfg.body
        while changed:
            changed = False
            for ins in body:
                dst = ins.operands[0] if ins.operands else None
                if not isinstance(dst, Name) or ins.base in ("st", "red", "bra", "bar", "barrier", "mbarrier"):
                    continue
                got = self._keys(ins, symbols)
                have = self.keys.setdefault(dst.name, set())
                if not got <= have:
                    have |= got
                    changed = True

    def of(self, op: Operand) -> set[Key]:
        if isinstance(op, Addr | TensorAddr):
            return self._plus(self.keys.get(op.base, set()) if op.base else set(),
                              op.offset if isinstance(op, Addr) else 0)
        if isinstance(op, Name):
            if op.name in self.params:
                return {("pa", op.name, 0)}
            return set(self.keys.get(op.name, set()))
        return set()

    @staticmethod
    def _plus(keys: set[Key], off: int | None) -> set[Key]:
        out: set[Key] = set()
        for k in keys:
            if k[0] == "pa":
                k = ("pa", k[1], None if off is None or k[2] is None else k[2] + off)  # type: ignore[operator]
            out.add(k)
        return out

    def _keys(self, ins: Instr, symbols: frozenset[str]) -> set[Key]:
        base, ops, mods = ins.base, ins.operands, ins.mods
        if base in ("ld", "ldu"):
            src = ops[1] if len(ops) > 1 else None
            if isinstance(src, Addr) and src.base in self.params:
                return {("p", src.base, src.offset)} if _is_64(ins) else set()
            if not _is_64(ins):
                return set()
            fields = {("p", k[1], k[2]) for k in (self.of(src) if src else set()) if k[0] == "pa"}
            return fields or {ANY}
        if base in ("mov", "cvta", "cvt"):
            src = ops[1] if len(ops) > 1 else None
            if isinstance(src, Name) and src.name in symbols:
                return {SHARED}
            if base == "cvta" and any(m in ("shared", "local", "const") for m in mods) and "to" not in mods:
                return {SHARED}
            return self.of(src) if src is not None else set()
        if base in ("add", "sub", "and", "or", "xor", "selp", "min", "max"):
            used = ops[1:3] if base != "sub" else ops[1:2]
            out: set[Key] = set()
            for j, o in enumerate(used):
                other = used[1 - j] if len(used) == 2 else None
                off = other.value if isinstance(other, Imm) and base == "add" else None
                out |= self._plus(self.of(o), off)
            return out
        if base == "mad" and len(ops) > 3:
            return self._plus(self.of(ops[3]), None)
        if base in ("atom", "shfl", "prmt") and _is_64(ins):
            return {ANY}
        return set()


_FLOWS: weakref.WeakKeyDictionary[Cfg, PointerFlow] = weakref.WeakKeyDictionary()


def pointer_flow(run: WarpState) -> PointerFlow:
    got = _FLOWS.get(run.cfg)
    if got is None:
        symbols = frozenset((*run.mem.shared, *run.mem.local, *run.mem.const))
        got = _FLOWS[run.cfg] = PointerFlow(run.cfg, tuple(run.param_names), symbols)
    return got


def global_access(ins: Instr) -> tuple[bool, bool, Operand] | None:
    """(reads, writes, address operand) of an instruction that may access global memory, else None."""
    base, mods, ops = ins.base, ins.mods, ins.operands
    if base in ("ld", "ldu", "st", "atom", "red"):
        if any(m.startswith("shared") or m in ("param", "const", "local") for m in mods) or len(ops) < 2:
            return None
        if base in ("ld", "ldu"):
            return True, False, ops[1]
        if base == "atom":
            return True, True, ops[1]
        return False, True, ops[0]
    if ins.opcode.startswith("cp.async.bulk") and "prefetch" not in mods and len(ops) >= 2:
        rest = mods[2:]
        if "tensor" in mods:
            rest = mods[4:]
        if len(rest) >= 2 and rest[0] == "global":
            return False, True, ops[0]
        if len(rest) >= 2 and rest[1] == "global":
            return True, False, ops[1]
    return None


def is_acquire(ins: Instr) -> bool:
    """A load or atomic with acquire semantics of memory that may not be shared memory."""
    if ins.base not in ("ld", "ldu", "atom"):
        return False
    if not any(m in ("acquire", "acq_rel") for m in ins.mods):
        return False
    return not any(m.startswith("shared") for m in ins.mods)


_IDENTITY = ("%ctaid.", "%clusterid.", "%smid", "%nsmid", "%gridid")
_SMEM = "<local memory>"


def _names(op: Operand) -> set[str]:
    if isinstance(op, Name | NegName):
        return {op.name}
    if isinstance(op, Pair):
        return {op.first, op.second}
    if isinstance(op, Addr | TensorAddr):
        return {op.base} if op.base else set()
    return set().union(*(_names(x) for x in getattr(op, "items", ())), set())


def identity_taint(cfg: Cfg) -> set[str]:
    """The registers whose known value may depend on which CTA or cluster runs (`%ctaid`, `%clusterid`, ...),
    through any computation and through local memory, over the whole function (flow-insensitive). Loads of
    shared and global memory give values the executor does not know in any cluster (a `--zero-global` buffer
    reads zero in all): they carry no taint."""
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for ins in cfg.body:
            ops = ins.operands
            if not ops:
                continue
            mods = ins.mods
            unknown_load = ins.base in ("ld", "ldu", "atom") and any(
                m == "global" or m.startswith("shared") for m in mods)
            if ins.base in ("st", "red"):
                if any(m == "global" or m.startswith("shared") for m in mods):
                    continue
                used, dst = set().union(*(_names(o) for o in ops)), {_SMEM}
            else:
                used = set() if unknown_load else set().union(*(_names(o) for o in ops[1:]), set())
                if ins.base in ("ld", "ldu") and not unknown_load and not any(m in ("param", "const") for m in mods):
                    used.add(_SMEM)  # local (or generic) memory: what a tainted store put there
                dst = _names(ops[0])
            if ins.guard:
                used.add(ins.guard)
            if any(u in tainted or u.startswith(_IDENTITY) for u in used) and not dst <= tainted:
                tainted |= dst
                changed = True
    return tainted


def _result_used(run: WarpState, ins: Instr) -> bool:
    """Whether the value an `atom` returns may be read (a load's always is: it is the point of it). An atom
    whose old value nothing reads (`atomicAdd(&hist[i], 1)`, compiled to `atom` with a dead result) only
    writes: no thread learns anything from it."""
    if ins.base != "atom":
        return True
    idx = _positions(run.cfg).get(id(ins))
    return idx is None or not result_unused(run, idx, ins.operands[0])


_POS: weakref.WeakKeyDictionary[Cfg, dict[int, int]] = weakref.WeakKeyDictionary()


def _positions(cfg: Cfg) -> dict[int, int]:
    got = _POS.get(cfg)
    if got is None:
        got = _POS[cfg] = {id(ins): i for i, ins in enumerate(cfg.body)}
    return got


@dataclass
class _Access:
    ins: Instr
    thread: Thread
    reads: bool
    writes: bool
    keys: frozenset[Key]
    span: tuple[int, int] | None  # absolute bytes [lo, hi) when the address is known
    who: str


def _keys_meet(a: frozenset[Key], b: frozenset[Key]) -> bool:
    if ANY in a or ANY in b:
        return True
    for x in a:
        for y in b:
            if x[0] == y[0] and x[1] == y[1] and (x[2] is None or y[2] is None or x[2] == y[2]):
                return True
    return False


keys_meet = _keys_meet  # (ptx/tensormaps.py: a store that may write a tensor map a copy reads)


def _overlap(a: _Access, b: _Access) -> bool:
    if a.span is not None and b.span is not None:
        return a.span[0] < b.span[1] and b.span[0] < a.span[1]
    return _keys_meet(a.keys, b.keys)


@dataclass
class GlobalAccesses:
    """The global-memory accesses of every thread extraction runs, over all the clusters it runs."""

    launch: Launch
    accesses: list[_Access] = field(default_factory=list)
    clusters: set[int] = field(default_factory=set)
    seen: set[tuple[int, int]] = field(default_factory=set)  # (line, column) recorded as a global access
    elsewhere: set[tuple[int, int]] = field(default_factory=set)  # executed at an address not in global memory
    mod: Module | None = None
    run0: WarpState | None = None
    _index: dict[tuple[object, ...], int] = field(default_factory=dict)

    # ---- recording -----------------------------------------------------------------------------------

    def start(self, run: WarpState) -> None:
        self.clusters.add(run.launch.cluster_index)
        if self.run0 is None:
            self.run0, self.mod = run, run.mod

    def _keys(self, run: WarpState, ins: Instr, op: Operand) -> frozenset[Key]:
        if ins.opcode.startswith("cp.async.bulk.tensor") and isinstance(op, TensorAddr):
            where = run.tensor_map(run.read(Name(op.base), 0))
            if where is not None:
                return frozenset({("tmap", where[0], where[2])})
            return frozenset({("tmap", k[1], k[2]) if k[0] == "pa" else k for k in pointer_flow(run).of(op)}
                             or {ANY})
        keys = pointer_flow(run).of(op)
        if keys and all(k[0] == "pa" for k in keys):
            return frozenset({SHARED})  # the kernel's parameters themselves, read through a generic address
        keys = {k for k in keys if k[0] != "pa"}
        if not keys:
            return frozenset({ANY})
        return frozenset(keys)

    def note(self, run: WarpState, ins: Instr, lanes: int, placed: bool = True) -> None:
        """Record `ins` executed (placed) or possibly executed with an unknown address (placed False)."""
        acc = global_access(ins)
        if acc is None:
            return
        reads, writes, op = acc
        reads = reads and _result_used(run, ins)
        keys = self._keys(run, ins, op)
        if SHARED in keys and len(keys) == 1:
            return
        if keys <= self._zero(run):
            return
        size = _size(ins.mods)
        for lane in lanes_of(lanes):
            span = None
            if placed and not isinstance(op, TensorAddr) and not ins.opcode.startswith("cp."):
                a = run.address(op, lane)
                if isinstance(a, int):
                    if shared_target(a, "generic", run.rank) is not None or a >= LOCAL_GEN or (
                            PARAM_BASE <= a < PARAM_BASE + (len(run.param_names) << 32)):
                        self.elsewhere.add((ins.line, ins.column))
                        continue  # shared, local, constant or parameter memory through a generic address
                    if run._in_zero(a):
                        continue
                    span = (a, a + size)
            thread = (run.launch.cluster_index, run.rank, run.warp, lane)
            key = (ins.line, ins.column, thread, span, keys)
            if key in self._index:
                continue
            self._index[key] = len(self.accesses)
            self.seen.add((ins.line, ins.column))
            who = f"warp {run.warp} of CTA {run.rank}" + (f" of cluster {thread[0]}" if thread[0] else "")
            self.accesses.append(_Access(ins, thread, reads, writes, keys, span, who))

    def note_region(self, run: WarpState, region: list[Instr], lanes: int) -> None:
        """The accesses of a region the executor skips: an address whose base register the region never
        writes has the value it has now; any other is not known."""
        written: set[str] = set()
        for ins in region:
            if ins.operands and ins.base not in ("st", "red"):
                dst = ins.operands[0]
                written |= {dst.name} if isinstance(dst, Name) else {x.name for x in getattr(dst, "items", ())
                                                                      if isinstance(x, Name)}
                if isinstance(dst, Pair):
                    written |= {dst.first, dst.second}
        for ins in region:
            acc = global_access(ins)
            op = acc[2] if acc else None
            fixed = isinstance(op, Addr) and (op.base is None or op.base not in written)
            self.note(run, ins, lanes, placed=fixed)

    # ---- the checks ----------------------------------------------------------------------------------

    def check(self, all_clusters: bool, executed: bool = True) -> None:
        """Refuse the first read that may see another thread's write; then any acquire in the kernel.
        `executed` False: the accesses were not recorded (symbolic extraction), every one of the kernel's
        counts, as made by any thread."""
        run = self.run0
        if run is None:
            return
        accesses = list(self.accesses)
        taint = identity_taint(run.cfg) if not all_clusters else set()
        if executed and not all_clusters and not any(ins.guard in taint for ins in run.cfg.body if ins.guard):
            # no branch or guard depends on which cluster runs: every cluster executes what this one executed,
            # at the same addresses where they do not depend on it either
            for a in self.accesses:
                acc = global_access(a.ins)
                moved = acc is not None and bool(_names(acc[2]) & taint)
                accesses.append(_Access(a.ins, None, a.reads, a.writes, a.keys, None if moved else a.span,
                                        "a thread of a cluster not run"))
        elif not all_clusters or not executed:  # threads not run may execute any global access of the kernel
            ran: dict[int, set[Key]] = {}
            for a in self.accesses:
                ran.setdefault(id(a.ins), set()).update(a.keys)
            for ins in run.cfg.body:
                acc = global_access(ins)
                if acc is None:
                    continue
                keys = frozenset(ran[id(ins)]) if id(ins) in ran else self._keys(run, ins, acc[2])
                if keys == frozenset({SHARED}) or keys <= self._zero(run):
                    continue
                reads = acc[0] and _result_used(run, ins)
                accesses.append(_Access(ins, None, reads, acc[1], keys, None, "a thread of a cluster not run"))
        self._pairs(accesses)
        for ins in run.cfg.body:
            if is_acquire(ins) and not self._only_shared(run, ins):
                raise self._at(ins, f"cannot extract: `{ins.opcode}` has acquire semantics on memory that is not "
                               "shared memory: it exists only to synchronize with another thread's release "
                               "through global memory, which the checker does not model yet")

    @staticmethod
    def _zero(run: WarpState) -> frozenset[Key]:
        names = [run.param_names[int(z)] if z.isdigit() and int(z) < len(run.param_names) else z
                 for z in run.launch.zero_global]
        return frozenset(("p", z, o) for z in names for o in (0, None))

    def _pairs(self, accesses: list[_Access]) -> None:
        """A read and a write of bytes that may overlap, by different threads: refused at the read."""
        placed = [a for a in accesses if a.span is not None]
        # placed against placed: a sweep over the byte ranges
        events = sorted(placed, key=lambda a: a.span[0])  # type: ignore[index]
        active: list[_Access] = []
        for a in events:
            lo = a.span[0]  # type: ignore[index]
            active = [b for b in active if b.span[1] > lo]  # type: ignore[index]
            for b in active:
                if b.thread != a.thread and ((a.reads and b.writes) or (a.writes and b.reads)):
                    r, w = (a, b) if a.reads and b.writes else (b, a)
                    raise self._refusal(r, w)
            active.append(a)
        # anything against an access with no address, grouped by instruction and pointer
        groups: dict[tuple[int, frozenset[Key], bool], list[_Access]] = {}
        for a in accesses:
            groups.setdefault((id(a.ins), a.keys, a.span is None), []).append(a)
        loose = [g for k, g in groups.items() if k[2]]
        for g in loose:
            for h in groups.values():
                u, v = g[0], h[0]
                if not _keys_meet(u.keys, v.keys):
                    continue
                for r, w in ((g, h), (h, g)):
                    if not (r[0].reads and w[0].writes):
                        continue
                    threads = {a.thread for a in r} | {a.thread for a in w}
                    if len(threads) > 1 or None in threads:
                        rr = next(a for a in r if any(b.thread != a.thread or a.thread is None for b in w))
                        ww = next(b for b in w if b.thread != rr.thread or b.thread is None)
                        raise self._refusal(rr, ww)

    def _only_shared(self, run: WarpState, ins: Instr) -> bool:
        acc = global_access(ins)
        if acc is None:
            return True
        if (ins.line, ins.column) in self.seen:
            return False
        if (ins.line, ins.column) in self.elsewhere:
            return True  # executed, and every address it took was not global memory
        keys = self._keys(run, ins, acc[2])
        return keys == frozenset({SHARED})

    def _where(self, keys: frozenset[Key], span: tuple[int, int] | None) -> str:
        run = self.run0
        assert run is not None
        names = run.param_names
        parts = []
        for k in sorted(keys, key=str):
            if k == ANY:
                parts.append("a pointer loaded from memory or computed")
            elif k[0] == "p":
                n = names.index(k[1]) if k[1] in names else "?"  # type: ignore[arg-type]
                field_ = "" if k[2] in (0, None) else f" byte {k[2]}"
                parts.append(f"param {n}{field_} + offsets")
            elif k[0] == "tmap":
                n = names.index(k[1]) if k[1] in names else "?"  # type: ignore[arg-type]
                parts.append(f"the tensor map at param {n} byte {k[2]}")
        if span is not None:
            parts.append(f"bytes {span[0]:#x}..{span[1] - 1:#x}")
        return ", ".join(parts)

    def _refusal(self, r: _Access, w: _Access) -> PtxError:
        src = f", CUDA {source_of(w.ins)}" if w.ins.src else ""
        first = f"`{w.ins.opcode}` at PTX line {w.ins.line}{src} ({w.who}"
        first += f", lane {w.thread[3]})" if w.thread is not None else ")"
        lane = f", lane {r.thread[3]}" if r.thread is not None else ""
        span = r.span if w.span is not None else None
        why = (f"cannot extract ({r.who}{lane}): threads communicate through global memory "
               f"({self._where(r.keys, span)}), which the checker does not model yet: this read may see the "
               f"bytes {first} writes, and nothing the checker models orders the two")
        return self._at(r.ins, why)

    def _at(self, ins: Instr, why: str) -> PtxError:
        mod = self.mod
        assert mod is not None
        note = f"CUDA source: {source_of(ins)}" if ins.src else "no CUDA source line (compile with -lineinfo)"
        return Refusal(mod.path, ins.line, ins.column, why, mod.source_line(ins.line), note)


def all_clusters_run(launch: Launch, ran: set[int]) -> bool:
    """Whether every cluster of the grid ran (without --grid the grid is not known: no)."""
    if launch.grid is None:
        return False
    total = 1
    for g, c in zip(launch.grid, launch.cluster, strict=True):
        total *= max(g // c, 1)
    return ran >= set(range(total))



def check_static(mod: Module, fn: object, launch: Launch) -> None:
    """The rules above for an extraction that does not record accesses (symbolic extraction): every global
    access of the kernel counts, by any thread, with its pointer and no address."""
    cfg = Cfg(fn)  # type: ignore[arg-type]
    run = WarpState(mod, fn, cfg, Memory(mod, fn, launch), launch, 0, (0, 0, 0), 0,  # type: ignore[arg-type]
                    _params(fn, launch))  # type: ignore[arg-type]
    gcomm = GlobalAccesses(launch)
    gcomm.start(run)
    gcomm.check(False, executed=False)
