"""Symmetry over CTAs that run the same program (semantics/symmetry_cta.py), on by default.

What is asserted, each of which could be false:
* on a grid of 4 CTAs whose CTAs 1..3 run one program (a software grid barrier), the exchanges of
  CTAs 1, 2 and 3 are proved, the renaming of the global output tiles is the one the source implies
  (out[a] <-> out[b]), and the search stores fewer states than with the plain swaps alone, with the
  same verdict;
* every proved exchange commutes with the unreduced successor relation on the reachable states
  (the image of each successor is a successor of the image, with the same violation at the same line),
  on the grid barrier, its racy twin, grid.sync, the race in one CTA and per-CTA TMA pipelines;
* a race in one CTA of 4 (CTAs 0..2 interchangeable, CTA 3 not) is reported at its line with a
  counterexample that replays on the unreduced machine; its fixed twin is safe;
* the near twin whose CTA 2 differs in one instruction gets no exchange of CTA 2 (and with 3 CTAs no
  CTA symmetry at all);
* with and without CTA symmetry (and unreduced), the same verdict and findings (code, line) on each of
  these, with the counterexamples replaying;
* the parallel search stores the same states;
* the generated cluster programs of tests/exhaustive_programs.py with both CTAs running one body agree
  with the plain and the unreduced search;
* the default search (engines/explicit.explore) uses it and says so in the coverage of an unfinished
  search;
* operations that name another CTA are renamed: two CTAs that reach each other by `@ cta ^ 1` (DSMEM,
  remote arrive.expect_tx and arrive, a multicast to the peer) are exchanged, and so are the followers
  of a 4-CTA cluster that read their leader's (rank 0) shared memory and arrive on its barrier; the
  exchange commutes with every step, the race in one follower is reported at its line and replays;
  a near twin whose rank or mask is not the image under the exchange (an absolute rank, lane r to
  rank r, a run-time rank, a mask whose destinations the exchange reorders) gets no exchange of
  those CTAs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from syncverify.engines import witness
from syncverify.engines.explicit import Budget, explore, search
from syncverify.engines.reduction import cta_local, init_alone
from syncverify.lang import load
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry_cta import CtaMapper, CtaSymmetry, cta_classes, cta_symmetry
from syncverify.semantics.symmetry_perm import symmetry_for

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "symmetry_cta"
BUDGET = Budget(200_000, 600.0)
SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="the finer sample of generated cluster programs takes about 8 s; run with "
                                 "SYNCVERIFY_SLOW=1 (a coarser one runs in CI)")


def _machine(path: Path, params: dict[str, int] | None = None) -> Machine:
    return Machine(load(str(path), params or {}))


def _findings(machine: Machine, sym, outcome) -> set[tuple[str, int]]:
    out = set()
    for v, labels in outcome.errors:
        d = witness.diagnostic(machine, v, labels, True, sym)
        out.add((d.code, d.span.line if d.span else 0))
    return out


def _classes(machine: Machine) -> list[list[int]]:
    return [sorted(members) for members, _ in cta_classes(machine)[0]]


def test_grid_barrier_exchanges_ctas_and_their_tiles():
    machine = _machine(DATA / "grid_barrier_4cta.sync")
    classes, rejected = cta_classes(machine)
    assert [sorted(m) for m, _ in classes] == [[1, 2, 3]], rejected
    (_, star), = classes
    out = machine.buf_index["out"]
    g = star[2]  # CTA 1 <-> CTA 2
    assert dict(g.ctas) == {1: 2, 2: 1}
    assert dict(g.gslots) == {(out, 1): (out, 2), (out, 2): (out, 1)}
    assert not g.lines and not g.slots  # no line moves: a finding keeps its line
    where = {p.index: (p.cta, p.warp) for p in machine.procs}
    assert {(where[a], where[b]) for a, b in g.procs} == {((1, 0), (2, 0)), ((2, 0), (1, 0))}


def test_grid_of_four_stores_fewer_states_same_verdict():
    m0, m1 = _machine(DATA / "grid_barrier_4cta.sync"), _machine(DATA / "grid_barrier_4cta.sync")
    plain = search(m0, BUDGET, symmetry_for(m0, permuted=False))
    sym = cta_symmetry(m1)
    assert isinstance(sym, CtaSymmetry)
    cta = search(m1, BUDGET, sym)
    assert plain.complete and cta.complete and not plain.errors and not cta.errors
    # 3 interchangeable CTAs: at least twice fewer states (measured 4,509 -> 813)
    assert 2 * cta.states < plain.states


@pytest.mark.parametrize(("name", "params", "least"), [
    ("grid_barrier_4cta.sync", None, 300), ("grid_barrier_4cta_no_fence.sync", None, 300),
    ("grid_sync_broadcast.sync", None, 300), ("grid_race_in_one_cta.sync", None, 300),
    ("grid_tma_pipelines.sync", None, 300), ("cluster_peer_exchange.sync", None, 100),
    ("cluster_peer_exchange_early_release.sync", None, 60), ("cluster_leader_dsmem.sync", None, 300),
    ("cluster_leader_dsmem.sync", {"LATE": 1}, 300)])
def test_exchange_commutes_with_every_step(name, params, least):
    machine = _machine(DATA / name, params)
    gs = [g for _, star in cta_classes(machine)[0] for g in star.values()]
    assert gs
    mappers = [CtaMapper(machine, g) for g in gs]

    def succ(s):
        return {(r.state, (r.violation.code, r.violation.span.line) if r.violation else None,
                 tuple(sorted((v.code, v.span.line if v.span else 0) for v in r.soft)))
                for r in machine.successors(s)}

    seen = {machine.initial()}
    queue = [machine.initial()]
    while queue and len(seen) < 1500:
        s = queue.pop()
        here = succ(s)
        for mapper in mappers:
            image = {(None if t is None else mapper.state(t), v, soft) for t, v, soft in here}
            assert image == succ(mapper.state(s))
        for t, _, _ in here:
            if t is not None and t not in seen:
                seen.add(t)
                queue.append(t)
    assert len(seen) > least


def _agree(path: Path, params: dict[str, int] | None = None, fold: bool = True) -> tuple[object, object]:
    """CTA symmetry and the plain swaps alone agree on the verdict and the findings (the plain search's
    agreement with the unreduced one is tests/test_reductions.py's), and every counterexample of the
    CTA-reduced search replays on the unreduced machine. (Without any symmetry these grids are past
    200,000 states: the warps of each CTA interleave freely.) ``fold``: the exchange leaves fewer states;
    False where the one-CTA set (engines/reduction/cta_local.py) already leaves one path to fold."""
    m0, m1 = _machine(path, params), _machine(path, params)
    s0, s1 = symmetry_for(m0, permuted=False), cta_symmetry(m1)
    assert s1 is not None
    plain, cta = search(m0, BUDGET, s0), search(m1, BUDGET, s1)
    assert plain.complete and cta.complete
    assert _findings(m1, s1, cta) == _findings(m0, s0, plain)
    assert cta.states < plain.states if fold else cta.states <= plain.states
    for v, labels in cta.errors:
        real = witness.real_path(m1, labels, s1)
        assert witness.final_finding(m1, real, v) is not None, v.code
    return cta, s1


def test_race_in_one_cta_of_four_is_reported_at_its_line_and_replays():
    path = DATA / "grid_race_in_one_cta.sync"
    machine = _machine(path)
    assert _classes(machine) == [[0, 1, 2]]  # CTA 3 alone reads its tile back
    outcome, sym = _agree(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "read out[block]" in text)
    found = {(c, ln) for c, ln in _findings(machine, sym, outcome)}
    assert found and all(ln in (line, line - 1) for _, ln in found)  # the read, or the write it races with
    # the reported trace is the real CTA 3's
    v, labels = outcome.errors[0]
    d = witness.diagnostic(machine, v, labels, True, sym)
    assert any(step.line == line and "cta3" in step.role for step in d.trace)


def test_fixed_twin_is_safe_and_keeps_the_symmetry():
    path = DATA / "grid_race_in_one_cta_fixed.sync"
    assert _classes(_machine(path)) == [[0, 1, 2]]
    outcome, _ = _agree(path)
    assert not outcome.errors


def test_racy_grid_barrier_agrees():
    outcome, _ = _agree(DATA / "grid_barrier_4cta_no_fence.sync")
    assert outcome.errors


def test_tma_pipelines_per_cta_agree():
    """mbarriers, TMA agents, a named barrier and shared slots renamed with their CTA."""
    outcome, _ = _agree(DATA / "grid_tma_pipelines.sync")
    assert outcome.errors


def test_near_twin_differing_in_one_instruction():
    path = DATA / "grid_barrier_4cta_one_differs.sync"
    machine = _machine(path)
    classes, rejected = cta_classes(machine)
    assert [sorted(m) for m, _ in classes] == [[1, 3]]  # CTA 2 waits for one arrival fewer
    assert any("CTA 2" in why for why in rejected)
    assert cta_symmetry(_machine(path, {"CTAS": 3})) is None  # CTAs 1 and 2 differ: none left
    assert _classes(_machine(DATA / "grid_barrier_4cta.sync", {"CTAS": 3})) == [[1, 2]]


def test_explore_uses_it_and_reports_it():
    path = DATA / "grid_barrier_4cta.sync"
    full = explore(load(str(path), {}), BUDGET, _machine(path))
    assert full.verdict is Verdict.SAFE
    assert full.stats.states == search(_machine(path), BUDGET, cta_symmetry(_machine(path))).states
    cut = explore(load(str(path), {}), Budget(200, 600.0), _machine(path))
    assert cut.verdict is Verdict.INCONCLUSIVE and "CTAs 1, 2, 3 interchangeable" in cut.coverage


def test_peer_ranks_are_renamed_with_their_ctas():
    """`@ cta ^ 1` of CTA 0 is rank 1 and of CTA 1 rank 0: the exchange maps one onto the other, and
    the peer's mbarriers, shared slots and the multicast mask `1 << (cta ^ 1)` with it."""
    machine = _machine(DATA / "cluster_peer_exchange.sync")
    classes, rejected = cta_classes(machine)
    assert [sorted(m) for m, _ in classes] == [[0, 1]], rejected
    (_, star), = classes
    g = star[1]
    assert dict(g.ctas) == {0: 1, 1: 0} and not g.lines and not g.gslots
    names = {m: machine.mb_names[m] for pair in g.mbars for m in pair}
    assert {(names[a], names[b]) for a, b in g.mbars} == {
        ((c, n, 0), (1 - c, n, 0)) for c in (0, 1) for n in ("full", "empty")}
    outcome, _ = _agree(DATA / "cluster_peer_exchange.sync")
    assert not outcome.errors


def test_peer_race_is_reported_at_its_line_and_replays():
    path = DATA / "cluster_peer_exchange_early_release.sync"
    assert _classes(_machine(path)) == [[0, 1]]
    outcome, sym = _agree(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "tma.load stage" in text)
    assert _findings(_machine(path), sym, outcome) == {("SV302", line)}


def test_followers_of_a_leader_are_exchanged_and_a_race_in_one_is_found():
    path = DATA / "cluster_leader_dsmem.sync"
    assert _classes(_machine(path)) == [[1, 2, 3]]  # rank 0 is fixed by their exchanges
    outcome, _ = _agree(path, fold=False)  # the one-CTA set leaves the followers' steps little to fold
    assert not outcome.errors
    saved = cta_local.ENABLED, init_alone.ENABLED
    # without the one-CTA set and the init taken alone (which orders the followers' inits on its own),
    # the exchange is what folds the followers' interleavings
    cta_local.ENABLED = init_alone.ENABLED = False
    try:
        _agree(path)
        _agree(path, {"LATE": 1})
    finally:
        cta_local.ENABLED, init_alone.ENABLED = saved
    late = _machine(path, {"LATE": 1})
    assert _classes(late) == [[1, 2]]  # CTA 3 reads its tile late
    outcome, sym = _agree(path, {"LATE": 1}, fold=False)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "write tile;" in text)
    assert _findings(late, sym, outcome) == {("SV302", line)}
    v, labels = outcome.errors[0]
    d = witness.diagnostic(late, v, labels, True, sym)
    read = [n for n, text in enumerate(path.read_text().splitlines(), 1) if "read tile @ PEER" in text][-1]
    assert any(step.line == read and "cta3" in step.role for step in d.trace)  # the real CTA 3's read


def _variant(path: Path, old: str, new: str) -> Machine:
    text = path.read_text()
    assert old in text
    return Machine(load(text.replace(old, new), None, path=path.name))


def test_ranks_and_masks_that_are_not_images_get_no_exchange():
    """The near twins: each differs from a symmetric kernel in one rank operand or mask."""
    peer = DATA / "cluster_peer_exchange.sync"
    release = "arrive.release.cluster empty @ cta ^ 1;"
    for new, why in ((release.replace("cta ^ 1", "1"), "rank 1 becomes rank 0, not 1"),
                     (release.replace("cta ^ 1", "(k + cta + 1) % 2"), "computed at run time"),
                     ("if cta == 0 { arrive.release.cluster empty @ 1; } else { arrive.release.cluster empty; }",
                      "in one program only")):
        machine = _variant(peer, release, new)
        classes, rejected = cta_classes(machine)
        assert not classes and any(why in r for r in rejected), (new, rejected)
    for new, why in (("multicast 2", "multicast mask 0b10 becomes 0b1, not 0b10"),
                     # its own image, but the copy's destinations are visited in rank order, 1 then 0 in the image
                     ("multicast 3", "reorders the destinations of multicast mask 0b11")):
        classes, rejected = cta_classes(_variant(peer, "multicast 1 << (cta ^ 1)", new))
        assert not classes and any(why in r for r in rejected), (new, rejected)
    classes, rejected = cta_classes(_machine(DATA / "cluster_leader_dsmem.sync", {"PEER": 1}))
    assert [sorted(m) for m, _ in classes] == [[2, 3]]  # CTA 1 is read by every follower: it stays
    assert any("CTA 1 and CTA 2: rank 1 becomes rank 2, not 1" in r for r in rejected), rejected
    # lane r arrives on CTA r in both CTAs (DeepGEMM's empty_barrier_arrive), CUTLASS's signalling threads
    # and the multicast rings name ranks in rank order: no exchange (docs/model.md says why)
    for name in ("deepgemm_lane_rank_release.sync", "cutlass_consumer_release_multicast.sync"):
        classes, rejected = cta_classes(_machine(ROOT / "specs" / name))
        assert not classes and any("rank 0 becomes rank 1, not 0" in r for r in rejected), (name, rejected)


@pytest.mark.parametrize("name", ["grid_barrier_4cta.sync", "grid_barrier_4cta_no_fence.sync"])
def test_parallel_search_stores_the_same_states(name):
    """The representative is a function of the state alone, so the search on 2 processes
    (engines/parallel.py) stores the same states and finds the same violations."""
    from syncverify.engines import parallel

    if parallel.available() is not None:
        pytest.skip(str(parallel.available()))
    m0, m1 = _machine(DATA / name), _machine(DATA / name)
    one = search(m0, BUDGET, cta_symmetry(m0))
    two = parallel.search(m1, BUDGET, cta_symmetry(m1), jobs=2)
    assert (one.states, one.transitions, len(one.errors)) == (two.states, two.transitions, len(two.errors))


def _identical_cta_programs_agree(every: int) -> tuple[int, int]:
    """The small generated cluster programs (tests/exhaustive_programs.py) with both CTAs given CTA
    0's body: where the exchange is proved, the CTA-symmetric search agrees with the plain one on the
    verdict and every finding, and with the unreduced search on the verdict (its findings among the
    unreduced ones); every counterexample replays. Returns the programs compared, and how many of
    them name the other CTA (remote arrives and accesses `@ cta ^ 1`, a multicast to both)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from exhaustive_programs import SCOPES, sample

    used = remote = 0
    for scope in ("cluster2", "cluster2-seq"):
        for _, text in sample(SCOPES[scope], every):
            same = re.sub(r"\n  if w0 && cta == 1 \{.*\}", "", text).replace("w0 && cta == 0", "w0")
            if same == text or "cta == 1" in same:
                continue
            m1 = Machine(load(same, None, path="x.sync"))
            sym = cta_symmetry(m1)
            if sym is None:
                continue
            used += 1
            remote += "@ cta ^ 1" in same or "multicast" in same
            m0, m2 = Machine(load(same, None, path="x.sync")), Machine(load(same, None, path="x.sync"))
            s0 = symmetry_for(m0, permuted=False)
            plain, cta = search(m0, BUDGET, s0), search(m1, BUDGET, sym)
            bare = search(m2, BUDGET, None, reduce=False)
            assert plain.complete and cta.complete and bare.complete
            assert _findings(m1, sym, cta) == _findings(m0, s0, plain), same
            assert bool(cta.errors) == bool(bare.errors), same
            assert _findings(m1, sym, cta) <= _findings(m2, None, bare), same
            for v, labels in cta.errors:
                assert witness.final_finding(m1, witness.real_path(m1, labels, sym), v) is not None, same
    return used, remote


def test_exhaustive_programs_with_identical_ctas_agree():
    used, remote = _identical_cta_programs_agree(400)
    assert used >= 10 and remote >= 3, (used, remote)


@SLOW
def test_exhaustive_programs_with_identical_ctas_agree_finer():
    used, remote = _identical_cta_programs_agree(120)
    assert used >= 150 and remote >= 20, (used, remote)
