"""End-to-end checks on a Hopper GPU (marker `gpu`; skipped with the reason where there is none).

Each test runs a committed kernel through the standalone runner, in child processes with a deadline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncverify.gpu import outcome as oc

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"

pytestmark = pytest.mark.gpu


def _gpu_or_skip() -> None:
    try:
        from cuda.core import Device

        dev = Device()
        dev.set_current()
        cc = dev.compute_capability
    except Exception as err:  # no cuda.core, no driver, no device
        pytest.skip(f"no usable GPU: {type(err).__name__}: {err}")
    if (cc[0], cc[1]) != (9, 0):
        pytest.skip(f"needs an sm_90 (Hopper) GPU, found compute capability {cc[0]}.{cc[1]}")


def _run(name: str, repeat: int = 3):
    _gpu_or_skip()
    from syncverify.gpu import runner

    launch = json.loads((KERNELS / f"{name}.json").read_text())
    return runner.run(str(KERNELS / f"{name}.cu"), launch, repeat, deadline_s=10.0)


def test_safe_ring_completes_with_clean_data():
    res = _run("cutlass_ws_ring")
    assert [r.status for r in res.reps] == [oc.COMPLETED] * 3, runner_text(res)


def test_cluster_multicast_ring_completes():
    res = _run("cluster_multicast_ring")
    assert all(r.status == oc.COMPLETED for r in res.reps), runner_text(res)


def test_deadlock_hangs_where_the_counterexample_says():
    res = _run("tilelang_bar_h_deadlock", repeat=2)
    from syncverify.check import check_path

    verdict = check_path(str(ROOT / "specs/tilelang_bar_h_deadlock.sync"))
    blocked = set().union(*(oc.model_blocked_lines(d.message) for d in verdict.diagnostics if d.code == "SV201"))
    agree, why = oc.agreement({"SV201"}, blocked, res.reps)
    assert agree, why + "\n" + runner_text(res)


def test_peer_init_race_replay_shows_the_bug():
    res = _run("replay/peer_init_race", repeat=2)
    assert any(r.status in (oc.HANG, oc.CORRUPT, oc.FAULT) for r in res.reps), runner_text(res)


def runner_text(res) -> str:
    from syncverify.gpu import runner

    return runner.format_result(res)
