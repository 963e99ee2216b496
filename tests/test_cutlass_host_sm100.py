"""No host code to write for CUTLASS's sm100 GEMMs and example 88's Hopper FMHA (#35, 1a).

`--cutlass-problem MxNxK` on an sm100 GEMM and `--cutlass-fmha B,H,Q,K,D` on the FMHA kernel compute the
launch, the Params fields that decide control flow and the tensor maps' boxes with the kernel's own host
code (syncverify/data/cutlass_sm100_params.cu, syncverify/data/cutlass_fmha_params.cu; ptx/cutlass_host_kinds.py
picks the program from the PTX entry's type), built once with nvcc and run on the CPU.

* The 2-SM GEMM (tests/data/ptx/sm100_gemm_2sm_2x1.cu): the Params image equals its hand-written host
  program's (sm100_gemm_2sm_2x1_fields.cu, the committed .bin) byte for byte, the launch and boxes are the
  ones tests/test_ptx_sm100.py binds by hand, and extraction with them goes exactly as far as with the
  hand-written bindings (today: the MMA warp's `consumer_try_wait`, a probe).
* A 1-SM GEMM (tests/data/ptx/sm100_gemm_1sm_1x1.cu, example 71's 1-SM schedule): its launch, fields and
  boxes follow from its tile (128x128x64, fp16); a second tile is taken by the same CTA, or by a second CTA
  when the SMs are given.
* The FMHA kernel (tests/data/ptx/fmha_hopper_fwd_ws_64.cu, example 88's cooperative 128x64x64 forward
  kernel): one CTA per 128-row tile of Q per batch and head, the problem size bound, a head dim the
  kernel cannot run refused.

The first run builds each host program (nvcc, minutes on two cores; sm_100a compiles are slow); later runs
find it in the cache ($SYNCVERIFY_CACHE, else ~/.cache/syncverify/cutlass).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.cutlass_host import HostLaunch, cutlass_include, kernel_type
from syncverify.ptx.cutlass_host_kinds import FMHA, SM100_GEMM, family_of, host_launch_of
from syncverify.ptx.extract import extract, find_nvcc
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import PtxError, parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
NEEDS = pytest.mark.skipif(find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None,
                           reason="needs nvcc, the nvidia-cutlass package and c++filt")

# tests/test_ptx_sm100.py's hand-written bindings of the 2-SM GEMM at 256x128x128 (`fields 256 128 128 148`)
HAND_FIELDS = [(0, 4), (4, 16), (1920, 120), (2040, 36), (1280, 72)]
HAND_BOXES = {128: 16384, 384: 8192, 1408: 4096, 1664: 4096}
# where extraction stops today, in each kernel's PTX: the first `consumer_try_wait` (barrier.h:470) whose false
# outcome goes on to other work, a probe -- the MMA warp's in the GEMMs, the first math warpgroup's in the FMHA
PROBE_LINE = {"sm100_gemm_2sm_2x1_s2.ptx": 1804, "sm100_gemm_1sm_1x1_s2.ptx": 2203, "fmha_hopper_fwd_ws_64.ptx": 2908}


def _unzip(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return out


def _args(problem: tuple[int, ...] | None = None, fmha: tuple[int, ...] | None = None,
          sms: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(cutlass_problem=problem, cutlass_fmha=fmha, cutlass_sms=sms, cutlass_beta=0.0,
                              quiet=True)


def _host(ptx: Path, args: argparse.Namespace) -> HostLaunch:
    fn = parse_ptx_file(str(ptx)).entries()[0]
    host = host_launch_of(str(ptx), fn, [], args)
    assert host is not None
    return host


def _launch(host: HostLaunch) -> Launch:
    return Launch(block=host.block, cluster=host.cluster, grid=host.grid, dynamic_smem=host.dynamic_smem,
                  params={"0": host.param_bytes()}, tensor_bytes={("0", o): n for o, n, _ in host.boxes})


def _outcome(ptx: Path, launch: Launch) -> tuple[str, int, str]:
    """How far extraction gets: the protocol's text, or the refusal's line and message."""
    try:
        return ("extracted", 0, extract(parse_ptx_file(str(ptx)), launch).text)
    except PtxError as err:
        return ("refused", err.line, err.message)


def _reached_the_probe(ptx: Path, outcome: tuple[str, int, str]) -> None:
    """Extraction got to the kernel's first probe or beyond: extracted, or refused at that probe, or refused
    for something else than a launch value or Params byte it was not given (once probes extract)."""
    kind, line, message = outcome
    if kind == "extracted":
        return
    if "so it is a probe" in message:
        assert line == PROBE_LINE[ptx.name], (line, message)
    else:
        assert not any(w in message for w in ("--param", "--tensor-bytes", "--block", "--grid")), message


def test_the_family_is_read_from_the_entry_type(tmp_path):  # type: ignore[no-untyped-def]
    """The demangled entry types pick the programs: both sm100 GEMMs the sm100 one, the FMHA kernel its own,
    an sm90 GEMM none (the sm90 program of ptx/cutlass_host.py)."""
    if shutil.which("c++filt") is None:
        pytest.skip("needs c++filt")
    picks = {}
    for name in ("sm100_gemm_2sm_2x1_s2.ptx.gz", "sm100_gemm_1sm_1x1_s2.ptx.gz", "fmha_hopper_fwd_ws_64.ptx.gz",
                 "sm90_gemm_coop_2x1.ptx.gz"):
        ptx = _unzip(tmp_path, name)
        fn = parse_ptx_file(str(ptx)).entries()[0]
        picks[name] = family_of(kernel_type(str(ptx), fn))
    assert picks == {"sm100_gemm_2sm_2x1_s2.ptx.gz": SM100_GEMM, "sm100_gemm_1sm_1x1_s2.ptx.gz": SM100_GEMM,
                     "fmha_hopper_fwd_ws_64.ptx.gz": FMHA, "sm90_gemm_coop_2x1.ptx.gz": None}


@NEEDS
def test_the_2sm_gemm_params_equal_the_hand_written_program_byte_for_byte(tmp_path):  # type: ignore[no-untyped-def]
    """At the hand-written program's problem and SM count (256x128x128, 148 SMs) the whole Params image is
    the committed .bin; its launch and boxes are the ones bound by hand; with the default SM count (one
    cluster's 2 CTAs) only hw_info.sm_count differs, and the grid is the same (one 256x128 tile, one pair)."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    hand = (DATA / "sm100_gemm_2sm_2x1_fields_256x128x128.bin").read_bytes()
    host = _host(ptx, _args((256, 128, 128, 1), sms=148))
    assert host.image == hand
    assert (host.grid, host.block, host.cluster, host.dynamic_smem) == ((2, 1, 1), (256, 1, 1), (2, 1, 1), 83968)
    assert sorted((o, n) for o, n, _ in host.fields) == sorted(HAND_FIELDS)
    assert {o: n for o, n, _ in host.boxes} == HAND_BOXES
    default = _host(ptx, _args((256, 128, 128, 1)))
    differ = [i for i in range(len(hand)) if default.image[i] != hand[i]]
    assert differ == [2044] and default.image[2044] == 2 and default.grid == host.grid  # hw_info.sm_count


@NEEDS
def test_the_2sm_gemm_extracts_as_far_as_with_the_hand_written_bindings(tmp_path):  # type: ignore[no-untyped-def]
    """The launch from the shape alone and the hand-written one take extraction to the same point -- today
    the MMA warp's `consumer_try_wait` (PTX line 1804, barrier.h:470), a probe; past it once probes extract --
    and no refusal asks for a launch value or a Params byte."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    hand = (DATA / "sm100_gemm_2sm_2x1_fields_256x128x128.bin").read_bytes()
    theirs = Launch(block=(256, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=83968,
                    params={"0": ParamBytes(tuple((o, hand[o: o + n]) for o, n in HAND_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in HAND_BOXES.items()})
    ours = _outcome(ptx, _launch(_host(ptx, _args((256, 128, 128, 1), sms=148))))
    assert ours == _outcome(ptx, theirs)
    _reached_the_probe(ptx, ours)


@NEEDS
def test_the_2sm_gemm_from_the_command_line(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """`extract KERNEL.ptx --cutlass-problem 256x128x128`: no other flag; the refusal (if any) is at a PTX
    line with the CUDA source named, exit 2, never a missing-launch error."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    code = main(["extract", str(ptx), "--cutlass-problem", "256x128x128", "-o", str(tmp_path / "k.sync")])
    err = capsys.readouterr().err
    assert code in (0, 2) and "--cutlass-problem MxNxK for a CUTLASS GEMM" not in err
    if "so it is a probe" in err:
        assert f"{ptx}:1804:2: error: cannot extract" in err and "barrier.h:470" in err, err
    assert code == 2 or (tmp_path / "k.sync").is_file()


# ---- the 1-SM GEMM ------------------------------------------------------------------------------------

@NEEDS
def test_the_1sm_gemm_launch_fields_and_boxes_follow_from_its_tile(tmp_path):  # type: ignore[no-untyped-def]
    """128x128x128 on the 1-SM kernel: one 128x128 tile, one CTA of a 1x1 cluster, the sm100 kernel's
    six warps (MMA, scheduler, mainloop load, epilogue load, four epilogue warps: 256 threads); A and B
    boxes one 128x64 fp16 stage slice each (16 KiB, no multicast, no pair); the problem shape bound as given."""
    ptx = _unzip(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    host = _host(ptx, _args((128, 128, 128, 1)))
    assert (host.grid, host.block, host.cluster) == ((1, 1, 1), (256, 1, 1), (1, 1, 1))
    boxes = {name: n for _, n, name in host.boxes}
    assert boxes["mainloop.tma_load_a"] == boxes["mainloop.tma_load_b"] == 128 * 64 * 2
    fields = {name: (o, n) for o, n, name in host.fields}
    assert set(fields) == {"mode", "problem_shape", "scheduler", "hw_info", "epilogue.thread"}
    off, n = fields["problem_shape"]
    assert struct.unpack("<4i", host.image[off: off + n]) == (128, 128, 128, 1)
    assert host.dynamic_smem >= 2 * 2 * 128 * 64 * 2  # two stages of A and B at least


@NEEDS
def test_the_1sm_gemms_clc_scheduler_launches_a_cta_per_tile(tmp_path):  # type: ignore[no-untyped-def]
    """The 1-SM kernel names no scheduler, so it gets sm100's default, the cluster-launch-control one
    (PersistentTileSchedulerSm100): CUTLASS's get_grid_shape launches a CTA per tile whatever the SM count
    (two tiles, two CTAs; four, four), and the SM count reaches only hw_info."""
    ptx = _unzip(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    one = _host(ptx, _args((256, 128, 128, 1)))
    many = _host(ptx, _args((256, 128, 128, 1), sms=148))
    assert one.grid == many.grid and one.grid[0] * one.grid[1] * one.grid[2] == 2
    four = _host(ptx, _args((512, 128, 128, 1)))
    assert four.grid[0] * four.grid[1] * four.grid[2] == 4
    differ = {name for o, n, name in one.fields if one.image[o: o + n] != many.image[o: o + n]}
    assert differ == {"hw_info"}


@NEEDS
def test_the_2sm_gemms_static_scheduler_is_bounded_by_the_sms(tmp_path):  # type: ignore[no-untyped-def]
    """The near twin: the 2-SM kernel names StaticPersistentScheduler (sm90's persistent scheduler), whose
    grid is bounded by the SM count: 512x128 is two 256x128 pair tiles, taken by the one pair of the default
    SM count (one cluster) and by two pairs with 148 SMs."""
    ptx = _unzip(tmp_path, "sm100_gemm_2sm_2x1_s2.ptx.gz")
    assert _host(ptx, _args((512, 128, 128, 1))).grid == (2, 1, 1)
    assert _host(ptx, _args((512, 128, 128, 1), sms=148)).grid == (2, 2, 1)


@NEEDS
def test_the_1sm_gemm_extracts_to_its_mainloop_probe(tmp_path):  # type: ignore[no-untyped-def]
    """With nothing but the shape, extraction of the 1-SM kernel gets through its launch-dependent setup to
    the MMA warp's `consumer_try_wait` (barrier.h:470), the same probe as the 2-SM kernel's -- or past it."""
    ptx = _unzip(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    _reached_the_probe(ptx, _outcome(ptx, _launch(_host(ptx, _args((256, 128, 128, 1))))))


# ---- example 88's FMHA ---------------------------------------------------------------------------------

@NEEDS
def test_the_fmha_launch_and_params_from_its_own_host_code(tmp_path):  # type: ignore[no-untyped-def]
    """B=1, H=1, Q=K=256, D=64 on the cooperative 128x64x64 kernel: one CTA per 128-row tile of Q (2), per
    batch (1) and head (1); a producer warpgroup and two math warpgroups (384 threads); no cluster. The
    problem size is bound as given. Each math warpgroup takes 64 of the tile's 128 rows (TileShapeQK), so
    the Q box is one 64x64 fp16 slice, as are K's and V's (64 keys by the head dim)."""
    ptx = _unzip(tmp_path, "fmha_hopper_fwd_ws_64.ptx.gz")
    host = _host(ptx, _args(fmha=(1, 1, 256, 256, 64)))
    assert (host.grid, host.block, host.cluster) == ((2, 1, 1), (384, 1, 1), (1, 1, 1))
    fields = {name: (o, n) for o, n, name in host.fields}
    o, n = fields["problem_size"]
    assert struct.unpack("<5i", host.image[o: o + n]) == (1, 1, 256, 256, 64)
    o, n = fields["tile_scheduler"]
    assert struct.unpack("<3I", host.image[o: o + n]) == (2, 1, 1)  # IndividualTileScheduler::Params{grid}
    boxes = {name: n for _, n, name in host.boxes}
    assert boxes["mainloop.tma_load_q"] == boxes["mainloop.tma_load_k"] == boxes["mainloop.tma_load_v"] == 64 * 64 * 2


@NEEDS
def test_the_fmha_grid_follows_the_problem(tmp_path):  # type: ignore[no-untyped-def]
    """The near twins: Q of three tiles (384) and B=2, H=3 give grid (3, 2, 3); the launch but not the
    boxes change."""
    ptx = _unzip(tmp_path, "fmha_hopper_fwd_ws_64.ptx.gz")
    base = _host(ptx, _args(fmha=(1, 1, 256, 256, 64)))
    host = _host(ptx, _args(fmha=(2, 3, 384, 256, 64)))
    assert host.grid == (3, 2, 3) and host.boxes == base.boxes and host.block == base.block


def test_a_head_dim_the_fmha_kernel_cannot_run_is_refused(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """D=128 on the head-dim-64 kernel: the example's can_implement says no, so the command refuses at the
    kernel's entry (exit 2) rather than bind a Params no launch would have."""
    if find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None:
        pytest.skip("needs nvcc, the nvidia-cutlass package and c++filt")
    ptx = _unzip(tmp_path, "fmha_hopper_fwd_ws_64.ptx.gz")
    assert main(["extract", str(ptx), "--cutlass-fmha", "1,1,256,256,128"]) == 2
    err = capsys.readouterr().err
    assert "--cutlass-fmha: the host code of this CUTLASS example 88 Hopper FMHA refused the problem" in err
    assert "can_implement" in err


@NEEDS
def test_the_fmha_is_checked_safe_from_its_shape_alone(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """`check fmha.ptx --cutlass-fmha 1,1,128,64,64`: one Q tile of the two math warpgroups and one K/V tile,
    the launch, Params and boxes from the example's own host code: safe (about 51,000 states), with SV204
    warnings only (the warpgroups reach `__syncthreads` at different PTX copies, as in CUTLASS's GEMMs).
    With two K/V tiles (1,1,128,128,64) the math warpgroups' `consumer_try_wait` tokens are reached: safe in
    1.33 million states (tests/test_ptx_fmha_tokens.py, SYNCVERIFY_SLOW)."""
    ptx = _unzip(tmp_path, "fmha_hopper_fwd_ws_64.ptx.gz")
    code = main(["check", str(ptx), "--cutlass-fmha", "1,1,128,64,64"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    assert "1 safe, 0 violations, 0 inconclusive" in text
    assert set(re.findall(r"\bSV\d{3}\b", text)) <= {"SV204"}, text


def test_a_shape_flag_of_the_other_family_is_refused_at_the_entry(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """--cutlass-problem on the FMHA kernel names --cutlass-fmha, and --cutlass-fmha on a GEMM names
    --cutlass-problem; nothing is built (exit 2 before nvcc)."""
    if shutil.which("c++filt") is None:
        pytest.skip("needs c++filt")
    fmha = _unzip(tmp_path, "fmha_hopper_fwd_ws_64.ptx.gz")
    assert main(["extract", str(fmha), "--cutlass-problem", "256x256x64"]) == 2
    assert "give its problem as --cutlass-fmha B,H,Q,K,D" in capsys.readouterr().err
    gemm = _unzip(tmp_path, "sm100_gemm_1sm_1x1_s2.ptx.gz")
    assert main(["extract", str(gemm), "--cutlass-fmha", "1,1,256,256,64"]) == 2
    assert "give --cutlass-problem MxNxK" in capsys.readouterr().err


def test_a_bad_fmha_shape_is_an_input_error(capsys):  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["check", str(DATA / "ring.ptx"), "--cutlass-fmha", "1,1,256,256"])
    assert exc.value.code == 2
    assert "expected B,H,Q,K,D: five positive numbers" in capsys.readouterr().err


@NEEDS
@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                    reason="nvcc of the FMHA host program, 36 s;"
                           " the FMHA's committed PTX is checked in CI; run with SYNCVERIFY_SLOW=1")
def test_the_fmha_cu_compiles_with_the_examples_headers(capsys):  # type: ignore[no-untyped-def]
    """`extract fmha_hopper_fwd_ws_64.cu --cutlass-fmha ...`: the .cu includes the example's headers as
    88_hopper_fmha.cu does (`collective/...`, `kernel/...`), found in the pip package without an -I, and its
    PTX goes as far as the committed build's (nvcc: a minute or more)."""
    cu = DATA / "fmha_hopper_fwd_ws_64.cu"
    code = main(["extract", str(cu), "--cutlass-fmha", "1,1,256,256,64"])
    err = capsys.readouterr().err
    assert code in (0, 2) and "fatal error" not in err and "did not compile" not in err, err[:2000]
    if "so it is a probe" in err:
        assert f"{cu} (PTX from nvcc):2908:2: error: cannot extract" in err
