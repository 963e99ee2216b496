"""A sampled slice of the bounded-exhaustive cross-check (tests/exhaustive_programs.py; the full pass is
bench/exhaustive.py, reported in bench/EXHAUSTIVE.md).

Every answer is computed: the reference (the explicit engine with its reductions) against the
explicit engine without them, the bmc engine and SPIN, on a deterministic slice of every scope.
The generator is tested too: the shape behind the barrier-only-loop false deadlock is in its
space, and the canonicalization drops only reorderings of interchangeable warps.
"""

from __future__ import annotations

import collections

import pytest
from diff_engines import CONCLUSIVE, compare, engines, spin_fast
from exhaustive_programs import ALPHABET, SCOPES, Stmt, loops_on_a_barrier, programs, render, sample, statements

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
# Every k-th program of a scope, per engine: the slice stays well under a minute (2-CTA programs
# and bmc queries cost the most).
EVERY = {"explicit-unreduced": {"cta2": 300, "cta3": 300, "cta2-seq": 300, "cluster2": 1000},
         "bmc": {"cta2": 5000, "cta3": 2000, "cta2-seq": 2000, "cluster2": 8000}}


def _answers(text: str, names: list[str]) -> dict:
    protocol = load(text, path="slice.sync")
    return {n: (spin_fast if n == "spin" else ENGINES[n].run)(protocol, 100_000, 60.0) for n in names}


def _slice(scope: str, every: int, names: list[str]) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPES[scope], every):
        try:
            got = _answers(text, ["explicit", *names])
        except InputError:
            tally["rejected"] += 1
            continue
        ref = got.pop("explicit")
        tally[ref.verdict] += 1
        for name, answer in got.items():
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, ENGINES[name])
                assert c.kind == "agree", (scope, index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    return tally


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_reduced_and_unreduced_explicit_agree_on_a_slice(scope):
    tally = _slice(scope, EVERY["explicit-unreduced"][scope], ["explicit-unreduced"])
    assert tally["explicit-unreduced agrees"] >= 10, tally
    assert tally["safe"] and tally["violation"], tally  # the slice exercises both verdicts


@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_bmc_agrees_on_a_slice(scope):
    tally = _slice(scope, EVERY["bmc"][scope], ["bmc"])
    assert tally["bmc agrees"] >= 1, tally


@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
def test_bmc_agrees_where_a_warp_loops_over_a_barrier():
    """The reduced and unreduced explicit engines share the machine's semantics, so a bug there
    (the barrier-only loop) shows only against an engine of its own: bmc, on a slice of the
    programs of the shape that hid it."""
    scope = SCOPES["cta2"]
    chosen = [p for p in programs(scope) if loops_on_a_barrier(p)][::300]
    agreed = 0
    for program in chosen:
        got = _answers(render(scope, program), ["explicit", "bmc"])
        ref, other = got["explicit"], got["bmc"]
        if ref.verdict in CONCLUSIVE and other.verdict in CONCLUSIVE:
            assert compare(ref, other, ENGINES["bmc"]).kind == "agree", (program, got)
            agreed += 1
    assert agreed >= 3, (len(chosen), agreed)


@pytest.mark.skipif(ENGINES["spin"].unavailable is not None, reason="spin or a C compiler is not installed")
def test_spin_agrees_on_a_slice():
    tally = _slice("cta2", 10_000, ["spin"])
    assert tally["spin agrees"] >= 2, tally


def _stmt(name: str, trips: int = 0) -> Stmt:
    return Stmt(((next(a for a in ALPHABET if a.name == name), ""),), trips)


@pytest.mark.parametrize("barrier", ["syncthreads", "bar.sync"])
def test_the_barrier_only_loop_is_in_the_space_and_safe_everywhere(barrier):
    """The false deadlock's shape: both warps loop twice around one barrier."""
    loop = (_stmt(barrier, 2),)
    scope = SCOPES["cta2"]
    assert (loop, loop) in set(programs(scope))
    got = _answers(render(scope, (loop, loop)), [n for n in ("explicit", "explicit-unreduced", "bmc")
                                                 if ENGINES[n].unavailable is None])
    assert all(a.verdict == "safe" for a in got.values()), got


def test_canonical_programs_are_the_multisets_of_warp_sequences():
    """Each unordered pair of warp sequences appears once, in one order; none is lost."""
    scope = SCOPES["cta2"]
    seen = list(programs(scope))
    assert len(seen) == len(set(seen))
    as_sets = collections.Counter(frozenset(collections.Counter(p).items()) for p in seen)
    assert max(as_sets.values()) == 1
    singles = statements(scope)
    assert len(seen) == len(singles) * (len(singles) + 1) // 2 + len(singles)  # splits (1, 1) and (1, 0)


def test_every_atom_is_used_by_some_scope():
    used = {a.name for s in SCOPES.values() for stmt in statements(s) for a, _ in stmt.atoms}
    assert used == {a.name for a in ALPHABET}
