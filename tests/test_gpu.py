"""End-to-end checks on a Hopper GPU (marker `gpu`; skipped with the reason where there is none).

Each test runs a kernel of kernels/ through the standalone runner, in child processes with a deadline: a
committed one, or a replay kernel (kernels/replay/ is not committed) written first, as
`python3 -m syncverify.codegen.golden --replay` writes it.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile
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


@functools.cache
def _replay_dir() -> Path:
    """The replay kernels, written once, before the first test that runs one: they follow from the checker's
    search, and kernels/replay/ is not committed (syncverify/codegen/golden.py)."""
    from syncverify.codegen.golden import generate

    out = Path(tempfile.mkdtemp(prefix="syncverify-replay-"))
    atexit.register(shutil.rmtree, out, True)
    cwd = os.getcwd()
    os.chdir(ROOT)  # the launch descriptions name specs by their path relative to the repository
    try:
        files = generate(Path("specs"), replay=True)
    finally:
        os.chdir(cwd)
    for rel, text in files.items():
        if rel.startswith("replay/"):
            (out / rel).parent.mkdir(exist_ok=True)
            (out / rel).write_text(text)
    return out


def _kernel(name: str) -> Path:
    """Where kernels/NAME (.cu and .json) lies: committed, or for replay/NAME where _replay_dir wrote it."""
    return (_replay_dir() if name.startswith("replay/") else KERNELS) / name


def _run(name: str, repeat: int = 3):
    _gpu_or_skip()
    from syncverify.gpu import runner

    launch = json.loads(_kernel(f"{name}.json").read_text())
    return runner.run(str(_kernel(f"{name}.cu")), launch, repeat, deadline_s=10.0)


def test_safe_ring_completes_with_clean_data():
    res = _run("cutlass_ws_ring")
    assert [r.status for r in res.reps] == [oc.COMPLETED] * 3, runner_text(res)


def test_cluster_multicast_ring_completes():
    res = _run("cluster_multicast_ring")
    assert all(r.status == oc.COMPLETED for r in res.reps), runner_text(res)


def _hangs_where_the_counterexample_says(name: str) -> None:
    res = _run(name, repeat=2)
    from syncverify.check import check_path

    verdict = check_path(str(ROOT / f"specs/{name}.sync"))
    blocked = set().union(*(oc.model_blocked_lines(d.message) for d in verdict.diagnostics if d.code == "SV201"))
    agree, why = oc.agreement({"SV201"}, blocked, res.reps)
    assert agree, why + "\n" + runner_text(res)


def test_deadlock_hangs_where_the_counterexample_says():
    _hangs_where_the_counterexample_says("tilelang_bar_h_deadlock")


def test_peer_init_race_replay_shows_the_bug():
    res = _run("replay/peer_init_race", repeat=2)
    assert any(r.status in (oc.HANG, oc.CORRUPT, oc.FAULT) for r in res.reps), runner_text(res)


def _safe_replays() -> list[str]:
    """Replay kernels of the specs whose header expects no error: the instrumentation with every hold."""
    from syncverify.lang import load

    index = json.loads((KERNELS / "index.json").read_text())["specs"]
    safe = []
    for e in index:
        if e.get("replay"):
            expect = load(str(ROOT / e["spec"])).expect
            if expect is not None and not expect.errors:
                safe.append(e["replay"][:-3])
    return safe


@pytest.mark.parametrize("name", _safe_replays())
def test_safe_specs_stay_clean_under_the_replay_instrumentation(name):
    res = _run(name, repeat=2)
    assert [r.status for r in res.reps] == [oc.COMPLETED] * 2, runner_text(res)


def _corrupt_reads(name: str) -> list[tuple[dict, str]]:
    """Run a replay kernel 3 times; each run must be corrupt: its first wrong read, with the runner's text."""
    res = _run(name, repeat=3)
    assert [r.status for r in res.reps] == [oc.CORRUPT] * 3, runner_text(res)
    return [(rep.corrupt["first"][0], runner_text(res)) for rep in res.reps]


def test_per_warp_release_replay_shows_the_overwriting_write():
    for first, res_text in _corrupt_reads("replay/cutlass_ws_ring_per_warp_release"):
        # the read the trace names (consumer[0], line 49, k=0) saw the producer's next copy into the stage
        assert first["line"] == 49 and first["occurrence"] == 0 and "line 41" in first["seen"], res_text
        assert first["seen"].endswith("#2"), res_text
        assert "step" in first.get("trace_step", ""), res_text


def test_wgmma_release_before_wait_replay_shows_the_overwriting_copy():
    res = _run("replay/wgmma_release_before_wait", repeat=3)
    for rep in res.reps:
        assert rep.status == oc.CORRUPT, runner_text(res)
        first = rep.corrupt["first"][0]
        # the wgmma the trace names (line 45, k=0) read the producer's next copy into the stage (line 37, #2),
        # whole or torn: on the H200 (2026-12-02 04:32 UTC) one run of three read half of it ("a mix of two
        # writes", 24216 between the first copy's 24200 and the next copy's 24232), the copy landing mid-read
        assert first["line"] == 45 and first["occurrence"] == 0, runner_text(res)
        assert ("line 37" in first["seen"] and first["seen"].endswith("#2")) or \
            "a mix of two writes" in first["seen"], runner_text(res)


def test_tma_store_without_fence_replay_shows_stale_data():
    res = _run("replay/tma_store_no_fence", repeat=3)
    for rep in res.reps:
        assert rep.status == oc.CORRUPT and rep.corrupt.get("stores"), runner_text(res)


# The region, cp.async and per-lane kernels (docs/gpu-agreement.md, "Sub-slot regions and cp.async in the
# emitter"): a part write that lands in another warp's part, a copy read before it is retired, or a lane
# checked against another lane's stamp would each show here as corrupt data on a safe spec.
NEW_SAFE = ["cutlass_epilogue_warp_parts", "cp_async_mbarrier_noinc", "cutlass_sm80_multistage_cp_async",
            "lane_reduction_reads"]


@pytest.mark.parametrize("name", NEW_SAFE)
def test_safe_region_cp_async_and_lane_kernels_complete_with_clean_data(name):
    res = _run(name)
    assert [r.status for r in res.reps] == [oc.COMPLETED] * 3, runner_text(res)


def test_cp_async_arrive_without_noinc_hangs_where_the_counterexample_says():
    _hangs_where_the_counterexample_says("cp_async_mbarrier_inc_hang")


def test_one_release_replay_shows_lane_1_reading_the_next_write():
    """Lanes 1..3 read red[lane] after lane 0's release and the worker's next write (the late-lanes hold)."""
    for first, text in _corrupt_reads("replay/lane_reduction_reads_one_release"):
        assert first["line"] == 36 and first["occurrence"] == 0 and "line 27" in first["seen"], text


def test_no_sync_replay_shows_the_read_before_the_other_warps_copy():
    """Warp 0's line-22 read of warp 1's part of stage 0 comes before warp 1's cp.async into it (the gated
    order, no hold), and is checked against that copy, which it was due to see (replay._raw_read).

    Prediction, written before the kernel ran: corrupt in every run, the first wrong read warp 0's line 22
    #0 at step 7/8 of the counterexample, expected mma[1]'s line-15 copy #0, seen the initial content.
    (The H200 run of 2026-12-02 03:46 UTC was of the earlier late-process hold, which read after the copy
    and was never wrong at line 22: docs/gpu-agreement.md.)"""
    for first, text in _corrupt_reads("replay/cutlass_sm80_multistage_cp_async_no_sync"):
        assert first["line"] == 22 and first["occurrence"] == 0 and first["reader"].startswith("mma[0]"), text
        assert "line 15" in first["expected"] and first["seen"] == "nobody (initial content)", text
        assert "step 7/8" in first.get("trace_step", ""), text


def test_unobserved_phase_replay_is_reported_not_forced():
    """SV502 leaves the data right and no wait blocked: the clean replay is "not forced", not agreement.

    Prediction, written before the kernel ran: completed 10/10 with clean data."""
    name = "replay/nvfuser_cb_prologue_unobserved_phase"
    res = _run(name)
    replay = json.loads(_kernel(f"{name}.json").read_text())["replay"]
    agree, why = oc.agreement({"SV502"}, set(), res.reps, replay)
    assert [r.status for r in res.reps] == [oc.COMPLETED] * 3 and not agree and "not forced" in why, \
        runner_text(res)


def _sanitize(name: str, tool: str):
    _gpu_or_skip()
    import shutil

    if shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH")
    from syncverify.gpu import runner

    launch = json.loads(_kernel(f"{name}.json").read_text())
    return runner.run(str(_kernel(f"{name}.cu")), launch, 1, deadline_s=3.0, sanitize=tool)


def test_synccheck_reports_the_missing_wait_of_the_unobserved_phase():
    res = _sanitize("nvfuser_cb_no_war_wait", "synccheck")
    assert res.sanitizer is not None and any("Missing wait" in f.kind for f in res.sanitizer.findings), \
        runner_text(res)


def test_racecheck_is_clean_on_the_safe_ring():
    res = _sanitize("cutlass_ws_ring", "racecheck")
    assert res.sanitizer is not None and res.sanitizer.ran and res.sanitizer.clean, runner_text(res)


def runner_text(res) -> str:
    from syncverify.gpu import runner

    return runner.format_result(res)
