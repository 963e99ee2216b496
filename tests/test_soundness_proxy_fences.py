"""Async-proxy fences (#31): where the fence may stand, which state space it covers, and the split
halves — each reproducer with its near twin, on every engine (explicit, `--engine z3`, `--engine bmc`,
the Promela export under SPIN), and the PTX extraction of every fence form.

* A proxy fence on the reader's side, after the barrier that orders the generic writes and before the
  async read (TileLang's InjectFenceProxy placement), orders them: safe, where the checker used to
  require the fence in the writer (SV601), and the SV601 hid the WAR race of the buggy twin.
* `fence.proxy.async.shared::cta` covers the executing CTA's shared memory only: a write into a peer
  CTA's slot (DSMEM) fenced with it, then read by the peer's bulk store, is SV601; `.shared::cluster`
  (or the plain fence) orders it.
* The split halves are their own operations: the acquire half in the writer admits nothing; the
  release half covers the executing CTA's slots; the `::read` form and unknown forms are refused.

docs/model.md, "Proxy fences", has the PTX text behind each rule.
"""

from __future__ import annotations

import pytest
from test_exhaustive import _slice
from test_promela import CC_FLAGS, needs_spin

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.export import export_model
from syncverify.export.spin import run_spin
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx
from syncverify.result import CheckResult

RELEASE_HALF = "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;"
ACQUIRE_HALF = "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;"


def check(text: str, engine: str = "explicit") -> CheckResult:
    return check_protocol(load(text, path="t.sync"), Options(engine=engine, timeout=300))


def errors(r: CheckResult) -> set[str]:
    return {d.code for d in r.diagnostics if d.is_error}


def answer(r: CheckResult) -> str:
    """"safe", or the error codes found (the verdict must be conclusive)."""
    assert r.verdict.value in ("safe", "violation"), r.coverage
    return "safe" if r.verdict.value == "safe" else " ".join(sorted(errors(r)))


# ================================================================ the fence on either side (item 19)
#
# Two warps store their slots (generic proxy); a CTA barrier orders the stores before warp 0, whose
# elected lane stores both slots to global memory with the bulk copy (async proxy).
STORE = """protocol store {
  cta threads 64;
  role w[2] = warp i;
  smem out[2] bytes 256;
  if w {
    write out[instance];
    WRITER
    syncthreads;
    if w && instance == 0 {
      READER
      elect { tma.store out[0]; tma.store out[1]; bulk.commit; bulk.wait_read 0; }
    }
  }
}
"""


def store(writer: str = "", reader: str = "") -> str:
    return STORE.replace("WRITER", writer).replace("READER", reader)


# (writer's statement, reader's statement, the answer of every engine)
PLACEMENTS = {
    # TileLang: the fence after the barrier, in the thread that issues the async read
    "reader_side": ("", "fence.proxy.async;", "safe"),
    # the issuing lane alone: warp 1's stores (acquired) are covered, but warp 0's own stores by lanes
    # 1..31 are not — the own-write rule follows program order only, not the barrier that also orders
    # the other lanes' stores before lane 0 (conservative: docs/model.md, "Proxy fences")
    "reader_side_elected": ("", "elect { fence.proxy.async; }", "SV601"),
    # CUTLASS: each writer fences its own stores before the barrier
    "writer_side": ("fence.proxy.async;", "", "safe"),
    "no_fence": ("", "", "SV601"),
    # twins that must stay SV601: the fence by a lane that does not issue the read; the acquire half in
    # the writers (it is the consumer's half); the fence before the barrier on one side only
    "reader_side_other_lane": ("", "if lane == 1 { fence.proxy.async; }", "SV601"),
    "acquire_half_in_writer": (ACQUIRE_HALF, "", "SV601"),
    "reader_fences_before_barrier": ("if w && instance == 0 { fence.proxy.async; }", "", "SV601"),
    # the halves where PTX places them
    "release_half_in_writer": (RELEASE_HALF, "", "safe"),
    "release_and_acquire_halves": (RELEASE_HALF, ACQUIRE_HALF, "safe"),
    # the acquire half covers what its thread acquired (warp 1's stores), not warp 0's own stores
    "acquire_half_in_reader": ("", ACQUIRE_HALF, "SV601"),
    "global_only_in_reader": ("", "fence.proxy.async.global;", "SV601"),
}


@pytest.mark.parametrize("name", list(PLACEMENTS))
@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_proxy_fence_placement(name: str, engine: str) -> None:
    writer, reader, want = PLACEMENTS[name]
    assert answer(check(store(writer, reader), engine)) == want


# The buggy twin of the TileLang kernel (specs/tilelang_wgmma_reader_fence.sync): the wgmma group that
# reads the tile stays in flight (`wgmma.wait 1`) while the next tile is stored — a WAR race, which the
# SV601 on the correctly fenced read used to hide.
TILELANG_WAR = """protocol tilelang_war {
  cta threads 128;
  role mma[4] = warp i;
  smem a[4] bytes 2048;
  if mma {
    for k in 0..2 {
      write a[instance];
      syncthreads;
      fence.proxy.async;
      for q in 0..4 { wgmma.read a[q]; }
      wgmma.commit;
      wgmma.wait WAIT;
    }
    wgmma.wait 0;
  }
}
"""


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_reader_side_fence_lets_the_war_race_of_the_buggy_twin_show(engine: str) -> None:
    assert answer(check(TILELANG_WAR.replace("WAIT", "1"), engine)) == "SV302"
    assert answer(check(TILELANG_WAR.replace("WAIT", "0"), engine)) == "safe"


def test_the_message_names_both_placements() -> None:
    (d,) = [d for d in check(store()).diagnostics if d.code == "SV601"]
    assert "the writer's before the synchronization, or the reading thread's after it" in d.message


# ================================================================ the fence's state space (item 6)
#
# CTA 0 writes CTA 1's slot through DSMEM and signals CTA 1's barrier at cluster scope; CTA 1's elected
# lane reads the slot with a bulk store (async proxy).
DSMEM = """protocol dsmem {
  cluster 2;
  cta threads 32;
  smem buf bytes 1024;
  mbarrier full count 1;
  elect { init full; fence.mbarrier_init; }
  cluster.arrive.relaxed;
  cluster.wait;
  if cta == 0 {
    write buf @ 1;
    WRITER
    syncwarp;
    elect { arrive.release.cluster full @ 1; }
  }
  if cta == 1 {
    wait.acquire.cluster full parity 0;
    READER
    elect { tma.store buf; bulk.commit; bulk.wait_read 0; }
  }
  cluster.sync;
}
"""


def dsmem(writer: str = "", reader: str = "") -> str:
    return DSMEM.replace("WRITER", writer).replace("READER", reader)


SPACES = {
    # `.shared::cta` in CTA 0 does not cover CTA 1's shared memory
    "writer_shared_cta": ("fence.proxy.async.shared::cta;", "", "SV601"),
    "writer_release_half": (RELEASE_HALF, "", "SV601"),  # .sync_restrict::shared::cta, likewise
    "writer_shared_cluster": ("fence.proxy.async.shared::cluster;", "", "safe"),
    "writer_plain": ("fence.proxy.async;", "", "safe"),  # no state space: all of them
    # in CTA 1 the slot is its own shared memory
    "reader_shared_cta": ("", "fence.proxy.async.shared::cta;", "safe"),
    "reader_acquire_half": ("", ACQUIRE_HALF, "safe"),
    "none": ("", "", "SV601"),
}


@pytest.mark.parametrize("name", list(SPACES))
@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_proxy_fence_state_space(name: str, engine: str) -> None:
    writer, reader, want = SPACES[name]
    assert answer(check(dsmem(writer, reader), engine)) == want


# ================================================================ the Promela export agrees
SPIN_CASES = {
    **{f"store_{k}": (store(w, r), want) for k, (w, r, want) in PLACEMENTS.items()
       if k in ("reader_side", "no_fence", "reader_side_other_lane", "acquire_half_in_writer")},
    **{f"dsmem_{k}": (dsmem(w, r), want) for k, (w, r, want) in SPACES.items()
       if k in ("writer_shared_cta", "writer_shared_cluster", "reader_shared_cta")},
}


@needs_spin
@pytest.mark.parametrize("name", list(SPIN_CASES))
def test_spin_agrees(name: str, tmp_path) -> None:
    text, want = SPIN_CASES[name]
    model = export_model(load(text, path="t.sync"))
    spin = run_spin(model.text, tmp_path / "m", timeout=300, memlim_mb=1024, depth=model.max_depth,
                    cc_flags=CC_FLAGS)
    if want == "safe":
        assert spin.verdict == "safe", spin.detail
    else:
        assert spin.verdict == "violation" and spin.code == want, (spin.code, spin.detail)


# ================================================================ the language: every PTX spelling, no other
@pytest.mark.parametrize("stmt, space, sem", [
    ("fence.proxy.async;", "all", ""), ("fence.proxy.async.shared::cta;", "shared::cta", ""),
    ("fence.proxy.async.shared::cluster;", "shared::cluster", ""), ("fence.proxy.async.global;", "global", ""),
    (RELEASE_HALF, "shared::cta", "release"), (ACQUIRE_HALF, "shared::cluster", "acquire")])
def test_language_keeps_the_form(stmt: str, space: str, sem: str) -> None:
    (op,) = load(f"protocol p {{ cta threads 32; {stmt} }}", path="t.sync").body
    assert (op.kind, op.space, op.sem) == ("proxy_async", space, sem)


@pytest.mark.parametrize("stmt", [
    "fence.proxy.async::generic.release.sync_restrict::shared::cluster::read.cluster;",  # reads only: not modelled
    "fence.proxy.async::generic.acquire.cluster;", "fence.proxy.async.shared::cta.global;"])
def test_language_refuses_other_forms(stmt: str, tmp_path, capsys) -> None:
    spec = tmp_path / "t.sync"
    spec.write_text(f"protocol p {{ cta threads 32; {stmt} }}\n")
    assert main(["check", str(spec)]) == 2
    assert "SV110" in capsys.readouterr().out


# ================================================================ extraction (items 5 and 6)
def _kernel(fence: str) -> str:
    """Every thread stores its word of a 1 KiB buffer, runs `fence`, meets at bar.sync; thread 0 stores
    the buffer to global memory with the bulk copy."""
    return f""".version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<4>;
  .shared .align 128 .b8 buf[1024];
  ld.param.u64 %rd1, [k_param_0];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, buf;
  add.s32 %r4, %r3, %r2;
  st.shared.u32 [%r4], %r1;
  {fence}
  bar.sync 0;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r3], 1024;
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group.read 0;
$L_done:
  ret;
}}
"""


FENCE_LINE = 16


def _extracted(fence: str, block: int = 64) -> str:
    return extract(parse_ptx(_kernel(fence), "k.ptx"), Launch(block=(block, 1, 1))).text


@pytest.mark.parametrize("fence, statement, want", [
    ("fence.proxy.async;", "fence.proxy.async;", "safe"),
    ("membar.proxy.async;", "fence.proxy.async;", "safe"),  # "membar.proxy is a synonym for fence.proxy"
    ("fence.proxy.async.shared::cta;", "fence.proxy.async.shared::cta;", "safe"),
    ("fence.proxy.async.shared::cluster;", "fence.proxy.async.shared::cluster;", "safe"),
    (RELEASE_HALF, RELEASE_HALF, "safe"),
    # the acquire half was read as a full fence (prefix match): safe; it is the consumer's half
    (ACQUIRE_HALF, ACQUIRE_HALF, "SV601"),
    ("fence.proxy.async.global;", "fence.proxy.async.global;", "SV601"),  # no shared memory
    # fences the model credits nothing to are skipped: the stores stay unfenced
    ("fence.acq_rel.cluster;", None, "SV601"),
    ("fence.release.sync_restrict::shared::cta.cluster;", None, "SV601"),
    ("fence.proxy.alias;", None, "SV601"),
    ("fence.proxy.tensormap::generic.release.gpu;", None, "SV601"),
    ("membar.cta;", None, "SV601"),
])
def test_extraction_keeps_each_fence_form(fence: str, statement: str | None, want: str) -> None:
    text = _extracted(fence)
    lines = [t.split("//")[0].strip() for t in text.splitlines() if f"ptx:{FENCE_LINE}" in t]
    if statement is None:
        assert lines == [], lines
    else:
        assert lines and set(lines) == {statement}, lines
    assert answer(check(text)) == want


@pytest.mark.parametrize("fence", [
    "fence.proxy.async::generic.release.sync_restrict::shared::cluster::read.cluster;",
    "fence.proxy.async::generic.acquire.cluster;",
    "fence.mbarrier_init.cluster;",
    "fence.bogus.cta;"])
def test_extraction_refuses_unmodelled_fences_at_their_line(fence: str) -> None:
    with pytest.raises(PtxError) as err:
        _extracted(fence)
    assert err.value.line == FENCE_LINE and "fence" in err.value.message


def test_extraction_refusal_exits_2_with_a_caret(tmp_path, capsys) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(_kernel("fence.proxy.async::generic.release.sync_restrict::shared::cluster::read.cluster;"))
    assert main(["extract", str(ptx), "--block", "64"]) == 2
    out = capsys.readouterr()
    assert f"k.ptx:{FENCE_LINE}:3" in out.out + out.err and "^" in out.out + out.err


DSMEM_PTX = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry k()
{
  .reg .b32 %r<8>;
  .reg .pred %p<4>;
  .shared .align 128 .b8 buf[1024];
  mov.u32 %r1, %cluster_ctarank;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  mov.u32 %r3, buf;
  mapa.shared::cluster.u32 %r5, %r3, 1;
  st.shared::cluster.u32 [%r5], %r1;
  FENCE
$L_done:
  ret;
}
"""


@pytest.mark.parametrize("fence", ["fence.proxy.async.shared::cta;", "fence.proxy.async.shared::cluster;"])
def test_extraction_keeps_the_space_of_a_fence_after_a_dsmem_store(fence: str) -> None:
    """The extractor used to drop the state space: `.shared::cta` after a store into the peer's shared
    memory came out as the plain fence, which covers the peer's slot (item 6)."""
    text = extract(parse_ptx(DSMEM_PTX.replace("FENCE", fence), "d.ptx"),
                   Launch(block=(32, 1, 1), cluster=(2, 1, 1))).text
    body = [t.split("//")[0].strip() for t in text.splitlines()]
    assert "write buf @ 1;" in body or any(t.startswith("write ") and t.endswith("@ 1;") for t in body), text
    assert fence in body, text


# ================================================================ generated programs (tests/exhaustive_programs.py)
@needs_spin
@pytest.mark.parametrize("scope", ["proxies", "proxies2"])
def test_spin_agrees_on_a_slice_of_the_proxy_scopes(scope: str) -> None:
    """The fence atoms (every state space and both halves) on either side of the synchronization,
    against SPIN; test_exhaustive.py compares the reduced, unreduced, z3 and bmc engines on them."""
    tally = _slice(scope, 2000, ["spin"])
    assert tally["spin agrees"] >= 5, tally
