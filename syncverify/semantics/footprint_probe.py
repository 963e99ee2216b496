"""The mbarrier events ahead of a kept probe, `let tok = try_wait B parity P`, as one sequence.

``Footprint.future`` gives, per program position, the events of the instruction there and the
next position: a process runs one fixed sequence from where it stands, because control flow reads
only loop variables. A kept probe breaks that: its result is a variable, and a later branch reads
it. The search's walk of what can come before a step (engines/reduction/precede_walk.py) then met
an unknown position, and answered that anything could happen: every lone step that asks it
(a copy's landing, a first observing wait, an `arrive.expect_tx`, a named arrival) was refused in
every state where some process still had a probe ahead. CUTLASS's `consumer_try_wait` is such a
probe, kept as a token and used as `consumer_wait(state, token)`:

    let tok = try_wait B parity P;   // the token
    …                                // (the FMHA's math warpgroups: `wgmma.wait 0`)
    if !tok { wait B parity P; }     // consumer_wait: wait unless the token said the phase is done

Where the two outcomes' sequences agree but for that one wait, the false outcome's sequence
stands for both. The true outcome is a passing wait on (B, P) at the probe (families/mbarrier_probe.py):
its sequence is WAIT(B, P), E1, E2, and the false outcome's is E1, WAIT(B, P), E2 (E1 the events
up to the branch, E2 the rest; the lockstep walk below checks that they are the same events, in
the same order, with one wait on (B, P) more at most, and that both end together). The walk
lets a process run on through its sequence while each wait in it can pass, by a condition on the
barrier and on what the set has gathered so far, whatever the position of the wait; so whatever
prefix of the true sequence the walk could admit, the false sequence admits its events too (E1
without condition, E2 under the same wait's condition), with the same ends. The walk's answer,
an over-approximation of what can come before the step, stays one: docs/model.md, "Steps taken
alone against what can come first", and "A kept probe's sequence".

Where the outcomes differ otherwise (the token read by another branch, a different barrier or
parity, different operations), or the walk gets long, the position stays unknown, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import ir
from .program import END, OP, Instr

if TYPE_CHECKING:
    from .footprint import Footprint

_MAX_LOCKSTEP = 4096  # positions compared per probe at most; past it the position stays unknown


def with_var(vars_: tuple, slot: int, value: int) -> tuple:
    """A process's variables with the one of ``slot`` set to ``value``."""
    return (*vars_[:slot], value, *vars_[slot + 1:])


def is_kept_probe(ins: Instr) -> bool:
    """Is ``ins`` a kept probe, `let t = try_wait …` (its result kept in a variable)?"""
    return ins.kind == OP and isinstance(ins.op, ir.MbarProbe) and ins.slot >= 0


def kept_probe_future(fp: Footprint, key: tuple, wait_event: int) -> tuple[tuple, tuple] | None:
    """The events and next position of the kept probe at ``key`` = (process, pc, variables): no
    event, and the position its false outcome goes on at, where that outcome's sequence covers the
    true one's (module docstring); else None. ``wait_event``: the kind of a wait's event."""
    q, pc, vars_ = key
    ins = fp.programs[q].code[pc]
    op = ins.op
    if not is_kept_probe(ins):
        return None
    target = fp._wait_target(q, op, vars_)  # type: ignore[arg-type]
    if target is False:
        return None
    wait = (wait_event, *target)  # type: ignore[misc]
    code = fp.programs[q].code
    slot = ins.slot
    npc, nvars = fp._run_local(q, pc + 1, with_var(vars_, slot, 0))
    false_key = (q, npc, nvars)
    t = (q, *fp._run_local(q, pc + 1, with_var(vars_, slot, 1)))
    f = false_key
    waited = False  # the false sequence's one wait on (B, P) more has been met
    for _ in range(_MAX_LOCKSTEP):
        if t == f:
            return (), false_key  # the same position and variables: the same sequence from here
        same_place = t[1] == f[1] and with_var(t[2], slot, 0) == with_var(f[2], slot, 0)
        if same_place and code[t[1]].kind == END:
            return (), false_key
        fut_f = fp.future(f)
        if fut_f is None:
            return None
        if not same_place:
            if waited or code[f[1]].kind != OP or not isinstance(code[f[1]].op, ir.MbarWait) or fut_f[0] != (wait,):
                return None
            waited = True
            f = fut_f[1]
            continue
        fut_t = fp.future(t)
        if fut_t is None or fut_t[0] != fut_f[0] or fut_t[1] is None or fut_f[1] is None:
            return None
        t, f = fut_t[1], fut_f[1]
    return None


__all__ = ["kept_probe_future"]
