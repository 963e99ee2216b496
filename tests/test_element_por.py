"""The reduction's "what can still come" sets are kept per barrier element, not per array name.

`syncverify extract` declares all of a kernel's mbarriers as one array (`mbarrier mb0[30]`), as
the PTX does: full barriers, empty barriers and order barriers are elements of it. A consumer's
release (a plain arrive on an empty barrier) may be taken alone only when no other process can
still count bytes on that barrier (Reduction._no_bytes_ahead); asked by array name, every
release conflicted with the producer's copies onto the full barriers of the same array, and the
2x1 ping-pong GEMM did not finish in 3.1 million states. Asked per element (reduction.ref_element,
an index evaluated in the process's context; one that reads a variable stands for the whole
array), it is decided in 169,151.

Each protocol below is the unrolled two-stage ring of an extracted kernel, one array for all
barriers; each search is compared with the unreduced one (verdict, error codes, warning codes)."""

from __future__ import annotations

import pytest

from syncverify import ir, load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import Reduction
from syncverify.expr import Context
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.footprint import ref_element, touches
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=200_000, seconds=300)

# mb[0], mb[1]: full barriers (the producer's arrive.expect_tx and its copy's bytes);
# mb[2], mb[3]: empty barriers (the consumer's release). Three k-tiles over two stages.
_RING = """
protocol one_array {{
  cta threads 96;
  role producer = warp 0;
  role consumer = warp 1;
  role bystander = warp 2;
  smem buf[2] bytes 64;
  smem other bytes 16;
  mbarrier mb[4];
  if producer {{
    elect {{
      init mb[0] count 1; init mb[1] count 1; init mb[2] count 1; init mb[3] count 1;
      fence.mbarrier_init;
    }}
  }}
  syncthreads;
  if producer {{
    elect {{
      wait mb[2] parity 1;
      arrive.expect_tx mb[0] bytes 64;
      tma.load buf[0] bytes 64 -> mb[0];
      wait mb[3] parity 1;
      arrive.expect_tx mb[1] bytes 64;
      tma.load buf[1] bytes 64 -> mb[1];
      wait mb[2] parity 0;
      arrive.expect_tx mb[0] bytes 64;
      tma.load buf[0] bytes 64 -> mb[0];
      wait mb[3] parity 0;
    }}
  }}
  if consumer {{
    wait mb[0] parity 0;
    {first}
    wait mb[1] parity 0;
    read buf[1];
    syncwarp;
    elect {{ arrive mb[3]; }}
    wait mb[0] parity 1;
    read buf[0];
  }}
  if bystander {{
    write other;
    read other;
    write other;
  }}
}}
"""
_RELEASE_AFTER_READ = "read buf[0];\n    syncwarp;\n    elect { arrive mb[2]; }"
_RELEASE_BEFORE_READ = "elect { arrive mb[2]; }\n    read buf[0];"  # the refill may overwrite buf[0] first

# the consumer's releases indexed by a loop variable: the sets fall back to the whole array
_LOOPED = """
protocol looped {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf[2] bytes 64;
  mbarrier mb[4];
  if producer { elect { for i in 0..4 { init mb[i] count 1; } fence.mbarrier_init; } }
  syncthreads;
  if producer {
    elect {
      for k in 0..3 {
        wait mb[2 + k % 2] parity (k / 2 + 1) % 2;
        arrive.expect_tx mb[k % 2] bytes 64;
        tma.load buf[k % 2] bytes 64 -> mb[k % 2];
      }
    }
  }
  if consumer {
    for k in 0..3 {
      wait mb[k % 2] parity (k / 2) % 2;
      read buf[k % 2];
      syncwarp;
      elect { arrive mb[2 + k % 2]; }
    }
  }
}
"""

CASES = {
    "ring": (_RING.format(first=_RELEASE_AFTER_READ), Verdict.SAFE),
    "ring_release_before_read": (_RING.format(first=_RELEASE_BEFORE_READ), Verdict.VIOLATION),
    "looped": (_LOOPED, Verdict.SAFE),
}


def _findings(result: CheckResult) -> tuple[set[str], set[str]]:
    return ({d.code for d in result.diagnostics if d.is_error}, {d.code for d in result.diagnostics if not d.is_error})


@pytest.mark.parametrize("name", CASES)
def test_one_barrier_array_against_the_unreduced_search(name):  # type: ignore[no-untyped-def]
    text, verdict = CASES[name]
    protocol = load(text, path="t.sync")
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert full.verdict == verdict, full.diagnostics
    assert reduced.verdict == verdict, reduced.diagnostics
    assert _findings(reduced) == _findings(full), (reduced.diagnostics, full.diagnostics)
    assert reduced.stats.states <= full.stats.states
    if name == "ring_release_before_read":
        assert {"SV302", "SV303"} & _findings(full)[0]


def test_a_release_is_taken_alone_while_bytes_are_ahead_on_another_element(monkeypatch):  # type: ignore[no-untyped-def]
    """The consumer's release of mb[2] while the producer's later copies onto mb[0] and mb[1] are
    still ahead: per element nothing can count bytes on mb[2], so the release is taken alone."""
    protocol = load(_RING.format(first=_RELEASE_AFTER_READ), path="t.sync")
    machine = Machine(protocol)
    seen: list[tuple[str, int | None, bool]] = []
    ask = Reduction._no_bytes_ahead

    def recorded(self, state, p, cta, bar):  # type: ignore[no-untyped-def]
        out = ask(self, state, p, cta, bar)
        m = self.machine.arrive_target(state, p, cta)
        seen.append((self.machine.mb_names[m][1], self.machine.mb_names[m][2], out))
        return out

    monkeypatch.setattr(Reduction, "_no_bytes_ahead", recorded)
    explore(protocol, BUDGET, machine, symmetry=True)
    assert ("mb", 2, True) in seen  # the release of stage 0, with the copies to mb[0] and mb[1] ahead


def test_elements_of_references():  # type: ignore[no-untyped-def]
    protocol = load(_LOOPED, path="t.sync")
    machine = Machine(protocol)
    ctx = Context(0, 0, frozenset())
    consumer = next(p for p in machine.procs if p.role == "consumer").index
    ahead = Reduction(machine).waits_ahead[consumer][0]
    assert ahead == frozenset({("mb", 0), ("mb", 1)})  # `mb[k % 2]` for k in 0..3 (loop_envs.py)
    assert touches(ahead, "mb", 1) and not touches(ahead, "mb", 3) and not touches(ahead, "other", 0)
    ring = Machine(load(_RING.format(first=_RELEASE_AFTER_READ), path="t.sync"))
    producer = next(p for p in ring.procs if p.role == "producer").index
    tx = Reduction(ring).tx_ahead[producer][0]
    assert tx == frozenset({("mb", 0), ("mb", 1)})
    assert touches(tx, "mb", 1) and not touches(tx, "mb", 2) and touches(tx, "mb", None)
    wait = next(ins.op for ins in machine.programs[consumer].code if isinstance(ins.op, ir.MbarWait))
    assert ref_element(wait.bar, {}, ctx) == ("mb", None)  # `mb[k % 2]` without k
    assert ref_element(wait.bar, {"k": 3}, ctx) == ("mb", 1)
