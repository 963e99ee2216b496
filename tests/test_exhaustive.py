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
from exhaustive_programs import (
    ALPHABET,
    ARRIVE_TX_SCOPES,
    CHOOSE,
    GLOBAL_SCOPES,
    LANE_GROUP_SCOPES,
    OPERAND_SCOPES,
    PROBE_TOKEN_SCOPES,
    ROUND_SCOPES,
    SCOPES,
    TENSORMAP_SCOPES,
    Stmt,
    assignments,
    loops_on_a_barrier,
    programs,
    render,
    sample,
    statements,
)

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
# Every k-th program of a scope, per engine: the slice stays well under a minute (2-CTA programs
# and bmc queries cost the most).
EVERY = {"explicit-unreduced": {"cta2": 300, "cta3": 300, "cta2-seq": 300, "cluster2": 1000, "new2": 300,
                                "pairs2": 60, "halves": 100, "phases": 53, "cluster2-seq": 200, "lanes": 80,
                                "regions": 14, "cpasync": 225, "cpasync-proxy": 160, "cpasync-cluster": 200,
                                "tcgen05": 100, "proxies": 700, "proxies2": 400, "storage": 60, "relinquish": 5,
                                "probes": 97},
         "bmc": {"cta2": 5000, "cta3": 2000, "cta2-seq": 2000, "cluster2": 8000, "new2": 2000, "pairs2": 400,
                 "halves": 101, "phases": 1000, "cluster2-seq": 1000, "lanes": 400, "regions": 84, "cpasync": 1350,
                 # the three costliest slices in CI (a third of the bmc slices' time): half as dense
                 "cpasync-proxy": 800, "cpasync-cluster": 1600, "tcgen05": 600, "proxies": 5000, "proxies2": 4000,
                 "storage": 250, "relinquish": 10, "probes": 2000},
         "symbolic": {"lanes": 240, "regions": 42, "cpasync": 675, "cpasync-proxy": 320, "cpasync-cluster": 400,
                      "tcgen05": 300, "proxies": 2000, "storage": 120, "probes": 400}}
# The scopes of lanes, regions, cp.async, tcgen05, proxy fences, barrier storage and probes, where the z3 engine
# is compared too (the full pass over them: bench/exhaustive.py --z3-every 1, bench/RESULTS-families.md).
NEWER = ("lanes", "regions", "cpasync", "cpasync-proxy", "cpasync-cluster", "tcgen05", "proxies", "storage", "probes")


def _answers(text: str, names: list[str], pinned: dict[str, int] | None = None) -> dict:
    protocol = load(text, pinned, path="slice.sync")
    return {n: (spin_fast if n == "spin" else ENGINES[n].run)(protocol, 100_000, 60.0) for n in names}


def _slice(scope: str, every: int, names: list[str]) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPES[scope], every):
        for pinned in assignments(text):
            try:
                got = _answers(text, ["explicit", *names], pinned)
            except InputError:
                tally["rejected"] += 1
                continue
            ref = got.pop("explicit")
            tally[ref.verdict] += 1
            for name, answer in got.items():
                if answer.verdict == "unsupported":
                    tally[f"{name} refuses: {answer.detail[:60]}"] += 1
                if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                    c = compare(ref, answer, ENGINES[name])
                    assert c.kind == "agree", (scope, index, pinned, name, answer, ref, text)
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
    if scope == "halves":  # a split warp's syncwarp: refused with its reason, never answered differently
        assert any(k.startswith("bmc refuses") and "syncwarp" in k for k in tally), tally
    if scope == "storage":  # a barrier in a buffer's bytes: refused with its reason (families/storage.py)
        assert any(k.startswith("bmc refuses") and "a barrier in a buffer's bytes" in k for k in tally), tally


@pytest.mark.parametrize("scope", NEWER)
def test_z3_agrees_on_a_slice(scope):
    """The all-iterations engine against the reference on a slice of the newer scopes (loop-free: it
    runs the explicit search without the reductions it cannot apply, docs/engines.md)."""
    tally = _slice(scope, EVERY["symbolic"][scope], ["symbolic"])
    assert tally["symbolic agrees"] >= 5, tally


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
    # the global-memory atoms are used by GLOBAL_SCOPES, compared apart (tests/test_exhaustive_globals.py), the
    # register and tensor-memory range atoms by OPERAND_SCOPES (test_exhaustive_operands.py), the tensor-map
    # atoms by TENSORMAP_SCOPES (test_exhaustive_tensormap.py), the lanes' own bulk groups by LANE_GROUP_SCOPES
    # (test_exhaustive_lane_groups.py), the kept probes' tokens by PROBE_TOKEN_SCOPES (test_probe_token_walk.py), the
    # second barrier's by ROUND_SCOPES (test_exhaustive_rounds.py), the arming for both CTAs' multicast halves by
    # ARRIVE_TX_SCOPES (test_exhaustive_arrive_tx.py)
    scopes = (*SCOPES.values(), *GLOBAL_SCOPES.values(), *OPERAND_SCOPES.values(), *TENSORMAP_SCOPES.values(),
              *LANE_GROUP_SCOPES.values(), *PROBE_TOKEN_SCOPES.values(), *ROUND_SCOPES.values(),
              *ARRIVE_TX_SCOPES.values())
    used = {a.name for s in scopes for stmt in statements(s) for a, _ in stmt.atoms}
    assert used == {a.name for a in ALPHABET}


def test_a_choose_program_is_checked_at_each_value_and_the_combined_check_agrees():
    """The slice pins `choose C` at each value; the explicit engine's own check over every
    assignment (engines/choices.py) must report a violation exactly when some pinned value has one."""
    from syncverify.check import Options, check_protocol
    from syncverify.result import Verdict

    scope, seen = SCOPES["new2"], collections.Counter()
    for _, text in sample(scope, 97):
        if CHOOSE not in text:
            continue
        pinned = [_answers(text, ["explicit"], p)["explicit"].verdict for p in assignments(text)]
        combined = check_protocol(load(text, path="c.sync"), Options(engine="explicit"))
        assert (combined.verdict == Verdict.VIOLATION) == ("violation" in pinned), (pinned, combined.verdict, text)
        seen[len(set(pinned))] += 1
    assert seen[2], seen  # some program is safe at one value and violated at another


def test_elect_and_first_thread_differ_in_a_role_of_two_warps():
    """In a role of two warps `elect` arrives once per warp, `first thread` once per role: on a
    barrier of count 1 the first overflows the phase, the second does not."""
    scope = SCOPES["pairs2"]
    results = {}
    for wrapper in ("elect", "first thread"):
        arrive = Stmt(((next(a for a in ALPHABET if a.name == "arrive"), wrapper),))
        wait = Stmt(((next(a for a in ALPHABET if a.name == "wait0"), ""),))
        program = ((arrive,), (wait,))
        assert program in set(programs(scope))
        results[wrapper] = _answers(render(scope, program), ["explicit"])["explicit"]
    assert results["first thread"].verdict == "safe", results
    assert results["elect"].verdict == "violation", results


_ZERO_TRIP_WAIT = """protocol zero_trip_wait {
  cta threads 64;
  role w0 = warp 0;
  role setup = warp 1;
  mbarrier mb count 1;
  if setup { elect { init mb; } }
  syncthreads;
  if w0 { for k in 0..TRIPS { wait mb parity 0; } }
}
"""


@pytest.mark.skipif(ENGINES["spin"].unavailable is not None, reason="spin or a C compiler is not installed")
@pytest.mark.parametrize(("trips", "verdict"), [(0, "safe"), (1, "violation")])
def test_spin_takes_a_wait_no_trip_reaches_when_it_is_the_only_wait(trips, verdict):
    """Found by the new2 scope (`for k in 0..C { wait ... }` at C=0): with no wait reached the
    Promela model had no waiter array, yet the wait's guard named it, and SPIN refused the model.
    The twin with one trip waits on a phase nobody completes: a deadlock every engine reports."""
    text = _ZERO_TRIP_WAIT.replace("TRIPS", str(trips))
    got = _answers(text, ["explicit", "spin"])
    assert got["explicit"].verdict == verdict, got
    assert got["spin"].verdict == verdict, got
    if verdict == "violation":
        assert got["spin"].codes == got["explicit"].codes == {"SV201"}, got
