"""Is a `try_wait` the test of a spin loop? The condition for reading it as a blocking wait.

The language has only the blocking wait. `mbarrier.try_wait` may return false
(a time limit), and a kernel is extracted as if it had returned true, which is
right when the false outcome only tests the same barrier phase again — CUTLASS's
`LAB_WAIT` loop, or `consumer_try_wait` followed by `consumer_wait`. It would
be wrong for a probe that goes on either way: the blocking reading would order
what the kernel does not. So the false outcome is explored before the true one
is taken: from the instruction after the try_wait, with its predicate false,
some path must reach a try_wait of the same barrier and parity without any
other synchronizing instruction. Paths decided by unknown values (a clock, a
flag) are all explored; a path that leaves the loop another way (a watchdog
that gives up) does not count against it, since it is taken only if the wait
never completes, which the checker reports as a deadlock.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from .cfg import EXIT, affects_sync
from .parse import Instr, Name, Operand, Pair

if TYPE_CHECKING:
    from .execute import WarpRun

MAX_PROBE_STEPS = 20_000


def spins(run: WarpRun, pc: int, lanes: int, pred: Operand, key: tuple[object, object]) -> Instr | None:
    """The try_wait with the same (barrier, parity) that the false outcome of the try_wait at `pc` reaches
    (itself, for CUTLASS's `LAB_WAIT` loop; `consumer_wait`'s, after `consumer_try_wait`), or None."""
    from .sync import try_wait_key  # the operands of a try_wait, as the executor reads them

    body = run.cfg.body
    start = copy.copy(run)
    start.regs = {k: list(v) for k, v in run.regs.items()}
    start.local = [dict(m) for m in run.local]
    start.events = []
    name = pred.first if isinstance(pred, Pair) else pred.name if isinstance(pred, Name) else None
    if name is None:
        return None
    for lane in range(32):
        if lanes >> lane & 1:
            start.write(Name(name), lane, 0, 1)
    todo: list[tuple[WarpRun, int]] = [(start, pc + 1)]
    seen: set[int] = set()
    steps = 0
    while todo:
        state, at = todo.pop()
        while at != EXIT and at < len(body):
            steps += 1
            if steps > MAX_PROBE_STEPS or at in seen:
                break
            seen.add(at)
            ins = body[at]
            run_mask, unknown = state._guard(ins, lanes)
            if ins.base == "bra":
                target = run.cfg.target(ins)
                if unknown or (run_mask and run_mask != lanes):
                    fork = copy.copy(state)
                    fork.regs = {k: list(v) for k, v in state.regs.items()}
                    todo.append((fork, target))
                    at += 1
                else:
                    at = target if run_mask else at + 1
                continue
            if ins.base in ("ret", "exit"):
                break
            if affects_sync(ins):
                if ins.opcode.startswith("mbarrier.try_wait") and not unknown:
                    if try_wait_key(state, ins, lanes) == key:
                        return ins
                break  # another synchronizing instruction: this path is not a spin
            if unknown:
                state.havoc(ins, unknown)
            if run_mask:
                state.execute(ins, run_mask)
            at += 1
    return None
