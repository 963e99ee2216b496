"""Non-bulk cp.async, its groups and cp.async.mbarrier.arrive[.noinc], mbarrier.test_wait, 1-D
cp.async.bulk, and the local-form arrive on a peer address (SV407) — docs/language.md §7.4, §7.1.

Each reproducer comes with a near twin whose verdict must stay as it is. Where the bmc engine
models the operations (cp.async and its groups, cp.async.bulk, SV407) both engines must agree;
it refuses cp.async.mbarrier.arrive and test_wait, and that refusal is checked too.
"""

from __future__ import annotations

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import InputError
from syncverify.result import Verdict


def check(text: str, engine: str = "explicit"):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


def both(text: str) -> set[str]:
    """The error codes of the explicit engine, after checking that bmc finds the same verdict
    and only codes the explicit engine found."""
    ref, res = check(text), check(text, "bmc")
    assert res.verdict == ref.verdict, (ref, res)
    assert errors(res) <= errors(ref)
    return errors(ref)


# ---------------------------------------------------------------------------------------------
# cp.async groups: a wait retires the groups older than its N most recent, in the waiting thread

GROUPS = """\
protocol cp_groups {
  cta threads 64;
  role loader = warp 0;
  role user = warp 1;
  smem tile[2] bytes 512;
  for k in 0..2 {
    if loader { cp.async tile[k]; cp.async.commit_group; }
  }
  if loader { WAIT }
  SYNC
  read tile[0];
  read tile[1];
}
"""


def groups(wait: str, sync: str = "syncthreads;") -> str:
    return GROUPS.replace("WAIT", wait).replace("SYNC", sync)


@pytest.mark.parametrize("wait, codes", [
    ("cp.async.wait_group 0;", set()),
    ("cp.async.wait_all;", set()),
    ("cp.async.wait_group 1;", {"SV301"}),   # the newest group (tile[1]) may still be in flight
    ("", {"SV301"}),                         # nothing retires the copies
])
def test_wait_group_retires_the_older_groups(wait, codes):
    assert both(groups(wait)) == codes


def test_wait_all_also_retires_the_uncommitted_copies():
    """PTX: wait_all = commit_group; wait_group 0 — a copy never committed is retired by it, and
    not by wait_group 0 (its twin)."""
    text = groups("cp.async tile[0]; cp.async.wait_all;").replace("for k in 0..2", "for k in 1..2")
    assert both(text) == set()
    assert both(text.replace("cp.async.wait_all;", "cp.async.wait_group 0;")) == {"SV301"}


def test_a_threads_wait_retires_only_its_own_copies():
    """The loader's wait does not order its copies before the other warp's reads: a barrier after
    the wait does (CUTLASS sm80: cp_async_wait then __syncthreads)."""
    assert both(groups("cp.async.wait_group 0;", sync="")) == {"SV301"}
    assert both(groups("cp.async.wait_group 0;", sync="syncthreads;")) == set()


def test_the_issuer_is_not_ordered_after_its_own_copy_before_the_wait():
    text = """\
protocol own_copy {
  cta threads 32;
  smem tile bytes 512;
  cp.async tile;
  cp.async.commit_group;
  BEFORE
  cp.async.wait_group 0;
  AFTER
}
"""
    assert both(text.replace("BEFORE", "read tile;").replace("AFTER", "")) == {"SV301"}
    assert both(text.replace("BEFORE", "").replace("AFTER", "read tile;")) == set()


def test_a_cta_may_not_exit_with_a_copy_in_flight():
    text = groups("cp.async.wait_group 0;").replace("  read tile[0];\n  read tile[1];\n", "")
    assert both(text) == set()
    assert both(text.replace("cp.async.wait_group 0;", "")) == {"SV404"}


def test_specs_agree_on_both_engines_at_two_iterations():
    for name, codes in (("cutlass_sm80_multistage_cp_async", set()), ("cutlass_sm80_multistage_cp_async_no_sync",
                                                                    {"SV301"})):
        protocol = syncverify.load(f"specs/{name}.sync", {"ITERS": 2})
        ref = check_protocol(protocol, Options(engine="explicit", timeout=60))
        res = check_protocol(protocol, Options(engine="bmc", timeout=300))
        assert errors(ref) == codes and res.verdict == ref.verdict and errors(res) <= errors(ref), (ref, res)


# ---------------------------------------------------------------------------------------------
# cp.async.mbarrier.arrive: an async arrive-on once the thread's prior copies are complete

MBAR = """\
protocol cp_mbar {
  param ITERS = 3;
  cta threads 64;
  role loader = warp 0;
  role user = warp 1;
  smem tile[2] bytes 512;
  mbarrier full[2] count COUNT;
  mbarrier empty[2] count 1;
  first thread { init full[*]; init empty[*]; }
  syncthreads;
  if loader {
    for k in 0..ITERS {
      wait empty[k % 2] parity (k / 2 + 1) % 2;
      ISSUE
    }
  }
  if user {
    for k in 0..ITERS {
      wait full[k % 2] parity (k / 2) % 2;
      read tile[k % 2];
      syncwarp;
      elect { arrive empty[k % 2]; }
    }
  }
}
"""


def mbar(issue: str, count: int = 1) -> str:
    return MBAR.replace("ISSUE", issue).replace("COUNT", str(count))


@pytest.mark.parametrize("issue, count, codes", [  # (a set in a tuple: at least those codes)
    # .noinc: the async arrive-on counts towards the phase
    ("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; }", 1, set()),
    # without .noinc the increment nets it out: nothing completes `full`
    ("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive full[k % 2]; }", 1, {"SV201"}),
    # ... so the thread arrives itself as well (count 1 still)
    ("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive full[k % 2]; arrive full[k % 2]; }", 1, set()),
    # .noinc and an arrive of its own: one arrival too many per phase
    ("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; arrive full[k % 2]; }", 1,
     ({"SV502"},)),
    # an ordinary arrive does not wait for the copy: the consumer's read races with it
    ("elect { cp.async tile[k % 2]; arrive full[k % 2]; }", 1, {"SV301"}),
    # every lane copies and arrives: count 32
    ("cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2];", 32, set()),
])
def test_cp_async_mbarrier_arrive(issue, count, codes):
    text = mbar(issue, count)
    if count == 32:
        text = text.replace("param ITERS = 3;", "param ITERS = 1;")
    found = errors(check(text))
    assert found >= codes[0] if isinstance(codes, tuple) else found == codes


def test_a_second_arrive_on_lands_unobserved():
    """Two .noinc arrive-ons on a barrier of count 1: the second lands in phase 1 before any wait
    observed phase 0 — the arrival's own SV502, named after the operation (the completion is the
    asynchronous agents' shared arrive, AsyncAgentOps._agent_arrive). Its twin with one arrive-on
    is safe."""
    twice = mbar("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; "
                 "cp.async.mbarrier.arrive.noinc full[k % 2]; }")
    res = check(twice)
    messages = [d.message for d in res.diagnostics if d.code == "SV502"]
    assert messages and all(m.startswith("cp.async.mbarrier.arrive on full[") for m in messages), messages
    assert errors(check(mbar("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; }"))) \
        == set()


def test_the_arrive_covers_only_the_copies_issued_before_it():
    """A copy issued after the arrive is not released by it: the consumer's read of it races."""
    text = mbar("elect { cp.async.mbarrier.arrive.noinc full[k % 2]; cp.async tile[k % 2]; }")
    assert errors(check(text)) == {"SV301"}


def test_bmc_refuses_cp_async_mbarrier_arrive():
    res = check(mbar("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; }"), "bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "cp.async.mbarrier.arrive" in res.coverage


def test_the_lift_refuses_cp_async_mbarrier_arrive():
    """Its agents name the copies they cover by write epoch, which the lift renumbers: never safe."""
    res = check(mbar("elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; }"), "z3")
    assert res.verdict is Verdict.INCONCLUSIVE and "cp.async.mbarrier.arrive" in res.coverage


# ---------------------------------------------------------------------------------------------
# test_wait: a single non-blocking probe whose result nothing branches on orders nothing

PROBE = """\
protocol probe {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile bytes 1024;
  mbarrier full count 1;
  first thread { init full; }
  syncthreads;
  if producer { elect { arrive.expect_tx full bytes 1024; tma.load tile -> full; } }
  if consumer { PROBE full parity 0; read tile; }
}
"""


def test_a_single_test_wait_is_no_synchronization():
    assert errors(check(PROBE.replace("PROBE", "test_wait"))) == {"SV301"}
    assert errors(check(PROBE.replace("PROBE", "mbarrier.test_wait.parity"))) == {"SV301"}
    assert both(PROBE.replace("PROBE", "wait")) == set()  # the spin loop is `wait`


def test_a_test_wait_that_passes_acquires():
    """When the phase has surely completed (the consumer waited for it before), the probe passes."""
    text = PROBE.replace("PROBE full parity 0;", "wait full parity 0; test_wait full parity 0;")
    assert errors(check(text)) == set()


def test_test_wait_needs_an_initialized_barrier():
    assert errors(check(PROBE.replace("first thread { init full; }", "").replace("PROBE", "test_wait"))) \
        >= {"SV401"}


# ---------------------------------------------------------------------------------------------
# 1-D cp.async.bulk, into the executing CTA or a peer's (.shared::cluster on a mapa'd address)

BULK = """\
protocol bulk_peer {
  cluster 2;
  cta threads 32;
  smem tile bytes 1024;
  mbarrier full count 1;
  elect { init full; fence.mbarrier_init; }
  cluster.sync;
  if cta == 1 { elect { arrive.expect_tx full bytes 1024; } }
  if cta == 0 {
    elect { cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes tile bytes 1024 -> full @ 1; }
  }
  if cta == 1 { elect { CONSUME } }
  cluster.sync;
}
"""


def test_bulk_copy_into_a_peer_completes_on_the_peers_barrier():
    assert both(BULK.replace("CONSUME", "wait full parity 0; read tile;")) == set()
    assert both(BULK.replace("CONSUME", "read tile;")) == {"SV301"}


def test_bulk_copy_into_the_executing_cta():
    text = BULK.replace("@ 1", "").replace("if cta == 0 {\n    elect { cp.async", "if cta == 1 {\n    elect { cp.async")
    assert both(text.replace("CONSUME", "wait full parity 0; read tile;")) == set()


def test_the_shared_cta_form_of_a_bulk_copy_takes_no_peer():
    with pytest.raises(InputError) as err:
        syncverify.load(BULK.replace(".shared::cluster.global", ".shared::cta.global").replace("CONSUME", ""),
                        path="t.sync")
    assert err.value.diagnostics[0].code == "SV108"


# ---------------------------------------------------------------------------------------------
# SV407: the local-form arrive given a peer's address (TVM TIRx)

def test_local_form_arrive_on_a_peer_is_sv407_and_on_the_own_cta_is_fine():
    text = """\
protocol local_form {
  cluster 2;
  cta threads 32;
  mbarrier m count 1;
  elect { init m; fence.mbarrier_init; }
  cluster.sync;
  elect { arrive.release.cluster.shared::cta m @ TARGET; }
  elect { wait m parity 0; }
  cluster.sync;
}
"""
    assert both(text.replace("TARGET", "cta ^ 1")) == {"SV407"}
    assert both(text.replace("TARGET", "cta")) == set()
    assert both(text.replace(".shared::cta", ".shared::cluster").replace("TARGET", "cta ^ 1")) == set()


def test_group_wait_needs_a_constant():
    with pytest.raises(InputError) as err:
        wait = "  for k in 0..2 { if loader { cp.async.wait_group k; } }"
        syncverify.load(groups("").replace("  if loader {  }", wait), path="t.sync")
    assert [d.code for d in err.value.diagnostics] == ["SV110"]


def test_the_lift_shifts_cp_async_group_numbers():
    """The multistage ring is proved for every trip count: the lift's normalization shifts the
    cp.async group numbers with the bulk and wgmma ones (engines/symbolic/key.py). Its twin with
    the waits one group short stays a violation."""
    res = check_protocol(syncverify.load("specs/cutlass_sm80_multistage_cp_async.sync"), Options(engine="z3",
                                                                                              timeout=120))
    assert res.verdict is Verdict.SAFE and res.bound.startswith("all-iterations"), res
    text = open("specs/cutlass_sm80_multistage_cp_async.sync").read().replace("cp.async.wait_group STAGES - 2;",
                                                                              "cp.async.wait_group STAGES - 1;")
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(engine="z3", timeout=120))
    assert res.verdict is Verdict.VIOLATION and errors(res) == {"SV301"}, res


# ---------------------------------------------------------------------------------------------
# A whole warp's cp.async is one copy per lane, and each lane's wait_group retires only its own
# (PTX: "cp.async.wait_group ... prior cp.async-groups committed by the executing thread"). A
# release by one lane after the wait publishes that lane's copy alone, as for a generic write;
# a `syncwarp` first orders every lane's retired copy before it (PTX bar.warp.sync).

LANE_RELEASE = """\
protocol cp_lane_release {
  cta threads 64;
  role loader = warp 0;
  role user = warp 1;
  smem buf bytes 512;
  mbarrier b count 1;
  first thread { init b; }
  syncthreads;
  if loader {
    COPY
    cp.async.commit_group;
    cp.async.wait_group 0;
    RELEASE
  }
  if user {
    wait b parity 0;
    read buf;
  }
}
"""


def lane_release(release: str, copy: str = "cp.async buf;") -> str:
    return LANE_RELEASE.replace("RELEASE", release).replace("COPY", copy)


@pytest.mark.parametrize("release, codes", [
    ("elect { arrive b; }", {"SV301"}),                 # lane 0 publishes its own copy only
    ("if lane == 1 { arrive b; }", {"SV301"}),
    ("syncwarp; elect { arrive b; }", set()),           # the syncwarp orders every lane's copy first
    ("syncwarp; if lane == 1 { arrive b; }", set()),
])
def test_one_lanes_release_after_a_warps_wait_group_publishes_its_own_copy_only(release, codes):
    for engine in ("explicit", "z3", "bmc"):
        r = check(lane_release(release), engine)
        assert errors(r) == codes, (engine, r)


def test_an_elected_copy_is_published_by_the_elected_release():
    text = lane_release("elect { arrive b; }", copy="elect { cp.async buf; }")
    for engine in ("explicit", "z3"):
        assert check(text, engine).verdict is Verdict.SAFE, engine
    # bmc does not model a group whose copy and wait are made by different lanes: it refuses
    r = check(text, "bmc")
    assert r.verdict is Verdict.INCONCLUSIVE and "different lanes" in r.coverage + str(r), r


def test_the_lanes_read_their_own_copies_after_their_wait():
    """Program order of each lane after its own wait: the warp's own read of the buffer is ordered."""
    text = lane_release("read buf; syncwarp; elect { arrive b; }")
    assert errors(check(text)) == set()
    assert errors(check(text.replace("read buf;", "elect { read buf; }"))) == {"SV301"}  # lane 0 reads all lanes' bytes


# The same holds for bulk stores (PTX cp.async.bulk.wait_group: "prior bulk async-groups committed
# by the executing thread"): a store group issued by every lane is retired lane by lane, and each
# lane's store reads the whole slot.

STORE_RELEASE = """\
protocol bulk_lane_release {
  cta threads 64;
  role epi = warp 0;
  role other = warp 1;
  smem buf bytes 512;
  mbarrier b count 1;
  first thread { init b; }
  syncthreads;
  if epi {
    write buf;
    fence.proxy.async;
    syncwarp;
    STORE
    RELEASE
  }
  if other {
    wait b parity 0;
    write buf;
  }
}
"""


@pytest.mark.parametrize("store, release, codes", [
    ("tma.store buf; bulk.commit; bulk.wait_read 0;", "elect { arrive b; }", {"SV302"}),
    ("tma.store buf; bulk.commit; bulk.wait_read 0;", "syncwarp; elect { arrive b; }", set()),
    ("elect { tma.store buf; bulk.commit; bulk.wait_read 0; }", "elect { arrive b; }", set()),
])
def test_one_lanes_release_after_a_warps_bulk_wait_publishes_its_own_store_only(store, release, codes):
    text = STORE_RELEASE.replace("STORE", store).replace("RELEASE", release)
    for engine in ("explicit", "z3", "bmc"):
        assert errors(check(text, engine)) == codes, engine


def test_a_warps_own_write_after_its_bulk_wait_races_with_the_other_lanes_stores():
    """Each lane's store reads the whole slot: a lane's later write is ordered after its own store's
    read only, so the warp rewriting the slot after `bulk.wait_read` without a syncwarp races."""
    text = STORE_RELEASE.replace("STORE", "tma.store buf; bulk.commit; bulk.wait_read 0; write buf;") \
        .replace("RELEASE", "syncwarp; elect { arrive b; }")
    assert errors(check(text)) == {"SV302"}
    assert errors(check(text.replace("bulk.wait_read 0; write buf;", "bulk.wait_read 0; syncwarp; write buf;"))) \
        == set()


def test_the_promela_export_refuses_a_bulk_store_group_of_several_lanes():
    """Its model retires a group for every lane at once, so it would call the racing release safe."""
    from syncverify.export import ExportError, export_model
    racy = STORE_RELEASE.replace("STORE", "tma.store buf; bulk.commit; bulk.wait_read 0;") \
        .replace("RELEASE", "elect { arrive b; }")
    with pytest.raises(ExportError, match="bulk store group of several lanes"):
        export_model(syncverify.load(racy))
    elected = racy.replace("tma.store buf; bulk.commit; bulk.wait_read 0;",
                           "elect { tma.store buf; bulk.commit; bulk.wait_read 0; }")
    assert export_model(syncverify.load(elected)).text
