"""The partial-order reduction of the bmc encoding: which moves are independent.

`BMC.run` orders adjacent moves of different actors (docs/engines.md): two such moves in
decreasing actor order must share an object that not both only read and not both only add to.
This module says which objects each event uses and how (``objects``, built from the families'
``USES`` and ``ADDS`` tables), what the exits it may cause change (``ending``), and which events
run in one step with the one before them (``_fusable``, ``_runs``). A mixin of
layout.Encoding."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import z3

from ... import ir
from ...semantics.families import async_agents, barriers, mbarrier_encoding, memory
from ...semantics.families.encoding import DATA
from ...semantics.families.encoding.events import Event

if TYPE_CHECKING:
    from ...semantics.families.encoding.effects import Effect

# per operation type: the shared objects it uses beside its process, its copies and the exits
# (Encoding.objects), and whether it only adds to its barrier (Encoding.adds_to)
USES: dict[type, Callable] = {**mbarrier_encoding.USES, **barriers.USES, **memory.USES, **async_agents.USES}
ADDS: dict[type, Callable] = {**mbarrier_encoding.ADDS, **barriers.ADDS}

# Operations that touch only their own process, their slot's records and the copies they issue:
# `semantics.machine.LOCAL_OPS` minus those this encoding does not model.
FUSABLE = (ir.Access, ir.Syncwarp, ir.Fence, ir.GroupCommit, ir.GroupWait, ir.WgmmaRead, ir.TmaStore, ir.TmaLoad)


class EncodingIndependence:
    """The independence of the unrolled events (a mixin of Encoding)."""

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

        (`_peer_cannot_exit_first` of engines/reduction/element.py, decided statically.) The
        process has arrived on the
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

        uses = USES.get(type(e.op))
        for o, mode in uses(self, e) if uses is not None else ():
            use(o, mode)
        for c in e.copies:  # the issue checks the barrier, writes the slot, starts the copy
            use(("m", c.m), "r")
            use(("key", c.key), "w")
            use(("proc", c.actor), "w")
        # a move on a peer CTA checks that the peer has not ended (SV404); its own CTA has not
        for cta in ({e.cta} | {c.cta for c in e.copies} | {self.machine.mb_names[c.m][0] for c in e.copies}
                    | ({self.machine.mb_names[e.m][0]} if e.m >= 0 else set())) - {e.own}:
            use(("exit", cta), "r")
        if e.index == len(self.events[e.proc]) - 1:
            for o, mode in self.ending([e.proc]).items():
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
        adds = ADDS.get(type(e.op))
        return adds is not None and adds(self, e)

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
        makes a release on a peer's barrier carry data across CTAs — generic-proxy writes (cp.async
        copies included) by a process of another CTA than the barrier's."""
        bar_cta = self.machine.mb_names[e.m][0]
        return [r for r, rec in enumerate(self.records) if rec.space == DATA and rec.kind == 1
                and (not rec.is_async or rec.generic) and self.machine.procs[rec.owner].cta != bar_cta]



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

def dependent(a: dict, b: dict) -> Any:
    """Two moves' uses of one object conflict unless both only read it or both only add to it."""
    a_any, b_any = z3.Or(a["r"], a["a"], a["w"]), z3.Or(b["r"], b["a"], b["w"])
    return z3.Or(z3.And(a["w"], b_any), z3.And(a_any, b["w"]), z3.And(a["r"], b["a"]), z3.And(a["a"], b["r"]))
