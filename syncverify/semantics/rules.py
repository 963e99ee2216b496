"""The transition rules of every barrier primitive — the single definition.

Each rule is a pure function on a small state tuple and cites the PTX text it
encodes (ptx-semantics.md). They are written over an `Arith` so that the same
code runs on Python integers (the explicit engine, the CUDA emitter's expected
values) and on Z3 terms (the symbolic engine): branching goes through
``A.ite``, never through a Python `if` on a state value.

Guards that make an operation undefined behaviour (arriving on more than is
pending, a tx-count out of range, …) are separate predicates, so an engine can
report them as diagnostics instead of silently applying the rule.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

MAX_COUNT = (1 << 20) - 1  # ptx-semantics §1.1: counts 1..2^20-1, tx in ±(2^20-1)


class Arith(Protocol):
    def ite(self, cond: Any, then: Any, other: Any) -> Any: ...
    def and_(self, *conds: Any) -> Any: ...
    def or_(self, *conds: Any) -> Any: ...
    def mod2(self, value: Any) -> Any: ...


class PyArith:
    """Arith over Python ints."""

    @staticmethod
    def ite(cond: Any, then: Any, other: Any) -> Any:
        return then if cond else other

    @staticmethod
    def and_(*conds: Any) -> Any:
        return all(conds)

    @staticmethod
    def or_(*conds: Any) -> Any:
        return any(conds)

    @staticmethod
    def mod2(value: Any) -> Any:
        return value % 2


PY = PyArith()


class Mbar(NamedTuple):
    """Abstract mbarrier state (§1.1): valid, phase k (unbounded; hardware exposes
    only its parity), pending arrivals, expected arrivals per phase, signed tx-count."""

    valid: Any
    k: Any
    pend: Any
    exp: Any
    tx: Any


FRESH = Mbar(0, 0, 0, 0, 0)


def mb_init(count: Any) -> Mbar:
    """`mbarrier.init [b], count` (§1.2): valid←1; k←0; exp←count; pend←count; tx←0."""
    return Mbar(1, 0, count, count, 0)


def mb_inval(s: Mbar) -> Mbar:
    """`mbarrier.inval` (§1.6): the object is no longer a barrier."""
    return Mbar(0, s.k, s.pend, s.exp, s.tx)


def mb_try_complete(s: Mbar, A: Arith = PY) -> Mbar:
    """Phase completion (§1.2, [O] probes): iff pend = 0 and tx = 0 *exactly*
    (a negative tx does not complete): k←k+1, pend←exp."""
    done = A.and_(s.pend == 0, s.tx == 0)
    return Mbar(s.valid, A.ite(done, s.k + 1, s.k), A.ite(done, s.exp, s.pend), s.exp, s.tx)


def mb_arrive(s: Mbar, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.arrive` with count n (§1.2): pend←pend−n, then try to complete."""
    return mb_try_complete(Mbar(s.valid, s.k, s.pend - n, s.exp, s.tx), A)


def mb_pending_increment(s: Mbar, n: Any) -> Mbar:
    """`cp.async.mbarrier.arrive` without `.noinc` (§1.2 [C]): "the pending count of the mbarrier
    object is incremented by 1 prior to the asynchronous mbarrier.arrive operation", per thread;
    no completion can follow an increment."""
    return Mbar(s.valid, s.k, s.pend + n, s.exp, s.tx)


def mb_arrive_drop(s: Mbar, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.arrive_drop` (§1.2): exp←exp−n for all later phases, then arrive(n)."""
    return mb_arrive(Mbar(s.valid, s.k, s.pend, s.exp - n, s.tx), n, A)


def mb_expect_tx(s: Mbar, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.expect_tx` (§1.2): tx←tx+n. PTX gives it no completing step, but an
    H200 probe saw it complete a phase with pend = 0 and tx = −n ([O]); we apply
    try_complete, which is the observed behaviour."""
    return mb_try_complete(Mbar(s.valid, s.k, s.pend, s.exp, s.tx + n), A)


def mb_complete_tx(s: Mbar, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.complete_tx` / a bulk copy's completion (§1.2, §5): tx←tx−n, try to complete."""
    return mb_try_complete(Mbar(s.valid, s.k, s.pend, s.exp, s.tx - n), A)


def mb_arrive_expect_tx(s: Mbar, nbytes: Any, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.arrive.expect_tx` (§1.2): "expect-tx operation is performed prior to
    the arrive-on" — as one atomic step, so no completion between the two."""
    return mb_arrive(Mbar(s.valid, s.k, s.pend, s.exp, s.tx + nbytes), n, A)


def mb_arrive_drop_expect_tx(s: Mbar, nbytes: Any, n: Any, A: Arith = PY) -> Mbar:
    """`mbarrier.arrive_drop.expect_tx`: as `mb_arrive_expect_tx`, with the arrive an arrive_drop."""
    return mb_arrive_drop(Mbar(s.valid, s.k, s.pend, s.exp, s.tx + nbytes), n, A)


def mb_wait_passes(s: Mbar, parity: Any, A: Arith = PY) -> Any:
    """`mbarrier.try_wait.parity p` (§1.3, [O] 6/6 probes): returns True iff (k mod 2) ≠ p."""
    return A.mod2(s.k) != A.mod2(parity)


def first_wait_phase(k: Any, parity: Any, A: Arith = PY) -> Any:
    """The phase a waiter's first wait (no phase observed since the init) means, with the
    barrier in phase k when it runs: PTX's validity window — "phaseParity operand specifies
    the parity of either the current phase or the immediately preceding phase" — so the one
    of phases k−1, k whose parity is p. Phase −1 does not exist: on a fresh barrier (k = 0)
    parity 1 means phase 1, and the wait passes at once without observing anything (CUTLASS's
    producer start, "the buffer starts empty"). For k ∈ {0, 1} this is phase p itself.

    Whether the waiter could also have run in an earlier window (and so meant an earlier
    phase) is not decided here: its observation is checked against the next completion on
    causality (SV501), which reports the interleaving where it runs early."""
    same = A.mod2(k) == A.mod2(parity)
    return A.ite(same, k, A.ite(k == 0, 1, k - 1))


def intended_phase(last_observed: Any, parity: Any, A: Arith = PY) -> Any:
    """The phase a parity wait means (§1.3 proof obligation): the first phase at or
    after the last one this waiter saw complete whose parity is p. A fresh waiter
    has seen phase −1 (so parity 1 on a fresh barrier means "the buffer starts
    empty", CUTLASS's producer start state)."""
    return A.ite(A.mod2(last_observed) == A.mod2(parity), last_observed, last_observed + 1)


def wait_aliases(s: Mbar, intended: Any) -> Any:
    """§1.3: a wait is valid only while k ∈ {j, j+1}; k > j+1 means the phase it
    waits for completed and was overtaken (stale waiter, SV501)."""
    return s.k > intended + 1


def arrive_overflows(s: Mbar, n: Any) -> Any:
    """§1.2: arrive(n) with n > pend drives pend negative — out of range, UB (SV504)."""
    return n > s.pend


def tx_out_of_range(tx: Any, A: Arith = PY) -> Any:
    """§1.1: the tx-count must stay within ±(2^20−1) (SV503)."""
    return A.or_(tx < -MAX_COUNT, tx > MAX_COUNT)


class NamedBar(NamedTuple):
    """One named barrier id of one CTA (§3): the count of the open generation
    (None: every non-exited thread, `__syncthreads`), threads arrived, the
    generation number, the warps that arrived (a bitmask), and the static site
    of the first aligned arrival (for SV204)."""

    count: int | None
    arrived: int
    gen: int
    warps: int
    site: int


NB_FRESH = NamedBar(None, 0, 0, 0, 0)


def nb_arrive(s: NamedBar, count: Any, threads: int, warp_bit: int, site: Any, A: Arith = PY) -> NamedBar:
    """`bar.sync/bar.arrive a, b` (§3): the barrier counts threads, a warp at a time;
    the first arrival of a generation fixes its count."""
    first = s.arrived == 0
    return NamedBar(A.ite(first, count, s.count), s.arrived + threads, s.gen, s.warps | warp_bit,
                    A.ite(first, site, s.site))


def nb_complete(s: NamedBar, expected: Any, A: Arith = PY, open_count: Any = None) -> NamedBar:
    """Completion (§3): when the count is reached the waiters restart and the barrier
    "is reinitialized so that it can be immediately reused" — a new generation, whose
    count is open again (``open_count``: how the caller writes "not fixed yet")."""
    done = s.arrived >= expected
    return NamedBar(A.ite(done, open_count, s.count), A.ite(done, 0, s.arrived), A.ite(done, s.gen + 1, s.gen),
                    A.ite(done, 0, s.warps), A.ite(done, 0, s.site))


class ClusterBar(NamedTuple):
    """The cluster barrier (§4): generation, threads arrived, arrived warps (bitmask over processes)."""

    gen: int
    arrived: int
    procs: int


CB_FRESH = ClusterBar(0, 0, 0)


def tm_join(arrived: Any, gen: Any, side: int, A: Arith = PY) -> tuple[Any, Any, Any]:
    """A warp of CTA side ``side`` (rank & 1) joins the cta_group 2 rendezvous of its CTA pair
    (§7: tcgen05.alloc/dealloc with cta_group::2 act collectively): (sides arrived, generation,
    whether it completes). The second side completes it: the generation moves on and the
    rendezvous re-arms; the first one waits for that generation."""
    joined = arrived | (1 << side)
    completes = joined == 3
    return A.ite(completes, 0, joined), A.ite(completes, gen + 1, gen), completes


def cb_arrive(s: ClusterBar, threads: int, proc_bit: int) -> ClusterBar:
    """`barrier.cluster.arrive` (§4): marks arrival; "each thread must arrive only once
    before the barrier completes" (see cb_arrives_twice)."""
    return ClusterBar(s.gen, s.arrived + threads, s.procs | proc_bit)


def cb_arrives_twice(token: Any, gen: Any, A: Arith = PY) -> Any:
    """SV205: "Each thread must arrive at the barrier only once before the barrier completes"
    (§4). ``token``: the generation of the warp's last arrival not yet followed by its wait
    (−1: none); ``gen``: the barrier's current generation. An arrival is a second one only
    while the generation of the earlier one has not completed; once it has, the warp may
    arrive on the next one without having waited (Triton-TLX partitions arrive on entry and
    `cluster.sync` later)."""
    return A.and_(token >= 0, gen <= token)


def cb_completes(s: ClusterBar, expected: Any, A: Arith = PY) -> Any:
    """Does the generation complete (§4)? Once some thread arrived, when every thread of the
    cluster that has not exited has arrived (``expected``: the threads not exited)."""
    return A.and_(s.arrived > 0, s.arrived >= expected)


def cb_complete(s: ClusterBar, expected: Any, A: Arith = PY) -> ClusterBar:
    """Completes and re-arms when all non-exited threads of the cluster arrived (§4)."""
    done = cb_completes(s, expected, A)
    if done is False:  # decided on concrete values: the barrier is left as it is
        return s
    return ClusterBar(A.ite(done, s.gen + 1, s.gen), A.ite(done, 0, s.arrived), A.ite(done, 0, s.procs))
