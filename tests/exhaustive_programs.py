"""Bounded-exhaustive protocols: every program up to a small size, for cross-checking the engines.

Random generators (tests/strategies.py) draw from patterns and never produced a loop whose body,
for some warp, is one barrier — the shape of a false deadlock that lived through thousands of
random protocols. Here every combination of the operation alphabet up to a size bound is
generated, so a shape that small cannot be missed.

The alphabet is the one table ``ALPHABET``: a new primitive is added there and every scope picks
it up. A *statement* is an atom, optionally in a wrapper of the scope (``elect``, ``per warp`` or
``first thread`` for atoms that are not warp-collective; ``if C > 0`` on a `choose` value for any),
optionally inside a loop of the scope's trips (1, 2, or ``C``); a loop may also hold two atoms in
sequence. Body roles are one warp each, two warps each (where ``elect`` and ``first thread`` differ)
or the two halves of one warp (``syncwarp`` met by parts of a warp, from their own sites). A program
gives each body warp a sequence of at most 3 statements, with the number of atoms per warp set
by the scope's ``splits`` (``SCOPES``); a warp with an empty or shorter sequence is the early
exit. The engines decide what each atom means (``elect`` included): the generator only writes
text.

Protocols that use the mbarrier get a setup warp of their own that initializes it (in ``elect``;
in a cluster with ``fence.mbarrier_init``) before a CTA-wide (or cluster-wide) barrier that
every warp passes, then exits; protocols that do not use it have no prologue at all. Either way
the body warps are interchangeable — same role shape, no warp singled out — so a program is
generated once per multiset of warp sequences (``programs``), and in the 2-CTA scope once per
multiset of CTA sequences (the CTA rank appears only as ``cta ^ 1`` and a multicast to both,
which are symmetric). That is the only canonicalization: it relies on nothing the engines
compute. A program that declares ``choose C`` is checked once per value of C, pinned
(``assignments``), so that every engine answers for the same concrete protocol.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

CHOOSE = "choose C in 0..3;"  # a value the kernel reads: 0, 1 or 2, every one checked
PAIR = "smem pair[2] bytes 64;"
FLAG = "flag f bound 8;"  # a counter in global memory (semantics/families/globalmem.py)
GLOBAL = "global gbuf bytes 64;"  # a global buffer, one for the grid
FLAG_G = "flag g bound 8;"  # a second flag: store buffering and message passing through two flags
PARTS = "global parts[2] bytes 64;"  # each CTA's partial, read by the last CTA
SHARED_WORD = "flag h[2] bound 8;"  # a per-CTA word that carries a ticket to the CTA (the __shared__ flag)
TMEM = "tmem acc cols 32;"
REGS = "regs ra;"  # registers an RS-form wgmma reads (semantics/families/async_operands.py)
TMAP = "tensormap tm;"  # a tensor map a copy reads and a thread rewrites (semantics/families/tensormap.py)


@dataclass(frozen=True)
class Atom:
    """One operation of the alphabet, as a warp writes it (``{k}``: the enclosing loop's variable)."""

    name: str
    text: str
    collective: bool = False  # warp-collective: never inside elect / per warp (SV116)
    mbarrier: bool = False  # uses the mbarrier (the protocol gets the setup prologue)
    cluster_only: bool = False  # needs a cluster of 2 (remote operations, cluster-wide rendezvous)
    in_loop: bool = False  # uses the loop variable: only inside a loop
    decl: tuple[str, ...] = ()  # declarations the atom needs (added to the protocol when a statement uses it)
    opt_in: bool = False  # only in scopes that name it (the scopes enumerating every atom stay as they were)


# The operation alphabet, in one place (`{{`, `}}`: a brace of the text; `{k}`, `{bar}` are filled in):
# every barrier kind, the mbarrier operations with their
# parities, copies, accesses, fences, tensor-core operations.
ALPHABET: tuple[Atom, ...] = (
    Atom("syncthreads", "syncthreads;", collective=True),
    Atom("bar.sync", "bar.sync 1, {bar};", collective=True),  # {bar}: the threads of two body warps (or one)
    Atom("bar.arrive", "bar.arrive 1, {bar};", collective=True),
    Atom("syncwarp", "syncwarp;", collective=True),
    Atom("cluster.sync", "cluster.sync;", collective=True),
    Atom("cluster.arrive", "cluster.arrive;", collective=True),
    Atom("cluster.arrive.relaxed", "cluster.arrive.relaxed;", collective=True),
    Atom("cluster.wait", "cluster.wait;", collective=True),
    Atom("arrive", "arrive mb;", mbarrier=True),
    Atom("arrive.expect_tx", "arrive.expect_tx mb bytes 64;", mbarrier=True),
    Atom("expect_tx", "expect_tx mb bytes 64;", mbarrier=True),
    Atom("complete_tx", "complete_tx mb bytes 64;", mbarrier=True),
    Atom("arrive_drop", "arrive_drop mb;", mbarrier=True),
    Atom("inval", "inval mb;", mbarrier=True),
    Atom("init", "init mb;", mbarrier=True),
    Atom("wait0", "wait mb parity 0;", mbarrier=True),
    Atom("wait1", "wait mb parity 1;", mbarrier=True),
    Atom("wait_k", "wait mb parity {k} % 2;", mbarrier=True, in_loop=True),
    Atom("wait_k1", "wait mb parity ({k} + 1) % 2;", mbarrier=True, in_loop=True),
    Atom("tma.load", "tma.load buf -> mb;", mbarrier=True),
    Atom("umma.commit", "umma.commit mb;", mbarrier=True),
    Atom("read", "read buf;"),
    Atom("write", "write buf;"),
    Atom("fence.proxy.async", "fence.proxy.async;"),
    Atom("tma.store", "tma.store buf;"),
    Atom("bulk.commit", "bulk.commit;"),
    Atom("bulk.wait_read", "bulk.wait_read 0;"),
    Atom("wgmma.read", "wgmma.read buf;", collective=True),
    Atom("wgmma.commit", "wgmma.commit;", collective=True),
    Atom("wgmma.wait", "wgmma.wait 0;", collective=True),
    Atom("arrive.remote", "arrive.release.cluster mb @ cta ^ 1;", mbarrier=True, cluster_only=True),
    Atom("read.remote", "read buf @ cta ^ 1;", cluster_only=True),
    Atom("write.remote", "write buf @ cta ^ 1;", cluster_only=True),
    Atom("tma.load.multicast", "tma.load buf -> mb multicast 3;", mbarrier=True, cluster_only=True),
    Atom("wait.cluster", "wait.acquire.cluster mb parity 0;", mbarrier=True, cluster_only=True),
    Atom("tmem.alloc2", "tmem.alloc cta_group 2;", collective=True, cluster_only=True),
    # PTX's unaligned barrier forms, reached from each warp's own branch (a divergent site)
    Atom("barrier.sync", "barrier.sync 1, {bar};", collective=True),
    Atom("barrier.arrive", "barrier.arrive 1, {bar};", collective=True),
    Atom("tmem.alloc", "tmem.alloc;", collective=True),
    Atom("tmem.dealloc", "tmem.dealloc;", collective=True),
    Atom("tmem.relinquish", "tmem.relinquish;", collective=True),
    # the conditional operator in a parity and in an index, on a `choose` value or the loop variable
    Atom("wait_c", "wait mb parity C > 0 ? 1 : 0;", mbarrier=True, decl=(CHOOSE,)),
    Atom("wait_kc", "wait mb parity {k} == 0 ? 1 : 0;", mbarrier=True, in_loop=True),
    Atom("write_kc", "write pair[{k} > 0 ? 1 : 0];", in_loop=True, decl=(PAIR,)),
    Atom("read_c", "read pair[C > 1 ? 1 : 0];", decl=(CHOOSE, PAIR)),
    # sub-slot regions: a warp's own part of the slot, and two halves by byte range
    Atom("write.part", "write buf part warp;", opt_in=True),
    Atom("read.part", "read buf part warp;", opt_in=True),
    Atom("write.lo", "write buf bytes 0..32;", opt_in=True),
    Atom("read.hi", "read buf bytes 32..64;", opt_in=True),
    # non-bulk cp.async with its groups and its mbarrier arrive-on (counted and .noinc)
    Atom("cp.async", "cp.async buf;", opt_in=True),
    Atom("cp.async.commit", "cp.async.commit_group;", opt_in=True),
    Atom("cp.async.wait", "cp.async.wait_group 0;", opt_in=True),
    Atom("cp.async.retired", "cp.async buf; cp.async.wait_all;", opt_in=True),  # a copy and the wait that retires it
    Atom("tma.store.waited", "tma.store buf; bulk.commit; bulk.wait_read 0;", opt_in=True),  # a bulk store, retired
    Atom("cp.async.arrive", "cp.async.mbarrier.arrive mb;", mbarrier=True, opt_in=True),
    Atom("cp.async.arrive.noinc", "cp.async.mbarrier.arrive.noinc mb;", mbarrier=True, opt_in=True),
    # a remote arrive at the default .release.cta scope (SV602 when it carries data, cp.async copies included)
    Atom("arrive.remote.cta", "arrive mb @ cta ^ 1;", mbarrier=True, cluster_only=True, opt_in=True),
    # tcgen05: an MMA into a tensor-memory accumulator, its commit, loads and stores with their waits, the fences
    Atom("tc.mma", "tcgen05.mma acc, buf, buf;", decl=(TMEM,), opt_in=True),
    Atom("tc.commit", "tcgen05.commit mb;", mbarrier=True, opt_in=True),
    Atom("tc.shift", "tcgen05.shift acc;", decl=(TMEM,), opt_in=True),  # a row shift: async, completed by a commit
    Atom("tc.ld", "tcgen05.ld acc; tcgen05.wait::ld;", collective=True, decl=(TMEM,), opt_in=True),
    Atom("tc.st", "tcgen05.st acc;", collective=True, decl=(TMEM,), opt_in=True),
    Atom("tc.wait_st", "tcgen05.wait::st;", collective=True, opt_in=True),
    Atom("tc.before", "tcgen05.fence::before_thread_sync;", opt_in=True),
    Atom("tc.after", "tcgen05.fence::after_thread_sync;", opt_in=True),
    # the async-proxy fence's state spaces and its uni-directional halves (families/proxy_fence.py)
    Atom("fence.cta", "fence.proxy.async.shared::cta;", opt_in=True),
    Atom("fence.cluster", "fence.proxy.async.shared::cluster;", opt_in=True),
    Atom("fence.release", "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;", opt_in=True),
    Atom("fence.acquire", "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;",
         opt_in=True),
    # global memory: a global buffer, a flag's atomics at each semantics and scope, spins, thread fences, grid.sync
    Atom("g.write", "write gbuf;", decl=(GLOBAL,), opt_in=True),
    Atom("g.read", "read gbuf;", decl=(GLOBAL,), opt_in=True),
    Atom("g.add.release", "red.add.release.gpu f, 1;", decl=(FLAG,), opt_in=True),
    Atom("g.add.release.cta", "red.add.release.cta f, 1;", decl=(FLAG,), opt_in=True),
    Atom("g.add.relaxed", "red.add.relaxed.gpu f, 1;", decl=(FLAG,), opt_in=True),
    Atom("g.reset", "atom.exch.acq_rel.gpu f, 0;", decl=(FLAG,), opt_in=True),
    Atom("g.store", "st.release.gpu f, 1;", decl=(FLAG,), opt_in=True),
    Atom("g.wait", "wait.until.acquire.gpu f >= 1;", decl=(FLAG,), opt_in=True),
    Atom("g.wait.relaxed", "wait.until.relaxed.gpu f >= 1;", decl=(FLAG,), opt_in=True),
    Atom("g.wait.eq", "wait.until.acquire.gpu f == 2;", decl=(FLAG,), opt_in=True),
    Atom("g.fence", "fence.acq_rel.gpu;", opt_in=True),
    Atom("g.fence.cta", "fence.sc.cta;", opt_in=True),
    Atom("grid.sync", "grid.sync;", collective=True, opt_in=True),
    # which write a flag read returns (families/globalmem_views.py): relaxed stores of two flags, reads of the
    # other flag that an older write satisfies (an absence check), a load whose write decides what it acquires,
    # and fence.sc between them
    Atom("v.st.f", "st.relaxed.gpu f, 1;", decl=(FLAG,), opt_in=True),
    Atom("v.st.g", "st.relaxed.gpu g, 1;", decl=(FLAG_G,), opt_in=True),
    Atom("v.rel.g", "st.release.gpu g, 1;", decl=(FLAG_G,), opt_in=True),
    Atom("v.none.f", "wait.until.acquire.gpu f == 0;", decl=(FLAG,), opt_in=True),
    Atom("v.none.g", "wait.until.acquire.gpu g == 0;", decl=(FLAG_G,), opt_in=True),
    Atom("v.wait.g", "wait.until.relaxed.gpu g >= 1;", decl=(FLAG_G,), opt_in=True),
    Atom("v.ld.f", "ld.acquire.gpu f;", decl=(FLAG,), opt_in=True),
    Atom("v.sc", "fence.sc.gpu;", opt_in=True),
    # a ticket whose value decides a branch (families/flag_values.py): the CTA that draws 1 reads the buffer
    Atom("g.ticket", "first thread {{ let t = atom.add.acq_rel.gpu f, 1; if t == 1 {{ read gbuf; }} }}",
         decl=(FLAG, GLOBAL), opt_in=True),
    # "the last CTA to arrive" as extraction writes it (ptx/kept.py): the ticket of an atomInc kept by one
    # thread and stored to the CTA's word, the word loaded by the warp after a barrier and branched on, the
    # partials read and the counter reset with a plain store there (families/flag_weak.py), a reset with no branch
    Atom("k.part", "first thread {{ write parts[block]; }}", decl=(PARTS,), opt_in=True),
    Atom("k.ticket", "first thread {{ let t = atom.inc.relaxed.gpu f, 2; st.relaxed.cta h[block], t == 1 ? 1 : 0; }}",
         decl=(FLAG, SHARED_WORD), opt_in=True),
    Atom("k.last", "syncthreads; if block >= 0 {{ let w = ld.relaxed.cta h[block]; if w == 1 {{ read parts[0]; "
         "read parts[1]; first thread {{ st.weak f, 0; }} }} }}", collective=True, decl=(FLAG, SHARED_WORD, PARTS),
         opt_in=True),
    Atom("k.reset", "first thread {{ st.weak f, 0; }}", decl=(FLAG,), opt_in=True),
    # probes whose result a branch uses (families/mbarrier_probe.py): a read only where the probe passed, an
    # arrive only where it failed, CUTLASS's probe-then-wait (compiled as the wait), and a probe in a loop
    # whose two results reach different accesses
    Atom("probe.read", "if try_wait mb parity 0 {{ read buf; }}", mbarrier=True, opt_in=True),
    Atom("probe.arrive", "if !test_wait mb parity 1 {{ arrive mb; }}", mbarrier=True, opt_in=True),
    Atom("probe.wait", "if !try_wait mb parity 0 {{ wait mb parity 0; }}", mbarrier=True, opt_in=True),
    Atom("probe.k", "if try_wait.relaxed mb parity {k} % 2 {{ write buf; }} else {{ read buf; }}", mbarrier=True,
         in_loop=True, opt_in=True),
    # a kept probe (`let t = try_wait …`) and CUTLASS's consumer_wait(tok) after other work: a read of the slot
    # the barrier guards, or an arrive on it, between the probe and the wait the token skips
    Atom("probe.token.read", "let t = try_wait mb parity 0; read buf; if !t {{ wait mb parity 0; }}", mbarrier=True,
         opt_in=True),
    Atom("probe.token.arrive", "let t = try_wait mb parity 0; arrive mb; if !t {{ wait mb parity 0; }}",
         mbarrier=True, opt_in=True),
    # the token shape with nothing between the probe and the wait, and with the token read after it (an index):
    # where the false outcome covers the true one, and where it does not (engines/reduction/probe_outcome.py)
    Atom("probe.token.direct", "let t = try_wait mb parity 0; if !t {{ wait mb parity 0; }}", mbarrier=True,
         opt_in=True),
    Atom("probe.token.index", "let t = try_wait mb parity 0; if !t {{ wait mb parity 0; }} write pair[t];",
         mbarrier=True, decl=(PAIR,), opt_in=True),
    Atom("read.pair1", "read pair[1];", decl=(PAIR,), opt_in=True),
    # registers read by an RS-form wgmma until the wgmma.wait that retires its group (SV605), beside the shared
    # memory the same wgmma reads
    Atom("r.write", "write ra;", decl=(REGS,), opt_in=True),
    Atom("r.read", "read ra;", decl=(REGS,), opt_in=True),
    Atom("r.wgmma", "wgmma.read ra;", collective=True, decl=(REGS,), opt_in=True),
    Atom("wgmma.wait1", "wgmma.wait 1;", collective=True, opt_in=True),
    # sub-ranges (lanes x columns) of a tensor-memory region: chunks that overlap, chunks apart, the whole region
    Atom("tc.ld.lo", "tcgen05.ld acc lanes 0..32 cols 0..16; tcgen05.wait::ld;", collective=True, decl=(TMEM,),
         opt_in=True),
    Atom("tc.st.lo", "tcgen05.st acc lanes 0..32 cols 0..16;", collective=True, decl=(TMEM,), opt_in=True),
    Atom("tc.st.hi", "tcgen05.st acc lanes 0..32 cols 16..32;", collective=True, decl=(TMEM,), opt_in=True),
    Atom("tc.ld.q1", "tcgen05.ld acc lanes 32..64; tcgen05.wait::ld;", collective=True, decl=(TMEM,), opt_in=True),
    # tensor maps: a copy that reads the map, its rewrite, the tensormap proxy's release and acquire halves
    Atom("tm.load", "tma.load buf -> mb map tm;", mbarrier=True, decl=(TMAP,), opt_in=True),
    Atom("tm.replace", "tensormap.replace tm;", decl=(TMAP,), opt_in=True),
    Atom("tm.release", "fence.proxy.tensormap.release.gpu;", opt_in=True),
    Atom("tm.acquire", "fence.proxy.tensormap.acquire.gpu tm;", decl=(TMAP,), opt_in=True),
    # a rewrite after the copying thread's drain of its copies' map reads (CUTLASS >= 4.0: cutlass#2912; the
    # bulk-group reading of semantics/families/tensormap.py)
    Atom("tm.drain", "bulk.commit; bulk.wait_read 0; tensormap.replace tm;", decl=(TMAP,), opt_in=True),
    Atom("tm.load.tx", "arrive.expect_tx mb bytes 64; tma.load buf -> mb map tm;", mbarrier=True, decl=(TMAP,),
         opt_in=True),
    # a bulk store in the executing lanes' own group, committed (a later wait retires it) or also waited for
    # (semantics/families/lane_groups.py, under a lane guard: each lane's group is its own)
    Atom("tma.store.committed", "tma.store buf; bulk.commit;", opt_in=True),
    # a second barrier `e` of count 2 (Scope.second): armed, copied into, arrived on and waited on beside `mb`
    Atom("e.arm", "arrive.expect_tx e bytes 64;", mbarrier=True, opt_in=True),
    Atom("e.load", "tma.load buf -> e;", mbarrier=True, opt_in=True),
    Atom("e.arrive", "arrive e;", mbarrier=True, opt_in=True),
    Atom("e.wait0", "wait e parity 0;", mbarrier=True, opt_in=True),
    # the bytes of both CTAs' multicast copies armed on each CTA's barrier (the CUTLASS sm_90 producers' full barrier)
    Atom("arrive.expect_tx.both", "arrive.expect_tx mb bytes 128;", mbarrier=True, cluster_only=True, opt_in=True),
)

# Wrappers: ``elect`` (one lane per warp), ``per warp``, ``first thread`` (one thread of the role
# instance) select threads, so warp-collective atoms stay out of them; ``if C > 0`` is a branch on
# a `choose` value, which any atom may sit in.
WRAPPERS = ("", "elect", "per warp")
LANES = "if lane < 16"  # a lane guard: half of each warp (lanes 0..15, the leader among them)
# what a lane guard may hold (docs/language.md §6.1; anything else is SV116): data accesses, mbarrier
# arrivals and tx counts, bulk copies, fence.proxy.async
LANE_GUARDED = frozenset({"arrive", "arrive.expect_tx", "expect_tx", "complete_tx", "read", "write", "tma.load",
                          "fence.proxy.async", "write.part", "read.part", "write.lo", "read.hi", "arrive.remote",
                          "read.remote", "write.remote",
                          # bulk stores with their bulk groups, each lane's own (semantics/families/lane_groups.py)
                          "tma.store", "bulk.commit", "bulk.wait_read", "tma.store.waited", "tma.store.committed"})
LANE1 = "if lane == 1"  # one lane other than the leader: its bulk groups are its own, not the leader's
SELECTING = frozenset({"elect", "per warp", "first thread", LANES, LANE1})
LOOP_TRIPS: tuple[int | str, ...] = (1, 2)  # "C": a loop of `choose` C trips


@dataclass(frozen=True)
class Stmt:
    """A statement: atoms (one, or two in a loop body), their wrappers, and the loop's trips (0: none)."""

    atoms: tuple[tuple[Atom, str], ...]
    trips: int | str = 0

    @property
    def size(self) -> int:
        return len(self.atoms)

    @property
    def mbarrier(self) -> bool:
        return any(a.mbarrier for a, _ in self.atoms)

    @property
    def decls(self) -> frozenset[str]:
        """The declarations the statement needs: its atoms', and the `choose` of a loop bound or branch on C."""
        out = {d for a, _ in self.atoms for d in a.decl}
        if self.trips == "C" or any("C" in w.split() for _, w in self.atoms):
            out.add(CHOOSE)
        return frozenset(out)

    def text(self, var: str, bar: int) -> str:
        body = " ".join(_wrapped(a, w, var, bar) for a, w in self.atoms)
        return f"for {var} in 0..{self.trips} {{ {body} }}" if self.trips else body


def _wrapped(atom: Atom, wrapper: str, var: str, bar: int) -> str:
    text = atom.text.format(k=var, bar=bar)
    return f"{wrapper} {{ {text} }}" if wrapper else text


@dataclass(frozen=True)
class Scope:
    """A small scope: the shape of the CTAs and the programs enumerated in it."""

    name: str
    ctas: int  # 1, or 2 (a cluster; one body warp per CTA)
    warps: int  # body warps per CTA (with 2 CTAs: 1)
    splits: tuple[tuple[int, ...], ...]  # atoms per body warp (per CTA with 2 CTAs), non-increasing
    per_warp: int = 3  # statements per warp, at most
    atoms: tuple[str, ...] | None = None  # a sub-alphabet by name (None: every atom the scope allows)
    wrappers: tuple[str, ...] = WRAPPERS
    pair_loops: bool = False  # loops whose body is two atoms
    trips: tuple[int | str, ...] = LOOP_TRIPS  # loop trip counts ("C": the `choose` value)
    layout: str = "warps"  # body roles: "warps" (one warp each), "pairs" (two warps each), "halves" (of one warp),
    #                        "warpgroups" (four warps each: a whole warpgroup, as wgmma needs)
    tail: str = ""  # a statement every thread runs after the bodies (a cluster.sync that keeps peers' memory alive)
    mb_in: bool = False  # the mbarrier lies in the first bytes of `buf` (`mbarrier mb count 1 in buf;`)
    grid: bool = False  # with 2 CTAs: a grid of two one-CTA clusters, launched cooperatively, not a cluster
    second: bool = False  # a second mbarrier `e` of count 2 beside `mb`, set up with it (the `e.` atoms)
    mb_count: int = 1  # the arrival count of `mb`


_BARRIERS = ("syncthreads", "bar.sync", "bar.arrive", "syncwarp", "cluster.sync", "cluster.arrive",
             "cluster.arrive.relaxed", "cluster.wait")

# The scopes of the full pass (bench/exhaustive.py); the test suite runs a slice of them.
SCOPES: dict[str, Scope] = {
    # every statement of the alphabet against every other, and alone beside an early exit
    "cta2": Scope("cta2", 1, 2, ((1, 1), (1, 0))),
    # three warps (a named barrier of 64 threads is then a subset), barriers and accesses
    "cta3": Scope("cta3", 1, 3, ((1, 1, 1), (1, 1, 0), (1, 0, 0)), atoms=(*_BARRIERS, "read", "write"),
                  wrappers=("",)),
    # longer sequences and two-atom loop bodies around the barriers
    "cta2-seq": Scope("cta2-seq", 1, 2, ((2, 1), (2, 0)),
                      atoms=("syncthreads", "bar.sync", "bar.arrive", "read", "write"), wrappers=("",),
                      pair_loops=True),
    # a cluster of two CTAs, one body warp each: remote operations and the cluster barrier
    "cluster2": Scope("cluster2", 2, 1, ((1, 1), (1, 0)), wrappers=("", "elect")),
    # the newer constructs against each other: unaligned barriers, tensor memory, `first thread`,
    # a `choose` value as a branch, a loop bound, a parity and an index, the conditional operator
    "new2": Scope("new2", 1, 2, ((1, 1), (1, 0)),
                  atoms=("bar.sync", "barrier.sync", "barrier.arrive", "syncwarp", "tmem.alloc", "tmem.dealloc",
                         "arrive", "wait0", "wait1", "wait_c", "wait_kc", "write_kc", "read_c", "read", "write"),
                  wrappers=("", "first thread", "if C > 0"), trips=(2, "C")),
    # roles of two warps: `elect` arrives once per warp, `first thread` once per role
    "pairs2": Scope("pairs2", 1, 2, ((1, 1), (1, 0)),
                    atoms=("syncthreads", "bar.sync", "barrier.sync", "syncwarp", "arrive", "wait0", "wait1",
                           "read", "write"), wrappers=("", "elect", "first thread"), trips=(2,), layout="pairs"),
    # one warp split between two roles: `syncwarp` met from different sites by its parts
    "halves": Scope("halves", 1, 2, ((2, 1), (1, 1), (2, 0)), atoms=("syncwarp", "read", "write"),
                    wrappers=("", "first thread"), trips=(2,), layout="halves"),
    # an mbarrier past phase 1 (count 1: each arrive completes a phase), first waits of either parity
    "phases": Scope("phases", 1, 2, ((2, 1), (3, 0)),
                    atoms=("arrive", "wait0", "wait1", "wait_k", "wait_k1", "wait_c", "wait_kc"), wrappers=("elect",),
                    trips=(2,)),
    # cluster barrier sequences: a re-arrive before and after the generation completed, remote accesses
    "cluster2-seq": Scope("cluster2-seq", 2, 1, ((2, 2), (2, 1), (3, 1)),
                          atoms=("cluster.arrive", "cluster.arrive.relaxed", "cluster.wait", "cluster.sync",
                                 "read.remote", "write.remote"), wrappers=("",), trips=()),
    # chosen lanes of a warp (a lane guard) beside `elect` and the whole warp: the per-lane release rule
    "lanes": Scope("lanes", 1, 2, ((1, 1), (2, 0), (2, 1)),
                   atoms=("arrive", "wait0", "read", "write", "syncwarp", "syncthreads"),
                   wrappers=("", "elect", LANES), trips=()),
    # sub-slot regions beside whole-slot accesses and the barriers that order them
    "regions": Scope("regions", 1, 2, ((1, 1), (2, 0), (2, 1)),
                     atoms=("write.part", "read.part", "write.lo", "read.hi", "read", "write", "syncthreads"),
                     wrappers=("",), trips=()),
    # non-bulk cp.async: its groups and its arrive-on, against reads, waits and a barrier
    "cpasync": Scope("cpasync", 1, 2, ((2, 1), (3, 0)),
                     atoms=("cp.async", "cp.async.commit", "cp.async.wait", "cp.async.arrive", "cp.async.arrive.noinc",
                            "read", "wait0", "syncthreads"), wrappers=("", "elect"), trips=()),
    # cp.async copies read through the async proxy (a bulk store), with and without a fence.proxy.async
    # after the copy's completion, by the copying warp or by the warp that acquires it (SV601)
    "cpasync-proxy": Scope("cpasync-proxy", 1, 2, ((3, 2), (3, 0)),
                           atoms=("cp.async", "cp.async.retired", "cp.async.arrive.noinc", "fence.proxy.async",
                                  "tma.store.waited", "wait0"), wrappers=("elect",), trips=()),
    # cp.async copies handed to the peer CTA over a remote arrive of either scope (SV602); the closing
    # cluster.sync keeps each CTA's shared memory alive for its peer's reads
    "cpasync-cluster": Scope("cpasync-cluster", 2, 1, ((3, 2), (3, 0)),
                             atoms=("cp.async", "cp.async.retired", "arrive.remote", "arrive.remote.cta", "wait0",
                                    "read.remote"), wrappers=("elect",), trips=(), tail="cluster.sync;"),
    # tcgen05: MMA, commit, tensor-memory loads and stores, the fence pair around the thread synchronization
    "tcgen05": Scope("tcgen05", 1, 2, ((2, 1), (1, 1), (2, 0)),
                     atoms=("tc.mma", "tc.commit", "tc.shift", "tc.ld", "tc.st", "tc.wait_st", "tc.before", "tc.after",
                            "wait0", "syncthreads"), wrappers=("", "elect"), trips=()),
    # tensor-memory allocation: columns, the right to allocate given up (SV604), barriers that order them
    "relinquish": Scope("relinquish", 1, 2, ((2, 1), (1, 1), (2, 0)),
                        atoms=("tmem.alloc", "tmem.dealloc", "tmem.relinquish", "syncthreads", "syncwarp"),
                        wrappers=("",), trips=()),
    # proxy fences on either side of the barrier that orders a generic write before a bulk store's read
    "proxies": Scope("proxies", 1, 2, ((2, 2), (3, 1), (3, 0)),
                     atoms=("write", "fence.proxy.async", "fence.cta", "fence.release", "fence.acquire", "syncthreads",
                            "tma.store", "bulk.wait_read"), wrappers=("", "elect"), trips=()),
    # a write into the peer CTA's slot, fenced with each state space, read by the peer's bulk store
    # probes against arrivals, waits and accesses: either result where the phase completed, false where not
    "probes": Scope("probes", 1, 2, ((2, 1), (1, 1), (2, 0)),
                    atoms=("probe.read", "probe.arrive", "probe.wait", "probe.k", "arrive", "wait0", "read",
                           "write"), wrappers=("", "elect"), trips=(2,)),
    "proxies2": Scope("proxies2", 2, 1, ((2, 2), (3, 1)),
                      atoms=("write.remote", "write", "fence.cta", "fence.cluster", "fence.acquire", "cluster.sync",
                             "tma.store"), wrappers=("", "elect"), trips=()),
    # barrier storage: the mbarrier in the first 8 bytes of `buf`, data before its init and after its inval
    # (SV408, SV409); `read.hi` touches only bytes 32..64, never the barrier's
    "storage": Scope("storage", 1, 2, ((2, 1), (1, 1), (2, 0)),
                     atoms=("inval", "init", "read", "write", "read.hi", "write.lo", "wait0", "arrive.expect_tx",
                            "tma.load", "syncthreads"), wrappers=("", "elect"), trips=(), mb_in=True),
}

# Global memory, compared apart (tests/test_exhaustive_globals.py): the bmc engine and SPIN refuse
# the family, so these scopes are not in SCOPES, whose every scope each engine must answer.
GLOBAL_SCOPES: dict[str, Scope] = {
    # two CTAs of a grid, one body warp each: data through a flag at each semantics and scope,
    # fences, resets, grid.sync
    "globals2": Scope("globals2", 2, 1, ((2, 2), (3, 1), (3, 0)),
                      atoms=("g.write", "g.read", "g.add.release", "g.add.release.cta", "g.add.relaxed", "g.reset",
                             "g.store", "g.wait", "g.wait.relaxed", "g.wait.eq", "g.fence", "g.fence.cta",
                             "grid.sync", "g.ticket"), wrappers=("", "elect"), trips=(), grid=True),
    # two CTAs, two flags (families/globalmem_views.py). Store buffering: each CTA stores one flag and checks the
    # other's absence, with or without fence.sc between, around a global write
    "views-sb": Scope("views-sb", 2, 1, ((3, 3),),
                      atoms=("g.write", "v.st.f", "v.st.g", "v.none.f", "v.none.g", "v.sc"), wrappers=("elect",),
                      trips=(), grid=True),
    # the last CTA to arrive (ptx/kept.py's shapes): a ticket through a per-CTA word, the branch on it, the weak
    # reset, the partial's write, thread fences, a CTA barrier
    "tickets": Scope("tickets", 2, 1, ((3, 3),),
                     atoms=("k.part", "k.ticket", "k.last", "k.reset", "v.sc", "syncthreads"),
                     wrappers=("",), trips=(), grid=True),
    # message passing through two flags: a release and a relaxed store, the relaxed spin and the load whose
    # write decides what it acquires, the data they guard
    "views-mp": Scope("views-mp", 2, 1, ((3, 3),),
                      atoms=("g.write", "g.read", "g.store", "v.rel.g", "v.st.g", "v.wait.g", "v.ld.f", "g.wait"),
                      wrappers=("elect",), trips=(), grid=True),
}

# Two CTAs of a grid that each work on their own shared memory and barrier and meet only through global memory,
# compared apart (tests/test_cta_local_por.py): the persistent set of one CTA's steps
# (engines/reduction/cta_local.py) against the unreduced search. Each CTA's warp copies, waits, arrives and
# touches its own `buf`, and hands data to the other through the global buffer and a flag.
CTA_LOCAL_SCOPES: dict[str, Scope] = {
    "grid-local": Scope("grid-local", 2, 1, ((3, 2), (2, 2)),
                        atoms=("tma.load", "wait0", "arrive", "write", "read", "g.write", "g.read", "g.add.release",
                               "g.wait"), wrappers=("",), trips=(), grid=True),
    # two CTAs of a cluster: each CTA's warp copies, waits, arrives and touches its own tile, and reaches the
    # other CTA through a remote arrive, a remote read, a copy multicast to both and the cluster barrier
    "cluster-local": Scope("cluster-local", 2, 1, ((3, 2), (2, 2)),
                           atoms=("tma.load", "wait0", "arrive", "write", "read", "arrive.remote", "read.remote",
                                  "tma.load.multicast", "cluster.arrive", "cluster.wait"), wrappers=("",),
                           trips=()),
}

# Operands of async operations that are not shared memory, compared apart (tests/test_exhaustive_operands.py):
# the bmc engine and SPIN refuse registers and tensor-memory loads and stores.
OPERAND_SCOPES: dict[str, Scope] = {
    # one whole warpgroup (wgmma is warpgroup-collective): its register accesses against the wgmma reads of them
    # and of `buf`, the groups and the waits that retire them (of either depth), a barrier
    "registers": Scope("registers", 1, 1, ((4,), (3,)), per_warp=4,
                       atoms=("r.write", "r.read", "r.wgmma", "wgmma.read", "wgmma.commit", "wgmma.wait",
                              "wgmma.wait1", "syncthreads"), wrappers=("", "elect"), trips=(2,),
                       layout="warpgroups"),
    # chunks of one tensor-memory region against each other and the whole region, with the fence pair around a
    # barrier that orders them across warps
    "tmem-ranges": Scope("tmem-ranges", 1, 2, ((2, 1), (1, 1), (2, 0)),
                         atoms=("tc.ld.lo", "tc.st.lo", "tc.st.hi", "tc.ld.q1", "tc.ld", "tc.st", "tc.wait_st",
                                "tc.before", "tc.after", "syncthreads"), wrappers=("",), trips=()),
}

# Tensor maps, compared apart (tests/test_exhaustive_tensormap.py): the bmc engine and SPIN refuse them.
TENSORMAP_SCOPES: dict[str, Scope] = {
    # two warps: copies that read the map, its rewrites, the fence halves, the copy's completion wait, an arrive
    # and a barrier that order them across the warps
    "tensormap": Scope("tensormap", 1, 2, ((2, 1), (1, 1), (2, 0)),
                       atoms=("tm.load", "tm.replace", "tm.release", "tm.acquire", "wait0", "arrive", "syncthreads"),
                       wrappers=("", "elect"), trips=()),
    # the same with the drain (tests/test_exhaustive_tensormap_drain.py)
    "tensormap-drain": Scope("tensormap-drain", 1, 2, ((2, 1), (1, 1), (2, 0)),
                             atoms=("tm.load.tx", "tm.drain", "tm.replace", "tm.release", "tm.acquire", "wait0"),
                             wrappers=("", "elect"), trips=()),
}


# Kept probes (tokens), compared apart (tests/test_probe_token_walk.py): the reduction's walk of what can come
# before a step reads a token probe's position as its false outcome's sequence (semantics/footprint_probe.py); the
# landings, arrive.expect_tx and observing waits it takes alone are checked against the unreduced search here.
PROBE_TOKEN_SCOPES: dict[str, Scope] = {
    "probe-tokens": Scope("probe-tokens", 1, 2, ((2, 1), (1, 1), (2, 0)),
                          atoms=("probe.token.read", "probe.token.arrive", "arrive.expect_tx", "tma.load", "wait0",
                                 "arrive", "write"), wrappers=("", "elect"), trips=()),
    # the true outcome left out where the false one covers it (engines/reduction/probe_outcome.py): the token shape
    # with nothing, a read of the guarded slot or an arrive between the probe and the wait, and with the token
    # read after the wait, beside the copy that completes the phase and the accesses that race with the reads
    # (elected lanes only: a whole warp's arrive.expect_tx is 32 arrivals on a count of 1, a violation that ends
    # most programs before the probe)
    "probe-outcomes": Scope("probe-outcomes", 1, 2, ((2, 1), (1, 1), (2, 0), (2, 2)),
                            atoms=("probe.token.direct", "probe.token.index", "probe.token.read", "read.pair1",
                                   "arrive.expect_tx", "tma.load", "arrive", "write", "wait0"), wrappers=("elect",),
                            trips=()),
}


# Bulk async-groups of some lanes, compared apart (tests/test_exhaustive_lane_groups.py): the bmc engine and SPIN
# refuse them.
LANE_GROUP_SCOPES: dict[str, Scope] = {
    # two warps: stores committed and waited for by the whole warp, its elected lane, lanes 0..15 or lane 1 alone,
    # against the writes and reads of the slot and the syncwarp and barrier that hand a lane's wait to the others
    "lane-groups": Scope("lane-groups", 1, 2, ((2, 1), (3, 0)),
                         atoms=("tma.store.committed", "tma.store.waited", "bulk.wait_read", "write", "read",
                                "syncwarp", "syncthreads"), wrappers=("", "elect", LANES, LANE1), trips=()),
}


# A barrier met in two rounds, compared apart (tests/test_exhaustive_rounds.py): the walk of what can come before a
# lone step knows which phase a later wait of a process needs (engines/reduction/precede_walk.py, "Phases"). Three
# warps: waits on `mb` in a loop of two trips (parities k and k + 1) and arrivals on it, beside a second barrier `e`
# (count 2) armed, copied into, arrived on and waited on, so that a warp's second wait on `mb` stands behind a
# completion of it while a landing, an arrive.expect_tx or an observing wait on `e` asks what can come first.
ROUND_SCOPES: dict[str, Scope] = {
    "rounds": Scope("rounds", 1, 3, ((2, 1, 1), (1, 1, 1)),
                    atoms=("wait_k", "wait_k1", "arrive", "e.arm", "e.load", "e.arrive", "e.wait0", "read"),
                    wrappers=("elect",), trips=(2,), pair_loops=True, second=True),
}


# Per-thread cp.async arrive-ons into a barrier of several arrivals, compared apart
# (tests/test_exhaustive_cp_arrive.py): the issue of `cp.async.mbarrier.arrive[.noinc]` and each thread's arrive-on
# taken alone where no update of the barrier that can come first completes its phase
# (engines/reduction/cp_arrive.py). Three warps copy, issue their arrive-ons, arrive, wait and read: elected (one
# arrive-on a warp) on a barrier of 2 arrivals, and whole warps (32 arrive-ons a warp, the TileLang producer's form)
# on one of 64.
CP_ARRIVE_SCOPES: dict[str, Scope] = {
    "cp-arrive-elect": Scope("cp-arrive-elect", 1, 3, ((2, 1, 1), (1, 1, 1), (2, 2, 0)),
                             atoms=("cp.async", "cp.async.arrive", "cp.async.arrive.noinc", "arrive", "wait0",
                                    "read"), wrappers=("elect",), trips=(), mb_count=2),
    "cp-arrive-warps": Scope("cp-arrive-warps", 1, 3, ((2, 1, 1), (1, 1, 1), (2, 2, 0)),
                             atoms=("cp.async", "cp.async.arrive", "cp.async.arrive.noinc", "arrive", "wait0",
                                    "read"), wrappers=("",), trips=(), mb_count=64),
}


# An `arrive.expect_tx` taken alone while other warps can count bytes on its barrier first, compared apart
# (tests/test_exhaustive_arrive_tx.py; engines/reduction/arrive_tx.py): elected arrive.expect_tx, copies, expect_tx
# and complete_tx of three warps on a barrier of 2 arrivals, with arrivals, waits and reads; and in a cluster of two
# CTAs, one warp each, the multicast copy of the peer into the barrier a warp arms (the CUTLASS sm_90 producers).
ARRIVE_TX_SCOPES: dict[str, Scope] = {
    "arrive-tx": Scope("arrive-tx", 1, 3, ((2, 1, 1), (1, 1, 1), (2, 2, 0)),
                       atoms=("arrive.expect_tx", "tma.load", "expect_tx", "complete_tx", "arrive", "wait0", "read"),
                       wrappers=("elect",), trips=(), mb_count=2),
    "arrive-tx-cluster": Scope("arrive-tx-cluster", 2, 1, ((2, 2), (3, 1), (3, 0)),
                               atoms=("arrive.expect_tx", "arrive.expect_tx.both", "tma.load.multicast", "tma.load",
                                      "arrive.remote", "wait0", "read"), wrappers=("elect",), trips=(),
                               tail="cluster.sync;", mb_count=2),
}

def atoms_of(scope: Scope) -> list[Atom]:
    chosen = [a for a in ALPHABET if scope.ctas > 1 or not a.cluster_only]
    if scope.atoms is not None:
        return [a for a in chosen if a.name in scope.atoms]
    return [a for a in chosen if not a.opt_in]


def statements(scope: Scope) -> list[Stmt]:
    """Every statement of the scope, in a fixed order."""
    wrapped = [(a, w) for a in atoms_of(scope) for w in scope.wrappers
               if not (w in SELECTING and a.collective) and (w not in (LANES, LANE1) or a.name in LANE_GUARDED)]
    plain = [x for x in wrapped if not x[0].in_loop]
    out = [Stmt((x,)) for x in plain]
    out += [Stmt((x,), t) for t in scope.trips for x in wrapped]
    if scope.pair_loops:
        out += [Stmt((x, y), t) for t in scope.trips for x in wrapped for y in wrapped]
    return out


def sequences(stmts: list[Stmt], size: int, count: int) -> Iterator[tuple[Stmt, ...]]:
    """Every sequence of at most ``count`` statements of ``size`` atoms in all, by size."""
    by_size: dict[int, list[Stmt]] = {}
    for s in stmts:
        by_size.setdefault(s.size, []).append(s)

    def go(left: int, slots: int) -> Iterator[tuple[Stmt, ...]]:
        if left == 0:
            yield ()
            return
        if slots == 0:
            return
        for n, group in by_size.items():
            if n <= left:
                for s in group:
                    for rest in go(left - n, slots - 1):
                        yield (s, *rest)

    yield from go(size, count)


def programs(scope: Scope) -> Iterator[tuple[tuple[Stmt, ...], ...]]:
    """Every canonical program of the scope: one sequence per body warp (per CTA with 2 CTAs).
    The body warps are interchangeable, so a program is one multiset of sequences: of the
    orders of equal-sized sequences only the sorted one is generated."""
    stmts = statements(scope)
    index = {s: i for i, s in enumerate(stmts)}
    pools: dict[int, list[tuple[Stmt, ...]]] = {}

    def key(seq: tuple[Stmt, ...]) -> tuple[int, ...]:
        return (len(seq), *(index[s] for s in seq))

    for split in scope.splits:
        for n in split:
            if n not in pools:
                pools[n] = list(sequences(stmts, n, scope.per_warp)) if n else [()]
        for combo in itertools.product(*(pools[n] for n in split)):
            if any(split[i] == split[i + 1] and key(combo[i]) > key(combo[i + 1]) for i in range(len(split) - 1)):
                continue  # the same multiset in another order
            yield combo


def render(scope: Scope, program: tuple[tuple[Stmt, ...], ...], name: str = "x") -> str:
    """The .sync text of one program."""
    setup = any(s.mbarrier for seq in program for s in seq)
    decls = sorted({d for seq in program for s in seq for d in s.decls})
    body_warps = {"warps": scope.warps, "pairs": 2 * scope.warps, "halves": 1,
                  "warpgroups": 4 * scope.warps}[scope.layout]
    warps = body_warps + (1 if setup else 0)
    lines = [f"protocol {name} {{"]
    if scope.ctas > 1 and scope.grid:
        lines.append(f"  grid {scope.ctas};")
        lines.append("  launch cooperative;")
    elif scope.ctas > 1:
        lines.append(f"  cluster {scope.ctas};")
    lines.append(f"  cta threads {32 * warps};")
    for w in range(scope.warps):
        unit = {"warps": f"warp {w}", "pairs": f"warps {2 * w}..{2 * w + 2}",
                "halves": f"threads {16 * w}..{16 * w + 16}", "warpgroups": f"warpgroup {w}"}[scope.layout]
        lines.append(f"  role w{w} = {unit};")
    if setup:
        lines.append(f"  role setup = warp {body_warps};")
        if not scope.mb_in:
            lines.append(f"  mbarrier mb count {scope.mb_count};")
        if scope.second:
            lines.append("  mbarrier e count 2;")
    lines.append("  smem buf bytes 64;")
    if setup and scope.mb_in:
        lines.append("  mbarrier mb count 1 in buf;")
    lines += [f"  {d}" for d in decls]
    if setup:
        if scope.ctas > 1 and scope.grid:  # each CTA's own barrier, set up in the CTA (no cluster to sync)
            lines.append("  if setup { elect { init mb; } }")
            lines.append("  syncthreads;")
        elif scope.ctas > 1:
            lines.append("  if setup { elect { init mb; fence.mbarrier_init; } }")
            lines.append("  cluster.sync;")
        else:
            lines.append(f"  if setup {{ elect {{ init mb;{' init e;' if scope.second else ''} }} }}")
            lines.append("  syncthreads;")
    bar = 32 * min(2, body_warps)  # the threads of two body warps (or one): a named barrier of a subset
    for slot, seq in enumerate(program):
        if not seq:
            continue
        guard = f"w{slot}" if scope.ctas == 1 else f"w0 && {'block' if scope.grid else 'cta'} == {slot}"
        body = " ".join(s.text(f"k{slot}{i}", bar) for i, s in enumerate(seq))
        lines.append(f"  if {guard} {{ {body} }}")
    if scope.tail:
        lines.append(f"  {scope.tail}")
    lines.append("}")
    return "\n".join(lines) + "\n"


BARRIERS = frozenset(a.name for a in ALPHABET if a.collective and a.name.startswith(("sync", "bar.", "cluster.")))


def loops_on_a_barrier(program: tuple[tuple[Stmt, ...], ...]) -> bool:
    """Does some warp loop more than once over a barrier (the shape of the barrier-only-loop
    false deadlock, which the reduced and unreduced explicit engines shared)?"""
    return any(isinstance(s.trips, int) and s.trips > 1 and any(a.name in BARRIERS for a, _ in s.atoms)
               for seq in program for s in seq)


def assignments(text: str) -> list[dict[str, int]]:
    """The values to pin the program's `choose` at, one check each (none: one check as it is).
    Pinning keeps every engine on the same concrete protocol; the combined check over every
    assignment (engines/choices.py) is the explicit engine's, compared with these in the tests."""
    return [{"C": v} for v in range(3)] if CHOOSE in text else [{}]


def count(scope: Scope) -> int:
    return sum(1 for _ in programs(scope))


def sample(scope: Scope, every: int, offset: int = 0) -> Iterator[tuple[int, str]]:
    """Every ``every``-th program of the scope (a deterministic slice), with its index."""
    for i, program in enumerate(programs(scope)):
        if i % every == offset % every:
            yield i, render(scope, program, f"{scope.name.replace('-', '_')}_{i}")
