"""The semantics of named barriers (`bar.sync`, `bar.arrive`, `syncthreads`), the cluster barrier and `syncwarp`.

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ... import ir
from ...diagnostics import Severity
from ...z3_lazy import z3
from .. import rules
from ..core import (
    PLACED,
    STAY,
    Violation,
    _Work,
)
from ..program import (
    BAR_WAIT,
    END,
    Process,
)
from ..state import (
    F_ASYNC,
    F_LANESYNCED,
    F_WARPSYNCED,
    LEADER,
    P_CLTOKEN,
    P_PC,
    P_TOKEN,
    P_VARS,
    R_FLAGS,
    R_KNOWN,
    R_OWNER,
    R_PART,
    acquire,
    clear_bits,
    hidden_like_own_access,
    release,
    shift_phase,
)
from .encoding import INIT, Z3A, Z3Arith
from .encoding.events import Unsupported, no_operands, static_value
from .mbarrier_lifecycle import encode_fence_own_inits, fence_own_inits
from .warp_collective_order import clear_collective

# A reading PTX does not give, off unless asked for (`--assume relaxed-arrive-publishes-init`; Options.assume_
# relaxed_arrive_publishes_init): a `barrier.cluster.arrive.relaxed` publishes the arriving lanes' own earlier
# `mbarrier.init`s to the threads that then pass the cluster wait, as if a `fence.mbarrier_init.release.cluster`
# came right before it. To the letter (the default) the fence's "synchronizing effect ... only applies to the prior
# mbarrier.init operations executed by the same thread" and a `.relaxed` arrive orders no earlier access, so a
# peer's use of such an init is SV402 (docs/model.md, "Not adopted: a barrier init published by a relaxed cluster
# arrive alone"; CUTLASS's sm100 GEMM's teardown barrier is that case). A result that used it names it in
# `assumed`: the explicit engine when the arrive published an init the thread had not fenced, bmc when an arrive
# of a thread that initializes some barrier was encoded with it.
RELAXED_ARRIVE_PUBLISHES_INIT = "relaxed-arrive-publishes-init"

if TYPE_CHECKING:
    from ..state import State
    from .encoding.effects import Work
    from .encoding.events import Event
    from .encoding.layout import Encoding


class BarrierOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _nb_expected(self, w: _Work, cta: int, nb: rules.NamedBar) -> int:
        """The threads a generation needs: its count, or every thread of the CTA still running.
        (Asked at every arrival: on the ping-pong GEMM the sum over the CTA's processes was a tenth
        of the search, so what it reads of each process is looked up once per machine.)"""
        if nb.count is not None:
            return nb.count
        return self._cta_threads_running(w.procs, cta)

    def _cta_threads_running(self, procs: tuple | list, cta: int) -> int:
        """The threads of CTA ``cta`` whose processes have not ended (by their positions ``procs``)."""
        return sum([n for q, code, n in self._cta_threads()[cta] if code[procs[q][P_PC]].kind != END])

    def _cta_threads(self) -> list[list[tuple[int, list, int]]]:
        """Per CTA: each process's index, its code and its thread count (fixed by the machine)."""
        table = self.__dict__.get("_cta_threads_table")
        if table is None:
            table = self.__dict__["_cta_threads_table"] = [
                [(q, self.programs[q].code, self.procs[q].nthreads) for q in qs] for qs in self.procs_of_cta]
        return table

    def _nb_arrive(self, w: _Work, p: int, proc: Process, bar_id: int, count: int | None, span, aligned: bool,
                   lanes: int) -> None:
        idx = proc.cta * 16 + bar_id
        nb = w.named[idx]
        site = span.line * 4096 + span.column  # a static site: line and column
        mismatch, twice, elsewhere = _nb_arrival_findings(nb, count, proc.warp, site, aligned)
        if mismatch:
            show = lambda c: "all threads" if c is None else str(c)  # noqa: E731
            raise Violation("SV202", f"barrier {bar_id}: this arrival says {show(count)} threads but the open "
                            f"generation was started with {show(nb.count)}", span)
        bit = 1 << proc.warp
        if twice:
            w.warnings.append(Violation("SV203", f"warp {proc.warp} arrives a second time in one generation of "
                                        f"barrier {bar_id} (legal: the barrier counts threads, but check that it "
                                        "is intended)", span, severity=Severity.WARNING))
        if elsewhere:
            w.warnings.append(Violation("SV204", f"aligned barrier {bar_id} reached at line {span.line}, column "
                                        f"{span.column} while other warps of this generation reached it at line "
                                        f"{nb.site // 4096}, column {nb.site % 4096}", span,
                                        severity=Severity.WARNING))
        w.records = release(w.records, lanes, self.holders.nb(proc.cta, bar_id))
        w.named[idx] = rules.nb_arrive(nb, count, proc.nthreads, bit, site if aligned else 0)
        self._nb_try_complete(w, proc.cta, bar_id)

    def _nb_try_complete(self, w: _Work, cta: int, bar_id: int) -> None:
        idx = cta * 16 + bar_id
        nb = w.named[idx]
        if not nb.arrived:
            return
        done = rules.nb_complete(nb, self._nb_expected(w, cta, nb))
        if done == nb:
            return
        w.named[idx] = done
        bit = self.holders.nb(cta, bar_id)
        token = idx * 65536 + nb.gen
        if not self._nb_release_waiters_at_once(w, cta, bit, token):
            for q in self.procs_of_cta[cta]:
                qs = w.procs[q]
                ins = self.programs[q].code[qs[P_PC]]
                if ins.kind == BAR_WAIT and qs[P_TOKEN] == token:
                    w.records = acquire(w.records, bit, self.holders.proc_mask(q))
                    w.records = _mark_lanesynced(w.records, {q})
                    pc, vars_ = self._run_local(q, qs[P_PC] + 1, qs[P_VARS])
                    w.procs[q] = (pc, vars_, -1, *qs[3:])
                    if self.programs[q].code[pc].kind == END:
                        self._exit(w, q)
        w.records = clear_bits(w.records, bit)

    def _nb_release_waiters_at_once(self, w: _Work, cta: int, bit: int, token: int) -> bool:
        """_nb_try_complete's loop over the waiters of a completed generation (each in turn: the
        barrier's knowledge acquired, its own accesses ordered before its lanes, its move on and its
        exit), done in one pass over the records where no waiter ends: True where done, False
        (nothing changed) where the loop must run. Exact: the acquires from the barrier's holder
        add up (each adds what that holder knows, which none of them changes, since no waiter's
        holders are the barrier's), marking the accesses ordered reads and writes only owners and
        flags, which no acquire touches, and a move changes only its process's position. On the 2x1
        cooperative GEMM the epilogue's `bar.sync` completions, eight waiters each, made two passes
        over every record per waiter."""
        procs = w.procs
        waiters = [q for q in self.procs_of_cta[cta]
                   if self.programs[q].code[procs[q][P_PC]].kind == BAR_WAIT and procs[q][P_TOKEN] == token]
        masks = 0
        moves = []
        try:
            for q in waiters:
                masks |= self.holders.proc_mask(q)
                moves.append(self._run_local(q, procs[q][P_PC] + 1, procs[q][P_VARS]))
        except Violation:
            return False  # (the loop reports it where it meets it)
        if masks & bit or any(self.programs[q].code[pc].kind == END for q, (pc, _) in zip(waiters, moves, strict=True)):
            return False
        w.records = _mark_lanesynced(acquire(w.records, bit, masks), set(waiters))
        for q, (pc, vars_) in zip(waiters, moves, strict=True):
            procs[q] = (pc, vars_, -1, *procs[q][3:])
        return True

    def _bar_id(self, expr: ir.Expr, env, ctx, span) -> int:
        bar_id = self._eval(expr, env, ctx)
        if not 0 <= bar_id <= 15:
            raise Violation("SV106", f"named-barrier id {bar_id} is outside 0..15", span)
        return bar_id

    def _bar_count(self, expr: ir.Expr | None, env, ctx, span) -> int | None:
        if expr is None:
            return None
        count = self._eval(expr, env, ctx)
        if count <= 0 or count % 32 or count > self.cta_threads:
            raise Violation("SV106", f"named-barrier count {count} is not a positive multiple of 32 within the "
                            "CTA", span)
        return count

    def named_arrival(self, p: int, op: ir.BarSync | ir.BarArrive, vars_: tuple) -> tuple[int, int | None, int, bool]:
        """What an arrival of process p on a named barrier writes into its generation, the way
        _nb_arrive does: (barrier index cta * 16 + id, count, the site an open generation keeps,
        whether the warp then waits). Raises Violation (or EvalError) where the step reports one."""
        env, ctx = self.env(p, vars_), self.ctx[p]
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        sync = isinstance(op, ir.BarSync)
        site = op.span.line * 4096 + op.span.column if sync else 0
        return self.procs[p].cta * 16 + bar_id, count, site, sync

    def named_arrival_quiet(self, state: State, p: int) -> bool | None:
        """What the step of process p's named-barrier arrival (`bar.sync`, `bar.arrive`) reports,
        asked without taking it: False where it reports nothing and leaves the process running,
        True where it reports warnings only (SV203, SV204), None where that is not known here.

        Known where the arrival leaves its generation open: the step is then _nb_arrive's checks
        (SV106 through named_arrival, SV202, SV203, SV204: _nb_arrival_findings, which the step
        applies too), a release into the barrier's holder and the new generation count, and the
        process parks at its `bar.sync` wait or runs its local control flow to its next
        instruction. Nothing else can report a finding or end a process. A generation it
        completes moves every waiter on (their exits, their knowledge): None. The partial-order
        reduction asks this to learn that a step breaks no rule without computing its knowledge
        updates (on the 2x1 cooperative GEMM the epilogue's `bar.sync` steps so computed were set
        aside in most states)."""
        pstate = state.procs[p]
        op = self.programs[p].code[pstate[P_PC]].op
        # named_arrival is a function of (p, pc, vars): remembered per machine (None: it raises)
        memo = self.__dict__.setdefault("_named_arrivals", {})
        key = (p, pstate[P_PC], pstate[P_VARS])
        arrival = memo.get(key, memo)
        if arrival is memo:
            try:
                arrival = self.named_arrival(p, op, pstate[P_VARS])
            except Violation:
                arrival = None
            if len(memo) >= 1 << 16:
                memo.clear()
            memo[key] = arrival
        if arrival is None:
            return None
        idx, count, _, sync = arrival
        proc = self.procs[p]
        nb = state.named[idx]
        aligned = sync and op.aligned
        mismatch, twice, elsewhere = _nb_arrival_findings(nb, count, proc.warp, op.span.line * 4096 + op.span.column,
                                                          aligned)
        if mismatch:
            return None
        # the generation after the arrival (rules.nb_arrive) and what completes it (_nb_try_complete)
        need = count if nb.arrived == 0 else nb.count
        if need is None:
            need = self._cta_threads_running(state.procs, proc.cta)
        if nb.arrived + proc.nthreads >= need:
            return None  # it completes the generation
        if not sync:
            try:
                pc, _ = self._run_local(p, pstate[P_PC] + 1, pstate[P_VARS])
            except Violation:
                return None
            if self.programs[p].code[pc].kind == END:
                return None
        return twice or elsewhere

    def op_bar_sync(self, w, p, proc, op: ir.BarSync, ins, env, ctx, lanes) -> bool:
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        idx = proc.cta * 16 + bar_id
        gen = w.named[idx].gen
        ps = w.procs[p]
        # park at the BAR_WAIT that follows; completion (maybe right now, by this very arrival)
        # moves us on — possibly around a loop back to this bar.sync, hence PLACED
        w.procs[p] = (ps[P_PC] + 1, ps[P_VARS], idx * 65536 + gen, *ps[3:])
        self._nb_arrive(w, p, proc, bar_id, count, op.span, op.aligned, lanes)
        return PLACED

    def op_bar_arrive(self, w, p, proc, op: ir.BarArrive, ins, env, ctx, lanes) -> bool:
        bar_id = self._bar_id(op.bar_id, env, ctx, op.span)
        count = self._bar_count(op.count, env, ctx, op.span)
        self._nb_arrive(w, p, proc, bar_id, count, op.span, False, lanes)
        return True

    def _cluster_expected(self, w: _Work) -> int:
        return sum(self.procs[q].nthreads for q in range(len(self.procs))
                   if self.programs[q].code[w.procs[q][P_PC]].kind != END)

    def _cb_try_complete(self, w: _Work) -> None:
        cb = rules.ClusterBar(*w.cluster)
        if not cb.arrived:
            return  # (nothing can complete: spares counting the threads still running)
        done = rules.cb_complete(cb, self._cluster_expected(w))
        if done.gen != cb.gen:
            w.records = shift_phase(w.records, 1 << self.holders.cl_cur, 1 << self.holders.cl_last)
            w.cluster = tuple(done)

    def op_cluster_arrive(self, w, p, proc, op: ir.ClusterArrive, ins, env, ctx, lanes) -> bool:
        ps = w.procs[p]
        cb = rules.ClusterBar(*w.cluster)
        if rules.cb_arrives_twice(ps[P_CLTOKEN], cb.gen):
            raise Violation("SV205", "cluster barrier arrive a second time before the generation of this warp's "
                            "earlier arrival completed (PTX: each thread must arrive only once before the barrier "
                            "completes)", op.span)
        cur = 1 << self.holders.cl_cur
        if op.relaxed and self.assume.relaxed_arrive_publishes_init:
            # The reading RELAXED_ARRIVE_PUBLISHES_INIT: the arriving lanes' own earlier inits are published
            # as a fence.mbarrier_init right before the arrive would publish them (families/mbarrier_lifecycle.py)
            fenced = fence_own_inits(w.records, self.holders, p, proc, self._part(p, ins))
            if fenced is not w.records:
                self.assume.used.add(RELAXED_ARRIVE_PUBLISHES_INIT)
                w.records = fenced
        # A relaxed arrive orders nothing, except inits published by fence.mbarrier_init; any arrive
        # shows that this CTA is running (its start record travels).
        w.records = release(w.records, lanes, cur, relaxed=op.relaxed)
        w.procs[p] = (*ps[:P_CLTOKEN], cb.gen, *ps[P_CLTOKEN + 1:])
        w.cluster = tuple(rules.cb_arrive(cb, proc.nthreads, 1 << p))
        self._cb_try_complete(w)
        # Taken alone by partial-order reduction where every arrival is waited on before an exit
        # (Reduction.cluster_arrivals_waited): then the generation cannot complete without this arrival —
        # the threads that arrived have not exited, and this warp runs — so no wait of it can
        # pass and no exit can complete it first; arrivals add up and releases accumulate in
        # any order.
        w.lone = True
        return True

    def op_cluster_wait(self, w, p, proc, op: ir.ClusterWait, ins, env, ctx, lanes) -> bool:
        ps = w.procs[p]
        if ps[P_CLTOKEN] < 0 or w.cluster[0] <= ps[P_CLTOKEN]:
            return False
        w.records = acquire(w.records, 1 << self.holders.cl_last, lanes)
        w.procs[p] = (*ps[:P_CLTOKEN], -1, *ps[P_CLTOKEN + 1:])
        # Taken alone by partial-order reduction where every arrival is waited on before an exit
        # (Reduction.cluster_arrivals_waited): what it reads (the generation, the knowledge of the
        # completed one) changes only when the next generation completes, which then needs this
        # warp's next arrival; what it writes is its own.
        w.lone = True
        return True

    def op_syncwarp(self, w, p, proc, op: ir.Syncwarp, ins, env, ctx, lanes) -> bool:
        # __syncwarp orders the memory accesses of the participating lanes: the leader
        # and the other lanes learn what each other knows.
        if p in self.warp_parts:
            return self._syncwarp_parts(w, p)
        mask = self.holders.proc_mask(p)
        w.records = acquire(w.records, self.holders.leader(p), mask)
        w.records = acquire(w.records, self.holders.lanes(p), mask)
        w.records = clear_collective(_mark_warpsynced(w.records, {p: mask}), {p})
        w.records = _mark_lanesynced(w.records, {p})
        return True

    def _syncwarp_parts(self, w: _Work, p: int):
        """`__syncwarp()` (full mask) by one part of a warp split between roles. PTX bar.warp.sync:
        the thread waits "until all threads corresponding to membermask have executed a
        bar.warp.sync with the same membermask value" — any bar.warp.sync, at any site (sm_70+) —
        and it "also guarantee[s] memory ordering among threads participating in barrier". A part
        marks its arrival (its token) and stays; the last part to arrive orders every part's
        accesses before every part's later ones and moves them all on. A part that exits
        without one leaves the others waiting (a deadlock)."""
        ps = w.procs[p]
        if ps[P_TOKEN] >= 0:
            return False  # arrived: waiting for the other parts
        parts = self.warp_parts[p]
        code = self.programs
        waiting = [q for q in parts if q != p and w.procs[q][P_TOKEN] >= 0
                   and isinstance(code[q].code[w.procs[q][P_PC]].op, ir.Syncwarp)]
        if len(waiting) < len(parts) - 1:
            w.procs[p] = (*ps[:P_TOKEN], 0, *ps[P_TOKEN + 1:])
            return STAY
        mask = 0
        for q in parts:
            mask |= self.holders.proc_mask(q)
        w.records = acquire(w.records, mask, mask)
        w.records = _mark_warpsynced(w.records, {q: self.holders.proc_mask(q) for q in parts})
        w.records = clear_collective(_mark_lanesynced(w.records, set(parts)), set(parts))
        for q in waiting:
            qs = w.procs[q]
            pc, vars_ = self._run_local(q, qs[P_PC] + 1, qs[P_VARS])
            w.procs[q] = (pc, vars_, -1, *qs[3:])
            if code[q].code[pc].kind == END:
                self._exit(w, q)
        return True


def _nb_arrival_findings(nb: rules.NamedBar, count: int | None, warp: int, site: int,
                         aligned: bool) -> tuple[bool, bool, bool]:
    """What an arrival of ``warp`` with ``count`` at ``site`` finds in the open generation ``nb``:
    a count other than the generation's (SV202, an error), the warp's second arrival in it (SV203)
    and an aligned arrival at another site than the generation's first (SV204, warnings)."""
    return (bool(nb.arrived) and nb.count != count, bool(nb.warps >> warp & 1),
            aligned and bool(nb.arrived) and bool(nb.site) and nb.site != site)


def _mark_warpsynced(records: tuple, owners: dict[int, int]) -> tuple:
    """After a `syncwarp`: the own generic accesses of each process in ``owners`` (process ->
    its holder bits) that its holders know are now held by every lane whole, not lane by lane
    (F_WARPSYNCED, read by program.own_part_hidden). PTX bar.warp.sync "also guarantee[s] memory
    ordering among threads participating in barrier": each lane's accesses before it are ordered
    before every participating lane's operations after it. Only records the holders know at the
    syncwarp are marked (an access a lane learns of later, e.g. by a group wait, is not covered
    by this syncwarp); the leader's own accesses (LEADER) need no mark, and async records are
    never hidden, except those retired lane by lane (state.hidden_like_own_access)."""
    out = None
    for i, r in enumerate(records):
        holders = owners.get(r[R_OWNER])
        if holders is None or r[R_PART] == LEADER or not hidden_like_own_access(r[R_FLAGS]) or \
                r[R_FLAGS] & F_WARPSYNCED or \
                (r[R_KNOWN] & holders) != holders:
            continue
        if out is None:
            out = list(records)
        out[i] = (*r[:R_FLAGS], r[R_FLAGS] | F_WARPSYNCED, *r[R_FLAGS + 1:])
    return records if out is None else tuple(out)


def _mark_lanesynced(records: tuple, owners: set[int]) -> tuple:
    """After a `syncwarp` or a `bar.sync` of the processes in ``owners``: their own generic accesses
    are ordered before every lane of their warps (state.F_LANESYNCED), so another lane may meet them
    (program.lanes_meet_unordered). Every own record is earlier than the warp's syncwarp or barrier."""
    out = None
    for i, r in enumerate(records):
        if r[R_OWNER] in owners and not r[R_FLAGS] & (F_ASYNC | F_LANESYNCED):
            if out is None:
                out = list(records)
            out[i] = (*r[:R_FLAGS], r[R_FLAGS] | F_LANESYNCED, *r[R_FLAGS + 1:])
    return records if out is None else tuple(out)


HANDLERS: dict[type, Callable] = {
    ir.BarSync: BarrierOps.op_bar_sync,
    ir.BarArrive: BarrierOps.op_bar_arrive,
    ir.ClusterArrive: BarrierOps.op_cluster_arrive,
    ir.ClusterWait: BarrierOps.op_cluster_wait,
    ir.Syncwarp: BarrierOps.op_syncwarp,
}


class BarrierEncoding:
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step)."""

    def nb_state(self, w: Work, n: int) -> rules.NamedBar:
        return rules.NamedBar(w["nb_count", n], w["nb_arrived", n], w["nb_gen", n], 0, 0)

    def alive_threads(self, w: Work, procs: Iterable[int]) -> Any:
        enc = self.enc
        return sum((z3.If(enc.done(w, q), enc.num(0), enc.num(enc.machine.procs[q].nthreads)) for q in procs),
                   enc.num(0))

    def expected(self, w: Work, n: int, nb: rules.NamedBar) -> Any:
        """Machine._nb_expected: the generation's count, or every non-exited thread of the CTA."""
        alive = self.alive_threads(w, self.enc.procs_of_cta[self.enc.nbs[n][0]])
        return z3.If(nb.count == -1, alive, nb.count)

    def nb_try_complete(self, w: Work, n: int, c: Any) -> Any:
        """Machine._nb_try_complete: a complete generation restarts its parked waiters. Returns
        whether it completes."""
        enc = self.enc
        nb = self.nb_state(w, n)
        done_nb = rules.nb_complete(nb, self.expected(w, n, nb), Z3A, open_count=-1)
        complete = z3.And(c, nb.arrived > 0, nb.arrived >= self.expected(w, n, nb))
        token = n * enc.token_base + nb.gen
        holder = enc.nb(n)
        for q in enc.nb_waiters(n):
            waiting = z3.And(complete, w["parked", q], w["token", q] == token)
            self.acquire(w, holder, (enc.leader(q), enc.lanes_holder(q)), waiting)
            w.cond(waiting, ("parked", q), z3.BoolVal(False))
            w.cond(waiting, ("pc", q), w["pc", q] + 1)
        for f, value in (("count", done_nb.count), ("arrived", done_nb.arrived), ("gen", done_nb.gen)):
            w.cond(complete, ("nb_" + f, n), value)
        for space in ("K", "A"):
            w.cond(complete, (space, holder), z3.BitVecVal(0, enc.R))
        return complete

    def cb_try_complete(self, w: Work) -> Any:
        """Machine._cb_try_complete: the generation completes once every thread of the cluster
        that has not exited has arrived (`rules.cb_completes`, `rules.cb_complete` over Z3 terms).
        Returns whether it completes."""
        enc = self.enc
        cb = rules.ClusterBar(w["cl_gen"], w["cl_arrived"], 0)
        expected = self.alive_threads(w, range(enc.P))
        complete = rules.cb_completes(cb, expected, Z3Arith)
        done = rules.cb_complete(cb, expected, Z3Arith)
        w.cond(complete, "cl_gen", done.gen)
        w.cond(complete, "cl_arrived", done.arrived)
        self.shift(w, enc.cl_cur, enc.cl_last, complete)
        return complete

    def cluster_wait_passes(self, w: Work, p: int) -> Any:
        """Machine.op_cluster_wait's test: the warp arrived, and that generation has completed."""
        token = w["cltoken", p]
        return z3.And(token >= 0, w["cl_gen"] > token)

    def ev_named(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `BarSync` and `BarArrive` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        p = e.proc
        op = e.op
        parks = isinstance(op, ir.BarSync)
        n = e.nb
        nb = self.nb_state(w, n)
        hard.append(("SV202", z3.And(nb.arrived > 0, nb.count != e.nb_count)))
        if parks:
            w["parked", p] = z3.BoolVal(True)
            w["token", p] = n * enc.token_base + nb.gen
        self.release(w, e.lanes, enc.nb(n))
        new = rules.nb_arrive(nb, e.nb_count, enc.machine.procs[p].nthreads, 0, 0, Z3A)
        w["nb_count", n] = new.count
        w["nb_arrived", n] = new.arrived
        completes = self.nb_try_complete(w, n, z3.BoolVal(True))
        if enc.adds_to(e):
            # what a completion writes: the barrier, its waiters, and what the exits of those
            # it ends write (Encoding.ending)
            dynamic.append((("nb", n), completes))
            dynamic += [(("proc", q), completes) for q in enc.nb_waiters(n)]
            dynamic += [(o, completes) for o in enc.ending(enc.ends_parked_on(n))]
        return z3.BoolVal(True), parks

    def ev_cluster_arrive(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `ClusterArrive` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        p = e.proc
        op = e.op
        # Machine.op_cluster_arrive: a second arrive before the generation of the first one
        # completed is SV205; a relaxed arrive carries only inits published by
        # fence.mbarrier_init and the CTA's start
        hard.append(("SV205", rules.cb_arrives_twice(w["cltoken", p], w["cl_gen"], Z3A)))
        if op.relaxed and enc.machine.assume.relaxed_arrive_publishes_init:
            encode_fence_own_inits(enc, w, p, e.part)  # the reading RELAXED_ARRIVE_PUBLISHES_INIT
            if any(rec.owner == p for rec in enc.records if rec.space == INIT):
                enc.machine.assume.used.add(RELAXED_ARRIVE_PUBLISHES_INIT)
        self.release(w, e.lanes, enc.cl_cur, relaxed=op.relaxed)
        w["cltoken", p] = w["cl_gen"]
        cb = rules.cb_arrive(rules.ClusterBar(w["cl_gen"], w["cl_arrived"], 0), enc.machine.procs[p].nthreads, 0)
        w["cl_arrived"] = cb.arrived
        dynamic.append((("cl",), self.cb_try_complete(w)))
        return z3.BoolVal(True), False

    def ev_cluster_wait(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `ClusterWait` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        p = e.proc
        # Machine.op_cluster_wait: blocked until the generation this warp arrived on completes
        enabled = self.cluster_wait_passes(w, p)
        self.acquire(w, enc.cl_last, e.lanes)
        w["cltoken", p] = enc.num(-1)
        return enabled, False

    def ev_syncwarp(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """The encoding of `Syncwarp` (Step.event). Returns (can move, places its own pc)."""
        enc = self.enc
        p = e.proc
        both = (enc.leader(p), enc.lanes_holder(p))
        for space in ("K", "A"):
            value = self.union(w, space, both)
            for h in both:
                w[space, h] = value
        return z3.BoolVal(True), False


EVENTS: dict[type, Callable] = {
    ir.BarSync: BarrierEncoding.ev_named,
    ir.BarArrive: BarrierEncoding.ev_named,
    ir.ClusterArrive: BarrierEncoding.ev_cluster_arrive,
    ir.ClusterWait: BarrierEncoding.ev_cluster_wait,
    ir.Syncwarp: BarrierEncoding.ev_syncwarp,
}


# ------------------------------------------------------------------ bmc: the unrolled events
SPLIT_SYNCWARP = ("`syncwarp` by part of a warp split between roles (Machine._syncwarp_parts: its parts meet, a "
                  "rendezvous that is not encoded)")


def setup_named(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_bar_sync / op_bar_arrive's operands: the barrier id and count (SV203/SV204),
    and the named barrier of the CTA it is (Encoding.nbs, numbered as first used)."""
    mach = enc.machine
    op = e.op
    bar_id, e.error = static_value(mach._bar_id, op.bar_id, env, ctx, op.span)
    if e.error is None:
        count, e.error = static_value(mach._bar_count, op.count, env, ctx, op.span)
        e.nb_count = -1 if count is None else count
        if (e.own, bar_id) not in enc.nbs:
            enc.nbs.append((e.own, bar_id))
        e.nb = enc.nbs.index((e.own, bar_id))


def setup_syncwarp(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """A syncwarp has no operands; one by part of a split warp is refused."""
    if e.proc in enc.machine.warp_parts:
        raise Unsupported(f"{SPLIT_SYNCWARP}, line {e.line}")


def uses_named(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """An arrival that only adds to its barrier (Encoding.adds_to) adds to it, and writes the
    waiters it restarts only when it completes the generation (Effect.dynamic); any other
    writes the barrier, every process that may be parked on it, and what the exits of those it
    ends change (Encoding.ending)."""
    if e.nb < 0:
        return []
    if enc.adds_to(e):
        return [(("nb", e.nb), "a")]
    out = [(("nb", e.nb), "w")] + [(("proc", q), "w") for q in enc.nb_waiters(e.nb)]
    return out + list(enc.ending(enc.ends_parked_on(e.nb)).items())


def uses_cluster_arrive(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """An arrival adds to the open generation (its count and released knowledge: ("cl_open",));
    it writes the generation and its published knowledge (("cl",)) only when it completes it
    (Effect.dynamic). Encoding.objects gives the argument."""
    return [(("cl_open",), "a")]


def uses_cluster_wait(enc: Encoding, e: Event) -> list[tuple[tuple, str]]:
    """A wait reads the generation number and what the last completion published."""
    return [(("cl",), "r")]


def adds_named(enc: Encoding, e: Event) -> bool:
    """A syncthreads arrival (a bar.sync on a barrier every arrival syncs on with every
    non-exited thread) adds to its generation (Encoding.adds_to gives the argument)."""
    return isinstance(e.op, ir.BarSync) and e.nb in enc.all_thread_nbs


SETUP: dict[type, Callable] = {ir.BarSync: setup_named, ir.BarArrive: setup_named, ir.Syncwarp: setup_syncwarp,
                               ir.ClusterArrive: no_operands, ir.ClusterWait: no_operands}
USES: dict[type, Callable] = {ir.BarSync: uses_named, ir.BarArrive: uses_named,
                              ir.ClusterArrive: uses_cluster_arrive, ir.ClusterWait: uses_cluster_wait}
ADDS: dict[type, Callable] = {ir.BarSync: adds_named}
