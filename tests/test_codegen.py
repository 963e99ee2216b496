"""The CUDA emitter: committed kernels are current and compile; PTX strings, expectations, refusals.

Runs without a GPU. Compiling uses nvcc when it is on PATH, else NVRTC through cuda.core when that
is importable, else the compile test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from syncverify.codegen import EmitRefused, emit
from syncverify.codegen.golden import generate
from syncverify.codegen.replay import CLUSTER_RELEASE_DRAINS_WGMMA
from syncverify.codegen.schedule import stamp
from syncverify.gpu import outcome as oc
from syncverify.lang import load

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"


@pytest.fixture(scope="module")
def regenerated() -> dict[str, str]:
    cwd = os.getcwd()
    os.chdir(ROOT)  # the launch descriptions name specs by their path relative to the repository
    try:
        return generate(Path("specs"))
    finally:
        os.chdir(cwd)


def _strip_replay(index_text: str) -> list[dict]:
    return [{k: v for k, v in e.items() if not k.startswith("replay")} for e in json.loads(index_text)["specs"]]


def test_committed_kernels_are_up_to_date(regenerated):
    stale = []
    for rel, text in regenerated.items():
        path = KERNELS / rel
        if not path.exists():
            stale.append(f"{rel} (missing)")
        elif rel == "index.json":
            if _strip_replay(path.read_text()) != _strip_replay(text):
                stale.append(rel)
        elif path.read_text() != text:
            stale.append(rel)
    extra = [p.name for p in KERNELS.glob("*.cu") if p.name not in regenerated]
    assert not stale and not extra, (f"kernels/ is out of date: {stale + extra}; regenerate with "
                                     "`python3 -m syncverify.codegen.golden` (and --replay for kernels/replay/)")


def _compiler():
    if shutil.which("nvcc"):
        return "nvcc"
    try:
        from cuda.core import Program  # noqa: F401
    except Exception as err:  # not installed, or no NVRTC library
        pytest.skip(f"no nvcc on PATH and no NVRTC through cuda.core ({type(err).__name__}: {err})")
    return "nvrtc"


# The committed kernels (kernels/*.cu and the probes), and the replay kernels kernels/index.json names:
# kernels/replay/ is not committed (codegen/golden.py), so those are written first (the `replays` fixture).
COMMITTED = sorted(p.relative_to(KERNELS).as_posix() for d in (KERNELS, KERNELS / "probes") for p in d.glob("*.cu"))
REPLAYS = sorted(e["replay"] for e in json.loads((KERNELS / "index.json").read_text())["specs"] if e.get("replay"))


@pytest.fixture(scope="module")
def replays() -> dict[str, str]:
    """The replay kernels, as `python3 -m syncverify.codegen.golden --replay` writes them (the checker's search)."""
    cwd = os.getcwd()
    os.chdir(ROOT)  # the launch descriptions name specs by their path relative to the repository
    try:
        return generate(Path("specs"), replay=True)
    finally:
        os.chdir(cwd)


# every kernel with SYNCVERIFY_SLOW=1; every other one in CI (nvcc takes about a second each, some 100 of them)
COMPILED = COMMITTED + REPLAYS if os.environ.get("SYNCVERIFY_SLOW") else COMMITTED[::2] + REPLAYS[::2]


@pytest.mark.parametrize("kernel", COMPILED)
def test_kernel_compiles_for_sm90a(kernel, tmp_path, request):
    how = _compiler()
    src = KERNELS / kernel
    if kernel in REPLAYS:
        src = tmp_path / kernel
        src.parent.mkdir()
        src.write_text(request.getfixturevalue("replays")[kernel])
    if how == "nvcc":
        r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(src)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        # ptxas must leave every wgmma asynchronous: a serialized one (C7510-C7520: "serialized", "is
        # injected") reads its operands before the next instruction, which hides every wgmma WAR race
        assert "serialized" not in r.stderr and "is injected" not in r.stderr, r.stderr
    else:
        from cuda.core import Program, ProgramOptions

        Program(src.read_text(), code_type="c++", options=ProgramOptions(arch="sm_90a", std="c++17")).compile("cubin")


def test_tcgen05_specs_are_refused_with_a_reason():
    with pytest.raises(EmitRefused, match="tcgen05"):
        emit(load(str(ROOT / "specs/cutlass_2sm_tmem_alloc_race.sync")))


def test_cli_emit_refusal_exits_2(tmp_path, capsys):
    import argparse

    from syncverify.cli.emit import cmd_emit
    args = argparse.Namespace(spec=str(ROOT / "specs/cutlass_2sm_tmem_alloc_fixed.sync"), output=str(tmp_path / "k.cu"),
                              defines=[], grid=1, replay=None, check_stride=1)
    assert cmd_emit(args) == 2
    assert "sm_90a" in capsys.readouterr().err


def test_cli_emit_writes_kernel_and_launch(tmp_path):
    import argparse

    from syncverify.cli.emit import cmd_emit

    args = argparse.Namespace(spec=str(ROOT / "specs/cutlass_ws_ring.sync"), output=str(tmp_path / "ring.cu"),
                              defines=[("ITERS", 12)], grid=2, replay=None, check_stride=1)
    assert cmd_emit(args) == 0
    launch = json.loads((tmp_path / "ring.json").read_text())
    assert launch["grid"] == 2 and launch["block"] == 384 and launch["params"]["ITERS"] == 12
    assert launch["shmem_size"] >= 4 * 16384


def test_exact_ptx_of_the_semantics_table():
    src = (KERNELS / "cluster_multicast_ring.cu").read_text()
    for s in ["mbarrier.init.shared::cta.b64 [%1], %0;",
              "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%1], %0;",
              "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%1], %2;",
              "mapa.shared::cluster.u32  remAddr32, %0, %1; mbarrier.arrive.release.cluster.shared::cluster.b64  "
              "_, [remAddr32];",
              "fence.mbarrier_init.release.cluster;",
              "barrier.cluster.arrive.relaxed.aligned;", "barrier.cluster.wait.aligned;",
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"]:
        assert s in src, s
    store = (KERNELS / "tma_store_epilogue.cu").read_text()
    for s in ["cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;", "cp.async.bulk.commit_group;",
              "cp.async.bulk.wait_group.read %0;", "bar.sync %0, %1;", "fence.proxy.async.shared::cta;"]:
        assert s in store, s
    assert "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8" in (KERNELS / "wgmma_release_after_wait.cu").read_text()
    assert 'asm volatile("mbarrier' in src and '"memory");' in src


def test_every_wait_has_a_watchdog():
    src = (KERNELS / "cutlass_ws_ring.cu").read_text()
    assert "%%globaltimer" in src and "SV_STATE_TIMEOUT" in src
    assert src.count("sv_wait_acquire_cta(c,") == 2  # the producer's empty wait and the consumers' full wait


def test_ring_reads_observe_the_copy_of_their_iteration():
    launch = json.loads((KERNELS / "cutlass_ws_ring.json").read_text())
    nsites = launch["nsites"]
    load_site = next(s["index"] for s in launch["sites"] if s["kind"] == "TmaLoad")
    producer = next(p["index"] for p in launch["processes"] if p["role"] == "producer")
    iters = launch["params"]["ITERS"]
    consumers = [p for p in launch["processes"] if p["role"] == "consumer"]
    assert len(launch["expected"]) == iters * len(consumers)
    for k in range(iters):  # every consumer warp's k-th read expects the producer's k-th copy
        assert launch["expected"][k] == stamp(producer, load_site, k, nsites)
    assert launch["schedule"]["complete"] and not launch["schedule"]["intended"]


def test_stamps_decode_to_spec_terms():
    launch = json.loads((KERNELS / "cutlass_ws_ring.json").read_text())
    word = launch["expected"][3]
    assert "producer.w0@cta0 line" in oc.decode_stamp(launch, word) and "#3" in oc.decode_stamp(launch, word)
    assert oc.decode_stamp(launch, 0).startswith("nobody")


def test_agreement_rules():
    ok = [oc.Rep(oc.COMPLETED)] * 3
    hang = [oc.Rep(oc.HANG, stuck=[{"line": 67}, {"line": 79}])] * 3
    assert oc.agreement(set(), set(), ok)[0]
    assert not oc.agreement(set(), set(), hang)[0]
    assert oc.agreement({"SV201"}, {67, 79, 89}, hang)[0]
    assert not oc.agreement({"SV201"}, {12}, hang)[0]
    assert oc.agreement({"SV402"}, set(), [oc.Rep(oc.COMPLETED), oc.Rep(oc.HANG)])[0]
    assert not oc.agreement({"SV302"}, set(), ok)[0]
    msg = "deadlock: a can never move again. Blocked: producer.w0 line 67: wait on x; a.w3 line 89: wait on y"
    assert oc.model_blocked_lines(msg) == {67, 89}


def test_runner_imports_nothing_of_the_checker():
    """The GPU machine has no lark and no z3: the runner must load with both unavailable."""
    code = ("import sys; sys.modules['lark'] = None; sys.modules['z3'] = None; "
            f"sys.path.insert(0, {str(ROOT / 'syncverify/gpu')!r}); import runner, outcome, device; "
            "assert 'syncverify' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_a_stuck_replay_is_no_evidence():
    stuck = [oc.Rep(oc.REPLAY_FAILED, stuck=[{"line": 44, "state": "replay_stuck"}])] * 2
    agree, why = oc.agreement({"SV302"}, set(), stuck)
    assert not agree and "no evidence" in why


def _order(name: str):
    from syncverify.codegen import replay_order
    from syncverify.codegen.sites import collect_sites, site_index

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        protocol = load(f"specs/{name}.sync")
        return protocol, replay_order(protocol, site_index(collect_sites(protocol)))
    finally:
        os.chdir(cwd)


def test_per_warp_release_replay_holds_the_uncovered_lanes_past_the_release():
    protocol, order = _order("cutlass_ws_ring_per_warp_release")
    (h,) = order.holds
    assert (h.kind, h.process, h.occurrence, h.until_turn) == ("late-lanes", 1, 0, len(order.steps))
    sites = {s["index"]: s for s in emit(protocol).launch["sites"]}
    assert sites[h.site]["line"] == 49 and sites[h.after_site]["line"] == 50  # the read, then the per-warp arrive
    src = emit(protocol, replay=order).source
    body = src[src.index("line 50: arrive"):]
    assert "hold: the line 49 read of the lanes lane 0's step does not cover" in body
    assert "if (c.pidx != 0u)" in body


def test_wgmma_replay_is_ungated_and_queues_a_chain_before_the_held_read():
    protocol, order = _order("wgmma_release_before_wait")
    assert order.steps == () and "warpgroup-collective" in order.why_ungated and order.events
    (h,) = order.holds
    assert h.kind == "slow-wgmma" and h.occurrence == 0 and h.cta == -1  # one CTA: no CTA condition
    src = emit(protocol, replay=order).source
    assert "c.cta ==" not in src
    assert "sv_gate(" not in src and f"i < {h.chain}u" in src
    assert "__shfl_sync(0xFFFFFFFFu" in src  # warp-uniform roles: ptxas keeps the wgmma asynchronous
    assert "acc8[i]" not in src  # constant accumulator indices only
    # the queue is wide wgmmas on their own accumulator, read after the wait (else ptxas drops them)
    assert "wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.u8" in src and "x ^= hw8[i]" in src
    # the producer's expect_tx and copy and the consumer's release are issued without an abort-flag load
    # (one inside a `first thread` branch delayed the release past the held read); the free run keeps them
    assert 'if (!sv_aborted(c)) asm volatile("mbarrier.arrive' not in src
    assert 'asm volatile("mbarrier.arrive.shared::cta.b64' in src
    free = emit(protocol).source
    assert 'if (!sv_aborted(c)) asm volatile("mbarrier.arrive.expect_tx' in free
    assert 'if (!sv_aborted(c)) asm volatile("mbarrier.arrive.shared::cta.b64' in free


def test_the_held_wgmma_read_is_the_one_that_read_the_overwritten_slot():
    """The 2-CTA `_early` release: its counterexample retires the first stage's reads before the refill
    and reads the second stage meanwhile, with the same wgmma line. The hold goes to the read of the slot
    the refill writes (tile[0], occurrence 0), not to the last read of that line (tile[2], occurrence 1),
    and to the reader's CTA only."""
    protocol, order = _order("cutlass_consumer_release_multicast_early")
    (h,) = order.holds
    assert h.kind == "slow-wgmma" and h.occurrence == 0 and h.cta == 0
    assert "o9 == 0u && c.cta == 0u" in emit(protocol, replay=order).source
    # its release is `.release.cluster`, issued while the held read is in flight: on sm_90 that arrive waits
    # for the wgmma (MEMBAR.ALL.GPU), so the run is NOT FORCED, with the H200's evidence in the reason
    assert order.not_forced == CLUSTER_RELEASE_DRAINS_WGMMA


def test_a_cluster_release_after_the_wgmma_wait_leaves_the_replay_forced():
    """The wrong-rank release arrives `.release.cluster` too, but after `wgmma.wait`: the read has ended by
    then, and the overwrite is let in by the peer's release. Its replay showed the race (corrupt 10/10)."""
    _, order = _order("deepgemm_lane_rank_release_wrong_rank")
    assert any(h.kind == "slow-wgmma" for h in order.holds) and order.not_forced == ""
    _, order = _order("wgmma_release_before_wait")  # a `.cta` release in flight: forced
    assert order.not_forced == ""


def test_an_unreplayable_shortest_race_gives_way_to_a_race_with_a_hold():
    """The wrong-rank release's shortest counterexample is a WAW race (SV303) whose order splits the warpgroup
    around its wgmma, which no replay can force; its WAR race on the same stage (SV302) has a slow-wgmma hold,
    so that one is replayed. Asked for SV303 alone, the refusal stands."""
    from syncverify.codegen import EmitRefused, replay_order
    from syncverify.codegen.sites import collect_sites, site_index

    protocol, order = _order("deepgemm_lane_rank_release_wrong_rank")
    assert order.code == "SV302" and "warpgroup-collective" in order.why_ungated
    (h,) = order.holds
    # the read is CTA 1's, the overwrite CTA 0's multicast: only CTA 1's wgmma is held
    assert h.kind == "slow-wgmma" and h.cta == 1 and "tile[0]@cta1" in order.message
    assert "if ((o10 == 0u && c.cta == 1u)) {" in emit(protocol, replay=order).source
    with pytest.raises(EmitRefused, match=r"orders the warps of a warpgroup around `wgmma\.read`"):
        replay_order(protocol, site_index(collect_sites(protocol)), "SV303")


def test_missing_proxy_fence_replay_issues_late_writes_and_no_barrier_progress():
    protocol, order = _order("tma_store_no_fence")
    assert order.code == "SV601" and order.steps == () and order.grid > 1
    (h,) = order.holds
    assert h.kind == "late-write"
    em = emit(protocol, replay=order)
    assert "sv_stamp_late(slot" in em.source and "SV_STATE_BARRIER, 34u" not in em.source
    assert em.launch["grid"] == order.grid
    free = emit(protocol).source
    assert "SV_STATE_BARRIER, 34u" in free and "sv_stamp_late(slot" not in free


def test_safe_specs_get_the_instrumentation_without_an_order():
    from syncverify.codegen.replay import instrumented_order

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        order = instrumented_order(load("specs/tma_store_epilogue.sync"))
    finally:
        os.chdir(cwd)
    assert order.steps == () and order.code == ""
    assert {h.kind for h in order.holds} == {"late-write"}


def test_trace_step_names_the_counterexample_step():
    launch = {"replay": {"events": [[0, 1, 0], [1, 8, 0]], "trace": ["producer.w0 line 41 k=0",
                                                                    "consumer[0].w1 line 49 k=0"]}}
    assert oc.trace_step(launch, 1, 8, 0) == "step 2/2 of the counterexample: consumer[0].w1 line 49 k=0"
    assert oc.trace_step(launch, 1, 8, 1) == ""
    rep = oc.Rep(oc.CORRUPT, corrupt={"first": [{"trace_step": "step 2/2 of the counterexample: x"}]})
    assert oc.traced(rep) == "step 2/2 of the counterexample: x"


def _lines_at(src: str, *markers: str) -> list[int]:
    return [src.index(m) for m in markers]


def test_race_inside_one_warp_replay_reads_the_lanes_after_lane_0s_copy():
    """nvfuser_cb_no_war_wait: lanes 1..31 of cta.w0 read tile[0] and lane 0 of the same warp then copies into
    it (no WAR wait). The replay prefers this race, which a hold can keep open, to the shorter SV502 order, and
    the kernel has the other lanes read after lane 0's copy, at the slot the read site saw."""
    protocol, order = _order("nvfuser_cb_no_war_wait")
    assert order.code == "SV302" and order.steps and not order.why_ungated
    (h,) = order.holds
    assert (h.kind, h.process, h.occurrence, h.until_turn) == ("late-lanes", 0, 0, len(order.steps))
    sites = {s["index"]: s for s in emit(protocol).launch["sites"]}
    assert sites[h.site]["line"] == 62 and sites[h.after_site]["line"] == 58  # the read, then lane 0's copy
    last = order.steps[-1]
    assert last[0] == h.process and last[1] == h.after_site and last[3] == 1  # the overwrite is lane 0's own
    src = emit(protocol, replay=order).source
    main = src[src.index("line 52\n"):]  # the main loop: copy block (line 55), then the deferred read
    copy, hold, wait = _lines_at(main, "line 58: tma.load", "hold: the line 62 read", "line 61: wait")
    assert copy < hold < wait
    deferred = main[hold:wait]
    assert f"sv_hold(c, {len(order.steps)}u," in deferred and "if (c.pidx != 0u)" in deferred
    assert "sv_check(c, held_slot," in deferred and "slot = (sv_smem_base" not in deferred
    read_site = main[main.index("line 62: read"):]
    assert read_site.index("held_slot = slot") < read_site.index("if (!lag)")


def test_race_inside_one_warp_kernel_compiles_to_ptx(tmp_path):
    if not shutil.which("nvcc"):
        pytest.skip("no nvcc on PATH")
    protocol, order = _order("nvfuser_cb_no_war_wait")
    cu = tmp_path / "k.cu"
    cu.write_text(emit(protocol, replay=order).source)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ptx_text = (tmp_path / "k.ptx").read_text()
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx_text


def test_the_unobserved_phase_order_of_the_same_spec_holds_nothing():
    """Twin: asked for SV502 explicitly, the same spec replays the shortest SV502 order, which has no racing
    pair to hold; and the fixed protocol (WAR wait present) is safe, so its replay has no late lanes."""
    from syncverify.codegen import replay_order
    from syncverify.codegen.sites import collect_sites, site_index

    protocol, _ = _order("nvfuser_cb_no_war_wait")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        order = replay_order(protocol, site_index(collect_sites(protocol)), "SV502")
    finally:
        os.chdir(cwd)
    assert order.code == "SV502" and order.holds == ()
    assert "held_slot" not in emit(protocol, replay=order).source
    _, fixed = _order("nvfuser_cb_mbarrier_war")
    assert fixed.code == "" and "late-lanes" not in {h.kind for h in fixed.holds}


def test_lanes_take_ahead_only_arrivals_no_later_step_waits_on():
    from syncverify.codegen.replay import _lanes_step_ahead
    from syncverify.codegen.sites import collect_sites

    protocol, _ = _order("nvfuser_cb_mbarrier_war")
    ops = [s.op for s in collect_sites(protocol)]
    arrive = next(o for o in ops if type(o).__name__ == "MbarArrive" and o.bar.name == "war" and o.tx_bytes is None)
    wait_war = next(o for o in ops if type(o).__name__ == "MbarWait" and o.bar.name == "war")
    wait_full = next(o for o in ops if type(o).__name__ == "MbarWait" and o.bar.name == "full")
    steps = [(0, 0, 0, 0), (0, 1, 0, 1)]
    assert _lanes_step_ahead(steps, [arrive, wait_full], 0)
    assert not _lanes_step_ahead(steps, [arrive, wait_war], 0)  # someone acquires what the lanes released
    assert not _lanes_step_ahead(steps, [wait_full, arrive], 0)  # a wait is not taken ahead
