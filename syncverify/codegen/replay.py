"""Replay a counterexample on the GPU: the order of its steps as (process, site, occurrence).

A race or an init-visibility bug shows on hardware only when the bad order
happens, which timing rarely gives. The checker's shortest counterexample
names that order; the kernel built with a replay forces it with a global turn
counter (design §5: "reproduced deterministically by replaying the
counterexample's order"). Completions of asynchronous copies are not
steps a kernel can schedule, so they are left to the hardware; every thread
step is gated, and everything after the last recorded step runs freely.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .. import ir
from ..semantics.machine import Machine
from ..semantics.state import P_PC, P_VARS
from .support import EmitRefused


@dataclass(frozen=True)
class ReplayOrder:
    code: str
    message: str
    steps: tuple[tuple[int, int, int, int], ...]  # (process, site, occurrence, leader-only)
    trace: tuple[str, ...]  # one line per gated step, for reports

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "steps": [list(s) for s in self.steps],
                "trace": list(self.trace)}


def replay_order(protocol: ir.Protocol, site_of: dict[int, int], code: str | None = None,
                 max_states: int = 2_000_000, seconds: float = 300.0) -> ReplayOrder:
    """The shortest counterexample for ``code`` (or the first error found) as a replay order.

    Searched without symmetry reduction so that every step names the real warp that took it."""
    from ..engines.explicit import Budget, search

    machine = Machine(protocol)
    outcome = search(machine, Budget(max_states, seconds), None)
    errors = [(v, labels) for v, labels in outcome.errors if code is None or v.code == code]
    if not errors:
        found = sorted({v.code for v, _ in outcome.errors}) or ["none"]
        raise EmitRefused(f"{protocol.path}: no counterexample{f' for {code}' if code else ''} to replay "
                          f"(the checker found: {', '.join(found)})")
    violation, labels = min(errors, key=lambda e: len(e[1]))
    state = machine.initial()
    occ: Counter[tuple[int, int]] = Counter()
    steps: list[tuple[int, int, int, int]] = []
    trace: list[str] = []
    for label in labels:
        if label[0] == "p":
            p = label[1]
            ins = machine.programs[p].code[state.procs[p][P_PC]]
            if isinstance(ins.op, ir.WgmmaRead):
                raise EmitRefused(f"{protocol.path}:{ins.line}: the counterexample of {violation.code} orders the "
                                  "warps of a warpgroup around `wgmma.read`, but wgmma.mma_async is "
                                  "warpgroup-collective: the GPU cannot be forced into a per-warp order there")
            site = site_of[id(ins.op)]
            n = occ[(p, site)]
            occ[(p, site)] += 1
            steps.append((p, site, n, int(ins.leader_only)))
            it = _iteration(machine, p, state.procs[p][P_VARS], state.procs[p][P_PC])
            trace.append(f"{machine.proc_label(p)} line {ins.line}{' ' + it if it else ''}")
        res = machine.step(state, label)
        if res is None or res.state is None:
            break
        state = res.state
    return ReplayOrder(violation.code, violation.message, tuple(steps), tuple(trace))


def _iteration(machine: Machine, p: int, vars_: tuple, pc: int) -> str:
    """The loop variables for a trace line (Machine.iteration gained a pc argument once; accept both)."""
    try:
        return machine.iteration(p, vars_, pc)  # type: ignore[call-arg]
    except TypeError:
        return machine.iteration(p, vars_)  # type: ignore[call-arg]
