"""The hardware harness of the CUTLASS sm_90 GEMM (bench/cutlass_gpu/): the runner's parsing here, and the
unseeded kernel run from its checked PTX on a Hopper GPU (marker `gpu`; skipped with the reason elsewhere)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "cutlass_gpu"
BUILD = Path(os.environ.get("SV_CUTLASS_BUILD", ROOT / "build" / "cutlass"))

def _load(name: str):  # type: ignore[no-untyped-def]
    """A script of bench/cutlass_gpu/ as a module (it is not a package: it runs on the GPU machine as is)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


cr = _load("cutlass_run")


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
    """Each variant's PTX is committed (the checker's input) or, for seed 5, built from the seeded headers;
    the two-stage seeds are the one committed seeds PTX with its constant rewritten."""
    data = ROOT / "tests" / "data" / "ptx"
    for v in cr.VARIANTS:
        if v.cluster == "1x1_s2":
            assert v.ptx == "sm90_gemm_coop_1x1_s2" or v.ptx in {f"sm90_gemm_coop_1x1_s2_seed{n}" for n in (2, 3, 5)}
            assert (data / "cutlass_seeds" / "sm90_gemm_coop_1x1_s2_seeds.ptx.gz").exists()
            assert (data / "sm90_gemm_coop_1x1_s2.ptx.gz").exists()
            continue
        committed = [data / f"{v.ptx}.ptx.gz", data / "cutlass_seeds" / f"{v.ptx}.ptx.gz"]
        assert any(p.exists() for p in committed) or v.ptx.endswith("_seed5"), v.ptx
        assert v.cluster.removeprefix("pp") == ("1x1" if "1x1" in v.ptx else "2x1")
        assert v.cluster.startswith("pp") == ("pingpong" in v.ptx)
    assert "-DSV_SEED=5" in (BENCH / "build.sh").read_text()


# ---- the two-stage 1x1 kernel and its seeds 2, 3, 5 (decided by the checker at K=192) --------------------

S2 = [v for v in cr.VARIANTS if v.name.startswith("s2_")]
SEEDS_PTX = ROOT / "tests" / "data" / "ptx" / "cutlass_seeds" / "sm90_gemm_coop_1x1_s2_seeds.ptx.gz"


def test_only_with_a_trailing_underscore_is_a_prefix() -> None:
    assert [v.name for v in cr.VARIANTS if cr.selected(v.name, "s2_")] == [v.name for v in S2]
    assert len(S2) == 7 and {v.mnk[2] for v in S2} == {192, 2048}
    # without the underscore a partial name picks nothing; a full name picks itself only
    assert not any(cr.selected(v.name, "s2") for v in cr.VARIANTS)
    assert [v.name for v in cr.VARIANTS if cr.selected(v.name, "coop_2x1")] == ["coop_2x1"]
    # the 2x1 seeds' prefix does not reach the two-stage seeds
    picked = [v.name for v in cr.VARIANTS if cr.selected(v.name, "seed2_,s2_seed3_")]
    assert picked == ["seed2_producer_acquire_skipped", "seed2_producer_acquire_skipped_k2048",
                      "s2_seed3_arrival_count_plus_one"]


def test_each_two_stage_variant_carries_the_checkers_decided_verdict() -> None:
    """The recorded check (check.sh, FIELDS=fields_1x1_s2) of each variant decided it, as the seed predicts:
    the unseeded kernel safe, each race an SV302 at the TMA copy, the hang an SV201 at the wait."""
    for v in S2:
        got = cr.checker_says(v)
        assert got is not None, v.name
        assert got["verdict"] == ("safe" if v.bug == "none" else "violation"), (v.name, got)
        codes = {d.split()[0] for d in got["diagnostics"]}
        if v.bug == "race":
            assert "SV302" in codes and "SV201" not in codes, (v.name, codes)
        if v.bug == "deadlock":
            assert codes == {"SV201"}, (v.name, codes)
        launch = cr.checked_launch(v)
        assert launch == {"grid": [1, 2, 1], "block": 384, "smem": 100352}, (v.name, launch)
    # a variant without a recorded check says so, and guesses nothing
    assert cr.checker_says(cr.VARIANTS[0]) is None and cr.checked_launch(cr.VARIANTS[0]) is None


def test_a_launch_other_than_the_checked_one_is_flagged() -> None:
    v = next(v for v in S2 if v.name == "s2_seed3_arrival_count_plus_one")
    rec = {"grid": [1, 2, 1], "block": 384, "smem": 100352}
    assert cr.launch_as_checked(rec, v) is True
    assert cr.launch_as_checked(dict(rec, smem=231424), v) is False  # six stages' shared memory
    assert cr.launch_as_checked(dict(rec, grid=[2, 1, 1]), v) is False
    assert cr.launch_as_checked({"outcome": "fault"}, v) is None


def test_build_rewrites_the_seed_constant_as_the_tests_do() -> None:
    """build.sh's rewrite of `sv_seed` is the one tests/test_ptx_cutlass.py checks; where built, each seed's
    PTX is that rewrite byte for byte and its cubin holds the two-stage kernel the PTX declares."""
    from tests.test_ptx_cutlass import SEED_CONST

    assert f"SEED_CONST='{SEED_CONST}'" in (BENCH / "build.sh").read_text()
    src = gzip.decompress(SEEDS_PTX.read_bytes()).decode()
    entry = re.search(r"^\.entry (\S+)\(", src, re.M)
    assert entry and "MainloopSm90TmaGmmaWarpSpecializedILi2E" in entry.group(1)  # StageCount<2>
    assert re.search(r"^\.maxntid 384, 1, 1$", src, re.M)  # the host program's 384 threads
    if not (BUILD / "sm90_gemm_coop_1x1_s2_seed3.cubin").exists():
        pytest.skip(f"not built: run bench/cutlass_gpu/build.sh (looked in {BUILD})")
    for n in (2, 3, 5):
        built = (BUILD / f"sm90_gemm_coop_1x1_s2_seed{n}.ptx").read_text()
        assert built == src.replace(SEED_CONST, SEED_CONST.replace("9;", f"{n};")), n
        assert (b".text." + entry.group(1).encode()) in (BUILD / f"sm90_gemm_coop_1x1_s2_seed{n}.cubin").read_bytes()
    assert (BUILD / "gemm_run_1x1_s2").exists()


# The hung waits of the seed-3 counterexample, as hung_waits.py reads them (checks/*.waits.json), and rows of
# `info cuda threads` with their nvdisasm call sites, as where_threads_wait gives them.
WAITS = [{"wait": "wait on mb0[2] for parity 0", "warps": [0],
          "sites": ["cutlass_seeded/cutlass/arch/barrier.h:424", "cutlass_seeded/cutlass/arch/barrier.h:371"]},
         {"wait": "wait on mb0[0] for parity 1", "warps": [4, 5, 6, 7, 8, 9, 10, 11],
          "sites": ["cutlass_seeded/cutlass/arch/barrier.h:470", "cutlass_seeded/cutlass/arch/barrier.h:366"]}]
PRODUCER = ["cutlass/arch/barrier.h:424", "cutlass/arch/barrier.h:371", "cutlass/pipeline/sm90_pipeline.hpp:513"]
CONSUMER = ["cutlass/arch/barrier.h:470", "cutlass/arch/barrier.h:366", "cutlass/pipeline/sm90_pipeline.hpp:621"]


def _rows(consumer: list[str]) -> list[dict]:
    rows = []
    for cta in (0, "0,1,0"):
        rows += [{"cta": cta, "threads": "0", "line": "barrier.h:424", "sites": PRODUCER},
                 {"cta": cta, "threads": "1-31", "line": "cluster_sm90.hpp:194", "sites": ["x.hpp:1"]},
                 {"cta": cta, "threads": "128-383", "line": "barrier.h:470", "sites": consumer}]
    return rows


def test_the_hung_warps_are_set_beside_the_counterexamples_waits() -> None:
    got = cr.compare_waits(_rows(CONSUMER), WAITS)
    assert got["agree"] and got["ctas"] == ["0", "0,1,0"]
    assert [w["seen_in_ctas"] for w in got["waits"]] == [["0", "0,1,0"], ["0", "0,1,0"]]
    assert [(e["cta"], e["threads"]) for e in got["elsewhere"]] == [(0, "1-31"), ("0,1,0", "1-31")]


def test_consumers_at_another_wait_do_not_agree() -> None:
    """The near twin: the consumers stopped at the producer's kind of wait (barrier.h:424), not the full
    barrier's: that wait is not seen, and the rows are listed elsewhere."""
    got = cr.compare_waits(_rows(PRODUCER), WAITS)
    assert not got["agree"]
    assert got["waits"][1]["seen_in_ctas"] == [] and got["waits"][0]["seen_in_ctas"] == ["0", "0,1,0"]
    assert ("0,1,0", "128-383") in [(e["cta"], e["threads"]) for e in got["elsewhere"]]
    # a site on another line of the same file is no match, nor a file whose name merely ends alike
    assert not cr._site_matches("cutlass_seeded/cutlass/arch/barrier.h:470", "cutlass/arch/barrier.h:471")
    assert not cr._site_matches("cutlass/arch/barrier.h:470", "cutlass/arch/xbarrier.h:470")
    assert cr.compare_waits([], WAITS)["agree"] is False


def test_the_recorded_hung_waits_are_read_from_the_deadlock() -> None:
    hw = _load("hung_waits")
    v = next(v for v in S2 if v.bug == "deadlock")
    waits = cr.hung_waits_of(v)
    assert waits is not None
    assert [(w["warps"], w["sites"][0].rsplit("/", 1)[-1]) for w in waits] == [
        ([0], "barrier.h:424"), ([4, 5, 6, 7], "barrier.h:470"), ([8, 9, 10, 11], "barrier.h:470")]
    # the reader itself, on a two-line protocol: a wait with its sites; no SV201, no waits
    check = {"results": [{"diagnostics": [{"code": "SV201", "message":
             "deadlock: w0 can never move again. Blocked: w0.w0 line 2: wait on mb0[1] for parity 1 — x"}]}]}
    sync = "protocol p {\n  wait mb0[1] parity 1;  // a/b.h:7 (inlined at a/c.h:9), ptx:12\n"
    assert hw.hung_waits(check, sync) == [{"protocol_line": 2, "wait": "wait on mb0[1] for parity 1",
                                           "warps": [0], "sites": ["a/b.h:7", "a/c.h:9"], "ptx_line": 12}]
    # the folded consumer_try_wait/consumer_wait: the try_wait the spin retries at is read too
    retried = sync.replace("ptx:12\n", "ptx:12; retried at a/b.h:3 (inlined at a/d.h:4), ptx:20\n")
    assert hw.hung_waits(check, retried)[0]["retry_sites"] == ["a/b.h:3", "a/d.h:4"]
    check["results"][0]["diagnostics"][0]["code"] = "SV302"
    assert hw.hung_waits(check, sync) == []
    # the recorded consumers' waits carry consumer_wait's retry loop (barrier.h:424 in ClusterBarrier::wait)
    assert [w.get("retry_sites", [""])[0].rsplit("/", 1)[-1] for w in waits] == [
        "", "barrier.h:424", "barrier.h:424"]


def test_consumers_spinning_in_the_retry_of_their_wait_agree() -> None:
    """cuda-gdb finds the hung consumers in consumer_wait's retry loop (barrier.h:424 <- barrier.h:371), the
    try_wait the extractor folded into the wait it names at consumer_try_wait's (barrier.h:470): with the
    retry's sites recorded they agree; a wait without them (the twin above) does not."""
    retry = ["cutlass_seeded/cutlass/arch/barrier.h:424", "cutlass_seeded/cutlass/arch/barrier.h:371"]
    waits = [WAITS[0], dict(WAITS[1], retry_sites=retry)]
    got = cr.compare_waits(_rows(PRODUCER), waits)
    assert got["agree"] and [w["seen_in_ctas"] for w in got["waits"]] == [["0", "0,1,0"], ["0", "0,1,0"]]
    # the retry's sites do not stand in for another warp's: the producer's row is not the consumers' wait
    rows = [r for r in _rows(PRODUCER) if r["threads"] != "128-383"]
    assert not cr.compare_waits(rows, waits)["agree"]


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
    script = cr.gdb_script(cr.grid_blocks([2, 1, 1]), 12)
    assert script.index("run") < script.index("info cuda threads") < script.index("x/i $pc")
    assert sum(c.startswith("cuda block") for c in script) == 24
    # the two-stage 1x1 kernel's grid is 1x2x1: its second CTA is (0,1,0), not (1,0,0)
    blocks = cr.grid_blocks([1, 2, 1])
    assert blocks == [(0, 0, 0), (0, 1, 0)]
    assert "cuda block (0,1,0) thread (352,0,0)" in cr.gdb_script(blocks, 12)
    assert cr.grid_blocks(None) == [(0, 0, 0), (1, 0, 0)]


def test_a_cta_off_the_x_axis_keeps_its_coordinates() -> None:
    rows = cr.thread_ranges(THREADS.replace("(1,0,0)   (0,0,0)     (1,0,0)", "(0,1,0)   (0,0,0)     (0,1,0)"))
    assert [r["cta"] for r in rows] == [0, 0, 0, "0,1,0"]


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
@pytest.mark.parametrize("name", ["coop_1x1", "coop_2x1", "coop_2x1_k512", "s2_coop_1x1", "s2_coop_1x1_k2048"])
def test_the_unseeded_gemm_completes_with_the_right_result(name: str) -> None:
    _gpu_or_skip()
    v = next(v for v in cr.VARIANTS if v.name == name)
    rec = cr.run_variant(str(BUILD), v, runs=3, deadline_s=10.0)
    assert rec["outcome"] == "completed", json.dumps(rec)
    assert rec["completed_runs"] == 3 and all(r["wrong"] == 0 and r["max_err"] == 0 for r in rec["runs"])
    assert rec["M"] == v.mnk[0] and rec["K"] == v.mnk[2] and rec["cluster"] == v.cluster.split("_")[0]
    if v.check:  # the two-stage kernel: launched as the checker was told it is
        assert cr.launch_as_checked(rec, v) is True, json.dumps(rec)


def test_summarize_folds_the_launches_and_keeps_the_bad_ones() -> None:
    rec = {"variant": "v", "runs": [{"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.3},
                                    {"outcome": "corrupt", "wrong": 7, "max_err": 4.0, "ms": 0.5},
                                    {"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.2}]}
    out = cr.summarize(rec)
    assert "runs" not in out and out["median_ms"] == 0.3 and out["max_err"] == 4.0 and out["max_wrong"] == 7
    assert out["first_corrupt"] == [{"outcome": "corrupt", "wrong": 7, "max_err": 4.0, "ms": 0.5, "run": 2}]
    clean = cr.summarize({"runs": [{"outcome": "completed", "wrong": 0, "max_err": 0, "ms": 0.3}]})
    assert "first_corrupt" not in clean


# ---- seed 6 (host code) and compute-sanitizer on the GEMM ------------------------------------------------


def test_seed6_runs_the_unseeded_kernel_with_the_seeded_host_program() -> None:
    """The box is encoded on the host, so seed 6 changes only the program that makes the Params: the cubin is
    the unseeded 2x1 kernel's, the host program gemm_run_2x1_seed6, built on the overlay with -DSV_SEED=6."""
    v = next(v for v in cr.VARIANTS if v.name == "seed6_b_box_unsliced")
    cmd = cr.host_command("B", v, 3, 5.0)
    assert cmd[:2] == [os.path.join("B", "gemm_run_2x1_seed6"), os.path.join("B", "sm90_gemm_coop_2x1.cubin")]
    assert cr.host_command("B", cr.VARIANTS[1], 3, 5.0)[0] == os.path.join("B", "gemm_run_2x1")
    build = (BENCH / "build.sh").read_text()
    assert "-DSV_SEED=6 -Icutlass_seeded" in build and "-o gemm_run_2x1_seed6" in build
    overlay = _load_overlay()
    tma = [e for e in overlay.EDITS if e[0] == overlay.TMA]
    assert len(tma) == 1 and "multicast = num_multicast" in tma[0][2] and "SV_SEED == 6 ? 1u" in tma[0][3]
    # every edit keeps the other seeds' meaning: seed 6's line is the shipped one unless SV_SEED is 6
    assert tma[0][3].replace("SV_SEED == 6 ? 1u : num_multicast", "num_multicast") == tma[0][2]


def _load_overlay():  # type: ignore[no-untyped-def]
    path = ROOT / "tests" / "data" / "ptx" / "cutlass_seeds" / "make_overlay.py"
    spec = importlib.util.spec_from_file_location("make_overlay", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SANITIZER_LOG = """\
========= COMPUTE-SANITIZER
========= Invalid __shared__ write of size 16 bytes
=========     at void cutlass::device_kernel<...>(T1::Params)+0x1f30 in /src/cute/arch/copy_sm90.hpp:153
=========     by thread (5,0,0) in block (0,1,0)
=========     Address 0x38010 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main [0x1234] in gemm_run
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call.
========= Error: Race reported between Write access at void k()+0x90 in /src/barrier.h:424
=========     and Read access at void k()+0xa0 in /src/barrier.h:470 [8 hazards]
=========
========= ERROR SUMMARY: 2 errors
{"variant": "s2_seed2_producer_acquire_skipped", "outcome": "fault"}
"""


def test_sanitizer_findings_keep_the_summary_and_each_report_with_its_place() -> None:
    got = cr.sanitizer_findings(SANITIZER_LOG)
    assert got["summary"] == ["ERROR SUMMARY: 2 errors"]
    assert got["first"] == [
        "Invalid __shared__ write of size 16 bytes | at void cutlass::device_kernel<...>(T1::Params)+0x1f30 in "
        "/src/cute/arch/copy_sm90.hpp:153",
        "Error: Race reported between Write access at void k()+0x90 in /src/barrier.h:424 | and Read access at "
        "void k()+0xa0 in /src/barrier.h:470 [8 hazards]"]
    assert cr.parse_record(SANITIZER_LOG) == {"variant": "s2_seed2_producer_acquire_skipped", "outcome": "fault"}
    assert cr.sanitizer_findings("") == {"summary": [], "first": []}


def test_no_sanitizer_is_reported_as_missing_not_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    v = next(v for v in cr.VARIANTS if v.name == "s2_coop_1x1")
    got = cr.run_under_sanitizer(str(tmp_path), v, "racecheck", 5.0, str(tmp_path))
    assert got == {"tool": "racecheck", "error": "compute-sanitizer not found on PATH"}


def test_each_record_says_whether_the_hardware_shows_the_seed() -> None:
    by = {v.name: v for v in cr.VARIANTS}
    assert cr.agreement(by["coop_2x1"], {"outcome": "completed"}).startswith("AGREES")
    assert cr.agreement(by["coop_2x1"], {"outcome": "corrupt"}).startswith("DISAGREES")
    hang = {"outcome": "hung", "waits_vs_counterexample": {"agree": True}}
    assert cr.agreement(by["s2_seed3_arrival_count_plus_one"], hang) == \
        "AGREES (hang at the counterexample's waits)"
    assert "not at" in cr.agreement(by["s2_seed3_arrival_count_plus_one"],
                                    {"outcome": "hung", "waits_vs_counterexample": {"agree": False}})
    assert cr.agreement(by["s2_seed3_arrival_count_plus_one"], {"outcome": "completed"}).startswith("DISAGREES")
    assert cr.agreement(by["seed6_b_box_unsliced"], {"outcome": "hung"}) == "AGREES (race: hung)"
    assert cr.agreement(by["s2_seed2_producer_acquire_skipped"], {"outcome": "fault"}) == "AGREES (race: fault)"
    # a race every launch ran past is not forced, never agreement and never a contradiction
    got = cr.agreement(by["s2_seed5_release_before_wait"], {"outcome": "completed", "completed_runs": 20})
    assert got.startswith("NOT FORCED (race: 20 launches completed exactly")
    assert cr.agreement(by["s2_seed5_release_before_wait"], {"outcome": "error"}) == "DISAGREES (error)"
