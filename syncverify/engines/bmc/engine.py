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

Modules of engines/bmc/: layout.py (the unrolled events, the static layout and the state
components), por.py (which moves are independent), symmetry.py (which warps are interchangeable,
what a swap maps each state component to), step.py (the transition relation); this module queries
and decodes counterexamples. Each operation's set-up, uses and Z3 encoding live with its family in
semantics/families/, written in the vocabulary of semantics/families/encoding/ (the events and
their records, a step's updates and effects, the interface of the layout): the encoding consumes
the families' semantics, and the families import nothing from the engine.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import z3

from ... import budget as budgets
from ... import ir
from ...diagnostics import InputError
from ...result import CheckResult, Stats, Verdict
from ...semantics.families.encoding.effects import Work
from ...semantics.families.encoding.events import Unsupported
from ...semantics.machine import Machine, Violation
from ...semantics.state import AG_TMA, AG_UMMA
from .layout import Encoding
from .por import dependent, touches
from .step import Step, blocked

SEED = 0
TACTIC = ("simplify", "max-bv-sharing", "bit-blast", "sat")  # see BMC.run


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
        from ...static.collective import tmem_may_block
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
            touch = touches(effects)
            if i > 0:
                # Partial-order reduction (monotonic, after Kahlon, Wang and Gupta, CAV 2009): two
                # adjacent moves of different actors in decreasing actor order must be dependent:
                # share an object that not both only read and not both only add to (see
                # Encoding.objects). Independent moves commute and neither enables nor disables the
                # other, so every execution has an equivalent one that obeys this, ending in the
                # same state — and a move that breaks a rule still breaks it when moved earlier past
                # independent moves, so every finding stays reachable.
                shared = [dependent(prev[o], touch[o]) for o in prev if o in touch]
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
    from ...semantics.families.async_operands import register_refusal
    from ...semantics.families.globalmem import global_refusal
    from ...semantics.families.lane_groups import lane_group_refusal
    from ...semantics.families.tensormap import tensormap_refusal
    from ...semantics.families.warp_collective_order import program_refusal
    from ...static.checks import static_outcome
    from ..explicit import bound_of
    from ..merging import merge_static
    from ..witness import diagnostic

    start = time.monotonic()
    deadline = start + options.timeout
    bound = bound_of(protocol)
    try:
        refusal = global_refusal(protocol, "the bmc engine")  # (flags, atomics, global buffers, grids)
        refusal = refusal or register_refusal(protocol, "the bmc engine")  # (registers of RS-form wgmma)
        refusal = refusal or tensormap_refusal(protocol, "the bmc engine")  # (rewritten tensor maps)
        refusal = refusal or lane_group_refusal(machine.programs, "the bmc engine")  # (some lanes' bulk groups)
        if refusal is not None:
            raise Unsupported(refusal)
        bmc = BMC(machine)
        refusal = program_refusal(machine.procs, machine.programs, "the bmc engine")  # (SV609's reading)
        if refusal is not None:  # (after the encoding's own refusals, which name their construct first)
            raise Unsupported(refusal)
    except Unsupported as why:
        return merge_static(CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE,
                                        bound=bound, coverage=f"unsupported by the bmc engine: {why}"),
                            static_outcome(protocol, machine.programs, deadline))
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
            diag = diagnostic(machine, v, outcome.labels, options.full_trace, None)
            result = CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.VIOLATION,
                                 bound=bound, diagnostics=(diag,), stats=stats,
                                 coverage=f"counterexample {outcome.depth} steps deep, by Z3 in {outcome.seconds:.1f}s")
    return merge_static(result, static_outcome(protocol, machine.programs, deadline))


def replay(machine: Machine, outcome: Outcome) -> tuple[Violation | None, str]:
    """Run the solver's schedule through the machine; the finding it ends in, or why not."""
    from ..witness import deadlock

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
        elif label[0] == "a" and label[1][0] == AG_TMA:
            # a copy's snapshot slot is the machine's numbering (CopyCausalityOps.copy_issue)
            label = labels[n] = ("a", next((a for a in state.agents if a[:8] == label[1][:8]), label[1]))
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
        # a deadlock: the model offers no step (a reduced search offers one exactly when it does)
        if list(machine.successors(state)) or all(machine.done(state, p) for p in range(len(machine.procs))):
            return None, "the final state is not a deadlock"
        return deadlock(machine, state), ""
    return None, "the schedule ends without a finding"
