"""A kept probe's true outcome, left out where its false outcome covers it.

A kept probe, `let tok = try_wait B parity P`, has two steps where the phase its parity names has
completed (families/mbarrier_probe.py): true (the passing wait, tok = 1) and false (no effect,
tok = 0). CUTLASS's `consumer_try_wait` keeps it as a token and waits only where it said WaitAgain:

    let tok = try_wait B parity P;   // the true step T, or the false step F
    wgmma.wait 0;                    // E: local steps
    if !tok { wait B parity P; }     // W: run only after F

The two outcomes never meet again in the state graph (the true one observes the phase at the probe,
the false one at W; the token stays in the warp's variables), so each warp standing at its probe
doubled the states below it: on CUTLASS example 88's FMHA most of the states were the 2^8
combinations of the eight math warps' outcomes (bench/RESULTS-speed.md).

The true step is left out of a state s where the false outcome, followed at once by E and W, reaches
the state that T followed by E reaches, but for the token and the line of the observation
(checked on s, step by step, by the model's own steps), E is made of local operations only (a
persistent set of one each: they commute with every other actor's step), none of the steps reports
anything, none but T and W ends the warp, and the token is dead where the two runs meet (no path from there reads
it before writing it). Every execution from T(s) then has E's steps commuted to its front (the
local-step argument of successors.py), and runs from T·E(s) what the execution F·E·W·… runs from
the covering state: the same steps, enabled alike, with the same effects and findings, an SV501 of
that observation naming W's line instead of the probe's (the line `if !try_wait { wait }` is
compiled at: program.probe_then_wait). So the false subtree, which the search still explores,
holds every finding of the true one. That one line is given back by a second search: where a search
reports an SV501 at a wait's line in a program with a kept probe, explore() runs it again with every
true step (stale_waiter_may_have_moved). The proof is in docs/model.md, "A kept probe's true outcome".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ... import ir
from ...expr import expressions_in, free_names
from ...semantics.core import StepResult, Violation
from ...semantics.footprint_probe import is_kept_probe, with_var
from ...semantics.program import BRANCH, END, FOR_INIT, FOR_NEXT, JUMP, LET, OP, Program
from ...semantics.state import P_PC, P_VARS, R_LINE, R_OWNER, R_SPACE, SPACE_OBS, State

if TYPE_CHECKING:
    from ...semantics.machine import Machine

_MAX_LOCAL_STEPS = 64  # steps of the warp compared per probe at most; past it both outcomes stay


def live_positions(prog: Program, slot: int) -> list[bool]:
    """Per pc: may the variable of ``slot`` be read before it is written, from there on? The least
    fixpoint of the backward flow over the compiled code (a read at pc, or a successor where it is
    live and pc does not write it)."""
    name = prog.var_names[slot]
    code = prog.code
    reads: list[bool] = []
    for ins in code:
        read = any(name in free_names(e) for e in expressions_in((ins.expr, ins.expr2, ins.op)))
        reads.append(read or (ins.kind == FOR_NEXT and ins.slot == slot))
    writes = [ins.slot == slot and (ins.kind in (LET, FOR_INIT) or is_kept_probe(ins)) for ins in code]

    def succ(pc: int) -> tuple[int, ...]:
        ins = code[pc]
        if ins.kind == END:
            return ()
        if ins.kind == JUMP:
            return (ins.target,)
        if ins.kind in (BRANCH, FOR_INIT, FOR_NEXT) or (ins.kind == OP and ins.target >= 0):
            return (pc + 1, ins.target)
        return (pc + 1,)

    live = [False] * len(code)
    changed = True
    while changed:
        changed = False
        for pc in range(len(code) - 1, -1, -1):
            now = reads[pc] or (not writes[pc] and any(live[t] for t in succ(pc) if 0 <= t < len(code)))
            if now != live[pc]:
                live[pc] = now
                changed = True
    return live


class KeptProbeOutcomes:
    """The steps of a state without the true outcomes of kept probes that their false outcomes
    cover (module docstring). ``is_local[p][pc]``: is the operation at p's position pc local (a step
    successors.py takes alone)?"""

    def __init__(self, machine: Machine, is_local: list[list[bool]], enabled: bool = True) -> None:
        self.machine = machine
        self.is_local = is_local
        # off: every true step is kept (the search that explore() runs again where an SV501 may name the
        # wait instead of the probe: stale_waiter_may_have_moved)
        self.enabled = enabled and any(_kept_probes(prog) for prog in machine.programs)
        self._live: dict[tuple[int, int], list[bool]] = {}  # (process, slot) -> live_positions

    def may_leave_out(self) -> bool:
        """May ``without_covered`` leave a step out (is the rule on, for this machine and now)?"""
        return self.enabled and self.machine.loop_hook is None

    def without_covered(self, state: State, steps: Iterable[StepResult]) -> Iterator[StepResult]:
        """``steps`` (the expansion of ``state``) less each kept probe's true step that its false
        step covers. Not under a loop hook: its trip counts record the local control flow that the
        comparison would run."""
        machine = self.machine
        if not self.may_leave_out():
            yield from steps
            return
        for res in steps:
            label = res.label
            if len(label) == 2 and label[0] == "p":
                p = label[1]
                ins = machine.programs[p].code[state.procs[p][P_PC]]
                if is_kept_probe(ins) and machine.probe_passes(state, p) and self.true_is_covered(state, p, res):
                    continue
            yield res

    def true_is_covered(self, state: State, p: int, true: StepResult) -> bool:
        """Does the false step of p's kept probe, followed by p's local steps and its wait, reach the
        state that the true step ``true`` followed by the same local steps reaches, but for the dead
        token and the observation's line, with nothing reported on the way?"""
        machine = self.machine
        prog = machine.programs[p]
        code = prog.code
        probe = code[state.procs[p][P_PC]]
        slot = probe.slot
        false = machine.step_probe_false(state, p)
        if false is None or not _clean(true) or not _clean(false):
            return False
        a, b = true.state, false.state
        assert a is not None and b is not None
        target = machine._wait_target(p, probe.op, state.procs[p][P_VARS])  # type: ignore[arg-type]
        waited_line = -1  # the line of the wait the false run passed, once it has
        for _ in range(_MAX_LOCAL_STEPS):
            pa, pb = a.procs[p], b.procs[p]
            same_place = pa[P_PC] == pb[P_PC] and with_var(pa[P_VARS], slot, 0) == with_var(pb[P_VARS], slot, 0)
            if same_place and waited_line >= 0:
                return not self._live_at(p, slot)[pa[P_PC]] and \
                    _normalized(a, state, p, slot, pb[P_VARS][slot], waited_line) == b
            ins_b = code[pb[P_PC]]
            if not same_place:
                if waited_line >= 0 or ins_b.kind != OP or not isinstance(ins_b.op, ir.MbarWait) or \
                        machine._wait_target(p, ins_b.op, pb[P_VARS]) != target:
                    return False
                step = machine.step_process(b, p)
                if step is None or not _clean(step) or step.state.procs[p][P_PC] == pb[P_PC]:  # type: ignore[union-attr]
                    return False
                b, waited_line = step.state, ins_b.op.span.line  # type: ignore[assignment]
                continue
            if not self.is_local[p][pa[P_PC]]:
                return False
            step_a, step_b = machine.step_process(a, p), machine.step_process(b, p)
            if step_a is None or step_b is None or not _clean(step_a) or not _clean(step_b):
                return False
            a, b = step_a.state, step_b.state  # type: ignore[assignment]
            if code[a.procs[p][P_PC]].kind == END or code[b.procs[p][P_PC]].kind == END:
                return False  # an exit is no local step: it does not commute (successors.py)
        return False

    def _live_at(self, p: int, slot: int) -> list[bool]:
        key = (p, slot)
        live = self._live.get(key)
        if live is None:
            live = self._live[key] = live_positions(self.machine.programs[p], slot)
        return live


def _kept_probes(prog: Program) -> list[int]:
    """The positions of the program's kept probes."""
    return [pc for pc, ins in enumerate(prog.code) if is_kept_probe(ins)]


def stale_waiter_may_have_moved(machine: Machine, errors: Iterable[Violation]) -> bool:
    """May one of ``errors`` be an SV501 of an observation that a true outcome, left out, would have
    made at its probe's line (module docstring)? Then the search that left it out may have reported
    the stale waiter at the wait's line only, and explore() searches again with every true outcome:
    an SV501 of a waiter's observation names the line of a wait in a program with a kept probe."""
    lines = {ins.op.span.line for prog in machine.programs if _kept_probes(prog)
             for ins in prog.code if ins.kind == OP and isinstance(ins.op, ir.MbarWait)}
    return any(v.code == "SV501" and v.span is not None and v.span.line in lines for v in errors)


def _clean(res: StepResult) -> bool:
    return res.state is not None and res.violation is None and not res.warnings and not res.soft


def _normalized(state: State, before: State, p: int, slot: int, token: int, wait_line: int) -> State:
    """``state`` with p's token set to ``token`` and the observations p recorded since ``before`` (the
    probe's) at the wait's line: what the false run's state holds there."""
    old = set(before.records)
    procs = state.procs
    pstate = procs[p]
    procs = (*procs[:p], (pstate[0], with_var(pstate[P_VARS], slot, token), *pstate[2:]), *procs[p + 1:])
    records = tuple((*r[:R_LINE], wait_line, *r[R_LINE + 1:])
                    if r[R_SPACE] == SPACE_OBS and r[R_OWNER] == p and r not in old else r
                    for r in state.records)
    return state._replace(procs=procs, records=records)


__all__ = ["KeptProbeOutcomes", "live_positions", "stale_waiter_may_have_moved"]
