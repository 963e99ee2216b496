"""The transition relation of the bmc encoding: the effect of every actor's possible move from
one state (``Step``), built from the families' Z3 encodings (their ``EVENTS`` tables and
``*Encoding`` mixins, in the terms of semantics/families/encoding/effects.py) over the layout of
engines/bmc/layout.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import z3

from ... import ir
from ...semantics import rules
from ...semantics.families.async_agents import EVENTS as ASYNC_EVENTS
from ...semantics.families.async_agents import AsyncAgentEncoding
from ...semantics.families.barriers import EVENTS as BARRIER_EVENTS
from ...semantics.families.barriers import BarrierEncoding
from ...semantics.families.encoding import Z3A
from ...semantics.families.encoding.effects import Effect, Work
from ...semantics.families.encoding.events import Copy, Event
from ...semantics.families.lifecycle import LifecycleEncoding
from ...semantics.families.mbarrier_encoding import EVENTS as MBARRIER_EVENTS
from ...semantics.families.mbarrier_encoding import MbarrierEncoding
from ...semantics.families.memory import EVENTS as MEMORY_EVENTS
from ...semantics.families.memory import MemoryEncoding
from ...semantics.families.tcgen05 import EVENTS as TCGEN05_EVENTS
from ...semantics.families.tcgen05 import Tcgen05Encoding
from .layout import Encoding

# the encoding of each operation type, by family (Step.event)
EVENTS = {**MBARRIER_EVENTS, **BARRIER_EVENTS, **MEMORY_EVENTS, **ASYNC_EVENTS, **TCGEN05_EVENTS}


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

    def acquire(self, w: Work, src: int, tgt: tuple[int, ...], c: Any = True, withheld: Any = None) -> None:
        """state.acquire; the records in ``withheld`` (a bit-vector) are not learnt: what a `.cta`-scope
        remote release alone would give (ScopeEncoding.unpaired_data)."""
        for space in ("K", "A"):
            value = w[space, src] if withheld is None else w[space, src] & ~withheld
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
        # the observations its issuer had made when it issued it (CopyCausalityOps.copy_complete)
        self.carry_obs(w, (enc.snap_holder(c),), (enc.cur(m),))
        soft: list[tuple[str, Any]] = []  # (a landing that completes a phase no wait observed the previous one of)
        hard += self.set_mb(w, m, new, z3.BoolVal(True), soft=soft)
        adds = enc.adds_to(None)
        dynamic = [(("m", m), z3.Or(new.pend <= 0, *[cond for _, cond in hard + soft]))] if adds else []
        return Effect(guard, z3.BoolVal(True), hard, soft, w.upd,
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
