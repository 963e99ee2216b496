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
  else while no loop hook is installed; with one, see "Under a loop hook");
* each named barrier's open generation (count, threads arrived, generation number) and each
  process's wait token: a named-barrier wait passes in the walk by the first two, and a warp
  is parked on a generation by the last two;
* for each mbarrier: whether it is valid, its phase's parity, its pending arrivals, its
  expected count (a wait that needs a second completion in the walk needs that many more
  arrivals: precede_walk.py, "Phases") and its tx-count (a completion needs the bytes that can
  land to cover it: precede_walk.py, "Bytes"); for the
  step's own barrier under ``freeze``, also whether it is in phase 0 and its first-wait table
  (``_jprev``), the only other fields ``passes`` reads;
* the asynchronous agents in flight as a multiset of (kind, target barrier, bytes of a copy),
  less the step's own agent (the walk skips the first agent that *is* it, and counts the others
  by kind, target and a copy's bytes only);
* the arguments: the barrier, the frozen process, the forbidden event kinds, ``freeze``, the
  named barrier's index, ``landings_ok``, whether the updates of m are collected, and the
  processes whose ends are all the caller reads (``goal``: the walk may stop early for them).

The walk's answer is a function of those: its outcome (including its early None returns) does
not depend on the order it meets the events in, since it is a least fixpoint over a monotone
set of arrivals, byte-moving barriers, freed barriers and lifecycles. So an entry holds
exactly what a fresh walk returns, and the named arrivals or updates of m it collected (one
per position of the set, the same whatever the order), which a hit hands out again. This is
memoization of a pure function, not an approximation: no verdict changes.
"
How the key is stored. Every miss stores one entry, and where the walk is asked several times per
state about positions no other state shares, nearly every call misses: on the CUTLASS ping-pong GEMM
(1x1, K=128) 53,353 entries for 16,097 states, 6% hits. Kept as tuples of the projected fields
(every process's position, every mbarrier's and named barrier's projection, fresh tuples per call)
they took 268 MB, 5 KB an entry, 17 KB per stored state: nearly all the memory of the search. So
each projected part is numbered once (one small integer per distinct value, per process for the
positions), and the key is those numbers packed into one ``bytes`` object (its hash is cached by
Python; about 100 bytes on a GEMM of 12 warps). Numbering is a bijection between values and numbers for as long as the
table lives (the tables start over together), so two keys are equal exactly when the projections
are: nothing is merged that the tuple keys kept apart. The projections of a state are computed once
per state, not once per call: the parts of the state last asked about are kept (by reference, so
that an identity test cannot be fooled by a reused address) with their numbers.

Under a loop hook (the all-iterations lift's symbolic trip count). The sequences the walk reads are
the hook's for its trip count of the moment, and each of their trip-count tests is to be recorded by
the hook when made (hooked.py). So the walk's answer is a function of the key and of the hook's
decisions on the tests the walk asked: an entry keeps those tests with the answer, a hit asks the
hook each of them again (so that it records them as the walk would have, or finds one too far, when
the walk refuses), and the answer is used only where every decision is the same
(semantics/hooked_local.py). The same answer then holds for every state with that key: with ITERS
fixed at n the machine is the concrete one, for which the key is exact; with ITERS not fixed, the
answer is that of every concrete ITERS above the tests, and the values tested add their branches
with ITERS fixed as a fresh walk's would. Such entries live in a table of their own, asked on every
call.

When the table is not asked. On some searches nearly every call misses: the 1x2 ping-pong GEMM (4% of
37,739 calls hit, to 40,000 states) and the 2x1 cooperative GEMM with a stage reused (2%), where
the key alone cost a twentieth of the search and the misses' entries its memory; on the 2-SM GEMM
97% hit. So the hits are counted over windows of WINDOW calls, and after a window where fewer than
one call in FEW_HITS hit, the next SKIPPED calls walk without a key (then a window is counted
again), and the table and its numberings start over: by the next window the search has moved on. On
the CuTe-DSL 2-CTA blockscaled GEMM (up to 256 agents in flight, each key's projection of them a tuple
of triples) the 4,096 entries of its one window, none of them hit, had held 37 MB, 40% of that
search's memory, to its end. The window's entries still held 27 MB while it lasted, and the memory
freed then was the high mark that the rest of the search filled: 441,808 triples in 3,775 entries. So
the agents are numbered too: each agent's triple once, each multiset as its agents' numbers sorted and
packed (``_others``; four bytes an agent).

Which calls go where is a function of the sequence of calls, so a search does the same work each time
it runs; and a call answered by the walk gets the walk's answer, as a remembered one does, so no
answer depends on it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable
from itertools import compress, count, repeat
from operator import is_
from typing import TYPE_CHECKING

from ...semantics.hooked_local import remembered
from ...semantics.state import AG_TMA, M_EXP, M_JPREV, M_K, M_PEND, M_TX, M_VALID, P_TOKEN, State
from .hooked import walk_under_hook

if TYPE_CHECKING:
    from ...semantics.machine import Machine

LIMIT = 1 << 18  # entries remembered before the table starts over (about 150 bytes each)
WINDOW = 1 << 12  # calls over which the table's hits are counted
FEW_HITS = 8  # fewer hits than a window's calls over this: the table is not asked for a while
SKIPPED = 4 * WINDOW  # the calls that then go to the walk directly

Walk = Callable[..., "list[bool] | None"]


class _Numbers:
    """One small integer per distinct value, in the order first met."""

    __slots__ = ("_of",)

    def __init__(self) -> None:
        self._of: dict[object, int] = {}

    def __call__(self, value: object) -> int:
        n = self._of.get(value)
        if n is None:
            n = self._of[value] = len(self._of)
        return n

    def __len__(self) -> int:
        return len(self._of)


class PrecedeMemo:
    """The answers of one machine's ``_can_precede`` walk by their projected arguments."""

    def __init__(self, machine: Machine, walk: Walk) -> None:
        self._machine = machine
        self._walk = walk  # the uncached walk, called as walk(state, m, frozen, agent, ...)
        self._table: dict[bytes, tuple[tuple[bool, ...] | None, tuple]] = {}
        self.hits = 0
        self.misses = 0
        # calls and hits of the current window, and the calls left that go to the walk directly
        self._window = self._window_hits = self._bypass = 0
        self._start()

    def _window_end(self) -> None:
        """Where fewer than one call in FEW_HITS of the window just ended found its answer remembered,
        the next SKIPPED calls go to the walk without a key (module docstring, "When the table is not
        asked")."""
        if self._window_hits * FEW_HITS < WINDOW:
            self._bypass = SKIPPED
            self._start()  # what it stored was nearly never asked again (module docstring)
        self._window = self._window_hits = 0

    def _start(self) -> None:
        """Empty the table and the numbering it is keyed by (together: a number means one value)."""
        self._table.clear()
        self._hooked_table: dict[bytes, tuple] = {}  # under a loop hook: (answer, collected) and the tests asked
        self._position = [_Numbers() for _ in self._machine.procs]  # (pc, vars, token) per process
        self._mbars = _Numbers()  # every mbarrier's (valid, parity, pending, expected)
        self._named = _Numbers()  # every named barrier's open generation (count, arrived, gen)
        self._rest = _Numbers()  # the arguments, the own barrier's fields, the agents in flight
        self._agent_kinds = _Numbers()  # each agent's (kind, target barrier, bytes of a copy)
        self._agent_sets = _Numbers()  # a multiset of agents: their sorted numbers, packed
        self._outcomes: dict[tuple, tuple] = {}  # one object per distinct answer
        # the parts of the state last asked about, kept by reference, and their numbers
        self._last_procs: tuple | None = None
        self._last_positions: list[int] = []
        self._last_mbars: tuple | None = None
        self._last_mbars_n = 0
        self._last_named: tuple | None = None
        self._last_named_n = 0
        self._last_agents: tuple | None = None
        self._last_agent_numbers: list[int] = []  # each agent's number, in the state's order
        self._last_agents_sorted = array("i")  # those numbers sorted
        self._last_agents_packed = b""  # ... and packed
        self._last_agents_n = 0  # the number of the whole multiset

    def key(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
            freeze: bool, named: tuple[int, list] | None, landings_ok: bool, collect: bool = False,
            goal: tuple[int, ...] = ()) -> bytes:
        """Everything the walk reads, and nothing else (module docstring), numbered and packed."""
        procs = state.procs
        if procs is not self._last_procs:
            self._last_positions = [number((ps[0], ps[1], ps[P_TOKEN]))
                                    for number, ps in zip(self._position, procs, strict=True)]
            self._last_procs = procs
        mbars = state.mbars
        if mbars is not self._last_mbars:
            self._last_mbars_n = self._mbars(tuple([(mb[M_VALID], mb[M_K] % 2, mb[M_PEND], mb[M_EXP], mb[M_TX])
                                                     for mb in mbars]))
            self._last_mbars = mbars
        # named-barrier waits pass by the open generations' counts and threads, and a warp parked
        # at one by whether its token is the generation's (the tokens are in the positions)
        bars = state.named
        if bars is not self._last_named:
            self._last_named_n = self._named(tuple([(nb.count, nb.arrived, nb.gen) for nb in bars]))
            self._last_named = bars
        own = None
        if freeze and m >= 0:
            mb = mbars[m]
            own = (mb[M_K] == 0, mb[M_JPREV])
        rest = self._rest((own, self._others(state.agents, agent), m, frozen, forbidden, freeze,
                           named[0] if named is not None else None, landings_ok, collect, goal))
        # 4 bytes a number: each numbering grows only on a miss, and the table starts over at LIMIT
        return array("i", [*self._last_positions, self._last_mbars_n, self._last_named_n, rest]).tobytes()

    def _others(self, agents: tuple, agent: tuple | None) -> int:
        """The number of the multiset of the agents in flight other than ``agent`` (the first one that *is*
        it, if any), each agent as its (kind, target barrier, bytes of a copy). Each agent is numbered
        and the multiset is its agents' numbers sorted, packed in bytes: equal numbers exactly when the
        multisets of triples are equal, as a sorted tuple of the triples was, but a few bytes an agent
        where the tuple held a triple (module docstring, "When the table is not asked"). The numbers
        of a state's agents are worked out once per state."""
        if agents is not self._last_agents:
            kind = self._agent_kinds
            self._last_agent_numbers = [kind((b[0], b[4], b[5] if b[0] == AG_TMA else 0)) for b in agents]
            self._last_agents_sorted = array("i", sorted(self._last_agent_numbers))
            self._last_agents_packed = self._last_agents_sorted.tobytes()
            self._last_agents_n = self._agent_sets(self._last_agents_packed)
            self._last_agents = agents
        if agent is None:
            return self._last_agents_n
        at = next(compress(count(), map(is_, agents, repeat(agent))), None)
        if at is None:
            return self._last_agents_n
        whole = self._last_agents_packed
        i = 4 * bisect_left(self._last_agents_sorted, self._last_agent_numbers[at])
        return self._agent_sets(whole[:i] + whole[i + 4:])

    def __call__(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                 freeze: bool, named: tuple[int, list] | None = None,
                 landings_ok: bool = False, updates: list | None = None,
                 goal: tuple[int, ...] = ()) -> tuple[bool, ...] | None:
        if self._machine.loop_hook is not None:
            return self._hooked(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates, goal)
        if self._bypass:
            self._bypass -= 1
            ends = self._walk(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates, goal)
            return None if ends is None else tuple(ends)
        self._window += 1
        if self._window == WINDOW:
            self._window_end()
        if len(self._table) >= LIMIT:
            self._start()
        key = self.key(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates is not None, goal)
        out_list = named[1] if named is not None else updates  # what the walk collects, if anything
        hit = self._table.get(key)
        if hit is not None:
            self.hits += 1
            self._window_hits += 1
            if out_list is not None:
                out_list.extend(hit[1])
            return hit[0]
        self.misses += 1
        collected: list = []
        ends = self._walk(state, m, frozen, agent, forbidden, freeze,
                          None if named is None else (named[0], collected), landings_ok,
                          None if updates is None else collected, goal)
        if out_list is not None:
            out_list.extend(collected)
        out = None if ends is None else tuple(ends)
        entry = (out, tuple(collected))
        self._table[key] = self._outcomes.setdefault(entry, entry)
        return out

    def _hooked(self, state: State, m: int, frozen: int, agent: tuple | None, forbidden: frozenset[int],
                freeze: bool, named: tuple[int, list] | None, landings_ok: bool, updates: list | None,
                goal: tuple[int, ...]) -> tuple[bool, ...] | None:
        """The walk under a loop hook (module docstring, "Under a loop hook")."""
        if len(self._hooked_table) >= LIMIT:
            self._start()
        key = self.key(state, m, frozen, agent, forbidden, freeze, named, landings_ok, updates is not None, goal)
        out_list = named[1] if named is not None else updates

        def walk() -> tuple:
            collected: list = []
            ends = self._walk(state, m, frozen, agent, forbidden, freeze,
                              None if named is None else (named[0], collected), landings_ok,
                              None if updates is None else collected, goal)
            return (None if ends is None else tuple(ends), tuple(collected))

        def asked() -> tuple[bool, ...] | None:
            ends, collected = remembered(self._machine, self._hooked_table, key, walk)
            if out_list is not None:
                out_list.extend(collected)
            return ends

        return walk_under_hook(self._machine, asked)


__all__ = ["LIMIT", "PrecedeMemo"]
