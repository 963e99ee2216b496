"""Issue #33's "Done when", audited on the four kernels as they ship: each extracts and checks safe at a small
problem size, and a realistic seeded bug in each is flagged at its line. The table with the commands, states
and CPU seconds is bench/CASE-STUDIES.md, "Issue #33's kernels and their seeds"; this module runs what can be
run (the searches of minutes with SYNCVERIFY_SLOW=1, a cheap twin in CI).

* Triton's tutorial flash-attention forward, TMA form, stages 2-4 (tests/data/ptx/triton/): safe as shipped
  (test_ptx_triton_attention.py). Seed, a missing wait: the loop's wait for the K tile deleted from the PTX
  (the tutorial's source has none; Triton writes it). Flagged at `06-fused-attention.py:115`, the dot.
* DeepGEMM's sm90 FP8 1D2D GEMM, multicast 2: safe as shipped in 933 states (2.0 s CPU with the extraction),
  under the default reading `exit-drains-bulk-reads` (its last tile's bulk stores at the exit: measured on an H100,
  docs/gpu-agreement.md; SV404 with `--letter exit-drains-bulk-reads`), with the SV505 warning at the math
  warps' release (`sm90_fp8_gemm_1d2d.cuh:269`): CTA 0's
  warps may arrive on CTA 1's empty barrier before CTA 1's producer has observed its previous phase, the letter of
  PTX's consumption rule, never its hazard (docs/model.md, "Readings PTX does not settle"; bench/RESULTS-speed.md,
  2026-12-06 07:00-08:10 UTC; test_ptx_deepgemm.py, SLOW). Seed, a lane arriving on the wrong rank
  (deepgemm_seeds/make_overlay.py): test_ptx_deepgemm.py (SLOW), flagged at the consequence
  (`copy_sm90_tma.hpp:676`, 7,314 states with `--fail-fast`), not at the arrive.
* CUTLASS's sm100 2-SM GEMM: decided since an init no other actor may touch and the pair's `tmem.alloc cta_group
  2` are taken as persistent sets (bench/RESULTS-speed.md, 2026-12-06 04:00 UTC): not safe, but SV402 at the
  follower's teardown arrive (`barrier.h:492`) on a barrier the leader initializes after its last
  `fence.mbarrier_init` (test below, SLOW; its shape in CI). Under the reading `relaxed-arrive-publishes-init`
  (off by default) it checks safe in 226,942 states and its seed 3 is SV301 at its line (SLOW; the reading's
  shape in CI, tests/test_relaxed_arrive_init.py; the landing rule that decides it, test_landing_por.py). A
  missing tcgen05 fence cannot be seeded: CUTLASS 4.2's sm100 GEMM emits no `tcgen05.fence` (the kernel as
  shipped is that case: SV608 under `sync-orders-tcgen05`, SV603 with `--no-assume`). Seed, a missing wait
  (sm100_seeds/make_overlay.py seed 3): flagged at its line, SV301 at the MMA warp's first tcgen05.mma
  (`mma_sm100_umma.hpp:451`; SLOW).
* CUTLASS example 88's Hopper FMHA forward: safe at one K/V tile (test_cutlass_host_sm100.py) and at two, where
  the math warps' `consumer_try_wait` tokens are reached (test_ptx_fmha_tokens.py, SLOW); its seed without the
  token's `consumer_wait` is SV301 at the PV MMA (the same file). Seed, a release before the wgmma wait
  (fmha_seeds/make_overlay.py seed 1): harmless at one K/V tile (below); it shows only from the third, where it
  is SV302 at the refill's load (`fmha_collective_load.hpp:131`) against the wgmma's read
  (test_ptx_fmha_tokens.py, SLOW, with its twin on the token spec in CI).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest

from syncverify.cli import main

DATA = Path(__file__).parent / "data" / "ptx"
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="a search of a minute or more (bench/CASE-STUDIES.md); run with SYNCVERIFY_SLOW=1")

# ---- Triton's attention: the K tile's wait deleted --------------------------------------------------------

TRITON_BOXES = [a for n in (4, 9, 14, 19) for a in ("--tensor-bytes", f"_attn_fwd_tma_param_{n}=8192")]
# Triton's inline wait loop (one per mbarrier wait): the Q wait, then in the loop the K tile's, then the V tile's
WAIT = re.compile(r"\tmbarrier\.try_wait\.parity\.shared::cta\.b64 complete, \[%r\d+\], %r\d+;\n"
                  r"\t@!complete bra\.uni waitLoop;\n")


def _without_the_k_wait(tmp_path: Path, stages: int) -> Path:
    """The PTX of `num_stages` with the loop's wait for the K tile (the second wait of the kernel, at
    06-fused-attention.py:115, before `qk = tl.dot(q, k)`) replaced by two empty lines, so that every other
    PTX line keeps its number."""
    src = (DATA / "triton" / f"fused_attention_s{stages}.ptx").read_text()
    waits = list(WAIT.finditer(src))
    assert len(waits) == 3
    k_wait = waits[1]
    assert "06-fused-attention.py:115:5" in src[:k_wait.start()].rsplit(".loc", 1)[-1]
    out = tmp_path / f"fused_attention_s{stages}_no_k_wait.ptx"
    out.write_text(src[:k_wait.start()] + "\n\n" + src[k_wait.end():])
    return out


def _triton_seed_is_flagged_at_the_dot(tmp_path: Path, stages: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", str(_without_the_k_wait(tmp_path, stages)), "--block", "128", "--grid", "1",
                 *TRITON_BOXES, "--fail-fast"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1, text
    # the wgmma reading K (the dot) against the TMA load writing it (the load at :114), not ordered
    found = re.findall(r"06-fused-attention\.py:(\d+):\d+: (SV30[123]) ", text)
    assert found and all(line == "115" for line, _ in found), text
    assert "the write at 06-fused-attention.py:114 by the async operation" in text


def test_triton_attention_without_the_k_wait_is_flagged_at_the_dot(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Two stages (about 2 s of CPU, to the first error): the first K tile's wgmma reads the stage while its TMA
    load is in flight."""
    _triton_seed_is_flagged_at_the_dot(tmp_path, 2, capsys)


@SLOW
@pytest.mark.parametrize("stages", [3, 4])
def test_triton_attention_without_the_k_wait_at_more_stages(tmp_path: Path, stages: int,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _triton_seed_is_flagged_at_the_dot(tmp_path, stages, capsys)


def _unzip(tmp_path: Path, rel: str) -> Path:
    out = tmp_path / Path(rel).name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((DATA / rel).read_bytes()))
    return out


# ---- CUTLASS's sm100 2-SM GEMM: the MMA warp without its mainloop wait ------------------------------------

def _gemm_2sm_seed3(tmp_path: Path) -> Path:
    return _unzip(tmp_path, "sm100_seeds/sm100_gemm_2sm_2x1_s2_seed3.ptx.gz")


@SLOW
def test_the_2sm_gemm_seed_reaches_the_protocol(tmp_path: Path) -> None:
    """Seed 3 (sm100_seeds/make_overlay.py) as extracted (about 5 s of CPU): the leader CTA's MMA warp waits
    for the accumulator (`producer_acquire`) and then issues its tcgen05.mma on the stages with no wait on
    their full barriers, which the producer's TMA loads complete; the shipped kernel waits there."""
    sync = tmp_path / "seed3.sync"
    assert main(["extract", str(_gemm_2sm_seed3(tmp_path)), "--cutlass-problem", "256x128x128",
                 "-o", str(sync)]) == 0
    body = sync.read_text().split("if mma && cta == 0 {", 1)[1].split("\n  }", 1)[0]
    before = body.split("tcgen05.mma", 1)[0]
    waits = re.findall(r"wait (mb0\[\d+\]) parity", before)
    loads = set(re.findall(r"tma\.load s\d+ bytes \d+ -> (mb0\[\d+\])", sync.read_text()))
    assert waits and not loads & set(waits), (waits, loads)  # no wait on a barrier the loads complete


@SLOW
def test_the_2sm_gemm_without_the_mainloop_wait_is_flagged(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 3 is SV301 at the MMA warp's first tcgen05.mma (`mma_sm100_umma.hpp:451`) against the producers'
    loads of its operand slots (18,815 states, about 11 CPU s with the extraction; bench/RESULTS-speed.md). Not
    with --fail-fast: the unfenced init of the teardown barrier (the test below) is met first."""
    code = main(["check", str(_gemm_2sm_seed3(tmp_path)), "--cutlass-problem", "256x128x128",
                 "--max-states", "400000", "--timeout", "900"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1 and re.search(r"mma_sm100_umma\.hpp:451:\d+: SV301 ", text), text


@SLOW
def test_the_2sm_gemm_teardown_arrive_on_an_unfenced_init_is_flagged(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The kernel as shipped: the leader's MMA warp initializes the teardown barrier (`tmem_deallocation_result_
    barrier`, PTX line 792) after its last `fence.mbarrier_init` (line 778) and publishes it with
    `barrier.cluster.arrive.relaxed` alone, so the follower's remote arrive on it (`barrier.h:492`) is not ordered
    after the init (SV402; ptx-semantics.md §2: the fence covers only the thread's prior inits). Reached in a
    few hundred states since the inits and the pair's allocation are taken alone."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-problem", "256x128x128", "--fail-fast", "--max-states", "20000"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1 and re.search(r"barrier\.h:492:\d+: SV402 ", text), text


READING = ["--assume", "relaxed-arrive-publishes-init"]


@SLOW
def test_the_2sm_gemm_is_safe_under_the_relaxed_arrive_reading(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The kernel as shipped under `relaxed-arrive-publishes-init` (off by default; docs/model.md, "Not adopted: a
    barrier init published by a relaxed cluster arrive alone"): the teardown barrier's init is published as if
    fenced, and the search ends safe (bench/RESULTS-speed.md, 2026-12-06 19:30 UTC: a few minutes of CPU with the
    extraction), its warnings those the kernel's letter gives (SV602 at the `.cta`-scope teardown arrive and
    accumulator release, SV608 of the epilogue's tcgen05.ld without tcgen05 fences)."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-problem", "256x128x128", *READING, "--max-states", "1000000",
                 "--timeout", "3000"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0 and "1 safe, 0 violations" in text, text
    assert re.search(r"assumed: [^)]*relaxed-arrive-publishes-init", text) and "SV402" not in text, text


@SLOW
def test_the_2sm_gemm_seed_is_flagged_under_the_relaxed_arrive_reading(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 3 under the same reading: the SV402 gone, its missing mainloop wait is what is found, SV301 at the
    MMA warp's first tcgen05.mma (`mma_sm100_umma.hpp:451`) against the producers' loads (8,330 states, about 5 CPU
    s once the host code is built). Not with --fail-fast: its first report is the same race at the load's side
    (`copy_sm100_tma.hpp:122`)."""
    code = main(["check", str(_gemm_2sm_seed3(tmp_path)), "--cutlass-problem", "256x128x128", *READING,
                 "--max-states", "400000", "--timeout", "900"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1 and re.search(r"mma_sm100_umma\.hpp:451:\d+: SV301 ", text) and "SV402" not in text, text


# The shape of that finding, in CI: CTA 0's warp initializes `done` after its fence.mbarrier_init, both CTAs pass
# the cluster barrier (a relaxed arrive), and CTA 1 arrives on CTA 0's `done`
UNFENCED_INIT = """
protocol unfenced_teardown_init {{
  cluster 2;
  cta threads 32;
  role mma = warp 0;
  mbarrier full count 1;
  mbarrier done count 1;
  if mma {{ elect {{ init full; {before} }} fence.mbarrier_init; elect {{ {after} }} }}
  cluster.arrive.relaxed;
  cluster.wait;
  if cta == 1 {{ elect {{ arrive done @ 0; }} }}
  if cta == 0 {{ wait done parity 0; }}
}}
"""


@pytest.mark.parametrize("before, after, verdict", [("init done;", "", "safe"), ("", "init done;", "violation")],
                         ids=["fenced", "after_the_fence"])
def test_an_init_after_the_fence_is_not_published_to_the_peer(tmp_path: Path, before: str, after: str,
                                                               verdict: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "unfenced.sync"
    spec.write_text(UNFENCED_INIT.format(before=before, after=after))
    code = main(["check", str(spec)])
    text = capsys.readouterr().out
    assert (code == 0) == (verdict == "safe") and ("SV402" in text) == (verdict == "violation"), text


def test_the_unfenced_init_is_safe_under_the_relaxed_arrive_reading(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`--assume relaxed-arrive-publishes-init` (off by default; docs/model.md): the relaxed arrive publishes the
    warp's init made after its fence, and the result says it assumed so."""
    spec = tmp_path / "unfenced.sync"
    spec.write_text(UNFENCED_INIT.format(before="", after="init done;"))
    code = main(["check", str(spec), "--assume", "relaxed-arrive-publishes-init"])
    text = capsys.readouterr().out
    assert code == 0 and "SV402" not in text and "assumed: relaxed-arrive-publishes-init" in text, text


# ---- Example 88's FMHA: the K stage released before the wgmma wait ----------------------------------------

def _fmha_check(tmp_path: Path, shape: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    ptx = _unzip(tmp_path, "fmha_seeds/fmha_hopper_fwd_ws_64_seed1.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-fmha", shape, "--fail-fast", "--timeout", "600"])
    out = capsys.readouterr()
    return code, out.out + out.err


@SLOW
def test_the_fmha_release_before_the_wgmma_wait_is_harmless_at_one_kv_tile(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """At one K/V tile nothing refills the K stage after its early release (about 8 s of CPU): no access of
    the stage follows the release, so the checker must not report one; the same states as the kernel as
    shipped (51,297, bench/CASE-STUDIES.md) but for the one release step."""
    code, text = _fmha_check(tmp_path, "1,1,128,64,64", capsys)
    assert code == 0 and "1 safe, 0 violations" in text, text
    assert set(re.findall(r"\bSV\d{3}\b", text)) <= {"SV204"}, text
