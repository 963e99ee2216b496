"""The `.cta`-scope SV602 rule, one definition for every engine (#35).

A write a waiter would learn through a `.cta`-scope remote release alone (some thread that may access
its slot does not know it yet: semantics/families/scopes.py, `slot_accessors`, `accessor_holders`) is
not learnt: the release and the acquire are not morally strong. An access that only that edge would
order after the write is the SV602 error (docs/model.md, "Scopes across CTAs"). The explicit engine
keeps the write out of the waiter's bits and names such an access by the write's shadow; the bmc engine
keeps it out of its Z3 bit-vectors (the race its solver finds is named SV602 by the machine's replay);
the Promela export still asserts at the wait, from its C tables (it reports more). Each asks the same
function which holders must know. The near twins below differ in a statement or two: CTA 0 reading
CTA 1's buffer through DSMEM after its wait is the error; a write by one lane leaves the writer's other
lanes not knowing it, which is the error only once they read it through the edge (the stage handed
back at cluster scope); without a reader it is the warning.

The DeepGEMM specs themselves take Z3 minutes (tests/test_bmc.py, SYNCVERIFY_SLOW) and SPIN past its
budget on the safe one (tests/test_promela.py, TOO_BIG); here the same rule on small protocols, and with
SYNCVERIFY_SLOW=1 the two specs shrunk to one math warp per CTA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from diff_engines import engines, spin_fast

from syncverify import load
from syncverify.semantics.families.scopes import accessor_holders, slot_accessors
from syncverify.semantics.machine import Machine

SPECS = Path(__file__).resolve().parent.parent / "specs"
ENGINES = {e.name: e for e in engines()}

# CTA 1's warp writes its own copy of buf and releases CTA 0's barrier at the default .cta scope;
# CTA 0's warp waits on it. Nobody outside CTA 1 touches CTA 1's buf and every lane of CTA 1's warp
# knows the write: the release carries nothing a reader needs (safe, with the reuse warning).
SETTLED = """\
protocol settled {
  cluster 2;
  cta threads 32;
  smem buf bytes 64;
  mbarrier m count 1;
  elect { init m; fence.mbarrier_init; }
  cluster.sync;
  if cta == 1 { write buf; syncwarp; elect { arrive m @ 0; } }
  if cta == 0 { elect { wait m parity 0; } }
  cluster.sync;
}
"""
# the near twin: CTA 0's warp reads CTA 1's buf after its wait (only the unpaired .cta release orders it)
READ_REMOTELY = SETTLED.replace("protocol settled", "protocol read_remotely").replace(
    "elect { wait m parity 0; }", "elect { wait m parity 0; read buf @ 1; }")
# the twin in which one lane writes: the warp's other lanes may access buf and do not know the write
# (the other-lanes holder of accessor_holders), so CTA 0's waiter learns it through the .cta edge alone;
# but no access needs that edge (nobody reads buf after it): the warning
ONE_LANE = SETTLED.replace("protocol settled", "protocol one_lane").replace(
    "{ write buf; syncwarp; elect { arrive m @ 0; } }", "{ elect { write buf; arrive m @ 0; } }")
# ... and its twin in which CTA 0's waiter hands the stage back at cluster scope and CTA 1's whole warp
# then reads buf: its other lanes are ordered after the one lane's write only through the .cta edge
RETURNED = ONE_LANE.replace("protocol one_lane", "protocol returned").replace(
    "  mbarrier m count 1;\n", "  mbarrier m count 1;\n  mbarrier back count 1;\n").replace(
    "elect { init m; fence.mbarrier_init; }", "elect { init m; init back; fence.mbarrier_init; }").replace(
    "{ elect { write buf; arrive m @ 0; } }",
    "{ elect { write buf; arrive m @ 0; } wait back parity 0; read buf; }").replace(
    "elect { wait m parity 0; }", "elect { wait m parity 0; arrive.release.cluster back @ 1; }")
# the twin with the release at cluster scope: nothing for SV602 to say
CLUSTER_SCOPE = READ_REMOTELY.replace("protocol read_remotely", "protocol cluster_scope").replace(
    "arrive m @ 0", "arrive.release.cluster m @ 0")

EXPECTED = {"settled": ("safe", set()), "read_remotely": ("violation", {"SV602"}),
            "one_lane": ("safe", set()), "returned": ("violation", {"SV602"}), "cluster_scope": ("safe", set())}
CASES = [SETTLED, READ_REMOTELY, ONE_LANE, RETURNED, CLUSTER_SCOPE]


def _protocol(text: str):
    return load(text, path=f"{text.split()[1]}.sync")


def test_the_accessors_are_who_names_the_slot():
    """CTA 1's copy of buf: only CTA 1's warp names it in SETTLED (CTA 0 has no access); in the twin
    CTA 0's warp reads it remotely and joins. Both holders of a 32-thread warp must know."""
    for text, ctas in ((SETTLED, {1}), (READ_REMOTELY, {0, 1})):
        machine = Machine(_protocol(text))
        buf = next(i for i, b in enumerate(machine.protocol.buffers) if b.name == "buf")
        procs = slot_accessors(machine, 1, buf)
        assert sorted(machine.procs[p].cta for p in procs) == sorted(ctas)
        assert accessor_holders(machine, 1, buf) == tuple((p, part) for p in procs for part in (0, 1))


@pytest.mark.parametrize("text", CASES, ids=list(EXPECTED))
def test_explicit_and_bmc_share_the_rule(text):
    protocol = _protocol(text)
    verdict, codes = EXPECTED[protocol.name]
    ref = ENGINES["explicit"].run(protocol, 20_000, 20.0)
    assert (ref.verdict, set(ref.codes)) == (verdict, codes), ref
    if protocol.name == "settled":  # the model's warning: the release only guards reuse here
        from syncverify import Options, check_protocol

        warned = {d.code for d in check_protocol(protocol, Options(engine="explicit")).diagnostics}
        assert warned == {"SV602"}
    bmc = ENGINES["bmc"].run(protocol, 20_000, 120.0)
    assert (bmc.verdict, set(bmc.codes)) == (verdict, codes), bmc


@pytest.mark.skipif(ENGINES["spin"].unavailable is not None, reason="needs spin and a C compiler")
@pytest.mark.parametrize("text", [SETTLED, READ_REMOTELY], ids=["settled", "read_remotely"])
def test_the_promela_export_shares_the_rule(text):
    protocol = _protocol(text)
    verdict, codes = EXPECTED[protocol.name]
    spin = spin_fast(protocol, 100_000, 60.0)
    assert (spin.verdict, set(spin.codes)) == (verdict, codes), spin


def shrunk(name: str) -> str:
    """A DeepGEMM spec with one math warp per CTA instead of a warpgroup (its wgmma reads as plain reads,
    which need no warpgroup): the same release of the same write of the scales, in fewer interleavings."""
    text = (SPECS / f"{name}.sync").read_text()
    for a, b in (("cta threads 160;", "cta threads 64;"), ("role math     = warpgroup 0;", "role math     = warp 0;"),
                 ("role producer = warp 4;", "role producer = warp 1;"), ("count MC * 128 / 32;", "count MC;"),
                 ("bar.sync 1, 128;", "bar.sync 1, 32;"), ("wgmma.read tile[2 * s];", "read tile[2 * s];"),
                 ("wgmma.read tile[2 * s + 1];", "read tile[2 * s + 1];"), ("      wgmma.commit;\n", ""),
                 ("      wgmma.wait 0;\n", "")):
        assert a in text, a
        text = text.replace(a, b)
    return text


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"), reason="minutes of Z3; SYNCVERIFY_SLOW=1")
@pytest.mark.parametrize("name, verdict", [("deepgemm_sm90_cta_release_scales", "safe"),
                                           ("deepgemm_sm90_cta_release_scales_read_remotely", "violation")])
def test_the_deepgemm_specs_shrunk_agree_on_every_engine(name, verdict):
    protocol = load(shrunk(name), {"STAGES": 1, "ITERS": 1}, path=f"{name}.sync")
    for engine in ("explicit", "bmc", "spin"):
        if ENGINES[engine].unavailable:
            continue
        got = (spin_fast if engine == "spin" else ENGINES[engine].run)(protocol, 200_000, 600.0)
        assert got.verdict == verdict, (engine, got)
        assert ("SV602" in got.codes) == (verdict == "violation"), (engine, got)
