"""Whether a warp-collective `.sync.aligned` instruction orders the warp's lanes' earlier generic
accesses as a `syncwarp` would (docs/model.md, "Lanes": "Warp-collective instructions").

PTX says of `wgmma.fence`, `wgmma.commit_group` and `wgmma.wait_group` only that ".sync" makes the
executing thread wait until all threads in the warp execute the same instruction and ".aligned"
that all threads in the warpgroup must execute it; the memory consistency model lists no ordering
for them. Only `bar.warp.sync` is said to "guarantee memory ordering among threads participating in
barrier". By the letter, then, lanes 1..31's `ld.shared` of a slot before `warpgroup_wait<0>()` are
not ordered before lane 0's later `mbarrier.arrive` (release), and the producer's next TMA write
races them. DeepGEMM's sm90 FP8 GEMM relies on the opposite ("all shared memory read must be prior
to `warpgroup_arrive`", `sm90_fp8_gemm_1d2d.cuh`), and on the hardware a warp's `ld.shared` is one
warp instruction serviced before that warp's later shared-memory atomic.

The checker's reading (WARP_COLLECTIVE_ORDERS, on by default, dropped by `--no-assume`): a
`wgmma.commit` or `wgmma.wait` executed by every lane of a whole warp orders each lane's earlier
own generic accesses before the warp's later releases, as a `syncwarp` would. The collective marks
those records (F_COLLECTIVE, with its line; a real `syncwarp` clears the mark), and a release by
some lanes (an elected lane, a lane guard) then publishes them too, with the SV609 warning naming
the collective and the access (`--strict`: an error). Without the reading nothing is marked and
the release does not publish the other lanes' parts: the letter's SV301/SV302/SV303.

The reading is narrow on purpose: it acts only at such a release. It does not let another lane
meet the accesses (F_LANESYNCED, program.lanes_meet_unordered), does not give the leader lane
their knowledge for its own later accesses, and covers only the process's own generic accesses
(not async ones, not what the lanes learnt from others); all of that stays as PTX's letter gives
it (more findings, never fewer).

`tcgen05.wait::ld` / `tcgen05.wait::st` (PTX ISA §9.7.16.8.5) is read the same way, for what it
completes only: PTX words its `.sync` / `.aligned` as it words wgmma.wait_group's ("causes the
executing thread to wait until all threads in the warp execute the same tcgen05.wait_operation
instruction"; "all threads in the warp must execute the same"), and CUTLASS's CuTe-DSL kernels
release an accumulator stage from one elected lane right after the warp's `tcgen05.ld` and
wait::ld, with no `__syncwarp`. Executed by every lane of a whole warp, it marks the warp's own
tensor-memory loads / stores of other lanes that it completes (not other records, not a partial
wait's), and a release by some lanes publishes them; the before-fence knowledge (R_AKNOWN of a
tensor-memory record) goes with them only where the lanes had it, as a syncwarp would carry it."""

from __future__ import annotations

from typing import Any

from ... import ir
from ...diagnostics import Severity
from ..core import Violation
from ..program import OP, part_lanes
from ..state import (
    F_ASYNC,
    F_INFLIGHT,
    F_WARPSYNCED,
    LEADER,
    R_AKNOWN,
    R_FLAGS,
    R_GRP,
    R_KNOWN,
    R_LINE,
    R_OWNER,
    R_PART,
    R_SPACE,
    SPACE_DATA,
    SPACE_TMEM,
)
from .async_agents import AsyncAgentOps
from .tcgen05 import Tcgen05Ops

__all__ = [
    'F_COLLECTIVE',
    'HANDLERS',
    'WARP_COLLECTIVE_ORDERS',
    'WarpCollectiveOps',
    'clear_collective',
    'collective_line',
    'mark_collective',
    'mark_tc_wait',
    'publish_collective',
]

# The named reading of `--no-assume` (docs/model.md, "Readings PTX does not settle"), as
# Assumptions.used names it.
WARP_COLLECTIVE_ORDERS = "warp-collective-orders"

# A record flag: an own generic access that a warp-collective instruction (not a syncwarp) marked
# F_WARPSYNCED; the collective's line is kept in the flag bits from _LINE_SHIFT up.
F_COLLECTIVE = 8192
_LINE_SHIFT = 16
_CLEAR = ~(F_COLLECTIVE | (-1 << _LINE_SHIFT))


def collective_line(flags: int) -> int:
    """The line of the collective that ordered a record carrying F_COLLECTIVE."""
    return flags >> _LINE_SHIFT


def mark_collective(records: tuple, owner: int, lanes_bit: int, line: int) -> tuple:
    """After a warp-collective instruction by every lane of process ``owner``: its own generic
    shared- or global-memory accesses (not a wait's observation, not tensor memory) by other lanes,
    which its other-lanes holder (``lanes_bit``) knows and no syncwarp has ordered, are marked
    F_COLLECTIVE with ``line``. The mark changes no knowledge: only a later release by some lanes
    reads it (publish_collective), so the reading reaches nothing else."""
    out = None
    for i, r in enumerate(records):
        flags = r[R_FLAGS]
        if r[R_SPACE] != SPACE_DATA or r[R_OWNER] != owner or r[R_PART] == LEADER or \
                flags & (F_ASYNC | F_WARPSYNCED | F_COLLECTIVE) or \
                not r[R_KNOWN] & lanes_bit:
            continue
        if out is None:
            out = list(records)
        out[i] = (*r[:R_FLAGS], flags | F_COLLECTIVE | (line << _LINE_SHIFT), *r[R_FLAGS + 1:])
    return records if out is None else tuple(out)


def mark_tc_wait(before: tuple, after: tuple, owner: int, line: int) -> tuple:
    """After a `tcgen05.wait` by every lane of process ``owner`` (``before``: the records as the wait
    found them, ``after``: as it left them, in the same order): the tensor-memory loads / stores of
    other lanes than the leader alone that this wait completed (their in-flight tag went, R_GRP -1)
    are marked F_COLLECTIVE with ``line``; nothing else is."""
    out = None
    for i, (old, r) in enumerate(zip(before, after, strict=True)):
        flags = r[R_FLAGS]
        if r[R_SPACE] != SPACE_TMEM or r[R_OWNER] != owner or r[R_PART] == LEADER or old[R_GRP] == r[R_GRP] or \
                r[R_GRP] != -1 or flags & (F_INFLIGHT | F_WARPSYNCED | F_COLLECTIVE):
            continue
        if out is None:
            out = list(after)
        out[i] = (*r[:R_FLAGS], flags | F_COLLECTIVE | (line << _LINE_SHIFT), *r[R_FLAGS + 1:])
    return after if out is None else tuple(out)


def clear_collective(records: tuple, owners: set[int]) -> tuple:
    """After a real `syncwarp` of the processes in ``owners``: their records are ordered by PTX's
    letter (barriers._mark_warpsynced), so no later release owes its publication to the reading."""
    out = None
    for i, r in enumerate(records):
        if r[R_OWNER] in owners and r[R_FLAGS] & F_COLLECTIVE:
            if out is None:
                out = list(records)
            out[i] = (*r[:R_FLAGS], r[R_FLAGS] & _CLEAR, *r[R_FLAGS + 1:])
    return records if out is None else tuple(out)


def published_by_reading(r: tuple, proc: Any, releasing: int, target: int) -> bool:
    """Does a release by the lanes ``releasing`` of ``proc`` to holder bit ``target`` publish record
    r only by the reading: an own access a warp-collective marked, of lanes that do not all
    release, not yet known by ``target`` (publish_collective)?"""
    return bool(r[R_FLAGS] & F_COLLECTIVE) and r[R_OWNER] == proc.index and not r[R_KNOWN] & target and \
        bool(part_lanes(proc, r[R_PART]) & ~releasing)


def publish_collective(records: tuple, proc: Any, releasing: int, target: int,
                       mine: int) -> tuple[tuple, tuple | None]:
    """A release by the lanes ``releasing`` (a proper subset of ``proc``'s lanes) to holder bit
    ``target``, under the reading: every record a warp-collective marked (an own access of lanes
    that do not all release) becomes known by ``target``, as a syncwarp before the release would
    have made it. A tensor-memory record's R_AKNOWN (what went through a before-fence) goes to
    ``target`` only where the process's holders (``mine``) had it: the reading stands for a
    syncwarp, not for the fence. Returns the records and the first one published so (None: the
    reading gave nothing), for the SV609 warning."""
    out, first = None, None
    for i, r in enumerate(records):
        # (the flag first: most records are not a warp-collective's, and the test stays inline for them)
        if not r[R_FLAGS] & F_COLLECTIVE or not published_by_reading(r, proc, releasing, target):
            continue
        if out is None:
            out = list(records)
        first = first or r
        aknown = r[R_AKNOWN] | target if r[R_SPACE] != SPACE_TMEM or r[R_AKNOWN] & mine else r[R_AKNOWN]
        out[i] = (*r[:R_AKNOWN], aknown, r[R_KNOWN] | target)
    return (records if out is None else tuple(out)), first


def release_warning(r: tuple, what: str, label: str, span: Any) -> Violation:
    """SV609 at a release by some lanes that publishes the other lanes' access ``r`` only by the
    warp-collective reading (the collective named by the access's space: a wgmma commit/wait marks
    generic accesses, a tcgen05.wait tensor-memory ones)."""
    line = collective_line(r[R_FLAGS])
    tc = r[R_SPACE] == SPACE_TMEM
    access = "tcgen05 access" if tc else "access"
    collective = "tcgen05.wait" if tc else "wgmma"
    return Violation(
        "SV609", f"{what} by {label} publishes the other lanes' {access} at line {r[R_LINE]} only because the "
        f"warp-collective {collective} at line {line} is read as ordering them: PTX gives that ordering to "
        "bar.warp.sync (\"guarantee memory ordering among threads participating in barrier\") and lists none for "
        f"a `.sync.aligned` {collective} instruction; a __syncwarp() before the release makes it the letter "
        "(`--no-assume`: the race)", span,
        related=((line, "the warp-collective instruction"), (r[R_LINE], "the other lanes' access")),
        severity=Severity.WARNING, procs=(r[R_OWNER],))


def program_refusal(procs: list, programs: list, what: str) -> str | None:
    """Why bmc or the Promela export refuses a protocol (None: they do not): some process has a generic
    access by lanes other than its leader, a wgmma collective of its whole warp and a release by some of
    its lanes (anywhere in its program: a loop may bring one after another). Their encodings follow
    neither the reading nor the letter there (bmc's wgmma wait passes the warp's knowledge to its leader
    lane), so they refuse rather than answer."""
    for proc, prog in zip(procs, programs, strict=True):
        if proc.nthreads == 1:
            continue
        collective = release = access = None
        for ins in prog.code:
            op = ins.op if ins.kind == OP else None
            some = ins.leader_only or bool(ins.lanes and ins.lanes != proc.lane_mask)
            if isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "wgmma" and not some:
                collective = collective or ins
            elif isinstance(op, ir.MbarArrive) and op.sem == "release" and some:
                release = release or ins
            elif isinstance(op, ir.Access) and not ins.leader_only and (ins.lanes & proc.lane_mask) != \
                    1 << proc.leader_lane:
                access = access or ins  # a generic access of other lanes than the leader
        if collective is not None and release is not None and access is not None:
            return (f"{what} does not model a release by some lanes (line {release.line}) of a warp that runs a "
                    f"wgmma collective (line {collective.line}): the warp-collective reading (SV609, "
                    "families/warp_collective_order.py) and PTX's letter are not encoded")
    return None


class WarpCollectiveOps:
    """`wgmma.commit` / `wgmma.wait` (AsyncAgentOps) followed, under the reading, by the ordering of
    the warp's lanes' earlier own generic accesses; `tcgen05.wait` (Tcgen05Ops) by that of the
    tensor-memory accesses it completes."""

    def op_collective_commit(self, w, p, proc, op: ir.GroupCommit, ins, env, ctx, lanes) -> Any:
        return self._collective_after(AsyncAgentOps.op_commit(self, w, p, proc, op, ins, env, ctx, lanes),  # type: ignore[arg-type]
                                      w, p, proc, op, lanes)

    def op_collective_wait(self, w, p, proc, op: ir.GroupWait, ins, env, ctx, lanes) -> Any:
        return self._collective_after(AsyncAgentOps.op_group_wait(self, w, p, proc, op, ins, env, ctx, lanes),  # type: ignore[arg-type]
                                      w, p, proc, op, lanes)

    def op_collective_tc_wait(self, w, p, proc, op: ir.TcWait, ins, env, ctx, lanes) -> Any:
        before = w.records
        moved = Tcgen05Ops.op_tc_wait(self, w, p, proc, op, ins, env, ctx, lanes)  # type: ignore[arg-type]
        if moved is True and self._whole_warp_collective(p, proc, lanes):
            w.records = mark_tc_wait(before, w.records, p, op.span.line)
        return moved

    def _whole_warp_collective(self, p: int, proc, lanes: int) -> bool:
        """Under the reading, is this collective executed by every lane of a whole warp of several?"""
        return bool(self.assume.warp_collective_orders and proc.whole_warp and  # type: ignore[attr-defined]
                    proc.nthreads > 1 and lanes == self.holders.proc_mask(p))  # type: ignore[attr-defined]

    def _collective_after(self, moved: Any, w, p: int, proc, op: ir.GroupCommit | ir.GroupWait, lanes: int) -> Any:
        if moved is True and op.unit == "wgmma" and self._whole_warp_collective(p, proc, lanes):
            w.records = mark_collective(w.records, p, self.holders.lanes(p), op.span.line)  # type: ignore[attr-defined]
        return moved

    def collective_release_reads(self, records: tuple, proc, part: int, target: int) -> bool:
        """Would collective_release publish something by the reading (and warn, SV609)? Asked of a
        state without the release (MbarrierOps.mbar_arrival_findings)."""
        if not self.assume.warp_collective_orders:  # type: ignore[attr-defined]
            return False
        releasing = part_lanes(proc, part)
        return any(r[R_FLAGS] & F_COLLECTIVE and published_by_reading(r, proc, releasing, target) for r in records)

    def collective_release(self, w, p: int, proc, part: int, target: int, what: str, span: Any) -> None:
        """Before a release by the lanes of ``part`` (not the whole process) to holder bit ``target``:
        under the reading, what a warp-collective ordered is published too, and the SV609 warning says so."""
        if not self.assume.warp_collective_orders:  # type: ignore[attr-defined]
            return
        w.records, r = publish_collective(w.records, proc, part_lanes(proc, part), target,
                                          self.holders.proc_mask(p))  # type: ignore[attr-defined]
        if r is not None:
            self.assume.used.add(WARP_COLLECTIVE_ORDERS)  # type: ignore[attr-defined]
            w.warnings.append(release_warning(r, what, self.proc_label(p), span))  # type: ignore[attr-defined]


HANDLERS = {
    ir.GroupCommit: WarpCollectiveOps.op_collective_commit,
    ir.GroupWait: WarpCollectiveOps.op_collective_wait,
    ir.TcWait: WarpCollectiveOps.op_collective_tc_wait,
}
