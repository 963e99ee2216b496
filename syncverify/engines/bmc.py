"""Bounded model checking with Z3: every interleaving of the protocol at its params, as SMT.

A second, independent way to search the same semantics, for cross-checking the explicit
engine (`--engine bmc`, `tests/test_bmc.py`, `bench/differential.py`).

Why it can be exact. Control flow in a `.sync` body depends only on loop variables and on
who executes it, never on barrier state, so at fixed params every process runs a fixed
sequence of operations (its *events*, unrolled here with the machine's own local control
flow). An execution is an interleaving of prefixes of those sequences with the completions
of the bulk copies they issue. Each step moves one actor (a process or an in-flight copy), so
every execution has at most D = (number of events) + (number of copies) steps, and checking
every depth up to D is a complete search: "safe" from this engine is a proof for these params.

The encoding (one Z3 variable per state component per step, `sel_i` the actor of step i):

* mbarriers: the `rules.Mbar` fields as integers, updated by the functions of
  `semantics.rules` run over Z3 terms (`Z3Arith`) — the same definitions the explicit
  engine runs over Python integers; likewise the wait rules and the named-barrier rules;
* happens-before: the knowledge model of `semantics.state` (every access record, and who
  knows it) stored holder-major: one bit-vector per holder over the records, so a release
  is a bitwise or, a phase completion a copy, a barrier reset a clear. Records are never
  created lazily: every access event owns one record bit, live from when it runs;
* each check the machine makes (docs/model.md) becomes a condition on the step that makes it.

At depth i the solver is asked for a path of i valid steps that ends in a deadlock or whose
next step breaks a rule; the first depth that answers yes gives a shortest counterexample,
which is replayed with `Machine.step` (so it is shown in the explicit engine's trace format,
and a path the machine does not confirm is reported, never hidden). Solver calls run under
a fixed seed and a resource limit (`rlimit`); `unknown` or the time budget ends inconclusive.

Scope: one CTA; mbarrier init/arrive (all forms)/expect_tx/complete_tx/wait, bulk-tensor
loads issued by one thread, generic reads and writes, `syncwarp`, named barriers and
`syncthreads`, wgmma and bulk-store reads with their groups (one lane set per process),
`fence.proxy.async`. Anything else is "unsupported" with the reason, not guessed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import z3

from .. import ir
from ..diagnostics import InputError
from ..result import CheckResult, Stats, Verdict
from ..semantics import rules
from ..semantics.machine import Machine, Violation
from ..semantics.program import END, OP
from ..semantics.state import AG_TMA, FULL, LEADER

SEED = 0
RLIMIT_PER_CHECK = 200_000_000  # Z3 resource units per query: a limit that does not depend on the machine
MAX_EVENTS = 4000


class Unsupported(Exception):
    """The protocol uses something this encoding does not model; the message says what."""


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

# record spaces of this encoding
DATA, INIT, OBS = 0, 1, 2


@dataclass
class Record:
    space: int
    key: tuple  # DATA: (buf, slot); INIT: (m,); OBS: (m,)
    kind: int  # READ 0 / WRITE 1
    owner: int
    part: int
    is_async: bool = False
    event: Event | None = None


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
    error: Violation | None = None  # evaluating its operands already fails: executing it is a violation
    m: int = -1
    targets: tuple[int, ...] = ()
    parity: int = 0
    count: int = 0
    nbytes: int | None = None
    key: tuple = ()
    record: int = -1
    bar_id: int = -1
    nb_count: int = -1  # -1: every non-exited thread
    pending: int = 0
    retires: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (record, holders that learn it)
    agent: int = -1  # for a bulk-tensor load: its actor number
    ordinal: int = 0  # which step of its process runs it (see Encoding._runs)


# Operations that touch only their own process, their slot's records and the copies they issue:
# `semantics.machine.LOCAL_OPS` minus those this encoding does not model.
FUSABLE = (ir.Access, ir.Syncwarp, ir.Fence, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad)


def _fusable(e: Event) -> bool:
    return e.error is None and isinstance(e.op, FUSABLE)


def _static(fn, *args):
    try:
        return fn(*args), None
    except Violation as v:
        return None, v


class Encoding:
    """The static layout (events, records, holders) and the Z3 transition relation."""

    def __init__(self, machine: Machine):
        self.machine = machine
        protocol = machine.protocol
        if protocol.cluster != 1:
            raise Unsupported("clusters of more than one CTA")
        self.P = len(machine.procs)
        self.M = len(machine.mb_names)
        self.records: list[Record] = []
        self.init_record = [self._new_record(Record(INIT, (m,), 1, -1, FULL)) for m in range(self.M)]
        self.nb_ids: list[int] = []
        self.events: list[list[Event]] = [self._unroll(p) for p in range(self.P)]
        self.agents: list[Event] = [e for evs in self.events for e in evs if isinstance(e.op, ir.TmaLoad)
                                    and e.error is None]
        for n, e in enumerate(self.agents):
            e.agent = self.P + n
        self.runs: list[dict[int, list[Event]]] = [self._runs(evs) for evs in self.events]
        self.H = 2 * self.P + 2 * self.M + len(self.nb_ids)
        self._size_numbers()
        self.R = max(len(self.records), 1)
        self._static_groups()
        self.waiters = {m: sorted({e.proc for evs in self.events for e in evs
                                   if isinstance(e.op, ir.MbarWait) and e.m == m}) for m in range(self.M)}
        self.obs_of = {m: [e.record for evs in self.events for e in evs
                           if isinstance(e.op, ir.MbarWait) and e.m == m and e.record >= 0] for m in range(self.M)}
        self.obs_mask = self._mask(r for r, rec in enumerate(self.records) if rec.space == OBS)

    # ------------------------------------------------------------------ layout
    def leader(self, p: int) -> int:
        return 2 * p

    def lanes_holder(self, p: int) -> int:
        return 2 * p + 1

    def cur(self, m: int) -> int:
        return 2 * self.P + 2 * m

    def last(self, m: int) -> int:
        return 2 * self.P + 2 * m + 1

    def nb(self, bar_id: int) -> int:
        return 2 * self.P + 2 * self.M + self.nb_ids.index(bar_id)

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

    def _event(self, p: int, index: int, ins, vars_: tuple) -> Event:
        mach = self.machine
        op = ins.op
        proc = mach.procs[p]
        env = mach.env(p, vars_)
        ctx = mach.ctx[p]
        leader = ins.leader_only or proc.nthreads == 1
        lanes = (self.leader(p),) if leader else (self.leader(p), self.lanes_holder(p))
        part = LEADER if leader else FULL
        creator = self.leader(p) if part == LEADER else self.lanes_holder(p)
        e = Event(p, index, op, ins.line, ins.threads, lanes, part, creator)
        kind = type(op)
        if kind in (ir.MbarArrive, ir.MbarTx) and op.remote is not None:
            raise Unsupported("remote mbarrier operations")
        if kind is ir.MbarInit:
            decl = mach.mb_decl[op.bar.name]
            count, e.error = (decl.count, None) if op.count is None else _static(mach._eval, op.count, env, ctx)
            if e.error is None and not 1 <= count <= rules.MAX_COUNT:
                e.error = Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
            e.count = count or 0
            if op.bar.every:
                e.targets = tuple(mach.mb_index[(0, op.bar.name, i)] for i in range(decl.size or 1))
            elif e.error is None:
                m, e.error = _static(mach._mbar, None, p, op.bar, 0, env, ctx)
                e.targets = (m,) if m is not None else ()
        elif kind in (ir.MbarArrive, ir.MbarTx, ir.MbarWait):
            e.m, e.error = _static(mach._mbar, None, p, op.bar, 0, env, ctx)
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
            e.bar_id, e.error = _static(mach._bar_id, op.bar_id, env, ctx, op.span)
            if e.error is None:
                count, e.error = _static(mach._bar_count, op.count, env, ctx, op.span)
                e.nb_count = -1 if count is None else count
                if e.bar_id not in self.nb_ids:
                    self.nb_ids.append(e.bar_id)
        elif kind is ir.Access:
            if op.remote is not None:
                raise Unsupported("distributed shared memory accesses")
            e.key, e.error = _static(mach._slot, op.buf, env, ctx)
            if e.error is None:
                e.record = self._new_record(Record(DATA, e.key, 1 if op.kind == "write" else 0, p, part, event=e))
        elif kind is ir.TmaLoad:
            if op.multicast is not None:
                raise Unsupported("multicast bulk copies")
            if ins.threads != 1:
                raise Unsupported(f"a bulk copy issued by {ins.threads} threads at once (line {ins.line})")
            e.key, e.error = _static(mach._slot, op.buf, env, ctx)
            if e.error is None:
                e.nbytes, e.error = _static(mach._eval, op.tx_bytes, env, ctx)
            if e.error is None and (e.nbytes <= 0 or e.nbytes % 16):
                e.error = Violation("SV107", f"copy of {e.nbytes} bytes: bulk copies need a positive multiple "
                                    "of 16", op.span)
            if e.error is None:
                e.m, e.error = _static(mach._mbar, None, p, op.bar, 0, env, ctx)
            if e.error is None:
                e.record = self._new_record(Record(DATA, e.key, 1, p, part, is_async=True, event=e))
        elif kind in (ir.WgmmaRead, ir.TmaStore):
            e.key, e.error = _static(mach._slot, op.buf, env, ctx)
            if e.error is None:
                e.record = self._new_record(Record(DATA, e.key, 0, p, part, is_async=True, event=e))
        elif kind is ir.GroupWait:
            e.pending, e.error = _static(mach._eval, op.pending, env, ctx)
        elif kind is ir.Fence:
            pass
        elif kind not in (ir.Syncwarp, ir.GroupCommit):
            raise Unsupported(f"`{kind.__name__}` operations")
        if e.error is not None:  # executing it is the violation; none of its operands is used
            e.m, e.targets, e.key, e.bar_id, e.parity, e.count, e.nbytes, e.pending = -1, (), (), -1, 0, 0, None, 0
        return e

    def _runs(self, evs: list[Event]) -> dict[int, list[Event]]:
        """The process's steps: each starts at an event and goes on through the local operations
        that follow it (as `Machine.successors` takes them alone, they run as soon as they are
        enabled), except the last event (its exit touches every all-thread barrier) and after a
        `bar.sync` (a completion restarts the warp after it, in another warp's step)."""
        runs: dict[int, list[Event]] = {}
        j = 0
        while j < len(evs):
            run = [evs[j]]
            if not isinstance(evs[j].op, ir.BarSync):
                while j + len(run) < len(evs) - 1 and _fusable(evs[j + len(run)]):
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
        depth = sum(len(es) for es in self.events) + len(self.agents)
        self.token_base = depth + 2  # a parked warp's token: bar_id * token_base + generation
        tx_total = sum(abs(e.nbytes or 0) for e in evs) + 1
        # |tx| never exceeds the bytes of every expect and complete together; when that stays below
        # the PTX range the range check is false in every execution and is left out
        self.tx_can_overflow = tx_total > rules.MAX_COUNT
        bound = max(tx_total, sum(abs(e.count) for e in evs) + max((abs(e.count) for e in evs), default=0),
                    17 * self.token_base, sum(self.machine.procs[e.proc].nthreads for e in evs
                                                  if e.bar_id >= 0) + self.machine.protocol.threads,
                    max((abs(e.parity) + abs(e.pending) for e in evs), default=0),
                    rules.MAX_COUNT + 1 if self.tx_can_overflow else 0)
        self.width = bound.bit_length() + 2

    def objects(self, e: Event) -> frozenset:
        """The shared objects an event reads or writes, for the partial-order constraint of
        `BMC.run`: its own process, the mbarriers and slots it uses (their records' bits and
        the barrier's knowledge holders included), and for a named barrier the barrier and
        every process that may be parked on it (a completion moves them on)."""
        out: set = {("proc", e.proc)}
        op = e.op
        if isinstance(op, ir.MbarInit):
            out |= {("m", m) for m in e.targets}
        elif e.m >= 0:
            out.add(("m", e.m))
        if e.key:
            out.add(("key", e.key))
        if e.bar_id >= 0:
            out.add(("nb", e.bar_id))
            out |= {("proc", q) for q, evs in enumerate(self.events)
                    if any(isinstance(x.op, ir.BarSync) and x.bar_id == e.bar_id for x in evs)}
        return frozenset(out)

    def num(self, value: int) -> z3.BitVecRef:
        return z3.BitVecVal(value, self.width)

    def var(self, name: str) -> z3.BitVecRef:
        return z3.BitVec(name, self.width)

    def _static_groups(self) -> None:
        """Which group wait retires each async read. Groups belong to the process and are fixed
        by its sequence of operations, so this is decided here (as `Machine.op_commit` and
        `op_group_wait` do step by step), for processes whose reads, commits and waits are all
        executed by the same lanes (elected lane alone, or all of them)."""
        for evs in self.events:
            unit_ops = [e for e in evs if isinstance(e.op, ir.WgmmaRead | ir.TmaStore | ir.GroupCommit
                                                        | ir.GroupWait)]
            if len({e.part for e in unit_ops}) > 1:
                raise Unsupported("async reads, commits and group waits of one process by different lanes")
            seq = {0: 0, 1: 0}
            open_reads: list[tuple[Event, int, int]] = []  # (read event, unit, group)
            for e in unit_ops:
                if isinstance(e.op, ir.WgmmaRead | ir.TmaStore):
                    unit = 1 if isinstance(e.op, ir.WgmmaRead) else 0
                    if e.record >= 0:
                        open_reads.append((e, unit, seq[unit]))
                    continue
                unit = 0 if e.op.unit == "bulk" else 1
                if isinstance(e.op, ir.GroupCommit):
                    seq[unit] += 1
                    continue
                if e.error is not None:
                    continue
                limit = seq[unit] - e.pending
                still = []
                for read, u, grp in open_reads:
                    if u == unit and grp < limit:
                        learn = tuple(h for h in e.lanes if h == self.leader(e.proc)) if read.part == LEADER \
                            else e.lanes
                        e.retires.append((read.record, learn))
                    else:
                        still.append((read, u, grp))
                open_reads = still
            for read, _, _ in open_reads:
                read.retires = [(-1, ())]  # never retired: marks the read for the exit check

    # ------------------------------------------------------------------ state
    def fresh(self, i: int) -> dict:
        S: dict = {}
        bv = lambda name: z3.BitVec(f"{name}_{i}", self.R)  # noqa: E731
        for p in range(self.P):
            S["pc", p] = self.var(f"pc{p}_{i}")
            S["parked", p] = z3.Bool(f"parked{p}_{i}")
            S["token", p] = self.var(f"token{p}_{i}")
        for m in range(self.M):
            for f in rules.Mbar._fields:
                S[f, m] = self.var(f"{f}{m}_{i}")
            S["observed", m] = z3.Bool(f"observed{m}_{i}")
            for p in self.waiters[m]:
                S["hist", m, p] = z3.Bool(f"hist{m}_{p}_{i}")
                S["jprev", m, p] = self.var(f"jprev{m}_{p}_{i}")
        for b in self.nb_ids:
            for f in ("count", "arrived", "gen"):
                S["nb_" + f, b] = self.var(f"nb{f}{b}_{i}")
        for h in range(self.H):
            S["K", h] = bv(f"K{h}")
            S["A", h] = bv(f"A{h}")
        S["live"] = bv("live")
        S["inflight"] = bv("inflight")
        for r, rec in enumerate(self.records):
            if rec.space == OBS:
                S["phase", r] = self.var(f"phase{r}_{i}")
        return S

    def initial(self, S: dict) -> list:
        zero = z3.BitVecVal(0, self.R)
        out = []
        for key, variable in S.items():
            name = key[0] if isinstance(key, tuple) else key
            if name == "parked" or name == "hist":
                out.append(variable == False)  # noqa: E712
            elif name == "observed":
                out.append(variable == True)  # noqa: E712  (a fresh mbarrier counts as observed: machine.initial)
            elif name == "nb_count":
                out.append(variable == -1)
            elif name in ("K", "A", "live", "inflight"):
                out.append(variable == zero)
            else:
                out.append(variable == 0)
        return out

    def bit(self, r: int) -> z3.BitVecRef:
        return z3.BitVecVal(1 << r, self.R)

    def done(self, w: Work, p: int) -> Any:
        return z3.And(w["pc", p] == len(self.events[p]), z3.Not(w["parked", p]))


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
    objects: frozenset = frozenset()  # what the move reads or writes beyond its own actor (see _objects)
    touches_all: bool = False  # an exit: it changes what every all-thread barrier and exit check sees


class Step:
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

    def release(self, w: Work, src: tuple[int, ...], tgt: int, c: Any = True) -> None:
        for space in ("K", "A"):
            w.cond(c, (space, tgt), w[space, tgt] | self.union(w, space, src))

    def acquire(self, w: Work, src: int, tgt: tuple[int, ...], c: Any = True) -> None:
        for space in ("K", "A"):
            value = w[space, src]
            for h in tgt:
                w.cond(c, (space, h), w[space, h] | value)

    def carry_obs(self, w: Work, src: tuple[int, ...], tgt: tuple[int, ...], c: Any = True) -> None:
        obs = self.union(w, "K", src) & self.enc.obs_mask
        for h in tgt:
            for space in ("K", "A"):
                w.cond(c, (space, h), w[space, h] | obs)

    def set_record(self, w: Work, r: int, known: tuple[int, ...], aknown: tuple[int, ...], c: Any = True) -> None:
        """The record's bits become exactly: known by ``known``, async-known by ``aknown``."""
        b = self.enc.bit(r)
        for h in range(self.enc.H):
            for space, holders in (("K", known), ("A", aknown)):
                value = w[space, h] | b if h in holders else w[space, h] & ~b
                w.cond(c, (space, h), value)

    # ---- mbarriers
    def tx_check(self, tx: Any) -> Any:
        return rules.tx_out_of_range(tx, Z3A) if self.enc.tx_can_overflow else z3.BoolVal(False)

    def mbar(self, w: Work, m: int) -> rules.Mbar:
        return rules.Mbar(*(w[f, m] for f in rules.Mbar._fields))

    def usable(self, w: Work, m: int, lanes: tuple[int, ...]) -> Any:
        """Machine._check_barrier_usable (one CTA): valid, and its init known by the lanes."""
        return z3.And(w["valid", m] == 1, self.knows(w, self.enc.init_record[m], lanes))

    def set_mb(self, w: Work, m: int, new: rules.Mbar, c: Any, release: tuple[int, ...] = (),
               contributor: tuple[int, ...] = ()) -> list[tuple[str, Any]]:
        """Machine._set_mb: store the rule's result; on a phase completion check the
        observations of the previous phase (SV501), drop them, and shift the knowledge."""
        enc = self.enc
        old_k = w["k", m]
        cur, last = enc.cur(m), enc.last(m)
        if release:
            self.release(w, release, cur, c)
        if contributor:
            self.carry_obs(w, contributor, (cur,), c)
        changed = z3.And(c, new.k != old_k)
        hard = []
        kill = z3.BitVecVal(0, enc.R)
        for r in enc.obs_of[m]:
            alive = z3.And(self.has(w["live"], r), w["phase", r] == old_k - 1)
            hard.append(("SV501", z3.And(changed, alive, z3.Not(self.has(w["K", cur], r)))))
            kill = kill | z3.If(z3.And(changed, w["phase", r] <= old_k - 1), enc.bit(r), z3.BitVecVal(0, enc.R))
        w["live"] = w["live"] & ~kill
        for space in ("K", "A"):
            w.cond(changed, (space, last), w[space, cur])
            w.cond(changed, (space, cur), z3.BitVecVal(0, enc.R))
        w.cond(changed, ("observed", m), z3.BoolVal(False))
        for f, value in zip(rules.Mbar._fields, new, strict=True):
            w.cond(c, (f, m), value)
        return hard

    # ---- races (Machine._conflicts)
    def conflicts(self, w: Work, e: Event, kind: int, async_op: bool) -> list[tuple[str, Any]]:
        out = []
        for r, rec in enumerate(self.enc.records):
            if rec.space != DATA or rec.key != e.key or rec.event is e or (rec.kind == 0 and kind == 0):
                continue
            po = rec.owner == e.proc and not rec.is_async and rec.part == e.part
            ordered = z3.And(z3.Not(self.has(w["inflight"], r)), z3.Or(po, self.knows(w, r, e.lanes)))
            out.append(("SV30x", z3.And(self.has(w["live"], r), z3.Not(ordered))))
            if async_op and rec.kind == 1 and not rec.is_async:
                fenced = z3.And(*[self.has(w["A", h], r) for h in e.lanes])
                out.append(("SV601", z3.And(self.has(w["live"], r), z3.Not(fenced))))
        return out

    # ---- named barriers
    def nb_state(self, w: Work, b: int) -> rules.NamedBar:
        return rules.NamedBar(w["nb_count", b], w["nb_arrived", b], w["nb_gen", b], 0, 0)

    def expected(self, w: Work, nb: rules.NamedBar) -> Any:
        enc = self.enc
        alive = sum((z3.If(enc.done(w, q), enc.num(0), enc.num(enc.machine.procs[q].nthreads))
                     for q in range(enc.P)), enc.num(0))
        return z3.If(nb.count == -1, alive, nb.count)

    def nb_try_complete(self, w: Work, b: int, c: Any) -> None:
        """Machine._nb_try_complete: a complete generation restarts its parked waiters."""
        enc = self.enc
        nb = self.nb_state(w, b)
        done_nb = rules.nb_complete(nb, self.expected(w, nb), Z3A, open_count=-1)
        complete = z3.And(c, nb.arrived > 0, nb.arrived >= self.expected(w, nb))
        token = b * enc.token_base + nb.gen
        holder = enc.nb(b)
        for q in range(enc.P):
            if not any(isinstance(e.op, ir.BarSync) and e.bar_id == b for e in enc.events[q]):
                continue
            waiting = z3.And(complete, w["parked", q], w["token", q] == token)
            self.acquire(w, holder, (enc.leader(q), enc.lanes_holder(q)), waiting)
            w.cond(waiting, ("parked", q), z3.BoolVal(False))
            w.cond(waiting, ("pc", q), w["pc", q] + 1)
        for f, value in (("count", done_nb.count), ("arrived", done_nb.arrived), ("gen", done_nb.gen)):
            w.cond(complete, ("nb_" + f, b), value)
        for space in ("K", "A"):
            w.cond(complete, (space, holder), z3.BitVecVal(0, enc.R))

    def exits(self, w: Work, before_done: Any) -> list[tuple[str, Any]]:
        """Machine._exit: generations of all threads may complete once warps have exited; a CTA
        may not exit with a copy in flight or an async read never retired (SV404)."""
        enc = self.enc
        for _ in range(2):  # a release can let a warp exit, which can complete another generation
            for b in enc.nb_ids:
                self.nb_try_complete(w, b, w["nb_count", b] == -1)
        all_done = z3.And(*[enc.done(w, q) for q in range(enc.P)])
        pending = [self.has(w["inflight"], r) for r in range(len(enc.records)) if enc.records[r].is_async
                   and enc.records[r].kind == 1]
        pending += [self.has(w["live"], e.record) for evs in enc.events for e in evs if e.retires == [(-1, ())]]
        return [("SV404", z3.And(z3.Not(before_done), all_done, z3.Or(*pending)))] if pending else []

    # ---- the actors
    def effects(self, depth: int) -> list[Effect]:
        """Every move from a state reached in ``depth`` steps. A process has taken at most
        ``depth`` steps of its own by then, so only its first ``depth + 1`` events can be
        current and only copies issued among its first ``depth`` can be in flight."""
        enc = self.enc
        out = []
        all_done = z3.And(*[enc.done(Work(self.S), q) for q in range(enc.P)])
        for p in range(enc.P):
            for start, run in list(enc.runs[p].items())[:depth + 1]:
                guard = z3.And(self.sel == p, self.S["pc", p] == start, z3.Not(self.S["parked", p]))
                out.append(self.run_of(run, guard, all_done))
        for e in enc.agents:
            if e.ordinal < depth:
                out.append(self.agent(e))
        return out

    def run_of(self, run: list[Event], guard: Any, all_done_before: Any) -> Effect:
        """One step of a process: its current event, then the local ones fused after it."""
        w = Work(self.S)
        hard: list[tuple[str, Any]] = []
        soft: list[tuple[str, Any]] = []
        enabled: Any = None
        objects: frozenset = frozenset()
        last = False
        for e in run:
            en, last = self.event(w, e, hard, soft, all_done_before)
            enabled = en if enabled is None else enabled
            objects |= self.enc.objects(e)
        return Effect(guard, enabled, hard, soft, w.upd, objects, last)

    def event(self, w: Work, e: Event, hard: list, soft: list, all_done_before: Any) -> tuple[Any, bool]:
        """Apply one event to ``w``, adding its checks; returns whether it can move, and whether
        it is its process's last event."""
        enabled: Any = z3.BoolVal(True)
        p = e.proc
        op = e.op
        if e.error is not None:
            hard.append((e.error.code, z3.BoolVal(True)))
            return enabled, False
        parks = False
        if isinstance(op, ir.MbarInit):
            hard.append(("SV403", z3.BoolVal(e.threads > 1)))
            for m in e.targets:
                hard.append(("SV403", w["valid", m] == 1))
                for f, value in zip(rules.Mbar._fields, rules.mb_init(e.count), strict=True):
                    w[f, m] = self.enc.num(value)
                w["observed", m] = z3.BoolVal(True)
                for q in self.enc.waiters[m]:
                    w["hist", m, q] = z3.BoolVal(False)
                for space in ("K", "A"):
                    for h in (self.enc.cur(m), self.enc.last(m)):
                        w[space, h] = z3.BitVecVal(0, self.enc.R)
                obs = self.enc._mask(self.enc.obs_of[m])
                w["live"] = w["live"] & ~z3.BitVecVal(obs, self.enc.R)
                self.set_record(w, self.enc.init_record[m], e.lanes, ())
        elif isinstance(op, ir.MbarArrive):
            m = e.m
            hard.append(("SV401", z3.Not(self.usable(w, m, e.lanes))))
            soft.append(("SV502", z3.Not(w["observed", m])))
            s = self.mbar(w, m)
            if op.drop:
                hard.append(("SV504", e.count >= s.exp))
            hard.append(("SV504", rules.arrive_overflows(s, e.count)))
            if e.nbytes is not None:
                hard.append(("SV503", self.tx_check(s.tx + e.nbytes)))
                rule = rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx
                new = rule(s, e.nbytes, e.count, Z3A)
            else:
                new = (rules.mb_arrive_drop if op.drop else rules.mb_arrive)(s, e.count, Z3A)
            release = e.lanes if op.sem == "release" else ()
            hard += self.set_mb(w, m, new, z3.BoolVal(True), release, e.lanes)
        elif isinstance(op, ir.MbarTx):
            m = e.m
            hard.append(("SV401", z3.Not(self.usable(w, m, e.lanes))))
            s = self.mbar(w, m)
            if op.kind == "expect":
                hard.append(("SV503", self.tx_check(s.tx + e.nbytes)))
                new = rules.mb_expect_tx(s, e.nbytes, Z3A)
            else:
                hard.append(("SV503", self.tx_check(s.tx - e.nbytes)))
                new = rules.mb_complete_tx(s, e.nbytes, Z3A)
            hard += self.set_mb(w, m, new, z3.BoolVal(True), (), e.lanes)
        elif isinstance(op, ir.MbarWait):
            enabled = self.wait(w, e, hard, soft)
        elif isinstance(op, ir.BarSync | ir.BarArrive):
            parks = isinstance(op, ir.BarSync)
            b = e.bar_id
            nb = self.nb_state(w, b)
            hard.append(("SV202", z3.And(nb.arrived > 0, nb.count != e.nb_count)))
            if parks:
                w["parked", p] = z3.BoolVal(True)
                w["token", p] = b * self.enc.token_base + nb.gen
            self.release(w, e.lanes, self.enc.nb(b))
            new = rules.nb_arrive(nb, e.nb_count, self.enc.machine.procs[p].nthreads, 0, 0, Z3A)
            w["nb_count", b] = new.count
            w["nb_arrived", b] = new.arrived
            self.nb_try_complete(w, b, z3.BoolVal(True))
        elif isinstance(op, ir.Syncwarp):
            both = (self.enc.leader(p), self.enc.lanes_holder(p))
            for space in ("K", "A"):
                value = self.union(w, space, both)
                for h in both:
                    w[space, h] = value
        elif isinstance(op, ir.Access):
            kind = 1 if op.kind == "write" else 0
            hard += self.conflicts(w, e, kind, False)
            self.add_record(w, e, kind)
        elif isinstance(op, ir.TmaLoad):
            hard.append(("SV401", z3.Not(self.usable(w, e.m, e.lanes))))
            hard += self.conflicts(w, e, 1, True)
            b = self.enc.bit(e.record)
            w["live"] = w["live"] | b
            w["inflight"] = w["inflight"] | b
            self.set_record(w, e.record, (), ())
        elif isinstance(op, ir.WgmmaRead | ir.TmaStore):
            hard += self.conflicts(w, e, 0, True)
            w["live"] = w["live"] | self.enc.bit(e.record)
            self.set_record(w, e.record, (), ())
        elif isinstance(op, ir.GroupWait):
            for r, learn in e.retires:
                b = self.enc.bit(r)
                for h in learn:
                    for space in ("K", "A"):
                        w[space, h] = w[space, h] | b
        elif isinstance(op, ir.Fence):
            if op.kind == "proxy_async":
                mine = self.enc._mask(r for r, rec in enumerate(self.enc.records)
                                      if rec.space == DATA and rec.owner == p and rec.kind == 1 and not rec.is_async
                                      and (e.part == FULL or rec.part == LEADER))
                mask = z3.BitVecVal(mine, self.enc.R)
                for h in (self.enc.leader(p), self.enc.lanes_holder(p)):
                    w["A", h] = w["A", h] | (w["K", h] & mask)
            # fence.mbarrier_init publishes inits to relaxed cluster arrives only: nothing in one CTA
        if not parks:
            w["pc", p] = w["pc", p] + 1
        last_event = e.index == len(self.enc.events[p]) - 1
        if last_event or isinstance(op, ir.BarSync | ir.BarArrive):
            hard += self.exits(w, all_done_before)
        return enabled, last_event

    def wait(self, w: Work, e: Event, hard: list, soft: list) -> Any:
        """Machine.op_wait (one CTA). Returns when the wait can move (pass, or break a rule)."""
        m, p = e.m, e.proc
        usable = self.usable(w, m, e.lanes)
        s = self.mbar(w, m)
        hist, jprev = w["hist", m, p], w["jprev", m, p]
        first = self.enc.num(rules.first_wait_phase(e.parity))
        intended = z3.If(hist, rules.intended_phase(jprev, e.parity, Z3A), first)
        jprev = z3.If(hist, jprev, self.enc.num(-1))
        aliases = rules.wait_aliases(s, intended)
        passes = rules.mb_wait_passes(s, e.parity, Z3A)
        hard.append(("SV401", z3.Not(usable)))
        hard.append(("SV501", z3.And(usable, aliases)))
        observed_phase = s.k - 1
        means_it = intended == observed_phase
        new_j = z3.If(z3.And(means_it, observed_phase > jprev), observed_phase, jprev)
        w["hist", m, p] = z3.BoolVal(True)
        w["jprev", m, p] = new_j
        w["observed", m] = z3.Or(w["observed", m], means_it)
        r = e.record
        # the observation record (replacing this process's older one of the same phase)
        same = self.enc._mask(x for x in self.enc.obs_of[m] if self.enc.records[x].owner == p and x != r)
        for x in self.enc.obs_of[m]:
            if same >> x & 1:
                drop = z3.And(means_it, w["phase", x] == observed_phase)
                w["live"] = w["live"] & z3.If(drop, ~self.enc.bit(x), z3.BitVecVal(-1, self.enc.R))
        w.cond(means_it, "live", w["live"] | self.enc.bit(r))
        w.cond(means_it, ("phase", r), observed_phase)
        self.set_record(w, r, e.lanes, e.lanes, means_it)
        if e.op.sem == "acquire":
            self.acquire(w, self.enc.last(m), e.lanes)
        else:
            self.carry_obs(w, (self.enc.last(m),), e.lanes)
        return z3.Or(z3.Not(usable), aliases, passes)

    def add_record(self, w: Work, e: Event, kind: int) -> None:
        """Machine._add_write / _add_read for a generic access: a write makes every older record
        of its slot irrelevant (dropped there, cleared here); a read replaces the same lanes'
        older reads of the slot."""
        enc = self.enc
        if kind == 1:
            older = enc._mask(r for r, rec in enumerate(enc.records) if rec.space == DATA and rec.key == e.key
                              and r != e.record)
        else:
            older = enc._mask(r for r, rec in enumerate(enc.records) if rec.space == DATA and rec.key == e.key
                              and rec.kind == 0 and rec.owner == e.proc and rec.part == e.part
                              and not rec.is_async and r != e.record)
        w["live"] = (w["live"] & ~z3.BitVecVal(older, enc.R)) | enc.bit(e.record)
        self.set_record(w, e.record, (e.creator,), (e.creator,) if kind == 0 else ())

    def agent(self, e: Event) -> Effect:
        """Machine._complete_tma: the copy's write lands, then complete_tx on its barrier."""
        enc = self.enc
        w = Work(self.S)
        r, m = e.record, e.m
        guard = z3.And(self.sel == e.agent, self.has(self.S["inflight"], r))
        w["inflight"] = w["inflight"] & ~enc.bit(r)
        self.set_record(w, r, (enc.cur(m),), (enc.cur(m),))
        hard = [("SV401", w["valid", m] != 1)]
        s = self.mbar(w, m)
        hard.append(("SV503", self.tx_check(s.tx - e.nbytes)))
        hard += self.set_mb(w, m, rules.mb_complete_tx(s, e.nbytes, Z3A), z3.BoolVal(True))
        return Effect(guard, z3.BoolVal(True), hard, [], w.upd,
                      frozenset({("m", m), ("key", e.key), ("proc", e.agent)}))


def blocked(step: Step, e: Event) -> Any:
    """A wait that cannot move in the step's start state (used for deadlock)."""
    if e.error is not None:
        return z3.BoolVal(False)
    w = Work(step.S)
    hard: list = []
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


class BMC:
    def __init__(self, machine: Machine):
        self.enc = Encoding(machine)

    def depth_bound(self) -> int:
        return sum(len(runs) for runs in self.enc.runs) + len(self.enc.agents)

    def run(self, seconds: float) -> Outcome:
        """Unroll step by step; ask the solver at depths 4, 8, 16, … and at the bound whether some
        path reaches a bad step within that depth. A path may stop early (``active`` false from
        some step on), so one query covers every shorter path too."""
        enc = self.enc
        start = time.monotonic()
        constraints: list = []
        S = enc.fresh(0)
        constraints += enc.initial(S)
        bound = self.depth_bound()
        sels: list = []
        bads: list = []  # per depth: (bad, deadlock, effects)
        active = z3.BoolVal(True)
        prev: dict = {}  # the previous step's objects (see touches)
        checkpoints = {bound} | {1 << n for n in range(2, bound.bit_length()) if 2 << n <= bound}
        for i in range(bound + 1):
            sel = enc.var(f"sel_{i}")
            sels.append(sel)
            step = Step(enc, S, sel)
            effects = step.effects(i)
            finding = [z3.And(eff.guard, eff.enabled, z3.Or(*[c for _, c in eff.hard + eff.soft]))
                       for eff in effects if eff.hard or eff.soft]
            deadlock = self.deadlock(step, i)
            touch = self.touches(effects)
            if i > 0:
                # Partial-order reduction (monotonic, after Kahlon, Wang and Gupta, CAV 2009): two
                # adjacent moves of different actors in decreasing actor order must share an object.
                # Moves on disjoint objects commute and neither enables nor disables the other, so
                # every execution has an equivalent one that obeys this, ending in the same state —
                # and a move that breaks a rule still breaks it when moved earlier past independent
                # moves, so every finding stays reachable.
                shared = [z3.And(prev[o], touch[o]) for o in prev if o in touch and o != "all"]
                constraints.append(z3.Implies(active, z3.Implies(
                    sels[-2] > sel, z3.Or(prev["all"], touch["all"], *shared))))
            prev = touch
            bads.append((z3.And(active, z3.Or(deadlock, *finding)), deadlock, effects, S))
            if i in checkpoints:
                left = seconds - (time.monotonic() - start)
                if left <= 0:
                    return Outcome("inconclusive", reason=f"time budget of {seconds:g}s reached at depth {i} of "
                                   f"{bound}", depth=i, seconds=time.monotonic() - start)
                # A fresh solver per query: Z3 then picks its non-incremental QF_BV strategy
                # (preprocessing, bit-blasting, SAT), measured several times faster here than
                # one incremental solver or a fixed bit-blasting tactic.
                solver = z3.Solver()
                solver.set("random_seed", SEED)
                solver.set("rlimit", RLIMIT_PER_CHECK)
                solver.set("timeout", max(1, int(left * 1000)))
                solver.add(*constraints)
                solver.add(z3.Or(*[bad[0] for bad in bads]))
                answer = solver.check()
                if answer == z3.sat:
                    return self.counterexample(solver.model(), sels, bads, start)
                if answer == z3.unknown:
                    return Outcome("inconclusive", reason=f"Z3 answered unknown at depth {i} of {bound} "
                                   f"({solver.reason_unknown()})", depth=i, seconds=time.monotonic() - start)
            if i == bound:
                break
            nxt = enc.fresh(i + 1)
            moves = z3.Bool(f"active_{i + 1}")
            constraints.append(z3.Implies(moves, active))
            constraints.append(z3.Implies(moves, z3.Or(*[
                z3.And(eff.guard, eff.enabled, z3.Not(z3.Or(*[c for _, c in eff.hard]))) if eff.hard
                else z3.And(eff.guard, eff.enabled) for eff in effects])))
            for key, variable in nxt.items():
                value = S[key]
                for eff in effects:
                    if key in eff.upd:
                        value = z3.If(eff.guard, eff.upd[key], value)
                constraints.append(variable == value)
            S = nxt
            active = moves
        return Outcome("safe", depth=bound, seconds=time.monotonic() - start)

    @staticmethod
    def touches(effects: list[Effect]) -> dict:
        """Per object: whether the step's move uses it ("all": the move is an exit)."""
        by_object: dict = {"all": []}
        for eff in effects:
            if eff.touches_all:
                by_object["all"].append(eff.guard)
            for o in eff.objects:
                by_object.setdefault(o, []).append(eff.guard)
        return {o: z3.Or(*guards) if guards else z3.BoolVal(False) for o, guards in by_object.items()}

    def counterexample(self, model: z3.ModelRef, sels: list, bads: list, start: float) -> Outcome:
        """The first bad step of the solver's path, as machine step labels (a process's step that
        runs fused local operations is as many machine steps)."""
        ev = lambda t: model.eval(t, model_completion=True)  # noqa: E731
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
        return [self.label(actor)]

    def deadlock(self, step: Step, depth: int) -> Any:
        enc = self.enc
        S = step.S
        w = Work(S)
        stuck = []
        for p in range(enc.P):
            waits = [z3.And(S["pc", p] == e.index, blocked(step, e)) for e in enc.events[p]
                     if isinstance(e.op, ir.MbarWait) and e.ordinal <= depth]
            stuck.append(z3.Or(enc.done(w, p), S["parked", p], *waits))
        all_done = z3.And(*[enc.done(w, p) for p in range(enc.P)])
        return z3.And(z3.Not(all_done), S["inflight"] == 0, *stuck)

    def label(self, actor: int) -> tuple:
        enc = self.enc
        if actor < enc.P:
            return ("p", actor)
        e = enc.agents[actor - enc.P]
        buf, slot = e.key
        return ("a", (AG_TMA, 0, buf, slot, e.m, e.nbytes, e.proc, e.line, 0))


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
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound=bound,
                           coverage=f"unsupported by the bmc engine: {why}")
    except InputError as err:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics))
    outcome = bmc.run(options.timeout)
    stats = Stats(0, 0, time.monotonic() - start, 0.0)  # no states are stored: the depth is in the coverage
    if outcome.verdict == "inconclusive":
        result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound=bound,
                             stats=stats, coverage=outcome.reason)
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
