"""Remembering what can come before a step across states (the reduction's fixpoint, once per key).

The partial-order reduction asks, several times per state, what the other actors can execute
before one step (Reduction._can_precede): a least fixpoint that walks every process along its
fixed sequence of operations. On the 2-CTA multicast GEMM at 4 math warps that walk was 29 of
54 s of the search (cProfile: 173,065 calls, about 150 instruction look-ups each), and no two
calls had equal states: the states differ in their access records and in the parts of the
barriers and processes that the walk never reads. Projected on what it reads, the 173,065
calls had 16,043 distinct arguments. So the answer is remembered under that projection.

What the walk reads, and so what the key holds (anything it does not hold must not be read by
Reduction._can_precede; a new read there needs its field here):

* each process's position: program counter and variables (``Machine.future`` depends on nothing
  else while no loop hook is installed; with one, nothing is remembered);
* each named barrier's open generation (count, threads arrived, generation number) and each
  process's wait token: a named-barrier wait passes in the walk by the first two, and a warp
  is parked on a generation by the last two;
* for each mbarrier: whether it is valid, its phase's parity and its pending arrivals; for the
  step's own barrier under ``freeze``, also whether it is in phase 0 and its first-wait table
  (``_jprev``), the only other fields ``passes`` reads;
* the asynchronous agents in flight as a multiset of (kind, target barrier), less the step's
  own agent (the walk skips the first agent that *is* it, and counts the others by kind and
  target only);
* the arguments: the barrier, the frozen process, the forbidden event kinds, ``freeze``, the
  named barrier's index, ``landings_ok`` and whether the updates of m are collected.

The walk's answer is a function of those: its outcome (including its early None returns) does
not depend on the order it meets the events in, since it is a least fixpoint over a monotone
set of arrivals, byte-moving barriers, freed barriers and lifecycles. So an entry holds
exactly what a fresh walk returns, and the named arrivals or updates of m it collected (one
per position of the set, the same whatever the order), which a hit hands out again. This is
memoization of a pure function, not an approximation: no verdict changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...semantics.state import M_JPREV, M_K, M_PEND, M_VALID, P_TOKEN, State

if TYPE_CHECKING:
    from ...semantics.machine import Machine

LIMIT = 1 << 18  # entries remembered before the table starts over (each a few hundred bytes)

Walk = Callable[..., "list[bool] | None"]


class PrecedeMemo:
    """The answers of one machine's ``_can_precede`` walk by their projected arguments."""

    def __init__(self, machine: Machine, walk: Walk) -> None:
        self._machine = machine
        self._walk = walk  # the uncached walk, called as walk(state, m, frozen, agent, ...)
        self._table: dict[tuple, tuple[tuple[bool, ...] | None, tuple]] = {}
        self.hits = 0
        self.misses = 0

    def key(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
            freeze: bool, named: tuple[int, list] | None, landings_ok: bool, collect: bool = False) -> tuple:
        """Everything the walk reads, and nothing else (module docstring)."""
        procs = state.procs
        positions = tuple([ps[:2] for ps in procs])
        mbars = tuple([(mb[M_VALID], mb[M_K] % 2, mb[M_PEND]) for mb in state.mbars])
        own = None
        if freeze and m >= 0:
            mb = state.mbars[m]
            own = (mb[M_K] == 0, mb[M_JPREV])
        skip = agent is not None
        agents = []
        for b in state.agents:
            if skip and b is agent:
                skip = False
                continue
            agents.append((b[0], b[4]))
        agents.sort()
        # named-barrier waits pass by the open generations' counts and threads, and a warp parked
        # at one by whether its token is the generation's
        bars = tuple([(nb.count, nb.arrived, nb.gen) for nb in state.named])
        tokens = tuple([ps[P_TOKEN] for ps in procs])
        return (positions, mbars, own, tuple(agents), bars, tokens, m, frozen, forbidden,
                freeze, named[0] if named is not None else None, landings_ok, collect)

    def __call__(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                 freeze: bool, named: tuple[int, list] | None = None,
                 landings_ok: bool = False, updates: list | None = None) -> tuple[bool, ...] | None:
        if self._machine.loop_hook is not None:  # the sequences are not fixed: nothing is remembered
            ends = self._walk(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates)
            return None if ends is None else tuple(ends)
        key = self.key(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates is not None)
        out_list = named[1] if named is not None else updates  # what the walk collects, if anything
        hit = self._table.get(key)
        if hit is not None:
            self.hits += 1
            if out_list is not None:
                out_list.extend(hit[1])
            return hit[0]
        self.misses += 1
        collected: list = []
        ends = self._walk(state, m, frozen, agent, forbidden, freeze,
                          None if named is None else (named[0], collected), landings_ok,
                          None if updates is None else collected)
        if out_list is not None:
            out_list.extend(collected)
        out = None if ends is None else tuple(ends)
        if len(self._table) >= LIMIT:
            self._table.clear()
        self._table[key] = (out, tuple(collected))
        return out


__all__ = ["LIMIT", "PrecedeMemo"]
