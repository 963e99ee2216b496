"""The static layout of the bmc encoding: the events every process runs at the spec's params
(unrolled with the machine's own local control flow, each set up by its family's ``SETUP`` entry),
their records and knowledge holders, the widths of the numbers, and the state components of one
step (``fresh``, ``initial``). engines/bmc/engine.py describes the encoding; engines/bmc/step.py
builds its transition relation over this layout. It satisfies the interface the families' encodings
are written against (semantics/families/encoding/layout.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import z3

from ... import ir
from ...semantics import rules
from ...semantics.families import (
    async_agents,
    barriers,
    cp_async,
    globalmem,
    mbarrier_encoding,
    memory,
    tcgen05,
)
from ...semantics.families.encoding import DATA, INIT, OBS, START
from ...semantics.families.encoding.events import Copy, Event, Record, Unsupported
from ...semantics.families.lifecycle import EXIT_DRAINS_BULK_READS
from ...semantics.families.storage import uses_storage
from ...semantics.machine import Machine, Violation
from ...semantics.program import END, OP, Instr, lane_part, own_part_hidden, part_lanes
from ...semantics.state import FULL, LEADER, UNIT_BULK, UNIT_CPASYNC, UNIT_OF, UNIT_WGMMA, retired_lane_by_lane
from .por import EncodingIndependence
from .symmetry import EncodingSymmetry

if TYPE_CHECKING:
    from ...semantics.families.encoding.effects import Work

MAX_EVENTS = 4000

# per operation type: the evaluation of its operands into its event (Encoding._event)
SETUP: dict[type, Callable] = {**mbarrier_encoding.SETUP, **barriers.SETUP, **memory.SETUP, **async_agents.SETUP,
                               **tcgen05.SETUP}
# operations the machine has that this encoding does not model, and why
REFUSED: dict[type, str] = {**mbarrier_encoding.REFUSED, **cp_async.REFUSED, **tcgen05.REFUSED, **globalmem.REFUSED}


class Encoding(EncodingSymmetry, EncodingIndependence):
    """The static layout (events, records, holders, state components) of the Z3 transition relation."""

    def __init__(self, machine: Machine):
        self.machine = machine
        shared = uses_storage(machine.protocol)
        if shared is not None:
            raise Unsupported(f"a barrier in a buffer's bytes ({shared}): the records of a barrier's bytes "
                              "becoming data after its inval are not encoded")
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
        # then one holder per copy and commit: what its issuer had observed (snap_holder)
        self._snap_index = {id(c): n for n, c in enumerate(self.copies)}
        self.H = self.H0 + len(self.copies)
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
                                if (rec.space == DATA and rec.kind == 1 and (not rec.is_async or rec.generic)
                                    and rec.key in async_keys)
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

    def lanes_synced(self, p: int, first: int, last: int) -> bool:
        """Does a `syncwarp` or `bar.sync` of process p lie between its events ``first`` and ``last``
        (program order)? Then every lane of its warp is ordered after every lane's access at ``first``
        (Machine: state.F_LANESYNCED, program.lanes_meet_unordered)."""
        return any(isinstance(x.op, ir.Syncwarp | ir.BarSync) for x in self.events[p][first + 1:last])

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
        them (the same helpers, so the same errors), its records created — by its family's set-up
        (``SETUP``)."""
        mach = self.machine
        op = ins.op
        kind = type(op)
        if kind in REFUSED:
            raise Unsupported(f"{REFUSED[kind]}, line {ins.line}")
        setup = SETUP.get(kind)
        if setup is None:
            raise Unsupported(f"`{kind.__name__}` operations")
        proc = mach.procs[p]
        env = mach.env(p, vars_)
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
        setup(self, e, env, mach.ctx[p])
        if e.error is not None:  # executing it is the violation; none of its operands is used
            e.m, e.targets, e.key, e.nb, e.parity, e.count, e.nbytes, e.pending = -1, (), (), -1, 0, 0, None, 0
            e.copies, e.inits, e.record, e.cta, e.tm = [], (), -1, e.own, -1
        return e

    def snap_holder(self, c: Copy) -> int:
        """The knowledge holder of what a commit's arrival carries, or of the observations a bulk
        copy's completion carries (after the fixed holders; families/copy_causality.py)."""
        return self.H0 + self._snap_index[id(c)]

    def earlier_commits(self, c: Copy) -> list[Copy]:
        """The arrivals of the same thread's earlier commits, which (in order) land first."""
        if not self.machine.assume.tcgen05_commit_in_order:
            return []
        mine = [x for x in self.commits if x.event.proc == c.event.proc]
        if mine.index(c):
            self.machine.assume.used.add("commit-order")  # an arrival ordered behind an earlier one
        return mine[:mine.index(c)]

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
        # cp.async records of some/all lanes -> the index of the own wait that retires them
        self.lanewise: dict[int, int] = {}
        self.per_lane: set[int] = set()  # every async record its lanes' own waits retire (both kinds)
        for e, unit, limit in waits:
            team = team_of[e.proc] if unit == UNIT_WGMMA and team_of[e.proc] else (e.proc,)
            for q in team:
                for read, u, grp in reads[q]:
                    if u == unit and grp < limit:
                        if read.part == LEADER:
                            learn = tuple(h for h in e.lanes if h == self.leader(e.proc))
                        elif retired_lane_by_lane(unit, read.part):
                            # (Machine.op_group_wait, F_LANEWISE): the lanes' holder learns it; a
                            # cp.async write is then in program order for its lanes (its own part)
                            learn = tuple(h for h in e.lanes if h == self.lanes_holder(e.proc))
                            self.per_lane.add(read.record)
                            if unit == UNIT_CPASYNC:
                                self.lanewise.setdefault(read.record, e.index)
                        else:
                            learn = e.lanes
                        e.retires.append((read.record, learn))
                        retired.add(read.record)
                        if len(team) > 1:
                            e.issued.append(read.record)
            if len(team) > 1 and limit > 0:
                after = [(q, commits[q][limit - 1]) for q in team if q != e.proc and len(commits[q]) >= limit]
                e.after = after if len(after) == len(team) - 1 else None
        for p in reads:
            for read, unit, _ in reads[p]:
                if read.record not in retired:
                    if unit == UNIT_BULK and self.machine.assume.exit_drains_bulk_reads:
                        # the exit waits for a bulk store's source read (LifecycleOps._unretired_at_exit)
                        self.machine.assume.used.add(EXIT_DRAINS_BULK_READS)
                        continue
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
                                        own_part_hidden(proc, rec.owner, rec.part,
                                                        rec.is_async and r not in self.per_lane, releasing,
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
