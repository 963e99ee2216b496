"""The objects a step of one CTA touches, for the persistent set of one CTA's steps (cta_local.py): which
operations are of the executing CTA's own objects (``local_op``), their keys (``op_keys``), and a set of
keys asked whether it meets others (``Objects``). Where the operations of a cluster act on other CTAs is
cta_sites.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from ...expr import Context, EvalError, evaluate
from ...semantics.program import OP, Instr

if TYPE_CHECKING:
    from ...semantics.machine import Machine

# operations of the executing CTA's own shared memory and barriers, whatever their operands
_OWN_BARRIER_OPS = (ir.MbarInit, ir.MbarInval, ir.MbarWait, ir.MbarTestWait, ir.MbarProbe, ir.CpAsyncArrive,
                    ir.BarSync, ir.BarArrive, ir.Syncwarp, ir.GroupCommit, ir.GroupWait)


def reaches_peer(op: object) -> bool:
    """Can this operation touch another CTA's objects (shared memory, barriers, tensor memory)? A
    remote access or arrive, a multicast or 2-SM copy, commit, mma or allocation, a cluster-barrier
    operation, a proxy fence over the cluster's shared memory."""
    if isinstance(op, ir.ClusterArrive | ir.ClusterWait):
        return True
    if getattr(op, "remote", None) is not None or getattr(op, "multicast", None) is not None:
        return True
    if getattr(op, "cta_group", 1) != 1:
        return True
    return isinstance(op, ir.Fence) and op.space == "shared::cluster"


def local_op(machine: Machine, ins: Instr) -> bool:
    """Does this instruction touch only the executing CTA's own objects? Anything not known to be is
    not (module docstring)."""
    if ins.kind != OP:
        return False
    op = ins.op
    if reaches_peer(op):
        return False
    if isinstance(op, _OWN_BARRIER_OPS):
        return True
    if isinstance(op, ir.MbarArrive | ir.MbarTx):
        return op.remote is None
    if isinstance(op, ir.Access | ir.WgmmaRead | ir.TmaStore | ir.CpAsync):
        return machine.protocol.buffer(op.buf.name).space == "shared" and getattr(op, "remote", None) is None
    if isinstance(op, ir.TmaLoad):
        return (machine.protocol.buffer(op.buf.name).space == "shared" and op.tmap is None and not op.clc)
    if isinstance(op, ir.Fence):
        return op.kind == "mbarrier_init" or op.space == "shared::cta"
    if isinstance(op, ir.ThreadFence):
        return op.scope == "cta" and op.sem == "acq_rel"
    # a thread's tensor-memory loads and stores of its own CTA, their waits and the fences around a thread
    # synchronization (families/tcgen05.py: records of the CTA's tensor memory, the thread's own bits)
    return isinstance(op, ir.TmemAccess | ir.TcWait | ir.TcFence)


# An object of a CTA that a step may touch: (kind, name, index), index None for every element; ANY for an
# operation whose objects are not worked out here (it touches everything).
Key = tuple[str, str, "int | None"]
ANY: Key = ("*", "", None)
# An exit: it may complete the open generation of an all-thread named barrier of its CTA (lifecycle.py
# ``_exit``), so it touches those that are open or that a process of the CTA may still arrive at (Objects)
EXIT: Key = ("exit", "", None)


def _index(expr: ir.Expr | None, ctx: Context) -> int | None:
    """An index evaluated in the process's context alone; None where it reads a loop or `let` variable."""
    if expr is None:
        return 0
    try:
        return evaluate(expr, {}, ctx)
    except EvalError:
        return None


def _ref(kind: str, ref: ir.Ref, ctx: Context) -> Key:
    return (kind, ref.name, None if ref.every else _index(ref.index, ctx))


def op_keys(machine: Machine, p: int, op: object) -> frozenset[Key]:
    """The objects of process p's CTA that this operation touches (over-approximated; ANY where not
    known). A fence, thread fence, flag operation or `grid.sync` touches none: what it changes of the
    CTA is its own process's knowledge (release, acquire and fence bits), or objects of the grid."""
    ctx = machine.ctx[p]
    if isinstance(op, ir.Access | ir.WgmmaRead | ir.TmaStore | ir.CpAsync):
        return frozenset({_ref("buf", op.buf, ctx)})
    if isinstance(op, ir.TmaLoad):
        return frozenset({_ref("buf", op.buf, ctx), _ref("mb", op.bar, ctx)})
    if isinstance(op, ir.MbarInit | ir.MbarInval | ir.MbarWait | ir.MbarTestWait | ir.MbarProbe | ir.MbarArrive
                  | ir.MbarTx | ir.CpAsyncArrive):
        if machine.protocol.mbarrier(op.bar.name).storage is not None:
            return frozenset({ANY})  # its bytes lie in a buffer (families/storage.py)
        return frozenset({_ref("mb", op.bar, ctx)})
    if isinstance(op, ir.BarSync | ir.BarArrive):
        bar_id = _index(op.bar_id, ctx)
        return frozenset({("nb", "", bar_id)})
    if isinstance(op, ir.Syncwarp):
        return frozenset({("warp", "", machine.procs[p].warp)})
    if isinstance(op, ir.GroupCommit | ir.GroupWait):
        return machine.__dict__.setdefault("_cta_local_async", {}).get(p) or _async_buffers(machine, p)
    if isinstance(op, ir.Fence):
        return frozenset({ANY}) if op.kind == "mbarrier_init" else frozenset()
    if isinstance(op, ir.TmemAccess):
        return frozenset({_ref("tmem", op.region, ctx)})
    if isinstance(op, ir.TcWait):
        return frozenset({("tmem", "*", None)})  # the thread's loads or stores of any region
    if isinstance(op, ir.TcFence):
        return frozenset()  # the thread's own knowledge bits of tensor-memory records
    if isinstance(op, ir.ThreadFence | ir.FlagOp | ir.GridSync | ir.TensormapReplace | ir.TensormapFence):
        return frozenset()
    return frozenset({ANY})


def _async_buffers(machine: Machine, p: int) -> frozenset[Key]:
    """The buffers whose records a group commit or wait of process p may change: those its program reads
    or writes asynchronously (its groups' reads and copies)."""
    out = frozenset(_ref("buf", ins.op.buf, machine.ctx[p]) for ins in machine.programs[p].code
                    if ins.kind == OP and isinstance(ins.op, ir.WgmmaRead | ir.TmaStore | ir.CpAsync | ir.TmaLoad))
    machine.__dict__.setdefault("_cta_local_async", {})[p] = out or frozenset({("buf", "", -1)})
    return machine.__dict__["_cta_local_async"][p]


# kinds of the keys that stand for no object of the model's state (a CTA's liveness, the cluster barrier's
# count, a process's queues of copies and commits in flight: cta_sites.py): an operation whose objects are not
# worked out (ANY) touches none of them
PSEUDO = frozenset({"alive", "cluster", "copyq", "cpq", "tcq"})


Grouped = tuple[bool, bool, bool, frozenset[str], tuple[tuple[tuple[str, str], frozenset[int | None]], ...]]
_GROUPED: dict[frozenset[Key], Grouped] = {}  # a set of keys -> its grouped form, bounded by _GROUPED_KEPT
_GROUPED_KEPT = 1 << 14


def _grouped(keys: frozenset[Key]) -> Grouped:
    """What Objects.add records of a set of keys: whether it holds EXIT, whether it holds ANY, whether
    some key is of an object of the state (not PSEUDO), the kinds with a key named "*", and the indices
    of every other (kind, name). A function of the set alone, remembered (the table starts over when
    full, so what it holds changes the work only)."""
    exit_ = any_ = real = False
    every: set[str] = set()
    by_name: dict[tuple[str, str], set[int | None]] = {}
    for kind, name, i in keys:
        if kind == "exit":
            exit_ = True
            continue
        if kind not in PSEUDO:
            real = True
        if kind == "*":
            any_ = True
        elif name == "*":
            every.add(kind)
        else:
            by_name.setdefault((kind, name), set()).add(i)
    group = (exit_, any_, real, frozenset(every), tuple((n, frozenset(ix)) for n, ix in by_name.items()))
    if len(_GROUPED) >= _GROUPED_KEPT:
        _GROUPED.clear()
    _GROUPED[keys] = group
    return group


class Objects:
    """A set of Keys, asked whether it meets another key (an index None meets every index, a name "*" every
    name of its kind). ``exits``: what an exit touches in the state at hand (EXIT stands for them)."""

    def __init__(self, exits: frozenset[Key] = frozenset()) -> None:
        self.any = False
        self.exits = exits
        self.by_name: dict[tuple[str, str], set[int | None]] = {}
        self.every: set[str] = set()  # kinds with a key named "*"
        self.real = False  # some key of an object of the state (not PSEUDO) is in the set

    def add(self, keys: frozenset[Key]) -> None:
        """Add ``keys``, taken in their grouped form (_grouped): the sets added are mostly the same few
        objects of the reduction's tables, over and over (cta_local.py adds a dozen per split of a CTA),
        and a key-by-key loop was the largest Python-level cost of that rule on the 2-SM GEMM."""
        group = _GROUPED.get(keys)
        if group is None:
            group = _grouped(keys)
        exit_, any_, real, every, by_name = group
        if exit_:
            self.add(self.exits)
        if any_:
            self.any = True
        if real:
            self.real = True
        if every:
            self.every |= every
        mine = self.by_name
        for name, indices in by_name:
            got = mine.get(name)
            if got is None:
                mine[name] = set(indices)
            else:
                got |= indices

    def meets(self, keys: frozenset[Key]) -> bool:
        for kind, name, i in keys:
            if kind == "exit":
                if self.meets(self.exits):
                    return True
                continue
            if kind == "*":
                if self.real:
                    return True
                continue
            if (self.any and kind not in PSEUDO) or kind in self.every:
                return True
            if name == "*":
                if any(k == kind for k, _ in self.by_name):
                    return True
                continue
            got = self.by_name.get((kind, name))
            if got and (i is None or None in got or i in got):
                return True
        return False
