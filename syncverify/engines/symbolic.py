"""Proofs for every trip count: the explicit semantics with ITERS symbolic and loop counters kept modulo a period.

What is searched. The machine of ``semantics.machine`` is run unchanged, except
that the trip-count test of the loops found by ``periodic.plan`` is answered
by a :class:`TripCount` instead of a constant bound (``Machine.loop_hook``):

* while ITERS is *not yet fixed*, the state carries T, the largest counter
  value already tested true ("ITERS > T"). A test ``u < ITERS`` with u ≤ T is
  true. A step whose tests reach values above T has, besides its successors
  for every ITERS beyond them (all tests true), the successors for each
  ITERS = n with T < n ≤ the largest value tested — computed concretely with
  ITERS fixed at n. So every abstract successor is a concrete successor for
  the ITERS it stands for, and every concrete successor for every ITERS is
  one of them: the abstraction is exact on finite prefixes.
* Partial-order reduction and symmetry act per concrete ITERS (each branch
  asks ``Reduction.successors`` with its own trip count), so they keep the
  guarantees they have for the explicit engine. (The reduction does not take
  the steps that need every process's sequence of operations fixed alone
  while a loop hook is installed: a copy's landing, a first observing wait,
  an arrive.expect_tx.)

Why it terminates. States are merged on a *key* that forgets absolute
counter values (``normalize``): the loop counters of every role (and the
`let k + c` values and T or the fixed ITERS) are shifted down together by a
multiple of the period P while they all stay at or above the threshold K; the
phase numbers of each mbarrier (with its waiters' last observed phases and
observation records) by an even amount — to 0/1 once every process that waits
on it has a history, else while the phase stays ≥ 3; named, cluster and tmem
barrier generations with the tokens of their waiters; each slot's epochs (by
rank); each process's bulk/wgmma group numbers. Each of these is a translation
the machine cannot observe — it compares such numbers with each other, tests
parities, or (phases, for a waiter without history) compares with the
constants 0..2 — and the counter shift is invisible because every
counter-dependent expression is P-periodic from K on (proved with Z3 in
``periodic``). The record reductions of ``_normalize_records`` (saturated
knowledge, epoch-only duplicates, dominated completed writes) drop only what no
later step can observe. Two states with equal keys therefore have the same
futures up to translation: the same steps and verdicts (a race may be named
RAW instead of WAR, as under the explicit engine's reductions). The keys are finite when the
roles cannot drift apart without bound (the synchronization bounds the lags);
otherwise the state budget ends the search as *inconclusive* — never safe.

What it answers. A complete search without findings proves the protocol safe
for every ITERS ≥ the smallest valid one (``all-iterations``). A finding lies
on a real path of the machine for a concrete ITERS (the one its branch
fixed, or one above every value tested on the path); it is replayed through
``Machine.step`` on the protocol loaded at that ITERS and reported with the
explicit engine's trace only if the replay reproduces it. Anything else is
inconclusive.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import itemgetter

from .. import budget as budgets
from .. import ir
from ..diagnose import _ops
from ..diagnostics import Diagnostic, Severity
from ..lang import load
from ..result import CheckResult, Stats, Verdict
from ..semantics import rules
from ..semantics.machine import UNCOMMITTED, Assumptions, BudgetExceeded, Machine, StepResult, Violation
from ..semantics.program import BAR_WAIT, OP
from ..semantics.state import (
    F_ASYNC,
    F_INFLIGHT,
    GROUP_FIELDS,
    M_JPREV,
    M_K,
    NUNITS,
    P_BULK,
    P_CLTOKEN,
    P_CPASYNC,
    P_PC,
    P_TOKEN,
    P_VARS,
    P_WGMMA,
    R_AKNOWN,
    R_CTA,
    R_EPOCH,
    R_FLAGS,
    R_GRP,
    R_KIND,
    R_KNOWN,
    R_OBJ,
    R_OWNER,
    R_SLOT,
    R_SPACE,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    UNIT_WGMMA,
    WRITE,
    State,
)
from ..semantics.symmetry import Symmetry
from .explicit import Budget, cyclic_gc_paused, explore
from .periodic import Plan, ProcPlan, Refusal, liftable_params, plan
from .reduction import Reduction
from .tripcount import SmallCheck, ancestors, check_one, dependents, describe_range, small_trip_counts
from .witness import deadlock, diagnostic

PHASE_FLOOR = 3  # a phase ≥ 3 is "past phases 0..2" for every absolute comparison the machine makes
UNFIXED, FIXED = 0, 1
MAX_ERRORS = 12
MAX_TESTS = 4096  # trip-count tests one expansion may make
DEFAULT_ASSUMPTIONS = Assumptions()
LIFT_MIN_STATES = 150_000  # the least states `auto` gives the lift (see lift_result)
OVERFLOW_REACH = 64  # an overflow this far past the periodic search's start is run concretely


class _Unexpected(Exception):
    """The plan's assumptions did not hold during the search (an internal error: inconclusive)."""


# ---------------------------------------------------------------------- the symbolic trip count
class TripCount:
    """``Machine.loop_hook`` for one plan: answers the trip-count tests of its loops.

    ``fixed``: the concrete ITERS of this branch, or None while it is not fixed; then
    ``known`` is T (ITERS > T) and every test above T is answered true and recorded."""

    def __init__(self, p: Plan):
        self.loops: dict[tuple[int, int], tuple[int | None, int]] = {}
        for proc, pp in p.procs:
            for loop in (pp.main, *pp.epilogues):
                for pc in (loop.init_pc, loop.next_pc):
                    self.loops[(proc, pc)] = (loop.lo_off, loop.hi_off)
        self.fixed: int | None = None
        self.known = 0
        self.tested: list[int] = []

    def __call__(self, p: int, pc: int, lo: int, hi: int, value: int) -> tuple[int, int]:
        loop = self.loops.get((p, pc))
        if loop is None:
            return lo, hi
        lo_off, hi_off = loop
        if self.fixed is not None:
            return (lo if lo_off is None else self.fixed + lo_off), self.fixed + hi_off
        if lo_off is not None:
            raise _Unexpected("an epilogue loop was reached while the trip count was not fixed")
        u = value - hi_off  # the test value < ITERS + hi_off, as u < ITERS
        if u > self.known:
            self.tested.append(u)
            if len(self.tested) > MAX_TESTS:
                # iterations that reach no operation: with ITERS unknown they would never end
                raise _Unexpected("a trip-count loop runs many iterations without reaching an operation")
        return lo, value + 1  # true: this branch stands for every ITERS above the values tested


# ---------------------------------------------------------------------- normalization
@dataclass(frozen=True)
class _Shape:
    """What normalization needs to know about the machine, computed once."""

    period: int
    threshold: int
    procs: tuple[tuple[int, ProcPlan], ...]
    one_trip: int  # fixed ITERS below this would leave some main loop without a trip
    epilogue_lo: int | None  # smallest lo offset of an epilogue loop (None: no epilogue)
    bar_wait: frozenset[tuple[int, int]]  # (process, pc) of BAR_WAIT instructions
    tmem_ops: frozenset[tuple[int, int]]  # (process, pc) of tmem rendezvous operations
    waiters: tuple[frozenset[int], ...]  # per mbarrier: the processes with a wait on it in their program
    all_procs: int  # knowledge bits of every lane group of every process
    all_holders: int  # knowledge bits of every holder (processes and synchronization objects)
    # per process and unit (UNIT_BULK, UNIT_WGMMA, UNIT_CPASYNC): whose group numbers move together
    # (a warpgroup's wgmma-groups are shared: program.wgmma_teams), named by the team's first process
    group_owner: tuple[tuple[int, ...], ...] = ()
    teams: tuple[tuple[int, ...], ...] = ()  # Machine.teams: an observation's issue mark names one (R_EPOCH)
    memo: dict = field(default_factory=dict, compare=False)  # normalized record tuples, by (records, shifts)
    runs: dict = field(default_factory=dict, compare=False)  # normalized runs of one slot's records
    counters: dict = field(default_factory=dict, compare=False)  # shifted (procs, mode, numbered), by (procs, mode)
    phases: dict = field(default_factory=dict, compare=False)  # shifted mbars and their shifts, by mbars


_MEMO_LIMIT = 1 << 16  # entries per normalization table before it starts over
_RUN_HEAD = itemgetter(R_SPACE, R_CTA, R_OBJ, R_SLOT)  # what one run of records shares


def _shape(p: Plan, machine: Machine) -> _Shape:
    one_trip = max(pp.main.lo_const - pp.main.hi_off + 1 for _, pp in p.procs)
    epi = [e.lo_off for _, pp in p.procs for e in pp.epilogues if e.lo_off is not None]
    bar_wait = frozenset((q, pc) for q, prog in enumerate(machine.programs)
                         for pc, ins in enumerate(prog.code) if ins.kind == BAR_WAIT)
    tmem_ops = frozenset((q, pc) for q, prog in enumerate(machine.programs)
                         for pc, ins in enumerate(prog.code) if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc))
    names = [{ins.op.bar.name for ins in prog.code if ins.kind == OP and isinstance(ins.op, ir.MbarWait)}
             for prog in machine.programs]
    waiters = tuple(frozenset(q for q, proc in enumerate(machine.procs) if proc.cta == cta and name in names[q])
                    for cta, name, _ in machine.mb_names)
    all_procs = 0
    for q in range(len(machine.procs)):
        all_procs |= machine.holders.proc_mask(q)
    all_holders = (1 << (machine.holders.cl_last + 1)) - 1
    group_owner = tuple(tuple(team[0] if team and unit == UNIT_WGMMA else q for unit in range(NUNITS))
                        for q, team in enumerate(machine.wgmma_team))
    return _Shape(p.period, p.threshold, p.procs, one_trip, min(epi) if epi else None, bar_wait, tmem_ops, waiters,
                  all_procs, all_holders, group_owner, tuple(machine.teams))


def _counter_shift(sh: _Shape, state: State, mode: tuple[int, int]) -> int:
    """The largest multiple of P by which every counter value can move down and stay ≥ its threshold."""
    margin: int | None = None

    def need(value: int, floor: int) -> None:
        nonlocal margin
        margin = value - floor if margin is None else min(margin, value - floor)

    for q, pp in sh.procs:
        pc = state.procs[q][P_PC]
        if pc <= pp.main.init_pc:
            return 0  # a role not yet in its loop counts as counter 0
        vars_ = state.procs[q][P_VARS]
        for slot, off, live in zip(pp.counter_slots, pp.offsets, pp.live_from, strict=True):
            if pc > live:
                need(vars_[slot], sh.threshold + off)
    if mode[0] == FIXED:
        need(mode[1], sh.one_trip)
        if sh.epilogue_lo is not None:
            need(mode[1] + sh.epilogue_lo, sh.threshold)
    elif sh.epilogue_lo is not None:
        need(mode[1] + 1 + sh.epilogue_lo, sh.threshold)
    if margin is None or margin < sh.period:
        return 0
    return margin - margin % sh.period


def _shift_counters(sh: _Shape, state: State, mode: tuple[int, int]) -> tuple[tuple, tuple[int, int]]:
    """The local states and the mode with every loop counter (and T or the fixed ITERS) shifted down."""
    procs = state.procs
    s = _counter_shift(sh, state, mode)
    if not s:
        return procs, mode
    plist = list(procs)
    for q, pp in sh.procs:
        ps = procs[q]
        pc = ps[P_PC]
        vars_ = list(ps[P_VARS])
        for slot, live in zip(pp.counter_slots, pp.live_from, strict=True):
            if pc > live:
                vars_[slot] -= s
        plist[q] = (pc, tuple(vars_), *ps[P_VARS + 1:])
    return tuple(plist), (mode[0], mode[1] - s)


def _shift_phases(sh: _Shape, mbars: tuple) -> tuple[tuple, tuple[tuple[int, int], ...]]:
    """The mbarriers with their phases shifted down, and the shift of each barrier moved.

    By an even amount. Only a waiter without history compares the phase with absolute values
    (its first wait means phase 0 or 1); once every process that waits on the barrier has
    history, the phase goes down to 0 or 1, before that only down to PHASE_FLOOR."""
    phase_shift: dict[int, int] = {}
    for m, mb in enumerate(mbars):
        k = mb[M_K]
        if k >= 2 and _all_have_history(sh, m, mb[M_JPREV]):
            phase_shift[m] = k & ~1
        elif k >= PHASE_FLOOR + 2:
            phase_shift[m] = (k - PHASE_FLOOR) & ~1
    if phase_shift:
        mlist = list(mbars)
        for m, d in phase_shift.items():
            mb = mlist[m]
            jprevs = tuple([(q, j - d) for q, j in mb[M_JPREV]])
            mlist[m] = (*mb[:M_K], mb[M_K] - d, *mb[M_K + 1:M_JPREV], jprevs, *mb[M_JPREV + 1:])
        mbars = tuple(mlist)
    return mbars, tuple(phase_shift.items())


def normalize(sh: _Shape, state: State, mode: tuple[int, int]) -> tuple[State, tuple[int, int]]:
    """The merge key of a state: every counter the machine only uses relatively, shifted down."""
    procs = state.procs
    nprocs = len(procs)
    plist: list[tuple] | None = None

    def set_proc(q: int, ps: tuple) -> None:
        nonlocal plist
        if plist is None:
            plist = list(procs)
        plist[q] = ps

    # loop counters, with T or the fixed ITERS (a function of the local states and the mode alone,
    # which recur across many states: remembered, with whether any process has group numbers)
    counter_key = (procs, mode)
    shifted = sh.counters.get(counter_key)
    if shifted is None:
        if len(sh.counters) > _MEMO_LIMIT:
            sh.counters.clear()
        shifted = sh.counters[counter_key] = (*_shift_counters(sh, state, mode),
                                              any(ps[P_BULK] or ps[P_WGMMA] or ps[P_CPASYNC] for ps in procs))
    procs, mode, numbered = shifted
    # mbarrier phases (a function of the barrier states alone: remembered)
    phased = sh.phases.get(state.mbars)
    if phased is None:
        if len(sh.phases) > _MEMO_LIMIT:
            sh.phases.clear()
        phased = sh.phases[state.mbars] = _shift_phases(sh, state.mbars)
    mbars, phase_items = phased
    # named barrier generations, with the tokens of the warps parked in bar.sync
    named = state.named
    if any(nb.gen for nb in named):
        nlist = list(named)
        cur = plist if plist is not None else procs
        parked = [q for q in range(nprocs) if (q, cur[q][P_PC]) in sh.bar_wait]
        for idx, nb in enumerate(named):
            if not nb.gen:
                continue
            waiters = [q for q in parked if cur[q][P_TOKEN] // 65536 == idx]
            if any(cur[q][P_TOKEN] % 65536 != nb.gen for q in waiters):
                continue
            for q in waiters:
                ps = (plist if plist is not None else procs)[q]
                set_proc(q, (*ps[:P_TOKEN], idx * 65536, *ps[P_TOKEN + 1:]))
            nlist[idx] = rules.NamedBar(nb.count, nb.arrived, 0, nb.warps, nb.site)
        named = tuple(nlist)
    # the cluster barrier's generation, with the arrival tokens
    cluster = state.cluster
    if cluster[0]:
        cur = plist if plist is not None else procs
        d = min([cluster[0], *(ps[P_CLTOKEN] for ps in cur if ps[P_CLTOKEN] >= 0)])
        if d > 0:
            cluster = (cluster[0] - d, *cluster[1:])
            for q in range(nprocs):
                ps = (plist if plist is not None else procs)[q]
                if ps[P_CLTOKEN] >= 0:
                    set_proc(q, (*ps[:P_CLTOKEN], ps[P_CLTOKEN] - d, *ps[P_CLTOKEN + 1:]))
    # the tmem rendezvous generations (unless a warp waits in one with a token)
    tmem = state.tmem
    if any(g for _, g in tmem):
        cur = plist if plist is not None else procs
        if not any((q, cur[q][P_PC]) in sh.tmem_ops and cur[q][P_TOKEN] >= 0 for q in range(nprocs)):
            tmem = tuple((arrived, 0) for arrived, _ in tmem)
    memo_key = (state.records, phase_items)
    records = sh.memo.get(memo_key)
    if records is None:
        if len(sh.memo) > 1 << 16:
            sh.memo.clear()
        records = sh.memo[memo_key] = _normalize_records(state.records, dict(phase_items), sh.all_procs,
                                                         sh.all_holders, sh.runs)
    # bulk and wgmma group numbers per process (the steps above leave them alone)
    if numbered:
        # a warpgroup's warps compare their wgmma group numbers with one another's (Machine._wgmma_wait):
        # they move by one amount, the least over the team
        owner = sh.group_owner
        low: dict[tuple[int, int], int] = {}
        for r in records:
            g = r[R_GRP]
            if 0 <= g < UNCOMMITTED:  # (an uncommitted tag has no group number to shift)
                key = (owner[r[R_OWNER]][g % NUNITS], g % NUNITS)
                low[key] = min(low.get(key, g // NUNITS), g // NUNITS)
            elif r[R_SPACE] == SPACE_OBS and r[R_EPOCH]:  # an issue mark: a group number too
                n = len(sh.teams)
                key = (sh.teams[(r[R_EPOCH] - 1) % n][0], UNIT_WGMMA)
                low[key] = min(low.get(key, (r[R_EPOCH] - 1) // n), (r[R_EPOCH] - 1) // n)
        for q in range(nprocs):
            ps = (plist if plist is not None else procs)[q]
            for unit, field_ in enumerate(GROUP_FIELDS):
                key = (owner[q][unit], unit)
                low[key] = min(low.get(key, ps[field_]), ps[field_])
        shift: dict[tuple[int, int], int] = {}
        for q in range(nprocs):
            ps = (plist if plist is not None else procs)[q]
            for unit, field_ in enumerate(GROUP_FIELDS):
                d = low[(owner[q][unit], unit)]
                if d > 0:
                    shift[(q, unit)] = d
                    ps = (*ps[:field_], ps[field_] - d, *ps[field_ + 1:])
            set_proc(q, ps)
        if shift:
            records = tuple(sorted(
                (*r[:R_GRP], r[R_GRP] - NUNITS * shift.get((r[R_OWNER], r[R_GRP] % NUNITS), 0), *r[R_GRP + 1:])
                if 0 <= r[R_GRP] < UNCOMMITTED else _shift_mark(r, sh.teams, shift) for r in records))
    out = State(tuple(plist) if plist is not None else procs, mbars, named, cluster, state.agents, records, tmem)
    return out, mode


def _shift_mark(r: tuple, teams: tuple[tuple[int, ...], ...], shift: dict[tuple[int, int], int]) -> tuple:
    """An observation's wgmma issue mark (Machine._mark_issue) with its team's group shift (the
    shift is never more than the mark: it counts among the team's group numbers)."""
    if r[R_SPACE] != SPACE_OBS or not r[R_EPOCH]:
        return r
    n = len(teams)
    team, group = (r[R_EPOCH] - 1) % n, (r[R_EPOCH] - 1) // n
    d = shift.get((teams[team][0], UNIT_WGMMA), 0)
    if not d:
        return r
    return (*r[:R_EPOCH], 1 + (group - d) * n + team, *r[R_EPOCH + 1:])


def _all_have_history(sh: _Shape, m: int, jprevs: tuple) -> bool:
    """Has every process that waits on barrier m a last observed phase (so no wait compares the
    phase with an absolute value any more)?"""
    waiters = sh.waiters[m]
    return len(jprevs) >= len(waiters) and waiters <= {q for q, _ in jprevs}


def _normalize_records(records: tuple, phase_shift: Mapping[int, int], all_procs: int, all_holders: int,
                       memo: dict) -> tuple:
    """Observation phases follow their barrier's shift; write epochs become ranks per slot;
    knowledge every process already has is saturated.

    Once every process holds a record (in its generic or its async-proxy knowledge), which
    synchronization objects also hold it can no longer matter: checks read only process bits
    (except the observation records, which are left alone), acquires only add bits the
    processes already have, and process bits are never cleared. So such a set is replaced by
    every holder.

    Access records (not in flight) that agree in everything but their epoch: only the lowest and
    the highest epoch of such a group can ever be observed (the machine takes maxima over a slot's
    ordered writes and over a reader's reads, and reports the first unordered record in sorted
    order; every other update treats the group alike), so the key keeps just those two. Epochs
    are only compared (max, <, ==), and a new write is numbered above all of them, so their rank
    among the slot's epochs replaces them (0, "nothing written", stays 0).

    Every rule here is local to one slot's (or one object's) records, so runs of records with
    the same (space, CTA, object, slot) are normalized one at a time, each run memoized: a step
    changes few of them. The init and CTA-start records, which sort between the data and the
    observation records, rarely change at all: their whole block is memoized too.
    """
    # (bisect puts each boundary between a record below and one at or above the space searched
    # for, never inside a run, so the three parts give the runs of the whole tuple, in order)
    lo = bisect_left(records, (SPACE_INIT,))
    hi = bisect_left(records, (SPACE_OBS,), lo)
    key = (SPACE_INIT, records[lo:hi])  # (no run is keyed so: its items are records)
    block = memo.get(key)
    if block is None:
        block = memo[key] = tuple(_normalize_runs(key[1], phase_shift, all_procs, all_holders, memo))
    return (*_normalize_runs(records[:lo], phase_shift, all_procs, all_holders, memo), *block,
            *_normalize_runs(records[hi:], phase_shift, all_procs, all_holders, memo))


def _normalize_runs(records: tuple, phase_shift: Mapping[int, int], all_procs: int, all_holders: int,
                    memo: dict) -> list[tuple]:
    """``_normalize_records`` for one part of a record tuple, run by run."""
    out: list[tuple] = []
    for head, members in groupby(records, _RUN_HEAD):
        run = tuple(members)
        space = head[0]
        if space == SPACE_OBS:
            d = phase_shift.get(head[2], 0)
            out += [(*x[:R_SLOT], x[R_SLOT] - d, *x[R_SLOT + 1:]) for x in run] if d else run
            continue
        done = memo.get(run)
        if done is None:
            if len(memo) > 1 << 17:
                memo.clear()
            done = memo[run] = _normalize_run(run, space == SPACE_DATA, all_procs, all_holders)
        out += done
    return out


def _saturate(r: tuple, all_procs: int, all_holders: int) -> tuple:
    """A record every process knows is known by every holder up to the cluster barrier's. The
    tcgen05 bits above those (state.Holders.tc_base: after-fences, commit snapshots) are kept as
    they are: knowing a record does not make it fenced."""
    known, aknown = r[R_KNOWN], r[R_AKNOWN]
    k_full, a_full = known & all_procs == all_procs, aknown & all_procs == all_procs
    if (k_full and known & all_holders != all_holders) or (a_full and aknown & all_holders != all_holders):
        return (*r[:R_AKNOWN], all_holders | aknown if a_full else aknown, all_holders | known if k_full else known)
    return r


def _normalize_run(run: tuple, data: bool, all_procs: int, all_holders: int) -> tuple:
    """One slot's records (or one init/start record run), normalized as ``_normalize_records`` says."""
    run = tuple(_saturate(r, all_procs, all_holders) for r in run)
    if not data:
        return tuple(sorted(run))
    groups: dict[tuple, list[tuple]] = {}
    kept: list[tuple] = []
    for r in run:
        if not r[R_FLAGS] & F_INFLIGHT:
            groups.setdefault((*r[:R_EPOCH], *r[R_EPOCH + 1:]), []).append(r)
        else:
            kept.append(r)
    newest_known = 0  # the newest write every process is ordered after
    for members in groups.values():
        if len(members) > 2:
            members.sort(key=lambda r: r[R_EPOCH])
            members = [members[0], members[-1]]
        for r in members:
            if r[R_KIND] == WRITE and r[R_KNOWN] & all_procs == all_procs:
                newest_known = max(newest_known, r[R_EPOCH])
        kept += members
    if newest_known:
        # an older write every process is ordered after can never race, and every maximum over
        # ordered writes that sees it also sees the newer one: only the newest such write matters
        kept = [r for r in kept if not (r[R_KIND] == WRITE and not r[R_FLAGS] & F_INFLIGHT
                                        and r[R_KNOWN] & all_procs == all_procs and r[R_EPOCH] < newest_known)]
    # A completed async write (generic writes do not pile up: a new one drops the older records)
    # dominated by a newer completed write of the same operation (every holder of the newer one
    # holds the older one too, in both knowledge sets, and the updates keep it so: they are
    # monotone in the bits) is ordered wherever the newer one is, and never raises the maximum
    # over ordered writes: dropping it keeps the verdict. (Which write a race names, hence RAW or
    # WAR, can change, as with the other reductions.)
    writes = [r for r in kept if r[R_KIND] == WRITE and r[R_FLAGS] & F_ASYNC and not r[R_FLAGS] & F_INFLIGHT]
    if len(writes) > 1:
        dominated = set()
        for old in writes:
            for new in writes:
                if new[R_EPOCH] > old[R_EPOCH] and new[R_OWNER:R_EPOCH] == old[R_OWNER:R_EPOCH] and \
                        (old[R_KNOWN] | new[R_KNOWN]) == old[R_KNOWN] and \
                        (old[R_AKNOWN] | new[R_AKNOWN]) == old[R_AKNOWN] and old[R_GRP] == new[R_GRP]:
                    dominated.add(old)
                    break
        if dominated:
            kept = [r for r in kept if r not in dominated]
    values = sorted({r[R_EPOCH] for r in kept if r[R_EPOCH] >= 1})
    rank = {e: i + 1 for i, e in enumerate(values)}
    return tuple(sorted((*r[:R_EPOCH], rank[r[R_EPOCH]], *r[R_EPOCH + 1:]) if r[R_EPOCH] >= 1 else r
                        for r in kept))


# ---------------------------------------------------------------------- the search
@dataclass
class Finding:
    violation: Violation
    labels: list[tuple]
    iters: int  # the concrete trip count its path runs with
    final: bool = True  # the last label is the step that reports it (False: a deadlock in the state reached)


@dataclass
class LiftOutcome:
    complete: bool
    states: int
    transitions: int
    seconds: float
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    stop_reason: str = ""
    stopped_by: str = ""  # the budget that ended the search (budget.KINDS), if one did


def lifted_search(p: Plan, assumptions: Assumptions = DEFAULT_ASSUMPTIONS, max_states: int = 2_000_000,
                  seconds: float = 600.0, only: int | None = None, memory_mb: float = math.inf) -> LiftOutcome:
    """Search every trip count ≥ ``p.min_iters`` (or exactly ``only``) on the periodic abstraction."""
    with cyclic_gc_paused():
        return _lifted_search(p, assumptions, max_states, seconds, only, memory_mb)


def _lifted_search(p: Plan, assumptions: Assumptions, max_states: int, seconds: float,
                   only: int | None, memory_mb: float) -> LiftOutcome:
    start = time.monotonic()
    base_mb = budgets.rss_mb()
    machine = Machine(p.protocol, assumptions)
    successors = Reduction(machine).successors
    hook = TripCount(p)
    machine.loop_hook = hook
    machine.deadline = start + seconds
    sym = Symmetry(machine.procs, machine.programs, machine.holders)
    sh = _shape(p, machine)
    nprocs = len(machine.procs)
    floor = p.min_iters - 1  # ITERS > floor

    mains = [(q, pp.main.init_pc, pp.main.slot, pp.main.hi_off) for q, pp in p.procs]

    def counter_top(state: State) -> int:
        """The largest trip-count test value the counters of processes in their main loop stand for."""
        return max((state.procs[q][P_VARS][slot] - hi_off for q, init_pc, slot, hi_off in mains
                    if state.procs[q][P_PC] > init_pc), default=-1)

    def keep(mode: tuple[int, int]) -> bool:
        if only is None:
            return True
        return mode[1] < only if mode[0] == UNFIXED else mode[1] == only

    def expand(state: State, mode: tuple[int, int]) -> list[tuple[list[StepResult], tuple[int, int], int]]:
        """Per branch of the trip count: the successors, the mode after them, the ITERS they run with."""
        if mode[0] == FIXED:
            hook.fixed = mode[1]
            return [(list(successors(state)), mode, mode[1])]
        hook.fixed, hook.known, hook.tested = None, mode[1], []
        results = list(successors(state))
        top = max([mode[1], *hook.tested])
        # Each result stands for every ITERS above the tests of its own step, which its counters
        # show (a test answered true moved a counter to the value tested). Tests made by steps
        # partial-order reduction probed but did not take only add branches with ITERS fixed.
        by_known: dict[int, list[StepResult]] = {}
        for res in results:
            # a step that ends in a violation shows no counters: it stands for ITERS above every test
            known = top if res.state is None else max(mode[1], counter_top(res.state))
            by_known.setdefault(known, []).append(res)
        # with ``only``, an unfixed branch is kept only while it stands for ITERS = only too
        out = [(group, (UNFIXED, known), known + 1 if only is None else only) for known, group in by_known.items()]
        if not results:
            out.append(([], (UNFIXED, top), top + 1 if only is None else only))
        if len(results) <= 1:
            # possibly a step partial-order reduction took alone: with ITERS fixed it may not qualify
            for n in range(mode[1] + 1, top + 1):
                hook.fixed = n
                out.append((list(successors(state)), (FIXED, n), n))
            return out
        # A full expansion: with ITERS = n every step is enabled as before, and a step whose own
        # tests stayed below n has the same result (it is among the unfixed ones, which stand for
        # n too). Only the steps that tested n or more are recomputed with ITERS fixed at n.
        for n in range(mode[1] + 1, top + 1):
            hook.fixed = n
            changed = []
            for res in results:
                if res.state is None or counter_top(res.state) >= n:
                    again = machine.step(state, res.label)
                    if again is not None:
                        changed.append(again)
            if changed:
                out.append((changed, (FIXED, n), n))
        return out

    # initial states: the initial local runs may already test the trip count
    hook.fixed, hook.known, hook.tested = None, floor, []
    try:
        init0 = machine.initial()
        top = max([floor, *hook.tested])
        starts = [(init0, (UNFIXED, top))]
        for n in range(floor + 1, top + 1):
            hook.fixed = n
            starts.append((machine.initial(), (FIXED, n)))
    except (_Unexpected, BudgetExceeded) as err:
        return LiftOutcome(False, 0, 0, time.monotonic() - start, stop_reason=str(err),
                           stopped_by=budgets.TIME if isinstance(err, BudgetExceeded) else "")
    index: dict[tuple, int] = {}
    parents: list[tuple[int, tuple | None]] = []
    nodes: list[tuple[State, tuple[int, int]]] = []
    queue: deque[int] = deque()
    for st, mode in starts:
        if not keep(mode):
            continue
        st = sym.canon(st)[0]
        key = normalize(sh, st, mode)
        if key not in index:
            index[key] = len(nodes)
            nodes.append((st, mode))
            parents.append((-1, None))
            queue.append(index[key])
    reached: set[tuple[State, tuple[int, int]]] = set()
    errors: dict[tuple, Finding] = {}
    warnings: dict[tuple, Finding] = {}
    pending: list[tuple[dict, tuple, Violation, int, tuple | None, int]] = []
    transitions = 0
    stop = kind = ""
    popped = 0
    while queue:
        if len(nodes) > max_states:
            stop, kind = budgets.reached(budgets.STATES, max_states), budgets.STATES
            break
        popped += 1
        if popped % 256 == 0:
            budgets.stop_if_interrupted()
            if budgets.rss_mb() - base_mb > memory_mb:
                stop, kind = budgets.reached(budgets.MEMORY, memory_mb), budgets.MEMORY
                break
        if popped % 256 == 0 and time.monotonic() - start > seconds:
            stop, kind = budgets.reached(budgets.TIME, seconds), budgets.TIME
            break
        if len(errors) >= MAX_ERRORS:
            stop = f"stopped after {MAX_ERRORS} distinct violations"
            break
        sid = queue.popleft()
        state, mode = nodes[sid]
        try:
            branches = expand(state, mode)
        except (_Unexpected, BudgetExceeded) as err:
            stop, kind = str(err), budgets.TIME if isinstance(err, BudgetExceeded) else ""
            break
        for results, new_mode, iters in branches:
            if not keep(new_mode):
                continue
            if not results and not all(machine.done(state, q) for q in range(nprocs)):
                v = deadlock(machine, state)
                pending.append((errors, (v.code, v.span.line if v.span else 0, "deadlock"), v, sid, None, iters))
            for res in results:
                transitions += 1
                for w in res.warnings:
                    pending.append((warnings, (w.code, w.span.line if w.span else 0), w, sid, res.label, iters))
                for v in res.soft:
                    pending.append((errors, (v.code, v.span.line if v.span else 0, 0), v, sid, res.label, iters))
                if res.violation is not None:
                    v = res.violation
                    pending.append((errors, (v.code, v.span.line if v.span else 0,
                                             v.related[0][0] if v.related else 0), v, sid, res.label, iters))
                    continue
                nxt = sym.canon(res.state)[0]
                before = len(reached)
                reached.add((nxt, new_mode))  # (one hash: a set that did not grow had it already)
                if len(reached) == before:
                    continue  # this very state was reached before: its key is known
                key = normalize(sh, nxt, new_mode)
                new = len(nodes)
                if index.setdefault(key, new) == new:
                    nodes.append((nxt, new_mode))
                    parents.append((sid, res.label))
                    queue.append(new)
            for table, key, v, at, label, n in pending:
                if key not in table:
                    table[key] = Finding(v, _path(parents, at, label), n, label is not None)
            pending.clear()

    return LiftOutcome(complete=not queue and not stop, states=len(nodes), transitions=transitions,
                       seconds=time.monotonic() - start, errors=list(errors.values()),
                       warnings=list(warnings.values()), stop_reason=stop, stopped_by=kind)


def _path(parents: list[tuple[int, tuple | None]], sid: int, last: tuple | None) -> list[tuple]:
    labels = [] if last is None else [last]
    while parents[sid][0] >= 0:
        parent, label = parents[sid]
        labels.append(label)
        sid = parent
    return labels[::-1]


# ---------------------------------------------------------------------- concretization
def replay(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], finding: Finding,
           assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> tuple[Machine, Symmetry, Violation] | None:
    """Replay a finding's path through ``Machine.step`` on the protocol loaded at its ITERS.
    Returns the concrete machine and the violation it reports, or None if it does not reproduce."""
    try:
        concrete = load(protocol.source, {**defines, p.param: finding.iters}, path=protocol.path)
    except Exception:  # an input the front end refuses reproduces nothing
        return None
    machine = Machine(concrete, assumptions)
    sym = Symmetry(machine.procs, machine.programs, machine.holders)
    state = sym.canon(machine.initial())[0]
    want = finding.violation
    for n, label in enumerate(finding.labels):
        res = machine.step(state, label)
        if res is None:
            return None
        if finding.final and n == len(finding.labels) - 1:
            for v in [res.violation, *res.soft, *res.warnings]:
                if v is not None and v.code == want.code and v.span == want.span:
                    return machine, sym, v
            return None
        if res.state is None:
            return None
        state = sym.canon(res.state)[0]
    # no final step: a deadlock in the state reached
    if list(Reduction(machine).successors(state)) or all(machine.done(state, q) for q in range(len(machine.procs))):
        return None
    v = deadlock(machine, state)
    return (machine, sym, v) if v.code == want.code else None


# ---------------------------------------------------------------------- the engine's answers
@dataclass(frozen=True)
class Lift:
    """What the unbounded method concluded about one protocol."""

    verdict: Verdict  # SAFE (all iterations), VIOLATION (replayed), INCONCLUSIVE (refused or budget)
    bound: str
    reason: str  # why it was refused / inconclusive; empty when it decided
    diagnostics: tuple[Diagnostic, ...] = ()
    stats: Stats = field(default_factory=Stats)
    stopped_by: str = ""  # the budget that ended the search (budget.KINDS), if one did


def _bound_all(protocol: ir.Protocol, p: Plan, small: SmallCheck) -> str:
    """``all-iterations``, with the trip counts left out (invalid input below the lift's start, or
    beyond the largest one without an overflow) and the values of the params held fixed: the other
    loop params (not those derived from the lifted one: they follow it) and the params the lifted
    one is derived from (with `param T = ITERS + 1` lifted as T, ITERS stays at its value)."""
    derived = dependents(protocol, p.param)
    others = [n for n in ancestors(protocol, p.param) if n not in protocol.loop_params]
    others += [n for n in protocol.loop_params if n != p.param and n not in derived]
    values = dict(protocol.params)
    text = "all-iterations"
    left_out = describe_range(p.param, small.invalid, p.min_iters, p.max_iters)
    if left_out:
        text += f" ({left_out})"
    if others:
        text += ", " + ", ".join(f"{n}={values[n]}" for n in others)
    return text


def lift(protocol: ir.Protocol, defines: Mapping[str, int], assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
         max_states: int = 2_000_000, seconds: float = 600.0, full_trace: bool = False,
         only: int | None = None, memory_mb: float = math.inf) -> Lift:
    """Try to prove ``protocol`` for every trip count (or, with ``only``, search exactly ITERS = only)."""
    start = time.monotonic()
    free = [c.name for c in protocol.choices if not c.pinned]
    if free:
        # The plan reloads the source at a large trip count, where a `choose` range may hold
        # other values than at these params: its answer would not be about this assignment.
        return Lift(Verdict.INCONCLUSIVE, "", "not lifted to all iterations (the protocol has `choose` values: "
                    f"{', '.join(free)}; each assignment is checked at these params)",
                    stats=Stats(seconds=time.monotonic() - start))
    if any(isinstance(op, ir.CpAsyncArrive) for op in _ops(protocol.body)):
        # its agents name the copies they cover by write epoch, which the lift's normalization renumbers
        return Lift(Verdict.INCONCLUSIVE, "", "not lifted to all iterations (cp.async.mbarrier.arrive is "
                    "checked at the given trip counts only)", stats=Stats(seconds=time.monotonic() - start))
    reasons = []
    chosen: Plan | None = None
    for param in liftable_params(protocol):
        try:
            chosen = plan(protocol.source, defines, param, source_path=protocol.path)
            break
        except Refusal as why:
            reasons.append(f"{param}: {why}")
    if chosen is None:
        why = "; ".join(reasons) if reasons else "no loop bound is a param"
        return Lift(Verdict.INCONCLUSIVE, "", f"not lifted to all iterations ({why})",
                    stats=Stats(seconds=time.monotonic() - start))
    # the trip counts below the periodic search's start: one by one with the explicit engine (and,
    # with ``only`` outside the search's range, that one trip count)
    outside = only is not None and (only < chosen.min_iters or (chosen.max_iters is not None
                                                                and only > chosen.max_iters))
    below = chosen.min_iters if only is None else (only + 1 if outside else 0)
    first = 0 if only is None else only
    small = small_trip_counts(protocol, chosen.param, below, defines, assumptions, max_states,
                              max(0.0, seconds - (time.monotonic() - start)), full_trace, first)
    if small.failed is not None or (only is not None and below):
        return _small_answer(chosen.param, small, only, time.monotonic() - start)
    if chosen.max_iters is not None and only is None:
        over = _overflow_answer(protocol, chosen, defines, assumptions, max_states - small.states,
                                seconds - (time.monotonic() - start), full_trace)
        if over is not None:
            return over
    out = lifted_search(chosen, assumptions, max(1, max_states - small.states),
                        max(0.0, seconds - (time.monotonic() - start)), only, memory_mb)
    stats = Stats(out.states + small.states, out.transitions + small.transitions, time.monotonic() - start, 0.0)
    diags: list[Diagnostic] = []
    iters: list[int] = []
    for f in sorted(out.errors, key=lambda f: (f.iters, len(f.labels))):
        rep = replay(protocol, chosen, defines, f, assumptions)
        if rep is not None:
            machine, sym, v = rep
            diags.append(diagnostic(machine, v, f.labels, full_trace, sym))
            iters.append(f.iters)
    for f in out.warnings:
        rep = replay(protocol, chosen, defines, f, assumptions)
        if rep is not None:
            machine, sym, v = rep
            diags.append(diagnostic(machine, v, f.labels, full_trace, sym))
    diags.sort(key=lambda d: (d.severity is not Severity.ERROR, d.span.line if d.span else 0, d.code))
    if iters:
        return Lift(Verdict.VIOLATION, f"{chosen.param}={min(iters)}", "", tuple(diags), stats)
    if out.errors:
        return Lift(Verdict.INCONCLUSIVE, "", "a counterexample of the periodic search did not replay at its "
                    "trip count (internal error)", stats=stats)
    if not out.complete:
        # the explicit runs below the search's start drew on the same state budget: name the whole
        stop = budgets.reached(budgets.STATES, max_states) if out.stopped_by == budgets.STATES else out.stop_reason
        return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: no violation in {stats.states} "
                    f"states; {stop}", stats=stats, stopped_by=out.stopped_by)
    bound = f"{chosen.param}={only}" if only is not None else _bound_all(protocol, chosen, small)
    return Lift(Verdict.SAFE, bound, "", tuple(diags), stats)


def _overflow_answer(protocol: ir.Protocol, p: Plan, defines: Mapping[str, int], assumptions: Assumptions,
                     max_states: int, seconds: float, full_trace: bool) -> Lift | None:
    """A counter expression can exceed 2^62 from trip count n = max_iters + 1 on: where n is within
    reach, the explicit engine there gives the concrete SV115; where the periodic search would have
    no trip count left to cover, the answer is inconclusive. Otherwise (None) the search goes on,
    and its bound stops at max_iters."""
    assert p.max_iters is not None
    start = time.monotonic()
    n = p.max_iters + 1
    if n <= p.min_iters + OVERFLOW_REACH:
        res = check_one(protocol, p.param, n, defines, assumptions, max_states, seconds, full_trace)
        if res is not None and res.verdict is Verdict.VIOLATION:
            return Lift(Verdict.VIOLATION, f"{p.param}={n}", "", res.diagnostics,
                        Stats(res.stats.states, res.stats.transitions, time.monotonic() - start, 0.0))
    if p.max_iters < p.min_iters:
        return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: {p.overflow}",
                    stats=Stats(seconds=time.monotonic() - start))
    return None


def _small_answer(param: str, small: SmallCheck, only: int | None, seconds: float) -> Lift:
    """The answer when the explicit checks of small trip counts decide it: a violation (or a search
    that did not finish) at one of them, or, with ``only`` below the periodic search's start, the
    explicit engine's verdict there."""
    stats = Stats(small.states, small.transitions, seconds, 0.0)
    res = small.failed
    if res is None:
        if only is not None and only in small.invalid:
            return Lift(Verdict.INCONCLUSIVE, "", f"{param}={only} is not valid input", stats=stats)
        return Lift(Verdict.SAFE, f"{param}={only}", "", stats=stats)
    if res.verdict is Verdict.VIOLATION:
        return Lift(Verdict.VIOLATION, f"{param}={small.failed_at}", "", res.diagnostics, stats)
    return Lift(Verdict.INCONCLUSIVE, "", f"not proved for all iterations: the explicit search at "
                f"{param}={small.failed_at} did not finish ({res.coverage})", res.diagnostics, stats,
                stopped_by=res.stopped_by)


def check(protocol: ir.Protocol, options, machine: Machine | None = None) -> CheckResult:
    """`--engine z3`: the proof for every trip count alone (no bounded search first)."""
    from ..static.checks import static_outcome
    from .merging import merge_static, searched

    deadline = time.monotonic() + options.timeout
    machine = machine or Machine(protocol, Assumptions.of(options))
    assumptions = machine.assume
    if not protocol.loop_params:
        # nothing to lift: the exhaustive search already covers every iteration
        result = explore(protocol, Budget(options.max_states, options.timeout, options.max_memory_mb), machine,
                         full_trace=options.full_trace, strict=options.strict)
        return merge_static(result, searched(static_outcome(protocol, machine.programs, deadline)))
    res = lift(protocol, options.defines, assumptions, options.max_states, options.timeout, options.full_trace,
               memory_mb=options.max_memory_mb)
    return merge_static(as_result(protocol, res, options.strict),
                        searched(static_outcome(protocol, machine.programs, deadline)))


def as_result(protocol: ir.Protocol, res: Lift, strict: bool) -> CheckResult:
    verdict = res.verdict
    if verdict is Verdict.SAFE and any(d.is_error or (strict and d.severity is Severity.WARNING)
                                       for d in res.diagnostics):
        verdict = Verdict.VIOLATION
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=verdict, bound=res.bound,
                       diagnostics=res.diagnostics, stats=res.stats, coverage=res.reason, stopped_by=res.stopped_by)


def lift_result(result: CheckResult, protocol: ir.Protocol, options,
                assumptions: Assumptions | None = None) -> CheckResult:
    """`--engine auto`: a bounded `safe` from the explicit search, lifted to every trip count where possible.

    A violation the lift finds beyond the bounded check (replayed at its ITERS) replaces the
    safe verdict; a refusal or a budget keeps the bounded verdict and says why in its coverage."""
    if result.verdict is not Verdict.SAFE or not protocol.loop_params:
        return result
    assumptions = assumptions or Assumptions.of(options)
    # The lift costs about as much as a bounded run over a few periods. Its budget is in states, so
    # that whether it proves a file does not depend on the machine's load: ten times the bounded
    # run's states (at least LIFT_MIN_STATES), within --max-states, so that a protocol whose
    # abstraction does not close does not hold up the bounded answer for long. The clock is only
    # the user's outer limit: what --timeout leaves after the bounded run.
    seconds = options.timeout - result.stats.seconds
    states = min(options.max_states, max(LIFT_MIN_STATES, 10 * result.stats.states))
    if seconds <= 0:
        return replace(result, coverage="not proved for all iterations: "
                       + budgets.reached(budgets.TIME, options.timeout), stopped_by=budgets.TIME)
    res = lift(protocol, options.defines, assumptions, states, seconds, options.full_trace,
               memory_mb=options.max_memory_mb)
    stats = Stats(result.stats.states + res.stats.states, result.stats.transitions + res.stats.transitions,
                  result.stats.seconds + res.stats.seconds, result.stats.peak_mb)
    if res.verdict in (Verdict.SAFE, Verdict.VIOLATION):
        seen = {(d.code, d.span.line if d.span else 0) for d in result.diagnostics}
        extra = tuple(d for d in res.diagnostics if (d.code, d.span.line if d.span else 0) not in seen)
        verdict = Verdict.VIOLATION if any(d.is_error or (options.strict and d.severity is Severity.WARNING)
                                           for d in extra) else result.verdict
        if res.verdict is Verdict.SAFE or verdict is Verdict.VIOLATION:
            return replace(result, verdict=verdict, bound=res.bound, diagnostics=result.diagnostics + extra,
                           stats=stats, coverage="")
        return replace(result, diagnostics=result.diagnostics + extra, stats=stats)
    return replace(result, stats=stats, coverage=res.reason, stopped_by=res.stopped_by)


__all__ = ["Lift", "LiftOutcome", "TripCount", "check", "lift", "lift_result", "lifted_search", "normalize", "replay"]
