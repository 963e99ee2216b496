"""Replay a counterexample on the GPU: the order of its steps as (process, site, occurrence), plus holds.

A race or an init-visibility bug shows on hardware only when the bad order
happens, which timing rarely gives. The checker's shortest counterexample
names that order; the kernel built with a replay forces it with a global turn
counter (design §5: "reproduced deterministically by replaying the
counterexample's order"). Completions of asynchronous copies are not
steps a kernel can schedule, so they are left to the hardware; every thread
step is gated, and everything after the last recorded step runs freely.

Gating the steps is not always enough. In a race the counterexample ends at the
second access of the racing pair (the overwrite); the first one has already been
issued in the model's order, and the model's point is only that nothing orders
it before the overwrite. On hardware it has then long completed. A *hold* keeps
the first access open until the second has landed:

- ``late-lanes`` (a whole-warp read released by one lane): the lanes the release
  does not cover skip their part of the read at the read site and do it after the
  releasing step, once the rest of the order (the overwrite) has run and a window
  has passed. Nothing orders those lanes' loads before the other lane's arrive,
  so this is an execution the PTX model allows, and the one the counterexample
  describes. (Keeping them at the read site in a divergent spin was tried first:
  on the H200 the lanes left spinning were starved while lane 0 polled an
  mbarrier, and the kernel hung instead.) The same hold serves a race inside one
  warp: lanes 1..31 read a slot and lane 0 of the same warp later issues the copy
  into it with no acquire, barrier or syncwarp between (a copy by `first thread`
  or `elect`). The lanes then read after lane 0's copy, at the point where the
  warp has left the block that issued it; between the read and the copy the warp
  may only arrive on barriers that no later step of the order waits on, so the
  lanes taking those arrivals before their deferred read changes nothing the
  order observes (``_lanes_step_ahead``).
- ``late-write`` (SV601, generic writes read by a bulk store): the writes are
  issued bank-conflicted (each lane stores one contiguous run of the slot), so
  they are still in flight in the shared-memory pipeline when the warp reaches the
  barrier; only the writer's fence.proxy.async would wait for them. The protocol's
  own barriers give the counterexample's order (write, barrier, bulk store), so
  these steps are not gated: a gate's __threadfence would itself drain the stores.
- ``late-process`` (a WAR race: a whole-warp read that is its warp's last step, overwritten by another
  process's write that ends the order): the warp hands its turn on at the read site, waits until the
  order has been replayed and a window has passed, then reads. The write it then sees is one the model
  leaves unordered with the read, and one it was not due to see.
- ``slow-wgmma``: wgmma.mma_async is warpgroup-collective, so its warps cannot be
  gated one by one; the protocol's own barriers give the order up to the release,
  and the hold queues a chain of wide accumulating wgmmas (m64n256k32, reading the
  same slot, on an accumulator of their own) before the checked one: on the H200
  the warpgroup issues several ahead of the tensor cores, which are still busy
  with them when the warpgroup reaches the release, so the checked wgmma reads
  the slot late. Copies are then issued without an abort-flag load before them
  (KernelWriter.held_wgmma), so the overwrite lands inside that window.
  In a cluster only the reader's CTA is held: the overwrite may be a peer CTA's copy, and a peer whose
  own wgmmas were held too would reach its release, and its producer its copy, as late as the reader.
  (A chain of m64n8k32 on the checked wgmma's accumulator was tried first: ptxas
  removed it, since the checked wgmma's scale-d 0 discards its results.)

A RAW race (SV301) whose order ends with the write needs no hold: the read was due to see that write, and
the gate already has it read before the write is issued. The schedule's expectation for that read is not
the protocol's intent (it walks its own order), so the replay names the write's stamp as the read's
expected value (``ReplayOrder.expect``, ``_raw_read``). Holding such a read past the write, as the
late-process hold once did for cutlass_sm80_multistage_cp_async_no_sync, gives it the very value it wants:
on the H200 that read was never wrong.

Some violations leave the data right and every wait satisfied (SV502, a phase no wait observed), and a WAR
race whose read no hold keeps open has its read done before the overwrite in the gated order: the replay
gates their order, but nothing the kernel checks can show them. ``ReplayOrder.not_forced`` says why, and
the batch reports a clean run of such a replay as "not forced", never as agreement.

A replay of a safe protocol (``instrumented_order``) has no order to force; it
applies, wherever they apply, the holds that keep the protocol's program order:
every whole-warp read waits a window first (``late-read``), every generic write is
bank-conflicted, every wgmma read is queued behind a chain. A clean run shows that
the replay's instrumentation does not by itself make a correct protocol fail.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .. import ir
from ..semantics.footprint import ref_element
from ..semantics.machine import Machine
from ..semantics.program import per_lane
from ..semantics.state import P_PC, P_VARS
from . import regions
from .base import EmitRefused
from .schedule import stamp
from .sites import collect_sites, lane_site_index, site_of_instr

HOLD_WINDOW_NS = 100_000  # a 16 KiB bulk copy lands in a few microseconds; hold the read open far longer
SAFE_WINDOW_NS = 20_000  # late-read on safe protocols: every read waits this long (kernels stay in milliseconds)
# Replays with late writes launch the protocol 4 times per SM of a 132-SM part. One copy already shows a
# missing proxy fence on the H200 (docs/gpu-agreement.md: 684 wrong words, 10 of 10 runs); 528 copies put
# each bulk store next to the stores of 3 other CTAs on its SM (277036 wrong words), and run the safe
# protocols' fenced writes under the same load.
LATE_WRITE_GRID = 4 * 132
WGMMA_CHAIN = 64  # wide accumulating wgmmas queued before a held one (probe wgmma_war: 8 or more showed it)
ANY = -1  # a hold's process or occurrence: every one
LEADER, LANES = 1, 2  # a gated step taken by the leader lane alone, or by the lanes of a guard on `lane`
RACE_CODES = ("SV301", "SV302")  # the races a hold can keep open (see _holds)
# Violations that leave the data right and every wait satisfied: the replay gates their order, but nothing it
# can check shows them. A clean run is reported as "not forced" with this reason (gpu/outcome.py), not as
# agreement, and not as timing hiding the bug.
NOT_FORCED = {
    "SV502": "a phase completed that no wait observed (PTX, mbarrier phase completion: a test_wait or try_wait "
             "must return True for it before an arrive-on of the next phase); the data hand-off is right and no "
             "wait blocks, so the kernel's data and watchdog cannot show it: compute-sanitizer synccheck's "
             "\"Missing wait\" is the hardware's witness",
    # a WAR race whose read no hold keeps open (e.g. a release by lanes of a guard on `lane` other than the
    # leader: late-lanes defers the lanes other than lane 0 only)
    "SV302": "a WAR race whose read no hold of the replay keeps open: the gated order completes the read before "
             "the overwrite is issued, so the read sees the value it was due to see",
}


@dataclass(frozen=True)
class Hold:
    """Keep one access of the racing pair open until the other has landed (see the module docstring)."""

    kind: str  # "late-lanes" | "late-write" | "slow-wgmma" | "late-read" | "late-process"
    site: int
    process: int = ANY  # the process whose access is held (ANY: every process executing the site)
    occurrence: int = ANY  # which execution of the site by that process (ANY: every one)
    until_turn: int = 0  # late-lanes: wait until the turn counter reaches this (0: no turn to wait for)
    window_ns: int = HOLD_WINDOW_NS  # late-lanes, late-read: then wait this long
    chain: int = WGMMA_CHAIN  # slow-wgmma: accumulating wgmmas before the held one
    after_site: int = -1  # late-lanes: the releasing step's site; the held lanes read after it
    cta: int = ANY  # slow-wgmma: the CTA (rank in the cluster) whose wgmma is held (ANY: every CTA)

    def to_json(self) -> dict:
        return {"kind": self.kind, "site": self.site, "process": self.process, "occurrence": self.occurrence,
                "until_turn": self.until_turn, "window_ns": self.window_ns, "chain": self.chain,
                "after_site": self.after_site, "cta": self.cta}


@dataclass(frozen=True)
class ReplayOrder:
    code: str
    message: str
    steps: tuple[tuple[int, int, int, int], ...]  # gated steps: (process, site, occurrence, LEADER/LANES/0)
    trace: tuple[str, ...]  # one line per step of the counterexample, for reports
    holds: tuple[Hold, ...] = ()
    # (process, site, occurrence) of every line of `trace`; equals steps[:, :3] when every step is gated
    events: tuple[tuple[int, int, int], ...] = ()
    why_ungated: str = ""  # set when the steps are not gated (the protocol itself gives the order)
    grid: int = 1  # clusters to launch at least (a late write needs several CTAs per SM: see LATE_WRITE_GRID)
    # (process, site, occurrence, stamp): a read whose expected stamp is not the schedule's (see _raw_read)
    expect: tuple[tuple[int, int, int, int], ...] = ()
    not_forced: str = ""  # why no run of this replay can show the violation as wrong data or a hang

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "steps": [list(s) for s in self.steps],
                "trace": list(self.trace), "events": [list(e) for e in self.events],
                "holds": [h.to_json() for h in self.holds], "why_ungated": self.why_ungated, "grid": self.grid,
                "expect": [list(e) for e in self.expect], "not_forced": self.not_forced}


def replay_order(protocol: ir.Protocol, site_of: dict[int, int], code: str | None = None,
                 max_states: int = 2_000_000, seconds: float = 300.0) -> ReplayOrder:
    """The shortest counterexample for ``code`` (or, with no code, the one to replay) as a replay order.

    With no code, a race whose first access the replay can hold open is preferred to the shortest
    counterexample: the hold is what makes a race show on hardware, and the codes that come with it in the
    same spec (SV502's unobserved phase, SV504's overflow) leave no wrong data for the stamps to catch. That
    holds too where the shortest one cannot be replayed at all (a WAW race whose order splits a warpgroup
    around its wgmma): the race with a hold is replayed, and only without one is the refusal reported.
    Searched without symmetry reduction so that every step names the real warp that took it. A protocol
    with no error at all gets ``instrumented_order`` (the replay's instrumentation, nothing to force)."""
    from ..engines.explicit import Budget, search

    machine = Machine(protocol)
    outcome = search(machine, Budget(max_states, seconds), None)
    if not outcome.errors and code is None:
        return instrumented_order(protocol)
    errors = [(v, labels) for v, labels in outcome.errors if code is None or v.code == code]
    if not errors:
        found = sorted({v.code for v, _ in outcome.errors}) or ["none"]
        raise EmitRefused(f"{protocol.path}: no counterexample{f' for {code}' if code else ''} to replay "
                          f"(the checker found: {', '.join(found)})")
    try:
        order: ReplayOrder | None = _order(machine, protocol, site_of, *min(errors, key=lambda e: len(e[1])))
        refused: EmitRefused | None = None
    except EmitRefused as err:  # e.g. a WAW race whose order splits a warpgroup around its wgmma
        if code is not None:
            raise
        order, refused = None, err
    if code is None and (order is None or (order.code not in RACE_CODES and not order.holds)):
        races = [e for e in errors if e[0].code in RACE_CODES]
        if races:
            try:
                held = _order(machine, protocol, site_of, *min(races, key=lambda e: len(e[1])))
            except EmitRefused:
                held = None
            if held is not None and held.holds:
                return held
    if order is None:
        assert refused is not None
        raise refused
    return order


def _order(machine: Machine, protocol: ir.Protocol, site_of: dict[int, int], violation,
           labels) -> ReplayOrder:
    """One counterexample (its violation and step labels) as a replay order: gated steps, trace and holds."""
    state = machine.initial()
    occ: Counter[tuple[int, int]] = Counter()
    steps: list[tuple[int, int, int, int]] = []
    events: list[tuple[int, int, int]] = []
    kinds: list[ir.Op] = []
    slots: list[tuple[str, int] | None] = []  # the buffer slot each step accesses (_slot)
    trace: list[str] = []
    lane_sites = lane_site_index(collect_sites(protocol))
    step_lanes: list[int] = []  # the lanes that take each step
    lane_pc: dict[int, int] = {}  # process -> pc of the lane copy its last step took
    just_before: tuple[int, int] | None = None  # (process, pc) of the previous label, when a lane copy
    for label in labels:
        here = None
        if label[0] == "p":
            p = label[1]
            pc = state.procs[p][P_PC]
            ins = machine.programs[p].code[pc]
            site, lane_copy = site_of_instr(site_of, lane_sites, ins.op)
            assert site is not None, "every operation of the body has a site"
            if lane_copy and just_before == (p, pc - 1):
                # the next lane's copy of the operation the previous step began (program.with_lane: one
                # operation per lane, in lane order): the kernel runs them as one execution of the site
                step_lanes[-1] |= ins.lanes
                steps[-1] = (*steps[-1][:3], _gate_kind(machine, p, step_lanes[-1], False))
                events.append(steps[-1][:3])
            elif lane_copy and lane_pc.get(p) == pc - 1:
                raise EmitRefused(f"{protocol.path}:{ins.line}: the counterexample puts other steps between the "
                                  "lanes of an operation whose operand uses `lane`; the replay gates whole sites, "
                                  "not single lanes")
            else:
                n = occ[(p, site)]
                occ[(p, site)] += 1
                steps.append((p, site, n, _gate_kind(machine, p, ins.lanes, ins.leader_only)))
                step_lanes.append(ins.lanes)
                events.append((p, site, n))
                kinds.append(ins.op)
                slots.append(_slot(machine, p, state.procs[p][P_VARS], ins.op))
            lane_pc.pop(p, None)
            if lane_copy:
                lane_pc[p] = pc
                here = (p, pc)
            it = _iteration(machine, p, state.procs[p][P_VARS], state.procs[p][P_PC])
            trace.append(f"{machine.proc_label(p)} line {ins.line}{' ' + it if it else ''}")
        just_before = here
        res = machine.step(state, label)
        if res is None or res.state is None:
            break
        state = res.state
    holds, why_ungated = _holds(protocol, violation, steps, kinds, [proc.cta for proc in machine.procs], slots)
    if any(isinstance(op, ir.WgmmaRead) for op in kinds) and not why_ungated:
        line = next(op.span.line for op in kinds if isinstance(op, ir.WgmmaRead))
        raise EmitRefused(f"{protocol.path}:{line}: the counterexample of {violation.code} orders the "
                          "warps of a warpgroup around `wgmma.read`, but wgmma.mma_async is "
                          "warpgroup-collective: the GPU cannot be forced into a per-warp order there")
    gated = () if why_ungated else tuple(steps)
    expect = () if why_ungated else _raw_read(protocol, violation, steps, kinds, len(site_of))
    return ReplayOrder(violation.code, violation.message, gated, tuple(trace), holds, tuple(events), why_ungated,
                       _grid(holds), expect, _not_forced(violation.code, holds, kinds, steps))


# Measured on the H200 (docs/gpu-agreement.md, 2026-12-02): the held wgmma read of
# cutlass_consumer_release_multicast_early never saw the overwrite while its release was `.release.cluster`,
# and did, 10 runs of 10, with the same replay and CUTLASS's own `.cta`-scope arrive.
CLUSTER_RELEASE_DRAINS_WGMMA = (
    "a WAR race of a wgmma read released by a `.release.cluster` arrive: on sm_90 ptxas issues that arrive "
    "after MEMBAR.ALL.GPU, which waits for the warp's wgmma in flight, so the held read has ended before the "
    "release and no overwrite can land inside it (the same replay with CUTLASS's `.cta`-scope arrive showed "
    "the race on the H200, corrupt 10/10)")


def _not_forced(code: str, holds: tuple[Hold, ...], kinds: list[ir.Op],
                steps: list[tuple[int, int, int, int]]) -> str:
    """Why a run of this replay cannot show the violation (NOT_FORCED), or "" when it can or may.

    A WAR race counts only when the order ends with the overwrite (the read came first): one that ends with
    the read has the read after the write in the gated order, which shows it. A held wgmma read whose
    reader releases the slot with a `.release.cluster` arrive is not forced either (the release waits for
    the wgmma on sm_90)."""
    if holds and code == "SV302" and _cluster_release_after_held_read(holds, kinds, steps):
        return CLUSTER_RELEASE_DRAINS_WGMMA
    if holds or (code == "SV302" and not (kinds and _is_write(kinds[-1]))):
        return ""
    return NOT_FORCED.get(code, "")


def _cluster_release_after_held_read(holds: tuple[Hold, ...], kinds: list[ir.Op],
                                     steps: list[tuple[int, int, int, int]]) -> bool:
    """Does a process whose wgmma read is held arrive with `.release.cluster` while that read is in flight
    (after it, before the process's next `wgmma.wait` and before the overwrite that ends the order)? A
    release after the wait (deepgemm_lane_rank_release_wrong_rank) drains nothing: the race there is
    another CTA's release, and it shows."""
    held = [h for h in holds if h.kind == "slow-wgmma"]
    readers = {steps[i][0]: i for i in range(len(steps) - 1)
               for h in held if steps[i][1] == h.site and steps[i][2] == h.occurrence}
    for p, i in readers.items():
        for j in range(i + 1, len(steps) - 1):
            op = kinds[j]
            if steps[j][0] != p:
                continue
            if isinstance(op, ir.GroupWait) and op.unit == "wgmma":
                break
            if isinstance(op, ir.MbarArrive) and op.sem == "release" and op.scope == "cluster":
                return True
    return False


def _raw_read(protocol: ir.Protocol, violation, steps: list[tuple[int, int, int, int]], kinds: list[ir.Op],
              nsites: int) -> tuple[tuple[int, int, int, int], ...]:
    """A RAW race (SV301) whose order ends with the write: the read was waiting for that write.

    The gated order issues the read before the write, so on hardware the read sees the slot's older content:
    that is the race shown, deterministically, with no hold. The schedule cannot say so (it does not follow
    the order, and in the order the read observes the older content too), so the read's expected stamp is
    the write's: the value the protocol means it to see. Only a plain read of another process's write of a
    whole slot (an Access write, a cp.async, a TMA copy) is named; a per-lane or region read keeps the
    schedule's expectation."""
    if violation.code != "SV301" or not violation.related or not steps:
        return ()
    wp, wsite, wocc, _ = steps[-1]
    parted = regions.region_buffers(protocol)
    if not _is_write(kinds[-1]) or kinds[-1].buf.name in parted:
        return ()
    line = violation.related[0][0]
    for i in range(len(steps) - 2, -1, -1):
        op = kinds[i]
        if (isinstance(op, ir.Access) and op.kind == "read" and op.span.line == line and steps[i][0] != wp
                and steps[i][3] == 0 and not per_lane(op) and op.buf.name not in parted):
            return ((*steps[i][:3], stamp(wp, wsite, wocc, nsites)),)
    return ()


def _is_write(op: ir.Op) -> bool:
    """A step that writes a whole slot: a generic write, a cp.async or a TMA copy."""
    return isinstance(op, ir.CpAsync | ir.TmaLoad) or (isinstance(op, ir.Access) and op.kind == "write")


def _gate_kind(machine: Machine, p: int, lanes: int, leader_only: bool) -> int:
    """A step's fourth field: LEADER (the process's leader lane alone), LANES (some lanes of the warp, in a
    guard on `lane`) or 0 (every lane). The kernel's gate lets a lane that is at another site pass over a
    step of the first two kinds: that lane does not take it."""
    if leader_only:
        return LEADER
    return LANES if lanes and lanes != machine.procs[p].lane_mask else 0


def _grid(holds: tuple[Hold, ...]) -> int:
    return LATE_WRITE_GRID if any(h.kind == "late-write" for h in holds) else 1


def _slot(machine: Machine, p: int, vars_: tuple, op: ir.Op) -> tuple[str, int] | None:
    """The buffer slot (name, index) an access, wgmma read or copy of process p touches (None: not one,
    or its index cannot be evaluated here)."""
    if not isinstance(op, ir.Access | ir.WgmmaRead | ir.TmaLoad):
        return None
    name, index = ref_element(op.buf, machine.env(p, vars_), machine.ctx[p])
    return None if index is None else (name, index)


def _holds(protocol: ir.Protocol, violation, steps: list[tuple[int, int, int, int]],
           kinds: list[ir.Op], cta_of: list[int],
           slots: list[tuple[str, int] | None]) -> tuple[tuple[Hold, ...], str]:
    """The hold that keeps the first access of the racing pair open, and why the steps go ungated (if so).

    The violating step is the last one of the order; the other access is named by the violation
    (``related`` line, ``procs`` owner) and, where the slots are known, is the last such step that
    touched the slot the violating step writes: a read of the same line in a later iteration reads
    another stage, and holding it leaves the racing read alone (the 2-CTA `_early` release's
    counterexample retires the first stage's reads before the refill, then reads the second stage).
    Only the shapes the emitter can hold on sm_90 get one."""
    if not violation.related or not steps:
        return (), ""
    line = violation.related[0][0]
    owners = set(violation.procs)
    if violation.code == "SV601":
        idx = next((i for i in range(len(steps) - 1, -1, -1) if kinds[i].span.line == line
                    and isinstance(kinds[i], ir.Access) and kinds[i].kind == "write"), None)
        if idx is None:
            return (), ""
        return ((Hold("late-write", steps[idx][1]),),
                "the protocol's own barriers give the counterexample's order (generic writes, barrier, bulk "
                "store); a gate's __threadfence would drain the held stores")
    if violation.code not in ("SV301", "SV302"):
        return (), ""
    if violation.code == "SV301" and _is_write(kinds[-1]):
        # RAW ending with the write: the read was due to see it, and the gate already puts the read first
        # (_raw_read). Holding the read back past the write would give it the value it wants.
        return (), ""
    candidates = [i for i in range(len(steps) - 1, -1, -1)
                  if kinds[i].span.line == line and (not owners or steps[i][0] in owners)
                  and isinstance(kinds[i], ir.Access | ir.WgmmaRead)]
    same = [i for i in candidates if slots[-1] is not None and slots[i] == slots[-1]]
    idx = (same or candidates or [None])[0]
    if idx is None:
        return (), ""
    p, site, n, leader_only = steps[idx]
    op = kinds[idx]
    if isinstance(op, ir.WgmmaRead):
        # Only the reader's CTA is held: in a cluster the overwrite may come from a peer CTA, whose own
        # wgmmas, held too, would slow its release and its producer as much as the reader (every CTA alike).
        cta = cta_of[p] if len({*cta_of}) > 1 else ANY
        return ((Hold("slow-wgmma", site, ANY, n, cta=cta),),
                "wgmma.mma_async is warpgroup-collective, so its warps cannot be gated one by one; the "
                "protocol's own barriers give the counterexample's order up to the release, and the held "
                "wgmma reads the slot late")
    if isinstance(op, ir.Access) and op.kind == "read" and leader_only != LEADER:
        later = [i for i in range(idx + 1, len(steps)) if steps[i][0] == p]
        # Only a step of one lane leaves lanes uncovered: a release by lane 0 (the per-warp release), or the
        # overwrite itself when lane 0 of the reading warp issues it (a copy with no acquire before it).
        # In the second shape the warp's own arrivals may come between; see _lanes_step_ahead.
        own = steps[-1][0] == p and steps[-1][3] == LEADER
        if later and all(steps[i][3] == LEADER or (own and _lanes_step_ahead(steps, kinds, i)) for i in later):
            return (Hold("late-lanes", site, p, n, until_turn=len(steps), after_site=steps[later[-1]][1]),), ""
        if not later and not leader_only and steps[-1][0] != p:
            # the read is its warp's last step and another process's write ends the order: nothing orders
            # the read before that write, so the warp reads after it (and a window), its turn handed on first
            return (Hold("late-process", site, p, n, until_turn=len(steps)),), ""
    return (), ""


def _lanes_step_ahead(steps: list[tuple[int, int, int, int]], kinds: list[ir.Op], i: int) -> bool:
    """May the held lanes take whole-warp step i before their deferred read?

    The held lanes read after lane 0's overwrite, at the end of the order, so in the kernel they take the
    warp's steps between the read and the overwrite first. That changes nothing the order can observe when
    the step is an arrival on a barrier that no later step of the order waits on: PTX orders a lane's read
    before its own release, but only for a thread that acquires that barrier, and none does before the
    overwrite. Anything else (a wait, a barrier, a collective) is refused, and the race is replayed unheld."""
    op = kinds[i]
    if not isinstance(op, ir.MbarArrive) or op.remote is not None:
        return False
    return not any(isinstance(k, ir.MbarWait) and k.bar.name == op.bar.name for k in kinds[i + 1:])


def instrumented_order(protocol: ir.Protocol) -> ReplayOrder:
    """A safe protocol under the replay's instrumentation: gates compiled in (with nothing to gate) and
    every hold applied wherever it applies (each whole-warp read lags, each wgmma read is slow)."""
    from .sites import collect_sites

    holds: list[Hold] = []
    for s in collect_sites(protocol):
        if isinstance(s.op, ir.WgmmaRead):
            holds.append(Hold("slow-wgmma", s.index))
        elif isinstance(s.op, ir.Access) and s.op.kind == "read":
            holds.append(Hold("late-read", s.index, window_ns=SAFE_WINDOW_NS))
        elif isinstance(s.op, ir.Access) and s.op.kind == "write":
            holds.append(Hold("late-write", s.index))
    return ReplayOrder("", "no violation: the replay's instrumentation with every hold applied", (), (),
                       tuple(holds), (), "no counterexample to force", _grid(tuple(holds)))


def _iteration(machine: Machine, p: int, vars_: tuple, pc: int) -> str:
    """The loop variables for a trace line (Machine.iteration gained a pc argument once; accept both)."""
    try:
        return machine.iteration(p, vars_, pc)  # type: ignore[call-arg]
    except TypeError:
        return machine.iteration(p, vars_)  # type: ignore[call-arg]
