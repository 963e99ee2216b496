"""Non-bulk cp.async against the proxy rule, the scope rule and its own mbarrier arrive-on (#31).

* A cp.async copy is "a weak memory operation performed in the generic proxy" (PTX, cp.async): a
  wgmma, a bulk store or any other async-proxy read of it needs a fence.proxy.async by a thread that
  has seen the copy complete, before the read (SV601). It used to be taken as async-proxy data and
  pass unfenced.
* `cp.async.mbarrier.arrive.noinc` publishes the copies it covers "upon the completion of all prior
  cp.async operations"; a later `cp.async.wait_all` of the issuer retires them for the issuer, and used
  to take them out of the arrive-on's publication (SV301 at the consumer).
* A cp.async copy handed to the peer CTA over a `.release.cta` remote arrive is data that crosses CTAs
  (the SV602 error), as a plain store is; it used to be only the reuse warning.

Each reproducer has a near twin that keeps its answer, and each is run by the explicit engine, the
z3 engine, bmc (or its refusal, with the reason) and the Promela export (which refuses non-bulk
cp.async, with the reason).
"""

from __future__ import annotations

import shutil

import pytest
from nvcc import ptxas_clean_cubin

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.codegen import emit
from syncverify.codegen import ptx as P
from syncverify.export import ExportError, export_model
from syncverify.result import Verdict

ENGINES = ("explicit", "z3", "bmc")


def _run(text: str, engine: str):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120.0))


def _errors(res) -> set[str]:
    return {d.code for d in res.diagnostics if d.is_error}


def _warnings(res) -> set[str]:
    return {d.code for d in res.diagnostics if not d.is_error}


def _expect(text: str, errors: set[str], engine: str, refused: dict[str, str] | None = None) -> None:
    """The engine's answer: ``errors`` (empty: safe), or, where the engine does not decide the protocol
    (``refused``: per engine, words of its reason), inconclusive with that reason — never a verdict."""
    res = _run(text, engine)
    if refused and engine in refused:
        assert res.verdict is Verdict.INCONCLUSIVE and refused[engine] in res.coverage, (res.verdict, res.coverage)
        return
    if errors:
        assert res.verdict is Verdict.VIOLATION and _errors(res) == errors, (engine, res.verdict, _errors(res))
    else:
        assert res.verdict is Verdict.SAFE and not _errors(res), (engine, res.verdict, _errors(res))


def _not_exported(text: str) -> None:
    with pytest.raises(ExportError, match=r"non-bulk cp\.async"):
        export_model(syncverify.load(text, path="t.sync"))


# ============================================================================ cp.async data read by the async proxy
#
# A loader warp copies a tile with cp.async, waits for it, and hands it to a consumer warpgroup over
# __syncthreads; the warpgroup's wgmma reads the tile through the async proxy. PTX: "An async proxy
# fence must be used to establish an ordering between prior writes to shared memory matrices and
# subsequent reads of the same matrices in a wgmma.mma_async instruction" (wgmma, "Async Proxy").

CP_WGMMA = """\
protocol cp_async_wgmma {
  cta threads 160;
  role mma = warpgroup 0;
  role loader = warp 4;
  smem tile bytes 4096;
  if loader { elect { cp.async tile; cp.async.wait_all; FENCE } }
  syncthreads;
  if mma { READER_FENCE wgmma.read tile; wgmma.commit; wgmma.wait 0; }
}
"""

UNFENCED = CP_WGMMA.replace("FENCE ", "").replace("READER_", "")
FENCED_BY_ISSUER = CP_WGMMA.replace("READER_FENCE ", "").replace("FENCE ", "fence.proxy.async; ")
# the fence by the threads that acquired the copy, after the barrier (the copy's completion is on
# their causal path: its issuer's wait, then the barrier)
FENCED_BY_READER = CP_WGMMA.replace("READER_FENCE ", "fence.proxy.async; ").replace("FENCE ", "")
# the fence before the copy's completion is seen fences nothing
FENCED_TOO_EARLY = CP_WGMMA.replace("READER_FENCE ", "").replace(
    "cp.async tile; cp.async.wait_all; FENCE ", "cp.async tile; fence.proxy.async; cp.async.wait_all; ")


@pytest.mark.parametrize("engine", ENGINES)
def test_cp_async_tile_read_by_wgmma_without_a_proxy_fence_is_sv601(engine):
    _expect(UNFENCED, {"SV601"}, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_cp_async_tile_fenced_by_its_issuer_after_the_wait_is_safe(engine):
    _expect(FENCED_BY_ISSUER, set(), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_cp_async_tile_fenced_by_the_reader_after_the_barrier_is_safe(engine):
    _expect(FENCED_BY_READER, set(), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fence_before_the_copy_completes_does_not_count(engine):
    _expect(FENCED_TOO_EARLY, {"SV601"}, engine)


# A warp-wide copy (one per lane) fenced by one lane: that lane's fence is on the causality path of the
# other lanes' copies only once a syncwarp after their waits orders them before it (PTX bar.warp.sync
# "also guarantee[s] memory ordering among threads participating in barrier").
WARP_COPY_ELECTED_FENCE = """\
protocol cp_async_warp_copy_elected_fence {
  cta threads 160;
  role mma = warpgroup 0;
  role loader = warp 4;
  smem tile bytes 4096;
  if loader { cp.async tile; cp.async.wait_all; SYNC elect { fence.proxy.async; } }
  syncthreads;
  if mma { wgmma.read tile; wgmma.commit; wgmma.wait 0; }
}
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("sync", "errors"), [("", {"SV601"}), ("syncwarp; ", set())])
def test_one_lane_fences_a_warp_copy_only_after_a_syncwarp(engine, sync, errors):
    _expect(WARP_COPY_ELECTED_FENCE.replace("SYNC ", sync), errors, engine)


def test_the_sv601_names_the_cp_async():
    res = _run(UNFENCED, "explicit")
    (d,) = [d for d in res.diagnostics if d.code == "SV601"]
    assert "cp.async" in d.message and d.related and d.related[0].span.line == 6


# A bulk (TMA) store of a tile that the same thread filled with cp.async: the bulk copy reads its
# source through the async proxy ("The cp{.reduce}.async.bulk operations are performed in the
# asynchronous proxy").
CP_TMA_STORE = """\
protocol cp_async_tma_store {
  cta threads 32;
  smem buf bytes 256;
  elect { cp.async buf; cp.async.wait_all; FENCE tma.store buf; bulk.commit; bulk.wait_read 0; }
}
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("fence", "errors"), [("", {"SV601"}), ("fence.proxy.async; ", set())])
def test_cp_async_tile_stored_by_a_bulk_copy(engine, fence, errors):
    _expect(CP_TMA_STORE.replace("FENCE ", fence), errors, engine)


# A tcgen05.mma operand filled by cp.async (the MMA reads shared memory through the async proxy). bmc
# does not encode tcgen05.mma and says so.
CP_UMMA = """\
protocol cp_async_umma {
  cta threads 64;
  role mma = warp 0;
  role loader = warp 1;
  smem a bytes 1024;
  mbarrier done count 1;
  tmem acc cols 32;
  if loader { elect { init done; cp.async a; cp.async.wait_all; FENCE } }
  syncthreads;
  if mma { elect { tcgen05.mma acc, a, a; tcgen05.commit done; } wait done parity 0; }
}
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("fence", "errors"), [("", {"SV601"}), ("fence.proxy.async; ", set())])
def test_cp_async_operand_of_a_tcgen05_mma(engine, fence, errors):
    _expect(CP_UMMA.replace("FENCE ", fence), errors, engine, refused={"bmc": "tcgen05.mma"})


# The consumer learns the copy through the mbarrier phase that the copy's arrive-on completes
# (CUTLASS cpasync_barrier_arrive_noinc): only a fence after its wait can order the copy before its
# wgmma. bmc does not encode cp.async.mbarrier.arrive and says so.
CP_MBAR_WGMMA = """\
protocol cp_async_mbarrier_wgmma {
  cta threads 160;
  role mma = warpgroup 0;
  role loader = warp 4;
  smem tile bytes 4096;
  mbarrier full count 1;
  if loader { elect { init full; } }
  syncthreads;
  if loader { elect { cp.async tile; cp.async.mbarrier.arrive.noinc full; } }
  if mma { wait full parity 0; FENCE wgmma.read tile; wgmma.commit; wgmma.wait 0; }
}
"""
ARRIVE_REFUSED = {"bmc": "cp.async.mbarrier.arrive"}
# in a loop, the z3 engine does not lift cp.async.mbarrier.arrive to every trip count, and says so
LOOP_REFUSED = {**ARRIVE_REFUSED, "z3": "checked at the given trip counts only"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("fence", "errors"), [("", {"SV601"}), ("fence.proxy.async; ", set())])
def test_cp_async_tile_acquired_through_its_arrive_on(engine, fence, errors):
    _expect(CP_MBAR_WGMMA.replace("FENCE ", fence), errors, engine, refused=ARRIVE_REFUSED)


# ============================================================================ wait_all after the arrive-on
#
# PTX cp.async.mbarrier.arrive: "Causes an arrive-on operation to be triggered by the system on the
# mbarrier object upon the completion of all prior cp.async operations initiated by the executing
# thread". The issuer's later wait_all orders the copy for the issuer; the consumer still learns it
# through the phase.

NOINC_THEN_WAIT_ALL = """\
protocol cp_async_noinc_then_wait_all {
  param ITERS = 3;
  cta threads 64;
  role loader = warp 0;
  role user = warp 1;
  smem tile[2] bytes 512;
  mbarrier full[2] count 1;
  mbarrier empty[2] count 1;
  first thread { init full[*]; init empty[*]; }
  syncthreads;
  if loader {
    for k in 0..ITERS {
      wait empty[k % 2] parity (k / 2 + 1) % 2;
      elect { cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; WAIT_ALL }
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


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("wait_all", ["cp.async.wait_all; ", "cp.async.wait_group 0; ", ""])
def test_a_wait_after_the_arrive_on_keeps_its_publication(engine, wait_all):
    _expect(NOINC_THEN_WAIT_ALL.replace("WAIT_ALL ", wait_all), set(), engine, refused=LOOP_REFUSED)


NOINC_ONCE = """\
protocol cp_async_noinc_once {
  cta threads 64;
  role loader = warp 0;
  role user = warp 1;
  smem tile bytes 512;
  mbarrier full count 1;
  first thread { init full; }
  syncthreads;
  if loader { elect { cp.async tile; cp.async.mbarrier.arrive.noinc full; WAIT_ALL } }
  if user { wait full parity 0; read tile; }
}
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("wait_all", ["cp.async.wait_all; ", ""])
def test_a_wait_after_the_arrive_on_keeps_its_publication_loop_free(engine, wait_all):
    _expect(NOINC_ONCE.replace("WAIT_ALL ", wait_all), set(), engine, refused=ARRIVE_REFUSED)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_read_before_the_wait_still_races(engine):
    early = NOINC_THEN_WAIT_ALL.replace("WAIT_ALL ", "cp.async.wait_all; ").replace(
        "      wait full[k % 2] parity (k / 2) % 2;\n      read tile[k % 2];",
        "      read tile[k % 2];\n      wait full[k % 2] parity (k / 2) % 2;")
    _expect(early, {"SV301"}, engine, refused=LOOP_REFUSED)


def test_the_copy_published_is_the_one_the_arrive_covers():
    """A copy issued after the arrive-on (and retired by the trailing wait) is not carried by it."""
    late = NOINC_THEN_WAIT_ALL.replace(
        "cp.async tile[k % 2]; cp.async.mbarrier.arrive.noinc full[k % 2]; WAIT_ALL ",
        "cp.async.mbarrier.arrive.noinc full[k % 2]; cp.async tile[k % 2]; cp.async.wait_all; ")
    res = _run(late, "explicit")
    assert res.verdict is Verdict.VIOLATION and _errors(res) & {"SV301", "SV302", "SV303"}, _errors(res)


# ============================================================================ cp.async data across CTAs
#
# CTA 1 loads a tile into its own shared memory with cp.async and signals CTA 0 with the default
# .release.cta remote arrive; CTA 0 reads the tile (DSMEM) after its wait — the relay of SFA in the
# CuTe DSL 2-CTA blockscale GEMM that CUTLASS PR #3647 moved to .release.cluster.

CP_RELAY = """\
protocol cp_async_relay {
  cluster 2;
  cta threads 32;
  smem buf bytes 64;
  mbarrier m count 1;
  elect { init m; fence.mbarrier_init; }
  cluster.sync;
  if cta == 1 { elect { COPY arrive m @ 0; } }
  if cta == 0 { wait m parity 0; read buf @ 1; }
  cluster.sync;
}
"""
CP_COPY = "cp.async buf; cp.async.wait_all; "


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("copy", [CP_COPY, "write buf; "], ids=["cp.async", "write"])
def test_data_relayed_over_a_cta_scope_remote_arrive_is_the_sv602_error(engine, copy):
    _expect(CP_RELAY.replace("COPY ", copy), {"SV602"}, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_cluster_scope_relay_is_safe(engine):
    fixed = CP_RELAY.replace("COPY ", CP_COPY).replace("arrive m @ 0", "arrive.release.cluster m @ 0").replace(
        "wait m parity 0", "wait.acquire.cluster m parity 0")
    _expect(fixed, set(), engine)


def test_a_copy_the_waiter_already_knows_leaves_only_the_reuse_warning():
    """The copy ordered before the waiter by a cluster barrier both passed: the .cta-scope arrive only
    guards reuse (the SV602 warning), as for a plain store."""
    known = CP_RELAY.replace("cluster.sync;\n  if cta == 1 { elect { COPY arrive m @ 0; } }",
                             "if cta == 1 { elect { cp.async buf; cp.async.wait_all; } }\n  cluster.sync;\n"
                             "  if cta == 1 { elect { arrive m @ 0; } }")
    res = _run(known, "explicit")
    assert res.verdict is Verdict.SAFE and "SV602" in _warnings(res) and not _errors(res)


# ============================================================================ the CUDA emitter
def test_the_emitter_writes_the_proxy_fence_where_the_spec_has_it():
    """The emitted kernel fences exactly where the spec does (the reader's fence after the barrier,
    the consumer's after its mbarrier wait), so a replay of the unfenced twin runs without it."""
    count = {name: emit(syncverify.load(text, path="t.sync")).source.count(P.FENCE_PROXY_ASYNC)
             for name, text in [("unfenced", UNFENCED), ("issuer", FENCED_BY_ISSUER), ("reader", FENCED_BY_READER),
                                ("mbar", CP_MBAR_WGMMA.replace("FENCE ", "")),
                                ("mbar-fenced", CP_MBAR_WGMMA.replace("FENCE ", "fence.proxy.async; "))]}
    assert count["issuer"] == count["reader"] == count["unfenced"] + 1, count
    assert count["mbar-fenced"] == count["mbar"] + 1, count


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_reader_fenced_kernel_compiles_without_ptxas_warnings(tmp_path):
    ptxas_clean_cubin(emit(syncverify.load(FENCED_BY_READER, path="t.sync")).source, tmp_path)


# ============================================================================ the Promela export
@pytest.mark.parametrize("text", [UNFENCED, FENCED_BY_READER, NOINC_THEN_WAIT_ALL.replace("WAIT_ALL ", ""),
                                  CP_RELAY.replace("COPY ", CP_COPY)],
                         ids=["unfenced", "reader-fence", "noinc", "relay"])
def test_the_promela_export_refuses_non_bulk_cp_async_with_its_reason(text):
    _not_exported(text)
