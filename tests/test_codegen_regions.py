"""Sub-slot regions in the emitted kernel: each access stamps or checks exactly the bytes the model gives it.

The byte ranges come from the checker (``Machine.parts``, ``Machine._region``): a write's record in the
expectation list must be its part, a read's segments must name each part's writer, and a bulk store of
a slot written by parts must expect each writer's stamp in its own part. The host-side store check
(``outcome.check_stores``) must then pass the content the protocol writes and flag a write that lands
in another warp's part.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from nvcc import ptxas_clean_cubin

import syncverify
from syncverify.codegen import EmitRefused, emit
from syncverify.codegen.schedule import stamp
from syncverify.gpu import outcome as oc
from syncverify.semantics.families.regions import OWN_WARP
from syncverify.semantics.machine import Machine

SPECS = Path(__file__).resolve().parent.parent / "specs"


def _load(name: str) -> syncverify.ir.Protocol:
    return syncverify.load(str(SPECS / f"{name}.sync"))


def _record(launch: dict, proc: int, site: int, occ: int) -> int:
    """The index of the record of (proc, site, occurrence) in the expectation list."""
    n = launch["nsites"]
    kernel_tables = launch["_tables"]
    base = kernel_tables["read_base"][proc * n + site]
    assert base >= 0 and occ < kernel_tables["read_count"][proc * n + site]
    return launch["expected"][base + occ]


def _emit(protocol) -> dict:
    em = emit(protocol)
    # the per-(process, site) tables are constant arrays of the source; read them back from there
    tables = {}
    for name in ("read_base", "read_count"):
        line = next(x for x in em.source.splitlines() if f" sv_{name}[" in x)
        tables[name] = [int(v) for v in line.split("{", 1)[1].rstrip("};").split(",")]
    launch = dict(em.launch)
    launch["_tables"] = tables
    launch["_source"] = em.source
    return launch


def test_each_warps_part_write_stamps_the_bytes_the_checker_gives_it():
    protocol = _load("cutlass_epilogue_warp_parts")
    launch = _emit(protocol)
    parts = Machine(protocol).parts
    write = next(s["index"] for s in launch["sites"] if s["op"].startswith("write"))
    seen = []
    for proc in range(4):
        for occ in range(3):  # ITERS
            r = _record(launch, proc, write, occ)
            lo, hi = parts.bytes(OWN_WARP, proc, 8192)
            assert launch["expected"][r:r + 2] == [lo // 4, hi // 4]
        seen.append(tuple(launch["expected"][r:r + 2]))
    assert seen == [(0, 512), (512, 1024), (1024, 1536), (1536, 2048)]
    assert "sv_stamp_range(slot, expect[r], expect[r + 1u]" in launch["_source"]


def test_a_store_of_disjoint_parts_expects_each_writer_in_its_part_and_flags_a_misplaced_write():
    protocol = _load("cutlass_epilogue_warp_parts")
    launch = _emit(protocol)
    nsites = launch["nsites"]
    write = next(s["index"] for s in launch["sites"] if s["op"].startswith("write"))
    segments = launch["stores"]["segments"]
    assert len(segments) == 3
    for k, segs in enumerate(segments):
        assert segs == [[512 * w, 512 * (w + 1), stamp(w, write, k, nsites)] for w in range(4)]
    # what the protocol writes: every part holds its own warp's stamp -> clean
    words, regions = launch["stores"]["region_words"], launch["stores"]["regions"]
    dst = [0] * (words * regions)
    for r, segs in enumerate(segments):
        for lo, hi, st in segs:
            dst[r * words + lo:r * words + hi] = [st] * (hi - lo)
    assert oc.check_stores(launch, dst, 1) == {}
    # warp 1 writes warp 2's part of the first store's slot: exactly that part is wrong
    lo, hi, _ = segments[0][2]
    dst[lo:hi] = [segments[0][1][2]] * (hi - lo)
    bad = oc.check_stores(launch, dst, 1)
    assert bad["bad_words"] == hi - lo and bad["first"]["word"] == lo


def test_the_same_part_twin_expects_one_writer_over_the_whole_slot():
    """Near twin: every warp writes the warpgroup's part (one warpgroup: the whole slot), so the store's
    source has one segment, and a second warp's write anywhere in it is a wrong word."""
    launch = _emit(_load("cutlass_epilogue_same_part"))
    for segs in launch["stores"]["segments"]:
        assert len(segs) == 1 and segs[0][:2] == [0, 2048]


READS = """protocol t {
  cta threads 96;
  role w = warps 0..2;
  role other = warp 2;
  smem buf bytes 4096;
  if w { write buf part warp; }
  syncthreads;
  if w { read buf; read buf bytes 2048..4096; }
  if other { read buf bytes 1024..3072; }
}
"""


def test_reads_check_each_segment_against_the_writer_of_its_bytes():
    protocol = syncverify.load(READS, path="t.sync")
    launch = _emit(protocol)
    nsites = launch["nsites"]
    exp = launch["expected"]
    write, whole, half, other = (s["index"] for s in launch["sites"] if s["op"].startswith(("write", "read")))
    w0, w1 = stamp(0, write, 0, nsites), stamp(1, write, 0, nsites)
    r = _record(launch, 0, whole, 0)
    assert exp[r:r + 7] == [2, 0, 512, w0, 512, 1024, w1]
    r = _record(launch, 1, half, 0)  # warp 1's read of its own part
    assert exp[r:r + 4] == [1, 512, 1024, w1]
    r = _record(launch, 2, other, 0)  # a range across both parts
    assert exp[r:r + 7] == [2, 256, 512, w0, 512, 768, w1]
    assert "sv_check_range(c, slot" in launch["_source"]


def test_a_range_inside_a_word_is_refused_with_the_line():
    text = READS.replace("read buf bytes 1024..3072;", "read buf bytes 1026..3072;")
    with pytest.raises(EmitRefused, match=r"t.sync:9: the region bytes 1026..3072 does not start and end on a 4-byte"):
        emit(syncverify.load(text, path="t.sync"))


def test_buffers_without_regions_keep_whole_slot_stamps():
    source = emit(_load("tma_store_epilogue")).source
    assert "sv_stamp_range" not in source and "sv_check_range" not in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_read_kernel_compiles_without_serializing(tmp_path):
    ptxas_clean_cubin(emit(syncverify.load(READS, path="t.sync")).source, tmp_path)
