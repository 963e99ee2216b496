"""The table of what the language accepts: each operation's qualifiers, operands and clauses
(OPERATIONS, against which every op is validated), their spellings and aliases, and the
limits on counts, sizes and threads.

A room of its own because it is data, not resolution: the grammar accepts any dotted
mnemonic and leaves the check to this table, and the mutation tester reads the same
table to know which mnemonics exist.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_COUNT = (1 << 20) - 1  # mbarrier counts and tx-counts (ptx-semantics §1.1)
MAX_THREADS = 1024
MAX_CLUSTER = 16  # non-portable maximum; 8 is portable
MAX_ARRAY = 4096


@dataclass(frozen=True, slots=True)
class OpSpec:
    """What one operation accepts. ``operands``: (min, max) count."""

    quals: frozenset[str] = frozenset()
    operands: tuple[int, int] = (0, 0)
    clauses: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()


def _spec(quals: str = "", operands: tuple[int, int] = (0, 0), clauses: str = "", required: str = "") -> OpSpec:
    return OpSpec(frozenset(quals.split()), operands, frozenset(clauses.split()), frozenset(required.split()))


_G_SCOPES = ".cta .cluster .gpu .sys"
_G_TYPES = ".global .u32 .s32 .u64 .s64 .b32 .b64"
_MB_ARRIVE = _spec(".release .relaxed .cta .cluster .expect_tx .shared::cta .shared::cluster", (1, 1),
                   "count bytes remote")
OPERATIONS: dict[str, OpSpec] = {
    "init": _spec(".shared::cta", (1, 1), "count"),
    "inval": _spec(".shared::cta", (1, 1)),
    "arrive": _MB_ARRIVE,
    "arrive_drop": _MB_ARRIVE,
    "expect_tx": _spec(".relaxed .cta .cluster", (1, 1), "bytes remote", "bytes"),
    "complete_tx": _spec(".relaxed .cta .cluster", (1, 1), "bytes remote", "bytes"),
    "wait": _spec(".parity .acquire .relaxed .cta .cluster", (1, 1), "parity", "parity"),
    "syncthreads": _spec(),
    "syncwarp": _spec(),
    "bar.sync": _spec(".aligned", (1, 2), "count"),
    "bar.arrive": _spec(".aligned", (1, 2), "count"),
    # PTX's barrier{.cta}.sync{.aligned}: without `.aligned` a distinct, unaligned operation
    "barrier.sync": _spec(".aligned", (1, 2), "count"),
    "barrier.arrive": _spec(".aligned", (1, 2), "count"),
    "cluster.arrive": _spec(".relaxed .release .aligned"),
    "cluster.wait": _spec(".acquire .aligned"),
    "cluster.sync": _spec(".aligned"),
    "read": _spec("", (1, 1), "remote part range"),
    "write": _spec("", (1, 1), "remote part range"),
    "tma.load": _spec(".cta_group::1 .cta_group::2", (1, 1), "bytes target multicast cta_group map", "target"),
    "tma.store": _spec("", (1, 1), "bytes map"),
    "bulk.commit": _spec(),
    "bulk.wait_read": _spec("", (0, 1)),
    "wgmma.read": _spec("", (1, 1)),
    "wgmma.commit": _spec(),
    "wgmma.wait": _spec("", (0, 1)),
    "fence.proxy.async": _spec(".shared::cta .shared::cluster .global"),
    "fence.proxy.async::generic.release": _spec(".sync_restrict::shared::cta .cluster"),
    "fence.proxy.async::generic.acquire": _spec(".sync_restrict::shared::cluster .cluster"),
    "fence.mbarrier_init": _spec(".release .cluster"),
    # tensor maps (resolve/tensormap.py): a generic rewrite, and the tensormap proxy fence pair (a scope is required)
    "tensormap.replace": _spec(".tile .global_address .global_dim .global_stride .element_stride .box_dim .rank "
                               ".elemtype .interleave_layout .swizzle_mode .swizzle_atomicity .fill_mode "
                               ".shared::cta .global .b1024 .b32 .b64", (1, 1)),
    "fence.proxy.tensormap::generic.release": _spec(_G_SCOPES),
    "fence.proxy.tensormap::generic.acquire": _spec(_G_SCOPES, (1, 1)),
    "tmem.alloc": _spec("", (0, 0), "cta_group cols"),
    "tmem.dealloc": _spec("", (0, 0), "cta_group cols"),
    "tmem.relinquish": _spec("", (0, 0), "cta_group"),
    "test_wait": _spec(".parity .acquire .relaxed .cta .cluster .shared::cta", (1, 1), "parity", "parity"),
    "cp.async": _spec(".ca .cg .shared .shared::cta .global", (1, 1)),
    "cp.async.commit_group": _spec(),
    "cp.async.wait_group": _spec("", (1, 1)),
    "cp.async.wait_all": _spec(),
    "cp.async.mbarrier.arrive": _spec(".noinc .shared .shared::cta .b64", (1, 1)),
    "cp.async.bulk": _spec(".shared::cta .shared::cluster .global .mbarrier::complete_tx::bytes", (1, 1),
                           "bytes target remote", "target"),
    "umma.commit": _spec("", (1, 1), "multicast cta_group"),
    # tcgen05 (sm_100a), PTX spelling; `tmem.alloc`/`umma.commit` are the older names
    "tcgen05.alloc": _spec(".sync .aligned .cta_group::1 .cta_group::2 .shared::cta .b32", (0, 0), "cta_group cols"),
    "tcgen05.dealloc": _spec(".sync .aligned .cta_group::1 .cta_group::2 .b32", (0, 0), "cta_group cols"),
    "tcgen05.relinquish_alloc_permit": _spec(".sync .aligned .cta_group::1 .cta_group::2", (0, 0), "cta_group"),
    "tcgen05.commit": _spec(".cta_group::1 .cta_group::2 .mbarrier::arrive::one .shared::cluster .multicast::cluster "
                            ".b64", (1, 1), "multicast cta_group"),
    "tcgen05.mma": _spec(".cta_group::1 .cta_group::2", (1, 5), "cta_group"),  # ACC, A, B, SFA, SFB
    "tcgen05.cp": _spec(".cta_group::1 .cta_group::2", (2, 2), "cta_group"),
    "tcgen05.shift": _spec(".cta_group::1 .cta_group::2 .down", (1, 1), "cta_group"),
    "tcgen05.ld": _spec(".sync .aligned", (1, 1), "lanes col_range"),
    "tcgen05.st": _spec(".sync .aligned", (1, 1), "lanes col_range"),
    "tcgen05.wait::ld": _spec(".sync .aligned"),
    "tcgen05.wait::st": _spec(".sync .aligned"),
    "tcgen05.fence::before_thread_sync": _spec(),
    "tcgen05.fence::after_thread_sync": _spec(),
    # global memory (resolve/globalmem.py): atomics, flag loads/stores and spins, thread fences, grid.sync
    "atom": _spec(f".add .inc .dec .exch .cas .min .max .relaxed .acquire .release .acq_rel {_G_SCOPES} {_G_TYPES}",
                  (2, 3)),
    "red": _spec(f".add .inc .dec .min .max .relaxed .release {_G_SCOPES} {_G_TYPES}", (2, 2)),
    "st": _spec(f".weak .relaxed .release .volatile {_G_SCOPES} {_G_TYPES}", (2, 2)),
    "ld": _spec(f".relaxed .acquire .volatile {_G_SCOPES} {_G_TYPES}", (1, 1)),
    "wait.until": _spec(f".relaxed .acquire .volatile {_G_SCOPES} {_G_TYPES}", (1, 1)),
    "probe": _spec(f".relaxed .acquire .volatile {_G_SCOPES} {_G_TYPES}", (1, 1)),
    "fence.acq_rel": _spec(_G_SCOPES),
    "fence.sc": _spec(_G_SCOPES),
    "grid.sync": _spec(),
    # Blackwell cluster launch control: the async 16-byte response of a cancel request, complete_tx on an mbarrier
    "clc.try_cancel": _spec(".async .shared::cta .mbarrier::complete_tx::bytes .b128", (1, 1), "target", "target"),
}
_ALIASES = {"clusterlaunchcontrol.try_cancel": "clc.try_cancel",
            "fence.proxy.tensormap.release": "fence.proxy.tensormap::generic.release",
            "fence.proxy.tensormap.acquire": "fence.proxy.tensormap::generic.acquire",
            "try_wait": "wait", "__syncthreads": "syncthreads", "__syncwarp": "syncwarp"}
_CLAUSE_WORDS = {"c_count": "count", "c_bytes": "bytes", "c_parity": "parity", "c_multicast": "multicast",
                 "c_cta_group": "cta_group", "c_cols": "cols", "c_target": "target", "c_remote": "remote",
                 "c_part": "part", "c_range": "range", "c_lanes": "lanes", "c_col_range": "col_range",
                 "c_map": "map"}
_CLAUSE_SYNTAX = {"count": "count N", "bytes": "bytes N", "parity": "parity E", "multicast": "multicast MASK",
                  "cta_group": "cta_group N", "cols": "cols N", "target": "-> BARRIER", "remote": "@ CTA",
                  "part": "part warp", "range": "bytes LO..HI", "lanes": "lanes LO..HI", "col_range": "cols LO..HI",
                  "map": "map TENSORMAP"}
# How the operations most often given the wrong operands are written.
_USAGE = {"init": "init BAR [count N]", "inval": "inval BAR", "arrive": "arrive BAR [count N] [@ CTA]",
          "arrive_drop": "arrive_drop BAR [count N] [@ CTA]", "wait": "wait BAR parity E",
          "expect_tx": "expect_tx BAR bytes N", "complete_tx": "complete_tx BAR bytes N [@ CTA]",
          "bar.sync": "bar.sync ID[, N]", "bar.arrive": "bar.arrive ID, N", "barrier.sync": "barrier.sync ID[, N]",
          "barrier.arrive": "barrier.arrive ID, N", "read": "read BUF [part warp | bytes LO..HI] [@ CTA]",
          "write": "write BUF [part warp | bytes LO..HI] [@ CTA]",
          "tma.load": "tma.load BUF [bytes N] -> BAR [multicast MASK] [map T]",
          "tensormap.replace": "tensormap.replace T",
          "fence.proxy.tensormap::generic.acquire": "fence.proxy.tensormap::generic.acquire.SCOPE T",

          "tma.store": "tma.store BUF [bytes N]", "wgmma.read": "wgmma.read BUF", "umma.commit": "umma.commit BAR",
          "tcgen05.commit": "tcgen05.commit BAR [multicast MASK] [cta_group N]",
          "tcgen05.mma": "tcgen05.mma ACC[, A[, B[, SFA[, SFB]]]] [cta_group N]", "tcgen05.cp": "tcgen05.cp ACC, SRC",
          "tcgen05.shift": "tcgen05.shift REGION [cta_group N]",
          "tcgen05.ld": "tcgen05.ld REGION [lanes LO..HI] [cols LO..HI]",
          "tcgen05.st": "tcgen05.st REGION [lanes LO..HI] [cols LO..HI]",
          "test_wait": "test_wait BAR parity E", "cp.async": "cp.async BUF",
          "cp.async.wait_group": "cp.async.wait_group N", "cp.async.mbarrier.arrive": "cp.async.mbarrier.arrive BAR",
          "cp.async.bulk": "cp.async.bulk BUF [bytes N] -> BAR [@ CTA]",
          "atom": "atom.OP[.SEM][.SCOPE] FLAG, V (atom.cas: FLAG, COMPARE, NEW)", "red": "red.OP[.SEM][.SCOPE] FLAG, V",
          "st": "st.SEM[.SCOPE] FLAG, V (or st.weak FLAG, V)", "ld": "ld.SEM[.SCOPE] FLAG",
          "wait.until": "wait.until.SEM[.SCOPE] FLAG >= V",
          "clc.try_cancel": "clc.try_cancel RESP -> BAR", "probe": "probe.SEM[.SCOPE] FLAG >= V"}
# First words of the operations: a bare name like this on the line after an op is a missing `;`.
_OP_WORDS = frozenset(op.split(".")[0] for op in [*OPERATIONS, *_ALIASES])
# Operations that PTX spells `mbarrier.NAME` (also accepted with that prefix).
_MBARRIER_OPS = {"init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "wait", "test_wait"}
# Operations that must be executed by every lane of a warp (.sync.aligned forms).
_WARP_COLLECTIVE = {"syncthreads", "syncwarp", "bar.sync", "bar.arrive", "barrier.sync", "barrier.arrive",
                    "cluster.arrive", "cluster.wait",
                    "cluster.sync", "wgmma.read", "wgmma.commit", "wgmma.wait", "tmem.alloc", "tmem.dealloc",
                    "tmem.relinquish", "tcgen05.relinquish_alloc_permit", "tcgen05.alloc", "tcgen05.dealloc",
                    "tcgen05.ld", "tcgen05.st", "tcgen05.wait::ld",
                    "tcgen05.wait::st", "grid.sync"}


def _split_mnemonic(words: list[str]) -> tuple[str | None, list[str]]:
    """Longest known mnemonic prefix of `a.b.c`; the rest are qualifiers (as `.q`)."""
    for n in range(len(words), 0, -1):
        head = ".".join(words[:n])
        head = _ALIASES.get(head, head)
        if head in OPERATIONS:
            return head, ["." + w for w in words[n:]]
    return None, []
