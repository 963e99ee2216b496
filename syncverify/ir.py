"""The protocol IR: frozen, typed dataclasses with a source span on every node.

The front end (``syncverify.lang``) produces it; every back end consumes it:
the semantics and explicit engine, the Z3 encoder, the CUDA emitter. Names are
resolved (a reference knows whether it names an mbarrier, a buffer or a named
barrier), parameters are substituted, and expressions are folded as far as they
are constant, so an engine only evaluates what depends on the executing CTA,
role instance or loop variables.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, TypeAlias

from .diagnostics import Span
from .ir_expr import BinOp, Builtin, Cond, Const, Expr, InRole, ObjKind, Pick, Ref, UnOp, Var
from .ir_global import Flag, FlagOp, GlobalScope, GridSync, ThreadFence
from .ir_tcgen05 import TcFence, TcMma, TcWait, TmemAccess, TmemAlloc, TmemRelinquish, UmmaCommit

# the expressions (ir_expr.py), the global-memory nodes (ir_global.py) and the tcgen05 nodes
# (ir_tcgen05.py), re-exported
__all__ = [
    "BinOp",
    "Builtin",
    "Cond",
    "Const",
    "Expr",
    "Flag",
    "FlagOp",
    "GlobalScope",
    "GridSync",
    "InRole",
    "ObjKind",
    "Pick",
    "Ref",
    "TcFence",
    "TcMma",
    "TcWait",
    "ThreadFence",
    "TmemAccess",
    "TmemAlloc",
    "TmemRelinquish",
    "UmmaCommit",
    "UnOp",
    "Var",
]

# ---------------------------------------------------------------------------
# Operations. Each names the primitive of ptx-semantics.md it stands for; the
# semantics of each lives in syncverify.semantics.rules, nowhere else.

Sem = Literal["release", "acquire", "relaxed"]
Scope = Literal["cta", "cluster"]


@dataclass(frozen=True, slots=True)
class MbarInit:
    bar: Ref
    count: Expr | None  # None: the declaration's count
    span: Span


@dataclass(frozen=True, slots=True)
class MbarInval:
    bar: Ref
    span: Span


@dataclass(frozen=True, slots=True)
class MbarArrive:
    """`arrive`, `arrive.expect_tx`, `arrive_drop` (with or without expect_tx)."""

    bar: Ref
    count: Expr
    tx_bytes: Expr | None
    drop: bool
    sem: Sem
    scope: Scope
    remote: Expr | None
    span: Span
    # `mbarrier.arrive.shared::cta` (the local form) given a peer's address (`@ CTA`): PTX defines
    # the .shared::cta form only on the executing CTA's own shared memory, so a target CTA other
    # than the executing one is an error (SV407), not a remote arrive.
    local_form: bool = False


@dataclass(frozen=True, slots=True)
class MbarTx:
    """`expect_tx` (kind 'expect') or `complete_tx` (kind 'complete') by a thread."""

    kind: Literal["expect", "complete"]
    bar: Ref
    tx_bytes: Expr
    remote: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class MbarWait:
    bar: Ref
    parity: Expr
    sem: Sem
    scope: Scope
    span: Span


@dataclass(frozen=True, slots=True)
class MbarTestWait:
    """`test_wait B parity P` (`mbarrier.test_wait.parity`): the non-blocking probe, used once and
    its result not branched on. It never blocks; when the phase it asks about has completed it
    returns true with the acquire of a `wait`, otherwise it returns false and orders nothing. A
    loop that spins on it until it returns true is a `wait`."""

    bar: Ref
    parity: Expr
    sem: Sem
    scope: Scope
    span: Span


@dataclass(frozen=True, slots=True)
class MbarProbe:
    """The test of `if try_wait B parity P { … } else { … }` (`if test_wait …`): one
    `mbarrier.try_wait.parity` / `mbarrier.test_wait.parity` whose result a branch uses.

    PTX lets a `try_wait` time out and a `test_wait` never blocks, so the probe may return
    false at any time; it returns true only once the phase its parity names has completed, and
    then it is the wait (`MbarWait`): the acquire (or, `.relaxed`, the observations), the
    waiter's phase history, the consumption rule. False orders nothing. A probe is never alone
    in the IR: it is the ``probe`` of an ``If``, whose ``then`` runs on true and ``orelse`` on
    false (`if !try_wait` swaps them). ``test``: spelled `test_wait` (the same model; the
    emitter and extraction keep the spelling)."""

    bar: Ref
    parity: Expr
    sem: Sem
    scope: Scope
    test: bool
    span: Span


@dataclass(frozen=True, slots=True)
class BarSync:
    """`bar.sync id, n` / `syncthreads` (id 0, count None = every non-exited thread).

    ``aligned``: `bar.sync` = `barrier.sync.aligned`, which every thread must reach at the same
    instruction (reaching it from different sites is SV204); `barrier.sync` without `.aligned`
    may be reached from divergent code (ptx-semantics §3)."""

    bar_id: Expr
    count: Expr | None
    span: Span
    aligned: bool = True


@dataclass(frozen=True, slots=True)
class BarArrive:
    """`bar.arrive id, n` (= `barrier.arrive.aligned`) or `barrier.arrive id, n` (``aligned`` False)."""

    bar_id: Expr
    count: Expr
    span: Span
    aligned: bool = True


@dataclass(frozen=True, slots=True)
class ClusterArrive:
    relaxed: bool
    span: Span


@dataclass(frozen=True, slots=True)
class ClusterWait:
    span: Span


@dataclass(frozen=True, slots=True)
class Syncwarp:
    span: Span


@dataclass(frozen=True, slots=True)
class Access:
    """A generic-proxy `read` or `write` of a buffer slot (remote: DSMEM).

    ``part`` / ``lo``..``hi``: the region of the slot it touches (semantics.families.regions):
    the executing warp's (warpgroup's) part of the slot, or the bytes ``lo ..< hi``; neither:
    the whole slot."""

    kind: Literal["read", "write"]
    buf: Ref
    remote: Expr | None
    span: Span
    part: Literal["warp", "warpgroup"] | None = None
    lo: Expr | None = None
    hi: Expr | None = None


@dataclass(frozen=True, slots=True)
class TmaLoad:
    """`tma.load dst bytes n -> bar [multicast mask]`: cp.async.bulk into shared memory."""

    buf: Ref
    tx_bytes: Expr
    bar: Ref
    multicast: Expr | None
    span: Span
    # 2 (`cta_group 2`, sm_100a): the completion is signalled on the barrier of the pair's leader
    # (the even CTA, rank & ~1) instead of the destination CTA's own
    cta_group: int = 1
    clc: bool = False  # `clc.try_cancel`: the same write and completion, of a 16-byte cancel response
    # `map T`: the tensor map the copy's tensormap proxy reads, from its issue until the copy completes
    # (semantics/families/tensormap.py); None: a map no `tensormap` declaration names (never rewritten)
    tmap: Ref | None = None


@dataclass(frozen=True, slots=True)
class TmaStore:
    """`tma.store src`: bulk copy shared -> global; reads its source asynchronously."""

    buf: Ref
    tx_bytes: Expr
    span: Span


GroupUnit = Literal["bulk", "wgmma", "cp_async"]


@dataclass(frozen=True, slots=True)
class GroupCommit:
    """`bulk.commit`, `wgmma.commit` or `cp.async.commit_group`."""

    unit: GroupUnit
    span: Span


@dataclass(frozen=True, slots=True)
class GroupWait:
    """`bulk.wait_read n`, `wgmma.wait n` or `cp.async.wait_group n`: at most n most recent groups
    left pending."""

    unit: GroupUnit
    pending: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class CpAsync:
    """`cp.async B`: the non-bulk per-thread copy global -> shared::cta (`cp.async.ca/.cg.shared.global`,
    4/8/16 bytes per thread; CUTLASS `SM80_CP_ASYNC_CACHE*`). Each executing thread's write of its
    part of slot B is unordered with everything, its own later accesses included, until a
    `cp.async.wait_group`/`wait_all` of that thread retires its group, or a
    `cp.async.mbarrier.arrive` of that thread arrives (which releases it to the phase)."""

    buf: Ref
    span: Span


@dataclass(frozen=True, slots=True)
class CpAsyncArrive:
    """`cp.async.mbarrier.arrive[.noinc] B`: an arrive-on of B by the executing thread, made
    asynchronously once every cp.async the thread issued before it has completed. Without
    ``noinc`` the pending count is first incremented by one (at issue), so the async arrive-on
    leaves the phase's count unchanged; with ``noinc`` it counts towards the phase."""

    bar: Ref
    noinc: bool
    span: Span


@dataclass(frozen=True, slots=True)
class WgmmaRead:
    buf: Ref
    span: Span


@dataclass(frozen=True, slots=True)
class Fence:
    """`fence.proxy.async[.SPACE]`, its split halves, or `fence.mbarrier_init`.

    ``space`` is the state space a proxy fence covers (PTX: "The memory ordering is limited only
    to operations performed on objects in the state space specified. If no state space is
    specified, then the memory ordering applies on all state spaces"): ``all`` (plain
    `fence.proxy.async`), ``shared::cta`` (the executing CTA's shared memory), ``shared::cluster``
    (the shared memory of every CTA of the cluster) or ``global`` (no shared-memory slot).
    ``sem`` names a uni-directional half: ``release`` is
    `fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster`, ``acquire`` is
    `fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster`; what each orders
    is defined once, in semantics/families/proxy_fence.py."""

    kind: Literal["proxy_async", "mbarrier_init"]
    span: Span
    space: Literal["all", "shared::cta", "shared::cluster", "global"] = "all"
    sem: Literal["", "release", "acquire"] = ""


@dataclass(frozen=True, slots=True)
class TensormapReplace:
    """`tensormap.replace T`: a generic-proxy write of tensor map T (PTX `tensormap.replace` of a copy
    that is then published, or a `st.global` rewrite of the map): a later copy reading T must be ordered
    after it through `fence.proxy.tensormap.release` and `.acquire` (semantics/families/tensormap.py)."""

    map: Ref
    span: Span


@dataclass(frozen=True, slots=True)
class TensormapFence:
    """`fence.proxy.tensormap::generic.release.SCOPE` (``map`` None) or
    `fence.proxy.tensormap::generic.acquire.SCOPE [T]`: the halves of the proxy release/acquire pattern
    between a generic rewrite of a tensor map and the tensormap proxy's read of it by a later copy.
    ``scope``: the PTX scope (cta, cluster, gpu, sys)."""

    sem: Literal["release", "acquire"]
    map: Ref | None
    scope: str
    span: Span


Op: TypeAlias = (
    MbarInit | MbarInval | MbarArrive | MbarTx | MbarWait | BarSync | BarArrive | ClusterArrive
    | ClusterWait | Syncwarp | Access | TmaLoad | TmaStore | GroupCommit | GroupWait | WgmmaRead
    | Fence | TmemAlloc | UmmaCommit | TcMma | TmemAccess | TcWait | TcFence | TmemRelinquish
    | MbarTestWait | CpAsync | CpAsyncArrive | FlagOp | ThreadFence | GridSync | MbarProbe
    | TensormapReplace | TensormapFence
)

# The tcgen05 operations beyond allocation and commit (Blackwell, sm_100a)
TCGEN05_OPS: tuple[type, ...] = (TcMma, TmemAccess, TcWait, TcFence, TmemRelinquish)

def blackwell_op_name(op: Op | None) -> str | None:
    """How the spec spells a Blackwell-only operation (tcgen05, or a cta_group 2 TMA copy), else None."""
    if isinstance(op, TmemAlloc):
        return "tmem.dealloc" if op.dealloc else "tmem.alloc"
    if isinstance(op, UmmaCommit):
        return "tcgen05.commit"
    if isinstance(op, TcMma):
        return f"tcgen05.{op.kind}"
    if isinstance(op, TmemAccess):
        return f"tcgen05.{op.kind}"
    if isinstance(op, TcWait):
        return f"tcgen05.wait::{op.kind}"
    if isinstance(op, TcFence):
        return f"tcgen05.fence::{op.kind}_thread_sync"
    if isinstance(op, TmemRelinquish):
        return "tmem.relinquish"
    if isinstance(op, TmaLoad) and op.cta_group == 2:
        return "tma.load cta_group 2"
    return None


def tensor_core_async(op: Op | None) -> bool:
    """A tcgen05 commit, mma/cp, ld/st, wait or fence, or a 2-SM copy: the operations that only the
    explicit machine models in full (the Promela export refuses them; the bmc encoding refuses
    them too, except a commit that is the protocol's only one of them: docs/engines.md)."""
    return isinstance(op, UmmaCommit | TcMma | TmemAccess | TcWait | TcFence | TmemRelinquish) or (
        isinstance(op, TmaLoad) and op.cta_group == 2)


# ---------------------------------------------------------------------------
# Statements


@dataclass(frozen=True, slots=True)
class Let:
    """`let NAME = EXPR;`; with ``probe`` set, `let NAME = try_wait B parity P;`: the probe's result
    (1 or 0, a search step: MbarProbe) is the value, CUTLASS's `ConsumerToken`, and ``value`` is
    the constant 1, never evaluated. With a FlagOp as ``probe`` (`let v = atom.add.acq_rel F, 1;`,
    `let v = ld.acquire F;`), the value is the one the flag read returns (semantics/families/globalmem.py
    says which values a read may return; the search explores each), and ``value`` is the constant 0,
    never evaluated: "the last CTA to arrive" tests it with an `if`."""

    name: str
    value: Expr
    span: Span
    probe: MbarProbe | FlagOp | None = None


@dataclass(frozen=True, slots=True)
class For:
    var: str
    lo: Expr
    hi: Expr  # exclusive
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class If:
    """`if EXPR { … } else { … }`; with ``probe`` set, `if try_wait B parity P { … } else { … }`:
    the branch taken is the probe's result (a search step, MbarProbe), and ``cond`` is the
    constant 1, never evaluated."""

    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span
    probe: MbarProbe | None = None


@dataclass(frozen=True, slots=True)
class Elect:
    """A block run by one thread of each executing warp, or by one thread of a role instance.

    ``per_warp`` (`elect`, old spelling `per warp`): `elect.sync` with a full mask, as in
    `cute::elect_one_sync()` -- every warp that reaches the block elects one lane (the model
    fixes lane 0), so a warpgroup makes four elected arrivals. Not ``per_warp`` (`first thread`):
    only the first thread of ``role``'s instance runs it (thread 0 of the CTA when ``role`` is
    None), as CUDA writes ``if (threadIdx.x == 0)`` or ``if (warp_idx == 0 && elect_one_sync())``.
    """

    body: tuple[Stmt, ...]
    role: str | None
    per_warp: bool
    span: Span


Stmt: TypeAlias = Let | For | If | Elect | Op


def ops_of(body: tuple[Stmt, ...]) -> Iterator[Op]:
    """Every operation of a body, nested ones included, in source order."""
    for s in body:
        if isinstance(s, Let) and s.probe is not None:
            yield s.probe
        if isinstance(s, For | Elect):
            yield from ops_of(s.body)
        elif isinstance(s, If):
            if s.probe is not None:
                yield s.probe
            yield from ops_of(s.then)
            yield from ops_of(s.orelse)
        elif not isinstance(s, Let):
            yield s

# ---------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True, slots=True)
class Role:
    """A role: instance i covers threads [lo, hi) of every CTA."""

    name: str
    instances: tuple[tuple[int, int], ...]
    array: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    slots: int | None  # None: a scalar buffer
    bytes: int
    span: Span
    # "global": a `global` declaration: one copy for the whole grid (not one per CTA), accessed
    # only by `read`/`write` (semantics/families/globalmem.py); "register": a `regs` declaration: registers
    # of each executing thread, read asynchronously by an RS-form wgmma (semantics/families/async_operands.py)
    # "tensormap": a `tensormap` declaration: tensor maps (CUtensorMap) in global memory, one copy for the
    # whole grid, read by the tensormap proxy of a TMA copy that names it (semantics/families/tensormap.py)
    space: Literal["shared", "global", "register", "tensormap"] = "shared"


@dataclass(frozen=True, slots=True)
class TmemRegion:
    """`tmem NAME[N] cols C;`: N regions of C tensor-memory columns each (in every CTA), the unit
    of race detection for tcgen05.mma/cp/ld/st (an accumulator, or one stage of a double buffer)."""

    name: str
    slots: int | None
    cols: int
    span: Span


@dataclass(frozen=True, slots=True)
class MbarStorage:
    """`mbarrier B[N] in buf[S] at OFF;`: the barriers' 8-byte objects lie in slot S of buffer
    ``buffer`` (in every CTA), element e at bytes ``offset + 8e ..< offset + 8e + 8``. The bytes are
    a barrier between its `init` and its `inval` and data otherwise (PTX: an mbarrier "must be
    invalidated before the memory is used for any other purpose"); families/storage.py checks it."""

    buffer: str
    slot: int
    offset: int


@dataclass(frozen=True, slots=True)
class Mbarrier:
    name: str
    size: int | None  # None: a scalar barrier
    count: int | None
    span: Span
    storage: MbarStorage | None = None  # None: the barrier's bytes are used for nothing else


@dataclass(frozen=True, slots=True)
class Choice:
    """A `choose` declaration: values picked once per launch (or once per CTA, ``per_cta``),
    one per element for an array (``size``), from ``lo..hi`` (half-open). The checker covers
    every assignment; ``pinned`` when `-D NAME=V` fixed it to V (then lo..hi is V..V+1)."""

    name: str
    per_cta: bool
    size: int | None
    lo: int
    hi: int
    pinned: bool
    cells: int  # values one assignment picks: (CTAs if per_cta) x (size or 1)
    span: Span


Assignment: TypeAlias = tuple[tuple[str, tuple[int, ...]], ...]  # choose name -> its values, CTA-major


@dataclass(frozen=True, slots=True)
class Expectation:
    """The `// expect:` header: the exact set of error codes (empty = safe), and warnings that must appear."""

    errors: frozenset[str]
    warnings: frozenset[str]
    span: Span


@dataclass(frozen=True, slots=True)
class ParamSite:
    """One place where params enter the protocol, with the params kept as variables.

    The IR itself has every param substituted, so it cannot tell which values came from which
    param; the all-iterations lift needs exactly that (which values change with the trip count,
    and how). ``kind`` is "param" (the definition of param ``target``; not recorded for a param
    set with -D), "bound" (a `for` bound) or "value" (any other expression: declarations,
    conditions, indices, counts). ``expr`` reads params as ``Var`` nodes (params cannot be
    shadowed by `let` or `for` names), besides the loop variables, `i`, and the built-ins."""

    kind: Literal["param", "bound", "value"]
    expr: Expr
    span: Span
    target: str = ""


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    path: str
    params: tuple[tuple[str, int], ...]
    cluster: int
    threads: int
    roles: tuple[Role, ...]
    buffers: tuple[Buffer, ...]
    mbarriers: tuple[Mbarrier, ...]
    body: tuple[Stmt, ...]
    expect: Expectation | None
    span: Span
    loop_params: tuple[str, ...] = ()  # params used in `for` bounds: what "ITERS=N" bounds name
    source: str = ""  # the spec text, for quoting operations in traces
    choices: tuple[Choice, ...] = ()  # `choose` declarations, in order
    # The values of the `choose` declarations this protocol was built with. Empty when the
    # protocol was loaded without one: then every choice takes its first value, and a check
    # must cover the others (engines/choices.py does).
    assignment: Assignment = ()
    # where params are read (for the lift's trip-count analysis); not part of equality
    param_sites: tuple[ParamSite, ...] = field(default=(), compare=False, repr=False)
    tmem_regions: tuple[TmemRegion, ...] = ()  # `tmem` declarations (tensor-memory regions)
    flags: tuple[Flag, ...] = ()  # `flag` declarations (counters in global memory)
    # A grid of several clusters (`grid N;`): ``cluster`` is then the number of CTAs modelled (the
    # grid) and ``cluster_dim`` the CTAs per cluster; 0 when the protocol is one cluster.
    cluster_dim: int = 0
    # `launch cooperative;` / `launch ordered;` / "" (none: CTAs may run one after another, in any order)
    launch: str = ""
    # The -D values the protocol was loaded with: a proof that reloads the source at other trip counts (the
    # lift) must reload it with these, or it proves the spec's defaults instead; not part of equality
    defines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def warps(self) -> int:
        return (self.threads + 31) // 32

    def role(self, name: str) -> Role:
        return next(r for r in self.roles if r.name == name)

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def tmem_region(self, name: str) -> TmemRegion:
        return next(t for t in self.tmem_regions if t.name == name)

    def flag(self, name: str) -> Flag:
        return next(f for f in self.flags if f.name == name)

    def cluster_of(self, cta: int) -> int:
        """The cluster a CTA of the model belongs to (0 for every CTA of a one-cluster protocol)."""
        return cta // self.cluster_dim if self.cluster_dim else 0

    def mbarrier(self, name: str) -> Mbarrier:
        return next(b for b in self.mbarriers if b.name == name)

    def param(self, name: str) -> int:
        return dict(self.params)[name]

    def text_of(self, span: Span | None, limit: int = 80) -> str:
        """The spec text a span covers, on one line (for traces and generated comments)."""
        lines = _lines_of(self.source)
        if span is None or not 0 < span.line <= len(lines):
            return ""
        text = lines[span.line - 1]
        text = text[span.column - 1: span.end_column - 1] if span.end_line == span.line else text[span.column - 1:]
        return " ".join(text.split())[:limit]


@lru_cache(maxsize=4)
def _lines_of(source: str) -> tuple[str, ...]:
    """A spec's lines, split once: a report quotes a line per step of its trace (17,034 quotes of
    the 80 KB extracted cooperative GEMM split it each time, 1.3 s)."""
    return tuple(source.splitlines())
