"""A loop whose body, for some warp, is nothing but a barrier.

PTX §3 (bar.sync): when the count is reached "the barrier is reinitialized so that it can be
immediately reused", and the arriving warp that completes the generation goes straight on. The
explicit engine used to park that warp after its own completing arrival whenever the loop brought
it back to the same `bar.sync` (the step compared pcs to decide whether the handler had moved the
process, and a loop of one barrier ends where it starts), and reported SV201 where the bmc engine
and SPIN say safe. These tests run every barrier kind in every loop shape through every engine
that can run here, each answer computed, never written down: the safe shapes must be safe
everywhere, and their near twins (one barrier too few, one trip too few) must keep their
violation everywhere.
"""

from __future__ import annotations

import pytest
from diff_engines import engines

from syncverify import load
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import OP
from syncverify.semantics.state import P_PC, P_TOKEN, P_VARS

# The barrier kinds: (cluster size, the statement(s) of one barrier)
KINDS = {
    "bar_sync": (1, "bar.sync 5, 64;"),
    "syncthreads": (1, "syncthreads;"),
    "cluster_sync": (2, "cluster.sync;"),
    "cluster_arrive_wait": (2, "cluster.arrive; cluster.wait;"),
}

# The loop shapes around barrier B: the consumer's body is the barrier alone in every one of them
SHAPES = {
    "one": "for k in 0..2 {{ {b} }}",
    "two": "for k in 0..2 {{ {b} {b} }}",
    "branch_after": "for k in 0..2 {{ {b} if producer {{ write buf; }} }}",
    "branch_before": "for k in 0..2 {{ if producer {{ write buf; }} {b} }}",
    "three_trips": "for k in 0..3 {{ {b} }}",
}


def protocol_text(kind: str, body: str) -> str:
    cluster, barrier = KINDS[kind]
    return (f"protocol t {{ cluster {cluster}; cta threads 64; role producer = warp 0; role consumer = warp 1; "
            f"smem buf bytes 64; {body.format(b=barrier)} }}")


ENGINES = [e for e in engines() if e.unavailable is None]
FAST = [e for e in ENGINES if e.name != "spin"]
SPIN = [e for e in ENGINES if e.name == "spin"]


def answers(text: str, chosen: list) -> dict[str, tuple[str, frozenset[str]]]:
    protocol = load(text, path="loop.sync")
    out = {}
    for engine in chosen:
        a = engine.run(protocol, 100_000, 60.0)
        out[engine.name] = (a.verdict, a.codes)
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_barrier_only_loop_is_safe_on_every_engine(kind, shape):
    got = answers(protocol_text(kind, SHAPES[shape]), FAST)
    assert got and all(v == ("safe", frozenset()) for v in got.values()), got


@pytest.mark.skipif(not SPIN, reason="spin or a C compiler is not installed")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_barrier_only_loop_is_safe_under_spin_and_the_explicit_engine(kind):
    got = answers(protocol_text(kind, SHAPES["one"]), [*SPIN, *(e for e in ENGINES if e.reference)])
    assert got["spin"] == got["explicit"] == ("safe", frozenset()), got


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_barrier_between_write_and_read_still_races(kind):
    """The near twin: with one barrier per trip the consumer's read of trip k and the producer's
    write of trip k+1 are unordered — a race on every engine; a second barrier orders them."""
    racy = "for k in 0..2 {{ if producer {{ write buf; }} {b} if consumer {{ read buf; }} }}"
    got = answers(protocol_text(kind, racy), FAST)
    for name, (verdict, codes) in got.items():
        assert verdict == "violation" and codes and codes <= {"SV301", "SV302"}, (name, got)
    fixed = "for k in 0..2 {{ if producer {{ write buf; }} {b} if consumer {{ read buf; }} {b} }}"
    got = answers(protocol_text(kind, fixed), FAST)
    assert all(v == ("safe", frozenset()) for v in got.values()), got


def test_one_trip_too_few_still_deadlocks():
    """The near twin of the named barrier: a warp that takes one trip fewer leaves the other's last
    `bar.sync 5, 64` at 32 of 64 threads (an explicit count is not released by exits)."""
    text = ("protocol t { cta threads 64; role a = warp 0; role b = warp 1; "
            "if a { for k in 0..2 { bar.sync 5, 64; } } if b { for k in 0..1 { bar.sync 5, 64; } } }")
    got = answers(text, FAST)
    assert all(v == ("violation", frozenset({"SV201"})) for v in got.values()), got


@pytest.mark.parametrize("barrier", ["bar.sync 5, 64;", "syncthreads;"])
def test_the_completing_warp_goes_on_around_the_loop(barrier):
    """The root: the warp whose arrival completes the generation is not parked; it stands at the
    same `bar.sync` in the next trip, with no generation token, and can arrive again."""
    machine = Machine(load(f"protocol t {{ cta threads 64; role a = warps 0..2; for k in 0..2 {{ {barrier} }} }}",
                           path="t.sync"))
    s0 = machine.initial()
    start = s0.procs[1][P_PC]
    s1 = machine.step_process(s0, 0).state
    s2 = machine.step_process(s1, 1).state
    for q in (0, 1):
        pc, vars_, token = s2.procs[q][P_PC], s2.procs[q][P_VARS], s2.procs[q][P_TOKEN]
        assert (pc, vars_, token) == (start, (1,), -1), (q, s2.procs[q])
        assert machine.programs[q].code[pc].kind == OP
    s3 = machine.step_process(s2, 1)
    assert s3 is not None and s3.violation is None
