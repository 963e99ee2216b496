"""Tensor maps rewritten by the kernel (#33, item 5): `tensormap.replace` and the tensormap proxy fences, in the
language's reading of CUTLASS's drain and in extraction.

CUTLASS >= 4.0 drains the map reads of its own earlier TMA copies with `cp.async.bulk.commit_group;
cp.async.bulk.wait_group.read 0;` before it publishes a rewritten map (`tensormaps_cp_fence_release`,
cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:737-747, pip nvidia-cutlass 4.2.0.0;
cutlass#2912). The checker reads that as retiring the reads (`bulk-wait-map-reads`, docs/model.md "Tensor maps",
dropped by --no-assume); without the drain the rewrite is SV606 (DeepGEMM #343's bug).
"""

from __future__ import annotations

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.result import Verdict

PRODUCER = """
protocol tm_drain {
  cta threads 64;
  role prod = warp 0;
  role cons = warp 1;
  smem tile[2] bytes 4096;
  mbarrier full[2] count 1;
  mbarrier empty[2] count 32;
  tensormap tm;
  if prod { elect { init full[*]; init empty[*]; fence.mbarrier_init; } }
  syncthreads;
  if prod {
    elect { tensormap.replace tm; fence.proxy.tensormap.release.gpu; }
    for g in 0..2 {
      fence.proxy.tensormap.acquire.gpu tm;
      elect {
        for k in 0..2 {
          wait empty[k] parity (g + 1) % 2;
          arrive.expect_tx full[k] bytes 4096;
          tma.load tile[k] -> full[k] map tm;
        }
      }
      if g < 1 {
        elect { DRAIN }
        elect { tensormap.replace tm; fence.proxy.tensormap.release.gpu; }
      }
    }
  }
  if cons {
    for g in 0..2 {
      for k in 0..2 {
        wait full[k] parity g % 2;
        read tile[k];
        arrive empty[k];
      }
    }
  }
}
"""


def _check(drain: str, **kw) -> tuple[Verdict, set[str], tuple[str, ...]]:  # type: ignore[no-untyped-def]
    res = check_protocol(syncverify.load(PRODUCER.replace("DRAIN", drain), path="tm.sync"), Options(timeout=60, **kw))
    return res.verdict, {d.code for d in res.diagnostics if d.is_error}, res.assumed


def test_the_bulk_drain_retires_the_map_reads_under_the_reading():
    verdict, codes, assumed = _check("bulk.commit; bulk.wait_read 0;")
    assert verdict is Verdict.SAFE and not codes and "bulk-wait-map-reads" in assumed
    verdict, codes, assumed = _check("bulk.commit; bulk.wait_read 0;", engine="z3")
    assert verdict is Verdict.SAFE and "bulk-wait-map-reads" in assumed


def test_the_drain_is_the_race_without_the_reading_and_so_is_no_drain():
    assert _check("bulk.commit; bulk.wait_read 0;", assume_bulk_wait_map_reads=False)[:2] == \
        (Verdict.VIOLATION, {"SV606"})
    for kw in ({}, {"engine": "z3"}):
        verdict, codes, assumed = _check("", **kw)
        assert (verdict, codes) == (Verdict.VIOLATION, {"SV606"}) and "bulk-wait-map-reads" not in assumed


def test_a_wait_that_leaves_the_group_pending_does_not_retire_it():
    """`bulk.wait_read 1` after one commit leaves the copies' group pending: still SV606."""
    assert _check("bulk.commit; bulk.wait_read 1;")[:2] == (Verdict.VIOLATION, {"SV606"})
