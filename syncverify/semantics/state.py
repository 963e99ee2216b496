"""Layout of the global state and of the happens-before knowledge it carries.

A state is a tuple of tuples (hashable, canonical):

    (procs, mbars, named, cluster, agents, records, tmem)

* procs[p]  = (pc, vars, token, cl_token, bulk_seq, wgmma_seq, cp_async_seq)
* mbars[m]  = (valid, k, pend, exp, tx, observed, jprevs, rdata) — rules.Mbar plus
  whether the last completed phase was observed by a successful wait (the
  consumption rule, SV502), each waiter's last observed phase (SV501), and
  whether a cross-CTA thread release carried data into the current/last phase (SV602)
* named[c*16+id] = rules.NamedBar; cluster = rules.ClusterBar
* agents: in-flight asynchronous operations (sorted)
* records: access records for race detection (sorted), see below
* tmem[pair*2+dealloc] = (arrived CTA bitmask, generation): the cta_group 2 rendezvous;
  after them, tmem[2*pairs + cta] = (tensor-memory columns allocated in that CTA, 0)

Happens-before is tracked with *knowledge*: every live access record carries
the set of holders that are ordered after it, as a bitmask. A holder is a
thread group (per process: its leader lane L and its other lanes W) or a
synchronization object's release accumulator (per mbarrier: the current and
the last completed phase; per named barrier id: the open generation; the
cluster barrier: current and last). A release copies the releaser's
knowledge into the object's holder; an acquire copies it back out. This is
vector-clock happens-before restricted to the accesses still live, which
keeps the state finite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

# record fields
R_SPACE, R_CTA, R_OBJ, R_SLOT, R_KIND, R_OWNER, R_PART, R_LINE, R_FLAGS, R_EPOCH, R_GRP, R_REGION, R_AKNOWN, R_KNOWN = \
    range(14)
# The two knowledge sets are the last fields: the updates below rebuild a record by unpacking its
# other twelve fields into a new tuple, about twice as fast as slicing them out (`(*r[:12], a, k)`)
# on the updates that run on every synchronizing step.
# spaces: data slots, mbarrier init records, CTA start records
SPACE_DATA, SPACE_INIT, SPACE_START, SPACE_OBS = 0, 1, 2, 3  # OBS: a wait's observation of a phase
# TMEM: a tensor-memory region (cta, region, slot); there R_AKNOWN is the knowledge that went through
# a tcgen05.fence::before_thread_sync, and a process's tc_fenced bit in R_KNOWN marks what its
# tcgen05.fence::after_thread_sync ordered (semantics/families/tcgen05.py)
SPACE_TMEM = 4
# the CTA field of tensor-map records (semantics/families/tensormap.py): one map for the grid; a
# `fence.proxy.async` does not admit them (only the tensormap proxy fences do)
TMAP_CTA = -3
READ, WRITE = 0, 1
# Not an access: the shadow of a generic write made in another CTA (the same key, owner, part, epoch
# and region), whose R_KNOWN holds who knows that write when the `.cta`-scope cross-CTA
# release/acquire edges PTX does not pair are counted too (R_LINE: that remote arrive's line). It
# orders nothing; it names the race of an access that only such an edge would order as SV602
# (families/scopes.py, docs/model.md "Scopes across CTAs"). A write that covers the write drops it.
SHADOW = 2
LEADER, FULL = 0, 1
LANES = 2  # part LANES + m: an access by the lanes in mask m, not all of the process (program.lane_part)
# flags
F_ASYNC = 1  # performed by the async proxy (TMA, bulk store, wgmma)
F_INFLIGHT = 2  # async write not yet complete
F_REPEAT = 4  # read of an epoch its reader had already read (for RAW/WAR naming)
F_SUPERSEDED = 8  # an older write kept only to name races by intent; never checked for conflicts
F_TC = 16  # an asynchronous tcgen05.mma/cp access, complete when a tcgen05.commit tracking it arrives
F_TCCP = 32  # (with F_TC) a tcgen05.cp's write
F_RETIRED = 64  # a wgmma read some warp of its warpgroup saw complete (its group tag may stay: Machine._wgmma_wait)
F_WARPSYNCED = 128  # an own generic access of some/all lanes that a later syncwarp of its warp ordered before every
#                     lane: each lane then holds the whole access, not only its own part (program.own_part_hidden)
F_LANEWISE = 256  # a per-thread copy (cp.async, or a bulk copy's read) of some/all lanes that their own group wait
#                   retired: each lane knows only its own, as of an own generic access (program.own_part_hidden)
F_LANESYNCED = 512  # an own generic access that a later syncwarp or bar.sync of its warp ordered before every lane:
#                     another lane of the warp may then meet it (program.lanes_meet_unordered)
F_GENERIC = 1024  # (with F_ASYNC) an asynchronous write performed in the generic proxy: a non-bulk cp.async
#                   ("treated as a weak memory operation performed in the generic proxy", PTX cp.async). Ordered
#                   like the other async accesses, but data for the proxy rule (SV601) and the scope rule (SV602)
F_TCSHIFT = 4096  # (with F_TC) a tcgen05.shift's access of its region (it reads and writes the rows it shifts)
F_MBAR = 2048  # the inval of an mbarrier whose bytes lie in the slot (families/storage.py): a write of those bytes
#                that a later data access must be ordered after (SV408); not data for SV601/SV602

# process fields
P_PC, P_VARS, P_TOKEN, P_CLTOKEN, P_BULK, P_WGMMA, P_CPASYNC = range(7)
# Async groups (bulk, wgmma, cp.async): a record's group tag is R_GRP = NUNITS * group + unit, and
# process field GROUP_FIELDS[unit] counts the groups it has committed of that unit.
UNIT_BULK, UNIT_WGMMA, UNIT_CPASYNC = range(3)
NUNITS = 3
GROUP_FIELDS = (P_BULK, P_WGMMA, P_CPASYNC)
UNIT_OF = {"bulk": UNIT_BULK, "wgmma": UNIT_WGMMA, "cp_async": UNIT_CPASYNC}
# mbarrier fields
M_VALID, M_K, M_PEND, M_EXP, M_TX, M_OBSERVED, M_JPREV, M_RDATA = range(8)
# M_RDATA: bit 0 / bit 1: a cross-CTA release carried generic data into the current / last phase
# (the .cta-scope acquire warning); from bit RD_CUR_LINE / RD_LAST_LINE, 20 bits each: the line of
# a .cta-scope remote arrive that carried such data into that phase, 0 for none (an acquiring wait
# withholds that data, and an access that needs it is SV602: ScopeOps._check_cta_scope_data)
RD_CUR_LINE, RD_LAST_LINE = 2, 22
_RD_LINE = 0xFFFFF


def retired_lane_by_lane(unit: int, part: int) -> bool:
    """Is an async access of this group unit, issued by these lanes, retired lane by lane? A
    cp.async or bulk copy issued by several lanes is one copy per thread, and each thread's group
    wait retires its own (PTX: "committed by the executing thread"): its lanes then know it as their
    own generic accesses (F_LANEWISE, program.own_part_hidden), and only a syncwarp lets one lane
    publish it. A wgmma is one operation of the warpgroup, retired for all its threads at once."""
    return part != LEADER and unit != UNIT_WGMMA


def generic_proxy_write(flags: int) -> bool:
    """Is a write record's data in the generic proxy: a plain write, or a cp.async copy (F_GENERIC)?
    An async-proxy read of it (wgmma, bulk store, tcgen05 operand, a TMA load over it) needs a
    fence.proxy.async on the path from it (SV601), and a release across CTAs carries it (SV602)."""
    return (not flags & F_ASYNC or bool(flags & F_GENERIC)) and not flags & F_MBAR


def hidden_like_own_access(flags: int) -> bool:
    """Can a release by some lanes fail to publish this record of its own process
    (program.own_part_hidden's ``is_async`` is False)? Generic accesses, and async ones retired lane
    by lane; every other async record the holders learnt whole."""
    return (flags & (F_ASYNC | F_LANEWISE)) != F_ASYNC


def in_program_order_when_own(flags: int, kind: int) -> bool:
    """MemoryOps._ordered: an own access of the same part is ordered by program order when generic,
    or when a cp.async write its lanes' own waits retired (each lane wrote its own part). Not a bulk
    copy's read: each lane's copy reads the whole slot."""
    return not flags & F_ASYNC or bool(flags & F_LANEWISE and kind == WRITE)


def rdata_shift(rd: int) -> int:
    """The rdata of a barrier whose current phase just completed: current becomes last."""
    return ((rd & 1) << 1) | (((rd >> RD_CUR_LINE) & _RD_LINE) << RD_LAST_LINE)


def rdata_cta_line(rd: int, current: bool) -> int:
    """The line of the .cta-scope data-carrying remote arrive of the current (or last) phase, or 0."""
    return (rd >> (RD_CUR_LINE if current else RD_LAST_LINE)) & _RD_LINE


# agent kinds
AG_TMA, AG_UMMA, AG_CPARRIVE = 0, 1, 2
TC_TAGS = 8  # tcgen05.commits of one thread that may be in flight at once (more: a step past the model's bounds)
COPY_SLOTS = 8  # distinct observation snapshots of one thread's bulk copies in flight (families/copy_causality.py)
TC_BITS = 2 + TC_TAGS + COPY_SLOTS  # knowledge bits per process after tc_base (Holders)


class State(NamedTuple):
    procs: tuple
    mbars: tuple
    named: tuple
    cluster: tuple
    agents: tuple
    records: tuple
    tmem: tuple


class Holders:
    """Bit positions of every knowledge holder of one machine."""

    def __init__(self, nprocs: int, nmbars: int, nctas: int):
        self.nprocs = nprocs
        self.mb_base = 2 * nprocs
        self.nb_base = self.mb_base + 2 * nmbars
        self.cl_cur = self.nb_base + 16 * nctas
        self.cl_last = self.cl_cur + 1
        # per process, TC_BITS bits: what its tcgen05.fence::after_thread_sync ordered (for its leader
        # lane, for its other lanes), what it had
        # observed when it issued each tcgen05.commit still in flight (one bit per commit tag), and
        # when it issued the bulk copies still in flight (one bit per snapshot slot)
        self.tc_base = self.cl_last + 1

    @staticmethod
    def leader(p: int) -> int:
        return 1 << (2 * p)

    @staticmethod
    def lanes(p: int) -> int:
        return 1 << (2 * p + 1)

    def mb_cur(self, m: int) -> int:
        return 1 << (self.mb_base + 2 * m)

    def mb_last(self, m: int) -> int:
        return 1 << (self.mb_base + 2 * m + 1)

    def nb(self, cta: int, bar_id: int) -> int:
        return 1 << (self.nb_base + 16 * cta + bar_id)

    def proc_mask(self, p: int) -> int:
        return 3 << (2 * p)

    def tc_fenced(self, p: int, lanes: int) -> int:
        """The after-fence bits of the holders in ``lanes`` (process p's leader and/or other lanes):
        fences are per thread, so a fence by the elected lane alone orders nothing for the others."""
        base = self.tc_base + TC_BITS * p
        return (1 << base if lanes & self.leader(p) else 0) | (2 << base if lanes & self.lanes(p) else 0)

    def tc_snap(self, p: int, tag: int) -> int:
        return 1 << (self.tc_base + TC_BITS * p + 2 + tag)

    def copy_snap(self, p: int, slot: int) -> int:
        return 1 << (self.tc_base + TC_BITS * p + 2 + TC_TAGS + slot)

    def proc_block(self, p: int) -> tuple[int, int]:
        """The first bit and the width of process p's block above tc_base (symmetry moves it whole)."""
        return self.tc_base + TC_BITS * p, TC_BITS


def release(records: tuple, source_mask: int, target_bit: int, relaxed: bool = False) -> tuple:
    """What the holders in ``source_mask`` know becomes known by ``target_bit`` (both
    bitmasks). A ``relaxed`` release (a relaxed cluster arrive) carries only the
    async-visible part of init and CTA-start records.

    These knowledge updates run on every synchronizing step, so they copy the record
    tuple only when some record changes, and touch only the changed positions."""
    out = None
    if relaxed:
        for i, r in enumerate(records):
            aknown = r[R_AKNOWN]
            if r[R_SPACE] == SPACE_DATA or not aknown & source_mask:
                continue
            known = r[R_KNOWN]
            nk, na = known | target_bit, aknown | target_bit
            if nk != known or na != aknown:
                if out is None:
                    out = list(records)
                f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, _, _ = r
                out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, na, nk)
        return records if out is None else tuple(out)
    return _transfer(records, source_mask, target_bit)


def release_partial(records: tuple, source_mask: int, narrow_mask: int, target_bit: int,
                    hidden: Callable[[tuple], bool]) -> tuple:
    """release() by some lanes of a process (a lane guard): a record for which ``hidden`` holds
    is published only from the holders in ``narrow_mask`` (the leader lane's, when it takes
    part), every other one from all of ``source_mask``. The other-lanes holder knows the
    process's own accesses only as each lane knows its own part, so lanes that did not make an
    access cannot publish it (program.own_part_hidden)."""
    out = None
    for i, r in enumerate(records):
        src = narrow_mask if hidden(r) else source_mask
        known, aknown = r[R_KNOWN], r[R_AKNOWN]
        nk = known | target_bit if known & src else known
        na = aknown | target_bit if aknown & src else aknown
        if nk != known or na != aknown:
            if out is None:
                out = list(records)
            f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, _, _ = r
            out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, na, nk)
    return records if out is None else tuple(out)


def carry_obs(records: tuple, source_mask: int, target_mask: int) -> tuple:
    """Causality without memory ordering: observation records known by ``source_mask`` become
    known by ``target_mask``. Used for the steps that order execution but publish no data
    (relaxed arrives and waits, tx updates): what happens after a wait in program order is
    causally after it whatever the memory semantics."""
    out = None
    for i, r in enumerate(records):
        if r[R_SPACE] == SPACE_OBS and r[R_KNOWN] & source_mask and (r[R_KNOWN] & target_mask) != target_mask:
            if out is None:
                out = list(records)
            f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, aknown, known = r
            out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, aknown | target_mask, known | target_mask)
    return records if out is None else tuple(out)


def acquire(records: tuple, source_bit: int, target_mask: int) -> tuple:
    """What ``source_bit`` knows becomes known by the holders in ``target_mask``."""
    return _transfer(records, source_bit, target_mask)


# Knowledge updates remembered by the identity of the records tuple they were given (issue #36).
# Why: an update loops over every record (~190 on the 2x1 ping-pong GEMM) in Python, and the search
# asks the same update of the same records again and again: a process's release or acquire is
# computed in a state to decide that the step is set aside, and again in the states after the step
# taken alone instead, which left the records alone. The explicit search's store hands on one
# object per records value among the states it holds (engines/store.py), so equal records are the
# same object there. Exact: an entry keeps the tuple it was asked of alive, so while it is kept no
# other object has that id(), and an update is a function of the records' value. Bounded: the
# table is emptied when full (what it holds changes the work, never an answer), full at
# _KNOWLEDGE_MEMO_SIZE entries or when the records tuples it was asked of hold
# _KNOWLEDGE_MEMO_RECORDS records together, whichever comes first. Why both: on the 1x1 ping-pong
# GEMM with K symbolic (61 records an update on average), 2,048 entries hit 463,837 of 671,897 updates
# and 256 entries 425,072, so the entries stay; but where a state holds ~450 records (the CuTe-DSL
# 2-CTA blockscaled GEMM, the 2x1 cooperative GEMM with a stage reused) an entry held ~13 KB, the
# 2,048 entries 20 MB, and they hit as many updates as 128 entries did (2,441 of 20,425 and 734 of
# 9,996 with 2,048; 2,412 and 728 with 128). With the records bound of 2,048 updates of 64 records,
# the 1x1 K-symbolic ping-pong hits 464,009 updates, the 2x1 88,829 instead of 90,086 of 308,954,
# the CuTe-DSL GEMM 2,437.
_KNOWLEDGE_MEMO_SIZE = 2048
_KNOWLEDGE_MEMO_RECORDS = 2048 * 64
_knowledge_memo: dict[tuple, tuple[tuple, tuple]] = {}
_knowledge_held = 0  # the records of the tuples the table was asked of


def _remembered(kind: int, records: tuple, a: int, b: int) -> tuple | None:
    hit = _knowledge_memo.get((kind, id(records), a, b))
    return hit[1] if hit is not None and hit[0] is records else None


def _remember(kind: int, records: tuple, a: int, b: int, out: tuple) -> tuple:
    global _knowledge_held
    if len(_knowledge_memo) >= _KNOWLEDGE_MEMO_SIZE or _knowledge_held >= _KNOWLEDGE_MEMO_RECORDS:
        _knowledge_memo.clear()
        _knowledge_held = 0
    _knowledge_memo[(kind, id(records), a, b)] = (records, out)
    _knowledge_held += len(records)
    return out


def _transfer(records: tuple, source: int, target: int) -> tuple:
    """Release and acquire alike: every record known (or async-known) by a holder in ``source``
    becomes known (async-known) by the holders in ``target`` (remembered: _knowledge_memo)."""
    out = _remembered(0, records, source, target)
    return out if out is not None else _remember(0, records, source, target, _transfer_all(records, source, target))


def _transfer_all(records: tuple, source: int, target: int) -> tuple:
    """_transfer, computed. Copies the record tuple only when some record changes, and touches only
    the changed positions."""
    out = None
    for i, r in enumerate(records):
        known, aknown = r[R_KNOWN], r[R_AKNOWN]
        if known & source:
            nk = known | target
            na = aknown | target if aknown & source else aknown
        elif aknown & source:
            nk, na = known, aknown | target
        else:
            continue
        if nk != known or na != aknown:
            if out is None:
                out = list(records)
            f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, _, _ = r
            out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, na, nk)
    return records if out is None else tuple(out)


def shift_phase(records: tuple, cur_bit: int, last_bit: int) -> tuple:
    """Phase completion: the current phase's knowledge becomes the last phase's; the current is emptied.

    Per knowledge set: both bits are cleared, and the last one is set exactly when the current
    one was. Remembered as _transfer is."""
    out = _remembered(1, records, cur_bit, last_bit)
    return out if out is not None else _remember(1, records, cur_bit, last_bit,
                                                 _shift_phase_all(records, cur_bit, last_bit))


def _shift_phase_all(records: tuple, cur_bit: int, last_bit: int) -> tuple:
    out = None
    both = cur_bit | last_bit
    keep = ~both
    for i, r in enumerate(records):
        known, aknown = r[R_KNOWN], r[R_AKNOWN]
        if (known | aknown) & both:
            nk = (known & keep) | last_bit if known & cur_bit else known & keep
            na = (aknown & keep) | last_bit if aknown & cur_bit else aknown & keep
            if nk != known or na != aknown:
                if out is None:
                    out = list(records)
                f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, _, _ = r
                out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, na, nk)
    return records if out is None else tuple(out)


def clear_bits(records: tuple, mask: int) -> tuple:
    """Every record forgets the holders in ``mask``. Remembered as _transfer is."""
    out = _remembered(2, records, mask, 0)
    return out if out is not None else _remember(2, records, mask, 0, _clear_bits_all(records, mask))


def sorted_records(records: tuple) -> tuple:
    """The records in a State's order (sorted), remembered as _transfer is: a step whose knowledge
    updates were found remembered hands the same records object on to be sorted."""
    out = _remembered(3, records, 0, 0)
    return out if out is not None else _remember(3, records, 0, 0, tuple(sorted(records)))


def _clear_bits_all(records: tuple, mask: int) -> tuple:
    out = None
    for i, r in enumerate(records):
        if (r[R_KNOWN] | r[R_AKNOWN]) & mask:
            if out is None:
                out = list(records)
            f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, aknown, known = r
            out[i] = (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, aknown & ~mask, known & ~mask)
    return records if out is None else tuple(out)
