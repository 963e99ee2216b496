"""The SV602 error is decided at the access that would need the `.cta`-scope cross-CTA edge (#36).

A `.release.cta` remote arrive and the peer's acquire are not morally strong (PTX ISA §8.7), so the
edge between them orders no data. The explicit machine keeps what a waiter learns only through such
an edge out of its knowledge and in the write's shadow (state.SHADOW); an access that conflicts with
the write and is ordered after it only through the shadow is the SV602 error at the arrive
(families/scopes.py `_learn_unpaired`, `_unpaired_race`; docs/model.md, "Scopes across CTAs").

The pattern is the CuTe DSL 2-CTA blockscaled GEMM's (bench/families/cute_dsl_2cta_blockscaled_gemm.sync):
CTA 1's scale warp copies the scale factors with cp.async, its accumulator warps read them after their
own CTA's barrier and release the accumulator stage to CTA 0's MMA warp with a `.cta`-scope remote arrive,
which carries the copy along; CTA 0 never touches CTA 1's scales. The rule made at the wait (an error
when some thread that may access the slot does not know the write yet: here CTA 1's scale warp, which
never observes its own copies complete) called it the error; it is the warning. Its twins, in which
CTA 0 then reads or writes CTA 1's scales through DSMEM (directly, or a warp that learns from the MMA
warp), stay the error.
"""

from __future__ import annotations

import os

import pytest
from diff_engines import engines

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import Severity
from syncverify.result import Verdict
from syncverify.semantics.families.scopes import ScopeOps
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import R_KIND, SHADOW

RELAY = """\
protocol cute_dsl_scale_relay {
  cluster 2;
  cta threads 128;
  role scale   = warp 0;
  role accu[2] = warp 1 + i;
  role mma     = warp 3;
  smem sf bytes 512;
  mbarrier sfull count 32;
  mbarrier acc_empty count 4;
  mbarrier done count 1;

  if scale { elect { init sfull; init acc_empty; init done; } }
  fence.mbarrier_init;
  cluster.sync;
  if scale {
    cp.async sf;
    cp.async.mbarrier.arrive.noinc sfull;
  }
  if accu {
    wait sfull parity 0;
    read sf;
    syncwarp;
    elect { arrive acc_empty @ 0; }
  }
  if mma && cta == 0 {
    wait acc_empty parity 0;
  }
  cluster.sync;
}
"""
ENGINES = {e.name: e for e in engines()}

# CTA 0's MMA warp reads CTA 1's scales after its wait: only the .cta-scope arrive orders the read
READ = RELAY.replace("    wait acc_empty parity 0;\n", "    wait acc_empty parity 0;\n    read sf @ 1;\n")
# ... or overwrites them
WRITE = RELAY.replace("    wait acc_empty parity 0;\n", "    wait acc_empty parity 0;\n    write sf @ 1;\n")
# a warp of CTA 0 that learns from the MMA warp (a local barrier) reads them: the edge is on its path too
RELAYED = RELAY.replace("    wait acc_empty parity 0;\n",
                        "    wait acc_empty parity 0;\n    elect { arrive done; }\n").replace(
    "    elect { arrive acc_empty @ 0; }\n",
    "    elect { arrive acc_empty @ 0; }\n    if cta == 0 && instance == 0 { wait done parity 0; read sf @ 1; }\n")
# the fix the DSL's own comment names: the arrive at cluster scope orders the remote read
CLUSTER = READ.replace("arrive acc_empty @ 0", "arrive.release.cluster acc_empty @ 0").replace(
    "wait acc_empty parity 0", "wait.acquire.cluster acc_empty parity 0")


def _check(text: str):  # type: ignore[no-untyped-def]
    return check_protocol(load(text, path="relay.sync"), Options(engine="explicit", timeout=60))


def _line(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def _shadowed_somewhere(text: str) -> bool:
    """Does some reachable state hold a shadow: a wait at which the waiting lanes learnt, through a
    `.cta`-scope remote release alone, a write made in the other CTA that some thread which may
    access its slot did not know yet — the condition under which the rule made at the wait
    reported the error?"""
    machine = Machine(load(text, path="relay.sync"))
    seen, todo = set(), [machine.initial()]
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        if any(r[R_KIND] == SHADOW for r in state.records):
            return True
        todo += [res.state for res in machine.successors(state) if res.state is not None]
    return False


def test_the_cute_dsl_relay_is_the_warning():
    res = _check(RELAY)
    assert res.verdict is Verdict.SAFE, [d.message for d in res.diagnostics if d.is_error]
    arrive = _line(RELAY, "arrive acc_empty @ 0")
    assert any(d.code == "SV602" and d.severity is Severity.WARNING and d.span.line == arrive
               for d in res.diagnostics)
    # the rule at the wait fired here: the MMA warp learns CTA 1's copy through the .cta edge alone
    # while CTA 1's other accumulator warp does not know it yet
    assert _shadowed_somewhere(RELAY)


@pytest.mark.parametrize("text, access", [(READ, "read sf @ 1"), (WRITE, "write sf @ 1"),
                                          (RELAYED, "read sf @ 1")], ids=["read", "write", "relayed"])
def test_an_access_that_needs_the_edge_is_the_error_at_the_arrive(text, access):
    res = _check(text)
    errors = [d for d in res.diagnostics if d.is_error]
    assert res.verdict is Verdict.VIOLATION and {d.code for d in errors} == {"SV602"}, errors
    assert {d.span.line for d in errors} == {_line(text, "arrive acc_empty @ 0")}
    assert _line(text, access) in {r.span.line for r in errors[0].related}


def test_without_taking_the_knowledge_back_the_remote_read_would_pass(monkeypatch):
    """The rule's key step: the waiter does not keep what it learnt through the unpaired edge.
    Left out, the remote read is ordered by the `.cta` edge and the twin is called safe."""
    monkeypatch.setattr(ScopeOps, "_learn_unpaired", lambda *args: None)
    assert _check(READ).verdict is Verdict.SAFE


def test_a_cluster_scope_handoff_is_safe_and_silent():
    res = _check(CLUSTER)
    assert res.verdict is Verdict.SAFE and not any(d.code == "SV602" for d in res.diagnostics)


def _plain(text: str) -> str:
    """The relay for the bmc engine, which does not encode cp.async.mbarrier.arrive: one lane of the
    scale warp writes the scales with a plain store (its other lanes, which may access them, do not
    know the write: the rule at the wait fires), and one accumulator warp per CTA (Z3 time)."""
    for a, b in (("    cp.async sf;\n    cp.async.mbarrier.arrive.noinc sfull;\n",
                  "    elect { write sf; arrive sfull; }\n"), ("mbarrier sfull count 32;", "mbarrier sfull count 1;"),
                 ("cta threads 128;", "cta threads 96;"), ("role accu[2] = warp 1 + i;", "role accu[1] = warp 1 + i;"),
                 ("role mma     = warp 3;", "role mma     = warp 2;"),
                 ("mbarrier acc_empty count 4;", "mbarrier acc_empty count 2;")):
        assert a in text, a
        text = text.replace(a, b)
    return text


def test_the_plain_relay_is_one_the_rule_at_the_wait_called_the_error():
    assert _shadowed_somewhere(_plain(RELAY))


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="8-15 s of Z3 each; SYNCVERIFY_SLOW=1")
@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
@pytest.mark.parametrize("text, verdict", [(RELAY, "safe"), (READ, "violation"), (WRITE, "violation"),
                                           (RELAYED, "violation"), (CLUSTER, "safe")],
                         ids=["relay", "read", "write", "relayed", "cluster"])
def test_the_bmc_engine_withholds_the_same_writes(text, verdict):
    """bmc keeps the writes out of the waiter's bit-vectors (ScopeEncoding.unpaired_data); the race
    its solver then finds is replayed by the machine, which names it SV602."""
    protocol = load(_plain(text), path="plain.sync")
    ref = ENGINES["explicit"].run(protocol, 50_000, 60.0)
    bmc = ENGINES["bmc"].run(protocol, 50_000, 300.0)
    assert ref.verdict == bmc.verdict == verdict, (ref, bmc)
    assert set(ref.codes) == set(bmc.codes) == (set() if verdict == "safe" else {"SV602"}), (ref, bmc)
