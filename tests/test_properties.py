"""Every diagnostic the model checker reports, triggered by a small protocol and absent
from a near-identical one.

Each test pairs a protocol that breaks one rule of ptx-semantics.md (the project's semantics reference) with
the same protocol fixed (one line changed). The buggy one must report exactly the
expected error codes, at the offending line, with a message that says what is wrong;
the fixed one must be safe (or at least free of that code). Loops run 2–3 times and
kernels have a few warps, so the whole file checks in seconds.

Protocols are module-level constants (``CASES``) so that test_order_independence.py
can permute their declarations and compare the reductions on them.
"""

from __future__ import annotations

import pytest

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import Diagnostic, Severity
from syncverify.result import CheckResult, Verdict

# ---------------------------------------------------------------------------- helpers


def check(text: str, **options) -> CheckResult:
    return check_protocol(load(text, path="t.sync"), Options(**options))


def errors(r: CheckResult) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity is Severity.ERROR}


def warnings(r: CheckResult) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity is Severity.WARNING}


def diags(r: CheckResult, code: str, severity: Severity = Severity.ERROR) -> list[Diagnostic]:
    found = [d for d in r.diagnostics if d.code == code and d.severity is severity]
    assert found, f"no {severity} {code} in {[(d.code, d.severity, d.message) for d in r.diagnostics]}"
    return found


def lines(r: CheckResult, code: str, severity: Severity = Severity.ERROR) -> set[int]:
    return {d.span.line for d in diags(r, code, severity)}


def line(text: str, needle: str) -> int:
    """1-based number of the one line of ``text`` that contains ``needle``."""
    hits = [n for n, t in enumerate(text.splitlines(), start=1) if needle in t]
    assert len(hits) == 1, f"{needle!r} found on lines {hits}"
    return hits[0]


def assert_safe(r: CheckResult, warns: set[str] = frozenset()) -> None:
    assert r.verdict is Verdict.SAFE, [(d.code, d.span.line if d.span else None, d.message) for d in r.diagnostics]
    assert errors(r) == set()
    assert warnings(r) == set(warns)


def assert_violation(r: CheckResult, codes: set[str]) -> None:
    assert r.verdict is Verdict.VIOLATION
    assert errors(r) == codes, [(d.code, d.span.line if d.span else None, d.message) for d in r.diagnostics]


def ends_at(d: Diagnostic, at: int) -> None:
    """The counterexample ends with the offending step, marked with its code."""
    assert d.trace, "a model-checker finding must come with a trace"
    last = d.trace[-1]
    assert last.line == at
    assert f"<- {d.code}" in last.note


class Spec(str):
    """Protocol text whose ``replace`` insists on changing something, so that a
    "near-identical" variant can never silently be the same protocol."""

    def replace(self, old: str, new: str, count: int = -1) -> Spec:  # type: ignore[override]
        assert old in self, f"{old!r} not in the protocol"
        return Spec(str.replace(self, old, new, count))


CASES: dict[str, str] = {}


def case(name: str, text: str) -> Spec:
    CASES[name] = Spec(text)
    return CASES[name]


# ============================================================================ SV201 deadlock

DEADLOCK = case("deadlock", """\
protocol deadlock {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  mbarrier full count 2;
  if producer { elect { init full; } }
  syncthreads;
  if producer { elect { arrive full; } }
  if consumer { wait full parity 0; }   // WAIT
}
""")


def test_sv201_missing_arrival_deadlocks():
    r = check(DEADLOCK)
    assert_violation(r, {"SV201"})
    (d,) = diags(r, "SV201")
    assert d.span.line == line(DEADLOCK, "WAIT")
    assert "consumer can never move again" in d.message
    assert "producer" not in d.message.split("Blocked:")[0]  # the producer finished
    assert f"line {line(DEADLOCK, 'WAIT')}: wait on full for parity 0" in d.message
    assert "pending 1/2" in d.message  # the barrier's state
    assert any(s.role.startswith("producer") and "arrive full" in s.op for s in d.trace)


def test_sv201_fixed_by_the_right_count():
    assert_safe(check(DEADLOCK.replace("count 2", "count 1")))


CROSS_WAIT = case("cross_wait", """\
protocol cross_wait {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  mbarrier full count 1;
  mbarrier ack count 1;
  if producer { elect { init full; init ack; } }
  syncthreads;
  if producer { wait ack parity 0; elect { arrive full; } }   // P
  if consumer { wait full parity 0; elect { arrive ack; } }   // C
}
""")


def test_sv201_reports_every_blocked_role_and_what_it_waits_on():
    r = check(CROSS_WAIT)
    assert_violation(r, {"SV201"})
    (d,) = diags(r, "SV201")
    assert "consumer, producer can never move again" in d.message
    assert f"producer.w0 line {line(CROSS_WAIT, '// P')}: wait on ack for parity 0" in d.message
    assert f"consumer.w1 line {line(CROSS_WAIT, '// C')}: wait on full for parity 0" in d.message


def test_sv201_cross_wait_fixed_by_arriving_first():
    fixed = CROSS_WAIT.replace("wait ack parity 0; elect { arrive full; }", "elect { arrive full; } wait ack parity 0;")
    assert_safe(check(fixed))


# ============================================================================ SV202 named-barrier counts

COUNTS = case("counts", """\
protocol counts {
  cta threads 96;
  role a = warp 0;
  role b = warps 1..3;
  if a { bar.sync 1, 64; }   // A
  if b { bar.sync 1, 96; }   // B
}
""")


def test_sv202_counts_disagree_within_a_generation():
    r = check(COUNTS)
    assert_violation(r, {"SV202"})
    assert lines(r, "SV202") == {line(COUNTS, "// A"), line(COUNTS, "// B")}
    messages = " ".join(d.message for d in diags(r, "SV202"))
    assert "says 64 threads but the open generation was started with 96" in messages


def test_sv202_same_count_is_safe():
    assert_safe(check(COUNTS.replace("  if a { bar.sync 1, 64; }   // A\n  if b { bar.sync 1, 96; }   // B",
                                     "  bar.sync 1, 96;")))


REGEN = case("regen", """\
protocol regen {
  cta threads 96;
  role a = warps 0..2;
  role c = warp 2;
  if a { bar.sync 1, 64; }   // G0
  syncthreads;
  bar.sync 1, 96;            // G1
}
""")


def test_sv202_count_may_change_between_generations():
    # §3 [O] probe (c): 64-thread generation completes, then a 96-thread one: fine
    assert_safe(check(REGEN))


def test_sv202_count_change_while_generation_open():
    # §3 [O] probe (d): a third warp arrives with 96 while the 64-generation is open
    text = REGEN.replace("  syncthreads;\n", "")
    r = check(text)
    assert_violation(r, {"SV202"})
    assert lines(r, "SV202") == {line(text, "G0"), line(text, "G1")}


# ============================================================================ SV203 double contribution

FA3 = case("fa3_pingpong", """\
protocol fa3 {
  param ROUNDS = 2;
  cta threads 256;
  role mma[2] = warpgroup i;
  named sched[2] id 4 + i count 256;
  if mma && instance == 0 {
    bar.arrive sched[0];               // PRE
  }
  if mma {
    for r in 0..ROUNDS {
      bar.sync sched[instance];        // SYNC
      bar.arrive sched[1 - instance];
    }
  }
}
""")


def test_sv203_fa3_pingpong_with_own_pre_arrive_is_safe_with_warning():
    # §3: warpgroup 0's first bar.sync completes with 128 + 128 from the same four warps
    r = check(FA3)
    assert_safe(r, warns={"SV203"})
    (d,) = diags(r, "SV203", Severity.WARNING)
    assert d.span.line == line(FA3, "SYNC")
    assert "arrives a second time in one generation of barrier 4" in d.message


def test_sv203_fa3_source_form_has_no_double_contribution():
    # FlashAttention-3's mma_init: the OTHER warpgroup pre-arrives
    assert_safe(check(FA3.replace("instance == 0 {", "instance == 1 {")))


def test_sv203_fa3_without_pre_arrive_deadlocks():
    r = check(FA3.replace("    bar.arrive sched[0];               // PRE\n", ""))
    assert_violation(r, {"SV201"})
    assert "mma can never move again" in diags(r, "SV201")[0].message


TWICE = case("twice", """\
protocol twice {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  if a { bar.arrive 1, 64; bar.arrive 1, 64; }   // A
  if b { bar.sync 1, 64; bar.sync 1, 64; }
}
""")


def test_sv203_arrive_twice_completes_alone_and_starves_the_partner():
    r = check(TWICE)
    assert_violation(r, {"SV201"})
    assert lines(r, "SV203", Severity.WARNING) == {line(TWICE, "// A")}
    assert "b can never move again" in diags(r, "SV201")[0].message


# ============================================================================ SV204 divergent aligned barrier

SITES = case("sites", """\
protocol sites {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  if a {
    syncthreads;   // THEN
  } else {
    syncthreads;   // ELSE
  }
}
""")


def test_sv204_aligned_barrier_from_two_sites_is_a_warning():
    r = check(SITES)
    assert_safe(r, warns={"SV204"})
    assert lines(r, "SV204", Severity.WARNING) == {line(SITES, "THEN"), line(SITES, "ELSE")}
    assert "aligned barrier 0 reached at line" in diags(r, "SV204", Severity.WARNING)[0].message


def test_sv204_hoisted_barrier_has_no_warning():
    hoisted = SITES.replace("  if a {\n    syncthreads;   // THEN\n  } else {\n    syncthreads;   // ELSE\n  }",
                            "  syncthreads;")
    assert_safe(check(hoisted))


def test_sv204_does_not_apply_to_unaligned_arrive_sites():
    text = """\
protocol arrive_sites {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  if a { bar.arrive 1, 64; }
  if b { bar.sync 1, 64; }
}
"""
    assert_safe(check(text))


# ============================================================================ SV205 cluster barrier twice

CLUSTER_TWICE = case("cluster_twice", """\
protocol cluster_twice {
  cluster 2;
  cta threads 32;
  cluster.arrive;
  cluster.arrive;   // SECOND
  cluster.wait;
}
""")


def test_sv205_second_cluster_arrive_before_wait():
    r = check(CLUSTER_TWICE)
    assert_violation(r, {"SV205"})
    (d,) = diags(r, "SV205")
    assert d.span.line == line(CLUSTER_TWICE, "SECOND")
    assert "arrive a second time" in d.message
    ends_at(d, line(CLUSTER_TWICE, "SECOND"))


def test_sv205_arrive_wait_arrive_wait_is_safe():
    assert_safe(check(CLUSTER_TWICE.replace("  cluster.arrive;   // SECOND\n", "  cluster.wait;\n  cluster.arrive;\n")))


def test_cluster_wait_before_arrive_waits_on_itself():
    text = CLUSTER_TWICE.replace("  cluster.arrive;\n  cluster.arrive;   // SECOND\n  cluster.wait;",
                                 "  cluster.wait;\n  cluster.arrive;")
    r = check(text)
    assert_violation(r, {"SV201"})
    assert "waits on itself" in diags(r, "SV201")[0].message


# ============================================================================ SV301 RAW

RAW = case("raw", """\
protocol raw {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf bytes 128;
  mbarrier full count 32;
  if producer { elect { init full; } }
  syncthreads;
  if producer { write buf; arrive full; }          // WRITE
  if consumer { read buf; wait full parity 0; }    // R
}
""")


def test_sv301_read_before_the_acquire_wait():
    r = check(RAW)
    assert_violation(r, {"SV301"})
    (d,) = diags(r, "SV301")
    assert d.span.line == line(RAW, "// R")
    assert "RAW race on buf" in d.message
    assert f"write at line {line(RAW, '// WRITE')} by producer.w0" in d.message
    assert d.related and d.related[0].span.line == line(RAW, "// WRITE")
    ends_at(d, line(RAW, "// R"))


def test_sv301_read_after_the_wait_is_safe():
    assert_safe(check(RAW.replace("read buf; wait full parity 0;", "wait full parity 0; read buf;")))


LANES = case("lanes_elect", """\
protocol lanes {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf bytes 128;
  mbarrier full count 1;
  if producer { elect { init full; } }
  syncthreads;
  if producer {
    write buf;                 // WRITE
    elect { arrive full; }
  }
  if consumer { wait full parity 0; read buf; }   // R
}
""")


def test_sv301_lanes_write_and_one_elected_lane_arrives_without_syncwarp():
    # design §3: an elected lane's release covers only its own earlier accesses
    r = check(LANES)
    assert_violation(r, {"SV301", "SV508"})  # the race, and its cause named at the elected arrive
    (d,) = diags(r, "SV301")
    assert d.span.line == line(LANES, "// R")
    assert f"write at line {line(LANES, '// WRITE')}" in d.message


def test_sv301_syncwarp_before_the_elected_arrive_is_safe():
    assert_safe(check(LANES.replace("    write buf;                 // WRITE\n", "    write buf;\n    syncwarp;\n")))


def test_sv301_elected_writer_and_elected_arrive_need_no_syncwarp():
    # the lane that wrote is the lane that releases
    assert_safe(check(LANES.replace("    write buf;                 // WRITE\n    elect { arrive full; }",
                                    "    elect { write buf; arrive full; }")))


# ============================================================================ SV302 WAR

EARLY_RELEASE = case("early_release", """\
protocol war {
  param ITERS = 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf bytes 128;
  mbarrier full count 1;
  mbarrier empty count 32;
  if producer { elect { init full; init empty; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      wait empty parity (k + 1) % 2;
      write buf;                // WRITE
      syncwarp;
      elect { arrive full; }
    }
  }
  if consumer {
    for k in 0..ITERS {
      wait full parity k % 2;
      arrive empty;
      read buf;                 // R
    }
  }
}
""")


def test_sv302_consumer_releases_the_slot_before_reading_it():
    r = check(EARLY_RELEASE)
    assert_violation(r, {"SV302"})
    # the root cause at the early arrive (diagnose_release.py: moving it below the read checks clean), then the race
    cause, d = diags(r, "SV302")
    assert cause.span.line == line(EARLY_RELEASE, "arrive empty") and "releases `buf` before" in cause.message
    assert d.span.line == line(EARLY_RELEASE, "// WRITE")
    assert f"WAR race on buf: write by producer.w0 is not ordered with the read at line " \
           f"{line(EARLY_RELEASE, '// R')} by consumer.w1" in d.message
    ends_at(d, line(EARLY_RELEASE, "// WRITE"))
    assert any(s.iteration == "k=1" for s in d.trace)  # the refill of the second iteration


def test_sv302_release_after_the_read_is_safe():
    assert_safe(check(EARLY_RELEASE.replace("      arrive empty;\n      read buf;                 // R",
                                            "      read buf;\n      arrive empty;")))


# ---- wgmma released before / after wgmma.wait (§6)

WGMMA = case("wgmma_release", """\
protocol wgmma_ring {
  param ITERS = 3;
  cta threads 160;
  role consumer = warpgroup 0;
  role producer = warp 4;
  smem tile bytes 1024;
  mbarrier full count 1;
  mbarrier empty count 128;
  if producer { elect { init full; init empty; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      wait empty parity (k + 1) % 2;
      elect { arrive.expect_tx full bytes 1024; tma.load tile -> full; }   // LOAD
    }
  }
  if consumer {
    for k in 0..ITERS {
      wait full parity k % 2;
      wgmma.read tile;         // MMA
      wgmma.commit;
      arrive empty;
      wgmma.wait 0;
    }
  }
}
""")


def test_sv302_wgmma_stage_released_before_wgmma_wait():
    """The race at the producer's load, and its cause named at the consumer's arrive (diagnose_async.py: the
    release was made while the warp's wgmma read was in flight, as the race's counterexample shows)."""
    r = check(WGMMA)
    assert_violation(r, {"SV302"})
    arrive = next(n for n, t in enumerate(WGMMA.splitlines(), 1) if t.strip() == "arrive empty;")
    race, cause = (next(d for d in diags(r, "SV302") if d.span.line == at) for at in (line(WGMMA, "LOAD"), arrive))
    assert f"read at line {line(WGMMA, 'MMA')} by the async operation issued by consumer" in race.message
    assert {d.span.line for d in diags(r, "SV302")} == {race.span.line, cause.span.line}


def test_sv302_wgmma_stage_released_after_wgmma_wait_is_safe():
    assert_safe(check(WGMMA.replace("      arrive empty;\n      wgmma.wait 0;",
                                    "      wgmma.wait 0;\n      arrive empty;")))


def test_sv302_wgmma_wait_leaving_the_group_pending_does_not_retire_it():
    # wgmma.wait 1 leaves the most recent group (the one reading this stage) in flight
    fixed_order = WGMMA.replace("      arrive empty;\n      wgmma.wait 0;", "      wgmma.wait 0;\n      arrive empty;")
    r = check(fixed_order.replace("wgmma.wait 0;", "wgmma.wait 1;"))
    assert_violation(r, {"SV302"})


# ---- tma.store source rewritten before / after bulk.wait_read (§5)

STORE = case("store_reuse", """\
protocol store_reuse {
  param ITERS = 3;
  cta threads 32;
  smem out bytes 256;
  for k in 0..ITERS {
    // REUSE
    write out;                                  // WRITE
    fence.proxy.async;
    syncwarp;
    elect { tma.store out; bulk.commit; }       // S
  }
  elect { bulk.wait_read 0; }
}
""")


def test_sv302_tma_store_source_rewritten_before_wait_read():
    r = check(STORE)
    assert_violation(r, {"SV302"})
    (d,) = diags(r, "SV302")
    assert d.span.line == line(STORE, "// WRITE")
    assert f"read at line {line(STORE, '// S')} by the async operation issued by cta.w0" in d.message


def test_sv302_tma_store_source_rewritten_after_wait_read_is_safe():
    assert_safe(check(STORE.replace("    // REUSE\n", "    elect { bulk.wait_read 0; }\n    syncwarp;\n")))


def test_sv302_wait_read_by_the_elected_lane_must_be_shared_with_the_other_writers():
    # the wait orders the store's reads before the issuing lane only; the other lanes need a syncwarp
    r = check(STORE.replace("    // REUSE\n", "    elect { bulk.wait_read 0; }\n"))
    assert_violation(r, {"SV302"})


def test_sv302_wait_read_with_one_group_pending_is_too_weak_for_one_buffer():
    r = check(STORE.replace("    // REUSE\n", "    elect { bulk.wait_read 1; }\n    syncwarp;\n"))
    assert_violation(r, {"SV302"})


# ============================================================================ SV303 WAW

WAW = case("waw", """\
protocol waw {
  cta threads 64;
  role producer = warp 0;
  role other = warp 1;
  smem buf bytes 128;
  mbarrier full count 1;
  if producer { elect { init full; } }
  syncthreads;
  if producer { elect { arrive.expect_tx full bytes 128; tma.load buf -> full; } }   // LOAD
  if other { write buf; }                                                        // WRITE
}
""")


def test_sv303_generic_write_while_a_copy_is_in_flight():
    r = check(WAW)
    assert_violation(r, {"SV303"})
    assert lines(r, "SV303") == {line(WAW, "LOAD"), line(WAW, "// WRITE")}
    messages = " ".join(d.message for d in diags(r, "SV303"))
    assert "(still in flight)" in messages and "WAW race on buf" in messages


def test_sv303_write_after_waiting_for_the_copy_is_safe():
    assert_safe(check(WAW.replace("if other { write buf; }", "if other { wait full parity 0; write buf; }")))


# ============================================================================ SV401 before init / after inval

EARLY_USE = case("early_use", """\
protocol early {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  mbarrier full count 1;
  if producer { elect { init full; } }
  // SYNC
  if consumer { wait full parity 0; }     // WAIT
  if producer { elect { arrive full; } }
}
""")


def test_sv401_wait_not_ordered_after_init():
    r = check(EARLY_USE)
    assert_violation(r, {"SV401"})
    (d,) = diags(r, "SV401")
    assert d.span.line == line(EARLY_USE, "WAIT")
    assert "wait on full" in d.message


def test_sv401_syncthreads_orders_the_init():
    assert_safe(check(EARLY_USE.replace("  // SYNC\n", "  syncthreads;\n")))


AFTER_INVAL = case("after_inval", """\
protocol after_inval {
  cta threads 32;
  mbarrier m count 1;
  elect { init m; }
  syncwarp;
  elect { arrive m; }
  wait m parity 0;
  elect { inval m; }
  elect { arrive m; }     // LATE
}
""")


def test_sv401_arrive_after_inval():
    r = check(AFTER_INVAL)
    assert_violation(r, {"SV401"})
    (d,) = diags(r, "SV401")
    assert d.span.line == line(AFTER_INVAL, "LATE")
    assert "not initialized" in d.message


def test_sv401_inval_after_last_use_is_safe():
    assert_safe(check(AFTER_INVAL.replace("  elect { inval m; }\n  elect { arrive m; }     // LATE",
                                          "  elect { arrive m; }\n  elect { inval m; }")))


def test_sv401_other_lanes_need_a_syncwarp_after_an_elected_init():
    r = check(AFTER_INVAL.replace("  syncwarp;\n", ""))
    assert_violation(r, {"SV401"})
    assert "nothing orders the init before it" in diags(r, "SV401")[0].message


# ============================================================================ SV402 peer init visibility

REMOTE = case("remote_arrive", """\
protocol remote {
  cluster 2;
  cta threads 32;
  mbarrier bar count 1;
  elect { init bar; fence.mbarrier_init; }
  cluster.arrive.relaxed;
  cluster.wait;
  if cta == 0 { elect { arrive.release.cluster bar @ 1; } }   // REMOTE
  if cta == 1 { wait.acquire.cluster bar parity 0; }
  cluster.sync;
}
""")


def test_sv402_remote_arrive_with_init_fence_and_cluster_sync_is_safe():
    assert_safe(check(REMOTE))


def test_sv402_remote_arrive_without_the_cluster_sync():
    # §2: syncthreads orders the init inside its own CTA only
    text = REMOTE.replace("  cluster.arrive.relaxed;\n  cluster.wait;\n", "  syncthreads;\n")
    r = check(text)
    assert_violation(r, {"SV402"})
    (d,) = diags(r, "SV402")
    assert d.span.line == line(text, "REMOTE")
    assert "peer CTA 1" in d.message and "bar@cta1" in d.message


def test_sv402_relaxed_cluster_arrive_without_fence_mbarrier_init():
    # §2/§4: a .relaxed cluster arrive orders nothing but inits published by fence.mbarrier_init;
    # without the fence the peer's remote arrive (SV402) and even CTA 1's own other lanes (SV401,
    # the init was done by lane 0) are unordered after the init
    r = check(REMOTE.replace(" fence.mbarrier_init;", ""))
    assert_violation(r, {"SV401", "SV402"})
    assert lines(r, "SV402") == {line(REMOTE, "REMOTE")}
    assert lines(r, "SV401") == {line(REMOTE, "wait.acquire.cluster bar")}


# ---- TMA multicast (§5): one copy per CTA lands in both CTAs, each barrier expects both

MULTICAST = case("multicast", """\
protocol mc {
  cluster 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile[2] bytes 128;
  mbarrier full count 1;
  if producer { elect { init full; fence.mbarrier_init; } }
  cluster.arrive.relaxed;
  cluster.wait;
  if producer {
    elect {
      arrive.expect_tx full bytes 256;
      tma.load tile[cta] -> full multicast 0b11;   // LOAD
    }
  }
  if consumer {
    wait.acquire.cluster full parity 0;
    read tile[0];
    read tile[1];
  }
  cluster.sync;
}
""")


def test_tma_multicast_ring_step_is_safe():
    assert_safe(check(MULTICAST))


def test_tma_multicast_before_the_peer_init_is_visible():
    text = MULTICAST.replace("  cluster.arrive.relaxed;\n  cluster.wait;\n", "  syncthreads;\n")
    r = check(text)
    assert_violation(r, {"SV402"})
    (d,) = diags(r, "SV402")
    assert d.span.line == line(text, "LOAD")
    assert "tma.load completion" in d.message


def test_tma_multicast_read_before_the_wait():
    text = MULTICAST.replace("    wait.acquire.cluster full parity 0;\n    read tile[0];\n    read tile[1];",
                             "    read tile[1];\n    wait.acquire.cluster full parity 0;")
    r = check(text)
    assert_violation(r, {"SV301"})
    assert "tile[1]@cta" in diags(r, "SV301")[0].message


def test_tma_multicast_expecting_only_local_bytes_completes_early():
    # each CTA's barrier must expect the bytes its peer multicasts into it (CUTLASS PipelineTmaAsync)
    # the first copy to land completes the phase; the consumer then reads the slot the peer's copy
    # is still writing
    r = check(MULTICAST.replace("bytes 256", "bytes 128"))
    assert_violation(r, {"SV301"})
    assert any("(still in flight)" in d.message for d in diags(r, "SV301"))


# ============================================================================ SV403 re-init

REINIT = case("reinit", """\
protocol reinit {
  cta threads 32;
  mbarrier m count 1;
  elect { init m; }
  syncwarp;
  elect { arrive m; }
  wait m parity 0;
  elect { init m count 2; }    // AGAIN
}
""")


def test_sv403_init_of_a_live_barrier():
    r = check(REINIT)
    assert_violation(r, {"SV403"})
    (d,) = diags(r, "SV403")
    assert d.span.line == line(REINIT, "AGAIN")
    assert "still live" in d.message


def test_sv403_inval_then_init_is_safe():
    assert_safe(check(REINIT.replace("elect { init m count 2; }", "elect { inval m; init m count 2; }")))


def test_sv403_whole_warp_inits_at_once():
    text = Spec("protocol w {\n  cta threads 32;\n  mbarrier m count 1;\n  init m;\n}\n")
    r = check(text)
    assert_violation(r, {"SV403"})
    assert "32 threads init it at once" in diags(r, "SV403")[0].message
    assert_safe(check(text.replace("  init m;", "  elect { init m; }")))


# ============================================================================ SV404 lifetime

DSMEM = case("dsmem_exit", """\
protocol exit_early {
  cluster 2;
  cta threads 32;
  smem buf bytes 64;
  cluster.sync;
  if cta == 1 { write buf @ 0; }     // REMOTE
}
""")


def test_sv404_peer_may_have_exited_before_the_remote_write():
    r = check(DSMEM)
    assert_violation(r, {"SV404"})
    (d,) = diags(r, "SV404")
    assert d.span.line == line(DSMEM, "REMOTE")
    assert "targets CTA 0, which may already have exited" in d.message


def test_sv404_cluster_sync_before_exit_is_safe():
    assert_safe(check(DSMEM.replace("// REMOTE\n", "// REMOTE\n  cluster.sync;\n")))


def test_sv404_remote_write_with_no_cluster_barrier_at_all():
    text = DSMEM.replace("  cluster.sync;\n", "")
    r = check(text)
    assert_violation(r, {"SV404"})
    assert lines(r, "SV404") == {line(text, "REMOTE")}


INFLIGHT = case("inflight_exit", """\
protocol inflight {
  cta threads 32;
  smem buf bytes 128;
  mbarrier full count 1;
  elect { init full; }
  syncwarp;
  elect { arrive.expect_tx full bytes 128; tma.load buf -> full; }   // LOAD
}
""")


def test_sv404_cta_exits_with_a_copy_in_flight():
    r = check(INFLIGHT)
    assert_violation(r, {"SV404"})
    (d,) = diags(r, "SV404")
    assert f"issued at line {line(INFLIGHT, 'LOAD')}) is still in flight" in d.message
    assert d.related[0].span.line == line(INFLIGHT, "LOAD")


def test_sv404_waiting_for_the_copy_before_exit_is_safe():
    assert_safe(check(INFLIGHT.replace("// LOAD\n", "// LOAD\n  wait full parity 0;\n")))


# ============================================================================ SV405 rank outside the cluster

RANK = case("rank", """\
protocol rank {
  cluster 2;
  cta threads 32;
  mbarrier m count 1;
  elect { init m; fence.mbarrier_init; }
  cluster.sync;
  elect { arrive.release.cluster m @ cta + 1; }   // REMOTE
  cluster.sync;
}
""")


def test_sv405_computed_rank_outside_the_cluster():
    r = check(RANK)
    assert_violation(r, {"SV405"})
    (d,) = diags(r, "SV405")
    assert d.span.line == line(RANK, "REMOTE")
    assert "CTA rank 2, outside the cluster" in d.message


def test_sv405_rank_modulo_cluster_size_is_safe():
    assert_safe(check(RANK.replace("@ cta + 1", "@ (cta + 1) % 2")))


def test_sv405_multicast_mask_outside_the_cluster():
    text = MULTICAST.replace("multicast 0b11", "multicast 1 << (cta + 1)")
    r = check(text)
    assert_violation(r, {"SV405"})
    assert lines(r, "SV405") == {line(MULTICAST, "LOAD")}
    assert "multicast mask 0b100 names CTAs outside the cluster" in diags(r, "SV405")[0].message


# ============================================================================ SV501 parity aliasing

STALE = case("stale", """\
protocol stale {
  cta threads 96;
  role producer = warp 0;
  role fast = warp 1;
  role slow = warp 2;
  mbarrier full count 1;
  mbarrier ack count 64;
  mbarrier ack2 count 32;
  if producer { elect { init full; init ack; init ack2; } }
  syncthreads;
  if producer {
    elect { arrive full; }
    wait ack parity 0;                     // both consumers saw phase 0
    elect { arrive full; }
    wait ack2 parity 0;                    // BUG: only the fast one is waited for
    elect { arrive full; }
  }
  if fast { wait full parity 0; arrive ack; wait full parity 1; arrive ack2; wait full parity 0; }
  if slow { wait full parity 0; arrive ack; wait full parity 1; }      // SLOW
}
""")


def test_sv501_slow_waiter_two_phases_behind():
    # §1.3 (a): slow observed phase 0, then means phase 1 — but the barrier may already be at k = 3
    r = check(STALE)
    assert_violation(r, {"SV501"})
    (d,) = diags(r, "SV501")
    assert d.span.line == line(STALE, "SLOW")
    # reported where the wait runs stale, or — equivalently, and first when the search takes
    # passing waits alone — where phase 2 completes without being ordered after the wait
    assert ("for parity 1 means phase 1, but the barrier is already in phase 3" in d.message
            or "for phase 1 of full is not ordered before the completion of phase 2" in d.message)


def test_sv501_back_pressure_from_every_waiter_is_safe():
    fixed = STALE.replace("mbarrier ack2 count 32;", "mbarrier ack2 count 64;").replace(
        "arrive ack; wait full parity 1; }      // SLOW", "arrive ack; wait full parity 1; arrive ack2; }")
    assert_safe(check(fixed))


# ---- design §3: a leader warp arrives for its warpgroup while sibling warps are still in the wait

LEADER = case("leader_warp", """\
protocol leader {
  param ITERS = 3;
  cta threads 256;
  role producer = warp 0;
  role consumer = warpgroup 1;
  mbarrier full count 1;
  mbarrier empty count 1;
  if producer { elect { init full; init empty; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      wait empty parity (k + 1) % 2;
      elect { arrive full; }
    }
  }
  if consumer {
    for k in 0..ITERS {
      wait full parity k % 2;       // WAIT
      // GROUP
      first thread { arrive empty; }   // warp 4's lane 0 arrives for the warpgroup
    }
  }
}
""")


def test_sv501_leader_warp_arrives_while_siblings_still_wait():
    # Warps of a role are not in lockstep: warps 5..7 can be overtaken twice, and their wait then
    # names a phase that has already completed and been overtaken: the aliasing of §1.3 (SV501).
    r = check(LEADER)
    assert_violation(r, {"SV501"})
    (d,) = diags(r, "SV501")
    assert d.span.line == line(LEADER, "// WAIT")
    assert any(w in d.message for w in ("consumer.w5", "consumer.w6", "consumer.w7"))
    assert "<- SV501" in d.trace[-1].note


def test_sv501_warpgroup_barrier_before_the_leader_arrive_is_safe():
    assert_safe(check(LEADER.replace("// GROUP", "bar.sync 1, 128;")))


LEADER_DATA = case("leader_warp_data", LEADER.replace(
    "  mbarrier full count 1;", "  smem buf bytes 128;\n  mbarrier full count 1;").replace(
    "      elect { arrive full; }", "      elect { write buf; arrive full; }   // WRITE").replace(
    "      // GROUP", "      read buf;\n      syncwarp;\n      // GROUP"))


def test_leader_warp_release_leaves_sibling_reads_unordered():
    # the sibling warps' reads are not covered by warp 4's elected arrive: the refill races them
    # (a sibling overtaken on its wait, before reading, is a stale waiter as above: SV501)
    r = check(LEADER_DATA)
    # the race is always found; the stale sibling (SV501) may be hidden behind it on every
    # path the reduced search explores (reductions keep verdicts, and findings a subset)
    assert r.verdict is Verdict.VIOLATION
    assert "SV302" in {d.code for d in r.diagnostics} <= {"SV302", "SV501"}
    assert lines(r, "SV302") == {line(LEADER_DATA, "// WRITE")}


def test_leader_warp_release_after_warpgroup_barrier_is_safe():
    assert_safe(check(LEADER_DATA.replace("// GROUP", "bar.sync 1, 128;")))


# ============================================================================ SV502 consumption rule

MISSING_WAIT = case("missing_wait", """\
protocol missing_wait {
  cta threads 32;
  mbarrier m count 1;
  elect { init m; }
  syncwarp;
  elect { arrive m; }
  elect { arrive m; }    // SECOND
}
""")


def test_sv502_arrive_in_a_phase_after_an_unobserved_one():
    r = check(MISSING_WAIT)
    assert_violation(r, {"SV502"})
    (d,) = diags(r, "SV502")
    assert d.span.line == line(MISSING_WAIT, "SECOND")
    assert "completes phase 1 although no wait observed the completion of phase 0" in d.message


def test_sv502_wait_between_the_phases_is_safe():
    assert_safe(check(MISSING_WAIT.replace("  elect { arrive m; }    // SECOND",
                                           "  wait m parity 0;\n  elect { arrive m; }")))


# ============================================================================ SV503 tx-count

UNBALANCED = case("unbalanced", """\
protocol unbalanced {
  cta threads 32;
  smem buf bytes 256;
  mbarrier full count 1;
  elect { init full; }
  syncwarp;
  elect { arrive.expect_tx full bytes 256; tma.load buf bytes 128 -> full; }
  wait full parity 0;     // WAIT
}
""")


def test_sv503_bytes_never_balance():
    r = check(UNBALANCED)
    assert_violation(r, {"SV503"})
    deadlock = [d for d in diags(r, "SV503") if "deadlock" in d.message]
    assert deadlock and deadlock[0].span.line == line(UNBALANCED, "WAIT")
    assert "tx 128" in deadlock[0].message


def test_sv503_balanced_bytes_are_safe():
    assert_safe(check(UNBALANCED.replace("tma.load buf bytes 128", "tma.load buf bytes 256")))


TX_RANGE = case("tx_range", """\
protocol range {
  cta threads 32;
  mbarrier full count 1;
  elect { init full; }
  syncwarp;
  elect { expect_tx full bytes 1048575; expect_tx full bytes 1; }     // OVER
  elect { complete_tx full bytes 1048575; complete_tx full bytes 1; arrive full; }
  wait full parity 0;
}
""")


def test_sv503_tx_count_out_of_range():
    r = check(TX_RANGE)
    assert_violation(r, {"SV503"})
    (d,) = diags(r, "SV503")
    assert d.span.line == line(TX_RANGE, "OVER")
    assert "would reach 1048576" in d.message


def test_sv503_same_bytes_interleaved_stay_in_range():
    # complete the first 1048575 bytes before expecting the last one: tx never leaves the range
    fixed = TX_RANGE.replace(
        "expect_tx full bytes 1; }     // OVER\n  elect { complete_tx full bytes 1048575;",
        "complete_tx full bytes 1048575; }\n  elect { expect_tx full bytes 1;")
    assert_safe(check(fixed))


NEG_TX = case("negative_tx", """\
protocol negtx {
  cta threads 32;
  mbarrier full count 1;
  elect { init full; }
  syncwarp;
  elect { complete_tx full bytes 16; arrive.expect_tx full bytes 16; }
  wait full parity 0;
}
""")


def test_negative_tx_before_arrive_expect_tx_still_completes():
    # §1.2 [O]: complete_tx(16) before arrive.expect_tx(16): the phase completed
    assert_safe(check(NEG_TX))


def test_negative_tx_without_expect_never_completes():
    # §1.2 [O]: pend = 0 and tx = −16 does not complete
    r = check(NEG_TX.replace("arrive.expect_tx full bytes 16;", "arrive full;"))
    assert_violation(r, {"SV503"})
    assert any("tx -16" in d.message for d in diags(r, "SV503"))


def test_expect_tx_after_arrive_completes_the_phase():
    # §1.2 [O]: expect_tx can complete a phase with pend = 0 and tx = −16
    assert_safe(check(NEG_TX.replace("arrive.expect_tx full bytes 16;", "arrive full; expect_tx full bytes 16;")))


# ============================================================================ SV504 overflow

OVERFLOW = case("overflow", """\
protocol overflow {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  mbarrier full count 1;
  if producer { elect { init full; } }
  syncthreads;
  if producer { arrive full; }          // ARRIVE
  if consumer { wait full parity 0; }
}
""")


def test_sv504_whole_warp_arrives_on_a_count_one_barrier():
    r = check(OVERFLOW)
    assert_violation(r, {"SV504"})
    assert lines(r, "SV504") == {line(OVERFLOW, "ARRIVE")}
    assert any("32 arrival(s) on full but only 1 pending" in d.message for d in diags(r, "SV504"))


def test_sv504_elected_arrive_is_safe():
    assert_safe(check(OVERFLOW.replace("if producer { arrive full; }", "if producer { elect { arrive full; } }")))


def test_sv504_arrive_count_larger_than_pending():
    r = check(OVERFLOW.replace("if producer { arrive full; }", "if producer { elect { arrive full count 2; } }"))
    assert_violation(r, {"SV504"})
    assert lines(r, "SV504") == {line(OVERFLOW, "ARRIVE")}


def test_sv504_arrive_drop_of_the_last_participant():
    r = check(OVERFLOW.replace("if producer { arrive full; }", "if producer { elect { arrive_drop full; } }"))
    assert_violation(r, {"SV504"})
    assert "takes its expected count 1 to 0" in diags(r, "SV504")[0].message


# ============================================================================ exit: bar vs mbarrier (§1.6)

EXIT_MBAR = case("exit_mbarrier", """\
protocol mbar_exit {
  cta threads 64;
  role leaver = warp 0;
  role waiter = warp 1;
  mbarrier done count 2;
  if waiter { elect { init done; } }
  syncthreads;
  if leaver { }
  if waiter { elect { arrive done; } wait done parity 0; }   // WAIT
}
""")


def test_exited_warp_does_not_arrive_on_an_mbarrier():
    # mbarrier arrivals are not automatic on exit: the waiter deadlocks
    r = check(EXIT_MBAR)
    assert_violation(r, {"SV201"})
    (d,) = diags(r, "SV201")
    assert d.span.line == line(EXIT_MBAR, "WAIT")
    assert "waiter can never move again" in d.message and "pending 1/2" in d.message


def test_leaving_warp_arrive_drop_releases_the_mbarrier_waiter():
    # CUDA PG "Early Exit": a participant that leaves must arrive_drop
    assert_safe(check(EXIT_MBAR.replace("if leaver { }", "if leaver { elect { arrive_drop done; } }")))


def test_later_phases_need_the_dropped_participant_no_more():
    text = Spec("""\
protocol drop {
  param ITERS = 3;
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  mbarrier m count 2;
  if a { elect { init m; } }
  syncthreads;
  if b { elect { arrive_drop m; } }
  if a {
    for k in 0..ITERS {
      elect { arrive m; }
      wait m parity k % 2;
    }
  }
}
""")
    assert_safe(check(text))
    r = check(text.replace("elect { arrive_drop m; }", "elect { arrive m; }"))
    assert_violation(r, {"SV201"})  # a plain arrive keeps the count at 2 for the next phase


EXIT_BAR = case("exit_syncthreads", """\
protocol exited {
  cta threads 128;
  role early = warp 0;
  role writer = warp 1;
  role reader = warps 2..4;
  smem buf bytes 128;
  if writer { write buf; }                      // WRITE
  if writer || reader { syncthreads; }
  if reader { read buf; }                       // R
}
""")


def test_syncthreads_is_released_by_exited_threads():
    # PTX exit: "Barriers exclusively waiting on arrivals from exited threads are always released"
    assert_safe(check(EXIT_BAR))


def test_syncthreads_with_exited_threads_still_orders_the_participants():
    text = EXIT_BAR.replace("  if writer || reader { syncthreads; }\n", "")
    r = check(text)
    assert_violation(r, {"SV301"})
    assert lines(r, "SV301") <= {line(text, "// WRITE"), line(text, "// R")}


def test_syncthreads_waits_for_warps_that_have_not_exited():
    text = EXIT_BAR.replace("  smem buf", "  mbarrier never count 1;\n  smem buf").replace(
        "if writer || reader { syncthreads; }",
        "if writer || reader { syncthreads; }\n  if early { elect { init never; } syncwarp; wait never parity 0; }")
    r = check(text)
    assert_violation(r, {"SV201"})
    assert "early, reader, writer can never move again" in diags(r, "SV201")[0].message
    assert "bar.sync 0 — 96 of 128 threads arrived" in diags(r, "SV201")[0].message


def test_exited_warp_releases_a_syncthreads_but_not_an_mbarrier_together():
    text = """\
protocol both {
  cta threads 64;
  role leaver = warp 0;
  role waiter = warp 1;
  mbarrier done count 1;
  if waiter { elect { init done; } }
  if waiter { syncthreads; }
  if waiter { wait done parity 0; }
}
"""
    r = check(text)
    assert_violation(r, {"SV201"})  # passed the syncthreads, stuck on the mbarrier
    assert "wait on done" in diags(r, "SV201")[0].message


# ============================================================================ SV601 proxy fence

TMA_STORE = case("tma_store_fence", """\
protocol store {
  cta threads 32;
  smem out bytes 256;
  write out;                 // WRITE
  syncwarp;
  elect { tma.store out; bulk.commit; bulk.wait_read 0; }   // S
}
""")


def test_sv601_generic_write_then_tma_store_without_fence():
    r = check(TMA_STORE)
    assert_violation(r, {"SV601"})
    (d,) = diags(r, "SV601")
    assert d.span.line == line(TMA_STORE, "// S")
    assert f"generic write at line {line(TMA_STORE, '// WRITE')} by cta.w0 reaches it through no " \
           "fence.proxy.async covering the slot" in d.message


def test_sv601_writer_fence_before_the_syncwarp_is_safe():
    assert_safe(check(TMA_STORE.replace("// WRITE\n", "// WRITE\n  fence.proxy.async;\n")))


WGMMA_FENCE = case("wgmma_fence", """\
protocol wg {
  cta threads 160;
  role mma = warpgroup 0;
  role producer = warp 4;
  smem a bytes 256;
  mbarrier full count 1;
  if producer { elect { init full; } }
  syncthreads;
  if producer {
    elect { write a; arrive full; }     // WRITE
  }
  if mma {
    wait full parity 0;
    wgmma.read a;                       // MMA
    wgmma.commit;
    wgmma.wait 0;
  }
}
""")


def test_sv601_st_shared_operand_read_by_wgmma_without_fence():
    # §6: "An async proxy fence must be used … prior writes to shared memory matrices …"
    r = check(WGMMA_FENCE)
    assert_violation(r, {"SV601"})
    (d,) = diags(r, "SV601")
    assert d.span.line == line(WGMMA_FENCE, "MMA")
    assert "wgmma operand read" in d.message


def test_sv601_fenced_wgmma_operand_is_safe():
    assert_safe(check(WGMMA_FENCE.replace("elect { write a; arrive full; }",
                                          "elect { write a; fence.proxy.async; arrive full; }")))


def test_sv601_tma_load_result_needs_no_proxy_fence():
    # §5 (ii): async write → generic read needs no fence once completion is observed
    text = INFLIGHT.replace("// LOAD\n", "// LOAD\n  wait full parity 0;\n  read buf;\n")
    assert_safe(check(text))


# ============================================================================ SV602 scopes

SCOPE = case("scope", """\
protocol scope {
  cluster 2;
  cta threads 32;
  smem buf bytes 64;
  mbarrier m count 1;
  elect { init m; fence.mbarrier_init; }
  cluster.sync;
  if cta == 1 { elect { write buf; arrive m @ 0; } }    // ARRIVE
  if cta == 0 { wait m parity 0; read buf @ 1; }        // WAIT
  cluster.sync;
}
""")


def test_sv602_cross_cta_data_with_cta_scope_release_and_acquire():
    # the .cta release that carries the data is the error; the .cta acquire of it is the warning
    # (CUTLASS's ClusterBarrier::wait is .acquire.cta: docs/model.md, "Scopes across CTAs")
    r = check(SCOPE)
    assert_violation(r, {"SV602"})
    assert lines(r, "SV602") == {line(SCOPE, "ARRIVE")}
    assert lines(r, "SV602", Severity.WARNING) == {line(SCOPE, "WAIT")}
    assert "use arrive.release.cluster" in " ".join(d.message for d in diags(r, "SV602"))
    assert "wait.acquire.cluster" in " ".join(d.message for d in diags(r, "SV602", Severity.WARNING))


def test_sv602_cluster_scope_release_and_acquire_are_safe():
    fixed = SCOPE.replace("arrive m @ 0", "arrive.release.cluster m @ 0").replace(
        "wait m parity 0", "wait.acquire.cluster m parity 0")
    assert_safe(check(fixed))


def test_sv602_cluster_release_with_cta_acquire():
    r = check(SCOPE.replace("arrive m @ 0", "arrive.release.cluster m @ 0"))
    assert r.verdict is Verdict.SAFE and not errors(r)
    assert lines(r, "SV602", Severity.WARNING) == {line(SCOPE, "WAIT")}


REUSE = case("remote_empty", """\
protocol reuse {
  cluster 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf bytes 64;
  mbarrier empty count 1;
  if producer { elect { init empty; fence.mbarrier_init; } }
  if producer && cta == 0 { write buf; }
  cluster.sync;
  if consumer && cta == 1 { read buf @ 0; syncwarp; elect { arrive empty @ 0; } }   // ARRIVE
  if producer && cta == 0 { wait.acquire.cluster empty parity 0; write buf; }   // REFILL
  cluster.sync;
}
""")


def test_sv602_cta_scope_remote_empty_arrive_is_a_warning():
    # CUTLASS's remote "empty" arrive uses the default .cta scope; it only guards reuse
    r = check(REUSE)
    assert_safe(r, warns={"SV602"})
    assert lines(r, "SV602", Severity.WARNING) == {line(REUSE, "ARRIVE")}


def test_sv602_cluster_scope_remote_empty_arrive_has_no_warning():
    assert_safe(check(REUSE.replace("arrive empty @ 0", "arrive.release.cluster empty @ 0")))


def test_sv602_remote_empty_arrive_before_the_remote_read_is_a_war_race():
    r = check(REUSE.replace("read buf @ 0; syncwarp; elect { arrive empty @ 0; }",
                            "elect { arrive.release.cluster empty @ 0; } read buf @ 0;"))
    assert_violation(r, {"SV302"})
    assert lines(r, "SV302") == {line(REUSE, "REFILL")}


# ============================================================================ all codes covered


def test_every_checker_code_has_a_triggering_case_here():
    import re
    from pathlib import Path

    source = Path(__file__).read_text()
    wanted = ["SV201", "SV202", "SV203", "SV204", "SV205", "SV301", "SV302", "SV303", "SV401", "SV402", "SV403",
              "SV404", "SV405", "SV501", "SV502", "SV503", "SV504", "SV601", "SV602"]
    for code in wanted:
        assert re.search(rf"def test_{code.lower()}_", source), code


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_load(name):
    assert load(CASES[name], path=f"{name}.sync").name
