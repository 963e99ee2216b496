"""Tensor maps rewritten by the kernel (#33, item 5): `tensormap.replace` and the tensormap proxy fences, in the
language's reading of CUTLASS's drain and in extraction.

CUTLASS >= 4.0 drains the map reads of its own earlier TMA copies with `cp.async.bulk.commit_group;
cp.async.bulk.wait_group.read 0;` before it publishes a rewritten map (`tensormaps_cp_fence_release`,
cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:737-747, pip nvidia-cutlass 4.2.0.0;
cutlass#2912). The checker reads that as retiring the reads (`bulk-wait-map-reads`, docs/model.md "Tensor maps",
dropped by --no-assume); without the drain the rewrite is SV606 (DeepGEMM #343's bug).
"""

from __future__ import annotations

import re
from pathlib import Path

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import parse_ptx_file
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


def test_a_syncwarp_after_the_acquire_keeps_it():
    """The acquire marker's flag was warp_collective_order.F_COLLECTIVE's bit: a `syncwarp` between the acquire
    and a copy cleared it (a false SV607, and SV609 warnings naming the marker as an access)."""
    text = """
protocol acquire_then_syncwarp {
  cta threads 32;
  smem tile[2] bytes 4096;
  mbarrier full[2] count 1;
  tensormap tm;
  elect { init full[*]; fence.mbarrier_init; }
  syncwarp;
  elect { tensormap.replace tm; fence.proxy.tensormap.release.gpu; }
  ACQUIRE
  elect { arrive.expect_tx full[0] bytes 4096; tma.load tile[0] -> full[0] map tm; }
  syncwarp;
  elect { arrive.expect_tx full[1] bytes 4096; tma.load tile[1] -> full[1] map tm; }
  wait full[0] parity 0;
  wait full[1] parity 0;
}
"""
    res = check_protocol(syncverify.load(text.replace("ACQUIRE", "fence.proxy.tensormap.acquire.gpu tm;"),
                                         path="t.sync"), Options(timeout=60))
    assert res.verdict is Verdict.SAFE and not res.diagnostics
    res = check_protocol(syncverify.load(text.replace("ACQUIRE", ""), path="t.sync"), Options(timeout=60))
    assert {d.code for d in res.diagnostics if d.is_error} == {"SV607"}


def test_record_flags_are_distinct_bits():
    from syncverify.semantics import state
    from syncverify.semantics.families import tensormap, warp_collective_order
    flags = [v for k, v in vars(state).items() if k.startswith("F_") and isinstance(v, int)]
    flags += [tensormap.F_TM_ACQ, tensormap.F_TM_NARROW, warp_collective_order.F_COLLECTIVE]
    assert all(f > 0 and f & (f - 1) == 0 for f in flags)
    assert len(set(flags)) == len(flags)


# ---- extraction: tests/data/ptx/tensormap/grouped.cu ------------------------------------------------------------

DATA = Path(__file__).parent / "data" / "ptx" / "tensormap"


def _lines(text: str) -> str:
    """A regex alternation of the lines of grouped.cu's statement that starts with ``text`` (nvcc's line info
    names one line of a multi-line asm statement)."""
    src = (DATA / "grouped.cu").read_text().splitlines()
    first = next(i for i, s in enumerate(src, 1) if text in s)
    last = next(i for i in range(first, len(src) + 1) if src[i - 1].rstrip().endswith(";"))
    return "(?:" + "|".join(str(i) for i in range(first, last + 1)) + ")"


REWRITE = _lines('asm volatile("tensormap.cp_fenceproxy')  # tensormaps_cp_fence_release's fused copy
COPY = _lines('asm volatile("cp.async.bulk.tensor.2d')
BIND = ["--block", "64", "--param", "1=0x10000000", "--tensor-bytes", "1[0]=4096"]


def _run(capsys, name: str, *extra: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(["check", str(DATA / name), *BIND, *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_cutlass_sequence_extracts_to_the_language_operations():
    launch = Launch(block=(64, 1, 1), params={"1": 0x10000000}, tensor_bytes={("1", 0): 4096})
    body = re.sub(r" *//[^\n]*", "", extract(parse_ptx_file(str(DATA / "grouped.ptx")), launch).text)
    assert "tensormap tm0;" in body
    # the shared-memory copy rewritten by one lane; the drain, then the warp's fused copy and release written as
    # its lowest lane's; the whole warp's acquire; the copies name the map
    m = re.search(r"elect \{\n +write (\w+);\n +\}\n +syncwarp;\n +elect \{\n +bulk\.commit;\n +bulk\.wait_read 0;\n"
                  r" +read (\w+);\n +tensormap\.replace tm0;\n +fence\.proxy\.tensormap\.release\.gpu;\n +\}\n"
                  r" +fence\.proxy\.tensormap\.acquire\.gpu tm0;\n", body)
    assert m and m.group(1) == m.group(2), body  # the map's copy in shared memory, written then read
    assert len(re.findall(r"tma\.load \w+ bytes \d+ -> mb0\[[01]\] map tm0;", body)) == 4


def test_the_cutlass_sequence_is_safe_under_the_bulk_group_reading(capsys):  # type: ignore[no-untyped-def]
    rc, text = _run(capsys, "grouped.ptx")
    assert rc == 0 and "1 safe" in text and "assumed: bulk-wait-map-reads" in text
    rc, text = _run(capsys, "grouped.ptx", "--no-assume")
    assert rc == 1 and re.search(rf"grouped\.cu:{REWRITE}:\d+: SV606 ", text)


def test_without_the_drain_the_rewrite_races_with_the_copies(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_NO_DRAIN (CUTLASS < 4.0's release, DeepGEMM #343's bug): SV606 at the fused copy-and-release."""
    rc, text = _run(capsys, "grouped_no_drain.ptx")
    assert rc == 1
    assert re.search(rf"grouped\.cu:{REWRITE}:\d+: SV606 tensor map `tm0` rewritten", text)
    assert "bulk-wait-map-reads" not in text


def test_without_the_acquire_the_copy_may_use_the_stale_map(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_NO_ACQUIRE: SV607 at the copy."""
    rc, text = _run(capsys, "grouped_no_acquire.ptx")
    assert rc == 1
    assert re.search(rf"grouped\.cu:{COPY}:\d+: SV607 TMA copy", text), text


def test_a_map_address_that_is_not_known_is_refused_at_its_line(capsys):  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert main(["extract", str(DATA / "grouped.ptx"), "--block", "64"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"grouped\.ptx:\d+:\d+: error: cannot extract .*global address of this tensor-map instruction "
                     r"is not known", err)
    assert "tensormap.cp_fenceproxy" in err and "^" in err


def test_a_map_rewritten_by_ordinary_stores_is_refused_at_the_store(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_STORE_REWRITE: `*gmem_map = smem_map` (DeepGEMM's k-grouped form) is not a recognized rewrite; a copy
    of that map naming no map would hide a race, so the store is refused (exit 2), at its PTX line."""
    capsys.readouterr()
    assert main(["check", str(DATA / "grouped_store_rewrite.ptx"), *BIND]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert re.search(r"grouped_store_rewrite\.ptx:\d+:\d+: error: cannot extract .*a store that may write the tensor "
                     r"map at 0x10000000, which a TMA copy reads", text)
    assert "st.global.v4.u32" in text and re.search(rf"grouped\.cu:{_lines('if (lane == 0) *gmem_map')}\n", text)


def test_the_lift_agrees_on_the_kernel_and_its_seed(capsys):  # type: ignore[no-untyped-def]
    rc, text = _run(capsys, "grouped.ptx", "--engine", "z3")
    assert rc == 0 and "assumed: bulk-wait-map-reads" in text
    rc, text = _run(capsys, "grouped_no_drain.ptx", "--engine", "z3")
    assert rc == 1 and re.search(rf"grouped\.cu:{REWRITE}:\d+: SV606 ", text)


def test_a_map_rewritten_in_place_in_global_memory(capsys):  # type: ignore[no-untyped-def]
    """-DSV_REPLACE_IN_GLOBAL: `tensormap.replace.tile.global_address.global` then the release fence, by one lane
    after its drain (tma_descriptor_replace_addr_in_global_mem, tma_descriptor_fence_release): safe."""
    launch = Launch(block=(64, 1, 1), params={"1": 0x10000000}, tensor_bytes={("1", 0): 4096})
    body = re.sub(r" *//[^\n]*", "", extract(parse_ptx_file(str(DATA / "grouped_in_global.ptx")), launch).text)
    assert "elect {\n        bulk.commit;\n        bulk.wait_read 0;\n        tensormap.replace tm0;\n" \
        "        fence.proxy.tensormap.release.gpu;\n      }\n      syncwarp;\n" \
        "      fence.proxy.tensormap.acquire.gpu tm0;\n" in body, body
    rc, text = _run(capsys, "grouped_in_global.ptx")
    assert rc == 0 and "1 safe" in text and "assumed: bulk-wait-map-reads" in text
