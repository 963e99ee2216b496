"""The merge key of a state in the periodic search: every counter the machine only uses relatively, shifted down.

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
knowledge, epoch-only duplicates, dominated completed async accesses) drop only what no
later step can observe. Two states with equal keys therefore have the same
futures up to translation: the same steps and verdicts (a race may be named
RAW instead of WAR, as under the explicit engine's reductions). The keys are finite when the
roles cannot drift apart without bound (the synchronization bounds the lags);
otherwise the state budget ends the search as *inconclusive* — never safe.

The search goes on from the key itself (``search``): ``normalize`` gives a key back unchanged, so
the key and the state it came from have equal keys, and so the same futures up to the translation.

A room of its own: the key is the part of the lift whose soundness argument stands alone (each
shift is a translation the machine cannot observe), and the search only calls ``held_key``:
``normalize``'s key, held packed (packed.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from ... import ir
from ...semantics import rules
from ...semantics.machine import UNCOMMITTED, Machine
from ...semantics.program import BAR_WAIT, OP
from ...semantics.state import (
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
    R_REGION,
    R_SLOT,
    R_SPACE,
    READ,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    UNIT_WGMMA,
    WRITE,
    State,
)
from ..periodic import Plan, ProcPlan
from .hook import FIXED
from .packed import KeyTable

PHASE_FLOOR = 3  # a phase ≥ 3 is "past phases 0..2" for every absolute comparison the machine makes


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
    memo: dict = field(default_factory=dict, compare=False)  # normalized records' codes, by (records, shifts)
    runs: dict = field(default_factory=dict, compare=False)  # normalized runs of one slot's records
    counters: dict = field(default_factory=dict, compare=False)  # shifted (procs, mode, numbered), by (procs, mode)
    phases: dict = field(default_factory=dict, compare=False)  # shifted mbars and their shifts, by mbars
    record_lows: dict = field(default_factory=dict, compare=False)  # least group numbers, by the records' code
    relabels: dict = field(default_factory=dict, compare=False)  # code of the records relabelled, by code, shift
    table: KeyTable = field(default_factory=lambda: KeyTable(_RUN_HEAD), compare=False)  # the keys held (packed.py)


_MEMO_LIMIT = 1 << 16  # entries per normalization table before it starts over
# entries of the table of normalized records' codes before it starts over: its keys hold a state's own
# records (some 300 on the 2x1 ping-pong GEMM), and at 65,536 entries it held 90 MB of a residue of
# 20,662 keys; at 1,024, 15 MB. With 256 that residue normalizes 12,323 records tuples instead of 12,162.
_RECORDS_MEMO_LIMIT = 256
_RUN_HEAD = itemgetter(R_SPACE, R_CTA, R_OBJ, R_SLOT)  # what one run of records shares


def _shape(p: Plan, machine: Machine) -> _Shape:
    one_trip = max(pp.main.lo_const - pp.main.hi_off + 1 for _, pp in p.procs)
    epi = [e.lo_off for _, pp in p.procs for e in pp.epilogues if e.lo_off is not None]
    bar_wait = frozenset((q, pc) for q, prog in enumerate(machine.programs)
                         for pc, ins in enumerate(prog.code) if ins.kind == BAR_WAIT)
    tmem_ops = frozenset((q, pc) for q, prog in enumerate(machine.programs)
                         for pc, ins in enumerate(prog.code) if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc))
    names = [{ins.op.bar.name for ins in prog.code if ins.kind == OP and isinstance(ins.op, ir.MbarWait | ir.MbarProbe)}
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
    procs, mbars, named, cluster, agents, tmem, code, mode = _normalized(sh, state, mode)
    return State(procs, mbars, named, cluster, agents, sh.table.records(code), tmem), mode


def held_key(sh: _Shape, state: State, mode: tuple[int, int]) -> bytes:
    """The merge key of a state as the lift holds it (packed.py): ``normalize``'s, its records the
    code the normalization gave them as it built them."""
    return sh.table.hold(_normalized(sh, state, mode))


def _normalized(sh: _Shape, state: State, mode: tuple[int, int]) -> tuple:
    """``normalize``'s key in the form packed.KeyTable holds, its parts not yet shared."""
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
    code = sh.memo.get(memo_key)
    if code is None:
        if len(sh.memo) > _RECORDS_MEMO_LIMIT:
            sh.memo.clear()
        # the records are the runs numbered in sh.table (sorted, as every State's are: _normalize_records
        # keeps their order); a key holds their code
        code = sh.memo[memo_key] = sh.table.code(_normalize_records(
            state.records, dict(phase_items), sh.all_procs, sh.all_holders, sh.runs, sh.table))
    # bulk and wgmma group numbers per process (the steps above leave them alone)
    if numbered:
        # a warpgroup's warps compare their wgmma group numbers with one another's (Machine._wgmma_wait):
        # they move by one amount, the least over the team
        owner = sh.group_owner
        # The records' least group numbers, and the records relabelled by a shift, recur across states:
        # remembered by the records' code
        from_records = sh.record_lows.get(code)
        if from_records is None:
            if len(sh.record_lows) > _MEMO_LIMIT:
                sh.record_lows.clear()
            from_records = sh.record_lows[code] = _record_lows(sh, sh.table.records(code))
        low = dict(from_records)
        for q in range(nprocs):
            ps = (plist if plist is not None else procs)[q]
            for unit, field_ in enumerate(GROUP_FIELDS):
                key = (owner[q][unit], unit)
                low[key] = min(low.get(key, ps[field_]), ps[field_])
        shift: dict[tuple[int, int], int] = {}
        for q in range(nprocs):
            ps = (plist if plist is not None else procs)[q]
            moved = False
            for unit, field_ in enumerate(GROUP_FIELDS):
                d = low[(owner[q][unit], unit)]
                if d > 0:
                    shift[(q, unit)] = d
                    ps = (*ps[:field_], ps[field_] - d, *ps[field_ + 1:])
                    moved = True
            if moved:  # (the local states stay the remembered object where none moves: packed.py finds it so)
                set_proc(q, ps)
        if shift:
            relabel_key = (code, tuple(shift.items()))
            relabelled = sh.relabels.get(relabel_key)
            if relabelled is None:
                if len(sh.relabels) > _MEMO_LIMIT:
                    sh.relabels.clear()
                relabelled = sh.relabels[relabel_key] = sh.table.code(sh.table.numbers(tuple(sorted(
                    (*r[:R_GRP], r[R_GRP] - NUNITS * shift.get((r[R_OWNER], r[R_GRP] % NUNITS), 0), *r[R_GRP + 1:])
                    if 0 <= r[R_GRP] < UNCOMMITTED else _shift_mark(r, sh.teams, shift)
                    for r in sh.table.records(code)))))
            code = relabelled
    return (tuple(plist) if plist is not None else procs, mbars, named, cluster, state.agents, tmem, code, mode)


def _record_lows(sh: _Shape, records: tuple) -> dict[tuple[int, int], int]:
    """The least group number among the records, per (team owner, unit): the group tags of access
    records and the issue marks of observations."""
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
    return low


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
                       memo: dict, table: KeyTable) -> list[int]:
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

    The normalized records are given as the numbers of their runs in ``table`` (packed.py), in order.
    No rule moves a record out of its run ((space, CTA, object, slot) stay; an observation run's
    phase moves with every other of its barrier's), and each run comes out sorted: so the runs, in
    order, are the normalized records sorted, and each is one maximal run of them.
    """
    # (bisect puts each boundary between a record below and one at or above the space searched
    # for, never inside a run, so the three parts give the runs of the whole tuple, in order)
    lo = bisect_left(records, (SPACE_INIT,))
    hi = bisect_left(records, (SPACE_OBS,), lo)
    key = (SPACE_INIT, records[lo:hi])  # (no run is keyed so: its items are records)
    block = memo.get(key)
    if block is None:
        block = memo[key] = _normalize_runs(key[1], phase_shift, all_procs, all_holders, memo, table)
    return (_normalize_runs(records[:lo], phase_shift, all_procs, all_holders, memo, table) + block
            + _normalize_runs(records[hi:], phase_shift, all_procs, all_holders, memo, table))


def _normalize_runs(records: tuple, phase_shift: Mapping[int, int], all_procs: int, all_holders: int,
                    memo: dict, table: KeyTable) -> list[int]:
    """``_normalize_records`` for one part of a record tuple, run by run: the number of each run
    normalized (none for a run the rules empty)."""
    numbers: list[int] = []
    for head, members in groupby(records, _RUN_HEAD):
        run = tuple(members)
        space = head[0]
        # (an observation run is keyed with its barrier's phase shift, a tuple of three)
        memo_key = (SPACE_OBS, phase_shift.get(head[2], 0), run) if space == SPACE_OBS else run
        done = memo.get(memo_key)
        if done is None:
            if len(memo) > 1 << 17:
                memo.clear()
            if space == SPACE_OBS:
                d = memo_key[1]
                normal = tuple([(*x[:R_SLOT], x[R_SLOT] - d, *x[R_SLOT + 1:]) for x in run]) if d else run
            else:
                normal = _normalize_run(run, space == SPACE_DATA, all_procs, all_holders)
            done = memo[memo_key] = table.number(normal) if normal else -1
        if done >= 0:
            numbers.append(done)
    return numbers


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
    # dominated by a newer completed write of the same operation (the same owner, part, line,
    # flags, group tag and region; every holder of the newer one holds the older one too, in both
    # knowledge sets, and the updates keep it so: they are monotone in the bits and treat the two
    # alike) is ordered wherever the newer one is, and never raises the maximum over ordered
    # writes: dropping it keeps the verdict. (Which write a race names, hence RAW or WAR, can
    # change, as with the other reductions.) The same holds for a completed async read with no
    # group tag (a retired wgmma read, a landed bulk copy's read), which nothing updates apart
    # from its knowledge: wherever the older read is unordered with a later access, so is the
    # newer one, and a race reports the same line, owner and kind; a reader's newest read keeps
    # its epoch. Such reads pile up once per trip of a main loop (a wgmma's reads of a stage),
    # each generation known a little further than the next: without this the key tells the
    # trips apart for as long as the oldest generation is still spreading.
    ops = [r for r in kept if r[R_FLAGS] & F_ASYNC and not r[R_FLAGS] & F_INFLIGHT
           and (r[R_KIND] == WRITE or (r[R_KIND] == READ and r[R_GRP] == -1))]
    if len(ops) > 1:
        dominated = set()
        for old in ops:
            for new in ops:
                if new[R_EPOCH] > old[R_EPOCH] and new[R_KIND:R_EPOCH] == old[R_KIND:R_EPOCH] and \
                        old[R_GRP] == new[R_GRP] and old[R_REGION] == new[R_REGION] and \
                        (old[R_KNOWN] | new[R_KNOWN]) == old[R_KNOWN] and \
                        (old[R_AKNOWN] | new[R_AKNOWN]) == old[R_AKNOWN]:
                    dominated.add(old)
                    break
        if dominated:
            kept = [r for r in kept if r not in dominated]
    values = sorted({r[R_EPOCH] for r in kept if r[R_EPOCH] >= 1})
    rank = {e: i + 1 for i, e in enumerate(values)}
    return tuple(sorted((*r[:R_EPOCH], rank[r[R_EPOCH]], *r[R_EPOCH + 1:]) if r[R_EPOCH] >= 1 else r
                        for r in kept))
