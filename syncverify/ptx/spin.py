"""Is a `try_wait` the test of a spin loop? The condition for reading it as a blocking wait.

The language has only the blocking wait. `mbarrier.try_wait` may return false
(PTX: "a potentially blocking instruction which tests for the completion of the
phase ... If the phase is not complete, the executing thread may be suspended
... until the specified phase completes or the suspend time limit expires"), and
a kernel is extracted as if it had returned true. That is right only when the
false outcome can never lead anywhere but back to a test of the same barrier
phase: CUTLASS's `LAB_WAIT` loop, nvcc's inlined `@!p bra LAB_WAIT`, or
`consumer_try_wait` followed by `consumer_wait`. Anything else is a probe that
can give up with the phase incomplete -- a bounded retry (`for (i = 0; i < 4 &&
!try_wait(...); ++i);`), one more probe (`if (!try_wait) try_wait;`), a watchdog
on a clock or on a flag -- and the blocking reading would order what the kernel
does not (on an H200 the 4-try loop left with the phase incomplete in 20 of 20
runs).

So before the true outcome is taken, every false outcome is explored: from the
instruction after the try_wait, with its predicate false, and again after every
try_wait of the same barrier and parity reached on the way (each of them may
fail too). Paths decided by unknown values (a clock, a flag) or by lanes that
disagree are all followed. The try_wait is a wait exactly when no path reaches
anything but such try_waits and ordinary computation: a path that comes back to
a state it was in (registers, local memory, position) cycles and cannot give up,
nor can one that ends in `trap` (a watchdog that aborts the kernel: PTX "Abort
execution", nothing after it runs);
a path that reaches a thread exit, any other synchronizing instruction, or does
not settle within MAX_PROBE_STEPS steps is a way out with the phase incomplete,
and `spins` names it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .access import barrier_at as _bar
from .access import known as _known
from .cfg import EXIT, affects_sync
from .launch import lanes_of
from .loops import loop_info
from .parse import Instr, Name, Operand, Pair, operand_registers
from .wgmma_regs import note_writes

if TYPE_CHECKING:
    from .warp import WarpState

MAX_PROBE_STEPS = 20_000


@dataclass(frozen=True)
class Spin:
    """The try_wait is a wait. `retry`: the try_wait of the same phase its false outcome tests first (itself
    for CUTLASS's `LAB_WAIT` loop; `consumer_wait`'s, after `consumer_try_wait`)."""

    retry: Instr


@dataclass(frozen=True)
class GivesUp:
    """The try_wait is a probe: `why` says where a false outcome goes instead of testing the phase again."""

    why: str


def _frozen(state: WarpState, start: dict[str, list[object]], relevant: frozenset[str], at: int) -> object:
    """The position and everything that can differ between two visits of it and matter: the registers that
    differ from the waiting warp's, `start` (a kernel has thousands; a spin changes a few) and can reach
    a guard or a synchronizing operand (`LoopInfo.relevant`: a retry counter that decides nothing does not
    keep a spin from repeating), local memory."""
    regs = tuple(sorted((k, tuple(v)) for k, v in state.regs.items() if k in relevant and start.get(k) != v))
    local = tuple(tuple(sorted(m.items())) for m in state.local)
    return at, regs, local, tuple(state.local_unknown), state.exited


def _fork(state: WarpState) -> WarpState:
    out = copy.copy(state)
    out.regs = {k: list(v) for k, v in state.regs.items()}
    out.local = [dict(m) for m in state.local]
    out.local_unknown = list(state.local_unknown)
    out.events = []
    out.zero = {"read": set(), "write": set()}  # what a path that is never taken touches is not recorded
    return out


def _fail(tries: int) -> str:
    return f" after {tries} more failed test{'s' if tries != 1 else ''} of the phase" if tries else ""


def spins(run: WarpState, pc: int, lanes: int, pred: Operand, key: tuple[object, object]) -> Spin | GivesUp:
    """Whether the try_wait at `pc` (executed by `lanes`, its result in `pred`, testing `key` = (barrier,
    parity)) is a spin: every path its false outcomes take comes back to a try_wait of `key`."""
    body = run.cfg.body
    name = _pred_name(pred)
    if name is None:
        return GivesUp("its result is not a predicate register")
    start = _fork(run)
    for lane in range(32):
        if lanes >> lane & 1:
            start.write(Name(name), lane, 0, 1)
    relevant = loop_info(run.cfg).relevant(bool(run.launch.zero_global))
    # what _frozen compares against: the waiting warp's own registers, not a copy (the exploration runs on
    # forks, and `run` is not written meanwhile). Any fixed origin whose registers every path's state has
    # gives the same answer: a register's part of the key (its value, or nothing where it equals the
    # origin's) is one-to-one in its value, so two visits' keys are equal exactly when their relevant
    # registers are; this one differs from `start` in the predicate written above only.
    origin: dict[str, list[object]] = run.regs
    todo: list[tuple[WarpState, int, int]] = [(start, pc + 1, 0)]
    seen: set[object] = set()
    retry: Instr | None = None
    steps = 0
    while todo:
        state, at, tries = todo.pop()
        while True:
            if at == EXIT or at >= len(body):
                return GivesUp(f"a path where it returns false{_fail(tries)} reaches the end of the kernel")
            steps += 1
            if steps > MAX_PROBE_STEPS:
                return GivesUp(f"its false outcome was followed for {MAX_PROBE_STEPS:,} steps without settling "
                               "into a loop of tests of the same phase (a bounded retry?)")
            ins = body[at]
            if ins.base == "bra" or _is_same_wait(ins):
                here = _frozen(state, origin, relevant, at)
                if here in seen:
                    break  # this path cycles through tests of the phase: it never gives up
                seen.add(here)
            run_mask, unknown = state._guard(ins, lanes)
            if ins.base == "bra":
                target = run.cfg.target(ins)
                if unknown or (run_mask and run_mask != lanes):
                    todo.append((_fork(state), target, tries))
                    at += 1
                else:
                    at = target if run_mask else at + 1
                continue
            if ins.base == "trap":  # a watchdog that aborts the kernel never goes on: the lanes it stops end
                if run_mask == lanes and not unknown:
                    break
                at += 1
                continue
            if ins.base in ("ret", "exit"):
                if run_mask == 0 and not unknown:
                    at += 1
                    continue
                return GivesUp(f"a path where it returns false{_fail(tries)} reaches `{ins.opcode}` at PTX line "
                               f"{ins.line}: the thread ends with the phase incomplete")
            if affects_sync(ins):
                if run_mask == 0 and not unknown:
                    at += 1
                    continue
                if _is_same_wait(ins) and run_mask == lanes and not unknown and \
                        try_wait_key(state, ins, lanes) == key:
                    retry = retry or ins
                    for lane in range(32):  # that test may fail too
                        if lanes >> lane & 1:
                            state.write(Name(_pred_name(ins.operands[0]) or "_"), lane, 0, 1)
                    tries += 1
                    at += 1
                    continue
                return GivesUp(f"a path where it returns false{_fail(tries)} goes on without testing the same "
                               f"barrier phase again, to `{ins.opcode}` at PTX line {ins.line}")
            if unknown:
                state.havoc(ins, unknown)
            if run_mask:
                state.execute(ins, run_mask)
                note_writes(state, ins, run_mask)  # an RS wgmma's A register written (wgmma_regs.py)
            at += 1
    if retry is None:  # every path cycled without a test of the phase: it waits, but not for this barrier
        return GivesUp("its false outcome never tests the same barrier phase again")
    return Spin(retry)


def try_wait_key(run: WarpState, ins: Instr, lanes: int) -> tuple[object, object] | None:
    """(barrier, parity) of a `mbarrier.try_wait.parity`, if every executing lane agrees and knows them."""
    ops = ins.operands
    vals = {(_bar(run, ins, ops[1], lane), _known(run.read(ops[2], lane))) for lane in lanes_of(lanes)}
    return next(iter(vals)) if len(vals) == 1 else None


def _is_same_wait(ins: Instr) -> bool:
    return ins.opcode.startswith(("mbarrier.try_wait.parity", "mbarrier.test_wait.parity"))


def _pred_name(op: Operand) -> str | None:
    if isinstance(op, Pair):
        return op.first
    if isinstance(op, Name) and op.name != "_":
        return op.name
    return None


# ---- is the result used at all? ---------------------------------------------------------------------

_WRITES_DST = ("mov", "setp", "selp", "set", "and", "or", "xor", "not", "cnot", "ld", "mbarrier", "elect",
               "vote", "shfl", "cvt", "add", "sub")


def result_unused(run: WarpState, pc: int, pred: Operand) -> bool:
    """True when no instruction reachable after `pc` reads the try_wait's predicate before an unguarded
    instruction overwrites it: its outcome then decides nothing and the try_wait orders nothing the
    kernel relies on (dropping its acquire can only remove order, never add it)."""
    name = _pred_name(pred)
    if name is None:
        return True
    cfg = run.cfg
    todo = [n for n in cfg.successors(pc) if n != EXIT]
    seen: set[int] = set()
    while todo:
        n = todo.pop()
        if n in seen or n == EXIT:
            continue
        seen.add(n)
        ins = cfg.body[n]
        if ins.guard == name:
            return False
        ops = ins.operands
        dst_kill = bool(ops) and ins.base in _WRITES_DST and ins.guard is None and name in operand_registers(ops[0])
        reads = set().union(*(operand_registers(o) for o in (ops[1:] if dst_kill else ops))) if ops else set()
        if name in reads:
            return False
        if dst_kill:
            continue
        todo.extend(cfg.successors(n))
    return True
