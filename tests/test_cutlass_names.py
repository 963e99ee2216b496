"""Names from the source on CUTLASS kernels checked with `--cutlass-problem` (#35).

* Barriers and buffers by their SharedStorage members: the host program (syncverify/data/
  cutlass_sm90_params.cu) prints where each member of the kernel's `SharedStorage` lies; names.py calls
  `pipelines.mainloop.full_barrier_` `mainloop_full_barrier`, `tensors.mainloop.smem_A` `smem_A`.
* Roles by the branch that selects them in CUTLASS's kernel (`WarpGroupRole::Producer` then
  `ProducerWarpRole::Mainloop`: `producer_mainloop`; `Consumer0 || Consumer1`: `consumer0`, `consumer1`).
* Names are only names: with the synthetic names put back, the protocol is the hand harness's text.
* A seeded bug is reported with those names, and never at a line of a file `check` does not write.
* Clusters 1x2 (A multicast along N) checked with one command given only the problem shape.

The host program of each kernel type is built once (nvcc, a minute or two) and kept in the cache.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.cutlass_host import cutlass_include
from syncverify.ptx.extract import find_nvcc
from syncverify.ptx.names import member_names
from syncverify.ptx.role_names import _condition, _words

needs_cutlass = pytest.mark.skipif(find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None,
                                   reason="needs nvcc, the nvidia-cutlass package and c++filt")

DATA = Path(__file__).parent / "data" / "ptx"
_DECL = re.compile(r"^  (role|mbarrier|smem) (\w+)", re.M)


def _unzip(tmp_path: Path, gz: Path) -> Path:
    out = tmp_path / gz.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(gz.read_bytes()))
    return out


def _extract(tmp_path: Path, gz: Path, problem: str, *more: str) -> str:
    ptx = _unzip(tmp_path, gz)
    out = tmp_path / "out.sync"
    assert main(["extract", str(ptx), "--cutlass-problem", problem, *more, "-o", str(out)]) == 0
    return out.read_text()


def _declared(text: str) -> list[str]:
    return [m[2] for m in _DECL.finditer(text)]


def test_member_paths_become_the_names_a_cutlass_user_knows():  # type: ignore[no-untyped-def]
    """The member's own name, widened by its enclosing member only where another member has the same name
    (the epilogue's load pipeline has a `full_barrier_` too); containers and trailing underscores dropped."""
    paths = ["pipelines.mainloop.full_barrier_", "pipelines.mainloop.empty_barrier_",
             "pipelines.epi_load.full_barrier_", "pipelines.epi_load.empty_barrier_",
             "pipelines.math_wg_order.barrier_", "pipelines.load_order.barrier_",
             "tensors.mainloop.smem_A", "tensors.mainloop.smem_B", "tensors.epilogue.collective.smem_D"]
    assert member_names(paths) == ["mainloop_full_barrier", "mainloop_empty_barrier", "epi_load_full_barrier",
                                   "epi_load_empty_barrier", "math_wg_order_barrier", "load_order_barrier",
                                   "smem_A", "smem_B", "smem_D"]
    # the near twin: without the epilogue's pipeline the mainloop's barriers need no qualifier
    assert member_names(["pipelines.mainloop.full_barrier_", "tensors.mainloop.smem_A"]) == ["full_barrier", "smem_A"]


def test_only_a_branch_on_the_warp_names_a_role():  # type: ignore[no-untyped-def]
    """CUTLASS's role enumerators name roles; an enumerator compared by a branch on something else (the GEMM's
    mode) does not. A bare `else` tests its `if`'s condition (`warp == 0`), past a preprocessor line between."""
    assert _words("if (warp_group_role == WarpGroupRole::Producer) {") == ["producer"]
    assert _words("if (producer_warp_role == ProducerWarpRole::MainloopAux) {") == ["mainloop_aux"]
    assert _words("if (params.mode == GemmUniversalMode::kGemm) {") == []
    assert _words("if (k_tile_count == 0) {  // nothing to load") == []
    lines = ("  if (warp == 0) {  // producer", "#ifdef X", "    a();", "#else", "    b();", "#endif",
             "  } else {  // consumers: the rest", "    c();", "  }")
    assert _condition(lines, 7).strip() == "if (warp == 0) {"
    assert _words(lines[6], _condition(lines, 7)) == ["consumers"]
    assert _words(lines[0], _condition(lines, 1)) == ["producer"]
    # the near twin: an `else` of a branch on the data names nothing
    data = ("  if (n > 4) {", "    a();", "  } else {  // small", "    b();", "  }")
    assert _words(data[2], _condition(data, 3)) == []


@needs_cutlass
def test_the_pingpong_protocol_names_its_members_and_roles(tmp_path):  # type: ignore[no-untyped-def]
    """Ping-pong 1x1 at 128x128x128: the pipelines' barriers, the order barriers and the operand buffers by
    their SharedStorage members; the producer warp and the two math warpgroups by the enumerators of the
    branches that select them (the comment cites the branch's line and the call it makes)."""
    text = _extract(tmp_path, DATA / "sm90_gemm_pingpong_1x1.ptx.gz", "128x128x128")
    for decl in ("mbarrier mainloop_full_barrier[8];", "mbarrier mainloop_empty_barrier[8];",
                 "mbarrier math_wg_order_barrier[4];", "mbarrier load_order_barrier[2];",
                 "smem smem_A[4] bytes 8192;", "smem smem_B[4] bytes 16384;",
                 "role producer_mainloop = warp 0;", "role consumer0[4] = warp 4 + i;",
                 "role consumer1[4] = warp 8 + i;"):
        assert decl in text, decl
    assert "// SharedStorage::pipelines.mainloop.full_barrier_, shared memory 0x0..0x3f" in text
    producer = next(ln for ln in text.splitlines() if ln.startswith("  role producer_mainloop"))
    branch = ("`if (producer_warp_role == ProducerWarpRole::Mainloop) {` "
              "(sm90_gemm_tma_warpspecialized_pingpong.hpp:622)")
    assert branch in producer and "calling `collective_mainloop.load(…)`" in producer
    # warps 1..3 run only the set-up every warp runs (their branches issue no synchronization): nothing of
    # their own selects them, so they keep their warps' name
    assert "role w1_3[3] = warp 1 + i;" in text
    assert not re.search(r"\b(mb\d+|s\d+)\b", text.split("protocol ", 1)[1].split("\n  if ", 1)[0])
    names = _declared(text)
    assert len(names) == len(set(names))


@needs_cutlass
def test_names_are_only_names(tmp_path):  # type: ignore[no-untyped-def]
    """The protocol with the source's names is the protocol the hand harness gets (tests/test_ptx_pingpong.py:
    the same launch, fields and boxes given by hand, no SharedStorage members, so `mbK`/`sK`) statement for
    statement: the names changed, nothing else did."""
    named = _extract(tmp_path, DATA / "sm90_gemm_pingpong_1x1.ptx.gz", "128x128x128")
    fields = DATA / "sm90_gemm_pingpong_1x1_fields_128x128x128.bin"
    ptx = tmp_path / "sm90_gemm_pingpong_1x1.ptx"
    hand = tmp_path / "hand.sync"
    args = ["--grid", "1x1x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "215040"]
    for off, n in [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]:
        args += ["--param", f"0[{off}:{n}]=@{fields}"]
    for off, n in {128: 8192, 384: 16384, 896: 4096, 1152: 4096}.items():
        args += ["--tensor-bytes", f"0[{off}]={n}"]
    assert main(["extract", str(ptx), *args, "-o", str(hand)]) == 0
    theirs = hand.read_text()
    assert "mbarrier mb0[30];" in theirs  # one run: no member says where one array ends
    assert _shape(named) == _shape(theirs)
    assert "mb0" not in named and "mainloop_full_barrier" not in theirs


def _shape(text: str) -> list[str]:
    """The role blocks' statements, comments dropped and each declared role or object (with its index) as N."""
    names = "|".join(sorted(_declared(text), key=len, reverse=True))
    body = re.sub(r" *//[^\n]*", "", text).split("\n  if ", 1)[1]
    return [re.sub(r"\b(?:" + names + r")\b(\[[^\]]*\])?", "N", ln.strip()) for ln in body.splitlines() if ln.strip()]


@needs_cutlass
def test_the_cooperative_2x1_protocol_names_are_unique(tmp_path):  # type: ignore[no-untyped-def]
    """Cooperative, cluster 2x1 (B multicast to both CTAs): every role, barrier and buffer named once; the
    producer and both consumer warpgroups named by their branches; the barriers by their members."""
    text = _extract(tmp_path, DATA / "sm90_gemm_coop_2x1.ptx.gz", "256x128x128")
    names = _declared(text)
    assert len(names) == len(set(names)), names
    assert "role producer_mainloop = warp 0;" in text
    assert re.search(r"role consumer0\[4\] = warp 4 \+ i;", text) and re.search(r"role consumer1\[4\] = warp 8 \+ i;",
                                                                                 text)
    assert "mbarrier mainloop_full_barrier[" in text and "smem smem_A[" in text and "smem smem_B[" in text
    assert not any(re.fullmatch(r"mb\d+", n) for n in names)


@needs_cutlass
def test_a_seeded_cutlass_bug_is_reported_with_the_source_names(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The consumer_wait-skipped build (tests/data/ptx/cutlass_seeds/sm90_gemm_coop_2x1_seed1): the race is
    on a buffer of `smem_A`/`smem_B`, between the producer's TMA copy and a consumer warpgroup's wgmma, named
    so in the finding and its trace; no note cites a file that `check` does not write."""
    ptx = _unzip(tmp_path, DATA / "cutlass_seeds" / "sm90_gemm_coop_2x1_seed1.ptx.gz")
    # the seeded headers it was compiled from, where its `.file` names put them (beside the PTX): the roles
    # are read from the kernel's branches there
    subprocess.run([sys.executable, str(DATA / "cutlass_seeds" / "make_overlay.py"), str(cutlass_include()),
                    str(tmp_path / "cutlass_seeded")], check=True)
    code = main(["check", str(ptx), "--cutlass-problem", "256x128x128", "--fail-fast"])
    text = "".join(capsys.readouterr())
    assert code == 1
    m = re.search(r"SV301 RAW race on smem_[AB]\[\d+\]@cta\d: tma\.load write by producer_mainloop\.w0@cta\d", text)
    assert m, text[:3000]
    assert re.search(r"by consumer[01]\[\d\]\.w\d+", text)
    assert "producer_mainloop.w0" in text  # the trace's steps
    assert ".extracted.sync" not in text
    assert not (tmp_path / "sm90_gemm_coop_2x1_seed1.extracted.sync").exists()


def test_an_own_kernel_keeps_its_shared_symbols_and_names_roles_by_its_comments(capsys):  # type: ignore[no-untyped-def]
    """A hand-written kernel (tests/data/ptx/own/ws_rowsum.cu): `__shared__` arrays by their PTX symbols
    (`full`, `empty`, `tile`); `if (warp == 0) {  // producer` names warp 0, the `else` of the consumers
    names the two consumer warps, kept apart by their warps."""
    assert main(["extract", str(DATA / "own" / "ws_rowsum.ptx"), "--block", "96", "--param", "2=6"]) == 0
    text = capsys.readouterr().out
    for decl in ("role producer = warp 0;", "role consumers_w1 = warp 1;", "role consumers_w2 = warp 2;",
                 "mbarrier full[3];", "mbarrier empty[3];"):
        assert decl in text, decl
    assert "under `if (warp == 0) {` (ws_rowsum.cu:34)" in text


def test_an_own_early_release_cites_no_protocol_file(capsys):  # type: ignore[no-untyped-def]
    """The planted early release: reported at the kernel's line with the kernel's names, and every note
    cites a file that exists (the PTX and the CUDA sources), none the protocol check never writes."""
    code = main(["check", str(DATA / "own" / "ws_rowsum_early_release.ptx"), "--block", "96", "--param", "2=6",
                 "--warning-traces"])
    text = "".join(capsys.readouterr())
    assert code == 1
    assert "by producer.w0" in text and "consumers_w1.w1" in text
    cited = set(re.findall(r"([\w./-]+\.(?:sync|ptx|cu|cuh|hpp|h)):\d+:\d+", text))
    assert cited and all(os.path.exists(c) for c in cited), cited


@needs_cutlass
@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="45 s of a 20-minute CI on two cores;"
                           " the 1x1 ping-pong GEMM's verdicts run in CI; run with SYNCVERIFY_SLOW=1")
def test_the_1x2_pingpong_gemm_is_safe_from_the_problem_shape_alone(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Ping-pong, cluster 1x2 (tests/data/ptx/sm90_gemm_pingpong_1x2.cu, CUTLASS 4.2 as it ships): the two
    CTAs of a cluster along N, A multicast to both in 4 KiB slices. At M=128 N=256 K=128 each CTA takes
    two 64x128 tiles, one per consumer warpgroup. Safe with the default budgets."""
    ptx = _unzip(tmp_path, DATA / "sm90_gemm_pingpong_1x2.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-problem", "128x256x128"])
    text = "".join(capsys.readouterr())
    assert code == 0, text[-3000:]
    assert "1 file: 1 safe" in text
    assert "cluster 1x2" in text


@needs_cutlass
@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="26 s of a 20-minute CI on two cores; the 2x1 GEMMs' multicast launches run in CI"
                           " (test_cutlass_frontdoor.py); run with SYNCVERIFY_SLOW=1")
def test_the_1x2_pingpong_protocol_multicasts_a(tmp_path):  # type: ignore[no-untyped-def]
    """The launch CUTLASS's host code computes for the 1x2 cluster: two CTAs along y, A's copies multicast to
    both (mask 0x3) in halves of the 8 KiB box, B's to their own CTA."""
    text = _extract(tmp_path, DATA / "sm90_gemm_pingpong_1x2.ptx.gz", "128x256x128")
    assert "cluster 1x2x1" in text and "cluster 2;" in text
    assert re.search(r"tma\.load smem_A\S* bytes 4096 -> \S+ multicast 0x3;", text)
    assert re.search(r"tma\.load smem_B\S* bytes 16384 -> mainloop_full_barrier\[\S+\];", text)


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="minutes of CPU; run with SYNCVERIFY_SLOW=1")
@needs_cutlass
def test_the_1x2_cooperative_gemm_is_safe_from_the_problem_shape_alone(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Cooperative, cluster 1x2 (tests/data/ptx/sm90_gemm_coop_1x2.cu): M=128 N=256 K=128, one 128x128 tile
    per CTA, A multicast to both. Safe with the default budgets, like the 2x1 build
    (tests/test_ptx_cutlass.py::test_the_2x1_gemm_is_safe, also SYNCVERIFY_SLOW). Measured: 489,142 states
    (the 2x1 build: 489,283), 1,705 s of search on the shared two-core host under load -- past the default
    600 s there, so measured with --timeout 3000; the 2x1 build's 265 s of CPU fits the default."""
    ptx = _unzip(tmp_path, DATA / "sm90_gemm_coop_1x2.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-problem", "128x256x128"])
    text = "".join(capsys.readouterr())
    assert code == 0, text[-3000:]
    assert "1 file: 1 safe" in text


def test_a_finding_on_a_declaration_is_placed_at_the_kernel_not_at_the_protocol():  # type: ignore[no-untyped-def]
    """A finding the checker places on a line of the protocol that no instruction is behind (a barrier's
    declaration): at the kernel's `.entry` in the PTX, the declaration quoted in a note -- not at
    `ws_rowsum.extracted.sync:N`, a file `check` never writes. The near twin, a finding on a statement, is
    placed at its CUDA line as before."""
    from syncverify.cli.kernel import _at_source
    from syncverify.diagnostics import Diagnostic, Severity, Span
    from syncverify.ptx.extract import extract
    from syncverify.ptx.launch import Launch
    from syncverify.ptx.parse import parse_ptx_file

    ptx = DATA / "own" / "ws_rowsum.ptx"
    mod = parse_ptx_file(str(ptx))
    ex = extract(mod, Launch(block=(96, 1, 1), params={"2": 6}), source_names=True)
    lines = ex.text.splitlines()
    decl = next(n for n, ln in enumerate(lines, 1) if ln.startswith("  mbarrier full[3];"))
    sync = str(ptx.with_suffix(".extracted.sync"))
    d = Diagnostic("SV602", Severity.WARNING, "on full[0]", Span(sync, decl, 3, decl, 4))
    placed = _at_source(d, ex)
    entry = next(f for f in mod.entries() if f.name == ex.kernel)
    assert placed.span is not None and (placed.span.path, placed.span.line) == (str(ptx), entry.line)
    assert any("`mbarrier full[3];`" in r.message and f"line {decl} of the protocol" in r.message
               for r in placed.related)
    assert all(".extracted.sync" not in r.span.path for r in placed.related)
    stmt = min(ex.origin)
    at_stmt = _at_source(Diagnostic("SV602", Severity.WARNING, "x", Span(sync, stmt, 3, stmt, 4)), ex)
    assert at_stmt.span is not None and at_stmt.span.path.endswith((".cu", ".cuh"))
