"""The reading `relaxed-arrive-publishes-init` (off by default; semantics/families/barriers.py,
RELAXED_ARRIVE_PUBLISHES_INIT; docs/model.md, "Not adopted: a barrier init published by a relaxed cluster arrive
alone"): a `barrier.cluster.arrive.relaxed` publishes the arriving thread's earlier `mbarrier.init`s as a
`fence.mbarrier_init` right before it would.

The hand-written cases: the shape of CUTLASS's sm100 teardown barrier is SV402 by default and safe under the
reading, which the result names in `assumed`; with no cluster barrier at all, with the init after the arrive, and
with an init another thread made, it stays SV402. The generated ones: small two-CTA programs of inits, fences, the
cluster barrier's halves and remote arrivals, each checked under the reading and, by default, with a
`fence.mbarrier_init;` written before every relaxed arrive: the same verdict and codes (the reading is that fence,
nothing more), with the reduced and the unreduced search.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import pytest

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.engines.explicit import Budget, explore
from syncverify.options import READINGS, readings_asked
from syncverify.result import Verdict
from syncverify.semantics.families.barriers import RELAXED_ARRIVE_PUBLISHES_INIT
from syncverify.semantics.machine import Assumptions, Machine

READING = RELAXED_ARRIVE_PUBLISHES_INIT
ON = Options(timeout=60, assume_relaxed_arrive_publishes_init=True)
LETTER = Options(timeout=60)

# CTA 0's warp initializes `done` after its fence.mbarrier_init; both CTAs pass the cluster barrier; CTA 1 arrives
# on CTA 0's `done` (tests/test_issue33_kernels.py, UNFENCED_INIT: CUTLASS's tmem_deallocation_result_barrier)
TEARDOWN = """
protocol teardown {{
  cluster 2;
  cta threads 32;
  role mma = warp 0;
  mbarrier full count 1;
  mbarrier done count 1;
  {setup}
  if cta == 1 {{ elect {{ arrive done @ 0; }} }}
  if cta == 0 {{ wait done parity 0; }}
  cluster.sync;
}}
"""
AFTER_THE_FENCE = ("elect { init full; } fence.mbarrier_init; elect { init done; } "
                   "cluster.arrive.relaxed; cluster.wait;")


def _check(setup: str, options: Options = LETTER):
    return check_protocol(load(TEARDOWN.format(setup=setup), path="teardown.sync"), options)


def _codes(res) -> set[str]:
    return {d.code for d in res.diagnostics if d.is_error}


def test_the_reading_is_off_by_default_and_named():
    assert READINGS[READING] == "assume_relaxed_arrive_publishes_init"
    assert not Options().assume_relaxed_arrive_publishes_init and not Assumptions().relaxed_arrive_publishes_init
    assert readings_asked(False, assume=[READING]) == {"assume_relaxed_arrive_publishes_init": True}
    assert Assumptions.of(ON).relaxed_arrive_publishes_init


@pytest.mark.parametrize("engine", ["explicit", "bmc", "z3"])
def test_an_init_after_the_fence_is_sv402_by_default_and_safe_under_the_reading(engine: str):
    letter = _check(AFTER_THE_FENCE, dataclasses.replace(LETTER, engine=engine))
    assert letter.verdict is Verdict.VIOLATION and "SV402" in _codes(letter) and READING not in letter.assumed
    read = _check(AFTER_THE_FENCE, dataclasses.replace(ON, engine=engine))
    assert read.verdict is Verdict.SAFE and READING in read.assumed, read.diagnostics


def test_a_fenced_init_does_not_name_the_reading():
    res = _check("elect { init full; init done; } fence.mbarrier_init; cluster.arrive.relaxed; cluster.wait;", ON)
    assert res.verdict is Verdict.SAFE and READING not in res.assumed


@pytest.mark.parametrize("setup", [
    # no cluster barrier at all before the remote use: nothing publishes the init (specs/peer_init_race.sync)
    "elect { init full; init done; } syncthreads;",
    # the init after the relaxed arrive: the arrive cannot publish what comes after it
    "cluster.arrive.relaxed; elect { init full; init done; } cluster.wait;",
    # the init by another warp, known to the arriving warp through a named barrier only: the arrive publishes the
    # arriving thread's own inits (as the fence), not what it learned
    "if mma { cluster.arrive.relaxed; elect { init full; init done; } bar.sync 1, 64; } "
    "if !mma { bar.sync 1, 64; cluster.arrive.relaxed; } cluster.wait;",
], ids=["no_cluster_barrier", "init_after_the_arrive", "another_warps_init"])
def test_the_reading_does_not_publish_what_the_arrive_does_not_follow(setup: str):
    text = TEARDOWN.replace("cta threads 32;", "cta threads 64;") if "!mma" in setup else TEARDOWN
    res = check_protocol(load(text.format(setup=setup), path="teardown.sync"), ON)
    assert res.verdict is Verdict.VIOLATION and "SV402" in _codes(res), res.diagnostics


def test_the_spec_without_a_cluster_barrier_stays_sv402():
    spec = os.path.join(os.path.dirname(__file__), "..", "specs", "peer_init_race.sync")
    with open(spec) as f:
        res = check_protocol(load(f.read(), path=spec), ON)
    assert res.verdict is Verdict.VIOLATION and "SV402" in _codes(res) and READING not in res.assumed


# ---- generated: the reading is a fence.mbarrier_init before each relaxed arrive ------------------------------

ATOMS = ("fence.mbarrier_init;", "cluster.arrive.relaxed;", "cluster.wait;",
         "elect { arrive.release.cluster mb @ cta ^ 1; }", "wait.acquire.cluster mb parity 0;")


def _program(first: tuple[str, ...], second: tuple[str, ...]) -> str:
    """Each CTA initializes its own `mb`, then runs its sequence; a cluster barrier before the exit."""
    body = "\n".join(f"  if cta == {c} {{ {' '.join(seq)} }}" for c, seq in enumerate((first, second)) if seq)
    return (f"protocol gen {{\n  cluster 2;\n  cta threads 32;\n  mbarrier mb count 1;\n  elect {{ init mb; }}\n"
            f"{body}\n  cluster.sync;\n}}\n")


def _programs() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each CTA: up to three distinct atoms in some order (86 sequences); the pairs with each unordered pair once
    (the pair (a, b) and (b, a) are the same program up to the ranks): 3,741 programs."""
    seqs = [s for n in range(4) for s in itertools.permutations(ATOMS, n)]
    return [(a, b) for i, a in enumerate(seqs) for b in seqs[i:]]


def _search(text: str, reading: bool, reduce: bool = True) -> tuple[str, frozenset[str], bool]:
    protocol = load(text, path="gen.sync")
    assume = Assumptions(relaxed_arrive_publishes_init=reading)
    res = explore(protocol, Budget(100_000, 60.0), Machine(protocol, assume), reduce=reduce)
    return res.verdict.value, frozenset(d.code for d in res.diagnostics if d.is_error), READING in assume.used


def _slice(every: int, offset: int) -> dict[str, int]:
    tally = {"programs": 0, "used": 0, "changed": 0}
    for pair in _programs()[offset::every]:
        text = _program(*pair)
        fenced = text.replace("cluster.arrive.relaxed;", "fence.mbarrier_init; cluster.arrive.relaxed;")
        read = _search(text, True)
        assert read[:2] == _search(fenced, False)[:2], (read, text)
        assert read[:2] == _search(text, True, reduce=False)[:2], (read, text)
        letter = _search(text, False)
        tally["programs"] += 1
        tally["used"] += read[2]
        if letter[:2] != read[:2]:
            # what the reading changes is a finding about the init's visibility, and only where it acted
            tally["changed"] += 1
            assert read[2] and letter[0] == "violation" and letter[1] - read[1] <= {"SV401", "SV402"}, \
                (letter, read, text)
    return tally


def test_the_reading_is_a_fence_before_each_relaxed_arrive_on_a_slice():
    tally = _slice(30, 7)  # 125 programs, the reading changing the answer of 6
    assert tally["programs"] >= 120 and tally["changed"] >= 3, tally


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="every generated program: minutes on a two-core host; run with SYNCVERIFY_SLOW=1")
def test_the_reading_is_a_fence_before_each_relaxed_arrive_on_every_program():
    tally = _slice(1, 0)
    assert tally["programs"] >= 3700 and tally["changed"] >= 20, tally
