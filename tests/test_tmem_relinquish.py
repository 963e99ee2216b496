"""`tmem.relinquish` (`tcgen05.relinquish_alloc_permit`): a CTA's later `tmem.alloc` is illegal (PTX ISA
§9.7.16.7.1), SV604, on every interleaving; the bmc engine, the Promela export and the CUDA emitter refuse it
with the reason."""

from __future__ import annotations

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.codegen import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

# CUTLASS's order (sm100_gemm_tma_warpspecialized.hpp): the MMA warp allocates, runs its tiles, relinquishes
# the right to allocate, and frees the columns at the end.
IN_ORDER = """
protocol relinquish_after_the_last_alloc {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  if mma { tmem.alloc cols 256; }
  if epi { tmem.alloc cols 128; }
  syncthreads;
  if mma { tmem.relinquish; }
  if epi { tmem.dealloc cols 128; }
  syncthreads;
  if mma { tmem.dealloc cols 256; }
}
"""

# near twin: the relinquish before the barrier, unordered with the other warp's allocation
TOO_EARLY = IN_ORDER.replace("if mma { tmem.alloc cols 256; }", "if mma { tmem.alloc cols 256; tmem.relinquish; }") \
    .replace("  if mma { tmem.relinquish; }\n", "")

# the other warp allocates again after the barrier that follows the relinquish: every interleaving
AFTER = IN_ORDER.replace("if epi { tmem.dealloc cols 128; }", "if epi { tmem.dealloc cols 128; }\n  syncthreads;\n"
                         "  if epi { tmem.alloc cols 32; tmem.dealloc cols 32; }")


def _run(text: str, engine: str = "explicit"):  # type: ignore[no-untyped-def]
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=60))


def _errors(res) -> set[str]:  # type: ignore[no-untyped-def]
    return {d.code for d in res.diagnostics if d.is_error}


def test_an_alloc_after_the_relinquish_is_sv604_at_the_alloc():
    res = _run(AFTER)
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV604"}
    line = next(i for i, text in enumerate(AFTER.splitlines(), 1) if "tmem.alloc cols 32" in text)
    assert next(d for d in res.diagnostics if d.code == "SV604").span.line == line


def test_relinquish_after_every_allocation_is_safe():
    res = _run(IN_ORDER)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics


def test_relinquish_unordered_with_another_warps_alloc_is_found_in_some_interleaving():
    """The epilogue's allocation and the relinquish are not ordered: one interleaving runs the allocation after."""
    res = _run(TOO_EARLY)
    assert res.verdict is Verdict.VIOLATION and "SV604" in _errors(res)


def test_the_ptx_spelling_and_cta_group_2():
    text = """
protocol pair {
  cluster 2;
  cta threads 32;
  cluster.sync;
  tcgen05.alloc.cta_group::2 cols 64;
  tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
  tmem.dealloc cta_group 2 cols 64;
  cluster.sync;
}
"""
    assert _run(text).verdict is Verdict.SAFE
    with pytest.raises(InputError, match="cluster of at least 2"):
        syncverify.load("protocol p { cta threads 32; tmem.relinquish cta_group 2; }", path="p.sync")


def test_bmc_and_the_emitter_refuse_it_with_the_reason():
    res = _run(IN_ORDER, engine="bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "tmem.relinquish" in res.coverage, res.coverage
    with pytest.raises(EmitRefused, match="sm_100a"):
        emit(syncverify.load(IN_ORDER, path="t.sync"))


def test_the_promela_export_refuses_it():
    from syncverify.export.promela import export_promela

    with pytest.raises(Exception, match=r"tmem\.relinquish|tcgen05"):
        export_promela(syncverify.load(IN_ORDER, path="t.sync"))
