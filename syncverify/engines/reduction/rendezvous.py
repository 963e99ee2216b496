"""The cta_group 2 tensor-memory allocation as a persistent set: the steps of the warps at the pair's rendezvous.

`tcgen05.alloc.cta_group::2` is collective over the CTA pair (PTX ISA §9.7.16.7.1; families/async_agents.py
``op_tmem``): the first warp to come joins the rendezvous and waits, the second completes it and runs on, and the
first then passes. Such a step touches another CTA (the pair's allocation state), so it was never taken alone, nor
in the one-CTA set: on CUTLASS's sm100 2-SM GEMM both MMA warps stood at the allocation in two thirds of the states
the search expanded whole, interleaved with both producers' first stages and the epilogue's arrivals
(bench/RESULTS-speed.md).

Where every process that may still touch the allocation state of either CTA of a pair (an allocation,
deallocation or relinquish of either, from its pc on, every branch both ways: ``ahead``) stands at an allocation
(not a deallocation) with `cta_group 2` of that pair, the enabled steps T of those processes are explored and no
other: their joins, and the pass of one that joined and waits. T is persistent: on a path that avoids T no
process of T moves (its only step is in T); every other step touches neither the pair's rendezvous, nor the
columns or relinquish mark of either CTA (those are touched only by allocations, deallocations and relinquishes,
which no other process may still reach), and what an allocation reads besides them — whether the issuing lanes
know the peer CTA's start (SV402) — changes only with the issuing process's own steps. Each step of T must break no
rule, warn of nothing, leave its process running and change nothing but its process and the tensor-memory
state (checked on the step).

A warp that joined and waits passes once the rendezvous's generation has moved past the one it joined (its
token): the pass reads only that generation, which only grows, so once enabled it stays enabled and commutes with
every other step; it is taken alone (where it breaks no rule and leaves its process running), whatever the peer
does meanwhile (CUTLASS's peer MMA warp relinquishes and deallocates later, which held the pass back).

A `tmem.relinquish` is taken alone where no other process of its CTA may still allocate (``relinquish_alone``).
docs/model.md, "Steps of one CTA", *The pair's allocation*, says it in full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from ...semantics.program import END, OP
from ...semantics.state import P_PC, P_TOKEN, State
from .cta_sites import ALL_CTAS, TMEM_ALLOC, op_sites
from .element import union_ahead

if TYPE_CHECKING:
    from ...semantics.core import StepResult
    from ...semantics.machine import Machine

# The rule on or off (off: the search as before it; tests compare the two)
ENABLED = True
# every process that may still touch the allocation state must stand at the rendezvous (off only in tests: they
# show what the condition keeps)
ALL_AT_RENDEZVOUS = True
# a relinquish waits while another process of its CTA may still allocate (off only in tests, as above)
NO_ALLOC_AHEAD = True


class AllocRendezvous:
    """The rule of the module docstring over one machine: per process and pc, the CTAs whose tensor-memory
    allocation state it may still touch (ALL_CTAS for an operation whose objects are not worked out)."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.at_alloc = [[ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) and ins.op.cta_group == 2
                          and not ins.op.dealloc for ins in prog.code] for prog in machine.programs]
        # (its tables are the programs' own, for every trip count: it applies under a loop hook too, the lift
        # computing its set again per trip count: docs/model.md, "Lone steps under the lift")
        self.applies = ENABLED and any(any(row) for row in self.at_alloc)
        # per process and pc: may it still allocate (tcgen05.alloc of any cta_group, its own CTA's columns)?
        allocs = [[frozenset({0}) if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) and not ins.op.dealloc
                   else frozenset() for ins in prog.code] for prog in machine.programs]
        self.may_alloc = [[bool(a) for a in union_ahead(prog, row)]
                          for prog, row in zip(machine.programs, allocs, strict=True)] \
            if ENABLED else []
        self.ahead: list[list[frozenset[int]]] = []
        if self.applies:
            for p, prog in enumerate(machine.programs):
                here = [frozenset(d for d, key in op_sites(machine, p, ins.op) if key == TMEM_ALLOC or key[0] == "*")
                        if ins.kind == OP else frozenset() for ins in prog.code]
                self.ahead.append(union_ahead(prog, here))

    def steps(self, state: State, tried: dict[int, StepResult | None]) -> list[StepResult] | None:
        """T of the first pair whose allocation qualifies (module docstring), or None. Steps computed are kept
        in ``tried`` for the full expansion."""
        if not self.applies:
            return None
        machine = self.machine
        procs = state.procs
        for p, ps in enumerate(procs):
            if not self.at_alloc[p][ps[P_PC]]:
                continue
            if ps[P_TOKEN] >= 0:  # joined: its pass, once enabled, stays so and commutes with every step
                res = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
                if res is not None and self.keeps_to(state, res, p):
                    return [res]
                continue
            pair = frozenset({machine.procs[p].cta & ~1, machine.procs[p].cta | 1, ALL_CTAS})
            members = [q for q, qs in enumerate(procs) if self.ahead[q][qs[P_PC]] & pair]
            at = [q for q in members if self.at_alloc[q][procs[q][P_PC]]]
            if ALL_AT_RENDEZVOUS and len(at) < len(members):
                continue
            out = []
            for q in at:
                res = tried[q] if q in tried else tried.setdefault(q, machine.step_process(state, q))
                if res is None:
                    continue
                if not self.keeps_to(state, res, q):
                    return None
                out.append(res)
            return out or None
        return None

    def relinquish_alone(self, state: State, p: int) -> bool:
        """May process p's `tmem.relinquish` be taken alone, as far as the others go? It sets its CTA's relinquish
        mark (families/tcgen05.py ``op_tmem_relinquish``), which only an allocation of that CTA reads (SV604; a
        deallocation keeps the mark as it is): where no other process of the CTA may still allocate, no step on a
        path that avoids it reads what it writes, and it reads nothing (module docstring). The caller checks the
        step (``keeps_to``)."""
        if not self.may_alloc:
            return False
        machine = self.machine
        procs = state.procs
        return not NO_ALLOC_AHEAD or not any(q != p and self.may_alloc[q][procs[q][P_PC]]
                                             for q in machine.procs_of_cta[machine.procs[p].cta])

    def keeps_to(self, state: State, res: StepResult, q: int) -> bool:
        """Does this step of process q break no rule, warn of nothing, leave q running and change nothing but q
        and the tensor-memory state?"""
        if res.violation is not None or res.soft or res.warnings or res.state is None:
            return False
        new = res.state
        if self.machine.programs[q].code[new.procs[q][P_PC]].kind == END:
            return False
        if new.cluster != state.cluster or new.named != state.named or new.mbars != state.mbars or \
                new.agents != state.agents:
            return False
        return not any(r != q and a is not b and a != b
                       for r, (a, b) in enumerate(zip(state.procs, new.procs, strict=True)))


__all__ = ["ALL_AT_RENDEZVOUS", "ENABLED", "NO_ALLOC_AHEAD", "AllocRendezvous"]
