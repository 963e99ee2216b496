"""The hardware harness of the CUTLASS sm_90 GEMM (bench/cutlass_gpu/): the runner's parsing here, and the
unseeded kernel run from its checked PTX on a Hopper GPU (marker `gpu`; skipped with the reason elsewhere)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "cutlass_gpu"
BUILD = Path(os.environ.get("SV_CUTLASS_BUILD", ROOT / "build" / "cutlass"))

_spec = importlib.util.spec_from_file_location("cutlass_run", BENCH / "cutlass_run.py")
assert _spec and _spec.loader
cr = importlib.util.module_from_spec(_spec)
sys.modules["cutlass_run"] = cr
_spec.loader.exec_module(cr)


def test_the_runner_imports_neither_z3_nor_lark() -> None:
    """It must run on the GPU machine, where the checker's dependencies are missing."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['cutlass_run.py', '--list']\n"
            "try:\n"
            f"    runpy.run_path({str(BENCH / 'cutlass_run.py')!r}, run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('loaded:', sorted(m for m in sys.modules if m.split('.')[0] in ('z3', 'lark', 'syncverify')))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "seed3_arrival_count_plus_one" in p.stdout
    assert "loaded: []" in p.stdout


def test_every_variant_runs_a_checked_ptx() -> None:
    """Each variant's PTX is committed (the checker's input) or, for seed 5, built from the seeded headers."""
    for v in cr.VARIANTS:
        data = ROOT / "tests" / "data" / "ptx"
        committed = [data / f"{v.ptx}.ptx.gz", data / "cutlass_seeds" / f"{v.ptx}.ptx.gz"]
        assert any(p.exists() for p in committed) or v.ptx.endswith("_seed5"), v.ptx
        assert v.cluster == ("1x1" if "1x1" in v.ptx else "2x1")
    assert "-DSV_SEED=5" in (BENCH / "build.sh").read_text()


def test_a_missing_build_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cr.main(["--build", str(tmp_path), "--only", "coop_2x1", "--out", str(tmp_path)]) == 2
    assert "not built" in capsys.readouterr().err


def test_the_host_record_is_the_last_json_line() -> None:
    out = 'noise\n{"variant": "v", "outcome": "hung", "hung_at_run": 1}\n'
    assert cr.parse_record(out) == {"variant": "v", "outcome": "hung", "hung_at_run": 1}
    assert cr.parse_record("no record\n{broken") is None


def test_where_warps_wait_reads_the_innermost_frame_of_each_warp() -> None:
    log = ("@@ cta 0 warp 0\n[Switching focus to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0)]\n"
           "#0  0x00007f in cutlass::arch::ClusterBarrier::wait () at cutlass/arch/barrier.h:470\n"
           "#1  0x00007e in consumer_wait () at cutlass/pipeline/sm90_pipeline.hpp:613\n"
           "@@ cta 0 warp 5\nInvalid coordinates requested. CUDA focus unchanged.\n")
    assert cr.where_warps_wait(log) == {"cta 0 warp 0": "cutlass/arch/barrier.h:470",
                                        "cta 0 warp 5": "Invalid coordinates requested. CUDA focus unchanged."}
    script = cr.gdb_script(2, 12)
    assert script.index("run") < script.index("info cuda threads")
    assert sum(c.startswith("cuda block") for c in script) == 24


def _gpu_or_skip() -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA driver here (nvidia-smi not found)")
    p = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip().startswith("9.0"):
        pytest.skip(f"needs an sm_90 GPU: nvidia-smi says {p.stdout.strip() or p.stderr.strip()!r}")
    if not (BUILD / "gemm_run_2x1").exists():
        pytest.skip(f"not built: run bench/cutlass_gpu/build.sh (looked in {BUILD})")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["coop_1x1", "coop_2x1", "coop_2x1_k512"])
def test_the_unseeded_gemm_completes_with_the_right_result(name: str) -> None:
    _gpu_or_skip()
    v = next(v for v in cr.VARIANTS if v.name == name)
    rec = cr.run_variant(str(BUILD), v, runs=3, deadline_s=10.0)
    assert rec["outcome"] == "completed", json.dumps(rec)
    assert rec["completed_runs"] == 3 and all(r["wrong"] == 0 and r["max_err"] == 0 for r in rec["runs"])
