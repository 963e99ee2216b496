"""Bounded model checking with Z3: every interleaving of the protocol at its params, as SMT.

A second, independent way to search the same semantics, for cross-checking the explicit
engine (`--engine bmc`, `tests/test_bmc.py`, `bench/differential.py`).

Why it can be exact. Control flow in a `.sync` body depends only on loop variables and on
who executes it, never on barrier state, so at fixed params every process runs a fixed
sequence of operations (its *events*, unrolled here with the machine's own local control
flow). An execution is an interleaving of prefixes of those sequences with the completions
of the bulk copies they issue. Each step moves one actor (a process or an in-flight copy, one
per destination CTA of a multicast), so every execution has at most D = (number of events) +
(number of copies) steps, and checking every depth up to D is a complete search: "safe" from
this engine is a proof for these params.

The encoding (one Z3 variable per state component per step, `sel_i` the actor of step i):

* mbarriers, indexed per (CTA, name, element) as the machine indexes them: the `rules.Mbar`
  fields as integers, updated by the functions of `semantics.rules` run over Z3 terms
  (`Z3Arith`) — the same definitions the explicit engine runs over Python integers; likewise
  the wait rules and the named-barrier rules (named barriers per CTA and id);
* the cluster barrier: its generation and threads arrived, and each process's arrival token;
* happens-before: the knowledge model of `semantics.state` (every access record, and who
  knows it) stored holder-major: one bit-vector per holder over the records, so a release
  is a bitwise or, a phase completion a copy, a barrier reset a clear. Records are never
  created lazily: every access event (every destination of a copy, every barrier an init
  initializes) owns one record bit, live from when it runs; each CTA's start is a record
  that its own threads know from the beginning (a cluster barrier carries it to the peers);
* each check the machine makes (docs/model.md) becomes a condition on the step that makes it.

Interchangeable warps (those `semantics.symmetry` pairs up) are reduced by a symmetry
constraint: in a state that swapping two of them maps onto itself, the one with the larger index
does not move (`Encoding.symmetric_pairs`, docs/engines.md gives the argument).

At depth i the solver is asked for a path of i valid steps that ends in a deadlock or whose
next step breaks a rule; the first depth that answers yes gives a shortest counterexample,
which is replayed with `Machine.step` (so it is shown in the explicit engine's trace format,
and a path the machine does not confirm is reported, never hidden). Solver calls run under
a fixed seed under the check's Z3 resource budget (`--rlimit`, deterministic: the units every
query spends are charged to it), with the wall clock and memory limits (`--timeout`,
`--max-memory`) checked while the encoding is built and passed to Z3 for its own work; `unknown`
or any budget that runs out ends inconclusive (``syncverify.budget``).

Scope: clusters of any size. mbarrier init/arrive (all forms)/expect_tx/complete_tx/wait, the
arrive and tx forms also on a peer CTA's barrier (`@ r`); bulk-tensor loads issued by one thread,
multicast included; generic reads and writes, of the CTA's own shared memory or a peer's (DSMEM);
`syncwarp`; named barriers and `syncthreads`; the cluster barrier (`cluster.arrive[.relaxed]`,
`cluster.wait`, `cluster.sync`); wgmma and bulk-store reads with their groups (one lane set per
process); `fence.proxy.async` and `fence.mbarrier_init`; tensor-memory allocation, of one CTA
(a no-op for the machine) or of a CTA pair (cta_group 2: the pair's warps meet, and an allocation
must know that the peer CTA runs); `tcgen05.commit` where it is the protocol's only tcgen05
operation (families/tcgen05.py, Tcgen05Encoding). Anything else (`inval`, the other tcgen05
operations) is "unsupported" with the reason, not guessed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import z3

from .. import budget as budgets
from .. import ir
from ..diagnostics import InputError
from ..result import CheckResult, Stats, Verdict
from ..semantics import rules
from ..semantics.families.async_agents import EVENTS as ASYNC_EVENTS
from ..semantics.families.async_agents import AsyncAgentEncoding
from ..semantics.families.barriers import EVENTS as BARRIER_EVENTS
from ..semantics.families.barriers import BarrierEncoding
from ..semantics.families.encoding import COMMIT, DATA, INIT, OBS, START, Z3A, Z3Arith
from ..semantics.families.lifecycle import LifecycleEncoding
from ..semantics.families.mbarrier import EVENTS as MBARRIER_EVENTS
from ..semantics.families.mbarrier import MbarrierEncoding
from ..semantics.families.memory import EVENTS as MEMORY_EVENTS
from ..semantics.families.memory import MemoryEncoding
from ..semantics.families.tcgen05 import EVENTS as TCGEN05_EVENTS
from ..semantics.families.tcgen05 import Tcgen05Encoding
from ..semantics.machine import Machine, Violation
from ..semantics.program import END, OP, Instr, lane_part, own_part_hidden, part_lanes
from ..semantics.state import AG_TMA, AG_UMMA, FULL, LEADER, UNIT_BULK, UNIT_CPASYNC, UNIT_OF, UNIT_WGMMA
from .bmc_symmetry import EncodingSymmetry

SEED = 0
MAX_EVENTS = 4000
TACTIC = ("simplify", "max-bv-sharing", "bit-blast", "sat")  # see BMC.run


class Unsupported(Exception):
    """The protocol uses something this encoding does not model; the message says what."""



SPLIT_SYNCWARP = ("`syncwarp` by part of a warp split between roles (Machine._syncwarp_parts: its parts meet, a "
                  "rendezvous that is not encoded)")
# Operations the machine has that this encoding does not model, and why.
UNSUPPORTED: dict[type, str] = {
    ir.MbarInval: "`inval` (mbarrier.inval: a barrier's lifecycle after an inval, and a re-init, are not encoded)",
    ir.CpAsyncArrive: "`cp.async.mbarrier.arrive` (its asynchronous arrivals are not encoded)",
    ir.MbarTestWait: "`test_wait` (a non-blocking wait whose effect depends on the phase is not encoded)",
    ir.TcMma: "`tcgen05.mma`/`tcgen05.cp` (asynchronous tensor-core operations completed by a commit: not encoded)",
    ir.TmemAccess: "`tcgen05.ld`/`tcgen05.st` (tensor-memory accesses: not encoded)",
    ir.TcWait: "`tcgen05.wait` (tensor-memory accesses: not encoded)",
    ir.TcFence: "`tcgen05.fence` (tensor-memory ordering: not encoded)",
}

# the encoding of each operation type, by family (Step.event)
EVENTS = {**MBARRIER_EVENTS, **BARRIER_EVENTS, **MEMORY_EVENTS, **ASYNC_EVENTS, **TCGEN05_EVENTS}

__all__ = ['DATA', 'INIT', 'OBS', 'START', 'Z3A', 'Z3Arith']


@dataclass
class Record:
    space: int
    key: tuple  # DATA: (cta, buf, slot); INIT: (m,); OBS: (m,); START: (cta,)
    kind: int  # READ 0 / WRITE 1
    owner: int
    part: int
    is_async: bool = False
    event: Event | None = None
    region: int = 0  # DATA: the bytes of the slot it touches (semantics.families.regions; 0: all)


@dataclass
class Copy:
    """One destination CTA of a bulk-tensor load (a multicast has several): an actor of its own,
    as each destination is an agent of its own in the machine, with its own write record. Or
    (``commit``) the arrival of a tcgen05.commit, with its in-flight flag as its record
    (families/tcgen05.py, Tcgen05Encoding)."""

    event: Event
    cta: int
    m: int
    key: tuple  # (cta, buf, slot)
    record: int
    actor: int = -1
    commit: bool = False


@dataclass
class Event:
    """One operation of one process at fixed loop variables, with everything static evaluated."""

    proc: int
    index: int
    op: Any
    line: int
    threads: int
    lanes: tuple[int, ...]  # holders of the executing lanes
    part: int
    creator: int  # the holder that knows the event's own record first
    own: int  # the executing process's CTA
    cta: int  # the CTA it acts on: a remote operation's target, else ``own``
    error: Violation | None = None  # evaluating its operands already fails: executing it is a violation
    m: int = -1
    targets: tuple[int, ...] = ()
    parity: int = 0
    count: int = 0
    nbytes: int | None = None
    key: tuple = ()
    record: int = -1
    nb: int = -1  # its named barrier: an index into Encoding.nbs
    nb_count: int = -1  # -1: every non-exited thread
    tm: int = -1  # a cta_group 2 allocation or deallocation: its rendezvous (the machine's tmem index)
    pending: int = 0
    retires: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (record, holders that learn it)
    # a wgmma wait of a warpgroup (Machine._wgmma_wait): the (process, event index) each other warp
    # must have reached, None when one never does; the reads whose issue it is causally after
    after: list[tuple[int, int]] | None = field(default_factory=list)
    issued: list[int] = field(default_factory=list)
    hide: int = 0  # records a release by some lanes does not publish from the other-lanes holder
    copies: list[Copy] = field(default_factory=list)  # a bulk-tensor load: one per destination CTA
    inits: tuple[int, ...] = ()  # an init: the init record of each target
    ordinal: int = 0  # which step of its process runs it (see Encoding._runs)

    @property
    def remote(self) -> bool:
        return self.cta != self.own

    @property
    def reaches_peer(self) -> bool:
        """Does it act on a peer CTA (and so depend on that CTA's exit, SV404)?"""
        return self.remote or any(c.cta != self.own for c in self.copies)

    @property
    def cross_release(self) -> bool:
        """A release arrive on a peer CTA's barrier: Machine._check_cross_cta_release (SV602)."""
        return isinstance(self.op, ir.MbarArrive) and self.remote and self.op.sem == "release"


# Operations that touch only their own process, their slot's records and the copies they issue:
# `semantics.machine.LOCAL_OPS` minus those this encoding does not model.
FUSABLE = (ir.Access, ir.Syncwarp, ir.Fence, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad)


def _static(fn, *args):
    try:
        return fn(*args), None
    except Violation as v:
        return None, v


# Every component of the state (Encoding.fresh), by what the symmetry of two processes maps it
# to (Encoding.swapped): "process" components end in a process index (the other process's own),
# "holder" components are knowledge bit-vectors of one holder (the swapped holder's, bits
# swapped), "records" components are sets of records (bits swapped), "record" components belong
# to one record (the swapped record's), "shared" ones name no process.
STATE_COMPONENTS: dict[str, str] = {
    **dict.fromkeys(("pc", "parked", "token", "cltoken", "tmtoken", "hist", "jprev"), "process"),
    **dict.fromkeys(("K", "A"), "holder"),
    **dict.fromkeys(("live", "inflight", "sup"), "records"),
    "phase": "record",
    **dict.fromkeys((*rules.Mbar._fields, "observed", "rd_cur", "rd_last", "nb_count", "nb_arrived", "nb_gen",
                     "tm_arrived", "tm_gen", "cl_gen", "cl_arrived"), "shared"),
}


class Encoding(EncodingSymmetry):
    """The static layout (events, records, holders) and the Z3 transition relation."""

    def __init__(self, machine: Machine):
        self.machine = machine
        # called between units of work that can add up to minutes (budget.Meter.check): a budget
        # that runs out ends the build with budget.OutOfBudget
        self.tick: Callable[[], None] = lambda: None
        self.ncta = machine.ncta
        self.P = len(machine.procs)
        self.M = len(machine.mb_names)
        self.procs_of_cta: list[list[int]] = machine.procs_of_cta
        self.records: list[Record] = []
        # each CTA's start (SPACE_START): known from the beginning by its own threads, and to the
        # async side (a relaxed cluster arrive carries it)
        self.start_record = [self._new_record(Record(START, (c,), 1, -1, FULL)) for c in range(self.ncta)]
        self.nbs: list[tuple[int, int]] = []  # named barriers in use: (cta, id)
        self.events: list[list[Event]] = [self._unroll(p) for p in range(self.P)]
        self.copies: list[Copy] = [c for evs in self.events for e in evs for c in e.copies]
        for n, c in enumerate(self.copies):
            c.actor = self.P + n
        self.runs: list[dict[int, list[Event]]] = [self._runs(evs) for evs in self.events]
        # named barriers that every arrival syncs on with every non-exited thread (syncthreads)
        self.all_thread_nbs = {n for n in range(len(self.nbs)) if all(
            isinstance(e.op, ir.BarSync) and e.nb_count == -1 for evs in self.events for e in evs if e.nb == n)}
        self.tms = sorted({e.tm for evs in self.events for e in evs if e.tm >= 0})  # cta_group 2 rendezvous
        self.tm_procs = [p for p, evs in enumerate(self.events) if any(e.tm >= 0 for e in evs)]
        self.commits = [c for c in self.copies if c.commit]
        self.H0 = 2 * self.P + 2 * self.M + len(self.nbs) + 2
        self.H = self.H0 + len(self.commits)  # then one holder per commit (snap_holder)
        self.has_cluster_barrier = any(isinstance(e.op, ir.ClusterArrive | ir.ClusterWait)
                                       for evs in self.events for e in evs)
        # SV602 bookkeeping exists only where a release reaches a peer CTA's barrier
        self.track_rdata = any(e.cross_release for evs in self.events for e in evs)
        self._size_numbers()
        self.R = max(len(self.records), 1)
        self._static_groups()
        self.waiters = {m: sorted({e.proc for evs in self.events for e in evs
                                   if isinstance(e.op, ir.MbarWait) and e.m == m}) for m in range(self.M)}
        self.obs_of = {m: [e.record for evs in self.events for e in evs
                           if isinstance(e.op, ir.MbarWait) and e.m == m and e.record >= 0] for m in range(self.M)}
        self.obs_mask = self._mask(r for r, rec in enumerate(self.records) if rec.space == OBS)
        self.nondata_mask = self._mask(r for r, rec in enumerate(self.records) if rec.space != DATA)
        # The async-side knowledge (A) is read in two places only: the SV601 check of an async
        # operation (generic writes of the slots async operations use) and a relaxed cluster
        # arrive (every record outside the data space). Its other bits are kept at 0.
        async_keys = {c.key for c in self.copies} | {e.key for evs in self.events for e in evs
                                                      if isinstance(e.op, ir.WgmmaRead | ir.TmaStore) and e.key}
        relaxed = any(isinstance(e.op, ir.ClusterArrive) and e.op.relaxed for evs in self.events for e in evs)
        self.amask = self._mask(r for r, rec in enumerate(self.records)
                                if (rec.space == DATA and rec.kind == 1 and not rec.is_async and rec.key in async_keys)
                                or (rec.space != DATA and relaxed))
        self.kmask = self._known_relevant() | self.amask
        self.init_records = {m: [r for evs in self.events for e in evs for t, r in zip(e.targets, e.inits,
                                                                                         strict=True) if t == m]
                             for m in range(self.M)}
        # A process whose last operation is a bar.sync ends inside the step that completes that
        # generation, which may be another process's step (see objects / may_end).
        self.exit_on_bar = {self.machine.procs[p].cta for p, evs in enumerate(self.events)
                            if evs and isinstance(evs[-1].op, ir.BarSync) and evs[-1].error is None}

    def _known_relevant(self) -> int:
        """The records whose knowledge (K) some check reads; the others' bits are kept at 0.
        A data record is read by the race check of another access to its slot that conflicts
        with it (one of the two writes) and by the SV602 check of a release on a peer's barrier;
        an init record by the uses of its barrier; a CTA's start by DSMEM accesses of that CTA;
        an observation by the SV501 check of its barrier's next phase. (A bit that
        fence.proxy.async copies into the async side is kept with the async mask.)"""
        users: dict[tuple, list[int]] = {}
        for r, rec in enumerate(self.records):
            if rec.space == DATA:
                users.setdefault(rec.key, []).append(r)
        used_bars = {e.m for evs in self.events for e in evs if e.m >= 0} | {c.m for c in self.copies}
        remote_ctas = {e.cta for evs in self.events for e in evs if isinstance(e.op, ir.Access) and e.remote}
        remote_ctas |= {e.own ^ 1 for evs in self.events for e in evs if e.tm >= 0 and not e.op.dealloc}
        published = {r for evs in self.events for e in evs if e.cross_release for r in self.published(e)}
        out = set(published)
        for r, rec in enumerate(self.records):
            if rec.space == DATA:
                if any(self.records[x].event is not rec.event and 1 in (rec.kind, self.records[x].kind)
                       for x in users[rec.key]):
                    out.add(r)
            elif rec.space == INIT:
                if rec.key[0] in used_bars:
                    out.add(r)
            elif rec.space == START:
                if rec.key[0] in remote_ctas:
                    out.add(r)
            else:
                out.add(r)
        return self._mask(out)

    # ------------------------------------------------------------------ layout
    def leader(self, p: int) -> int:
        return 2 * p

    def lanes_holder(self, p: int) -> int:
        return 2 * p + 1

    def cur(self, m: int) -> int:
        return 2 * self.P + 2 * m

    def last(self, m: int) -> int:
        return 2 * self.P + 2 * m + 1

    def nb(self, i: int) -> int:
        return 2 * self.P + 2 * self.M + i

    @property
    def cl_cur(self) -> int:
        return 2 * self.P + 2 * self.M + len(self.nbs)

    @property
    def cl_last(self) -> int:
        return self.cl_cur + 1

    def _new_record(self, rec: Record) -> int:
        self.records.append(rec)
        return len(self.records) - 1

    def _mask(self, bits: Iterable[int]) -> int:
        mask = 0
        for b in bits:
            mask |= 1 << b
        return mask

    def _unroll(self, p: int) -> list[Event]:
        mach = self.machine
        prog = mach.programs[p]
        try:
            pc, vars_ = mach._run_local(p, 0, (0,) * len(prog.var_names))
            out: list[Event] = []
            while prog.code[pc].kind != END:
                ins = prog.code[pc]
                if ins.kind != OP:
                    raise Unsupported(f"instruction kind {ins.kind} at line {ins.line}")
                out.append(self._event(p, len(out), ins, vars_))
                if len(out) > MAX_EVENTS:
                    raise Unsupported(f"more than {MAX_EVENTS} operations in one process")
                nxt = pc + 2 if isinstance(ins.op, ir.BarSync) else pc + 1
                pc, vars_ = mach._run_local(p, nxt, vars_)
        except Violation as v:
            raise Unsupported(f"control flow cannot be unrolled ({v.code}: {v.message})") from None
        return out

    def _event(self, p: int, index: int, ins: Instr, vars_: tuple) -> Event:
        """The event of one operation: its operands evaluated as the machine's handler evaluates
        them (the same helpers, so the same errors), its records created."""
        mach = self.machine
        op = ins.op
        kind = type(op)
        if kind in UNSUPPORTED and not self._no_op(op):
            raise Unsupported(f"{UNSUPPORTED[kind]}, line {ins.line}")
        if kind is ir.TmaLoad and op.cta_group == 2:
            raise Unsupported(f"`tma.load cta_group 2` (a 2-SM copy signalled on the pair leader's barrier: not "
                              f"encoded), line {ins.line}")
        proc = mach.procs[p]
        if kind is ir.Syncwarp and p in mach.warp_parts:
            raise Unsupported(f"{SPLIT_SYNCWARP}, line {ins.line}")
        env = mach.env(p, vars_)
        ctx = mach.ctx[p]
        # who executes: Machine._lanes / _part (program.lane_part)
        if ins.leader_only or proc.nthreads == 1:
            lanes, part = (self.leader(p),), LEADER
        elif not ins.lanes or ins.lanes == proc.lane_mask:
            lanes, part = (self.leader(p), self.lanes_holder(p)), FULL
        else:
            part, has_leader, others = lane_part(proc, ins.lanes)
            lanes = (*((self.leader(p),) if has_leader else ()), *((self.lanes_holder(p),) if others else ()))
        creator = self.leader(p) if part == LEADER else self.lanes_holder(p)
        e = Event(p, index, op, ins.line, ins.threads, lanes, part, creator, proc.cta, proc.cta)
        if kind in (ir.MbarArrive, ir.MbarTx, ir.Access) and op.remote is not None:
            cta, e.error = _static(mach._target_cta, None, p, op.remote, env, ctx, op.span)  # SV405
            e.cta = proc.cta if cta is None else cta
            if e.error is None and kind is ir.MbarArrive and op.local_form and e.cta != proc.cta:
                _, e.error = _static(mach.check_local_form, op, e.cta, proc.cta)  # SV407
        if e.error is not None:
            pass
        elif kind is ir.MbarInit:
            decl = mach.mb_decl[op.bar.name]
            count, e.error = (decl.count, None) if op.count is None else _static(mach._eval, op.count, env, ctx)
            if e.error is None and not 1 <= count <= rules.MAX_COUNT:
                e.error = Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
            e.count = count or 0
            if op.bar.every:
                e.targets = tuple(mach.mb_index[(proc.cta, op.bar.name, i)] for i in range(decl.size or 1))
            elif e.error is None:
                m, e.error = _static(mach._mbar, None, p, op.bar, proc.cta, env, ctx)
                e.targets = (m,) if m is not None else ()
            if e.error is None:
                e.inits = tuple(self._new_record(Record(INIT, (m,), 1, p, part, event=e)) for m in e.targets)
        elif kind in (ir.MbarArrive, ir.MbarTx, ir.MbarWait):
            e.m, e.error = _static(mach._mbar, None, p, op.bar, e.cta, env, ctx)
            if e.error is None and kind is ir.MbarArrive:
                count, e.error = _static(mach._eval, op.count, env, ctx)
                e.count = (count or 0) * ins.threads
            if e.error is None and kind in (ir.MbarArrive, ir.MbarTx) and op.tx_bytes is not None:
                nbytes, e.error = _static(mach._eval, op.tx_bytes, env, ctx)
                e.nbytes = (nbytes or 0) * ins.threads
            if e.error is None and kind is ir.MbarWait:
                e.parity, e.error = _static(mach._eval, op.parity, env, ctx)
                e.record = self._new_record(Record(OBS, (e.m,), 0, p, part, event=e))
        elif kind in (ir.BarSync, ir.BarArrive):
            bar_id, e.error = _static(mach._bar_id, op.bar_id, env, ctx, op.span)
            if e.error is None:
                count, e.error = _static(mach._bar_count, op.count, env, ctx, op.span)
                e.nb_count = -1 if count is None else count
                if (proc.cta, bar_id) not in self.nbs:
                    self.nbs.append((proc.cta, bar_id))
                e.nb = self.nbs.index((proc.cta, bar_id))
        elif kind is ir.Access:
            slot, e.error = _static(mach._slot, op.buf, env, ctx)
            if e.error is None:
                region, e.error = _static(mach._region, op, slot[0], env, ctx)
            if e.error is None:
                e.key = (e.cta, *slot)
                e.record = self._new_record(Record(DATA, e.key, 1 if op.kind == "write" else 0, p, part, event=e,
                                                   region=region))
        elif kind is ir.TmaLoad:
            self._copy_event(e, ins, env, ctx)
        elif kind is ir.UmmaCommit:
            self._commit_event(e, ins, env, ctx)
        elif kind in (ir.WgmmaRead, ir.TmaStore, ir.CpAsync):
            slot, e.error = _static(mach._slot, op.buf, env, ctx)
            if e.error is None:
                e.key = (proc.cta, *slot)
                kind_ = 1 if kind is ir.CpAsync else 0  # a cp.async writes its slot, the others read theirs
                e.record = self._new_record(Record(DATA, e.key, kind_, p, part, is_async=True, event=e))
        elif kind is ir.GroupWait:
            e.pending, e.error = _static(mach._eval, op.pending, env, ctx)
        elif kind is ir.TmemAlloc and not self._no_op(op):
            # Machine.op_tmem: the warp pair of CTAs rank and rank ^ 1 meets at one rendezvous per
            # pair, one for allocations and one for deallocations
            tm, e.error = _static(mach.tmem_rendezvous, proc.cta, op)
            e.tm = -1 if tm is None else tm
        elif kind not in (ir.Fence, ir.Syncwarp, ir.GroupCommit, ir.ClusterArrive, ir.ClusterWait, ir.TmemAlloc):
            raise Unsupported(f"`{kind.__name__}` operations")
        if e.error is not None:  # executing it is the violation; none of its operands is used
            e.m, e.targets, e.key, e.nb, e.parity, e.count, e.nbytes, e.pending = -1, (), (), -1, 0, 0, None, 0
            e.copies, e.inits, e.record, e.cta, e.tm = [], (), -1, e.own, -1
        return e

    def _no_op(self, op: Any) -> bool:
        """Machine.op_tmem does nothing but move on for a cta_group 1 allocation, and for a
        deallocation when the machine does not assume that it waits for the peer warp."""
        return isinstance(op, ir.TmemAlloc) and (op.cta_group == 1 or (
            op.dealloc and not self.machine.assume.dealloc_blocks))

    def _copy_event(self, e: Event, ins: Instr, env: dict, ctx: Any) -> None:
        """Machine.op_tma_load: its operands, then one copy (actor and write record) per
        destination CTA — the issuer's own, or every CTA of the multicast mask."""
        mach = self.machine
        op = ins.op
        if ins.threads != 1:
            raise Unsupported(f"a bulk copy issued by {ins.threads} threads at once (line {ins.line})")
        slot, e.error = _static(mach._slot, op.buf, env, ctx)
        if e.error is None:
            e.nbytes, e.error = _static(mach._eval, op.tx_bytes, env, ctx)
        if e.error is None and (e.nbytes <= 0 or e.nbytes % 16):
            e.error = Violation("SV107", f"copy of {e.nbytes} bytes: bulk copies need a positive multiple "
                                "of 16", op.span)
        dests = [e.own]
        if e.error is None and op.multicast is not None:
            mask, e.error = _static(mach._eval, op.multicast, env, ctx)
            if e.error is None and (mask <= 0 or mask >= 1 << self.ncta):
                e.error = Violation("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster", op.span)
            dests = [c for c in range(self.ncta) if (mask or 0) >> c & 1]
        bars = []
        for c in dests:
            if e.error is None:
                m, e.error = _static(mach._mbar, None, e.proc, op.bar, c, env, ctx)
                bars.append(m)
        if e.error is None:
            for c, m in zip(dests, bars, strict=True):
                key = (c, *slot)
                r = self._new_record(Record(DATA, key, 1, e.proc, e.part, is_async=True, event=e))
                e.copies.append(Copy(e, c, m, key, r))

    def _commit_event(self, e: Event, ins: Instr, env: dict, ctx: Any) -> None:
        """Machine.op_umma_commit where it tracks nothing: one arrival (an actor, its in-flight
        flag a record) on the CTA's own barrier. Anything the encoding cannot follow exactly is
        refused: other tcgen05 operations (what a commit tracks and publishes), several threads
        committing at once, a multicast commit."""
        op = ins.op
        others = [type(o).__name__ for o in ir.ops_of(self.machine.protocol.body)
                  if ir.tensor_core_async(o) and not isinstance(o, ir.UmmaCommit)]
        if others:
            raise Unsupported(f"`tcgen05.commit` in a protocol with other tcgen05 operations ({others[0]}: what a "
                              f"commit tracks and publishes is not encoded), line {ins.line}")
        if ins.threads != 1 or op.multicast is not None:
            raise Unsupported(f"`tcgen05.commit` by {ins.threads} threads or with a multicast mask (only one "
                              f"thread's commit on its own CTA's barrier is encoded), line {ins.line}")
        e.m, e.error = _static(self.machine._mbar, None, e.proc, op.bar, e.own, env, ctx)
        if e.error is None:
            r = self._new_record(Record(COMMIT, (e.m,), 1, e.proc, e.part, event=e))
            e.copies.append(Copy(e, e.own, e.m, (), r, commit=True))
            e.m = -1  # (the barrier is the arrival's: the issue only checks it, as a copy's issue does)

    def snap_holder(self, c: Copy) -> int:
        """The knowledge holder of what a commit's arrival carries (after the fixed holders)."""
        return self.H0 + self.commits.index(c)

    def earlier_commits(self, c: Copy) -> list[Copy]:
        """The arrivals of the same thread's earlier commits, which (in order) land first."""
        if not self.machine.assume.tcgen05_commit_in_order:
            return []
        mine = [x for x in self.commits if x.event.proc == c.event.proc]
        return mine[:mine.index(c)]

    def _fusable(self, e: Event) -> bool:
        """May the event run at once after the one before it, in the same step?

        Yes when it is never blocked and commutes with every move of every other actor, so that
        every execution can move it back next to its predecessor, with the same findings:

        * the operations `Machine.successors` takes alone (LOCAL_OPS): they touch only their own
          process, their slot's records and the copies they issue (docs/model.md). Without inval
          a bulk copy's check of its barrier commutes with an init too: the issuer cannot learn
          of an init without a step of its own, and a second init is SV403 in either order;
        * among them, one that reaches a peer CTA (a DSMEM access, a multicast copy) reads
          whether that CTA has exited, so only where it cannot have (`_peer_outlives`);
        * a cluster arrive: it never blocks, arrivals add up in any order, and the generation it
          joins cannot complete without it (its process has not exited), so no other move reads
          what it changes before it — except an exit, after which it completes the generation
          the exit would have completed;
        * an mbarrier init: before it the barrier is invalid on every path that has not broken
          a rule (a second init is SV403, inval is unsupported), so no other move used it
          successfully, and none can use it after it without learning of it — through a step
          of the initializing process, which comes later. Moving it earlier changes no
          successful move and keeps every failing one failing (a use of an invalid barrier
          and a use whose lanes do not know the init are both SV401/SV402)."""
        if e.error is not None:
            return False
        if isinstance(e.op, ir.ClusterArrive | ir.MbarInit):
            return True
        if isinstance(e.op, ir.GroupWait) and e.op.unit == "wgmma" and len(self.machine.wgmma_team[e.proc]) > 1:
            return False  # it waits for the other warps of its warpgroup (Machine._wgmma_wait)
        peers = ({e.cta} | {c.cta for c in e.copies}) - {e.own}
        return isinstance(e.op, FUSABLE) and all(self._peer_outlives(e, cta) for cta in peers)

    def _peer_outlives(self, e: Event, cta: int) -> bool:
        """Can CTA ``cta`` not have exited when process e.proc runs e, whatever the others do?

        (Machine._peer_cannot_exit_first, decided statically.) The process has arrived on the
        cluster barrier a times before e and waited after each, so generations 0..a-1 have
        completed and generation a cannot complete without its next arrival. A process q of the
        peer CTA arrives once per generation (a second arrive before its wait is SV205), so its
        arrival number a is in generation a or later; if q waits after it, q cannot end first."""
        evs = self.events[e.proc]
        seq = [type(x.op) for x in evs[:e.index] if isinstance(x.op, ir.ClusterArrive | ir.ClusterWait)]
        if seq != [ir.ClusterArrive, ir.ClusterWait] * (len(seq) // 2):
            return False
        a = len(seq) // 2
        for q in self.procs_of_cta[cta]:
            qs = self.events[q]
            arrives = [x.index for x in qs if isinstance(x.op, ir.ClusterArrive)]
            if len(arrives) > a and any(isinstance(x.op, ir.ClusterWait) for x in qs[arrives[a]:]):
                return True
        return False

    def _runs(self, evs: list[Event]) -> dict[int, list[Event]]:
        """The process's steps: each starts at an event and goes on through the events that may
        run at once after it (`_fusable`), except the last event (its exit touches every
        all-thread barrier) and after a `bar.sync` (a completion restarts the warp after it, in
        another warp's step)."""
        runs: dict[int, list[Event]] = {}
        j = 0  # (a cta_group 2 rendezvous may keep its warp where it is, so nothing is fused after it either)
        while j < len(evs):
            run = [evs[j]]
            if not isinstance(evs[j].op, ir.BarSync) and evs[j].tm < 0:
                while j + len(run) < len(evs) - 1 and self._fusable(evs[j + len(run)]):
                    run.append(evs[j + len(run)])
            for e in run:
                e.ordinal = len(runs)
            runs[j] = run
            j += len(run)
        return runs

    def _size_numbers(self) -> None:
        """Numbers are two's-complement bit-vectors (the problem is then pure QF_BV, which Z3
        bit-blasts to SAT), wide enough that no value any execution can compute wraps: every
        counter below is bounded by a sum over the finitely many events."""
        evs = [e for es in self.events for e in es]
        depth = sum(len(es) for es in self.events) + len(self.copies) + sum(e.tm >= 0 for e in evs)
        self.token_base = depth + 2  # a parked warp's token: named-barrier index * token_base + generation
        tx_total = sum(abs(e.nbytes or 0) for e in evs) + 1
        # |tx| never exceeds the bytes of every expect and complete together (a multicast completes
        # its bytes once per destination barrier); when that stays below the PTX range the range
        # check is false in every execution and is left out — and then only tx = 0 and the sign
        # of tx matter (rules.mb_try_complete), so byte counts are kept in units of their gcd
        self.tx_can_overflow = tx_total > rules.MAX_COUNT
        self.tx_unit = 1 if self.tx_can_overflow else math.gcd(*(abs(e.nbytes or 0) for e in evs)) or 1
        tx_total = tx_total // self.tx_unit + 1
        threads = sum(p.nthreads for p in self.machine.procs)
        bound = max(tx_total, sum(abs(e.count) for e in evs) + max((abs(e.count) for e in evs), default=0),
                    (len(self.nbs) + 1) * self.token_base,
                    sum(self.machine.procs[e.proc].nthreads for e in evs if e.nb >= 0 or isinstance(
                        e.op, ir.ClusterArrive)) + threads,
                    max((abs(e.parity) + abs(e.pending) for e in evs), default=0),
                    rules.MAX_COUNT + 1 if self.tx_can_overflow else 0)
        self.width = bound.bit_length() + 2

    def objects(self, e: Event) -> dict:
        """The shared objects an event reads ("r") or writes ("w"), for the partial-order
        constraint of `BMC.run`: its own process, the mbarriers and slots it uses (their
        records' bits and the barrier's knowledge holders included), for a named barrier the
        barrier and every process that may be parked on it (a completion moves them on), the
        cluster barrier, for a release on a peer's barrier every slot whose writes it may
        publish (SV602 reads them), for a move on a peer CTA whether that CTA has ended (("exit",
        cta), read), and for a move that may end processes what their exits change (`ending`;
        the last exit of a CTA writes ("exit", cta) and what its SV404 check reads, in
        `Effect.dynamic`).

        Reads: an mbarrier wait (it changes only its own process, its own observation record,
        and the barrier's "observed" flag, which waits only set and which everything else that
        reads it also writes the barrier), a cluster wait, a generic or async read of a slot
        (reads are checked against writes only). Two moves that only read an object commute
        and neither enables nor disables the other.

        Adds ("a"): a cluster arrive, to the open generation (object ("cl_open",): its count of
        threads arrived and the knowledge released into it). Two arrivals always join the same
        (current) generation, whichever comes first; the counts add, their releases accumulate,
        and the generation completes at the later one with the same result; neither can disable
        the other (its only check, SV205, reads its own token). A cluster wait reads the other
        half (("cl",): the generation number and the knowledge the last completion published),
        which an arrival writes only when it completes the generation (`Effect.dynamic`): a
        wait and an arrival that leaves the generation open commute — the wait reads neither
        the count nor the open generation's knowledge, the arrival nothing the wait changes (its
        own token and knowledge)."""
        out: dict = {("proc", e.proc): "w"}

        def use(o: tuple, mode: str) -> None:
            old = out.get(o)
            out[o] = mode if old is None or old == mode else "w"

        op = e.op
        if isinstance(op, ir.MbarInit):
            for m in e.targets:
                use(("m", m), "w")
        elif e.m >= 0:
            use(("m", e.m), "r" if isinstance(op, ir.MbarWait) else "a" if self.adds_to(e) else "w")
        for c in e.copies:  # the issue checks the barrier, writes the slot, starts the copy
            use(("m", c.m), "r")
            use(("key", c.key), "w")
            use(("proc", c.actor), "w")
        if e.key:
            write = isinstance(op, ir.Access) and op.kind == "write"
            use(("key", e.key), "w" if write else "r")
        if e.tm >= 0:
            use(("tm", e.tm), "w")
        if e.nb >= 0 and self.adds_to(e):
            use(("nb", e.nb), "a")  # the waiters it restarts are written when it completes (Effect.dynamic)
        elif e.nb >= 0:
            use(("nb", e.nb), "w")
            for q in self.nb_waiters(e.nb):
                use(("proc", q), "w")
        if isinstance(op, ir.ClusterArrive | ir.ClusterWait):
            # the generation and what its completion published (waits read them) apart from the
            # arrivals of the open generation (they add to it): see the docstring
            if isinstance(op, ir.ClusterWait):
                use(("cl",), "r")
            else:
                use(("cl_open",), "a")
        if e.cross_release:
            for r in self.published(e):
                use(("key", self.records[r].key), "r")
        # a move on a peer CTA checks that the peer has not ended (SV404); its own CTA has not
        for cta in ({e.cta} | {c.cta for c in e.copies} | {self.machine.mb_names[c.m][0] for c in e.copies}
                    | ({self.machine.mb_names[e.m][0]} if e.m >= 0 else set())) - {e.own}:
            use(("exit", cta), "r")
        if e.index == len(self.events[e.proc]) - 1:
            for o, mode in self.ending([e.proc]).items():
                use(o, mode)
        if e.nb >= 0 and not self.adds_to(e):
            for o, mode in self.ending(self.ends_parked_on(e.nb)).items():
                use(o, mode)
        return out

    def adds_to(self, e: Event | None) -> bool:
        """Does this move (an event, or None for a copy's completion) only add to its barrier
        as long as it leaves arrivals pending?

        An arrive (not a drop), expect_tx, complete_tx or copy completion on an mbarrier, while
        the tx-count cannot leave its range (else its range check depends on the order): each
        lowers the pending count or leaves it, and changes the tx-count, the barrier's knowledge
        holder (a bitwise or) and its data flag (an or). Take two such moves X;Y of different
        actors that both leave pending > 0. In the order Y;X, Y leaves at least as many pending
        (X only lowered it) and X ends where X;Y ended, so neither completes the phase there
        either; no check either makes reads what the other changes (the pending count only
        against overflow, SV504, which the larger count before Y passes; validity, knowledge
        of the init, the peer's exit, the observed flag); and both orders end in the same state.
        A move that leaves none pending (it may complete the phase) or breaks a rule writes
        the barrier (`Effect.dynamic`).

        A syncthreads arrival (on a named barrier that every arrival syncs on with every
        non-exited thread) likewise: each warp arrives once per generation (it waits in it), so
        while arrivals are missing the counts add up in any order and the releases accumulate;
        the arrival that completes the generation restarts every waiter, and writes them."""
        if e is None:
            return not self.tx_can_overflow
        if e.error is not None:
            return False
        if (isinstance(e.op, ir.MbarArrive) and not e.op.drop) or isinstance(e.op, ir.MbarTx):
            return not self.tx_can_overflow
        return isinstance(e.op, ir.BarSync) and e.nb in self.all_thread_nbs

    def nb_waiters(self, n: int) -> list[int]:
        """The processes that may wait on named barrier n (a completion restarts them)."""
        return [q for q, evs in enumerate(self.events)
                if any(isinstance(x.op, ir.BarSync) and x.nb == n for x in evs)]

    def _exit_leaves_nb(self, p: int, n: int) -> bool:
        """Can process p's exit never change named barrier n (its CTA's)?

        Yes when every arrival on n syncs with every non-exited thread of the CTA and blocks
        (`all_thread_nbs`), and no process of the CTA arrives on n more often than p, k times.
        Then a process's i-th arrival is in generation i: it passed generations 0..i-1, and
        generation i cannot complete while it runs without its arrival. So p's k-th arrival,
        which it passes before it exits, completed generation k-1; every arrival on n (each in a
        generation below k) came before that, and none comes after: after p's exit nothing
        arrives on n, no generation of n is open, and what the exit does to n's count of
        expected threads is read by nobody."""
        if n not in self.all_thread_nbs:
            return False
        counts = [sum(e.nb == n for e in self.events[q]) for q in self.procs_of_cta[self.machine.procs[p].cta]]
        return max(counts, default=0) <= sum(e.nb == n for e in self.events[p])

    def _exit_leaves_cluster_barrier(self, p: int) -> bool:
        """Can process p's exit never change the cluster barrier? Yes when p waits after each of
        its a arrives and no process of the cluster arrives more than a times: every process's
        i-th arrival is in generation i (it waits after each arrival — a second arrive before
        the wait is SV205 — and generation i cannot complete while it runs without it), so
        every arrival came before p passed its last wait, on generation a-1, and none after."""
        seq = [type(e.op) for e in self.events[p] if isinstance(e.op, ir.ClusterArrive | ir.ClusterWait)]
        if seq != [ir.ClusterArrive, ir.ClusterWait] * (len(seq) // 2):
            return False
        a = len(seq) // 2
        return all(sum(isinstance(e.op, ir.ClusterArrive) for e in evs) <= a for evs in self.events)

    def ending(self, starts: Iterable[int]) -> dict:
        """The objects that the exits of ``starts`` may change (Machine._exit), besides what the
        exit's own CTA having ended changes (`final_exit_objects`): the CTA's named barriers
        with their waiters, and the cluster barrier — except those the exit cannot change
        (`_exit_leaves_nb`, `_exit_leaves_cluster_barrier`). A completion may restart a process
        whose last operation is that bar.sync, which then ends in the same move: those are
        added until nothing changes."""
        out: dict = {}
        todo, seen = list(starts), set()
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            out[("proc", p)] = "w"
            cta = self.machine.procs[p].cta
            for n, (c, _) in enumerate(self.nbs):
                if c != cta or self._exit_leaves_nb(p, n):
                    continue
                out[("nb", n)] = "w"
                for q in self.nb_waiters(n):
                    out[("proc", q)] = "w"
                todo += self.ends_parked_on(n)
            if self.has_cluster_barrier and not self._exit_leaves_cluster_barrier(p):
                out[("cl",)] = out[("cl_open",)] = "w"
        return out

    def ends_parked_on(self, n: int) -> list[int]:
        """The processes whose last operation is a bar.sync on named barrier n: they end in the
        move that completes its generation."""
        return [q for q, evs in enumerate(self.events)
                if evs and isinstance(evs[-1].op, ir.BarSync) and evs[-1].nb == n and evs[-1].error is None]

    def may_end(self, e: Event) -> list[int]:
        """The processes that may end in the move that runs e: its own, for its last event, and
        for an arrival on a named barrier those parked on it for good (their exits' cascade is
        in `ending`)."""
        out = [e.proc] if e.index == len(self.events[e.proc]) - 1 else []
        if e.nb >= 0 and e.own in self.exit_on_bar:
            out += self.ends_parked_on(e.nb)
        return out

    def final_exit_objects(self, cta: int) -> list[tuple]:
        """What the move that ends a CTA's last process reads or changes: whether the CTA has
        ended (object ("exit", cta); read by every move that checks it, SV404), and, for its
        SV404 check, the copies into it in flight (each copy's own actor object, written by its
        issue and its landing) and the async reads into it never retired (their issuer's
        object). A move that ends a process but not its CTA changes none of them: whether the
        CTA has ended stays false, and only the last exit makes that check."""
        objs = [("exit", cta)]
        objs += [("proc", c.actor) for c in self.copies if c.cta == cta or self.machine.mb_names[c.m][0] == cta]
        objs += [("proc", e.proc) for evs in self.events for e in evs if e.retires == [(-1, ())] and e.key[0] == cta]
        return objs

    def published(self, e: Event) -> list[int]:
        """Machine._check_cross_cta_release: the records whose visibility to the arriving lanes
        makes a release on a peer's barrier carry data across CTAs — generic writes by a
        process of another CTA than the barrier's."""
        bar_cta = self.machine.mb_names[e.m][0]
        return [r for r, rec in enumerate(self.records) if rec.space == DATA and rec.kind == 1
                and not rec.is_async and self.machine.procs[rec.owner].cta != bar_cta]

    def tx(self, e: Event) -> int:
        """The event's bytes in the unit the tx-counts are kept in (see _size_numbers)."""
        return (e.nbytes or 0) // self.tx_unit

    def num(self, value: int) -> z3.BitVecRef:
        return z3.BitVecVal(value, self.width)

    def var(self, name: str) -> z3.BitVecRef:
        return z3.BitVec(name, self.width)

    def _static_groups(self) -> None:
        """Which group wait retires each async read. Groups belong to the process and are fixed
        by its sequence of operations, so this is decided here (as `Machine.op_commit` and
        `op_group_wait` do step by step), for processes whose reads, commits and waits are all
        executed by the same lanes (elected lane alone, or all of them). A warpgroup's wgmma
        groups are shared by its warps (Machine._wgmma_wait): a wait of one warp retires the
        reads of every warp of the team in the groups before its limit."""
        team_of = self.machine.wgmma_team
        # (read event or cp.async write, unit, group), per process
        reads: dict[int, list[tuple[Event, int, int]]] = {}
        commits: dict[int, list[int]] = {}  # wgmma commit event indices, per process
        waits: list[tuple[Event, int, int]] = []  # (wait event, unit, limit)
        for p, evs in enumerate(self.events):
            unit_ops = [e for e in evs if isinstance(e.op, ir.WgmmaRead | ir.TmaStore | ir.CpAsync | ir.GroupCommit
                                                        | ir.GroupWait)]
            if len({e.part for e in unit_ops}) > 1:
                raise Unsupported("async reads, commits and group waits of one process by different lanes")
            seq = dict.fromkeys(UNIT_OF.values(), 0)
            reads[p], commits[p] = [], []
            for e in unit_ops:
                if isinstance(e.op, ir.WgmmaRead | ir.TmaStore | ir.CpAsync):
                    unit = UNIT_WGMMA if isinstance(e.op, ir.WgmmaRead) else \
                        UNIT_CPASYNC if isinstance(e.op, ir.CpAsync) else UNIT_BULK
                    if e.record >= 0:
                        reads[p].append((e, unit, seq[unit]))
                    continue
                unit = UNIT_OF[e.op.unit]
                if isinstance(e.op, ir.GroupCommit):
                    seq[unit] += 1
                    if unit == UNIT_WGMMA:
                        commits[p].append(e.index)
                    continue
                if e.error is None:
                    waits.append((e, unit, seq[unit] - e.pending))
        retired: set[int] = set()
        for e, unit, limit in waits:
            team = team_of[e.proc] if unit == UNIT_WGMMA and team_of[e.proc] else (e.proc,)
            for q in team:
                for read, u, grp in reads[q]:
                    if u == unit and grp < limit:
                        learn = tuple(h for h in e.lanes if h == self.leader(e.proc)) if read.part == LEADER \
                            else e.lanes
                        e.retires.append((read.record, learn))
                        retired.add(read.record)
                        if len(team) > 1:
                            e.issued.append(read.record)
            if len(team) > 1 and limit > 0:
                after = [(q, commits[q][limit - 1]) for q in team if q != e.proc and len(commits[q]) >= limit]
                e.after = after if len(after) == len(team) - 1 else None
        for p in reads:
            for read, _, _ in reads[p]:
                if read.record not in retired:
                    read.retires = [(-1, ())]  # never retired: marks the read for the exit check
        self.snapped = sorted({r for e, _, _ in waits for r in e.issued})
        # a release by some lanes of a warp: what the other-lanes holder knows only as each lane its own part
        for p, evs in enumerate(self.events):
            proc = self.machine.procs[p]
            for e in evs:
                if isinstance(e.op, ir.MbarArrive) and e.part > FULL:
                    releasing = part_lanes(proc, e.part)
                    syncs = [x.index for x in evs[:e.index] if isinstance(x.op, ir.Syncwarp)]
                    e.hide = self._mask(r for r, rec in enumerate(self.records) if rec.space == DATA and
                                        own_part_hidden(proc, rec.owner, rec.part, rec.is_async, releasing,
                                                        rec.event is not None and rec.owner == p and
                                                        any(i > rec.event.index for i in syncs)))

    # ------------------------------------------------------------------ symmetry
    def fresh(self, i: int) -> dict:
        S: dict = {}
        bv = lambda name: z3.BitVec(f"{name}_{i}", self.R)  # noqa: E731
        for p in range(self.P):
            S["pc", p] = self.var(f"pc{p}_{i}")
            S["parked", p] = z3.Bool(f"parked{p}_{i}")
            S["token", p] = self.var(f"token{p}_{i}")
            if self.has_cluster_barrier:
                S["cltoken", p] = self.var(f"cltoken{p}_{i}")
        for m in range(self.M):
            for f in rules.Mbar._fields:
                S[f, m] = self.var(f"{f}{m}_{i}")
            S["observed", m] = z3.Bool(f"observed{m}_{i}")
            if self.track_rdata:
                S["rd_cur", m] = z3.Bool(f"rdcur{m}_{i}")
                S["rd_last", m] = z3.Bool(f"rdlast{m}_{i}")
            for p in self.waiters[m]:
                S["hist", m, p] = z3.Bool(f"hist{m}_{p}_{i}")
                S["jprev", m, p] = self.var(f"jprev{m}_{p}_{i}")
        for n in range(len(self.nbs)):
            for f in ("count", "arrived", "gen"):
                S["nb_" + f, n] = self.var(f"nb{f}{n}_{i}")
        for t in self.tms:
            S["tm_arrived", t] = self.var(f"tmarrived{t}_{i}")
            S["tm_gen", t] = self.var(f"tmgen{t}_{i}")
        for p in self.tm_procs:
            S["tmtoken", p] = self.var(f"tmtoken{p}_{i}")
        if self.has_cluster_barrier:
            S["cl_gen"] = self.var(f"clgen_{i}")
            S["cl_arrived"] = self.var(f"clarrived_{i}")
        for h in range(self.H):
            S["K", h] = bv(f"K{h}")
            S["A", h] = bv(f"A{h}")
        S["live"] = bv("live")
        S["inflight"] = bv("inflight")
        if self.track_rdata:
            S["sup"] = bv("sup")  # superseded generic writes (see Step.add_record)
        for r, rec in enumerate(self.records):
            if rec.space == OBS:
                S["phase", r] = self.var(f"phase{r}_{i}")
        for r in self.snapped:  # what its issuer had observed when it issued a warpgroup's wgmma read
            S["snap", r] = bv(f"snap{r}")
        return S

    def initial(self, S: dict) -> list:
        out = []
        for key, variable in S.items():
            name = key[0] if isinstance(key, tuple) else key
            if name in ("parked", "hist", "rd_cur", "rd_last"):
                out.append(variable == False)  # noqa: E712
            elif name == "observed":
                out.append(variable == True)  # noqa: E712  (a fresh mbarrier counts as observed: machine.initial)
            elif name in ("nb_count", "cltoken", "tmtoken"):
                out.append(variable == -1)
            elif name in ("K", "A"):
                # Machine.initial: each CTA's start record, known (and async-known) by its threads
                h = key[1]
                p = h // 2 if h < 2 * self.P else -1
                start = 1 << self.start_record[self.machine.procs[p].cta] if p >= 0 else 0
                out.append(variable == z3.BitVecVal(start & (self.amask if name == "A" else self.kmask), self.R))
            elif name in ("live", "inflight", "sup"):
                out.append(variable == z3.BitVecVal(0, self.R))
            else:
                out.append(variable == 0)
        return out

    def bit(self, r: int) -> z3.BitVecRef:
        return z3.BitVecVal(1 << r, self.R)

    def done(self, w: Work, p: int) -> Any:
        return z3.And(w["pc", p] == len(self.events[p]), z3.Not(w["parked", p]))

    def cta_done(self, w: Work, cta: int) -> Any:
        """Machine._cta_exited: every process of the CTA has ended."""
        return z3.And(*[self.done(w, q) for q in self.procs_of_cta[cta]])


class Work:
    """Sequential updates on top of a step's start state (as the machine's _Work)."""

    def __init__(self, S: dict):
        self.S = S
        self.upd: dict = {}

    def __getitem__(self, key):
        return self.upd[key] if key in self.upd else self.S[key]

    def __setitem__(self, key, value) -> None:
        self.upd[key] = value

    def cond(self, c: Any, key, value) -> None:
        self[key] = z3.If(c, value, self[key])


@dataclass
class Effect:
    guard: Any
    enabled: Any
    hard: list[tuple[str, Any]]
    soft: list[tuple[str, Any]]
    upd: dict
    objects: dict = field(default_factory=dict)  # object -> "r" / "a" / "w" (see Encoding.objects)
    # objects a move writes after all, and when: an adding move that completes its phase or
    # generation (see Encoding.adds_to), the move that ends a CTA (Encoding.final_exit_objects),
    # a move that breaks a rule
    dynamic: list[tuple[tuple, Any]] = field(default_factory=list)


class Step(MbarrierEncoding, BarrierEncoding, MemoryEncoding, AsyncAgentEncoding, Tcgen05Encoding,
           LifecycleEncoding):
    """The effects of every actor's possible move from one state."""

    def __init__(self, enc: Encoding, S: dict, sel: z3.ArithRef):
        self.enc = enc
        self.S = S
        self.sel = sel

    # ---- knowledge (semantics.state, holder-major)
    def knows(self, w: Work, r: int, holders: Iterable[int]) -> Any:
        b = self.enc.bit(r)
        return z3.And(*[(w["K", h] & b) != 0 for h in holders])

    def has(self, bv: Any, r: int) -> Any:
        return (bv & self.enc.bit(r)) != 0

    def union(self, w: Work, space: str, holders: Iterable[int]) -> Any:
        acc = z3.BitVecVal(0, self.enc.R)
        for h in holders:
            acc = acc | w[space, h]
        return acc

    def release(self, w: Work, src: tuple[int, ...], tgt: int, c: Any = True, relaxed: bool = False,
                hide: tuple[int, int] = (-1, 0)) -> None:
        """state.release. A relaxed one (a relaxed cluster arrive) carries only the records outside
        the data space (inits, CTA starts, observations) that the sources know on the async side:
        an init once fence.mbarrier_init published it, a start always."""
        if relaxed:
            carried = self.union(w, "A", src) & z3.BitVecVal(self.enc.nondata_mask, self.enc.R)
            for space in ("K", "A"):
                w.cond(c, (space, tgt), w[space, tgt] | carried)
            return
        holder, mask = hide  # (program.own_part_hidden: that holder does not publish those records)
        for space in ("K", "A"):
            acc = z3.BitVecVal(0, self.enc.R)
            for h in src:
                acc = acc | (w[space, h] & ~z3.BitVecVal(mask, self.enc.R) if h == holder and mask else w[space, h])
            w.cond(c, (space, tgt), w[space, tgt] | acc)

    def acquire(self, w: Work, src: int, tgt: tuple[int, ...], c: Any = True) -> None:
        for space in ("K", "A"):
            value = w[space, src]
            for h in tgt:
                w.cond(c, (space, h), w[space, h] | value)

    def shift(self, w: Work, cur: int, last: int, c: Any) -> None:
        """state.shift_phase: the current phase's knowledge becomes the last one's; the current is emptied."""
        for space in ("K", "A"):
            w.cond(c, (space, last), w[space, cur])
            w.cond(c, (space, cur), z3.BitVecVal(0, self.enc.R))

    def carry_obs(self, w: Work, src: tuple[int, ...], tgt: tuple[int, ...], c: Any = True) -> None:
        obs = self.union(w, "K", src) & self.enc.obs_mask
        for h in tgt:
            for space in ("K", "A"):
                w.cond(c, (space, h), w[space, h] | obs)

    def set_record(self, w: Work, r: int, known: tuple[int, ...], aknown: tuple[int, ...], c: Any = True) -> None:
        """The record's bits become exactly: known by ``known``, async-known by ``aknown``.

        Every record is created by one event (or, for a copy, landed by one completion), which
        runs at most once on a path, and knowledge only ever copies bits that are set: until
        then its bit is clear in every holder (an in-flight copy's write is known by nobody). So
        setting the bit in the holders named is the whole update — which keeps every other
        holder's bit-vector out of the step's updates."""
        b = self.enc.bit(r)
        for space, holders in (("K", known), ("A", aknown)):
            for h in holders:
                w.cond(c, (space, h), w[space, h] | b)

    # ---- mbarriers
    def effects(self, depth: int) -> list[Effect]:
        """Every move from a state reached in ``depth`` steps. A process has taken at most
        ``depth`` steps of its own by then, so only its first ``depth + 1`` events can be
        current and only copies issued among its first ``depth`` can be in flight."""
        enc = self.enc
        out = []
        start = Work(self.S)
        done_before = [enc.cta_done(start, c) for c in range(enc.ncta)]
        for p in range(enc.P):
            for first, run in list(enc.runs[p].items())[:depth + 1]:
                guard = z3.And(self.sel == p, self.S["pc", p] == first, z3.Not(self.S["parked", p]))
                out.append(self.run_of(run, guard, done_before))
        for c in enc.copies:
            if c.event.ordinal < depth:
                out.append(self.commit_arrival(c) if c.commit else self.agent(c))
        return out

    def run_of(self, run: list[Event], guard: Any, done_before: list) -> Effect:
        """One step of a process: its current event, then the local ones fused after it."""
        w = Work(self.S)
        hard: list[tuple[str, Any]] = []
        soft: list[tuple[str, Any]] = []
        enabled: Any = None
        objects: dict = {}
        dynamic: list[tuple[tuple, Any]] = []
        for e in run:
            en = self.event(w, e, hard, soft, done_before, dynamic)
            enabled = en if enabled is None else enabled
            for o, mode in self.enc.objects(e).items():
                old = objects.get(o)
                objects[o] = mode if old is None or old == mode else "w"
        if dynamic:  # a move that breaks a rule writes what it adds to
            broken = z3.Or(*[c for _, c in hard + soft])
            dynamic = [(o, z3.Or(c, broken)) for o, c in dynamic]
        return Effect(guard, enabled, hard, soft, w.upd, objects, dynamic)

    def event(self, w: Work, e: Event, hard: list, soft: list, done_before: list, dynamic: list) -> Any:
        """Apply one event to ``w``, adding its checks (in the order the machine's handler makes
        them) and, for a move that adds to a barrier, when it writes it after all (``dynamic``,
        see Encoding.adds_to); returns whether it can move."""
        enc = self.enc
        enabled: Any = z3.BoolVal(True)
        p = e.proc
        op = e.op
        if e.error is not None:
            hard.append((e.error.code, z3.BoolVal(True)))
            return enabled
        handler = EVENTS.get(type(op))
        if handler is None:  # nothing to encode beyond the pc (a commit, a cta_group 1 allocation)
            parks = False
        else:
            enabled, parks = handler(self, w, e, hard, soft, dynamic)
        if not parks:
            w["pc", p] = w["pc", p] + 1
        last_event = e.index == len(enc.events[p]) - 1
        if last_event or isinstance(op, ir.BarSync | ir.BarArrive):
            hard += self.exits(w, e.own, done_before[e.own])
        if enc.may_end(e):
            ends_cta = z3.And(z3.Not(done_before[e.own]), enc.cta_done(w, e.own))
            dynamic += [(o, ends_cta) for o in enc.final_exit_objects(e.own)]
        return enabled

    def agent(self, c: Copy) -> Effect:
        """Machine._complete_tma: into a CTA that has not exited (SV404), the copy's write lands,
        then complete_tx on its destination's barrier."""
        enc = self.enc
        w = Work(self.S)
        r, m, e = c.record, c.m, c.event
        guard = z3.And(self.sel == c.actor, self.has(self.S["inflight"], r))
        hard = [("SV404", enc.cta_done(w, c.cta))]
        w["inflight"] = w["inflight"] & ~enc.bit(r)
        self.set_record(w, r, (enc.cur(m),), (enc.cur(m),))
        hard.append(("SV401", w["valid", m] != 1))
        s = self.mbar(w, m)
        hard.append(("SV503", self.tx_check(s.tx - enc.tx(e))))
        new = rules.mb_complete_tx(s, enc.tx(e), Z3A)
        hard += self.set_mb(w, m, new, z3.BoolVal(True))
        adds = enc.adds_to(None)
        dynamic = [(("m", m), z3.Or(new.pend <= 0, *[cond for _, cond in hard]))] if adds else []
        return Effect(guard, z3.BoolVal(True), hard, [], w.upd,
                      {("m", m): "a" if adds else "w", ("key", c.key): "w", ("proc", c.actor): "w",
                       ("exit", c.cta): "r"},
                      dynamic=dynamic)


def blocked(step: Step, e: Event) -> Any:
    """A wait (mbarrier, cluster barrier or cta_group 2 rendezvous) that cannot move in the
    step's start state (used for deadlock)."""
    if e.error is not None:
        return z3.BoolVal(False)
    w = Work(step.S)
    hard: list = []
    if isinstance(e.op, ir.ClusterWait):
        return z3.Not(step.cluster_wait_passes(w, e.proc))
    if e.tm >= 0:
        return z3.Not(step.tmem_rendezvous(w, e, hard)[0])
    return z3.Not(step.wait(w, e, hard, []))



@dataclass
class Outcome:
    verdict: str  # safe | violation | inconclusive
    labels: list[tuple] = field(default_factory=list)
    code: str = ""
    deadlock: bool = False
    depth: int = 0
    reason: str = ""
    seconds: float = 0.0
    last_group: int = 1  # machine steps of the bad step (a fused step is several)
    stopped_by: str = ""  # the budget that ended an inconclusive run (budget.KINDS), if one did


class BMC:
    def __init__(self, machine: Machine, symmetry: bool = True):
        from ..collective import tmem_may_block
        why = tmem_may_block(machine)  # Machine._tmem_columns: an allocation without room blocks
        if why:
            raise Unsupported(why)
        self.enc = Encoding(machine)
        self.symmetry = symmetry
        self.last_statistics: z3.Statistics | None = None  # the last query's (tests compare them)

    def depth_bound(self) -> int:
        # a cta_group 2 rendezvous takes two steps of the warp that joins it first (join, then leave)
        return sum(len(runs) for runs in self.enc.runs) + len(self.enc.copies) + \
            sum(e.tm >= 0 for evs in self.enc.events for e in evs)

    def run(self, seconds: float, rlimit: int = budgets.DEFAULT_RLIMIT, memory_mb: float = math.inf) -> Outcome:
        """Unroll step by step; ask the solver at depths 4, 8, 16, … and at the bound whether some
        path reaches a bad step within that depth. A path may stop early (``active`` false from
        some step on), so one query covers every shorter path too.

        ``rlimit``: the Z3 resource units all the queries may spend together (deterministic);
        ``seconds`` and ``memory_mb``: the outer limits, checked at every unrolled step (building
        the encoding of a long protocol takes minutes and gigabytes before any query) and given to
        Z3 for each query."""
        return self.metered(budgets.Meter(seconds, memory_mb), budgets.Units(rlimit))

    def metered(self, meter: budgets.Meter, units: budgets.Units) -> Outcome:
        """``run`` with budgets already started (``check`` starts the clock before the encoding)."""
        try:
            return self._run(meter, units)
        except budgets.OutOfBudget as out:
            return Outcome("inconclusive", reason=f"{out} while building the encoding (step {self._depth} of "
                           f"{self.depth_bound()})", depth=self._depth, seconds=meter.elapsed(), stopped_by=out.kind)
        finally:
            self.enc.tick = lambda: None  # (the encoding stays usable after the run, without its budgets)

    _depth = 0  # the step being unrolled (for the coverage of a budget that ends the build)

    def _run(self, meter: budgets.Meter, units: budgets.Units) -> Outcome:
        enc = self.enc
        enc.tick = meter.check
        start = meter.start
        constraints: list = []
        S = enc.fresh(0)
        constraints += enc.initial(S)
        pairs = enc.symmetric_pairs() if self.symmetry else []
        bound = self.depth_bound()
        sels: list = []
        bads: list = []  # per depth: (bad, deadlock, effects)
        active = z3.BoolVal(True)
        prev: dict = {}  # the previous step's objects (see touches)
        checkpoints = {bound} | {1 << n for n in range(2, bound.bit_length()) if 2 << n <= bound}
        for i in range(bound + 1):
            self._depth = i
            meter.check()
            sel = enc.var(f"sel_{i}")
            sels.append(sel)
            # Symmetry (see Encoding.symmetric_pairs): in a state that swapping a and b maps onto
            # itself, b does not move.
            for n, (a, b, rmap) in enumerate(pairs):
                if not n % 16:
                    meter.check()
                constraints.append(z3.Implies(enc.swapped(S, a, b, rmap), sel != b))
            step = Step(enc, S, sel)
            effects = step.effects(i)
            finding = [z3.And(eff.guard, eff.enabled, z3.Or(*[c for _, c in eff.hard + eff.soft]))
                       for eff in effects if eff.hard or eff.soft]
            deadlock = self.deadlock(step, i)
            touch = self.touches(effects)
            if i > 0:
                # Partial-order reduction (monotonic, after Kahlon, Wang and Gupta, CAV 2009): two
                # adjacent moves of different actors in decreasing actor order must be dependent:
                # share an object that not both only read and not both only add to (see
                # Encoding.objects). Independent moves commute and neither enables nor disables the
                # other, so every execution has an equivalent one that obeys this, ending in the
                # same state — and a move that breaks a rule still breaks it when moved earlier past
                # independent moves, so every finding stays reachable.
                shared = [self.dependent(prev[o], touch[o]) for o in prev if o in touch]
                constraints.append(z3.Implies(active, z3.Implies(sels[-2] > sel, z3.Or(*shared))))
            prev = touch
            bads.append((z3.And(active, z3.Or(deadlock, *finding)), deadlock, effects, S))
            if i in checkpoints:
                # A fresh solver per query, running a fixed bit-blasting pipeline: simplification,
                # sharing of bit-vector terms, bit-blasting, SAT. Measured faster here than one
                # incremental solver and than Z3's default QF_BV strategy, whose extra
                # preprocessing (solving the state equalities away) costs more than it saves on
                # these transition relations.
                #
                # The query is copied into a context of its own: how Z3 numbers terms (and so orders
                # the SAT variables) depends on every term its context has seen, and in the shared
                # main context the same query took 60 s in a fresh process and 380 s after other
                # specs (measured on tilelang_bar_h_fixed). Copied, it depends only on the query.
                ctx = z3.Context()
                solver = z3.Then(*TACTIC, ctx=ctx).solver()
                solver.set("random_seed", SEED)
                for n, c in enumerate(constraints):
                    if not n % 1024:
                        meter.check()
                    solver.add(c.translate(ctx))
                solver.add(z3.Or(*[bad[0] for bad in bads]).translate(ctx))
                answer, why, kind = budgets.solve(solver, meter, units)
                self.last_statistics = solver.statistics()
                if answer == z3.sat:
                    return self.counterexample(solver.model(), ctx, sels, bads, start)
                if answer == z3.unknown:
                    return Outcome("inconclusive", reason=f"Z3 answered unknown at depth {i} of {bound} "
                                   f"({why})", depth=i, seconds=time.monotonic() - start, stopped_by=kind)
            if i == bound:
                break
            nxt = enc.fresh(i + 1)
            moves = z3.Bool(f"active_{i + 1}")
            constraints.append(z3.Implies(moves, active))
            constraints.append(z3.Implies(moves, z3.Or(*[
                z3.And(eff.guard, eff.enabled, z3.Not(z3.Or(*[c for _, c in eff.hard]))) if eff.hard
                else z3.And(eff.guard, eff.enabled) for eff in effects])))
            masks = {"A": z3.BitVecVal(enc.amask, enc.R), "K": z3.BitVecVal(enc.kmask, enc.R)}
            for key, variable in nxt.items():
                value = S[key]
                for eff in effects:
                    if key in eff.upd:
                        value = z3.If(eff.guard, eff.upd[key], value)
                if isinstance(key, tuple) and key[0] in masks:
                    value = value & masks[key[0]]  # bits no check reads (Encoding.amask, kmask)
                constraints.append(variable == value)
            S = nxt
            active = moves
        return Outcome("safe", depth=bound, seconds=time.monotonic() - start)

    @staticmethod
    def touches(effects: list[Effect]) -> dict:
        """Per object and mode ("r", "a", "w"): whether the step's move uses it so."""
        by_mode: dict = {}
        for eff in effects:
            for o, mode in eff.objects.items():
                by_mode.setdefault(o, {"r": [], "a": [], "w": []})[mode].append(eff.guard)
            for o, cond in eff.dynamic:
                by_mode.setdefault(o, {"r": [], "a": [], "w": []})["w"].append(z3.And(eff.guard, cond))
        any_of = lambda guards: z3.Or(*guards) if guards else z3.BoolVal(False)  # noqa: E731
        return {o: {mode: any_of(guards) for mode, guards in modes.items()} for o, modes in by_mode.items()}

    @staticmethod
    def dependent(a: dict, b: dict) -> Any:
        """Two moves' uses of one object conflict unless both only read it or both only add to it."""
        a_any, b_any = z3.Or(a["r"], a["a"], a["w"]), z3.Or(b["r"], b["a"], b["w"])
        return z3.Or(z3.And(a["w"], b_any), z3.And(a_any, b["w"]), z3.And(a["r"], b["a"]), z3.And(a["a"], b["r"]))

    def counterexample(self, model: z3.ModelRef, ctx: z3.Context, sels: list, bads: list, start: float) -> Outcome:
        """The first bad step of the solver's path, as machine step labels (a process's step that
        runs fused local operations is as many machine steps). The model is in the query's own
        context ``ctx``; the terms are copied there to be evaluated."""
        ev = lambda t: model.eval(t.translate(ctx), model_completion=True)  # noqa: E731
        labels: list[tuple] = []
        for i, (bad, deadlock, effects, S) in enumerate(bads):
            if z3.is_true(ev(bad)) and z3.is_true(ev(deadlock)):  # no move from here: sel_i is unconstrained
                return Outcome("violation", labels, "SV201", True, i, seconds=time.monotonic() - start)
            group = self.labels(ev(sels[i]).as_long(), S, ev)
            if not z3.is_true(ev(bad)):
                labels += group
                continue
            code = next((c for eff in effects if z3.is_true(ev(eff.guard))
                         for c, cond in eff.hard + eff.soft if z3.is_true(ev(cond))), "")
            return Outcome("violation", labels + group, code, False, i, seconds=time.monotonic() - start,
                           last_group=len(group))
        raise AssertionError("a satisfying path has a bad step")

    def labels(self, actor: int, S: dict, ev) -> list[tuple]:
        enc = self.enc
        if actor < enc.P:
            run = enc.runs[actor].get(ev(S["pc", actor]).as_long(), [None])
            return [("p", actor)] * len(run)
        return [self.label(actor, S, ev)]

    def _inflight(self, S: dict, r: int) -> Any:
        return (S["inflight"] & self.enc.bit(r)) != 0

    def deadlock(self, step: Step, depth: int) -> Any:
        """No actor can move and some process has not ended: every process has ended, is parked
        on a named barrier or waits (mbarrier or cluster barrier) without passing, and no copy
        is in flight."""
        enc = self.enc
        S = step.S
        w = Work(S)
        stuck = []
        for p in range(enc.P):
            waits = [z3.And(S["pc", p] == e.index, blocked(step, e)) for e in enc.events[p]
                     if (isinstance(e.op, ir.MbarWait | ir.ClusterWait) or e.tm >= 0) and e.ordinal <= depth]
            stuck.append(z3.Or(enc.done(w, p), S["parked", p], *waits))
        all_done = z3.And(*[enc.done(w, p) for p in range(enc.P)])
        return z3.And(z3.Not(all_done), S["inflight"] == 0, *stuck)

    def label(self, actor: int, S: dict | None = None, ev=None) -> tuple:
        """The machine's step label of an actor: a process, or the agent of one copy. A commit's
        arrival names its rank among the thread's commits in flight (-1 - rank for the tag,
        resolved against the machine's state by `replay`, whose tags are renumbered)."""
        enc = self.enc
        if actor < enc.P:
            return ("p", actor)
        c = enc.copies[actor - enc.P]
        e = c.event
        if c.commit:
            mine = [x for x in enc.commits if x.event.proc == e.proc]
            rank = sum(1 for x in mine[:mine.index(c)]
                       if S is not None and z3.is_true(ev(self._inflight(S, x.record))))
            return ("a", (AG_UMMA, enc.machine.mb_names[c.m][0], 0, 0, c.m, -1 - rank, e.proc, e.line, 0))
        _, buf, slot = c.key
        return ("a", (AG_TMA, c.cta, buf, slot, c.m, e.nbytes, e.proc, e.line, 0))


def check(protocol: ir.Protocol, options, machine: Machine) -> CheckResult:
    """`--engine bmc`: the protocol at its params, by Z3, counterexamples replayed by the machine."""
    from ..staticcheck import static_findings
    from . import merge_static
    from .explicit import _diagnostic, bound_of

    start = time.monotonic()
    bound = bound_of(protocol)
    try:
        bmc = BMC(machine)
    except Unsupported as why:
        return merge_static(CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE,
                                        bound=bound, coverage=f"unsupported by the bmc engine: {why}"),
                            static_findings(protocol, machine.programs))
    except InputError as err:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics))
    outcome = bmc.metered(budgets.Meter(options.timeout, options.max_memory_mb, start=start),
                          budgets.Units(options.rlimit))
    stats = Stats(0, 0, time.monotonic() - start, 0.0)  # no states are stored: the depth is in the coverage
    if outcome.verdict == "inconclusive":
        result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound=bound,
                             stats=stats, coverage=outcome.reason, stopped_by=outcome.stopped_by)
    elif outcome.verdict == "safe":
        result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.SAFE, bound=bound,
                             stats=stats, coverage=f"every interleaving, {outcome.depth} steps deep, by Z3 in "
                             f"{outcome.seconds:.1f}s")
    else:
        v, why = replay(machine, outcome)
        if v is None:
            result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE,
                                 bound=bound, stats=stats, coverage=f"internal: bmc counterexample not reproduced "
                                 f"by the explicit semantics ({why})")
        else:
            diag = _diagnostic(machine, v, outcome.labels, options.full_trace, None)
            result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.VIOLATION,
                                 bound=bound, diagnostics=(diag,), stats=stats,
                                 coverage=f"counterexample {outcome.depth} steps deep, by Z3 in {outcome.seconds:.1f}s")
    return merge_static(result, static_findings(protocol, machine.programs))


def replay(machine: Machine, outcome: Outcome) -> tuple[Violation | None, str]:
    """Run the solver's schedule through the machine; the finding it ends in, or why not."""
    from .explicit import _deadlock

    state = machine.initial()
    labels = outcome.labels
    tail = len(labels) - (0 if outcome.deadlock else outcome.last_group)  # where the bad step's labels start
    for n, label in enumerate(labels):
        if label[0] == "a" and label[1][0] == AG_UMMA and label[1][5] < 0:
            # a commit's arrival by its rank among its thread's commits in flight (BMC.label)
            tags = sorted(a[5] for a in state.agents if a[0] == AG_UMMA and a[6] == label[1][6])
            rank = -1 - label[1][5]
            if rank >= len(tags):
                return None, f"step {n + 1} (a tcgen05.commit arrival) is not in flight"
            label = labels[n] = ("a", (*label[1][:5], tags[rank], *label[1][6:]))
        res = machine.step(state, label)
        if res is None:
            return None, f"step {n + 1} ({label[0]} {label[1] if label[0] == 'p' else label[1][6]}) is blocked"
        finding = res.violation or (res.soft[0] if res.soft and n >= tail else None)
        if finding is not None:
            if n >= tail:
                return finding, ""
            return None, f"step {n + 1} breaks a rule ({finding.code}) before the end"
        state = res.state
    if outcome.deadlock:
        if list(machine.successors(state)) or all(machine.done(state, p) for p in range(len(machine.procs))):
            return None, "the final state is not a deadlock"
        return _deadlock(machine, state), ""
    return None, "the schedule ends without a finding"
