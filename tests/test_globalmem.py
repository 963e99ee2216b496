"""Synchronization through global memory (#34): flags, atomics, spins, thread fences, grid.sync,
grids of several clusters and their launch (docs/language.md §3.7, docs/model.md "Global memory").

Every reproducer comes with its near twin whose verdict must stay: the release that carries the
data and the one at too narrow a scope, the fence pattern and the relaxed write without its fence,
the RMW that continues a release sequence and the store that ends it, the launch that makes CTAs
resident together and the one that does not. The explicit engine and `--engine z3` must agree;
bmc, the Promela export and the CUDA emitter refuse with the reason.
"""

from __future__ import annotations

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.codegen.base import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.export.promela import ExportError, export_model
from syncverify.result import Verdict


def check(text: str, engine: str = "explicit", **defines: int):
    return check_protocol(syncverify.load(text, path="t.sync", defines=defines), Options(engine=engine, timeout=120))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


def both(text: str) -> set[str]:
    """The explicit engine's error codes, after checking that --engine z3 agrees on the verdict and codes."""
    ref, sym = check(text), check(text, "z3")
    assert sym.verdict == ref.verdict, (ref, sym)
    assert errors(sym) == errors(ref)
    return errors(ref)


# A two-CTA hand-off through global memory: CTA 0 writes, publishes a flag; CTA 1 spins, reads.
HANDOFF = """\
protocol handoff {{
  grid 2;
  launch {launch};
  cta threads 64;
  global partial bytes 4096;
  flag ready bound 4;
  if block == 0 {{
    write partial part warp;
    syncthreads;
    first thread {{ {publish} }}
  }} else {{
    first thread {{ {consume} }}
    syncthreads;
    read partial part warp;
  }}
}}
"""


def handoff(publish: str = "red.add.release.gpu ready, 1;", consume: str = "wait.until.acquire.gpu ready >= 1;",
            launch: str = "ordered") -> str:
    return HANDOFF.format(publish=publish, consume=consume, launch=launch)


def test_release_acquire_through_a_flag_orders_the_data():
    assert both(handoff()) == set()


def test_without_the_wait_the_data_races():
    assert both(handoff(consume="ld.acquire.gpu ready;")) == {"SV301"}


@pytest.mark.parametrize("publish, consume", [
    ("red.add.release.cta ready, 1;", "wait.until.acquire.gpu ready >= 1;"),   # release at .cta: not CTA 1's
    ("red.add.release.gpu ready, 1;", "wait.until.acquire.cta ready >= 1;"),   # acquire at .cta: not CTA 0's
    ("red.add.release.cluster ready, 1;", "wait.until.acquire.gpu ready >= 1;"),  # two clusters of one CTA
    ("red.add.relaxed.gpu ready, 1;", "wait.until.acquire.gpu ready >= 1;"),   # relaxed, no fence
    ("red.add.release.gpu ready, 1;", "wait.until.relaxed.gpu ready >= 1;"),   # relaxed spin, no fence
])
def test_a_scope_or_semantics_that_does_not_synchronize_leaves_the_race(publish, consume):
    assert both(handoff(publish, consume)) == {"SV301"}


def test_fence_patterns_synchronize_relaxed_accesses():
    """CUTLASS barrier.h red_release: fence.acq_rel.gpu, then red.relaxed; a relaxed spin, then a fence."""
    text = handoff("fence.acq_rel.gpu; red.add.relaxed.gpu ready, 1;",
                   "wait.until.relaxed.gpu ready >= 1; fence.sc.gpu;")
    assert both(text) == set()
    # the fence at .cta scope does not reach the other CTA
    narrow = handoff("fence.acq_rel.cta; red.add.relaxed.gpu ready, 1;",
                     "wait.until.relaxed.gpu ready >= 1; fence.sc.gpu;")
    assert both(narrow) == {"SV301"}


RELEASE_SEQUENCE = """\
protocol release_sequence {{
  grid 3;
  launch cooperative;
  cta threads 32;
  global data bytes 64;
  flag f bound 8;
  if block == 0 {{ first thread {{ write data; atom.add.release.gpu f, 1; }} }}
  if block == 1 {{ first thread {{ wait.until.relaxed.gpu f >= 1; {second} }} }}
  if block == 2 {{ first thread {{ wait.until.acquire.gpu f >= 2; read data; }} }}
}}
"""


def test_a_relaxed_rmw_continues_the_release_sequence_and_a_store_ends_it():
    """PTX: the release sequence headed by a release includes later atomic RMWs of the location; a
    plain store is not one of them, so the acquirer of the stored value has no edge to CTA 0."""
    assert both(RELEASE_SEQUENCE.format(second="atom.add.relaxed.gpu f, 1;")) == set()
    assert both(RELEASE_SEQUENCE.format(second="st.relaxed.gpu f, 2;")) == {"SV301"}


def test_an_unreachable_target_names_the_flag_the_value_and_the_writers():
    text = handoff(consume="wait.until.acquire.gpu ready >= 2;", launch="cooperative")
    r = check(text)
    assert errors(r) == {"SV801"}
    (d,) = [d for d in r.diagnostics if d.code == "SV801"]
    assert "wait.until ready >= 2" in d.message and "ready is 1" in d.message
    assert "cta.w0@cta0 (line 10; has exited)" in d.message
    assert both(handoff(consume="wait.until.acquire.gpu ready >= 1;", launch="cooperative")) == set()


RESET = """\
protocol reset {{
  grid 2;
  launch cooperative;
  cta threads 32;
  flag arrived bound 4;
  flag left bound 4;
  first thread {{
    atom.add.acq_rel.gpu arrived, 1;
    wait.until.acquire.gpu arrived >= 2;
    {leave}
    if block == 0 {{ {guard} st.relaxed.gpu arrived, 0; }}
  }}
}}
"""


def test_a_reset_while_a_peer_spins_is_a_reset_race_naming_both():
    r = check(RESET.format(leave="", guard=""))
    assert errors(r) == {"SV802"}
    (d,) = [d for d in r.diagnostics if d.code == "SV802"]
    assert d.span.line == 11 and "cta.w0@cta1 spins at line 9" in d.message
    assert [rel.span.line for rel in d.related] == [9]
    fixed = RESET.format(leave="red.add.release.gpu left, 1;", guard="wait.until.acquire.gpu left >= 2;")
    assert both(fixed) == set()


def test_co_residency_follows_the_launch():
    """CTA 1 waits for CTA 0: fine when CTAs start in block order or run together, a finding when
    any CTA may run alone first; waiting for a later CTA is a finding under block order."""
    assert errors(check(handoff(launch="ordered"))) == set()
    assert errors(check(handoff(launch="cooperative"))) == set()
    assert errors(check(handoff(launch="persistent"))) == set()
    r = check(handoff().replace("launch ordered;", ""))
    assert errors(r) == {"SV803"}
    (d,) = [d for d in r.diagnostics if d.code == "SV803"]
    assert "only CTA 1 resident" in d.message and "is not resident" in d.message
    later = handoff().replace("block == 0", "block == 1")
    assert errors(check(later)) == {"SV803"}
    assert errors(check(later.replace("launch ordered;", "launch cooperative;"))) == set()


GRID_SYNC = """\
protocol gridsync {{
  grid 3;
  {launch}
  cta threads 64;
  global out[3] bytes 256;
  write out[block] part warp;
  {sync}
  read out[(block + 1) % 3];
}}
"""


def test_grid_sync_orders_every_cta_and_needs_a_cooperative_launch():
    assert both(GRID_SYNC.format(launch="launch cooperative;", sync="grid.sync;")) == set()
    assert both(GRID_SYNC.format(launch="launch cooperative;", sync="syncthreads;")) == {"SV301"}
    assert errors(check(GRID_SYNC.format(launch="launch persistent;", sync="grid.sync;"))) == {"SV804"}


def test_a_counter_past_its_bound_is_inconclusive_never_safe():
    text = """\
protocol bound {
  grid 2;
  launch cooperative;
  cta threads 32;
  flag n bound 1;
  first thread { red.add.relaxed.gpu n, 1; }
}
"""
    r = check(text)
    assert r.verdict is Verdict.INCONCLUSIVE and "outside its declared range 0..1" in r.coverage
    assert check(text.replace("bound 1", "bound 2")).verdict is Verdict.SAFE


def test_atomics_compute_their_values():
    """inc wraps at its operand, cas swaps only on a match, exch and max set: a wait on the exact
    value each should leave passes, on the value it should not leave hangs."""
    base = """\
protocol values {{
  cta threads 32;
  flag f init 3 bound 9;
  first thread {{ {ops} wait.until.acquire.gpu f == {want}; }}
}}
"""
    for ops, good, bad in [("atom.inc.relaxed.gpu f, 3;", 0, 4), ("atom.inc.relaxed.gpu f, 5;", 4, 0),
                           ("atom.cas.relaxed.gpu f, 3, 7;", 7, 3), ("atom.cas.relaxed.gpu f, 2, 7;", 3, 7),
                           ("atom.exch.relaxed.gpu f, 5;", 5, 3), ("atom.max.relaxed.gpu f, 8;", 8, 3),
                           ("atom.min.relaxed.gpu f, 1;", 1, 3), ("atom.dec.relaxed.gpu f, 9;", 2, 3)]:
        assert errors(check(base.format(ops=ops, want=good))) == set(), ops
        assert errors(check(base.format(ops=ops, want=bad))) == {"SV801"}, ops


@pytest.mark.parametrize("body, code, words", [
    ("flag f; first thread { st.gpu f, 1; }", "SV110", "needs `.relaxed` or `.release`"),
    ("flag f; first thread { wait.until.release.gpu f >= 1; }", "SV110", "does not take qualifier `.release`"),
    ("flag f; first thread { atom.add.release.gpu f, 1; red.add.acquire.gpu f, 1; }", "SV110", "does not take"),
    ("flag f; first thread { atom.relaxed.gpu f, 1; }", "SV110", "takes one operation"),
    ("flag f; first thread { wait.until.acquire.gpu f; }", "SV110", "takes a condition on a flag"),
    ("cluster 2; global g bytes 64; read g @ 1;", "SV108", "one for the whole grid"),
    ("grid 3; cluster 2;", "SV113", "not a whole number of clusters"),
    ("grid 2; cluster.arrive; cluster.wait;", "SV108", "no cluster operations yet"),
])
def test_input_errors_are_reported_at_their_line(body, code, words):
    with pytest.raises(InputError) as info:
        syncverify.load(f"protocol p {{ cta threads 32; {body} }}", path="p.sync")
    assert any(d.code == code and words in d.message for d in info.value.diagnostics), info.value.diagnostics


def test_cta_is_the_rank_in_the_cluster_and_block_the_index_in_the_grid():
    text = """\
protocol ranks {
  cluster 2;
  grid 4;
  launch cooperative;
  cta threads 32;
  flag seen[4] bound 4;
  first thread { red.add.relaxed.gpu seen[block], cta + 1; }
  first thread { wait.until.relaxed.gpu seen[block] == block % 2 + 1; }
}
"""
    assert errors(check(text)) == set()
    assert errors(check(text.replace("== block % 2 + 1", "== block + 1"))) == {"SV801"}


def test_engines_without_the_family_refuse_with_the_reason():
    proto = syncverify.load(handoff(), path="t.sync")
    r = check(handoff(), "bmc")
    assert r.verdict is Verdict.INCONCLUSIVE and "does not model global memory" in r.coverage
    with pytest.raises(ExportError, match="does not model global memory"):
        export_model(proto)
    with pytest.raises(EmitRefused, match="does not model global memory"):
        emit(proto)


def test_a_reduction_is_no_acquire_pattern_but_a_relaxed_atom_is():
    """PTX §8.8: `red.add [M], 1; fence.acquire;` is not an acquire pattern; `atom.relaxed [M];
    fence.acquire;` is."""
    text = """\
protocol red_acquire {{
  grid 2;
  launch cooperative;
  cta threads 32;
  global data bytes 64;
  flag f bound 4;
  flag g bound 4;
  if block == 0 {{ first thread {{ write data; red.add.release.gpu f, 1; red.add.relaxed.gpu g, 1; }} }}
  if block == 1 {{ first thread {{ wait.until.relaxed.gpu g >= 1; {rmw} fence.acq_rel.gpu; read data; }} }}
}}
"""  # (the spin on g orders execution only: g carries no release)
    assert both(text.format(rmw="atom.add.relaxed.gpu f, 1;")) == set()
    assert both(text.format(rmw="red.add.relaxed.gpu f, 1;")) == {"SV301"}


STORE_BUFFERING = """\
protocol store_buffering {{
  grid 2;
  launch cooperative;
  cta threads 32;
  flag x bound 1;
  flag y bound 1;
  if block == 0 {{ first thread {{ st.release.gpu x, 1; {fence} ld.acquire.gpu y; }} }}
  if block == 1 {{ first thread {{ st.release.gpu y, 1; {fence} ld.acquire.gpu x; }} }}
}}
"""


def test_store_buffering_without_consequence_is_safe():
    """Each CTA stores its flag, then reads the other's. PTX lets both reads miss the other's store
    without fence.sc; the model now produces that outcome (families/globalmem_views.py: each read may
    return any write from the thread's view on), so this litmus test, whose reads decide nothing, is safe
    in both engines, with and without fence.sc. The outcomes that matter are tested in
    tests/test_flag_views.py (an absence check after a store: both CTAs pass without fence.sc)."""
    assert check(STORE_BUFFERING.format(fence="")).verdict is Verdict.SAFE
    assert check(STORE_BUFFERING.format(fence=""), "z3").verdict is Verdict.SAFE
    assert check(STORE_BUFFERING.format(fence="fence.sc.gpu;")).verdict is Verdict.SAFE


def test_ctas_of_a_grid_whose_work_differs_are_chosen_per_cta():
    """`choose per cta` gives each CTA of the grid its own count (stream-K units): the hang is reached
    only by the assignments whose units add up to less than the target, and named by one of them."""
    text = """\
protocol per_cta {
  grid 3;
  launch cooperative;
  choose per cta UNITS in 0..2;
  cta threads 32;
  flag done bound 8;
  first thread { for u in 0..UNITS { red.add.release.gpu done, 1; } }
  if block == 0 { first thread { wait.until.acquire.gpu done >= 2; } }
}
"""
    r = check(text)
    assert errors(r) == {"SV801"} and "(8)" in r.bound
    (d,) = [d for d in r.diagnostics if d.code == "SV801"]
    assert "UNITS@cta0=0, UNITS@cta1=0, UNITS@cta2=0" in d.message
    assert errors(check(text.replace("done >= 2", "done >= 0"))) == set()
