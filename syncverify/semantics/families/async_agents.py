"""The semantics of asynchronous agents: TMA loads and stores, bulk groups (commit/wait), wgmma reads, fences,
tensor-memory allocation, and the agents' completions (the tcgen05 commit's: families/tcgen05.py).

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from .. import rules
from ..core import (
    STAY,
    StepResult,
    Violation,
    _detached,
    _key_bounds,
    _Work,
)
from ..program import OP
from ..state import (
    AG_CPARRIVE,
    AG_TMA,
    AG_UMMA,
    F_ASYNC,
    F_GENERIC,
    F_INFLIGHT,
    F_LANEWISE,
    F_RETIRED,
    FULL,
    GROUP_FIELDS,
    LEADER,
    M_VALID,
    NUNITS,
    P_PC,
    P_TOKEN,
    P_WGMMA,
    R_AKNOWN,
    R_EPOCH,
    R_FLAGS,
    R_GRP,
    R_KNOWN,
    R_LINE,
    R_OWNER,
    R_PART,
    R_REGION,
    R_SPACE,
    READ,
    SPACE_DATA,
    SPACE_OBS,
    SPACE_START,
    UNIT_BULK,
    UNIT_OF,
    UNIT_WGMMA,
    WRITE,
    State,
    retired_lane_by_lane,
)
from . import lane_groups, proxy_fence
from .encoding import DATA, Z3A
from .encoding.events import Copy, Record, Unsupported, no_operands, static_value
from .mbarrier_lifecycle import encode_fence_own_inits, fence_own_inits

if TYPE_CHECKING:
    from .encoding.effects import Work
    from .encoding.events import Event
    from .encoding.layout import Encoding


TMEM_COLUMNS = 512  # tensor-memory columns per CTA (PTX tcgen05 "Tensor Memory": 512 columns x 128 lanes)
# The group tag (R_GRP = NUNITS * group + unit) of async reads that lanes 1..31 issued but have not
# committed because their leader committed alone: a group number no wait reaches (see op_commit).
UNCOMMITTED = NUNITS << 40


class AsyncAgentOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def multicast_dests(self, proc, mask_expr: ir.Expr | None, env, ctx, span) -> list[int]:
        """The CTAs a multicast mask names (the executing CTA without one); SV405 outside the cluster."""
        if mask_expr is None:
            return [proc.cta]
        mask = self._eval(mask_expr, env, ctx)
        if mask <= 0 or mask >= 1 << self.ncta:
            raise Violation("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster", span)
        return [c for c in range(self.ncta) if mask >> c & 1]

    def op_tma_load(self, w, p, proc, op: ir.TmaLoad, ins, env, ctx, lanes) -> bool:
        buf, slot = self._slot(op.buf, env, ctx)
        nbytes = self._eval(op.tx_bytes, env, ctx)
        if nbytes <= 0 or nbytes % 16:
            raise Violation("SV107", f"copy of {nbytes} bytes: bulk copies need a positive multiple of 16", op.span)
        dests = self.multicast_dests(proc, op.multicast, env, ctx, op.span)
        part = self._part(p, ins)
        for cta in dests:
            # cta_group 2 (2-SM): the completion is signalled on the pair leader's barrier
            m = self._mbar(w, p, op.bar, cta & ~1 if op.cta_group == 2 else cta, env, ctx)
            self._check_barrier_usable(w, p, m, lanes, op.span, "tma.load completion")
            key = (SPACE_DATA, cta, buf, slot)
            self._conflicts(w, p, part, lanes, key, WRITE, op.span,
                            "clc.try_cancel write" if op.clc else "tma.load write", async_op=True)
            snap = self.copy_issue(w, p, lanes, op.cta_group == 2)  # (families/copy_causality.py)
            for _ in range(ins.threads):
                self._add_write(w, p, part, lanes, key, op.span.line, F_ASYNC | F_INFLIGHT)
                w.agents.append((AG_TMA, cta, buf, slot, m, nbytes, p, op.span.line, snap))
        return True

    def _async_read(self, w, p, proc, op: ir.TmaStore | ir.WgmmaRead, ins, env, ctx, lanes, unit: int,
                    what: str) -> bool:
        """An async-proxy read of a slot that lasts until a group wait retires it (§5, §6): it
        belongs to the process's open group of ``unit`` (UNIT_BULK, UNIT_WGMMA)."""
        buf, slot = self._slot(op.buf, env, ctx)
        key = (SPACE_DATA, proc.cta, buf, slot)
        part = self._part(p, ins)
        self._conflicts(w, p, part, lanes, key, READ, op.span, what, async_op=True)
        seq = w.procs[p][GROUP_FIELDS[unit]]
        # a store by some lanes (not the leader alone, not the whole warp) is in those lanes' own
        # groups, which the process's counter does not number (families/lane_groups.py)
        grp = lane_groups.issue_tag(unit) if lane_groups.lane_group_part(part) else NUNITS * seq + unit
        self._add_read(w, p, part, lanes, key, op.span.line, F_ASYNC, grp=grp)
        return True

    def op_tma_store(self, w, p, proc, op: ir.TmaStore, ins, env, ctx, lanes) -> bool:
        return self._async_read(w, p, proc, op, ins, env, ctx, lanes, UNIT_BULK, "tma.store source read")

    def op_wgmma_read(self, w, p, proc, op: ir.WgmmaRead, ins, env, ctx, lanes) -> bool:
        self._async_read(w, p, proc, op, ins, env, ctx, lanes, UNIT_WGMMA, "wgmma operand read")
        if self.wgmma_team[p]:
            self._mark_issue(w, p, lanes, w.procs[p][P_WGMMA])
        return True

    def _mark_issue(self, w: _Work, p: int, lanes: int, group: int) -> None:
        """The warpgroup's MMA of ``group`` runs only once this warp has issued it, so a wait
        that sees the group complete is causally after what this warp had observed by now: each
        observation the issuing lanes know is marked (R_EPOCH) with the team and the least group
        issued after it, and _wgmma_wait passes it on. One mark per observation: one of another
        team stays, which only passes on less (sound)."""
        team = self.team_index[p]
        nteams = len(self.teams)
        out = None
        for i, r in enumerate(w.records):
            if r[R_SPACE] == SPACE_OBS and r[R_KNOWN] & lanes:
                mark = r[R_EPOCH]
                if mark and ((mark - 1) % nteams != team or (mark - 1) // nteams <= group):
                    continue
                if out is None:
                    out = list(w.records)
                out[i] = (*r[:R_EPOCH], 1 + group * nteams + team, *r[R_EPOCH + 1:])
        if out is not None:
            w.records = tuple(out)

    def op_commit(self, w, p, proc, op: ir.GroupCommit, ins, env, ctx, lanes) -> bool:
        """`cp.async.bulk.commit_group` / `wgmma.commit_group` / `cp.async.commit_group` (§5, §6):
        the executing threads' uncommitted async operations become one group — per thread, not per
        warp.

        The process keeps one group counter, which is exact for the leader lane (it takes part
        in every commit). When the leader commits alone, lanes 1..31 commit nothing and their
        numbering falls behind; their operations (records of the whole warp) then lose their
        group number (UNCOMMITTED), so no wait retires them, until a commit by the whole warp
        files them under the group it closes. That is never earlier than the real group, so a
        wait retires them no sooner than PTX does (sound; at worst a race is reported that a
        more exact per-lane count would rule out)."""
        unit = UNIT_OF[op.unit]
        field_ = GROUP_FIELDS[unit]
        ps = w.procs[p]
        seq = ps[field_]
        part = self._part(p, ins)
        partial = part != FULL and proc.nthreads > 1  # the leader alone, or some lanes (a lane guard)
        out = []
        for r in w.records:
            grp = r[R_GRP]
            if r[R_OWNER] == p and 0 <= grp < lane_groups.LANE_GROUP and grp % NUNITS == unit \
                    and r[R_PART] == FULL:
                if partial:
                    r = (*r[:R_GRP], UNCOMMITTED + unit, *r[R_GRP + 1:])
                elif grp == UNCOMMITTED + unit:
                    r = (*r[:R_GRP], NUNITS * seq + unit, *r[R_GRP + 1:])
            out.append(r)
        w.records = lane_groups.commit(tuple(out), proc, p, unit, part)
        # the counter is the leader lane's: a commit by other lanes alone does not move it
        if lane_groups.leader_commits(proc, part):
            w.procs[p] = (*ps[:field_], seq + 1, *ps[field_ + 1:])
        return True

    def op_group_wait(self, w, p, proc, op: ir.GroupWait, ins, env, ctx, lanes) -> bool:
        """`cp.async.bulk.wait_group.read n` / `wgmma.wait_group n` / `cp.async.wait_group n`
        (§5, §6): every committed group but the n most recent is complete; its async reads (and
        cp.async writes) become ordered before the waiting lanes' later accesses."""
        unit = UNIT_OF[op.unit]
        committed = w.procs[p][GROUP_FIELDS[unit]]
        limit = committed - self._eval(op.pending, env, ctx)
        if unit == UNIT_WGMMA and self.wgmma_team[p]:
            return self._wgmma_wait(w, p, ins, lanes, limit)
        waiter = self._part(p, ins)
        leader = self.holders.leader(p)
        pending = committed - limit
        out = []
        for r in w.records:
            # Groups are per thread (PTX: "per-thread bulk async-group"): an elected lane's wait does
            # not retire the other lanes' reads, and a warp's wait orders an elected lane's read
            # before that lane alone; some lanes' stores are retired by their own lanes' waits
            # (families/lane_groups.py).
            if lane_groups.retires(r, proc, p, unit, waiter, limit, pending):
                if r[R_PART] == LEADER:
                    learn = lanes & leader
                elif retired_lane_by_lane(unit, r[R_PART]):
                    learn = lanes & self.holders.lanes(p)
                    r = (*r[:R_FLAGS], r[R_FLAGS] | F_LANEWISE, *r[R_FLAGS + 1:])
                else:
                    learn = lanes
                # (a cp.async copy is generic-proxy data: only a fence.proxy.async makes it async-known)
                alearn = 0 if r[R_FLAGS] & F_GENERIC else learn
                r = (*r[:R_GRP], -1, r[R_REGION], r[R_AKNOWN] | alearn, r[R_KNOWN] | learn)
            out.append(r)
        w.records = tuple(out)
        return True

    def _wgmma_wait(self, w: _Work, p: int, ins, lanes: int, limit: int) -> bool:
        """wgmma.wait_group of a warp of a warpgroup (program.wgmma_teams): the groups before
        ``limit`` are the warpgroup's, so every warp's reads in them are complete once the wait
        returns, and the waiting lanes learn them all. A group's operations start only when every
        warp of the warpgroup has issued them, so the wait blocks until each other warp has
        issued all of its groups before ``limit`` (committed them, or stands at the commit that
        closes the last), and passes on what they had observed then (_mark_issue). A read stays
        tagged with its group until every warp of the team knows it (a later wait of another
        warp still learns it); F_RETIRED marks it complete (docs/model.md, "Warpgroup-wide wgmma")."""
        team = self.wgmma_team[p]
        for q in team:
            if q != p:
                count = w.procs[q][P_WGMMA]
                if count < limit - 1:
                    return False
                if count == limit - 1:
                    nxt = self.programs[q].code[w.procs[q][P_PC]]
                    if not (nxt.kind == OP and isinstance(nxt.op, ir.GroupCommit) and nxt.op.unit == "wgmma"):
                        return False
        waiter = self._part(p, ins)
        leader = self.holders.leader(p)
        everyone = self.team_mask[p]
        nteams, team_id = len(self.teams), self.team_index[p]
        out = None
        for i, r in enumerate(w.records):
            grp = r[R_GRP]
            if r[R_SPACE] == SPACE_OBS:
                mark = r[R_EPOCH]  # observed before some warp of the team issued a group before the limit
                if mark and (mark - 1) % nteams == team_id and (mark - 1) // nteams < limit and \
                        (r[R_KNOWN] & lanes) != lanes:
                    if out is None:
                        out = list(w.records)
                    out[i] = (*r[:R_AKNOWN], r[R_AKNOWN] | lanes, r[R_KNOWN] | lanes)
            elif 0 <= grp < UNCOMMITTED and grp % NUNITS == UNIT_WGMMA and grp // NUNITS < limit \
                    and r[R_OWNER] in team and not (waiter == LEADER and r[R_PART] == FULL):
                learn = lanes & leader if r[R_PART] == LEADER else lanes
                known = r[R_KNOWN] | learn
                r = (*r[:R_FLAGS], r[R_FLAGS] | F_RETIRED, r[R_EPOCH], -1 if (known & everyone) == everyone else grp,
                     r[R_REGION], r[R_AKNOWN] | learn, known)
                if out is None:
                    out = list(w.records)
                out[i] = r
        if out is not None:
            w.records = tuple(out)
        return True

    def op_fence(self, w, p, proc, op: ir.Fence, ins, env, ctx, lanes) -> bool:
        """fence.proxy.async and its halves (§5): the generic writes it admits become visible to
        the async proxy (families/proxy_fence.py). fence.mbarrier_init (§2): the thread's own prior
        inits are released at cluster scope once a cluster barrier arrive follows."""
        part = self._part(p, ins)
        if op.kind == "proxy_async":
            w.records = proxy_fence.apply(w.records, self.holders, p, proc, part, lanes, op)
            return True
        w.records = fence_own_inits(w.records, self.holders, p, proc, part)
        return True

    def op_tmem(self, w, p, proc, op: ir.TmemAlloc, ins, env, ctx, lanes) -> bool:
        """tcgen05.alloc/dealloc (§7). With cta_group 2 the warp pair of the two CTAs acts
        collectively: "the issuing warp must make sure that peer CTA is launched" — so the
        issuer must know the peer's start (SV402) — and each waits for the other."""
        if op.dealloc and w.procs[p][P_TOKEN] < 0:
            self.tc_dealloc_check(w, p, lanes, proc.cta, op.span)  # (families/tcgen05.py)
        if op.cta_group == 1 or (op.dealloc and not self.assume.dealloc_blocks):
            return self._tmem_columns(w, proc.cta, op)
        if op.dealloc:
            self.assume.used.add("dealloc-blocks")  # the pair's dealloc waits for the peer (§10.8)
        idx = self.tmem_rendezvous(proc.cta, op)
        peer = proc.cta ^ 1
        arrived, gen = w.tmem[idx]
        ps = w.procs[p]
        if ps[P_TOKEN] < 0:  # first visit: join the rendezvous
            if not op.dealloc and not self._knows(w.records, (SPACE_START, peer, 0, 0), lanes):
                raise Violation("SV402", f"tmem.alloc cta_group 2 in CTA {proc.cta} may run before peer CTA {peer} "
                                "is running and has initialized its side (PTX: the issuing warp must make sure the "
                                "peer CTA is launched); put a cluster barrier before the allocation", op.span)
            if not self._tmem_columns(w, proc.cta, op):
                return False  # no room in this CTA's tensor memory yet: it joins once it has room
            arrived, new_gen, completes = rules.tm_join(arrived, gen, proc.cta & 1)
            w.tmem[idx] = (arrived, new_gen)
            if completes:
                return True
            w.procs[p] = (*ps[:P_TOKEN], gen, *ps[P_TOKEN + 1:])
            return STAY
        if gen > ps[P_TOKEN]:
            w.procs[p] = (*ps[:P_TOKEN], -1, *ps[P_TOKEN + 1:])
            return True
        return False

    def _tmem_columns_index(self, cta: int) -> int:
        return 2 * ((self.ncta + 1) // 2) + cta

    def _tmem_columns(self, w: _Work, cta: int, op: ir.TmemAlloc) -> bool:
        """Allocate or free op.cols columns of CTA ``cta``'s tensor memory (512 columns). An
        allocation without room cannot move: PTX's tcgen05.alloc "blocks, until the allocation is
        successful" — forever when nothing frees them (a deadlock, SV201). Freeing more than is
        allocated is SV406."""
        idx = self._tmem_columns_index(cta)
        used, relinquished = w.tmem[idx]
        if not op.dealloc:
            if relinquished:  # set by tmem.relinquish (families/tcgen05.py, op_tmem_relinquish)
                raise Violation("SV604", f"tmem.alloc in CTA {cta} after the CTA relinquished the right to "
                                "allocate (tcgen05.relinquish_alloc_permit: a later tcgen05.alloc of the CTA is "
                                "illegal)", op.span)
            if used + op.cols > TMEM_COLUMNS:
                return False
            w.tmem[idx] = (used + op.cols, relinquished)
            return True
        if op.cols > used:
            raise Violation("SV406", f"tmem.dealloc of {op.cols} columns in CTA {cta}, which has only {used} "
                            "allocated", op.span)
        w.tmem[idx] = (used - op.cols, relinquished)
        return True

    def _tmem_exit(self, w: _Work, cta: int) -> None:
        """SV406 when CTA ``cta`` exits with columns still allocated (PTX tcgen05, ptx-semantics.md
        §7: all Tensor Memory allocated "must be explicitly deallocated … before the kernel exits").
        Checked on every path, so the all-iterations lift sees it at every trip count (static/tmem_walk.py
        adds the totals up for the engines without the columns); reported at the CTA's first alloc
        in program order, where the walk's finding is reported too."""
        used = w.tmem[self._tmem_columns_index(cta)][0]
        if used:
            first = next(ins.op for q in self.procs_of_cta[cta] for ins in self.programs[q].code
                         if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc))
            where = f"CTA {cta}" if self.ncta > 1 else "the CTA"
            w.soft.append(Violation("SV406", f"{where} exits with tensor memory allocated: of its columns, {used} "
                                    "are still allocated (PTX: all Tensor Memory allocated must be deallocated "
                                    "before the kernel exits)", first.span))

    def tmem_rendezvous(self, cta: int, op: ir.TmemAlloc) -> int:
        """The cta_group 2 rendezvous of CTA ``cta``'s pair (one for allocations, one for
        deallocations): its index into the state's tmem; SV405 where the peer (rank ^ 1) is
        not in the cluster."""
        if cta ^ 1 >= self.ncta:
            raise Violation("SV405", "cta_group 2 needs the peer CTA (rank ^ 1) in the cluster", op.span)
        return (cta // 2) * 2 + int(op.dealloc)

    def _agent_enabled(self, state: State, a: tuple) -> bool:
        if a[0] == AG_UMMA and self.assume.tcgen05_commit_in_order:
            # successive commits of one thread deliver their arrivals in issue order (§10.8)
            if a[5] == min(b[5] for b in state.agents if b[0] == AG_UMMA and b[6] == a[6]):
                return True
            self.assume.used.add("commit-order")  # an arrival held back behind an earlier one
            return False
        return True

    def step_agent(self, state: State, a: tuple) -> StepResult:
        w = _Work(state)
        w.agents.remove(a)
        label = ("a", a)
        try:
            if a[0] == AG_TMA:
                self._complete_tma(w, a)
            elif a[0] == AG_CPARRIVE:
                self._complete_cp_arrive(w, a)  # families/cp_async.py
            else:
                self._complete_umma(w, a)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft, w.lone)

    def _agent_span(self, line: int) -> ir.Span:
        return ir.Span(self.protocol.path, line, 1, line, 2)

    def _agent_arrive(self, w: _Work, m: int, span: ir.Span, names: tuple[str, str, str],
                      publish: Callable[[], None]) -> None:
        """An asynchronous agent's completion arrives once on barrier m and publishes its writes:
        the arrive-on of a `cp.async.mbarrier.arrive` (families/cp_async.py) and of a
        `tcgen05.commit` (families/tcgen05.py). Both are an arrive(1) on a valid barrier (SV401),
        under the consumption rule (SV505, SV502), with an arrival pending (SV504); ``publish`` makes
        the agent's writes (and what else its arrival carries) known in the barrier's current
        phase, before the arrival that may complete it. ``names``: the operation, its arrival as
        the consumption rule names it, and as the over-arrival names it (the messages)."""
        what, landing, arrival = names
        old = w.mbars[m]
        if not old[M_VALID]:
            raise Violation("SV401", f"a {what} arrives on {self.mb_label(m)}, which is not initialized", span)
        s = self._rule_state(old)
        if rules.arrive_overflows(s, 1):
            raise Violation("SV504", f"{arrival} on {self.mb_label(m)} with nothing pending", span)
        self._check_consumption(w, m, span, landing, (new := rules.mb_arrive(s, 1)).k != s.k)
        publish()
        self._set_mb(w, m, new, old, span, landing)

    def _complete_tma(self, w: _Work, a: tuple) -> None:
        """A bulk copy completes (§5): its weak write lands, then complete_tx(bytes) on its
        barrier with .release at .cluster scope — covering the copy's own write only."""
        _, cta, buf, slot, m, nbytes, issuer, line, _ = a
        if self._cta_exited(w, cta):
            raise Violation("SV404", f"a bulk copy completes into CTA {cta}, which has exited",
                            self._agent_span(line))
        key = (SPACE_DATA, cta, buf, slot)
        cur = self.holders.mb_cur(m)
        # the first matching in-flight write lands (the cheap field tests first; one copy of the records)
        records = w.records
        lo, hi = _key_bounds(w, key)
        for i in range(lo, hi):
            r = records[i]
            if r[R_FLAGS] & F_INFLIGHT and r[R_LINE] == line and r[R_OWNER] == issuer and r[:4] == key:
                landed = (*r[:R_FLAGS], r[R_FLAGS] & ~F_INFLIGHT, r[R_EPOCH], r[R_GRP], r[R_REGION], cur, cur)
                w.records = (*records[:i], landed, *records[i + 1:])
                break
        if self.has_tensormaps:  # the copy's read of its tensor map lands with it (families/tensormap.py)
            self.tm_land(w, issuer, line, cur)  # type: ignore[attr-defined]
        old = w.mbars[m]
        if not old[M_VALID]:
            raise Violation("SV401", f"a bulk copy completes on {self.mb_label(m)}, which is not initialized",
                            self._agent_span(line))
        s = self._rule_state(old)
        if rules.tx_out_of_range(s.tx - nbytes):  # (the span is built only for the report)
            self._tx_check(m, s.tx - nbytes, self._agent_span(line))
        if a[8]:
            self.copy_complete(w, a, m)  # its issuer's observations (families/copy_causality.py)
        self._set_mb(w, m, rules.mb_complete_tx(s, nbytes), old, self._agent_span(line), "a bulk copy's landing")


HANDLERS: dict[type, Callable] = {
    ir.TmaLoad: AsyncAgentOps.op_tma_load,
    ir.TmaStore: AsyncAgentOps.op_tma_store,
    ir.GroupCommit: AsyncAgentOps.op_commit,
    ir.GroupWait: AsyncAgentOps.op_group_wait,
    ir.WgmmaRead: AsyncAgentOps.op_wgmma_read,
    ir.Fence: AsyncAgentOps.op_fence,
    ir.TmemAlloc: AsyncAgentOps.op_tmem,
}


class AsyncAgentEncoding:
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step)."""

    def tmem_rendezvous(self, w: Work, e: Event, hard: list) -> tuple[Any, Any]:
        """Machine.op_tmem for cta_group 2: on its first visit the warp joins the rendezvous of
        its CTA pair (an allocation must know the peer CTA's start, SV402); the second warp to
        join completes it and moves on, the first stays and leaves once the generation it joined
        has completed. Returns (can move, moves on)."""
        t, p = e.tm, e.proc
        token, arrived, gen = w["tmtoken", p], w["tm_arrived", t], w["tm_gen", t]
        first = token < 0
        if not e.op.dealloc:
            peer = self.enc.start_record[e.own ^ 1]
            hard.append(("SV402", z3.And(first, z3.Not(self.knows(w, peer, e.lanes)))))
        joined, joined_gen, full = rules.tm_join(arrived, gen, e.own & 1, Z3A)
        completes = z3.And(first, full)
        w["tm_arrived", t] = z3.If(first, joined, arrived)
        w["tm_gen", t] = z3.If(first, joined_gen, gen)
        w["tmtoken", p] = z3.If(first, z3.If(completes, token, gen), self.enc.num(-1))
        leaves = z3.And(z3.Not(first), gen > token)
        return z3.Or(first, leaves), z3.Or(completes, leaves)

    def ev_tmem(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `TmemAlloc` (Step.event). Returns (can move, places its own pc)."""
        p = e.proc
        if e.tm < 0:  # a cta_group 1 allocation: no rendezvous, nothing encoded
            return z3.BoolVal(True), False
        enabled, advances = self.tmem_rendezvous(w, e, hard)
        parks = True  # the pc moves only as advances says
        w["pc", p] = z3.If(advances, w["pc", p] + 1, w["pc", p])
        return enabled, parks

    def ev_tma_load(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `TmaLoad` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        for c in e.copies:  # Machine.op_tma_load: per destination CTA, in rank order
            hard += self.use_barrier(w, e, c.m)
            hard += self.conflicts(w, e, c.key, 1, True)
            b = enc.bit(c.record)
            w["live"] = w["live"] | b
            w["inflight"] = w["inflight"] | b
            self.set_record(w, c.record, (), ())
            # what the issuing lanes have observed, carried by the completion (CopyCausalityOps.copy_issue)
            self.carry_obs(w, e.lanes, (enc.snap_holder(c),))
        return z3.BoolVal(True), False

    def ev_async_read(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `WgmmaRead` and `TmaStore`, and of `CpAsync`, a write that is likewise
        known to no one until a group wait retires it (Step.event). Returns (can move, places its
        own pc)."""
        enc = self.enc
        if isinstance(e.op, ir.CpAsync):
            hard += self.conflicts(w, e, e.key, 1, False)
        else:
            hard += self.conflicts(w, e, e.key, 0, True)
        w["live"] = w["live"] | enc.bit(e.record)
        self.set_record(w, e.record, (), ())
        if e.record in enc.snapped:  # Machine._mark_issue: what the issuer had observed
            w["snap", e.record] = self.union(w, "K", e.lanes) & enc.obs_mask
        return z3.BoolVal(True), False

    def ev_group_wait(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `GroupWait` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        enabled = z3.BoolVal(True)
        if e.after is None:
            enabled = z3.BoolVal(False)  # another warp of the warpgroup never issues its part
        elif e.after:  # Machine._wgmma_wait: the other warps have issued the groups waited for
            enabled = z3.And(*[w["pc", q] >= i for q, i in e.after])
        for r in e.issued:  # Machine._wgmma_wait: observations made before the group's issue
            for h in e.lanes:
                for space in ("K", "A"):
                    w[space, h] = w[space, h] | w["snap", r]
        for r, learn in e.retires:  # (a cp.async copy is async-known only through a fence: ev_fence)
            b = enc.bit(r)
            for h in learn:
                for space in ("K",) if enc.records[r].generic else ("K", "A"):
                    w[space, h] = w[space, h] | b
        return enabled, False

    def ev_fence(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `Fence` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        p = e.proc
        op = e.op
        if op.kind == "proxy_async":  # Machine.op_fence: families/proxy_fence.py
            proxy_fence.encode(enc, w, e)
            return z3.BoolVal(True), False
        # Machine.op_fence: the fencing lanes' own inits (fence.mbarrier_init) become known on the
        # async side — what a relaxed cluster arrive then carries
        encode_fence_own_inits(enc, w, p, e.part)
        return z3.BoolVal(True), False


EVENTS: dict[type, Callable] = {
    ir.TmemAlloc: AsyncAgentEncoding.ev_tmem,
    ir.TmaLoad: AsyncAgentEncoding.ev_tma_load,
    ir.WgmmaRead: AsyncAgentEncoding.ev_async_read,
    ir.TmaStore: AsyncAgentEncoding.ev_async_read,
    ir.CpAsync: AsyncAgentEncoding.ev_async_read,
    ir.GroupWait: AsyncAgentEncoding.ev_group_wait,
    ir.Fence: AsyncAgentEncoding.ev_fence,
}


# ------------------------------------------------------------------ bmc: the unrolled events
def setup_tma_load(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_tma_load: its operands (SV107, SV405), then one copy (actor and write record)
    per destination CTA — the issuer's own, or every CTA of the multicast mask."""
    mach = enc.machine
    op = e.op
    if op.cta_group == 2:
        raise Unsupported(f"`tma.load cta_group 2` (a 2-SM copy signalled on the pair leader's barrier: not "
                          f"encoded), line {e.line}")
    if e.threads != 1:
        raise Unsupported(f"a bulk copy issued by {e.threads} threads at once (line {e.line})")
    slot, e.error = static_value(mach._slot, op.buf, env, ctx)
    if e.error is None:
        e.nbytes, e.error = static_value(mach._eval, op.tx_bytes, env, ctx)
    if e.error is None and (e.nbytes <= 0 or e.nbytes % 16):
        e.error = Violation("SV107", f"copy of {e.nbytes} bytes: bulk copies need a positive multiple "
                            "of 16", op.span)
    dests = [e.own]
    if e.error is None and op.multicast is not None:
        mask, e.error = static_value(mach._eval, op.multicast, env, ctx)
        if e.error is None and (mask <= 0 or mask >= 1 << enc.ncta):
            e.error = Violation("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster", op.span)
        dests = [c for c in range(enc.ncta) if (mask or 0) >> c & 1]
    bars = []
    for c in dests:
        if e.error is None:
            m, e.error = static_value(mach._mbar, None, e.proc, op.bar, c, env, ctx)
            bars.append(m)
    if e.error is None:
        for c, m in zip(dests, bars, strict=True):
            key = (c, *slot)
            r = enc._new_record(Record(DATA, key, 1, e.proc, e.part, is_async=True, event=e))
            e.copies.append(Copy(e, c, m, key, r))


def setup_async_access(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """A wgmma read, a bulk store's read or a cp.async write of a slot of the CTA's own shared
    memory: its record, asynchronous (known by nobody until a group wait retires it)."""
    slot, e.error = static_value(enc.machine._slot, e.op.buf, env, ctx)
    if e.error is None:
        e.key = (e.own, *slot)
        kind = 1 if isinstance(e.op, ir.CpAsync) else 0  # a cp.async writes its slot, the others read theirs
        e.record = enc._new_record(Record(DATA, e.key, kind, e.proc, e.part, is_async=True, event=e,
                                          generic=isinstance(e.op, ir.CpAsync)))


def setup_group_wait(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """The number of groups a wait leaves pending (which reads it retires: Encoding._static_groups)."""
    e.pending, e.error = static_value(enc.machine._eval, e.op.pending, env, ctx)


def tmem_no_op(machine: Any, op: ir.TmemAlloc) -> bool:
    """Machine.op_tmem does nothing but move on for a cta_group 1 allocation, and for a
    deallocation when the machine does not assume that it waits for the peer warp."""
    return op.cta_group == 1 or (op.dealloc and not machine.assume.dealloc_blocks)


def setup_tmem(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_tmem: the warp pair of CTAs rank and rank ^ 1 meets at one rendezvous per pair,
    one for allocations and one for deallocations (its index: ``e.tm``)."""
    if not tmem_no_op(enc.machine, e.op):
        if e.op.dealloc:
            enc.machine.assume.used.add("dealloc-blocks")
        tm, e.error = static_value(enc.machine.tmem_rendezvous, e.own, e.op)
        e.tm = -1 if tm is None else tm


def uses_async_access(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """An asynchronous access uses its slot as a read (Encoding.objects)."""
    return [(("key", e.key), "r")] if e.key else []


def uses_tmem(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """A cta_group 2 allocation or deallocation writes its rendezvous."""
    return [(("tm", e.tm), "w")] if e.tm >= 0 else []


SETUP: dict[type, Callable] = {ir.TmaLoad: setup_tma_load, ir.WgmmaRead: setup_async_access,
                               ir.TmaStore: setup_async_access, ir.CpAsync: setup_async_access,
                               ir.GroupWait: setup_group_wait, ir.TmemAlloc: setup_tmem, ir.Fence: no_operands,
                               ir.GroupCommit: no_operands}
USES: dict[type, Callable] = {ir.WgmmaRead: uses_async_access, ir.TmaStore: uses_async_access,
                              ir.CpAsync: uses_async_access, ir.TmemAlloc: uses_tmem}
