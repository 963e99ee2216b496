"""Inline-PTX strings of ptx-semantics.md §8 and the device prelude of every kernel.

Every synchronization instruction is an ``asm volatile`` with a "memory"
clobber, so the compiler neither drops nor moves memory accesses across it
(CUTLASS leaves the clobber off several of these; §8 codegen notes). Strings
follow CUTLASS's spelling and operand order; where a spec asks for a
non-default semantics or scope, the qualifiers are added in PTX order.
"""

from __future__ import annotations

from .. import ir

# --------------------------------------------------------------------------- mbarrier


def _semscope(sem: str, scope: str, default_sem: str) -> str:
    """PTX requires .sem and .scope together; the default (.release/.acquire, .cta) is left implicit."""
    if sem == default_sem and scope == "cta":
        return ""
    return f".{sem}.{scope}"


def arrive_asm(op: ir.MbarArrive, count_is_one: bool) -> tuple[str, str]:
    """(asm template, operand kind) for an arrive. Operands: %0 = bar (32-bit shared address),
    %1 = rank (remote only) or count/tx, following the CUTLASS wrappers' order."""
    kind = "arrive_drop" if op.drop else "arrive"
    ss = _semscope(op.sem, op.scope, "release")
    if op.remote is None:
        if op.tx_bytes is not None:  # ClusterTransactionBarrier::arrive_and_expect_tx(b): %0 = bytes, %1 = bar
            return f"mbarrier.{kind}.expect_tx{ss}.shared::cta.b64 _, [%1], %0;", "tx"
        if count_is_one:  # ClusterBarrier::arrive()
            return f"mbarrier.{kind}{ss}.shared::cta.b64 _, [%0];", "plain"
        return f"mbarrier.{kind}{ss}.shared::cta.b64 _, [%0], %1;", "count"
    # ClusterBarrier::arrive(cta_id): mapa to the peer's barrier, then the .shared::cluster form (no result)
    head = "{ .reg .b32 remAddr32; mapa.shared::cluster.u32  remAddr32, %0, %1; "
    if op.tx_bytes is not None:
        return head + f"mbarrier.{kind}.expect_tx{ss}.shared::cluster.b64  _, [remAddr32], %2; }}", "remote_tx"
    if count_is_one:
        return head + f"mbarrier.{kind}{ss}.shared::cluster.b64  _, [remAddr32]; }}", "remote"
    return head + f"mbarrier.{kind}{ss}.shared::cluster.b64  _, [remAddr32], %2; }}", "remote_count"


def tx_asm(op: ir.MbarTx) -> str:
    """expect_tx / complete_tx. Local expect: %0 = bytes, %1 = bar. Remote (and every complete_tx,
    whose CUTLASS form takes a mapa'd address): %0 = bar, %1 = rank, %2 = bytes."""
    head = "{ .reg .b32 remAddr32; mapa.shared::cluster.u32  remAddr32, %0, %1; "
    if op.kind == "expect":
        if op.remote is None:
            return "mbarrier.expect_tx.shared::cta.b64 [%1], %0;"
        return head + "mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64 [remAddr32], %2; }"
    return head + "mbarrier.complete_tx.shared::cluster.relaxed.cluster.b64   [remAddr32], %2; }"


def try_wait_asm(op: ir.MbarWait) -> str:
    """ClusterBarrier::try_wait(phase): %0 = result, %1 = bar, %2 = parity."""
    ss = _semscope(op.sem, op.scope, "acquire")
    return ("{ .reg .pred P1; mbarrier.try_wait.parity" + ss +
            ".shared::cta.b64 P1, [%1], %2; selp.b32 %0, 1, 0, P1; }")


INIT = "mbarrier.init.shared::cta.b64 [%1], %0;"
INVAL = "mbarrier.inval.shared::cta.b64 [%0];"
FENCE_MBARRIER_INIT = "fence.mbarrier_init.release.cluster;"
FENCE_PROXY_ASYNC = "fence.proxy.async.shared::cta;"

# --------------------------------------------------------------------------- CTA and cluster barriers
BAR_SYNC = "bar.sync %0, %1;"
BAR_SYNC_ALL = "bar.sync %0;"
BAR_ARRIVE = "bar.arrive %0, %1;"
# the unaligned forms (`barrier.sync` / `barrier.arrive` in a spec): legal from divergent code on sm_70+
BARRIER_SYNC = "barrier.sync %0, %1;"
BARRIER_SYNC_ALL = "barrier.sync %0;"
BARRIER_ARRIVE = "barrier.arrive %0, %1;"
CLUSTER_ARRIVE = "barrier.cluster.arrive.aligned;"
CLUSTER_ARRIVE_RELAXED = "barrier.cluster.arrive.relaxed.aligned;"
CLUSTER_WAIT = "barrier.cluster.wait.aligned;"

# --------------------------------------------------------------------------- bulk copies (TMA, 1-D)
TMA_LOAD = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
TMA_LOAD_MULTICAST = ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                      "[%0], [%1], %2, [%3], %4;")
TMA_STORE = "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
BULK_COMMIT = "cp.async.bulk.commit_group;"
BULK_WAIT_READ = "cp.async.bulk.wait_group.read %0;"

# --------------------------------------------------------------------------- non-bulk cp.async (sm_80+)
# SM80_CP_ASYNC_CACHEGLOBAL: 16 bytes per instruction, global -> shared::cta, completed by the thread's
# cp.async.wait_group or signalled by its cp.async.mbarrier.arrive (PTX "cp.async", "cp.async.mbarrier.arrive")
CP_ASYNC = "cp.async.cg.shared.global [%0], [%1], 16;"
CP_ASYNC_COMMIT = "cp.async.commit_group;"
CP_ASYNC_WAIT = "cp.async.wait_group %0;"
# CUTLASS cpasync_barrier_arrive / cpasync_barrier_arrive_noinc (include/cutlass/arch/barrier.h)
CP_ASYNC_ARRIVE = "cp.async.mbarrier.arrive.shared::cta.b64 [%0];"
CP_ASYNC_ARRIVE_NOINC = "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];"


def test_wait_asm(op: ir.MbarTestWait) -> str:
    """One `mbarrier.test_wait.parity` (never blocks): %0 = result, %1 = bar, %2 = parity."""
    ss = _semscope(op.sem, op.scope, "acquire")
    return ("{ .reg .pred P1; mbarrier.test_wait.parity" + ss +
            ".shared::cta.b64 P1, [%1], %2; selp.b32 %0, 1, 0, P1; }")


# --------------------------------------------------------------------------- wgmma
WGMMA_FENCE = "wgmma.fence.sync.aligned;"
WGMMA_COMMIT = "wgmma.commit_group.sync.aligned;"
WGMMA_WAIT = "wgmma.wait_group.sync.aligned %0;"
# D = A x B with A (64x32) and B (32x8) u8 read from shared memory through descriptors; scale-d = 0.
WGMMA_MMA = ("{ .reg .pred p; setp.ne.b32 p, %6, 0; "
             "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8 {%0, %1, %2, %3}, %4, %5, p; }")

# the group operations of each unit (ir.GroupCommit / ir.GroupWait); every wait takes its N as an immediate
GROUP_COMMIT = {"bulk": BULK_COMMIT, "wgmma": WGMMA_COMMIT, "cp_async": CP_ASYNC_COMMIT}
GROUP_WAIT = {"bulk": BULK_WAIT_READ, "wgmma": WGMMA_WAIT, "cp_async": CP_ASYNC_WAIT}


def wgmma_wide_n(slot_bytes: int) -> int:
    """N of the widest m64nNk32 u8 wgmma whose B (N rows of 32 bytes) fits in a slot: 256 for 8 KiB or more."""
    n = min(256, slot_bytes // 32)
    return n - n % 16 if n > 32 else n - n % 8


def wgmma_wide(n: int) -> str:
    """An accumulating m64nNk32 u8 wgmma on N/2 accumulator registers (%0..), descriptors %N/2 and %N/2+1.

    The slow-wgmma hold queues these before the held wgmma: on the H200 an m64n256k32 keeps the tensor cores
    busy about 128 cycles, and a warpgroup issues several ahead of them (docs/gpu-agreement.md)."""
    r = n // 2
    regs = ", ".join(f"%{i}" for i in range(r))
    return (f"{{ .reg .pred p; setp.ne.b32 p, %{r + 2}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.u8.u8 {{{regs}}}, %{r}, %{r + 1}, p; }}")


# Status words per process (host-visible) and control words (device memory); mirrored in the runner.
STATUS_WORDS = 32  # words 0..15: progress (overwritten as the warp moves on); 16..31: where it got stuck
STUCK_BASE = 16
ST_STATE, ST_LINE, ST_SITE, ST_OBJ, ST_PARITY, ST_OCC, ST_IT0, ST_IT1, ST_IT2, ST_NITER = range(10)
STATE_RUNNING, STATE_DONE, STATE_TIMEOUT, STATE_BARRIER, STATE_ABORTED, STATE_REPLAY_STUCK = 1, 2, 3, 4, 5, 6
CTL_WORDS = 256
CTL_ABORT, CTL_BAD_WORDS, CTL_BAD_EVENTS, CTL_UNCHECKED, CTL_TURN, CTL_WGMMA_BAD, CTL_GOOD_EVENTS = range(7)
CTL_RECORDS, RECORD_WORDS, MAX_RECORDS = 16, 10, 8
REC_CTA, REC_PROC, REC_SITE, REC_OCC, REC_SLOT, REC_EXPECTED, REC_SEEN, REC_WORD, REC_KIND = range(9)

PRELUDE = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
#define SV_DEVICE static __device__ __forceinline__

SV_DEVICE u32 sv_ctarank() { u32 r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
SV_DEVICE u32 sv_clusterid() { u32 r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r; }
SV_DEVICE u64 sv_now() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
SV_DEVICE u32 sv_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// Generic address of the same shared-memory location in CTA `rank` of the cluster (DSMEM).
SV_DEVICE void* sv_mapa(void* p, u32 rank) {
  u64 r; asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"((u64)p), "r"(rank)); return (void*)r;
}

// `elect { }`: elect.sync with a full mask, as cute::elect_one_sync() issues it. Every lane of the
// warp executes it (the model refuses `elect` in a warp split between roles); the model fixes the
// elected lane as lane 0 (docs/model.md, "Who executes").
SV_DEVICE bool sv_elect_sync() {
  u32 is;
  asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(is));
  return is != 0u;
}

// Per-thread context: who executes, where it reports.
struct SvCtx {
  u32 tid, cta, cluster, cta_global, proc, pidx, pn, seg_mask;
  bool pfirst;
  volatile u32* status;   // this process's status words (host-visible)
  u32* ctl;               // control and counters (device memory)
  u64 watchdog_ns;
};

SV_DEVICE bool sv_aborted(const SvCtx& c) { return *(volatile u32*)&c.ctl[SV_CTL_ABORT] != 0; }

// Progress states (running, at a barrier, done) go to words 0..15; the first stuck record
// (watchdog timeout, released by the abort, replay stuck) goes to words 16..31 and is kept,
// so that a kernel that drained still says where it was stuck.
// Progress records (running, at a barrier) are plain volatile stores, with no fence: they are written
// right before a bar.sync, and a fence there waits for the warp's shared-memory stores to land, which
// would hide a missing fence.proxy.async (SV601) on the H200. The host reads them only after a deadline
// of seconds, by which time they have long landed.
SV_DEVICE void sv_status(const SvCtx& c, u32 state, u32 line, u32 site, u32 obj, u32 parity, u32 occ,
                         int it0, int it1, int it2, u32 niter) {
  const bool stuck = state == SV_STATE_TIMEOUT || state == SV_STATE_ABORTED || state == SV_STATE_REPLAY_STUCK;
  const bool fence = state != SV_STATE_RUNNING && state != SV_STATE_BARRIER;
  volatile u32* s = c.status + (stuck ? SV_STUCK_BASE : 0u);
  if (stuck && s[SV_ST_STATE] != 0u) return;
  s[SV_ST_LINE] = line; s[SV_ST_SITE] = site; s[SV_ST_OBJ] = obj;
  s[SV_ST_PARITY] = parity; s[SV_ST_OCC] = occ;
  s[SV_ST_IT0] = (u32)it0; s[SV_ST_IT1] = (u32)it1; s[SV_ST_IT2] = (u32)it2;
  s[SV_ST_NITER] = niter;
  if (fence) __threadfence_system();
  s[SV_ST_STATE] = state;
  if (fence) __threadfence_system();
}

SV_DEVICE void sv_record(const SvCtx& c, u32 kind, u32 proc, u32 site, u32 occ, u32 slot, u32 expected, u32 seen,
                         u32 word) {
  u32 n = atomicAdd(&c.ctl[SV_CTL_BAD_EVENTS], 1u);
  if (n < SV_MAX_RECORDS) {
    u32* r = c.ctl + SV_CTL_RECORDS + n * SV_RECORD_WORDS;
    r[SV_REC_CTA] = c.cta_global; r[SV_REC_PROC] = proc; r[SV_REC_SITE] = site; r[SV_REC_OCC] = occ;
    r[SV_REC_SLOT] = slot; r[SV_REC_EXPECTED] = expected; r[SV_REC_SEEN] = seen; r[SV_REC_WORD] = word;
    r[SV_REC_KIND] = kind;
  }
}

// Compare this thread's part of a slot with the stamp the model says it must observe.
SV_DEVICE void sv_check(const SvCtx& c, const void* slot, u32 words, u32 expected, u32 site, u32 occ, u32 slot_id,
                        u32 part, u32 nparts, u32 stride) {
  const uint4* v = (const uint4*)slot;
  u32 bad = 0, first_seen = 0, first_word = 0;
  for (u32 ch = part; ch < words / 4; ch += nparts * stride) {
    uint4 x = v[ch];
    u32 w[4] = {x.x, x.y, x.z, x.w};
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (w[i] != expected) { if (!bad) { first_seen = w[i]; first_word = ch * 4 + i; } ++bad; }
    }
  }
  if (bad) {
    atomicAdd(&c.ctl[SV_CTL_BAD_WORDS], bad);
    sv_record(c, 0, c.proc, site, occ, slot_id, expected, first_seen, first_word);
  }
}

SV_DEVICE void sv_stamp(void* slot, u32 words, u32 value, u32 part, u32 nparts) {
  uint4* v = (uint4*)slot;
  uint4 x = make_uint4(value, value, value, value);
  for (u32 ch = part; ch < words / 4; ch += nparts) v[ch] = x;
}

// The value every element of D = A x B takes when the 2 KiB read are the stamp repeated:
// each row of A and column of B is the stamp's 4 bytes 8 times, so D = 8 * sum(byte^2).
SV_DEVICE u32 sv_wgmma_value(u32 stamp) {
  u32 s = 0;
  for (int i = 0; i < 4; ++i) { u32 b = (stamp >> (8 * i)) & 0xFFu; s += b * b; }
  return 8u * s;
}

SV_DEVICE u64 sv_wgmma_desc(u32 addr) {
  // no swizzle; leading-dimension offset 128 bytes, stride offset 256 bytes: 2 KiB from addr
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)(128u >> 4) << 16) | ((u64)(256u >> 4) << 32);
}
"""


def prelude() -> str:
    """The prelude with the status and control-word layout defined (one source of truth: this module)."""
    text = PRELUDE
    consts = {
        "SV_CTL_ABORT": CTL_ABORT, "SV_CTL_BAD_WORDS": CTL_BAD_WORDS, "SV_CTL_BAD_EVENTS": CTL_BAD_EVENTS,
        "SV_MAX_RECORDS": MAX_RECORDS, "SV_CTL_RECORDS": CTL_RECORDS, "SV_RECORD_WORDS": RECORD_WORDS,
        "SV_REC_CTA": REC_CTA, "SV_REC_PROC": REC_PROC, "SV_REC_SITE": REC_SITE, "SV_REC_OCC": REC_OCC,
        "SV_REC_SLOT": REC_SLOT, "SV_REC_EXPECTED": REC_EXPECTED, "SV_REC_SEEN": REC_SEEN,
        "SV_REC_WORD": REC_WORD, "SV_REC_KIND": REC_KIND,
        "SV_ST_STATE": ST_STATE, "SV_ST_LINE": ST_LINE, "SV_ST_SITE": ST_SITE, "SV_ST_OBJ": ST_OBJ,
        "SV_ST_PARITY": ST_PARITY, "SV_ST_OCC": ST_OCC, "SV_ST_IT0": ST_IT0, "SV_ST_IT1": ST_IT1,
        "SV_ST_IT2": ST_IT2, "SV_ST_NITER": ST_NITER, "SV_CTL_TURN": CTL_TURN, "SV_CTL_UNCHECKED": CTL_UNCHECKED,
        "SV_CTL_WGMMA_BAD": CTL_WGMMA_BAD, "SV_CTL_GOOD_EVENTS": CTL_GOOD_EVENTS,
        "SV_STATE_RUNNING": STATE_RUNNING, "SV_STATE_DONE": STATE_DONE, "SV_STATE_TIMEOUT": STATE_TIMEOUT,
        "SV_STATE_BARRIER": STATE_BARRIER, "SV_STATE_ABORTED": STATE_ABORTED,
        "SV_STATE_REPLAY_STUCK": STATE_REPLAY_STUCK, "SV_STATUS_WORDS": STATUS_WORDS,
        "SV_STUCK_BASE": STUCK_BASE,
    }
    defines = "".join(f"#define {k} {v}\n" for k, v in consts.items())
    return defines + text
