"""What the explicit search keeps per stored state (issue #36): the reduction's remembered walks keyed
by numbered projections packed in bytes (engines/reduction/precede_memo.py), and the parent links as
an array with interned labels (engines/explicit.py, Parents).

The packed key must tell two calls apart exactly when the projection the walk reads does (a key that
merged two projections would hand one call another's answer); the table must start over with its
numbering without changing any answer; the parent links must rebuild the same paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, Parents, _path_to, explore
from syncverify.engines.reduction import precede_memo
from syncverify.semantics.machine import Machine
from syncverify.semantics.state import M_JPREV, M_K, M_PEND, M_VALID, P_TOKEN

ROOT = Path(__file__).resolve().parent.parent


def _projection(state, m, frozen, agent, forbidden, freeze, named, landings_ok, collect, goal) -> tuple:
    """The projection as tuples (what the key stood for before it was packed)."""
    agents = []
    skip = agent is not None
    for b in state.agents:
        if skip and b is agent:
            skip = False
            continue
        agents.append((b[0], b[4]))
    own = (state.mbars[m][M_K] == 0, state.mbars[m][M_JPREV]) if freeze and m >= 0 else None
    return (tuple((ps[0], ps[1], ps[P_TOKEN]) for ps in state.procs),
            tuple((mb[M_VALID], mb[M_K] % 2, mb[M_PEND]) for mb in state.mbars),
            tuple((nb.count, nb.arrived, nb.gen) for nb in state.named), own, tuple(sorted(agents)),
            m, frozen, forbidden, freeze, None if named is None else named[0], landings_ok, collect, goal)


@pytest.mark.parametrize(("path", "defines"), [("bench/families/fa3_fwd.sync", {"W": 2}),
                                               ("specs/cutlass_sm100_2sm_umma_gemm.sync", {})])
def test_packed_keys_are_equal_exactly_when_the_projections_are(path, defines, monkeypatch):
    """Every call of a search: its packed key and its projection as tuples. Equal keys must come from
    equal projections and equal projections must give equal keys; and the table must be hit, so that
    keys are compared across states (not only within one)."""
    by_key: dict[bytes, tuple] = {}
    by_projection: dict[tuple, bytes] = {}
    memos: list = []
    keyed = precede_memo.PrecedeMemo.key

    def checked(self, state, m, frozen, agent, forbidden, freeze, named, landings_ok, collect=False, goal=()):
        key = keyed(self, state, m, frozen, agent, forbidden, freeze, named, landings_ok, collect, goal)
        proj = _projection(state, m, frozen, agent, forbidden, freeze, named, landings_ok, collect, goal)
        assert by_key.setdefault(key, proj) == proj
        assert by_projection.setdefault(proj, key) == key
        if self not in memos:
            memos.append(self)
        return key

    monkeypatch.setattr(precede_memo.PrecedeMemo, "key", checked)
    protocol = load(str(ROOT / path), defines)
    explore(protocol, Budget(max_states=4_000, seconds=120), Machine(protocol))
    [memo] = memos
    assert len(by_key) > 50 and memo.hits > 0
    # the key is small: the numbers of the positions, the barriers and the rest, 4 bytes each
    assert max(len(k) for k in by_key) == 4 * (len(memo._position) + 3)


def _answer(path: str, defines: dict[str, int]) -> tuple:
    protocol = load(str(ROOT / path), defines)
    result = explore(protocol, Budget(max_states=20_000, seconds=300), Machine(protocol))
    return (result.verdict, result.stats.states, result.stats.transitions,
            [(d.code, d.span.line if d.span else 0, len(d.trace)) for d in result.diagnostics])


@pytest.mark.parametrize(("path", "defines"), [("bench/families/fa3_fwd.sync", {"W": 2, "BUG": 1}),
                                               ("specs/deepgemm_sm90_cta_release_scales.sync", {})])
def test_a_table_that_starts_over_often_gives_the_same_answers(path, defines, monkeypatch):
    """With room for 40 entries the table and its numbering start over again and again: the search
    must still make the same states, steps and findings (the numbers mean one value per table)."""
    full = _answer(path, defines)
    starts: list[int] = []
    start = precede_memo.PrecedeMemo._start

    def counted(self):  # type: ignore[no-untyped-def]
        starts.append(1)
        start(self)

    monkeypatch.setattr(precede_memo, "LIMIT", 40)
    monkeypatch.setattr(precede_memo.PrecedeMemo, "_start", counted)
    assert _answer(path, defines) == full
    assert len(starts) > 3


def test_parent_links_rebuild_the_path_and_share_labels():
    parents = Parents()
    parents.append(0, ("p", 3))  # state 1
    parents.append(1, ("a", (0, 1, 2, 3, 4)))  # state 2
    parents.append(1, ("p", 3))  # state 3: an equal label, a new tuple
    assert _path_to(parents, 2, ("p", 0)) == [("p", 3), ("a", (0, 1, 2, 3, 4)), ("p", 0)]
    assert _path_to(parents, 3, None) == [("p", 3), ("p", 3)]
    assert parents.label[1] is parents.label[3]  # one object per distinct label
    assert len(parents) == 4
