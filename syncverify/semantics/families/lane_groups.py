"""The semantics of bulk async-groups that some lanes of a warp own: a TMA store, its
`cp.async.bulk.commit_group` and its `cp.async.bulk.wait_group[.read]` under a lane guard.

PTX (cp.async.bulk.commit_group): the instruction "creates a new per-thread bulk async-group and
batches all prior cp{.reduce}.async.bulk... instructions"; (cp.async.bulk.wait_group): it "will cause
the executing thread to wait until only N or fewer of the most recent bulk async-groups are pending
and all the prior bulk async-groups committed by the executing threads are complete". Each thread has its own groups:
lane 0's wait does not wait for lane 1's stores. DeepGEMM's sm90 GEMM stores its epilogue tile
with one TMA store per 64-column half, by lanes 0 and 1, each committing and later waiting for
its own group (deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh:373-374, 433-441).

The model keeps no new knowledge holder for this. A process's group counter (state.P_BULK) stays
exact for its leader lane: it counts the commits the leader takes part in, so the leader's own
stores (part LEADER) keep their group number as before. A store by other lanes (part LANES + m,
the lanes in m; with `@ lane` operands, one lane each) carries a lane-group tag instead:

    R_GRP = LANE_GROUP + NUNITS * state + unit,  state 0: not committed yet,
                                                 state 1 + k: committed, and k later commits
                                                 made by all of its lanes (at most K_CAP)

A commit by lanes c commits an uncommitted store of lanes m when c covers m; a committed one
counts one more later group when c covers m (a commit by only some of its lanes counts nothing:
k is the least count over its lanes, never more). A `wait_group N` by lanes that cover m
retires it when it is committed and k >= N — for every lane of m, all but its N most recent
groups are then complete. A smaller k retires later than PTX does, never sooner (sound). The
retired read is known by the other-lanes holder as each lane's own (state.F_LANEWISE): the lanes
that stored know it; another lane of the warp meets it only after a `syncwarp` or a barrier of
the warp (program.lanes_meet_unordered), and a release by some lanes publishes it only from the
lanes that stored (program.own_part_hidden). A wait by lanes that do not cover m retires nothing
of it; a whole-warp store's read is retired only by a whole-warp wait, an elected store's only
by a wait the leader takes part in.

The bmc engine, the Promela export and the CUDA emitter do not encode lane groups: they refuse a
protocol that has one (lane_group_refusal). The explicit engine and `--engine z3` (which runs this
machine) check it.
"""

from __future__ import annotations

from ... import ir
from ..program import OP, Process, Program, part_lanes
from ..state import FULL, LANES, LEADER, NUNITS, R_GRP, R_OWNER, R_PART

# the lane-group tags lie above every group number and above async_agents.UNCOMMITTED (NUNITS << 40)
LANE_GROUP = NUNITS << 41
K_CAP = 7  # later groups counted per lane-group store; more is counted as K_CAP (a wait_group > K_CAP keeps it)


def is_lane_group(grp: int) -> bool:
    """Is this group tag a lane-group tag (a store by some, not all, lanes other than the leader alone)?"""
    return grp >= LANE_GROUP


def lane_group_part(part: int) -> bool:
    """Does an async access of this part get a lane-group tag (not the leader's or the whole warp's)?"""
    return part >= LANES


def issue_tag(unit: int) -> int:
    """The tag of a store by some lanes, not committed yet."""
    return LANE_GROUP + unit


def _state(grp: int) -> int:
    return (grp - LANE_GROUP) // NUNITS


def commit(records: tuple, proc: Process, p: int, unit: int, part: int) -> tuple:
    """A commit of ``unit`` by the lanes of ``part`` (any part): the lane-group stores of ``p`` whose
    lanes it covers are committed, or count one more later group."""
    lanes = part_lanes(proc, part)
    out = None
    for i, r in enumerate(records):
        grp = r[R_GRP]
        if r[R_OWNER] != p or not is_lane_group(grp) or grp % NUNITS != unit:
            continue
        if part_lanes(proc, r[R_PART]) & ~lanes:
            continue  # some of its lanes do not commit: nothing counted (k is their least count)
        state = _state(grp)
        new = LANE_GROUP + NUNITS * min(state + 1, K_CAP + 1) + unit
        if new != grp:
            if out is None:
                out = list(records)
            out[i] = (*r[:R_GRP], new, *r[R_GRP + 1:])
    return records if out is None else tuple(out)


def retires(r: tuple, proc: Process, p: int, unit: int, waiter: int, limit: int, pending: int) -> bool:
    """Does a `wait_group pending` of ``unit`` by the lanes of ``waiter`` (part) of process ``p`` retire
    record ``r``? One of the process's counter-numbered groups before ``limit`` (the leader's count less
    ``pending``) when the wait covers its lanes (waiter_covers), or a lane-group store (retired)."""
    grp = r[R_GRP]
    if r[R_OWNER] != p or grp < 0 or grp % NUNITS != unit:
        return False
    if is_lane_group(grp):
        return retired(r, proc, p, unit, waiter, pending)
    return grp // NUNITS < limit and waiter_covers(proc, waiter, r[R_PART])


def retired(r: tuple, proc: Process, p: int, unit: int, part: int, pending: int) -> bool:
    """Does a `wait_group pending` of ``unit`` by the lanes of ``part`` retire lane-group record ``r``?"""
    grp = r[R_GRP]
    if r[R_OWNER] != p or not is_lane_group(grp) or grp % NUNITS != unit:
        return False
    if part_lanes(proc, r[R_PART]) & ~part_lanes(proc, part):
        return False
    state = _state(grp)
    return state >= 1 and state - 1 >= pending


def waiter_covers(proc: Process, waiter: int, part: int) -> bool:
    """Does a wait by the lanes of ``waiter`` retire, for every lane that made it, an access of ``part``
    numbered by the process's counter (state.P_BULK, exact for the leader lane)? The whole warp's
    wait covers a whole-warp access; a wait the leader takes part in covers the leader's own."""
    if part == LEADER:
        return bool(part_lanes(proc, waiter) & 1 << proc.leader_lane)
    return waiter == FULL  # (per-lane copies numbered by the counter: the whole warp's commits and waits)


def leader_commits(proc: Process, part: int) -> bool:
    """Does the leader lane take part in a commit by the lanes of ``part`` (its counter moves)?"""
    return bool(part_lanes(proc, part) & 1 << proc.leader_lane)


def lane_group_programs(programs: list[Program]) -> list[tuple[Program, int]]:
    """The (program, line) of each bulk-group operation run by some lanes of a warp that are neither
    all of them nor the leader alone (what lane_group_refusal names)."""
    found = []
    for prog in programs:
        proc = prog.process
        whole, leader = proc.lane_mask, 1 << proc.leader_lane
        for ins in prog.code:
            if ins.kind != OP or ins.lanes in (whole, leader) or proc.nthreads == 1:
                continue
            op = ins.op
            if isinstance(op, ir.TmaStore) or (isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "bulk"):
                found.append((prog, ins.line))
    return found


def lane_group_refusal(programs: list[Program], what: str) -> str | None:
    """The reason ``what`` (an engine, exporter or emitter) refuses a protocol with bulk async-groups of
    some lanes of a warp, or None."""
    found = lane_group_programs(programs)
    if not found:
        return None
    lines = ", ".join(str(line) for line in sorted({line for _, line in found})[:6])
    return (f"{what} does not model bulk async-groups of some lanes of a warp (a lane-guarded `tma.store` / "
            f"`bulk.commit` / `bulk.wait_read`, lines {lines}): check this protocol with the explicit engine "
            "or --engine z3")


__all__ = ["K_CAP", "LANE_GROUP", "commit", "is_lane_group", "issue_tag",
           "lane_group_part", "lane_group_refusal", "leader_commits", "retired", "retires", "waiter_covers"]
