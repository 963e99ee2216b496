"""The remembered answers of the reduction's walk (engines/reduction/precede_memo.py) against the walk.

Every call the search makes is answered twice, from the table and by a fresh walk, and the two
must be equal, with the named-barrier arrivals and the updates of a landing's barrier that the
walk collects; the table must also be hit
(else the key holds something that tells every call apart, and nothing is gained). The
protocols are the families at small sizes (landings, expect_tx, first waits, the FA3 ping-pong
and its named barriers) and a spec of the cluster ring.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import precede_memo
from syncverify.semantics.machine import Machine

ROOT = Path(__file__).resolve().parent.parent
POINTS = [
    ("bench/families/fa3_fwd.sync", {"W": 1}),
    ("bench/families/fa3_fwd.sync", {"W": 2, "BUG": 1}),
    # (the multicast GEMM family and the cluster rings, once here, now search a few hundred states in which
    # no walk is asked twice: the byte sums of precede_walk.py and arrive_tx.py took their repeats away)
    ("specs/cutlass_sm100_2sm_umma_gemm.sync", {}),
    ("specs/deepgemm_sm90_cta_release_scales.sync", {}),
    ("bench/families/fa3_fwd.sync", {"W": 2}),
    ("specs/deepgemm_lane_rank_release_wrong_rank.sync", {}),  # whether the peer CTA can end first
]


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=[f"{Path(p).stem}{d}" for p, d in POINTS])
def test_remembered_answers_equal_fresh_walks(path, defines, monkeypatch):
    calls = {"checked": 0, "updates": 0, "goal reached": 0, "goal missed": 0}
    memos: list = []  # the table the search asked (one per search)
    remembered = precede_memo.PrecedeMemo.__call__

    def both(self, state, m, frozen, agent, forbidden, freeze, named=None, landings_ok=False, updates=None,
             goal=()):
        got_named: list = []
        got_updates: list | None = None if updates is None else []
        got = remembered(self, state, m, frozen, agent, forbidden, freeze,
                         None if named is None else (named[0], got_named), landings_ok, got_updates, goal)
        fresh_named: list = []
        fresh_updates: list | None = None if updates is None else []
        fresh = self._walk(state, m, frozen, agent, forbidden, freeze,
                           None if named is None else (named[0], fresh_named), landings_ok, fresh_updates, goal)
        assert got == (None if fresh is None else tuple(fresh)), (m, frozen, agent, forbidden, freeze)
        if goal:  # what the caller reads (every process of the goal can end) is the whole walk's answer
            whole = self._walk(state, m, frozen, agent, forbidden, freeze, None, landings_ok, None)
            reached = got is not None and all(got[q] for q in goal)
            assert reached == (whole is not None and all(whole[q] for q in goal)) or whole is None, goal
            calls["goal reached" if reached else "goal missed"] += 1
        assert got_named == fresh_named
        # the updates of m, as a multiset: the walk meets the processes in its own order
        assert sorted(got_updates or []) == sorted(fresh_updates or [])
        calls["checked"] += 1
        if self not in memos:
            memos.append(self)
        calls["updates"] += bool(got_updates)
        if named is not None:
            named[1].extend(got_named)
        if updates is not None:
            updates.extend(got_updates or [])
        return got

    monkeypatch.setattr(precede_memo.PrecedeMemo, "__call__", both)
    protocol = load(str(ROOT / path), defines)
    machine = Machine(protocol)
    explore(protocol, Budget(max_states=6_000, seconds=120), machine)
    [memo] = memos
    assert isinstance(memo, precede_memo.PrecedeMemo)
    assert calls["checked"] > 100 and memo.hits > 0, (calls, memo.hits, memo.misses)
    if "lane_rank" in path:  # the peer CTA's ends asked (element._peer_cannot_end_first): both answers
        assert calls["goal reached"] and calls["goal missed"], calls


def test_search_unchanged_with_whole_walks_for_the_peer(monkeypatch):
    """The walk asked for the peer CTA's ends stops once they all can end (``goal``); asked for the
    whole fixpoint instead, the search explores the same states with the same findings."""
    from syncverify.engines.reduction import successors

    def summary() -> tuple:
        protocol = load(str(ROOT / "specs/deepgemm_lane_rank_release_wrong_rank.sync"))
        result = explore(protocol, Budget(max_states=3_000, seconds=120), Machine(protocol))
        return (result.verdict, result.stats.states, result.stats.transitions,
                sorted((d.code, d.span.line if d.span else 0, len(d.trace)) for d in result.diagnostics))

    with_goal = summary()
    walk = successors.can_precede
    goals = []

    def whole(*args, goal=()):  # (machine, table, state, ..., updates[, goal]): the goal dropped
        goals.append(args[11:] or goal)
        return walk(*args[:11])

    monkeypatch.setattr(successors, "can_precede", whole)
    assert summary() == with_goal
    assert any(g and g[0] for g in goals)  # the goal was asked for, and dropped


@pytest.mark.parametrize(("path", "defines"), [POINTS[1], POINTS[2]], ids=["fa3_fwd_bug", "sm100_2sm_umma_gemm"])
def test_search_unchanged_when_the_table_is_skipped(path, defines, monkeypatch):
    """The windows where the table is not asked (precede_memo.py, "When the table is not asked"): with a
    window of 64 calls and every window counted as one of few hits, half the calls walk without a key;
    the search reports the same states, transitions and findings as with every call remembered. A window
    that starts skipping empties the table and its numberings (what it stored is not kept to the end)."""
    protocol = load(str(ROOT / path), defines)

    def run() -> tuple:
        result = explore(protocol, Budget(max_states=6_000, seconds=120), Machine(protocol))
        return (result.verdict, result.stats.states, result.stats.transitions,
                [(d.code, d.span.line if d.span else 0, d.message, len(d.trace)) for d in result.diagnostics])

    monkeypatch.setattr(precede_memo, "FEW_HITS", 0)  # no window has enough hits: every one skips
    skipped = {"walks": 0, "kept": 0}
    window_end = precede_memo.PrecedeMemo._window_end

    def counted(self) -> None:
        window_end(self)
        skipped["walks"] += self._bypass
        skipped["kept"] += (len(self._table) + len(self._rest) + len(self._mbars) + len(self._agent_kinds)
                            + len(self._agent_sets)) if self._bypass else 0

    monkeypatch.setattr(precede_memo.PrecedeMemo, "_window_end", counted)
    monkeypatch.setattr(precede_memo, "WINDOW", 64)
    monkeypatch.setattr(precede_memo, "SKIPPED", 64)
    with_skips = run()
    assert skipped["walks"] > 0 and skipped["kept"] == 0
    monkeypatch.setattr(precede_memo, "SKIPPED", 0)  # no call skips the table
    assert run() == with_skips


@pytest.mark.parametrize(("path", "defines"), [POINTS[2], POINTS[4]], ids=["sm100_2sm_umma_gemm", "fa3_fwd"])
def test_agents_numbered_as_their_multiset(path, defines, monkeypatch):
    """The key's agents in flight (``PrecedeMemo._others``): between two starts of the table, two calls get
    the same number exactly when the multisets of (kind, target barrier, bytes of a copy) of the agents
    other than the step's own (the first that *is* it) are equal, as the sorted tuple of those triples
    that the key held before."""
    lifetimes: list[dict] = [{}]
    calls = {"skipped": 0, "several": 0}
    others = precede_memo.PrecedeMemo._others
    start = precede_memo.PrecedeMemo._start

    def reference(agents: tuple, agent) -> tuple:
        rest, skip = [], agent is not None
        for b in agents:
            if skip and b is agent:
                skip = False
                continue
            rest.append((b[0], b[4], b[5] if b[0] == precede_memo.AG_TMA else 0))
        calls["skipped"] += agent is not None and len(rest) < len(agents)
        calls["several"] += len(rest) > 1
        return tuple(sorted(rest))

    def checked(self, agents, agent):
        n = others(self, agents, agent)
        seen = lifetimes[-1]
        want = reference(agents, agent)
        assert seen.setdefault(n, want) == want  # one multiset per number
        return n

    def restarted(self):
        start(self)
        lifetimes.append({})

    monkeypatch.setattr(precede_memo.PrecedeMemo, "_others", checked)
    monkeypatch.setattr(precede_memo.PrecedeMemo, "_start", restarted)
    protocol = load(str(ROOT / path), defines)
    explore(protocol, Budget(max_states=6_000, seconds=120), Machine(protocol))
    for seen in lifetimes:  # one number per multiset
        assert len(set(seen.values())) == len(seen)
    assert calls["skipped"] > 0 and calls["several"] > 0, calls
