"""Symmetry with a renaming of what processes touch (semantics/symmetry_perm.py).

What is asserted, each of which could be false:
* on two TMA pipelines exchanged whole, the automorphism is found with the renaming the source
  implies (tile[0]<->tile[1], full/empty[0]<->[1], named barrier 1<->2) and fewer states are stored;
* the near twin whose consumer[1] reads tile[0] gets no automorphism (every candidate rejected);
* the automorphism commutes with the unreduced successor relation on every reachable state
  (the image of each successor is a successor of the image, violations included);
* the permuted and the plain search agree on the verdict and on every finding (code, line), and
  every counterexample the permuted search reports replays on the unreduced machine;
* the same agreement on the specs where an automorphism is verified, with every proved
  automorphism in use (all of specs/ and bench/families with SYNCVERIFY_SLOW=1);
* the search uses the permuted form only where it adds to the plain swaps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syncverify.engines import witness
from syncverify.engines.explicit import Budget, search
from syncverify.lang import load
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry import Symmetry
from syncverify.semantics.symmetry_perm import PermutedSymmetry, _Mapper, automorphisms, symmetry_for

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "symmetry"
SLOW = os.environ.get("SYNCVERIFY_SLOW") == "1"
BUDGET = Budget(200_000, 600.0)


def _machine(path: Path) -> Machine:
    return Machine(load(str(path), {}))


def _run(path: Path, permuted: bool) -> tuple[Machine, object, object]:
    machine = _machine(path)
    sym = symmetry_for(machine, permuted=permuted)
    return machine, sym, search(machine, BUDGET, sym)


def _findings(machine: Machine, sym, outcome) -> set[tuple[str, int]]:
    out = set()
    for v, labels in outcome.errors:
        d = witness.diagnostic(machine, v, labels, True, sym)
        out.add((d.code, d.span.line if d.span else 0))
    return out


def test_two_pipelines_automorphism_renames_slots_barriers_and_ids():
    machine = _machine(DATA / "two_pipelines.sync")
    autos, _ = automorphisms(machine)
    assert len(autos) == 1
    g = autos[0]
    label = {p.index: p.label() for p in machine.procs}
    assert {(label[a], label[b]) for a, b in g.procs} >= {("producer[0].w2", "producer[1].w3"),
                                                          ("consumer[0].w4", "consumer[1].w8")}
    buf = machine.buf_index["tile"]
    assert dict(g.slots) == {(buf, 0): (buf, 1), (buf, 1): (buf, 0)}
    names = {m: machine.mb_label(m) for m in range(len(machine.mb_names))}
    assert {(names[a], names[b]) for a, b in g.mbars} == {("full[0]", "full[1]"), ("full[1]", "full[0]"),
                                                           ("empty[0]", "empty[1]"), ("empty[1]", "empty[0]")}
    assert dict(g.named) == {1: 2, 2: 1}  # bar.sync 1 + instance


def test_two_pipelines_fewer_states_same_verdict():
    _, _, plain = _run(DATA / "two_pipelines.sync", permuted=False)
    _, sym, perm = _run(DATA / "two_pipelines.sync", permuted=True)
    assert isinstance(sym, PermutedSymmetry)
    assert plain.complete and perm.complete and not plain.errors and not perm.errors
    assert perm.states < plain.states


def test_plain_swaps_are_not_repeated():
    """cutlass_ws_ring's two consumer warpgroups are an automorphism, but every warp of them is in
    one group of plain swaps already: the search keeps the plain symmetry (no image per state)."""
    machine = _machine(ROOT / "specs" / "cutlass_ws_ring.sync")
    assert automorphisms(machine)[0]
    assert type(symmetry_for(machine)) is Symmetry


def test_near_twin_gets_no_permutation():
    machine = _machine(DATA / "two_pipelines_skew.sync")
    autos, rejected = automorphisms(machine)
    assert autos == [] and rejected
    assert type(symmetry_for(machine)) is Symmetry
    # its twin with every consumer reading its own tile does get one (the test above): the one
    # slot index is what decides


@pytest.mark.parametrize("name", ["two_pipelines.sync", "two_pipelines_no_wait.sync"])
def test_automorphism_commutes_with_every_step(name):
    machine = _machine(DATA / name)
    (g,), _ = automorphisms(machine)
    mapper = _Mapper(g, machine)
    cta = [p.cta for p in machine.procs]
    warp = [p.warp for p in machine.procs]

    def image(s):
        return mapper.state(s, cta, warp)

    def succ(s):
        out = set()
        for res in machine.successors(s):
            out.add((res.state, res.violation.code if res.violation else ""))
        return out

    seen = {machine.initial()}
    queue = [machine.initial()]
    while queue and len(seen) < 3000:
        s = queue.pop()
        here = succ(s)
        there = succ(image(s))
        assert {(None if t is None else image(t), code) for t, code in here} == there
        for t, _ in here:
            if t is not None and t not in seen:
                seen.add(t)
                queue.append(t)
    assert len(seen) > 100


def _agree(path: Path, forced: bool = False) -> None:
    """Plain and permuted searches agree. ``forced``: with every proved automorphism, also those
    symmetry_for leaves out because a plain swap already covers them (so that specs exercise the
    renaming machinery: images, composition with the plain swaps, the mapping of traces)."""
    m0, s0, plain = _run(path, permuted=False)
    m1 = _machine(path)
    s1 = PermutedSymmetry(m1, automorphisms(m1)[0]) if forced else symmetry_for(m1)
    assert isinstance(s1, PermutedSymmetry)
    perm = search(m1, BUDGET, s1)
    assert plain.complete == perm.complete
    assert _findings(m0, s0, plain) == _findings(m1, s1, perm)
    if plain.complete:
        assert perm.states <= plain.states
    # every counterexample the permuted search reports replays on the unreduced machine
    for v, labels in perm.errors:
        real = witness.real_path(m1, labels, s1)
        assert witness.final_finding(m1, real, v) is not None, (path.name, v.code)


def test_symmetric_race_agrees_and_replays():
    _agree(DATA / "two_pipelines_no_wait.sync")


@pytest.mark.parametrize("name", ["cutlass_ws_ring.sync", "cutlass_ws_ring_per_warp_release.sync",
                                  "lane_last_release_no_syncwarp.sync"])
def test_specs_with_an_automorphism_agree(name):
    path = ROOT / "specs" / name
    assert automorphisms(_machine(path))[0], name  # (else this test compares nothing)
    _agree(path, forced=True)


@pytest.mark.skipif(not SLOW, reason="every spec and family: SYNCVERIFY_SLOW=1")
def test_every_spec_and_family_agrees():
    paths = sorted((ROOT / "specs").glob("*.sync")) + sorted((ROOT / "bench" / "families").glob("*.sync"))
    for path in paths:
        try:
            machine = _machine(path)
        except Exception:  # input errors and params the check supplies: not this test's
            continue
        if automorphisms(machine)[0]:
            _agree(path, forced=True)


def test_exhaustive_programs_with_an_automorphism_agree():
    """The small generated programs (tests/exhaustive_programs.py) whose warps of different roles
    are images of each other: the permuted and the plain search agree on each (the full
    reduced-against-unreduced pass, tests/test_exhaustive.py, runs them through the same search)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from exhaustive_programs import SCOPES, sample

    used = 0
    for scope in ("cta3", "pairs2"):
        for _, text in sample(SCOPES[scope], 300):
            machine = Machine(load(text, None, path="x.sync"))
            sym = symmetry_for(machine)
            if not isinstance(sym, PermutedSymmetry):
                continue
            used += 1
            m0 = Machine(load(text, None, path="x.sync"))
            s0 = symmetry_for(m0, permuted=False)
            plain, perm = search(m0, BUDGET, s0), search(machine, BUDGET, sym)
            assert plain.complete and perm.complete and perm.states <= plain.states
            assert _findings(m0, s0, plain) == _findings(machine, sym, perm), text
            for v, labels in perm.errors:
                assert witness.final_finding(machine, witness.real_path(machine, labels, sym), v) is not None
    assert used >= 3
