"""A consumer's release of a stage to the peer CTA's producer (a remote arrive) taken alone
without a cluster barrier at the end of the kernel, as CUTLASS issues it: `.cta` scope (an
SV602 warning: it only guards reuse) and the peer kept alive by its producer's wait for the
release (Reduction._peer_cannot_end_first, element.reuse_warnings_only). Each search is
compared with the unreduced one: the same verdict, error codes and warning codes; the twins
without the producer's final wait let the peer exit first (SV404)."""

from __future__ import annotations

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import Reduction
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=60_000, seconds=120)

# CUTLASS's shape at one k-tile, without a cluster barrier at the end: each CTA's consumer
# releases the stage to both producers with a `.cta`-scope arrive; TAIL is the producer's
# load_tail (it waits for both releases before it ends).
_RING = """
protocol release {{
  cluster 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem a bytes 32;
  smem b[2] bytes 16;
  mbarrier full count 1;
  mbarrier empty count 2;
  if producer {{ elect {{ init full; init empty; fence.mbarrier_init; }} }}
  cluster.sync;
  if producer {{
    wait.acquire.cluster empty parity 1;
    elect {{
      arrive.expect_tx full bytes 64;
      tma.load a bytes 32 -> full;
      tma.load b[cta] bytes 16 -> full multicast 0b11;
    }}
    {tail}
  }}
  if consumer {{
    wait.acquire.cluster full parity 0;
    read a; read b[0]; read b[1];
    syncwarp;
    elect {{ for r in 0..2 {{ arrive empty @ r; }} }}
  }}
}}
"""
# the releases alone, no copies
_RELEASES = """
protocol release {{
  cluster 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem x bytes 16;
  mbarrier empty count 2;
  if producer {{ elect {{ init empty; fence.mbarrier_init; }} }}
  cluster.sync;
  if consumer {{ read x; elect {{ for r in 0..2 {{ arrive empty @ r; }} }} }}
  if producer {{ {tail} }}
}}
"""
TAIL = "wait empty parity 0;"
CASES = {
    "ring": (_RING.format(tail=TAIL), Verdict.SAFE),
    "ring_without_tail": (_RING.format(tail=""), Verdict.VIOLATION),
    "releases": (_RELEASES.format(tail=TAIL), Verdict.SAFE),
    "releases_without_tail": (_RELEASES.format(tail=""), Verdict.VIOLATION),
}


def _findings(result: CheckResult) -> tuple[set[str], set[str]]:
    return ({d.code for d in result.diagnostics if d.is_error}, {d.code for d in result.diagnostics if not d.is_error})


@pytest.mark.parametrize("name", CASES)
def test_remote_releases_against_the_unreduced_search(name, monkeypatch):
    text, verdict = CASES[name]
    protocol = load(text, path="t.sync")
    alive = []  # where the walk showed the peer alive and the cluster-barrier condition did not
    walk = Reduction._peer_cannot_end_first

    def counted(self, state, p, cta):  # type: ignore[no-untyped-def]
        out = walk(self, state, p, cta)
        alive.append(out)
        return out

    monkeypatch.setattr(Reduction, "_peer_cannot_end_first", counted)
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert full.verdict == verdict, full.diagnostics
    assert reduced.verdict == verdict, reduced.diagnostics
    assert _findings(reduced) == _findings(full), (reduced.diagnostics, full.diagnostics)
    assert "SV602" in _findings(full)[1]  # the `.cta`-scope releases only guard reuse
    assert reduced.stats.states <= full.stats.states
    if name == "ring":
        assert any(alive), "the walk should show the peer alive at some release"
    if name.endswith("without_tail"):
        assert "SV404" in _findings(full)[0]
