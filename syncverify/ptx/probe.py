"""A `try_wait`/`test_wait` whose result decides what the warp does: the probe of docs/language.md §7.1.1.

A `try_wait` may time out and a `test_wait` never blocks, so either may return false whether or not the
phase completed, and true only once it has (PTX ISA, mbarrier.test_wait/try_wait). Where the false outcome
always comes back to a test of the same phase the instruction is a wait (spin.py); where its result decides
nothing it is dropped (spin.result_unused). Every other one is a probe, and both outcomes are run here:

* The warp is copied twice after the instruction, its result register 1 in one copy and 0 in the other,
  and the two copies run in lockstep while they execute the same instructions. What they do alike (the
  work between `consumer_try_wait` and `consumer_wait(token)`) is written once.
* Where the result guards a synchronizing instruction (`@p mbarrier.arrive`), the step is written as
  `if T { … } else { … }` and the lockstep goes on.
* Where it decides a branch, each copy runs alone up to the branch's immediate post-dominator (the join);
  a probe met on the way is forked the same way (a bounded retry is a chain of probes). The copies must
  both reach the join with the same threads alive; their registers are then merged (a register they
  disagree on is unknown from there on, so a later branch on it is refused as any unknown branch is).

The result is written as the language writes it: `if try_wait B parity P { … } else { … }` when the branch
follows the probe with nothing synchronizing between them, else `let T = try_wait …;`, the common work,
and `if T { … }` / `if !T { … }` where the result is used. Both outcomes then exist in the protocol; the
engines give them their meaning (false at any time, true only once the phase completed).

A watchdog, `while (!try_wait) { if (clock64() - t0 > LIMIT) break; }` or the same on a flag in global
memory, decides its retry by a value that is not known. On a false outcome, a branch on such a value one
of whose directions only comes back -- through nothing that synchronizes but this probe failing again --
to the same branch in the same state is a retry: the probe's second test either fails again (the state
already met) or passes, and the true outcome from there must give the same statements as the first
probe's true outcome (it is run to check). The retry direction is then cut and the other one, giving
up, is followed: `if try_wait B parity P { } else { … the give-up path … }`.

What cannot be written this way is refused at the probe with the reason: the outcomes do not join before
the kernel ends, one outcome ends threads the other does not, a second probe before the first one's
result is used, a probe executed by some lanes of a warp only, a probe met again in the same state in its
own outcome (tests of two phases in turn until one passes: a wait for either phase), and a probe several
lanes execute whose outcomes differ in more than waits and per-lane accesses where the lanes' results can
differ (probe_lanes.py: each lane's try_wait may time out on its own).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import clc
from .cfg import EXIT, affects_sync
from .kept_values import merged
from .launch import Event, lanes_of
from .loops import loop_info
from .parse import Instr, Name, Operand, Pair, operand_registers
from .probe_lanes import LaneWatch, merge_watches
from .spin import _frozen, result_unused
from .values import UNKNOWN, Value
from .warp import _Entry

if TYPE_CHECKING:
    from .warp import WarpState

MAX_RETRY_STEPS = 20_000
MAX_NESTED = 128  # probes in each other's outcomes (a bounded retry of 100 tries nests 99)


@dataclass(frozen=True)
class Pending:
    """A probe just executed (sync.py): its instruction and position, the lanes, the barrier (rank,
    offset), parity, semantics and scope, the register its result goes to, and whether it is a test_wait."""

    ins: Instr
    pc: int
    lanes: int
    bar: tuple[int, int]
    parity: int
    sem: str
    scope: str
    pred: Operand
    test: bool


@dataclass
class ProbeCtx:
    """A probe whose false outcome is running (for a watchdog's retry, `retry_exit`): where its result is
    branched on is joined at `join`, its true outcome wrote `then`, and `extra` collects the states of
    the true outcomes of its retries, merged at the join."""

    pending: Pending
    join: int
    then: list[Event]
    extra: list[WarpState] = field(default_factory=list)


def _stack_copy(stack: list[_Entry]) -> list[_Entry]:
    return [copy.copy(e) for e in stack]


def _shape(stack: list[_Entry]) -> tuple[tuple[int, int, int], ...]:
    return tuple((e.pc, e.mask, e.rpc) for e in stack)


def clone(run: WarpState) -> WarpState:
    """A copy of the warp that runs on its own: its registers, local memory and events are its own (the
    memory of the cluster and the recorders are shared)."""
    out = copy.copy(run)
    out.regs = {k: list(v) for k, v in run.regs.items()}
    out.local = [dict(m) for m in run.local]
    out.local_unknown = list(run.local_unknown)
    out.events = []
    out.probe = None
    out.probe_ctx = None
    out.lockstep = False
    out.lane_watch = run.lane_watch.copy() if run.lane_watch is not None else None
    return out


def _set(run: WarpState, pred: Operand, lanes: int, v: int) -> None:
    name = pred.first if isinstance(pred, Pair) else pred.name if isinstance(pred, Name) else "_"
    for lane in lanes_of(lanes):
        run.write(Name(name), lane, v, 1)


def _merge(into: WarpState, states: list[WarpState]) -> None:
    """The registers and local memory after the join: a value the states agree on, else unknown."""
    regs: dict[str, list[Value]] = {}
    for name in set().union(*(s.regs.keys() for s in states)):
        cols = [s.regs.get(name) for s in states]
        width = max(len(c) for c in cols if c is not None)
        out: list[Value] = [UNKNOWN] * width
        for lane in range(width):
            vals = {(c[lane] if c is not None else None) for c in cols}
            v = vals.pop() if len(vals) == 1 else None
            out[lane] = UNKNOWN if v is None else v
        regs[name] = out
    into.regs = regs
    into.kept = merged([s.kept for s in states])  # a kept value the outcomes agree on (kept_values.py)
    local = [dict(m) for m in states[0].local]
    unknown = [any(s.local_unknown[lane] for s in states) for lane in range(len(local))]
    for lane, m in enumerate(local):
        for s in states[1:]:
            other = s.local[lane]
            if other.keys() != m.keys():
                unknown[lane] = True  # a byte one outcome stored and the other did not: not known after
            for a in list(m):
                if other.get(a) != m[a]:
                    del m[a]
    into.local, into.local_unknown = local, unknown
    into.exited = states[0].exited
    into.lane_watch = merge_watches([s.lane_watch for s in states])
    clc.merge(into, states)


def _text(lanes: int, ins: Instr, text: str) -> Event:
    return Event("text", (text,), lanes, ins)


def _head(p: Pending, neg: bool) -> str:
    q = "" if (p.sem, p.scope) == ("acquire", "cta") else f".{p.sem}.{p.scope}"
    return f"{'!' if neg else ''}{'test_wait' if p.test else 'try_wait'}{q}"


def _if(p: Pending, direct: bool, at: Instr, then: list[Event], other: list[Event]) -> list[Event]:
    """`if … { then } else { other }` at the use `at`: on the probe itself (`direct`) or on its token; a
    true block that is empty is written with `!` instead."""
    neg = not then and bool(other)
    if neg:
        then, other = other, []
    if direct:
        opening = Event("probe", (p.bar, p.parity, _head(p, neg), "if"), p.lanes, p.ins)
    else:
        opening = _text(p.lanes, at, f"if {'!' if neg else ''}{token(p)} {{")
    out = [opening, *then]
    if other:
        out += [_text(p.lanes, at, "} else {"), *other]
    return [*out, _text(p.lanes, at, "}")]


def token(p: Pending) -> str:
    """The token's name: one name for every probe, so that the iterations of a loop read alike; the writer
    gives each `let` a name of its own and each use the name of the `let` before it (writer.py), which is
    the use's own probe: no probe runs between a probe and its last use (`fork` refuses that)."""
    return "tok"


Part = tuple[Instr, list[Event], list[Event]] | list[Event]


def fork(run: WarpState, stack: list[_Entry]) -> None:
    """Run both outcomes of the probe `run.probe` just executed, from `stack`, and leave `run` and `stack`
    where they join, with the probe's statements added to `run.events`."""
    p = run.probe
    assert p is not None
    run.probe = None
    if not run.forks_probes:
        raise run.refuse(p.ins, "a probe (a try_wait that can give up, its result used) in a kernel extracted with "
                         "a symbolic parameter (--symbolic) is not modelled; extract it at fixed values")
    if run.lockstep:
        raise run.refuse(p.ins, "this probe runs before the result of an earlier probe is used; two probes "
                         "whose results are both pending are not modelled")
    here = _frozen(run, {}, loop_info(run.cfg).relevant(bool(run.launch.zero_global)), p.pc)
    if here in run.probe_chain:
        raise run.refuse(p.ins, "an outcome of this probe comes back to it in the same state through other probes "
                         "(a loop of tests of different phases, left only when one passes): a wait for either "
                         "phase, which the language cannot write")
    if len(run.probe_chain) >= MAX_NESTED:
        raise run.refuse(p.ins, f"probes nest more than {MAX_NESTED} deep here (each in an outcome of the one "
                         "before)")
    t, f = clone(run), clone(run)
    t.lane_watch = LaneWatch.start(run.lane_watch, p, 1)  # the lanes' results may differ (probe_lanes.py)
    f.lane_watch = LaneWatch.start(run.lane_watch, p, 0)
    t.probe_chain = f.probe_chain = (*run.probe_chain, here)
    ts, fs = _stack_copy(stack), _stack_copy(stack)
    _set(t, p.pred, p.lanes, 1)
    _set(f, p.pred, p.lanes, 0)
    t.lockstep = f.lockstep = True
    parts: list[Part] = []  # what follows the probe: common events, and its uses (use, then, else)
    while ts or fs:
        before = _shape(ts)
        at = ts[-1].pc if ts else EXIT
        if before == _shape(fs) and 0 <= at < len(run.cfg.body) and _is_test(run.cfg.body[at]) \
                and _settled(t, f, at):
            # the next test of a barrier, with nothing the result wrote read any more: the copies go on
            # alike (and a probe there is forked by itself)
            _merge(run, [t, f])
            stack[:] = _stack_copy(ts)
            break
        nt, nf = len(t.events), len(f.events)
        t.step(ts)
        f.step(fs)
        new_t, new_f = t.events[nt:], f.events[nf:]
        if t.exited != f.exited:
            raise run.refuse(p.ins, f"one outcome of this probe ends threads the other does not (at PTX line "
                             f"{run.cfg.body[at].line}); a probe whose outcomes do not both go on is not modelled")
        if _shape(ts) == _shape(fs):
            if new_t != new_f:  # the result guards a synchronizing instruction itself: `@p mbarrier.arrive`
                parts.append((run.cfg.body[at], new_t, new_f))
            elif new_t:
                parts.append(new_t)
            continue
        ins = run.cfg.body[at]  # a branch on the result
        join = run.cfg.ipdom.get(at, EXIT)
        if join == EXIT or new_t or new_f:
            raise run.refuse(p.ins, f"the branch on this probe's result at PTX line {ins.line} has paths that do "
                             "not join before the kernel ends; its two outcomes cannot be written as an `if`")
        h = len(before) - 1
        base = before[h]
        t.lockstep = f.lockstep = False
        side_t, side_f = _side(ts, h, join), _side(fs, h, join)
        n0 = len(t.events)
        t.run(side_t)
        then = t.events[n0:]
        ctx = ProbeCtx(p, join, then) if not parts else None  # a watchdog's retry can be cut
        f.probe_ctx = ctx
        n1 = len(f.events)
        f.run(side_f)
        other = f.events[n1:]
        states = [t, f, *(ctx.extra if ctx else [])]
        if any(s.exited != t.exited for s in states):
            raise run.refuse(ins, f"one outcome of the probe at PTX line {p.ins.line} ends threads before this "
                             "branch's join and the other does not; a probe whose outcomes do not both go on "
                             "is not modelled")
        parts.append((ins, then, other))
        _merge(run, states)
        stack[:] = [*(_Entry(pc, m, r) for pc, m, r in before[:h]), _Entry(join, base[1], base[2])]
        break
    else:
        _merge(run, [t, f])  # both ran to the end of the kernel
        stack[:] = []
    _emit(run, p, parts)


def _is_test(ins: Instr) -> bool:
    return ins.opcode.startswith(("mbarrier.try_wait", "mbarrier.test_wait"))


def _settled(t: WarpState, f: WarpState, at: int) -> bool:
    """Whether the two outcomes' copies differ only in registers that nothing reads from `at` on before
    overwriting them (the result's register, a predicate computed from it): from there they run alike."""
    ins = t.cfg.body[at]
    read = set().union(*(operand_registers(o) for o in ins.operands[1:])) | ({ins.guard} if ins.guard else set())
    for name in set(t.regs) | set(f.regs):
        if t.regs.get(name) != f.regs.get(name):
            if name in read or not result_unused(t, at, Name(name)):
                return False
    return t.local == f.local and t.local_unknown == f.local_unknown and t.exited == f.exited


def _emit(run: WarpState, p: Pending, parts: list[Part]) -> None:
    """The probe's statements: `if try_wait … { } else { }` for one use right after it, else its token,
    what both outcomes do, and each use on the token."""
    uses = [x for x in parts if isinstance(x, tuple)]
    if not uses:
        # the result decided nothing synchronizing: the probe orders nothing the kernel relies on
        # (dropping its acquire only removes order), as a result nobody reads (spin.result_unused)
        run.events += [e for x in parts if isinstance(x, list) for e in x]
        return
    direct = len(uses) == 1 and parts[0] is uses[0]  # one use, right after the probe
    out: list[Event] = []
    if not direct:
        out.append(Event("probe", (p.bar, p.parity, _head(p, False), "let " + token(p)), p.lanes, p.ins))
    for x in parts:
        if isinstance(x, list):
            out += x
        else:
            out += _if(p, direct, *x)
    run.events += out


def _side(stack: list[_Entry], h: int, join: int) -> list[_Entry]:
    """One outcome's SIMT stack from the branch at level `h` to its join: the branch's entry, now ending
    at the join, and any entries the branch pushed (they end there too)."""
    top = stack[h]
    return [_Entry(top.pc, top.mask, join), *_stack_copy(stack[h + 1:])]


# ---- a watchdog's retry ------------------------------------------------------------------------------

def retry_exit(run: WarpState, i: int, taken: int, unknown: int, active: int) -> int | None:
    """At a branch (position `i`) decided by an unknown value on a probe's false outcome: the direction
    that gives up, when the other one is a retry of the probe (module docstring); None otherwise."""
    ctx = run.probe_ctx
    if ctx is None or taken or unknown != active:
        return None
    cfg = run.cfg
    ins = cfg.body[i]
    directions = (cfg.target(ins), i + 1)
    retries = []
    for d in directions:
        extra: list[WarpState] = []
        if _retries(run, i, d, ctx, extra):
            retries.append((d, extra))
    if len(retries) != 1:
        return None
    d, extra = retries[0]
    ctx.extra += extra
    return directions[1] if d == directions[0] else directions[0]


def _retries(run: WarpState, i: int, d: int, ctx: ProbeCtx, extra: list[WarpState]) -> bool:
    """Whether direction `d` of the branch at `i` comes back to it in the same state through nothing that
    synchronizes but the probe failing again, each time the probe passing giving `ctx.then`."""
    p = ctx.pending
    state = clone(run)
    origin = {k: list(v) for k, v in run.regs.items()}
    relevant = loop_info(run.cfg).relevant(bool(run.launch.zero_global))
    start = _frozen(run, origin, relevant, i)
    lanes = p.lanes
    at = d
    met = False
    body = run.cfg.body
    for _ in range(MAX_RETRY_STEPS):
        if at == EXIT or at >= len(body):
            return False
        if at == i:
            return met and _frozen(state, origin, relevant, i) == start
        ins = body[at]
        run_mask, unknown = state._guard(ins, lanes)
        if unknown or run_mask not in (0, lanes):
            return False
        if ins.base == "bra":
            at = run.cfg.target(ins) if run_mask else at + 1
            continue
        if at == p.pc:
            if not run_mask:
                return False
            if not _true_again(state, p, ctx, extra):
                return False
            _set(state, p.pred, lanes, 0)  # and fails again
            met = True
            at += 1
            continue
        if affects_sync(ins) and run_mask:
            return False
        if run_mask:
            state.execute(ins, run_mask)
            if state.events:
                return False
        at += 1
    return False


def _true_again(state: WarpState, p: Pending, ctx: ProbeCtx, extra: list[WarpState]) -> bool:
    """The probe passing at a retry: run to the join, it must write what its first true outcome wrote."""
    again = clone(state)
    _set(again, p.pred, p.lanes, 1)
    again.run([_Entry(p.pc + 1, p.lanes, ctx.join)])
    if again.events != ctx.then:
        return False
    extra.append(again)
    return True
