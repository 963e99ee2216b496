"""tcgen05 (Blackwell, sm_100a): the tensor-core operations beyond allocation, in one place.

PTX ISA §9.7.16.6 ("Memory Consistency Model for 5th generation of TensorCore operations";
docs/model.md, "tcgen05") is what this module encodes:

* `tcgen05.mma` / `tcgen05.cp` are asynchronous: they read their shared-memory operand slots (through
  the async proxy) and write a tensor-memory region until a `tcgen05.commit` that tracks them
  arrives. Until then their records are in flight and known by nobody.
* `tcgen05.commit` tracks every prior asynchronous tcgen05 operation of the committing thread
  (§9.7.16.6.2.2) and arrives once on its barrier(s) when they are complete. The arrival publishes
  those operations (the commit implies `tcgen05.fence::before_thread_sync`, §9.7.16.6.4.2) and
  carries what the thread had observed when it committed (execution order: the arrival comes after
  the commit in program order), but no other data: PTX does not say the arrive-on releases the
  thread's generic writes, so none is assumed.
* Some pairs of one thread are pipelined (§9.7.16.6.2): issued in that order, they execute in that
  order, with no wait between them — mma → mma on one accumulator, cp → mma, and an mma's operand
  reads → a later mma or cp writing that region (_PIPELINED). Nothing else: not cp → cp, not an
  mma's accumulator write → cp.
* `tcgen05.ld` / `tcgen05.st` are asynchronous until the thread's `tcgen05.wait::ld` / `wait::st`.
* Across threads, a thread synchronization orders tcgen05 accesses only with the fence pair
  (§9.7.16.6.3): `tcgen05.fence::before_thread_sync` after the first access and before the
  synchronization, `tcgen05.fence::after_thread_sync` after it and before the second access. An
  access ordered by the synchronization alone is SV603, or the SV608 warning under the reading that
  release/acquire synchronization orders tcgen05 operations too (tcgen05_sync).

The bookkeeping rides on the machine's knowledge records (state.py). Tensor-memory records live in
SPACE_TMEM; there R_AKNOWN holds the knowledge that went through a before-fence (a release carries
it on, a relaxed one too: the fences compose with any execution-ordering operation), and a
process's ``tc_fenced`` bits (its leader lane, its other lanes) in R_KNOWN mark the records its
after-fence ordered. Records of an
operation not yet committed carry R_GRP = TC_UNCOMMITTED; a commit re-tags them with its tag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import ir
from ...diagnostics import Severity
from ...z3_lazy import z3
from .. import rules
from ..core import ModelBound, Violation
from ..state import (
    AG_UMMA,
    F_ASYNC,
    F_INFLIGHT,
    F_TC,
    F_TCCP,
    F_TCSHIFT,
    LEADER,
    R_AKNOWN,
    R_CTA,
    R_EPOCH,
    R_FLAGS,
    R_GRP,
    R_KIND,
    R_KNOWN,
    R_LINE,
    R_OWNER,
    R_PART,
    R_REGION,
    R_SPACE,
    READ,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    SPACE_START,
    SPACE_TMEM,
    TC_TAGS,
    WRITE,
    clear_bits,
    release,
)
from .encoding import COMMIT, DATA, INIT, OBS, START, Z3A
from .encoding.effects import Effect, Work
from .encoding.events import Copy, Record, Unsupported, static_value
from .tcgen05_carry import COMMIT_RELEASE, commit_release_carries
from .tcgen05_pipeline import _BEFORE, _PIPELINED, _tc_kind
from .tcgen05_sync import missing_fence

if TYPE_CHECKING:
    from .encoding.events import Event
    from .encoding.layout import Encoding
from . import tmem_ranges
from .regions import WHOLE

# R_GRP of tcgen05 records: an mma/cp no commit tracks yet, an ld / st before its wait, and (below
# TC_COMMITTED) an mma/cp tracked by the commit with tag TC_COMMITTED - R_GRP.
TC_UNCOMMITTED, TC_LD, TC_ST, TC_COMMITTED = -2, -3, -4, -8


def _committed_tag(grp: int) -> int:
    """The commit tag of a tracked mma/cp record, -1 for any other record."""
    return TC_COMMITTED - grp if grp <= TC_COMMITTED else -1


class Tcgen05Ops:
    """The tcgen05 handlers of Machine (a mixin: Machine and the other families supply the barrier,
    slot and record helpers)."""

    # ------------------------------------------------------------------ names
    def tmem_label(self, cta: int, region: int, slot: int) -> str:
        r = self.protocol.tmem_regions[region]
        idx = f"[{slot}]" if r.slots is not None else ""
        return f"tmem {r.name}{idx}" + (f"@cta{cta}" if self.ncta > 1 else "")

    def _tc_region(self, ref: ir.Ref, env, ctx) -> tuple[int, int]:
        """(region index, slot) of a tensor-memory reference; SV104 when the index is out of range."""
        regions = self.protocol.tmem_regions
        region = next(i for i, r in enumerate(regions) if r.name == ref.name)
        slot = 0
        if ref.index is not None:
            slot = self._eval(ref.index, env, ctx)
            if not 0 <= slot < (regions[region].slots or 1):
                raise Violation("SV104", f"index {slot} is out of range for `{ref.name}[{regions[region].slots}]`",
                                ref.span)
        return region, slot

    def _pair_ctas(self, proc, group: int, span, what: str) -> list[int]:
        """The CTAs a cta_group operation acts on: its own, and with cta_group 2 the pair's peer
        (rank ^ 1); the pair's leader (the even CTA) issues for both."""
        if group == 1:
            return [proc.cta]
        if proc.cta & 1 or proc.cta ^ 1 >= self.ncta:
            why = f"CTA {proc.cta} is the odd CTA of its pair" if proc.cta & 1 else \
                "the peer CTA (rank ^ 1) is not in the cluster"
            raise Violation("SV405", f"{what} with cta_group 2 is issued by the pair's leader, the even CTA, for both "
                            f"CTAs: {why}", span)
        return [proc.cta, proc.cta ^ 1]

    # ------------------------------------------------------------------ ordering
    def _tc_conflicts(self, w, p: int, lanes: int, key: tuple, kind: int, span, what: str,
                      issuer: str = "", part: int = -1, region: int = WHOLE) -> None:
        """Check a tensor-memory access against the live records of its region.

        Ordered: a record the access's thread has seen complete and ordered for tcgen05 (its
        after-fence, or its own wait::ld/st, marked it with the thread's tc_fenced bit), or an ld/st of
        the same lanes (``part``) of the same process after their wait (each lane's own part); with
        ``issuer`` ("mma" or "cp") also an in-flight mma/cp of the same thread that it is pipelined
        after (_PIPELINED), or one another thread handed over through the fence pair (§9.7.16.6.4.3).
        Known through a thread synchronization alone: SV603. Otherwise a race."""
        fenced = self.holders.tc_fenced(p, lanes)
        behind = self._pipelined(w, p, fenced, key, _PIPELINED.get((issuer, kind), frozenset()))
        reported = False  # one SV603 per access (the first record it is ordered after by thread sync only)
        for r in w.records:
            if r[:4] != key or (r[R_KIND] == READ and kind == READ) or r in behind or \
                    not tmem_ranges.overlap(r[R_REGION], region, self.protocol.tmem_regions[key[2]].cols):
                continue  # (another access's rectangle of the region, apart from this one: tmem_ranges.py)
            if r[R_OWNER] == p and r[R_PART] == part and r[R_GRP] == -1 and not r[R_FLAGS] & (F_TC | F_INFLIGHT):
                continue  # the same lanes' own ld/st after their wait: each lane after its own part
            known = r[R_KNOWN]
            if r[R_FLAGS] & F_INFLIGHT or (known & lanes) != lanes:
                self._tc_race(p, key, kind, r, span, what)
            if (known & fenced) == fenced:
                continue
            other = f"{self._tc_access_name(r)} at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])}"
            if (r[R_AKNOWN] & lanes) != lanes:
                missing = (f"{self.proc_label(r[R_OWNER])} ran no tcgen05.fence::before_thread_sync between that "
                           "access and the synchronization")
            else:
                missing = (f"{self.proc_label(p)} ran no tcgen05.fence::after_thread_sync between the "
                           "synchronization and this access")
            # A missing fence leaves the state as well defined as the fence would: the search goes on as if
            # it were there and reports what comes after it too (docs/engines.md, "Findings that end a path").
            if reported:
                continue
            reported = True
            self._tc_unfenced(w, f"{what} of {self.tmem_label(*key[1:])} by {self.proc_label(p)} is ordered "
                              f"after the {other} only by thread synchronization: {missing}", span, r, other)

    @staticmethod
    def _pipelined(w, p: int, fenced: int, key: tuple, after: frozenset[str]) -> set[tuple]:
        """The mma/cp records of the region that a new mma or cp is pipelined behind: those of a
        kind in ``after`` (of its own thread, or handed over through the fence pair), and, since a
        pipeline executes in issue order, every earlier one pipelined before one of those (cp ->
        mma read -> cp: the second cp follows the first)."""
        if not after:
            return set()
        own = [r for r in w.records if r[:4] == key and r[R_FLAGS] & F_TC and (
            r[R_OWNER] == p or (r[R_KNOWN] & fenced) == fenced)]
        behind = {r for r in own if _tc_kind(r) in after}
        grew = True
        while grew:
            grew = False
            for r in own:
                if r not in behind and any(b[R_EPOCH] > r[R_EPOCH] and _tc_kind(r) in _BEFORE[_tc_kind(b)]
                                           for b in behind):
                    behind.add(r)
                    grew = True
        return behind

    @staticmethod
    def _tc_access_name(r: tuple) -> str:
        if r[R_FLAGS] & F_TC:
            return {"mma-read": "tcgen05.mma operand read", "mma-write": "tcgen05.mma write",
                    "cp-write": "tcgen05.cp write", "shift-write": "tcgen05.shift"}[_tc_kind(r)]
        return "tcgen05.st" if r[R_KIND] == WRITE else "tcgen05.ld"

    def _tc_race(self, p: int, key: tuple, kind: int, r: tuple, span, what: str) -> None:
        if kind == WRITE and r[R_KIND] == WRITE:
            code, name = "SV303", "WAW"
        elif kind == WRITE:
            code, name = "SV302", "WAR"
        else:
            code, name = "SV301", "RAW"
        other = f"{self._tc_access_name(r)} at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])}"
        inflight = " (still in flight)" if r[R_FLAGS] & F_INFLIGHT or r[R_GRP] in (TC_LD, TC_UNCOMMITTED) or \
            _committed_tag(r[R_GRP]) >= 0 else ""
        raise Violation(code, f"{name} race on {self.tmem_label(*key[1:])}: {what} by {self.proc_label(p)} is not "
                        f"ordered with the {other}{inflight}; no tcgen05.commit completion, tcgen05.wait or "
                        "synchronization orders them", span, related=((r[R_LINE], f"the other access ({other})"),),
                        procs=(r[R_OWNER],))

    def _tc_add(self, w, p: int, part: int, key: tuple, kind: int, line: int, flags: int, grp: int,
                region: int = WHOLE) -> None:
        """A tensor-memory access record, known by nobody until it completes. A write, checked to be
        ordered after every live access of its region (or pipelined after it), replaces them; a read
        replaces the thread's own earlier reads of the region."""
        ncols = self.protocol.tmem_regions[key[2]].cols  # (a write replaces what its rectangle covers)
        if kind == WRITE:
            keep = [r for r in w.records if r[:4] != key or not tmem_ranges.covers(region, r[R_REGION], ncols)]
        else:
            keep = [r for r in w.records if not (r[:4] == key and r[R_KIND] == READ and r[R_OWNER] == p
                                                 and tmem_ranges.covers(region, r[R_REGION], ncols))]
        # R_EPOCH: the issue order of the region's live records (_pipelined reads it)
        epoch = 1 + max((r[R_EPOCH] for r in keep if r[:4] == key), default=0)
        keep.append((*key, kind, p, part, line, flags, epoch, grp, region, 0, 0))
        w.records = tuple(keep)

    # ------------------------------------------------------------------ operations
    def op_tc_mma(self, w, p, proc, op: ir.TcMma, ins, env, ctx, lanes) -> bool:
        """tcgen05.mma / tcgen05.cp (§9.7.16.6.2): asynchronous reads of the operands and write of
        the accumulator region, in flight until a commit tracking them arrives."""
        part = self._part(p, ins)
        what = f"tcgen05.{op.kind}"
        for cta in self._pair_ctas(proc, op.cta_group, op.span, what):
            for src in op.operands:
                if src.kind == "buffer":
                    buf, slot = self._slot(src, env, ctx)
                    key = (SPACE_DATA, cta, buf, slot)
                    self._conflicts(w, p, part, lanes, key, READ, op.span, f"{what} operand read", async_op=True)
                    self._add_read(w, p, part, lanes, key, op.span.line, F_ASYNC | F_TC, grp=TC_UNCOMMITTED)
                else:
                    key = (SPACE_TMEM, cta, *self._tc_region(src, env, ctx))
                    self._tc_conflicts(w, p, lanes, key, READ, op.span, f"{what} operand read", op.kind)
                    self._tc_add(w, p, part, key, READ, op.span.line, F_TC, TC_UNCOMMITTED)
            key = (SPACE_TMEM, cta, *self._tc_region(op.acc, env, ctx))
            self._tc_conflicts(w, p, lanes, key, WRITE, op.span, f"{what} write", op.kind)
            kind_flag = F_TCCP if op.kind == "cp" else F_TCSHIFT if op.kind == "shift" else 0
            self._tc_add(w, p, part, key, WRITE, op.span.line, F_TC | F_INFLIGHT | kind_flag, TC_UNCOMMITTED)
        return True

    def op_tmem_access(self, w, p, proc, op: ir.TmemAccess, ins, env, ctx, lanes) -> bool:
        """tcgen05.ld / tcgen05.st (§9.7.16.6.2.3): asynchronous until the thread's wait::ld / wait::st."""
        key = (SPACE_TMEM, proc.cta, *self._tc_region(op.region, env, ctx))
        kind = READ if op.kind == "ld" else WRITE
        part = self._part(p, ins)
        region = tmem_ranges.access_region(self, op, self.protocol.tmem_regions[key[2]].cols, env, ctx)
        self._tc_conflicts(w, p, lanes, key, kind, op.span, f"tcgen05.{op.kind}", part=part, region=region)
        if kind == READ:
            self._tc_add(w, p, part, key, READ, op.span.line, 0, TC_LD, region)
        else:
            self._tc_add(w, p, part, key, WRITE, op.span.line, F_INFLIGHT, TC_ST, region)
        return True

    def op_tc_wait(self, w, p, proc, op: ir.TcWait, ins, env, ctx, lanes) -> bool:
        """tcgen05.wait::ld / ::st: the executing lanes' ld / st are complete, and ordered before
        the thread's later tcgen05 accesses without a fence (§9.7.16.6.4.2)."""
        grp = TC_LD if op.kind == "ld" else TC_ST
        waiter = self._part(p, ins)
        leader = self.holders.leader(p)
        out = []
        for r in w.records:
            if r[R_OWNER] == p and r[R_GRP] == grp and r[R_SPACE] == SPACE_TMEM and \
                    not (waiter == LEADER and r[R_PART] != LEADER):
                # Each thread's wait completes the accesses that thread issued ("issued by the
                # executing thread", PTX §9.7.16.8.5): an access of several lanes becomes known
                # lane by lane -- by the other-lanes holder, as a whole-warp generic access is
                # (program.own_part_hidden) -- so the leader lane alone cannot publish it until a
                # syncwarp orders every lane's part before it.
                learn = lanes & (leader if r[R_PART] == LEADER else self.holders.lanes(p))
                learn |= self.holders.tc_fenced(p, learn)
                r = (*r[:R_FLAGS], r[R_FLAGS] & ~F_INFLIGHT, r[R_FLAGS + 1], -1, r[R_REGION], r[R_AKNOWN],
                     r[R_KNOWN] | learn)
            out.append(r)
        w.records = tuple(out)
        return True

    def op_tc_fence(self, w, p, proc, op: ir.TcFence, ins, env, ctx, lanes) -> bool:
        """tcgen05.fence::before_thread_sync / ::after_thread_sync (§9.7.16.6.3)."""
        if op.kind == "before":
            self._tc_fence_before(w, p, self._part(p, ins))
        else:
            fenced = self.holders.tc_fenced(p, lanes)
            out = None
            for i, r in enumerate(w.records):
                if r[R_SPACE] == SPACE_TMEM and (r[R_AKNOWN] & lanes) == lanes and (r[R_KNOWN] & fenced) != fenced:
                    if out is None:
                        out = list(w.records)
                    out[i] = (*r[:R_KNOWN], r[R_KNOWN] | fenced)
            if out is not None:
                w.records = tuple(out)
        return True

    def _tc_fence_before(self, w, p: int, part: int) -> None:
        """The thread's own tensor-memory accesses it has seen complete (and its in-flight mma/cp,
        which later ones pipeline after) go through the fence: a synchronization now carries them
        on for tcgen05 ordering."""
        mask = self.holders.proc_mask(p)
        out = None
        for i, r in enumerate(w.records):
            if r[R_SPACE] == SPACE_TMEM and r[R_OWNER] == p and (part != LEADER or r[R_PART] == LEADER):
                gain = (r[R_KNOWN] & mask) or (mask if r[R_FLAGS] & F_TC else 0)
                if gain and (r[R_AKNOWN] | gain) != r[R_AKNOWN]:
                    if out is None:
                        out = list(w.records)
                    out[i] = (*r[:R_AKNOWN], r[R_AKNOWN] | gain, r[R_KNOWN])
        if out is not None:
            w.records = tuple(out)

    def op_umma_commit(self, w, p, proc, op: ir.UmmaCommit, ins, env, ctx, lanes) -> bool:
        """tcgen05.commit (§9.7.16.6.2.2): the barrier(s) track every prior asynchronous tcgen05
        operation of the executing lanes; an async arrive(1) at cluster scope on each target once
        they are complete. Successive commits of one thread get increasing tags (in flight at once:
        at most TC_TAGS; more ends the search inconclusive)."""
        dests = self.multicast_dests(proc, op.multicast, env, ctx, op.span)
        tags = [a[5] for a in w.agents if a[0] == AG_UMMA and a[6] == p]
        tag = max(tags) + 1 if tags else 0
        if tag >= TC_TAGS:
            raise ModelBound(f"{self.proc_label(p)} has more than {TC_TAGS} tcgen05.commits in flight at line "
                                 f"{op.span.line}")
        ms = []
        for cta in dests:
            m = self._mbar(w, p, op.bar, cta, env, ctx)
            self._check_barrier_usable(w, p, m, lanes, op.span, "tcgen05.commit")
            ms.append(m)
        part = self._part(p, ins)
        tracked = TC_COMMITTED - tag
        w.records = tuple((*r[:R_GRP], tracked, *r[R_GRP + 1:])
                          if r[R_GRP] == TC_UNCOMMITTED and r[R_OWNER] == p and (part != LEADER or r[R_PART] == LEADER)
                          else r for r in w.records)
        self._tc_fence_before(w, p, part)  # implied by the commit (§9.7.16.6.4.2)
        operands = {r[:4] for r in w.records if r[R_OWNER] == p and r[R_SPACE] == SPACE_DATA and
                    0 <= _committed_tag(r[R_GRP]) <= tag}
        w.records, assumed = self._tc_snapshot(w.records, p, lanes, self.holders.tc_snap(p, tag), operands,
                                               self.assume.commit_release)
        if assumed:
            self.assume.used.add(COMMIT_RELEASE)
        for m in ms:
            for _ in range(ins.threads):  # each executing thread commits (and arrives) once
                w.agents.append((AG_UMMA, self.mb_names[m][0], 0, 0, m, tag, p, op.span.line, 0))
        return True

    @staticmethod
    def _tc_snapshot(records: tuple, p: int, lanes: int, snap: int, operands: set[tuple],
                     release_all: bool = False) -> tuple[tuple, bool]:
        """What the commit's arrival will carry (``snap`` marks it): the observations the committing
        lanes know (the arrival is causally after them), the completed asynchronous writes they
        know (complete before the commit was issued, so before its arrival), the writes they know
        of the shared-memory slots the tracked operations read (those operations read what the
        writes left, and complete before the arrival), their tensor-memory knowledge, and the
        thread's earlier mma/cp already completed (a commit tracks every prior one). Not the other
        generic writes they know: PTX does not say the arrive-on releases them -- unless
        ``release_all`` (the COMMIT_RELEASE reading, on by default): then every data record they know.
        Also returns whether the reading carried a record PTX alone would not."""
        out = None
        assumed = False
        for i, r in enumerate(records):
            known, aknown, space = r[R_KNOWN], r[R_AKNOWN], r[R_SPACE]
            if (known & lanes) != lanes:
                carried = False
            else:
                carried, only = commit_release_carries(
                    release_all, space, r[R_KIND] == WRITE and not r[R_FLAGS] & F_INFLIGHT,
                    bool(r[R_FLAGS] & F_ASYNC), r[:4] in operands)
                if only and (known & snap) != snap:
                    assumed = True
            if carried:
                nk, na = known | snap, aknown | snap if (aknown & lanes) == lanes else aknown
            elif r[R_OWNER] == p and r[R_FLAGS] & F_TC and r[R_GRP] == -1:
                nk, na = known | snap, aknown | snap
            else:
                continue
            if out is None:
                out = list(records)
            out[i] = (*r[:R_AKNOWN], na, nk)
        return (records if out is None else tuple(out)), assumed

    def _complete_umma(self, w, a: tuple) -> None:
        """A commit's arrival: the operations it tracks (and those of the thread's earlier commits
        still in flight: it tracks every prior one) are complete and published on its barrier,
        with what the thread had observed when it committed, then arrive(1)
        (AsyncAgentOps._agent_arrive)."""
        m, tag, p, line = a[4], a[5], a[6], a[7]
        live = {b[5] for b in w.agents if b[0] == AG_UMMA and b[6] == p}  # (this one is removed already)

        def publish() -> None:
            cur = self.holders.mb_cur(m)
            latest = max(live, default=-1)
            out = []
            for r in w.records:
                t = _committed_tag(r[R_GRP]) if r[R_OWNER] == p else -1
                if 0 <= t <= tag:
                    # complete; it keeps its tag while a commit that also tracks it is in flight
                    r = (*r[:R_FLAGS], r[R_FLAGS] & ~F_INFLIGHT, r[R_FLAGS + 1], r[R_GRP] if latest >= t else -1,
                         r[R_REGION], r[R_AKNOWN] | cur, r[R_KNOWN] | cur)
                out.append(r)
            w.records = release(tuple(out), self.holders.tc_snap(p, tag), cur)

        self._agent_arrive(w, m, self._agent_span(line),
                           ("tcgen05.commit", "tcgen05.commit arrive", "tcgen05.commit arrival"), publish)
        if tag not in live:
            w.records = clear_bits(w.records, self.holders.tc_snap(p, tag))
            self._tc_renumber(w, p, sorted(live))

    def _tc_renumber(self, w, p: int, live: list[int]) -> None:
        """Number the thread's commits in flight 0, 1, … again (keeping their order), so that the
        tags of a steady pipeline do not grow: a state then recurs. A record's tag t becomes that
        of the first commit in flight whose tag is ≥ t (what the comparisons at arrival read)."""
        if live == list(range(len(live))):
            return
        new = {t: i for i, t in enumerate(live)}

        def retag(t: int) -> int:
            return next(new[x] for x in live if x >= t)

        w.agents = [(*a[:5], new[a[5]], *a[6:]) if a[0] == AG_UMMA and a[6] == p else a for a in w.agents]
        moves = [(self.holders.tc_snap(p, t), self.holders.tc_snap(p, new[t])) for t in live if new[t] != t]
        out = []
        for r in w.records:
            t = _committed_tag(r[R_GRP]) if r[R_OWNER] == p else -1
            if t >= 0:
                r = (*r[:R_GRP], TC_COMMITTED - retag(t), *r[R_GRP + 1:])
            known, aknown = r[R_KNOWN], r[R_AKNOWN]
            if moves and (known | aknown) & sum(old for old, _ in moves):
                for old, nbit in moves:  # ascending: a bit moves down onto one already vacated
                    if known & old:
                        known = (known & ~old) | nbit
                    if aknown & old:
                        aknown = (aknown & ~old) | nbit
                r = (*r[:R_AKNOWN], aknown, known)
            out.append(r)
        w.records = tuple(out)

    def tc_dealloc_check(self, w, p: int, lanes: int, cta: int, span) -> None:
        """`tmem.dealloc` frees columns every region of the CTA may sit in: each access of them must
        be complete and ordered before it — through the accessing thread's before-fence (or a
        commit) and a synchronization. The dealloc is a synchronous tcgen05 instruction (PTX
        §9.7.16.6.1), ordered in program order after the synchronization: no after-fence is needed
        (the sequence of ptx-semantics.md §7: users finish, before-fence + barrier, dealloc)."""
        whole = self.holders.proc_mask(p)
        reported = False  # one SV603 per dealloc
        for r in w.records:
            if r[R_SPACE] != SPACE_TMEM or r[R_CTA] != cta:
                continue
            if r[R_OWNER] == p and (lanes & whole) == whole and r[R_GRP] == -1 and \
                    not r[R_FLAGS] & (F_TC | F_INFLIGHT) and r[R_KNOWN] & whole:
                continue  # the whole warp's own ld/st after its wait: every lane after its own part
            if r[R_FLAGS] & F_INFLIGHT or (r[R_KNOWN] & lanes) != lanes:
                self._tc_race(p, r[:4], WRITE, r, span, "tmem.dealloc")
            if (r[R_AKNOWN] & lanes) != lanes and r[R_OWNER] != p and not reported:
                reported = True
                other = f"{self._tc_access_name(r)} at line {r[R_LINE]} by {self.proc_label(r[R_OWNER])}"
                self._tc_unfenced(w, f"tmem.dealloc by {self.proc_label(p)} is ordered after the {other} only "
                                  f"by thread synchronization: {self.proc_label(r[R_OWNER])} ran no "
                                  "tcgen05.fence::before_thread_sync between that access and the synchronization",
                                  span, r, other)

    def _tc_unfenced(self, w, message: str, span, r: tuple, other: str) -> None:
        """SV603, or the SV608 warning under the sync-orders-tcgen05 reading (tcgen05_sync)."""
        v = missing_fence(self.assume.sync_orders_tcgen05, self.assume.used, message, span,
                          ((r[R_LINE], f"the other access ({other})"),), (r[R_OWNER],))
        (w.warnings if v.severity is Severity.WARNING else w.soft).append(v)

    def _tc_exit(self, w, cta: int) -> None:
        """SV404: a CTA exits while a tcgen05 operation it issued, or one writing its tensor memory,
        was never committed or never waited for."""
        for r in w.records:
            if r[R_GRP] in (TC_UNCOMMITTED, TC_LD, TC_ST) and (
                    r[R_CTA] == cta or self.procs[r[R_OWNER]].cta == cta):
                what = "an uncommitted tcgen05.mma/cp" if r[R_GRP] == TC_UNCOMMITTED else \
                    f"a tcgen05.{'ld' if r[R_GRP] == TC_LD else 'st'} never waited for (tcgen05.wait)"
                raise Violation("SV404", f"CTA {cta} exits while {what} (issued at line {r[R_LINE]}) is still in "
                                "flight", self.protocol.span, related=((r[R_LINE], "the asynchronous operation"),))


def op_tmem_relinquish(machine: Any, w, p, proc, op: ir.TmemRelinquish, ins, env, ctx, lanes) -> bool:
    """`tmem.relinquish`: the CTA's columns entry (AsyncAgentOps._tmem_columns) keeps the mark in its second
    field, which the allocation checks (SV604). No synchronization effect (PTX §9.7.16.7.1)."""
    idx = machine._tmem_columns_index(proc.cta)
    w.tmem[idx] = (w.tmem[idx][0], 1)
    return True


HANDLERS: dict[type, Callable] = {
    ir.TmemRelinquish: op_tmem_relinquish,
    ir.UmmaCommit: Tcgen05Ops.op_umma_commit,
    ir.TcMma: Tcgen05Ops.op_tc_mma,
    ir.TmemAccess: Tcgen05Ops.op_tmem_access,
    ir.TcWait: Tcgen05Ops.op_tc_wait,
    ir.TcFence: Tcgen05Ops.op_tc_fence,
}


# the machine's record space of each record space of the bmc encoding (a commit's flag has none)
_MACHINE_SPACE = {DATA: SPACE_DATA, INIT: SPACE_INIT, OBS: SPACE_OBS, START: SPACE_START}


class Tcgen05Encoding:
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step).

    Encoded: `tcgen05.commit` in a protocol with no other tcgen05 operation (no mma/cp, ld/st,
    wait or fence: the commit then tracks nothing), by one thread, on the CTA's own barrier.
    There the machine's commit (op_umma_commit) checks its barrier and marks what its arrival
    will carry (_tc_snapshot); the arrival (_complete_umma) is an actor of its own, delivered in
    issue order among the thread's commits when the machine assumes so, and does an arrive(1)
    that releases that snapshot. The snapshot is a knowledge holder of its own per commit
    (Encoding.snap_holder), so no tag numbering is needed. Encoding._event refuses the rest."""

    def carried_mask(self) -> int:
        """The records a commit's arrival may carry (commit_carries, with no tracked operand: a
        commit here tracks no operation). A landed copy's write is known by nobody before it
        lands, so "known by the committing lanes" already means "completed"."""
        enc = self.enc
        assume = enc.machine.assume.commit_release
        mask = 0
        for r, rec in enumerate(enc.records):
            if rec.space not in _MACHINE_SPACE:
                continue
            carried, only = commit_release_carries(assume, _MACHINE_SPACE[rec.space], rec.kind == 1, rec.is_async,
                                                   False)
            if carried:
                mask |= 1 << r
            if only:
                enc.machine.assume.used.add(COMMIT_RELEASE)
        return mask

    def ev_umma_commit(self, w: Work, e: Event, hard: list, soft: list, dynamic: list) -> tuple[Any, bool]:
        """Machine.op_umma_commit: the barrier is usable (SV401/SV402); what the lanes know of
        the carried records (and know on the async side too) is kept for the arrival; the
        arrival is in flight."""
        enc = self.enc
        c = e.copies[0]
        hard += self.use_barrier(w, e, c.m)
        mask = z3.BitVecVal(self.carried_mask(), enc.R)
        known, aknown = mask, mask
        for h in e.lanes:
            known, aknown = known & w["K", h], aknown & w["A", h]
        snap = enc.snap_holder(c)
        w["K", snap] = known
        w["A", snap] = known & aknown
        w["inflight"] = w["inflight"] | enc.bit(c.record)
        return z3.BoolVal(True), False

    def commit_arrival(self, c: Copy) -> Effect:
        """Machine._complete_umma: on a valid barrier (SV401), the consumption rule (SV502 at a completion), an
        arrival with one pending (SV504); the snapshot is released into the current phase, then
        arrive(1). With in-order delivery (Machine._agent_enabled) it waits for the thread's
        earlier commits' arrivals."""
        enc = self.enc
        w = Work(self.S)
        m = c.m
        guard = z3.And(self.sel == c.actor, self.has(self.S["inflight"], c.record))
        earlier = enc.earlier_commits(c)
        enabled = z3.And(*[z3.Not(self.has(self.S["inflight"], x.record)) for x in earlier]) if earlier \
            else z3.BoolVal(True)
        w["inflight"] = w["inflight"] & ~enc.bit(c.record)
        hard: list[tuple[str, Any]] = [("SV401", w["valid", m] != 1)]
        soft: list[tuple[str, Any]] = []
        s = self.mbar(w, m)
        hard.append(("SV504", rules.arrive_overflows(s, 1)))
        self.release(w, (enc.snap_holder(c),), enc.cur(m))
        new = rules.mb_arrive(s, 1, Z3A)
        hard += self.set_mb(w, m, new, z3.BoolVal(True), soft=soft)
        adds = enc.adds_to(None)
        dynamic = [(("m", m), z3.Or(new.pend <= 0, *[cond for _, cond in hard + soft]))] if adds else []
        objects = {("m", m): "a" if adds else "w", ("proc", c.actor): "w", ("commits", c.event.proc): "w"}
        return Effect(guard, enabled, hard, soft, w.upd, objects, dynamic=dynamic)


EVENTS: dict[type, Callable] = {
    ir.UmmaCommit: Tcgen05Encoding.ev_umma_commit,
}


# ------------------------------------------------------------------ bmc: the unrolled events
def setup_commit(enc: Encoding, e: Event, env: dict, ctx: Any) -> None:
    """Machine.op_umma_commit where it tracks nothing: one arrival (an actor, its in-flight flag a
    record) on the CTA's own barrier. Anything the encoding cannot follow exactly is refused:
    other tcgen05 operations (what a commit tracks and publishes), several threads committing at
    once, a multicast commit."""
    op = e.op
    others = [type(o).__name__ for o in ir.ops_of(enc.machine.protocol.body)
              if ir.tensor_core_async(o) and not isinstance(o, ir.UmmaCommit)]
    if others:
        raise Unsupported(f"`tcgen05.commit` in a protocol with other tcgen05 operations ({others[0]}: what a "
                          f"commit tracks and publishes is not encoded), line {e.line}")
    if e.threads != 1 or op.multicast is not None:
        raise Unsupported(f"`tcgen05.commit` by {e.threads} threads or with a multicast mask (only one "
                          f"thread's commit on its own CTA's barrier is encoded), line {e.line}")
    e.m, e.error = static_value(enc.machine._mbar, None, e.proc, op.bar, e.own, env, ctx)
    if e.error is None:
        r = enc._new_record(Record(COMMIT, (e.m,), 1, e.proc, e.part, event=e))
        e.copies.append(Copy(e, e.own, e.m, (), r, commit=True))
        e.m = -1  # (the barrier is the arrival's: the issue only checks it, as a copy's issue does)


SETUP: dict[type, Callable] = {ir.UmmaCommit: setup_commit}
# operations the bmc encoding refuses, and why
REFUSED: dict[type, str] = {
    ir.TcMma: "`tcgen05.mma`/`tcgen05.cp`/`tcgen05.shift` (asynchronous tensor-core operations completed by a "
              "commit: not encoded)",
    ir.TmemAccess: "`tcgen05.ld`/`tcgen05.st` (tensor-memory accesses: not encoded)",
    ir.TcWait: "`tcgen05.wait` (tensor-memory accesses: not encoded)",
    ir.TcFence: "`tcgen05.fence` (tensor-memory ordering: not encoded)",
    ir.TmemRelinquish: "`tmem.relinquish` (the right to allocate tensor memory: not encoded)",
}
