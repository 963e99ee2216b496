"""Tensor maps rewritten in place while TMA copies read them (`tensormap`, `map T`, `tensormap.replace`, the
tensormap proxy fences; issue #33 item 5): a rewrite while a copy that reads the map may still be in flight is
SV606 (the tensormap proxy reads the map until the copy completes: the model's conservative reading), a copy of
a rewritten map without `fence.proxy.tensormap::generic.release` in a thread that knows the rewrite and
`.acquire` in the copy's CTA, ordered between them by synchronization, is SV607 (a stale map); on the explicit
engine and on --engine z3. The bmc engine, the Promela export and the CUDA emitter refuse tensor maps with the
reason."""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.codegen import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

SPECS = Path(__file__).resolve().parent.parent / "specs"
BUG = SPECS / "deepgemm_k_grouped_tensormap_in_flight.sync"  # deepseek-ai/DeepGEMM PR #343, the bug
FIX = SPECS / "deepgemm_k_grouped_tensormap_drained.sync"  # its drain

ENGINES = ("explicit", "z3")

# One elected TMA thread: per group, rewrite the map, release and acquire it, then copy a tile through it;
# the consumer warp waits for the tile and releases the slot. DRAIN waits for the previous group's copy.
GROUPS = """
protocol map_groups {
  param G = 3;
  cta threads 64;
  role consumer = warp 0;
  role producer = warp 1;
  smem tile bytes 1024;
  mbarrier full count 1;
  mbarrier empty count 1;
  tensormap TA;
  if consumer { elect { init full; init empty; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    elect {
      for g in 0..G {
        if g > 0 { wait full parity (g + 1) % 2; }   // DRAIN
        tensormap.replace TA;
        fence.proxy.tensormap.release.gpu;
        fence.proxy.tensormap.acquire.gpu TA;
        wait empty parity (g + 1) % 2;
        tma.load tile -> full map TA;
        arrive.expect_tx full bytes 1024;
      }
    }
  }
  if consumer {
    for g in 0..G {
      wait full parity g % 2;
      read tile;
      syncwarp;
      elect { arrive empty; }
    }
  }
}
"""
NO_DRAIN = GROUPS.replace("        if g > 0 { wait full parity (g + 1) % 2; }   // DRAIN\n", "")
NO_RELEASE = GROUPS.replace("        fence.proxy.tensormap.release.gpu;\n", "")
NO_ACQUIRE = GROUPS.replace("        fence.proxy.tensormap.acquire.gpu TA;\n", "")
FENCES_SWAPPED = GROUPS.replace(
    "        fence.proxy.tensormap.release.gpu;\n        fence.proxy.tensormap.acquire.gpu TA;\n",
    "        fence.proxy.tensormap.acquire.gpu TA;\n        fence.proxy.tensormap.release.gpu;\n")
# the copy's tile is not the map: a copy that names no map is not ordered against the rewrite
NO_MAP = NO_DRAIN.replace("tma.load tile -> full map TA;", "tma.load tile -> full;")

# The rewrite by one thread, the copy by another: the release before a barrier, the acquire after it.
HANDOFF = """
protocol map_handoff {
  cta threads 64;
  role writer = warp 0;
  role loader = warp 1;
  smem tile bytes 1024;
  mbarrier full count 1;
  tensormap TA;
  if writer { elect { init full; fence.mbarrier_init; } }
  syncthreads;
  if writer { elect { tensormap.replace TA; fence.proxy.tensormap.release.gpu; } }
  syncthreads;
  if loader {
    elect {
      fence.proxy.tensormap.acquire.gpu TA;
      tma.load tile -> full map TA;
      arrive.expect_tx full bytes 1024;
    }
  }
  wait full parity 0;
}
"""
# near twins: the release after the barrier (the barrier carries the rewrite, not its release); the
# acquire before the barrier (nothing released to it yet); no barrier at all (the rewrite unordered)
RELEASE_LATE = HANDOFF.replace(
    "  if writer { elect { tensormap.replace TA; fence.proxy.tensormap.release.gpu; } }\n  syncthreads;\n",
    "  if writer { elect { tensormap.replace TA; } }\n  syncthreads;\n"
    "  if writer { elect { fence.proxy.tensormap.release.gpu; } }\n")
NO_BARRIER = HANDOFF.replace(
    "  if writer { elect { tensormap.replace TA; fence.proxy.tensormap.release.gpu; } }\n  syncthreads;\n",
    "  if writer { elect { tensormap.replace TA; fence.proxy.tensormap.release.gpu; } }\n")
# the acquire by the writer, the copy by another thread of its CTA after a barrier: the CUDA programming
# guide: "Once a tensor map has been acquired by one thread, it can be used by other threads in the block
# after sufficient synchronization"
ACQUIRED_BY_WRITER = HANDOFF.replace(
    "tensormap.replace TA; fence.proxy.tensormap.release.gpu;",
    "tensormap.replace TA; fence.proxy.tensormap.release.gpu; fence.proxy.tensormap.acquire.gpu TA;").replace(
    "      fence.proxy.tensormap.acquire.gpu TA;\n      tma.load", "      tma.load")

# Two CTAs: CTA 0 rewrites the map, CTA 1 copies through it after a cluster barrier. The acquire must be
# in the copy's CTA ("The thread that uses the tensor map and the thread that performs the fence must be in
# the same block"), and a .cta-scope release does not reach another CTA.
CLUSTER = """
protocol map_cluster {
  cluster 2;
  cta threads 32;
  smem tile bytes 1024;
  mbarrier full count 1;
  tensormap TA;
  elect { init full; fence.mbarrier_init; }
  cluster.sync;
  if cta == 0 { elect { tensormap.replace TA; fence.proxy.tensormap.release.gpu; ACQ0 } }
  cluster.sync;
  if cta == 1 {
    elect {
      ACQ1
      tma.load tile -> full map TA;
      arrive.expect_tx full bytes 1024;
      wait full parity 0;
    }
  }
}
"""
CLUSTER_OK = CLUSTER.replace("ACQ0", "").replace("ACQ1", "fence.proxy.tensormap.acquire.gpu TA;")
CLUSTER_WRONG_CTA = CLUSTER.replace("ACQ0", "fence.proxy.tensormap.acquire.gpu TA;").replace("ACQ1", "")
CLUSTER_CTA_SCOPE = CLUSTER_OK.replace("fence.proxy.tensormap.release.gpu;", "fence.proxy.tensormap.release.cta;")


def _run(text: str, engine: str = "explicit"):  # type: ignore[no-untyped-def]
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120))


def _errors(res) -> set[str]:  # type: ignore[no-untyped-def]
    return {d.code for d in res.diagnostics if d.is_error}


def _line(text: str, needle: str, nth: int = 0) -> int:
    return [i for i, t in enumerate(text.splitlines(), 1) if needle in t][nth]


def _finding(res, code: str):  # type: ignore[no-untyped-def]
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {code}, res.diagnostics
    return next(d for d in res.diagnostics if d.code == code)


@pytest.mark.parametrize("engine", ENGINES)
def test_deepgemm_rewrite_under_in_flight_loads_is_sv606_at_the_rewrite(engine: str):
    res = check_protocol(syncverify.load(str(BUG)), Options(engine=engine, timeout=120))
    found = _finding(res, "SV606")
    text = BUG.read_text()
    assert found.span.line in (_line(text, "tensormap.replace map_a"), _line(text, "tensormap.replace map_b"))
    assert {r.span.line for r in found.related} <= {_line(text, "full[s] map map_a"), _line(text, "full[s] map map_b")}


@pytest.mark.parametrize("engine", ENGINES)
def test_deepgemm_with_the_drain_is_safe(engine: str):
    res = check_protocol(syncverify.load(str(FIX)), Options(engine=engine, timeout=120))
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics
    if engine == "z3":
        assert res.bound == "all-iterations"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rewrite_after_the_copy_completed_is_safe_before_it_is_sv606(engine: str):
    safe = _run(GROUPS, engine)
    assert safe.verdict is Verdict.SAFE and not _errors(safe), safe.diagnostics
    if engine == "z3":
        assert safe.bound == "all-iterations"
    found = _finding(_run(NO_DRAIN, engine), "SV606")
    assert found.span.line == _line(NO_DRAIN, "tensormap.replace TA;")
    assert _line(NO_DRAIN, "-> full map TA") in [r.span.line for r in found.related]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text", [NO_RELEASE, NO_ACQUIRE, FENCES_SWAPPED], ids=["no-release", "no-acquire", "swapped"])
def test_a_copy_of_a_rewritten_map_without_the_fence_pair_is_sv607_at_the_copy(engine: str, text: str):
    found = _finding(_run(text, engine), "SV607")
    assert found.span.line == _line(text, "-> full map TA")
    assert _line(text, "tensormap.replace TA;") in [r.span.line for r in found.related]


def test_a_copy_that_names_no_map_does_not_read_the_rewritten_one():
    res = _run(NO_MAP)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics


def test_release_barrier_acquire_between_two_threads_is_safe():
    res = _run(HANDOFF)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics
    res = _run(ACQUIRED_BY_WRITER)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics


def test_a_release_after_the_barrier_is_sv607_and_no_barrier_is_sv606():
    found = _finding(_run(RELEASE_LATE), "SV607")
    assert found.span.line == _line(RELEASE_LATE, "-> full map TA")
    found = _finding(_run(NO_BARRIER), "SV606")
    assert found.span.line in (_line(NO_BARRIER, "-> full map TA"), _line(NO_BARRIER, "tensormap.replace TA;"))


def test_the_acquire_belongs_in_the_copys_cta_and_a_cta_scope_release_stays_in_its_cta():
    res = _run(CLUSTER_OK)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics
    assert _finding(_run(CLUSTER_WRONG_CTA), "SV607").span.line == _line(CLUSTER_WRONG_CTA, "-> full map TA")
    assert _finding(_run(CLUSTER_CTA_SCOPE), "SV607").span.line == _line(CLUSTER_CTA_SCOPE, "-> full map TA")


@pytest.mark.parametrize(("body", "code", "words"), [
    ("tma.store tile map TA;", "SV110", "not modelled yet"),
    ("tma.load tile -> full map tile;", "SV111", "needs a tensor map"),
    ("read TA;", "SV111", "needs a buffer"),
    ("tensormap.replace tile;", "SV111", "needs a tensor map"),
    ("fence.proxy.tensormap.release;", "SV110", "one scope"),
    ("fence.proxy.tensormap::generic.acquire.gpu;", "SV110", "takes 1 operand"),
])
def test_tensor_maps_are_only_what_copies_rewrites_and_fences_take(body: str, code: str, words: str):
    text = f"""
protocol bad {{
  cta threads 32;
  smem tile bytes 1024;
  mbarrier full count 1;
  tensormap TA;
  elect {{ {body} }}
}}
"""
    with pytest.raises(InputError) as err:
        syncverify.load(text, path="t.sync")
    assert any(d.code == code and words in d.message for d in err.value.diagnostics), err.value.diagnostics


def test_bmc_the_promela_export_and_the_emitter_refuse_tensor_maps_with_the_reason():
    res = _run(GROUPS, engine="bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "does not model tensor maps" in (res.coverage or "")
    with pytest.raises(EmitRefused, match="does not model tensor maps"):
        emit(syncverify.load(GROUPS, path="t.sync"))
    from syncverify.export.promela import export_promela
    from syncverify.export.promela.exporter import ExportError
    with pytest.raises(ExportError, match="does not model tensor maps"):
        export_promela(syncverify.load(GROUPS, path="t.sync"))


def test_extraction_refuses_a_tensormap_replace_it_does_not_recognize_at_its_line():
    # a rewrite of a map's copy in shared memory is extracted (ptx/tensormaps.py: a write of its 128 bytes;
    # tests/test_ptx_tensormap.py has the whole sequence); one through a generic address is refused, never skipped
    from syncverify.ptx.extract import extract
    from syncverify.ptx.launch import Launch
    from syncverify.ptx.parse import PtxError, parse_ptx
    text = (".version 8.3\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  .reg .b32 %r<4>;\n"
            "  .reg .b64 %rd<4>;\n  mov.u32 %r1, 0;\n"
            "  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r1], %rd1;\n  ret;\n}\n")
    body = extract(parse_ptx(text, "t.ptx"), Launch(block=(32, 1, 1))).text
    assert "smem s0 bytes 128;" in body and "write s0;" in body
    generic = text.replace(".shared::cta.b1024", ".b1024")
    with pytest.raises(PtxError) as err:
        extract(parse_ptx(generic, "t.ptx"), Launch(block=(32, 1, 1)))
    assert err.value.line == 9 and "generic address is not recognized" in err.value.message
