"""What the other actors can execute before one step: the walk behind the partial-order
reduction's lone steps (landings, first observing waits, arrive.expect_tx, named arrivals).

The set computed is the least fixpoint of: a process other than the frozen one can execute the
next operation of its fixed sequence (control flow depends only on loop variables) if that is
not a wait, or is a wait that can pass first. docs/model.md, "Steps taken alone against what can
come first", gives the argument; this module adds two things to the walk it describes.

**Segments.** A process's sequence is walked from wait to wait: the events of the operations
between two waits (or a wait and the end) are gathered once per starting position (process,
pc, variables) and kept. The walk then makes one look-up per segment instead of one per
operation, and meets the same events in the same order, so it computes the same set.

**Named-barrier waits.** A `bar.sync` with an explicit count N parks its warp until the
generation it joined completes, and exits never release such a generation (§1.6 of
docs/model.md). Every execution that avoids the step runs, per process, a prefix inside the set
(by induction along it): a `bar.sync` wait that passes in it passed because a generation of its
barrier completed, which took N threads of arrivals: the threads already in the open
generation (if it has any, its own count N applies, since a new generation opens only after it
completes) plus arrivals made in the execution, all inside the set by induction. So a named
wait is taken to pass only when the open generation's threads plus 32 per arrival on the
barrier in the set reach the open generation's count, or, with none open, the smallest count
among those arrivals. (32 per arrival: barrier operations are refused for warps split between
roles, SV116; a warp of fewer threads only makes the test pass sooner.) All-thread barriers
(`syncthreads`, `bar.sync` without a count) are released by exits and still always pass. Before,
every named wait was taken to pass: on FA3's ping-pong the other warpgroup then ran on into its
next rounds inside the set and its later `bar.arrive`s kept an arrival from being taken alone.

**Phases.** A wait on an mbarrier in phase K passes "now" when its parity is not K's (it reads
phase K - 1 as complete); otherwise it needs phase K to complete. Read off the state alone, a
process's *second* wait on the same barrier, of the other parity, passes now, although the process
can only stand there after its first wait passed, which needed phase K's completion: it then
needs phase K + 1 too. So the walk keeps, per process and barrier, the completions its waits in
the set have needed so far (``seen``; 0 at the state, where every later wait sees phase K or
later), and a wait needs ``completions_needed(K, seen, parity)``: the least n >= seen with K + n
of the other parity. n = 0 passes now (under ``freeze``, the frozen barrier's only way); n >= 1
needs, besides the condition for phase K (its pending arrivals, or with none pending a byte count
that moves), n - 1 more phases of the expected count's arrivals each: the arrivals in the set
must reach pending + (n - 1) * expected. The frozen barrier never completes in the walk. Every
execution that avoids the step still runs, per process, a prefix inside the set: by induction
along it, with m2 neither freed nor re-initialized in the set (those waits pass anyway), m2's
phase only rises and its expected count stays; a process's wait on m2 that passes in the
execution passes in a phase at least as late as its earlier wait's, of the other parity from its
own, so at K + n or later; reaching K + n took n completions, the first with phase K's pending
arrivals (or a byte count that moved), each other with the expected count's arrivals (an arrival
past the pending count is SV504, which ends the execution), all of them arrivals of the
execution's earlier moves, inside the set. On DeepGEMM's multicast 2 the other CTA's math warps
passed their second full wait on a stage this way, and the producer's second round of that stage
joined the updates that could come before a landing (bench/RESULTS-speed.md, 2026-12-06, 03:10).

**Bytes.** A phase completes when its pending count and its tx-count are both 0, exactly
(`rules.mb_try_complete`). With tx-count T now and P arrivals pending, the bytes landed (copies,
`complete_tx`) by the completion are T plus every byte expected since (`expect_tx`, and the bytes an
`arrive.expect_tx` carries), so at least T plus what the P arrivals it needs carry: P times the
fewest bytes per arrival among the arrivals on the barrier in the set (0 where a plain arrive, a
commit or an arrive-on is among them). A wait that needs the phase's completion passes in the walk
only if the bytes the copies in flight and the copies and `complete_tx` in the set can take off
the barrier reach that (``bytes_cover``); before, any byte count that could move let it pass. Every
execution that avoids the step still runs, per process, a prefix inside the set: by induction, the
completion that let such a wait pass took arrivals and byte counts of the execution's earlier
moves, all in the set, and the landings among them cover T and the bytes the arrivals carried.
The sums grow with the set and the fewest bytes per arrival only falls, so the test is monotone
and the fixpoint stays a least one. On CUTLASS's sm_90 ping-pong GEMM with cluster 1x2 each CTA's
full barrier expects 24,576 bytes, 4,096 of them from the peer's multicast: with one producer
standing at its wait on an empty barrier, the peer's math warps could pass their full wait in the
walk on their own CTA's copies alone, and their release onto the waiting producer's barrier
refused its wait as an observing one (bench/RESULTS-speed.md).

The answer is the same kind of over-approximation as before, only smaller, so each lone-step
condition that reads it keeps its argument.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...expr import EvalError
from ...semantics.core import BudgetExceeded, Violation
from ...semantics.footprint import _END, _EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE, _EV_NAMED, _EV_WAIT
from ...semantics.hooked_local import remembered
from ...semantics.program import BAR_WAIT
from ...semantics.state import AG_TMA, M_EXP, M_K, M_PEND, M_TX, M_VALID, P_PC, P_TOKEN, P_VARS, State

if TYPE_CHECKING:
    from ...semantics.machine import Machine

_ANY_UPDATE = frozenset({_EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE})  # every event that changes a barrier
_NO_ARRIVAL = frozenset({_EV_ARRIVE, _EV_FREE, _EV_LIFE})  # what a first observing wait must not follow

# a segment: (the wait it starts with or None, the events up to the next wait, the key of that
# next wait or None, the process ends there, a position that cannot be evaluated comes there)
Segment = tuple[tuple | None, tuple, tuple | None, bool, bool]
_BARWAIT = "barwait"  # the head of a segment that starts at a bar.sync's wait: (_BARWAIT, index, count)


class FreshPass(Exception):
    """The walk met a wait that passes on the frozen barrier in phase 0 (or is a first wait)."""


def _stop_at_deadline(machine: Machine) -> None:
    """The search's time budget, asked inside a walk: a walk over long loops of many processes can take
    longer than the whole budget (tests/test_adversarial.py, 512 warps of 1,000 rounds)."""
    if machine.deadline is not None and time.monotonic() > machine.deadline:
        raise BudgetExceeded("time budget reached while the partial-order reduction walked what can come first")


def segment(machine: Machine, key: tuple, table: dict[tuple, Segment | None]) -> Segment | None:
    """The segment of process key[0]'s sequence that starts at ``key`` (module docstring), or None
    where the position itself cannot be evaluated."""
    seg = table.get(key, table)
    if seg is not table:
        return seg  # type: ignore[return-value]
    future = machine.future
    fut = future(key)
    if fut is None:
        table[key] = None
        return None
    events, nxt = fut
    if events is _END:
        seg = (None, (), None, True, False)
        table[key] = seg
        return seg
    q, pc, vars_ = key
    code = machine.programs[q].code
    head: tuple | None = None
    if code[pc].kind == BAR_WAIT:
        try:
            idx, count, _, _ = machine.named_arrival(q, code[pc].op, vars_)
        except (EvalError, Violation):
            table[key] = None
            return None
        head = (_BARWAIT, idx, count)
    elif events and events[0][0] == _EV_WAIT:
        head, events = events[0], events[1:]
    gathered = list(events)
    at = nxt
    walked = 0
    while True:
        walked += 1
        if not walked & 0xFFF:
            _stop_at_deadline(machine)
        fut = future(at)
        if fut is None:
            seg = (head, tuple(gathered), None, False, True)
            break
        events, nxt = fut
        if events is _END:
            seg = (head, tuple(gathered), None, True, False)
            break
        if code[at[1]].kind == BAR_WAIT or (events and events[0][0] == _EV_WAIT):
            seg = (head, tuple(gathered), at, False, False)
            break
        gathered.extend(events)
        at = nxt
    if len(table) >= 1 << 16:
        table.clear()
    table[key] = seg
    return seg


def completions_needed(k: int, seen: int, parity: int) -> int:
    """How many completions of an mbarrier in phase ``k`` a wait with ``parity`` needs before it
    passes, for a process whose earlier waits on it in the walk needed ``seen`` (module docstring,
    "Phases"): the process stands after phase k + seen began, and a parity wait passes in a phase
    of the other parity (it reads the phase before it as complete)."""
    return seen if (k + seen) % 2 != parity % 2 else seen + 1


def bytes_cover(landable: int, least: tuple[int, int] | None, tx: int, pend: int) -> bool:
    """Can the bytes that copies and complete_tx can still take off an mbarrier (``landable``) bring it
    to a completion of its current phase, with tx-count ``tx`` and ``pend`` arrivals pending, where
    the arrival that can come first carrying least bytes per arrival carries ``least`` = (bytes,
    arrivals)? (Module docstring, "Bytes".)"""
    if least is None or pend <= 0:
        return landable >= tx
    return landable * least[1] >= tx * least[1] + pend * least[0]


def named_wait_passes(state: State, idx: int, count: int | None, q: int, here: bool,
                      arrivals: dict[int, int], least: dict[int, int | None]) -> bool:
    """Can process q's wait at a `bar.sync` on named barrier ``idx`` (with ``count``) pass before
    the step, given the ``arrivals`` on each named barrier in the set so far and the ``least``
    count among them? ``here``: q stands at this wait in ``state`` (parked on a generation).
    (Module docstring: a generation of an explicit count completes only with that many threads.)"""
    nb = state.named[idx]
    if count is None or (here and state.procs[q][P_TOKEN] != idx * 65536 + nb.gen):
        return True  # an all-thread barrier (exits release it), or a generation already complete
    if nb.arrived:
        need = nb.count
    elif idx in least:
        need = least[idx]
    else:
        return False
    return need is None or nb.arrived + 32 * arrivals.get(idx, 0) >= need


def can_precede(machine: Machine, table: dict, state: State, m: int, frozen: int, agent: tuple | None,
                forbidden: frozenset[int], freeze: bool, named: tuple[int, list] | None = None,
                landings_ok: bool = False, updates: list | None = None,
                goal: tuple[int, ...] = ()) -> list[bool] | None:
    """For each process, whether it can reach its end before the step; None when some actor can
    first reach an event on m of a kind in ``forbidden`` (or a position that cannot be
    evaluated). The arguments are Reduction._can_precede's (its docstring says what each means);
    ``table`` keeps the segments.

    ``updates``: the arrivals and byte counts of the processes on m in the set are appended to it
    as (arrivals, tx-count change) instead of answering None; with ``freeze``, a wait on m in the
    set that passes now then answers None where any was appended (docs/model.md, "Landings
    against updates that can come first").

    ``goal``: the processes whose ends are all the caller reads (nothing collected, nothing
    forbidden). They are walked first, and the walk stops as soon as every one of them reaches its
    end: each end found is one of the fixpoint's, so they all can, and the caller's answer is the
    fixpoint's (a later None, from a position that cannot be evaluated, would tell such a caller
    the same: not that one of them cannot end). The other processes' ends may then be short of the
    fixpoint's. On the 2x1 ping-pong GEMM the peer CTA can end first in three quarters of the walks
    _peer_cannot_end_first asks for.

    Under a loop hook a segment's next key is the hook's answer for its trip count of the moment,
    and each of its tests is to be recorded by the hook when made (hooked.py): ``table`` then keeps
    each segment with the tests it asked, and one is used again only where the hook decides them
    alike (semantics/hooked_local.py)."""
    if machine.loop_hook is not None:
        segments = table

        def segment_at(key: tuple) -> Segment | None:
            return remembered(machine, segments, key, lambda: segment(machine, key, {}))
    else:
        def segment_at(key: tuple) -> Segment | None:
            return table.get(key) or segment(machine, key, table)
    mbars = state.mbars
    names = machine.mb_names
    m_life = names[m][:2] if m >= 0 else None
    arrivals: dict[int, int] = {}
    bytes_move: set[int] = set()
    landable: dict[int, int] = {}  # mbarrier -> bytes the copies in flight and in the set can take off it ("Bytes")
    carried: dict[int, tuple[int, int]] = {}  # mbarrier -> (bytes, arrivals) of its arrival in the set carrying least
    free: set[int] = set()
    lives: set[tuple[int, str]] = set()
    named_arrivals: dict[int, int] = {}  # named barrier -> arrivals on it in the set
    named_least: dict[int, int | None] = {}  # named barrier -> least count among them (None: all-thread)
    skip = agent is not None
    for b in state.agents:
        if skip and b is agent:
            skip = False
            continue
        kind = _EV_BYTES if b[0] == AG_TMA else _EV_ARRIVE
        if b[4] == m and kind in forbidden and not (landings_ok and kind == _EV_BYTES):
            return None
        if kind == _EV_BYTES:
            bytes_move.add(b[4])
            landable[b[4]] = landable.get(b[4], 0) + b[5]
        else:
            arrivals[b[4]] = arrivals.get(b[4], 0) + 1
            carried[b[4]] = (0, 1)

    passes_now = False  # a wait on the frozen m in the set passes in its current phase
    # (process, mbarrier) -> completions of the mbarrier's phase, beyond its phase in the state, that
    # the process's waits in the set have needed so far (module docstring, "Phases")
    ahead: dict[tuple[int, int], int] = {}

    def passes(m2: int, parity: int, q: int) -> bool:
        nonlocal passes_now
        mb = mbars[m2]
        if not mb[M_VALID]:
            return True
        need = completions_needed(mb[M_K], ahead.get((q, m2), 0), parity)
        if need == 0:
            if freeze and m2 == m:
                if mb[M_K] == 0 or machine._jprev(mb, q) is None:
                    raise FreshPass
                passes_now = True
            return True
        if freeze and m2 == m:
            return False
        if m2 in free or names[m2][:2] in lives:
            return True
        # phase K needs its pending arrivals (or, with none pending, a byte count that moves); each
        # later one the expected count's arrivals
        pend = mb[M_PEND]
        if pend == 0 and m2 not in bytes_move:
            return False
        if arrivals.get(m2, 0) < pend + (need - 1) * max(mb[M_EXP], 0):
            return False
        if not bytes_cover(landable.get(m2, 0), carried.get(m2), mb[M_TX], pend):
            return False
        ahead[(q, m2)] = need
        return True

    nprocs = len(machine.procs)
    procs = state.procs
    pos: list[tuple | None] = [None if q == frozen else (q, procs[q][P_PC], procs[q][P_VARS])
                               for q in range(nprocs)]
    start = list(pos)
    if named is not None:
        parked = named[0] * 65536 + state.named[named[0]].gen
        for q in range(nprocs):
            if procs[q][P_TOKEN] == parked and machine.programs[q].code[procs[q][P_PC]].kind == BAR_WAIT:
                pos[q] = None
    ends = [False] * nprocs
    # Segments of events met so far. A wait is asked again only once more events were met than when
    # it last did not pass: its answer is a function of the sets they fill (and of the state), so
    # until they grow it stays the same. Without this the walk's last round asked every stopped
    # process's wait again for nothing.
    met = 0
    stopped_at = [-1] * nprocs  # met when process q's wait last did not pass
    assert not goal or (named is None and updates is None and not forbidden and not freeze)
    order = [*goal, *(q for q in range(nprocs) if q not in goal)] if goal else range(nprocs)
    goal_left = len(goal) if goal else -1  # processes of the goal not yet at their end
    walked = 0  # segments met: every 4,096 the time budget is asked (a walk can be long: BudgetExceeded)
    try:
        grew = True
        while grew:
            grew = False
            for q in order:
                key = pos[q]
                if stopped_at[q] == met:
                    continue
                while key is not None:
                    walked += 1
                    if not walked & 0xFFF:
                        _stop_at_deadline(machine)
                    seg = segment_at(key)
                    if seg is None:
                        return None
                    head, events, nxt, end, bad = seg
                    if head is not None:
                        if head[0] == _EV_WAIT:
                            if not passes(head[1], head[2], q):
                                stopped_at[q] = met
                                break
                        elif not named_wait_passes(state, head[1], head[2], q, key is start[q], named_arrivals,
                                                   named_least):
                            stopped_at[q] = met
                            break
                    if events:
                        met += 1
                    stop = False
                    for ev in events:
                        kind = ev[0]
                        grew = True
                        if kind == _EV_NAMED:
                            idx, count = ev[1], ev[2]
                            named_arrivals[idx] = named_arrivals.get(idx, 0) + 1
                            if idx not in named_least or (named_least[idx] is not None and
                                                          (count is None or count < named_least[idx])):
                                named_least[idx] = count
                            if named is not None and idx == named[0]:
                                named[1].append(ev)
                                if ev[4]:  # a bar.sync on it waits for the generation
                                    stop = True
                                    break
                            continue
                        if kind == _EV_LIFE:
                            if ev[1] == m_life and kind in forbidden:
                                return None
                            lives.add(ev[1])
                            continue
                        target = ev[1]
                        if target == m and kind in forbidden:
                            if updates is None or kind == _EV_FREE:
                                return None
                            update = (ev[2], ev[3]) if kind == _EV_ARRIVE else (0, ev[2])
                            if update != (0, 0):  # (the bytes of an arrive.expect_tx ride on its arrival)
                                updates.append(update)
                        if kind == _EV_ARRIVE:
                            arrivals[target] = arrivals.get(target, 0) + ev[2]
                            least = carried.get(target)
                            if least is None or ev[3] * least[1] < least[0] * ev[2]:
                                carried[target] = (ev[3], ev[2])
                        elif kind == _EV_BYTES:
                            bytes_move.add(target)
                            if ev[2] < 0:
                                landable[target] = landable.get(target, 0) - ev[2]
                        else:  # _EV_FREE
                            free.add(target)
                    if stop:
                        key = None
                    elif end:
                        ends[q] = True
                        key = None
                        if q in goal:
                            goal_left -= 1
                            if not goal_left:
                                return ends
                    elif bad:
                        return None
                    else:
                        key = nxt
                pos[q] = key
    except FreshPass:
        return None
    if updates and passes_now:
        return None
    return ends


__all__ = ["FreshPass", "can_precede", "completions_needed", "named_wait_passes", "segment"]
