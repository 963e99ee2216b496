"""Lanes of one warp that give a synchronizing instruction different operands (#33, deliverable 3).

Extraction refused every such instruction ("lanes of one warp give this instruction different
operands"). An arrival, a tx count or a TMA load whose lanes disagree is now one event per group of
lanes that agree, written under a guard naming them (ptx/lane_operands.py); single lanes each arriving
on the barrier of the CTA whose rank is the lane become `if lane < 2 { arrive … m @ lane; }`, the
form docs/language.md §6.1 gives DeepGEMM's `empty_barrier_arrive`. The kernels are
tests/data/ptx/lanes/lane_rank.cu, compiled with nvcc here (skipped without it):

* lane_rank: lane r releases the stage to CTA r -- safe on every engine;
* lane_rank_own: every lane releases to its own CTA, the counts still adding up -- the producer
  overwrites the peer's copy while the peer reads it, SV302 on every engine;
* lane_store_halves: two lanes each store one half with a bulk copy and wait for their own bulk
  group -- lane-guarded stores and groups (bulk groups are per thread: tests/test_lane_bulk_groups.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from syncverify.check import Options, check_protocol
from syncverify.lang import load
from syncverify.ptx.extract import compile_cu, extract, load_module
from syncverify.ptx.launch import Launch

DATA = Path(__file__).parent / "data" / "ptx" / "lanes"
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
LAUNCH = Launch(block=(64, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1))


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_cu(str(DATA / "lane_rank.cu"), out_dir=str(tmp_path_factory.mktemp("lane_rank")))


def _body(text: str) -> list[str]:
    return [ln.split("//")[0].strip() for ln in text.splitlines() if ln.split("//")[0].strip()]


def _codes(text: str, engine: str) -> tuple[str, set[str]]:
    res = check_protocol(load(text, path="x.sync"), Options(engine=engine, timeout=300))
    return res.verdict.value, {d.code for d in res.diagnostics if d.is_error}


def test_lane_r_arriving_on_cta_r_is_written_at_lane(ptx: str) -> None:
    body = _body(extract(load_module(ptx), LAUNCH, "lane_rank").text)
    assert "if lane < 2 { arrive.release.cluster mb0[1] @ lane; }" in body
    # the producer's arrivals, one thread's own operands, stay elected
    assert "arrive.release.cluster mb0[0] @ 1;" in body


def test_lanes_agreeing_on_the_barrier_are_one_guarded_arrival(ptx: str) -> None:
    body = _body(extract(load_module(ptx), LAUNCH, "lane_rank_own").text)
    assert "if lane < 2 { arrive.release.cluster mb0[1]; }" in body  # two arrivals on its own CTA's barrier
    assert not any("@ lane" in line for line in body)


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_lane_rank_release_is_safe_and_its_own_rank_twin_races(ptx: str, engine: str) -> None:
    if engine == "bmc" and not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip("the solver takes about 30 s on the two extracted protocols (2026-12-06); the explicit engine "
                    "and z3 run in CI; run with SYNCVERIFY_SLOW=1")
    mod = load_module(ptx)
    assert _codes(extract(mod, LAUNCH, "lane_rank").text, engine) == ("safe", set())
    verdict, codes = _codes(extract(mod, LAUNCH, "lane_rank_own").text, engine)
    # the producer's overwrite of the peer's copy races the peer's read (SV302, its RAW twin SV301 on
    # another interleaving); the explicit search, run whole, also finds a phase completed twice
    # before its waiter saw it (SV502): the peer's barrier gets no arrival from this CTA at all
    assert verdict == "violation" and "SV302" in codes and codes <= {"SV301", "SV302", "SV502"}


def test_lane_rank_release_exports_to_promela(ptx: str) -> None:
    from syncverify.export import export_model

    model = export_model(load(extract(load_module(ptx), LAUNCH, "lane_rank").text, path="x.sync"))
    assert "proctype" in model.text


def test_two_lanes_storing_halves_extract_with_their_own_groups(ptx: str) -> None:
    """Refused before ("per-thread bulk async-group"); tests/test_lane_bulk_groups.py checks it and its seed."""
    body = _body(extract(load_module(ptx), Launch(block=(64, 1, 1)), "lane_store_halves").text)
    assert sum(ln.startswith("if lane == 1 { tma.store") for ln in body) == 1
    assert "if lane < 2 { bulk.commit; }" in body and "if lane < 2 { bulk.wait_read 0; }" in body


def test_two_executions_of_one_per_lane_arrival_stay_two_statements() -> None:
    """The same instruction run twice back to back (a loop of nothing but the release): its lanes' groups
    of each execution are one statement each, never folded into one (which would drop an execution's
    arrivals)."""
    from syncverify.ptx.launch import Event
    from syncverify.ptx.parse import Instr
    from syncverify.ptx.skeleton import _Ctx

    ins = Instr("mbarrier.arrive.release.cluster.shared::cluster.b64", (), None, False, 1, 1, None)

    def arrival(lane: int) -> Event:  # lane r on CTA r's barrier at offset 0
        return Event("arrive", ((lane, 0), 1, "release", "cluster"), 1 << lane, ins, per_lane=True)

    ctx = _Ctx(None, {0: "mb0"}, [], [])  # type: ignore[arg-type]
    texts = [s.text for s in ctx.statements(0, [arrival(0), arrival(1), arrival(0), arrival(1)], 0xFFFFFFFF)]
    assert texts == ["if lane < 2 { arrive.release.cluster mb0 @ lane; }"] * 2
    # one lane alone on another CTA than its rank is written as it is, under its own guard
    texts = [s.text for s in ctx.statements(0, [Event("arrive", ((1, 0), 1, "release", "cluster"), 1, ins,
                                                      per_lane=True), arrival(1)], 0xFFFFFFFF)]
    assert texts == ["if lane == 0 { arrive.release.cluster mb0 @ 1; }",
                     "if lane == 1 { arrive.release.cluster mb0 @ 1; }"]
