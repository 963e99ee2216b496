"""Bulk async-groups that some lanes of a warp own (#33, item 3: per-lane TMA stores).

PTX cp.async.bulk.commit_group: "per-thread bulk async-group"; cp.async.bulk.wait_group: "all the prior
bulk async-groups committed by the executing threads are complete". DeepGEMM's sm90 GEMM with BLOCK_N 128
stores its epilogue tile by two lanes, one 64-column half each, and each lane commits and later waits for
its own group (deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh:373-374, 433-441). The language
writes that `if lane < 2 { tma.store d[lane]; bulk.commit; }` and `if lane < 2 { bulk.wait_read 0; }`
(docs/language.md §6.1); the model gives those lanes their own groups (semantics/families/lane_groups.py):

* each lane's wait retires its own stores only -- lane 0 waiting alone leaves lane 1's store reading
  (SV302 at the next write of its half), and so does a commit lane 1 did not take part in;
* `bulk.wait_read N` counts each lane's own later groups;
* a lane's retired store is known to that lane only: another lane of the warp meets it after a
  `syncwarp` or a barrier of the warp, not before;
* the explicit engine and the z3 lift check it; bmc, the Promela export and the CUDA emitter refuse it
  with the reason.

Extraction: the two stores come out as those lane-guarded statements (they were refused at the store):
tests/data/ptx/lanes/lane_rank.cu's `lane_store_halves` (safe) and its seed `lane_store_halves_one_wait`
(only lane 0 waits: flagged at the next tile's write of half 1), and DeepGEMM's multicast-off BLOCK_N 128
kernel. Both PTX files are committed (no test runs nvcc).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from syncverify.check import Options, check_protocol
from syncverify.codegen import emit
from syncverify.codegen.base import EmitRefused
from syncverify.export.promela import export_promela
from syncverify.export.promela.base import ExportError
from syncverify.lang import load
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch

DATA = Path(__file__).parent / "data" / "ptx"
SPECS = Path(__file__).parent.parent / "specs"
ENGINES = ("explicit", "z3")


def _check(text: str, engine: str = "explicit") -> tuple[str, list]:
    res = check_protocol(load(text, path="x.sync"), Options(engine=engine, timeout=60))
    return res.verdict.value, [d for d in res.diagnostics if d.is_error]


def _codes(text: str, engine: str = "explicit") -> tuple[str, set[str]]:
    verdict, errors = _check(text, engine)
    return verdict, {d.code for d in errors}


# One warp stores a two-half tile by lanes 0 and 1 for TILES tiles; a second warp writes half 1 too, so
# both halves are rewritten by a warp that only the barrier orders after the stores.
TWO_LANES = """
protocol two_lanes {
  param TILES = 2;
  cta threads 64;
  role w[2] = warp i;
  smem d[2] bytes 256;

  for t in 0..TILES {
    if w && instance == 0 { WAIT }
    syncthreads;
    write d[instance];
    fence.proxy.async;
    syncthreads;
    if w && instance == 0 {
      if lane < 2 { tma.store d[lane]; }
      COMMIT
    }
  }
  if w && instance == 0 { if lane < 2 { bulk.wait_read 0; } }
}
"""


def _two_lanes(wait: str = "if lane < 2 { bulk.wait_read 0; }", commit: str = "if lane < 2 { bulk.commit; }") -> str:
    return TWO_LANES.replace("WAIT", wait).replace("COMMIT", commit)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_lane_waits_for_its_own_group(engine: str) -> None:
    assert _codes(_two_lanes(), engine) == ("safe", set())
    # lane 0 alone waits: its own group only -- lane 1's store still reads half 1 when warp 1 rewrites it
    verdict, errors = _check(_two_lanes(wait="if lane == 0 { bulk.wait_read 0; }"), engine)
    assert verdict == "violation" and {d.code for d in errors} == {"SV302"}
    assert all("d[1]" in d.message for d in errors)
    # lane 1 alone waits: half 0, which lane 0 stores, is the one rewritten unordered
    verdict, errors = _check(_two_lanes(wait="if lane == 1 { bulk.wait_read 0; }"), engine)
    assert verdict == "violation" and {d.code for d in errors} == {"SV302"}
    assert all("d[0]" in d.message for d in errors)


def test_the_whole_warp_commits_and_waits_for_its_lanes_groups() -> None:
    """A commit and a wait of the whole warp cover every lane's store."""
    assert _codes(_two_lanes(wait="bulk.wait_read 0;", commit="bulk.commit;")) == ("safe", set())


def test_a_store_its_lane_did_not_commit_is_not_retired() -> None:
    """Lane 0 commits alone: lane 1's store is in no group yet, and lane 1's wait_group 0 does not wait for it
    (PTX: the wait covers the groups "committed by the executing threads")."""
    verdict, codes = _codes(_two_lanes(commit="if lane == 0 { bulk.commit; }"))
    assert verdict == "violation" and codes & {"SV302", "SV404"}
    assert _codes(_two_lanes(commit="if lane == 0 { bulk.commit; } if lane == 1 { bulk.commit; }")) == ("safe", set())


RING = """
protocol ring {
  param TILES = 4;
  cta threads 32;
  role w = warp 0;
  smem d[4] bytes 256;             // buffer b = t % 2, halves d[2 * b], d[2 * b + 1]

  for t in 0..TILES {
    if lane < 2 { bulk.wait_read PENDING; }
    syncwarp;
    write d[2 * (t % 2)];
    write d[2 * (t % 2) + 1];
    fence.proxy.async;
    syncwarp;
    if lane < 2 { tma.store d[2 * (t % 2) + lane]; bulk.commit; }
  }
  if lane < 2 { bulk.wait_read 0; }
}
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_wait_read_n_counts_each_lanes_own_groups(engine: str) -> None:
    """Two buffers: `wait_read 1` leaves each lane's latest group (the other buffer) pending and retires the
    one that read this buffer; `wait_read 2` retires nothing the next write needs."""
    assert _codes(RING.replace("PENDING", "1"), engine) == ("safe", set())
    verdict, codes = _codes(RING.replace("PENDING", "2"), engine)
    assert verdict == "violation" and codes == {"SV302"}


ONE_WARP = """
protocol one_warp {
  cta threads 32;
  role w = warp 0;
  smem d[2] bytes 256;
  write d[0];
  write d[1];
  fence.proxy.async;
  syncwarp;
  if lane < 2 { tma.store d[lane]; bulk.commit; bulk.wait_read 0; }
  SYNC
  write d[1];
}
"""


def test_a_lanes_retired_store_reaches_the_other_lanes_through_syncwarp() -> None:
    """Lane 1's wait orders its store before lane 1 alone: the warp's next write of that half (by every lane)
    is ordered only after a `syncwarp` (PTX bar.warp.sync orders memory among the participating threads)."""
    assert _codes(ONE_WARP.replace("SYNC", "syncwarp;")) == ("safe", set())
    verdict, codes = _codes(ONE_WARP.replace("SYNC", ""))
    assert verdict == "violation" and codes == {"SV302"}


def test_the_lanes_whose_groups_differ_are_refused_by_bmc_promela_and_the_emitter() -> None:
    text = (SPECS / "deepgemm_sm90_two_lane_store.sync").read_text()
    res = check_protocol(load(text, path="x.sync"), Options(engine="bmc", timeout=60))
    assert res.verdict.value == "inconclusive" and "bulk async-groups of some lanes" in res.coverage
    with pytest.raises(ExportError, match="bulk async-groups of some lanes"):
        export_promela(load(text, path="x.sync"))
    with pytest.raises(EmitRefused, match="bulk async-groups of some lanes"):
        emit(load(text, path="x.sync"))
    # the elected lane's bulk groups (`if lane == 0`) are the elect form every engine has
    elected = _two_lanes().replace("tma.store d[lane];", "tma.store d[0]; tma.store d[1];") \
        .replace("lane < 2", "lane == 0")
    res = check_protocol(load(elected, path="x.sync"), Options(engine="bmc", timeout=60))
    assert "bulk async-groups of some lanes" not in res.coverage


def test_some_lanes_still_cannot_run_other_groups() -> None:
    """Only bulk groups are per lane in the language: a lane-guarded cp.async group stays SV116."""
    text = ONE_WARP.replace("if lane < 2 { tma.store d[lane]; bulk.commit; bulk.wait_read 0; }",
                            "if lane < 2 { cp.async.commit_group; }").replace("SYNC", "")
    res = check_protocol(load(text, path="x.sync"), Options(timeout=60))
    assert res.verdict.value == "error" and [d.code for d in res.diagnostics] == ["SV116"]
    assert "bulk stores with their bulk groups" in res.diagnostics[0].message


# ---- extraction --------------------------------------------------------------------------------------

def _module(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    out = tmp_path / Path(name).name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return load_module(str(out))


def _body(text: str) -> list[str]:
    return [ln.split("//")[0].strip() for ln in text.splitlines() if ln.split("//")[0].strip()]


@pytest.fixture(scope="module")
def lane_rank(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return _module(tmp_path_factory.mktemp("lane_rank"), "lanes/lane_rank.ptx.gz")


def test_two_lanes_storing_halves_extract_as_their_own_groups(lane_rank) -> None:  # type: ignore[no-untyped-def]
    text = extract(lane_rank, Launch(block=(64, 1, 1)), "lane_store_halves", source_names=True).text
    body = _body(text)
    assert "if lane == 0 { tma.store tile[0] bytes 128; }" in body
    assert "if lane == 1 { tma.store tile[1] bytes 128; }" in body
    assert "if lane < 2 { bulk.commit; }" in body and "if lane < 2 { bulk.wait_read 0; }" in body
    for engine in ENGINES:
        assert _codes(text, engine) == ("safe", set())


def test_the_seed_where_lane_1_does_not_wait_is_flagged_at_the_rewrite(lane_rank) -> None:  # type: ignore[no-untyped-def]
    text = extract(lane_rank, Launch(block=(64, 1, 1)), "lane_store_halves_one_wait", source_names=True).text
    body = _body(text)
    assert "if lane < 2 { bulk.commit; }" in body and "if lane < 2 { bulk.wait_read 0; }" not in body
    verdict, errors = _check(text)
    assert verdict == "violation" and {d.code for d in errors} == {"SV302"}
    lines = text.splitlines()
    for d in errors:  # the next tile's write of half 1, racing with lane 1's store
        assert "tile[1]" in d.message and lines[d.span.line - 1].strip().startswith("write tile[1];")
        assert "lane_rank.cu:87" in lines[d.span.line - 1]
        assert any("if lane == 1 { tma.store tile[1]" in lines[r.span.line - 1] for r in d.related)


def test_deepgemm_multicast_off_block_n_128_extracts_its_two_lane_store(tmp_path: Path) -> None:
    """DeepGEMM's sm90 FP8 GEMM, multicast 1, BLOCK_N 128 (tests/data/ptx/deepgemm_sm90_fp8_1d2d.cu with
    -DSV_MULTICAST=1 -DSV_BLOCK_N=128): at M=64 one tile, one CTA (`--grid 2` gives CTA 1 no tile, and a
    protocol is one cluster's). The epilogue's two stores and their groups are lane-guarded statements.
    The math warps' scale reads (every lane's ld.shared of smem_sfa, sm90_fp8_gemm_1d2d.cuh:303) come before
    the warpgroup's wgmma.commit_group / wait_group, and lane 0 alone releases the stage after them
    (`empty_barrier_arrive`, kNumTMAMulticast 1) with no __syncwarp: under the warp-collective reading that
    release publishes the other lanes' reads, the SV609 warning at each arrive (docs/model.md, "Warp-collective
    instructions"); to the letter (`--no-assume`) the refill races them (SV302 on s3[0]). With the race gone
    the search reaches the exit: the kernel ends with the epilogue's bulk stores committed
    (`tma_store_arrive`, :441) and no `tma_store_wait` after the last tile (the one at :374 precedes the next
    tile's stores): safe under the reading that the exit waits for the stores' reads (the default, which an H100
    was measured to do), SV404 to the letter (`--letter exit-drains-bulk-reads`: the CTA exits while a bulk store
    still reads s0)."""
    launch = Launch(block=(256, 1, 1), dynamic_smem=66320, params={"2": 64},
                    tensor_bytes={("5", 0): 8192, ("6", 0): 16384, ("7", 0): 8192, ("8", 0): 256})
    text = extract(_module(tmp_path, "deepgemm_sm90_fp8_1d2d_mc1_n128.ptx.gz"), launch).text
    body = _body(text)
    stores = [ln for ln in body if "tma.store" in ln]
    assert len(stores) == 8  # two 64-column halves of 8192 bytes, each over four 2048-byte slots
    assert sum(ln.startswith("if lane == 0 { tma.store") for ln in stores) == 4
    assert sum(ln.startswith("if lane == 1 { tma.store") for ln in stores) == 4
    assert "if lane < 2 { bulk.commit; }" in body and "if lane < 2 { bulk.wait_read 0; }" in body
    line = next(ln for ln in text.splitlines() if "if lane == 1 { tma.store" in ln)
    assert "sm90_fp8_gemm_1d2d.cuh:439" in line
    lines = text.splitlines()
    letter = check_protocol(load(text, path="x.sync"), Options(timeout=60, assume_exit_drains_bulk_reads=False))
    errors = [d for d in letter.diagnostics if d.is_error]
    assert letter.verdict == "violation" and {d.code for d in errors} == {"SV404"}
    for d in errors:
        assert "exits while a bulk store still reads s0" in d.message
        assert "cp.async.bulk.wait_group.read" in d.message and "--letter exit-drains-bulk-reads" in d.message
        assert all("tma.store" in lines[r.span.line - 1] for r in d.related)
    # the reading that the CTA's exit waits for its stores' reads (on by default; docs/model.md, "A CTA's exit
    # and its bulk stores"): nothing else is left
    res = check_protocol(load(text, path="x.sync"), Options(timeout=60))
    assert res.verdict == "safe" and {"exit-drains-bulk-reads", "warp-collective-orders"} <= set(res.assumed)
    sv609 = [d for d in res.diagnostics if d.code == "SV609"]
    assert sv609 and "warp-collective-orders" in res.assumed
    for d in sv609:  # lane 0's release, naming the warpgroup's commit and the lanes' scale read
        assert "arrive mb0[" in lines[d.span.line - 1] and "barrier.h:511" in lines[d.span.line - 1]
        related = [lines[r.span.line - 1] for r in d.related]
        assert "wgmma.commit" in related[0] and "read s3[" in related[1] and "ld_st.cuh:127" in related[1]
    res = check_protocol(load(text, path="x.sync"), Options(timeout=60, assume_warp_collective_orders=False))
    errors = [d for d in res.diagnostics if d.is_error]
    assert res.verdict == "violation" and {d.code for d in errors} == {"SV302"}
    assert not any(d.code == "SV609" for d in res.diagnostics)
    store_lines = {k for k, ln in enumerate(lines, 1) if "tma.store" in ln or "bulk." in ln}
    assert not any(d.span.line in store_lines or any(r.span.line in store_lines for r in d.related) for d in errors)
    for d in errors:
        assert "s3[" in d.message and "tma.load" in lines[d.span.line - 1]
        assert any("ld_st.cuh:127" in lines[r.span.line - 1] for r in d.related)
