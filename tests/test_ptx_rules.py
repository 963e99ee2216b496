"""Rules settled from the PTX text, each from both sides: the case PTX allows stays clean, its near twin
that PTX makes undefined stays reported. Protocols that matter to the bmc engine are cross-checked there."""

from __future__ import annotations

import os

import pytest
import z3
from test_engine_regressions import DSMEM_CTA_SCOPE
from test_promela import CC_FLAGS, needs_spin

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import Severity
from syncverify.export import export_model
from syncverify.export.spin import run_spin
from syncverify.result import CheckResult
from syncverify.semantics import rules


def check(text: str, engine: str = "explicit", strict: bool = False) -> CheckResult:
    return check_protocol(load(text, path="t.sync"), Options(engine=engine, strict=strict))


def errors(r: CheckResult) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity is Severity.ERROR}


def warnings(r: CheckResult) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity is Severity.WARNING}


# ============================================================================ first wait: PTX's window
#
# PTX mbarrier.test_wait/try_wait: the wait is "valid only for: the current incomplete phase, for which
# waitComplete returns False; the immediately preceding phase, for which waitComplete returns True"
# (ptx-semantics.md §1.3). A first wait therefore means the phase of {k-1, k} with its parity.

def test_first_wait_phase_is_the_window_phase_with_the_parity():
    assert [rules.first_wait_phase(k, 0) for k in range(5)] == [0, 0, 2, 2, 4]
    assert [rules.first_wait_phase(k, 1) for k in range(5)] == [1, 1, 1, 3, 3]
    for k in range(1, 6):
        for p in (0, 1):
            j = rules.first_wait_phase(k, p)
            assert j % 2 == p and k - 1 <= j <= k and not rules.wait_aliases(rules.Mbar(1, k, 1, 1, 0), j)


def test_first_wait_phase_over_bitvectors_matches_python():
    """The bmc engine evaluates the same function over Z3 bit-vectors (its Arith)."""
    from syncverify.semantics.families.encoding import Z3A
    k = z3.BitVec("k", 16)
    for p in (0, 1):
        for value in range(6):
            got = z3.simplify(z3.substitute(rules.first_wait_phase(k, p, Z3A), (k, z3.BitVecVal(value, 16))))
            assert got.as_signed_long() == rules.first_wait_phase(value, p)


LATE_FIRST_WAIT = """\
protocol late_first_wait {
  cta threads 96;
  role producer = warp 0;
  role early = warp 1;
  role late = warp 2;
  smem buf[2] bytes 128;
  mbarrier full count 1;
  mbarrier ack count 32;
  if producer { elect { init full; init ack; } }
  syncthreads;
  if producer {
    elect { write buf[0]; arrive full; }
    wait ack parity 0;
    elect { write buf[1]; arrive full; }
    wait ack parity 1;
  }
  if early { wait full parity 0; read buf[0]; arrive ack; wait full parity 1; read buf[1]; arrive ack; }
  bar.sync 1, 96;                                  // everyone: phases 0 and 1 are over
  if producer { elect { write buf[0]; arrive full; } }
  if late { wait full parity 0; read buf[0]; }     // first wait, barrier in phase 2: means phase 2
}
"""

# near twin: `late` is not ordered after phase 1, so its first wait can also run in phase 0 or 1
LATE_FIRST_WAIT_UNORDERED = LATE_FIRST_WAIT.replace("  bar.sync 1, 96;", "  if producer || early { bar.sync 1, 64; }")


def test_late_first_wait_past_phase_1_is_clean():
    r = check(LATE_FIRST_WAIT)
    assert not r.diagnostics, [d.message for d in r.diagnostics]


def test_unordered_first_wait_is_still_stale():
    r = check(LATE_FIRST_WAIT_UNORDERED)
    assert "SV501" in errors(r)
    assert {d.span.line for d in r.diagnostics if d.code == "SV501"} == {20}


# the same with the phases filled by bulk copies: a landing completes the phase the first wait may observe
STALE_FIRST_WAIT_TMA = """\
protocol stale_tma {
  cta threads 96;
  role producer = warp 0;
  role fast = warp 1;
  role slow = warp 2;
  smem buf[2] bytes 128;
  mbarrier full count 1;
  mbarrier ack count 32;
  if producer { elect { init full; init ack; } }
  syncthreads;
  if producer {
    elect { arrive.expect_tx full bytes 128; tma.load buf[0] -> full; }
    wait ack parity 0;
    elect { arrive.expect_tx full bytes 128; tma.load buf[1] -> full; }
    wait ack parity 1;
    elect { arrive full; }
  }
  if fast { wait full parity 0; arrive ack; wait full parity 1; arrive ack; wait full parity 0; }
  if slow { wait full parity 0; read buf[0]; }
}
"""


@pytest.mark.parametrize("text, expected", [(LATE_FIRST_WAIT, set()), (LATE_FIRST_WAIT_UNORDERED, {"SV501"}),
                                            (STALE_FIRST_WAIT_TMA, {"SV501"})],
                         ids=["ordered", "unordered", "tma"])
def test_first_wait_window_with_the_reductions_off_agrees(text, expected):
    """A completion moves the phase a first wait means, so the reduction must not take an arrive or a
    landing before such a wait (Reduction._completes_fresh_phase_before_a_first_wait, _can_precede)."""
    from syncverify.engines.explicit import Budget, explore
    from syncverify.semantics.machine import Machine
    proto = load(text, path="t.sync")
    for reduce in (True, False):
        found = explore(proto, Budget(), Machine(proto), symmetry=reduce, reduce=reduce)
        assert {d.code for d in found.diagnostics if d.is_error} == expected, reduce


@pytest.mark.parametrize("text, expected", [(LATE_FIRST_WAIT, set()), (LATE_FIRST_WAIT_UNORDERED, {"SV501"})],
                         ids=["ordered", "unordered"])
def test_bmc_agrees_on_the_first_wait_window(text, expected):
    if not expected and not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("the safe twin's solve takes about 15 s (2026-12-06); its SV501 twin runs in CI; "
                    "run with SYNCVERIFY_SLOW=1")
    r = check(text, engine="bmc")
    assert errors(r) == expected


# ============================================================ SV205: PTX's "before the barrier completes"
#
# PTX barrier.cluster: "Each thread must arrive at the barrier only once before the barrier completes". Triton-TLX's
# fixed partition arrives (relaxed) on entry and runs cluster.sync later; a named barrier with the other warp, which
# passed its cluster.sync, shows the first generation is over before the second arrive.

TLX_PROLOGUE = """\
protocol tlx_prologue {
  cluster 2;
  cta threads 64;
  role fixed = warp 0;
  role other = warp 1;
  if fixed { cluster.arrive.relaxed; }
  if other { cluster.sync; }
  bar.sync 1, 64;                  // `other` passed its wait: generation 0 completed
  if fixed { cluster.sync; }       // arrives on generation 1 without having waited: legal
  if other { cluster.sync; }
}
"""

# near twin: nothing orders the second arrive after generation 0's completion
TLX_PROLOGUE_EARLY = TLX_PROLOGUE.replace("  bar.sync 1, 64;", "  if other { bar.sync 1, 32; }")


def test_cb_arrives_twice_only_before_completion():
    assert not rules.cb_arrives_twice(-1, 0)
    assert rules.cb_arrives_twice(0, 0)  # arrived on generation 0, still open
    assert not rules.cb_arrives_twice(0, 1)  # generation 0 completed
    assert rules.cb_arrives_twice(3, 3) and not rules.cb_arrives_twice(2, 3)


@pytest.mark.parametrize("engine", ["explicit", "bmc"])
def test_rearrive_after_the_generation_completed_is_legal(engine):
    r = check(TLX_PROLOGUE, engine=engine)
    assert not errors(r), [d.message for d in r.diagnostics]


@pytest.mark.parametrize("engine", ["explicit", "bmc"])
def test_rearrive_before_the_generation_completed_is_sv205(engine):
    r = check(TLX_PROLOGUE_EARLY, engine=engine)
    assert errors(r) == {"SV205"}
    assert {d.span.line for d in r.diagnostics if d.code == "SV205"} == {9}


def test_rearrive_is_not_hidden_by_the_reduction():
    """Whether a second arrive breaks SV205 depends on the order of other warps' arrivals: with the
    reductions on, the interleaving where it comes first must still be explored."""
    from syncverify.engines.explicit import Budget, explore
    from syncverify.semantics.machine import Machine
    proto = load(TLX_PROLOGUE_EARLY, path="t.sync")
    for reduce in (True, False):
        found = explore(proto, Budget(), Machine(proto), symmetry=reduce, reduce=reduce)
        assert "SV205" in {d.code for d in found.diagnostics}, reduce


# ============================================================================ SV602: the acquire side is a warning
#
# PTX memory model: a release and an acquire synchronize only when they are morally strong, i.e. "each operation's
# scope includes the thread executing the other". CUTLASS's ClusterBarrier::wait acquires with the default .cta
# scope on barriers its peers release with .release.cluster remote arrives. The acquire side is therefore the
# SV602 warning (an error with --strict); a remote arrive that publishes generic data with a .cta release is
# still the error.

# DSMEM_CTA_SCOPE (a DSMEM store into CTA 0, signalled by a remote arrive, read after a wait) with the release
# at .cluster scope and the wait left at the default .acquire.cta, as CUTLASS waits
DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE = DSMEM_CTA_SCOPE.replace("arrive m @ 0", "arrive.release.cluster m @ 0")
assert DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE != DSMEM_CTA_SCOPE

DSMEM_CTA_RELEASE = DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE.replace("arrive.release.cluster m @ 0", "arrive m @ 0")


def test_cta_scope_acquire_of_cluster_released_data_is_a_warning():
    r = check(DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE)
    assert not errors(r) and r.verdict.value == "safe"
    assert warnings(r) == {"SV602"}
    (d,) = [d for d in r.diagnostics if d.code == "SV602"]
    assert d.span.line == 9


def test_cta_scope_acquire_warning_is_an_error_under_strict():
    assert check(DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE, strict=True).verdict.value == "violation"


def test_cta_scope_release_of_data_stays_an_error():
    r = check(DSMEM_CTA_RELEASE)
    assert errors(r) == {"SV602"}
    assert {d.span.line for d in r.diagnostics if d.code == "SV602" and d.is_error} == {8}


@pytest.mark.parametrize("text, expected", [(DSMEM_CLUSTER_RELEASE_CTA_ACQUIRE, set()), (DSMEM_CTA_RELEASE, {"SV602"})],
                         ids=["cluster-release", "cta-release"])
def test_bmc_agrees_on_the_scope_reading(text, expected):
    assert errors(check(text, engine="bmc")) == expected


# A .cta-scope remote arrive whose data a cluster barrier already published: the waiter knows the data
# before its acquire (both sides passed the barrier.cluster.arrive (.release) / barrier.cluster.wait
# (.acquire)), so the unpaired .cta release carries nothing it needs. The reproducer is the clearing prologue
# of the emitted cluster_multicast_ring_cta_scope kernel (tests/test_ptx.py, round trip).

PUBLISHED_BY_CLUSTER_BARRIER = DSMEM_CTA_SCOPE.replace(
    "  if cta == 1 { elect { write buf @ 0; arrive m @ 0; } }   // .release.cta by default\n",
    "  if cta == 1 { elect { write buf @ 0; } }\n  cluster.arrive;\n  cluster.wait;\n"
    "  if cta == 1 { elect { arrive m @ 0; } }\n").replace("wait m parity 0", "wait.acquire.cluster m parity 0")
assert "cluster.wait;" in PUBLISHED_BY_CLUSTER_BARRIER and "wait.acquire.cluster" in PUBLISHED_BY_CLUSTER_BARRIER


@pytest.mark.parametrize("engine", ["explicit", "bmc"])
def test_cta_scope_arrive_of_data_a_cluster_barrier_published_only_warns(engine):
    r = check(PUBLISHED_BY_CLUSTER_BARRIER, engine)
    assert r.verdict.value == "safe" and not errors(r)
    if engine == "explicit":
        # the reuse warning, at the arrive
        assert {(d.code, d.span.line) for d in r.diagnostics} == {("SV602", _line(PUBLISHED_BY_CLUSTER_BARRIER))}


@pytest.mark.parametrize("engine", ["explicit", "bmc"])
@pytest.mark.parametrize("twin", [
    ("cluster.arrive;\n", "cluster.arrive.relaxed;\n"),                   # the barrier orders no earlier access
    ("  if cta == 1 { elect { write buf @ 0; } }\n  cluster.arrive;\n  cluster.wait;\n  if cta == 1 { elect { ",
     "  cluster.arrive;\n  cluster.wait;\n  if cta == 1 { elect { write buf @ 0; "),  # the store after it
], ids=["relaxed-arrive", "store-after-barrier"])
def test_cta_scope_arrive_of_data_no_barrier_published_stays_sv602(engine, twin):
    old, new = twin
    assert old in PUBLISHED_BY_CLUSTER_BARRIER
    text = PUBLISHED_BY_CLUSTER_BARRIER.replace(old, new)
    r = check(text, engine)
    assert errors(r) == {"SV602"}
    if engine == "explicit":
        assert {d.span.line for d in r.diagnostics if d.is_error} == {_line(text)}  # at the arrive


@needs_spin
@pytest.mark.parametrize("relaxed, verdict", [(False, "safe"), (True, "violation")], ids=["published", "relaxed"])
def test_spin_agrees_on_the_cluster_barrier_reading(relaxed, verdict, tmp_path):
    text = PUBLISHED_BY_CLUSTER_BARRIER.replace("cluster.arrive;\n", "cluster.arrive.relaxed;\n") if relaxed else \
        PUBLISHED_BY_CLUSTER_BARRIER
    model = export_model(load(text, path="t.sync"))
    spin = run_spin(model.text, tmp_path / "m", timeout=300, memlim_mb=1024, depth=model.max_depth,
                    cc_flags=CC_FLAGS)
    assert spin.verdict == verdict, spin.detail
    if relaxed:
        assert "SV602" in spin.detail


def _line(text: str, what: str = "arrive m @ 0") -> int:
    return next(n for n, t in enumerate(text.splitlines(), start=1) if what in t)


# ============================================================ aligned and unaligned named barriers
#
# ptx-semantics.md §3: `bar.sync` = `barrier.sync.aligned`: "All threads in the CTA execute the same instruction"
# (else UB: SV204, a warning); "Unaligned `barrier.*` on sm_70+ may be reached divergently". TIRx-style kernels
# use the unaligned form where warps of different roles meet at one barrier from their own branches.

DIVERGENT_BARRIER = """\
protocol tirx_divergent {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  smem buf bytes 128;
  if a { write buf; barrier.sync 1, 64; }
  if b { barrier.sync 1, 64; read buf; }
}
"""


def test_unaligned_barrier_from_divergent_sites_is_clean():
    r = check(DIVERGENT_BARRIER)
    assert r.verdict.value == "safe" and not r.diagnostics, [d.message for d in r.diagnostics]


@pytest.mark.parametrize("spelling", ["bar.sync 1, 64", "barrier.sync.aligned 1, 64"])
def test_aligned_barrier_from_divergent_sites_stays_sv204(spelling):
    r = check(DIVERGENT_BARRIER.replace("barrier.sync 1, 64", spelling))
    assert warnings(r) == {"SV204"} and not errors(r)


def test_unaligned_forms_resolve_to_unaligned_operations():
    from syncverify import ir
    proto = load(DIVERGENT_BARRIER.replace("if b { barrier.sync 1, 64;", "if b { barrier.arrive 1, 64;"),
                 path="t.sync")
    ops = [s for s in proto.body for s in s.then if isinstance(s, ir.BarSync | ir.BarArrive)]
    assert [(type(o).__name__, o.aligned) for o in ops] == [("BarSync", False), ("BarArrive", False)]
    aligned = load(DIVERGENT_BARRIER.replace("barrier.sync 1", "bar.sync 1"), path="t.sync")
    assert all(o.aligned for s in aligned.body for o in s.then if isinstance(o, ir.BarSync))


def test_unaligned_barrier_still_orders_and_counts():
    """Only the site check differs: a missing participant still deadlocks, and the barrier still orders."""
    r = check(DIVERGENT_BARRIER.replace("if b { barrier.sync 1, 64; read buf; }", ""))
    assert errors(r) == {"SV201"}  # a waits for 64 threads, only its 32 come
    raced = DIVERGENT_BARRIER.replace("if b { barrier.sync 1, 64; read buf; }",
                                      "if b { read buf; barrier.sync 1, 64; }")
    assert errors(check(raced)) == {"SV301"}


def test_bmc_agrees_on_the_unaligned_barrier():
    assert not errors(check(DIVERGENT_BARRIER, engine="bmc"))


def test_emitter_and_exporter_keep_the_unaligned_form():
    from syncverify.codegen.emit import emit
    from syncverify.export.promela import export_promela
    proto = load(DIVERGENT_BARRIER, path="t.sync")
    source = emit(proto).source
    assert "barrier.sync %0, %1;" in source and "bar.sync %0, %1;" not in source
    assert "barrier.sync" not in emit(load(DIVERGENT_BARRIER.replace("barrier.sync", "bar.sync"), path="t.sync")).source
    # the model treats both forms alike (SV204 is a warning, not modelled)
    assert "nb_try_complete" in export_promela(proto)


# ============================================================ undefined behaviour that passed as safe
#
# wgmma: "all threads in the warpgroup must execute the same wgmma instruction" (.sync.aligned, ptx-semantics §6);
# tcgen05.alloc/dealloc are .sync.aligned warp collectives, and "All of the Tensor Memory that was allocated … must be
# explicitly deallocated … before the kernel exits" (§7); an allocation without room blocks until it succeeds.

WGMMA_ONE_WARP = """\
protocol wgmma_one_warp {
  cta threads 128;
  role w0 = warp 0;
  role rest = warps 1..4;
  smem a bytes 256;
  if w0 { wgmma.read a; wgmma.commit; wgmma.wait 0; }
}
"""

# near twin: the whole warpgroup issues it
WGMMA_WARPGROUP = WGMMA_ONE_WARP.replace("if w0 {", "if w0 || rest {")

TMEM_HALF_WARP = """\
protocol tmem_half_warp {
  cta threads 32;
  role lo = threads 0..16;
  role hi = threads 16..32;
  if lo { tmem.alloc cols 32; tmem.dealloc cols 32; }
}
"""

TMEM_WHOLE_WARP = TMEM_HALF_WARP.replace("role lo = threads 0..16;\n  role hi = threads 16..32;", "role lo = warp 0;")

TMEM_LEAK = """\
protocol tmem_leak {
  cta threads 64;
  role mma = warp 0;
  role other = warp 1;
  if mma { for k in 0..2 { tmem.alloc cols 64; tmem.dealloc cols 64; } tmem.alloc cols 128; }
}
"""

TMEM_FREED = TMEM_LEAK.replace("tmem.alloc cols 128; }", "tmem.alloc cols 128; tmem.dealloc cols 128; }")

TMEM_TWO_FULL = """\
protocol tmem_two_full {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  tmem.alloc cols 512;
  bar.sync 1, 64;
  tmem.dealloc cols 512;
}
"""

# near twin: the first allocator frees its columns before the barrier, so the second allocation gets them
TMEM_TWO_TAKING_TURNS = """\
protocol tmem_two_taking_turns {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  if a { tmem.alloc cols 512; tmem.dealloc cols 512; }
  bar.sync 1, 64;
  if b { tmem.alloc cols 512; tmem.dealloc cols 512; }
}
"""


def test_wgmma_by_one_warp_of_a_warpgroup_is_sv206():
    r = check(WGMMA_ONE_WARP)
    assert errors(r) == {"SV206"}
    assert {d.span.line for d in r.diagnostics if d.code == "SV206"} == {6}
    assert "warps [1, 2, 3]" in r.diagnostics[0].message


def test_wgmma_by_the_whole_warpgroup_is_clean():
    assert not check(WGMMA_WARPGROUP).diagnostics


def test_tmem_alloc_by_half_a_warp_is_sv206():
    r = check(TMEM_HALF_WARP)
    assert errors(r) == {"SV206"}
    assert "only part of a warp" in r.diagnostics[0].message


def test_tmem_alloc_by_a_whole_warp_is_clean():
    assert not check(TMEM_WHOLE_WARP).diagnostics


def test_tensor_memory_left_allocated_is_sv406():
    r = check(TMEM_LEAK)
    assert errors(r) == {"SV406"}
    assert "128 are still allocated" in r.diagnostics[0].message


def test_tensor_memory_freed_before_exit_is_clean():
    assert not check(TMEM_FREED).diagnostics


def test_second_full_allocation_blocks_forever():
    r = check(TMEM_TWO_FULL)
    assert errors(r) == {"SV201"}
    assert any("512 of the 512 tensor-memory columns" in d.message for d in r.diagnostics)


def test_allocations_taking_turns_are_clean():
    assert not check(TMEM_TWO_TAKING_TURNS).diagnostics


def test_dealloc_of_more_than_allocated_is_sv406():
    r = check(TMEM_FREED.replace("tmem.alloc cols 128; tmem.dealloc cols 128;", "tmem.dealloc cols 128;"))
    assert errors(r) == {"SV406"}


@pytest.mark.parametrize("text, expected", [(WGMMA_ONE_WARP, {"SV206"}), (WGMMA_WARPGROUP, set()),
                                            (TMEM_HALF_WARP, {"SV206"}), (TMEM_LEAK, {"SV406"}),
                                            (TMEM_FREED, set())],
                         ids=["wgmma-one-warp", "wgmma-warpgroup", "tmem-half-warp", "tmem-leak", "tmem-freed"])
def test_bmc_reports_the_same_static_findings(text, expected):
    assert errors(check(text, engine="bmc")) == expected


def test_bmc_and_promela_refuse_allocations_that_can_block():
    from syncverify.export.promela import ExportError, export_promela
    r = check(TMEM_TWO_TAKING_TURNS, engine="bmc")
    assert r.verdict.value == "inconclusive" and "1024 columns" in r.coverage
    with pytest.raises(ExportError, match="1024 columns"):
        export_promela(load(TMEM_TWO_TAKING_TURNS, path="t.sync"))


# ============================================================ syncwarp between the parts of a split warp
#
# PTX bar.warp.sync (= __syncwarp()): "wait until all threads corresponding to membermask have executed a
# bar.warp.sync with the same membermask value"; it "also guarantee[s] memory ordering among threads participating
# in barrier. Thus, threads within warp that wish to communicate via memory can store to memory, execute
# bar.warp.sync, and then safely read values stored by other threads in warp." On sm_70+ the sites may differ.

HALF_WARPS_SYNCWARP = """\
protocol half_warps_syncwarp {
  cta threads 32;
  role lo = threads 0..16;
  role hi = threads 16..32;
  smem buf bytes 128;
  if lo { write buf; syncwarp; }
  if hi { syncwarp; read buf; }
}
"""

# near twin: `hi` reads before its syncwarp
HALF_WARPS_READ_FIRST = HALF_WARPS_SYNCWARP.replace("if hi { syncwarp; read buf; }", "if hi { read buf; syncwarp; }")


def test_halves_of_a_warp_meeting_at_syncwarp_from_different_sites_are_ordered():
    r = check(HALF_WARPS_SYNCWARP)
    assert r.verdict.value == "safe" and not r.diagnostics, [d.message for d in r.diagnostics]


def test_read_before_the_syncwarp_still_races():
    assert errors(check(HALF_WARPS_READ_FIRST)) == {"SV301"}


def test_syncwarp_waits_for_the_other_half():
    r = check(HALF_WARPS_SYNCWARP.replace("if hi { syncwarp; read buf; }", ""))
    assert errors(r) == {"SV201"}
    assert any("other parts of warp 0" in d.message for d in r.diagnostics)


def test_split_warp_syncwarp_with_the_reductions_off_agrees():
    from syncverify.engines.explicit import Budget, explore
    from syncverify.semantics.machine import Machine
    for text, expected in [(HALF_WARPS_SYNCWARP, set()), (HALF_WARPS_READ_FIRST, {"SV301"})]:
        proto = load(text, path="t.sync")
        found = explore(proto, Budget(), Machine(proto), symmetry=False, reduce=False)
        assert {d.code for d in found.diagnostics if d.is_error} == expected


def test_bmc_and_promela_refuse_a_split_warp_syncwarp():
    from syncverify.export.promela import ExportError, export_promela
    r = check(HALF_WARPS_SYNCWARP, engine="bmc")
    assert r.verdict.value == "inconclusive" and "split between roles" in r.coverage
    with pytest.raises(ExportError, match="split between roles"):
        export_promela(load(HALF_WARPS_SYNCWARP, path="t.sync"))
