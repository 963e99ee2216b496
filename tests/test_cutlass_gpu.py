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


# `info cuda threads` as cuda-gdb 13.0 printed it on the H200 for seed 3 at K=512 (columns trimmed)
THREADS = """  BlockIdx ThreadIdx To BlockIdx ThreadIdx Count    PC    Filename  Line
Kernel 0
*  (0,0,0)   (0,0,0)     (0,0,0)   (0,0,0)     1 0x00007ffddb7a95a0     cutlass_seeded/cutlass/arch/barrier.h   424
   (0,0,0)   (1,0,0)     (0,0,0)  (31,0,0)    31 0x00007ffddb7a95f0 cutlass_seeded/cute/arch/cluster_sm90.hpp   194
   (0,0,0) (128,0,0)     (0,0,0) (383,0,0)   256 0x00007ffddb7a90a0     cutlass_seeded/cutlass/arch/barrier.h   424
   (1,0,0)   (0,0,0)     (1,0,0)   (0,0,0)     1 0x00007ffddb7a95a0     cutlass_seeded/cutlass/arch/barrier.h   424
"""


def test_thread_ranges_are_read_from_info_cuda_threads() -> None:
    rows = cr.thread_ranges(THREADS)
    assert [(r["cta"], r["threads"], r["count"], r["line"]) for r in rows] == [
        (0, "0", 1, "cutlass_seeded/cutlass/arch/barrier.h:424"),
        (0, "1-31", 31, "cutlass_seeded/cute/arch/cluster_sm90.hpp:194"),
        (0, "128-383", 256, "cutlass_seeded/cutlass/arch/barrier.h:424"),
        (1, "0", 1, "cutlass_seeded/cutlass/arch/barrier.h:424")]


def test_pc_offsets_follow_from_one_x_i_in_the_same_function() -> None:
    log = THREADS + "=> 0x7ffddb7a95a0 <_ZN7cutlass13device_kernelIN_E+38304>:\tSYNCS.PHASECHK...\n"
    offs = cr.pc_offsets(log)
    assert offs["0x00007ffddb7a95a0"] == ("_ZN7cutlass13device_kernelIN_E", 38304)
    assert offs["0x00007ffddb7a90a0"] == ("_ZN7cutlass13device_kernelIN_E", 38304 - 0x500)
    # without the x/i line no offset can be known: none is guessed
    assert cr.pc_offsets(THREADS) == {}


# The shape of `nvdisasm -c -gi` for the GEMM (offsets and lines from the seed 3 cubin): each instruction
# whose line changed is preceded by one `//##` line per inlined call site, innermost first; ptxas moves the
# retry of a failed try_wait out of line to the end of the function, where no line info is printed.
SASS = """\t.section\t.text.kern,"ax",@progbits
\t//## File "cutlass/arch/barrier.h", line 424 inlined at "cutlass/arch/barrier.h", line 371
\t//## File "cutlass/arch/barrier.h", line 371 inlined at "cutlass/pipeline/sm90_pipeline.hpp", line 621
\t//## File "cutlass/pipeline/sm90_pipeline.hpp", line 621 inlined at "sm90_mma.hpp", line 533
\t//## File "sm90_mma.hpp", line 533 inlined at "cutlass/device_kernel.h", line 123
\t//## File "cutlass/device_kernel.h", line 123
        /*1f10*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R4 ;
        /*1f20*/              @!P1 BRA `(.L_x_31) ;
.L_x_30:
\t//## File "cutlass/arch/barrier.h", line 424 inlined at "cutlass/arch/barrier.h", line 371
\t//## File "cutlass/arch/barrier.h", line 371 inlined at "cutlass/pipeline/sm90_pipeline.hpp", line 513
\t//## File "cutlass/pipeline/sm90_pipeline.hpp", line 513 inlined at "cutlass/device_kernel.h", line 123
\t//## File "cutlass/device_kernel.h", line 123
.L_x_153:
        /*8080*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R21+URZ+0x30], R12 ;
        /*8090*/              @!P0 NANOSLEEP.SYNCS 0x989680 ;
        /*80a0*/              @!P0 SYNCS.PHASECHK.TRANS64 P0, [R21+URZ+0x30], R12 ;
        /*80b0*/              @!P0 BRA `(.L_x_153) ;
        /*80c0*/                   EXIT ;
.L_x_31:
        /*7b80*/                   MOV R5, UR4 ;
.L_x_270:
        /*7b90*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R5+URZ], R4 ;
        /*7ba0*/              @!P1 NANOSLEEP.SYNCS 0x989680 ;
        /*7bb0*/              @!P1 SYNCS.PHASECHK.TRANS64 P1, [R5+URZ], R4 ;
        /*7bc0*/              @!P1 BRA `(.L_x_31) ;
        /*7bd0*/                   BRA `(.L_x_30) ;
.L_x_99:
        /*7be0*/                   NANOSLEEP.SYNCS 0x989680 ;
        /*7bf0*/                   BRA `(.L_x_99) ;
"""


def test_a_wait_pc_names_its_cutlass_call_sites() -> None:
    (fn, insns), = cr.parse_sass(SASS).items()
    assert fn == "kern"
    sites, how = cr.call_sites(insns, 0x80a0)  # in the loop right after its line info: the producer's acquire
    assert how == "line info at the PC"
    assert sites[2] == "cutlass/pipeline/sm90_pipeline.hpp:513" and sites[-1] == "cutlass/device_kernel.h:123"


def test_an_out_of_line_retry_takes_the_call_sites_of_the_wait_that_branches_to_it() -> None:
    (_, insns), = cr.parse_sass(SASS).items()
    sites, how = cr.call_sites(insns, 0x7ba0)
    # the line in force there is the producer's (printed last, before 0x8080); the retry is the consumer's
    assert how == "out-of-line retry of the wait branching at 0x1f20"
    assert sites[2] == "cutlass/pipeline/sm90_pipeline.hpp:621"
    # a block nothing outside branches into keeps the line in force, and says so
    sites, how = cr.call_sites(insns, 0x7be0)
    assert how.startswith("line info in force") and sites[2] == "cutlass/pipeline/sm90_pipeline.hpp:513"
    assert cr.call_sites(insns, 0x1234) == ((), "offset not in the disassembly")
    ex = cr.disasm_excerpts(SASS, {("kern", 0x7ba0)}, before=3)
    assert ex[("kern", 0x7ba0)].splitlines()[-1].strip().startswith("/*7ba0*/")


def test_the_debugger_script_runs_first_then_asks_every_warp() -> None:
    script = cr.gdb_script(2, 12)
    assert script.index("run") < script.index("info cuda threads") < script.index("x/i $pc")
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
    assert rec["M"] == v.mnk[0] and rec["K"] == v.mnk[2] and rec["cluster"] == v.cluster


def test_summarize_folds_the_launches_and_keeps_the_bad_ones() -> None:
    rec = {"variant": "v", "runs": [{"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.3},
                                    {"outcome": "corrupt", "wrong": 7, "max_err": 4.0, "ms": 0.5},
                                    {"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.2}]}
    out = cr.summarize(rec)
    assert "runs" not in out and out["median_ms"] == 0.3 and out["max_err"] == 4.0 and out["max_wrong"] == 7
    assert out["first_corrupt"] == [{"outcome": "corrupt", "wrong": 7, "max_err": 4.0, "ms": 0.5, "run": 2}]
    clean = cr.summarize({"runs": [{"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.3}]})
    assert "first_corrupt" not in clean
