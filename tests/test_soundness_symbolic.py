"""`--symbolic` soundness (#31): a symbolic parameter that drives nothing, and symbolic bytes a `--param`
binding already covers, are errors (exit 2, saying why), for `check` and for `extract`.

A check "for every N" whose protocol does not depend on N is one concrete check: with the loop's trip
count bound by another value (CUTLASS's tile scheduler keeps its k-tile counts in Params beside the
problem shape's K), `--symbolic K` reported "safe for every K from 64 to 2^30". Bytes both bound and
symbolic silently lost one of the two."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.cli import main

DATA = Path(__file__).parent / "data" / "ptx"
BLOCK = ["--block", "64"]


@pytest.fixture
def ring4(tmp_path: Path) -> Path:
    """ring_state.ptx (its loop runs `k_tiles`, parameter 2, times) with a fourth u32 parameter that
    nothing reads: the K beside a bound k-tile count."""
    src = (DATA / "ring_state.ptx").read_text()
    out = src.replace("\t.param .u32 ring_state_param_2\n",
                      "\t.param .u32 ring_state_param_2,\n\t.param .u32 ring_state_param_3\n")
    assert out != src
    path = tmp_path / "ring4.ptx"
    path.write_text(out)
    return path


@pytest.mark.parametrize("command", ["check", "extract"])
def test_a_symbolic_parameter_that_drives_nothing_is_an_error(ring4, command, capsys):
    """The trip count is bound (2=4): N (parameter 3) decides nothing, so no "every N" claim."""
    assert main([command, str(ring4), *BLOCK, "--param", "2=4", "--symbolic", "3>=64"]) == 2
    out = capsys.readouterr()
    assert "--symbolic 3: no synchronization of ring_state depends on it" in out.err
    assert "one concrete check" in out.err and "all-iterations" not in out.out + out.err


def test_the_symbolic_trip_count_beside_an_unused_bound_parameter_stays_proved(ring4, capsys):
    """The twin: the loop's own count symbolic, the other parameter bound: every N is checked."""
    assert main(["check", str(ring4), *BLOCK, "--param", "3=7", "--symbolic", "2>=1"]) == 0
    assert "safe bound: all-iterations of 2 >= 1 (and <= 2^30) (KT = N - 1, residues 0..1)" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["check", "extract"])
@pytest.mark.parametrize("sym", ["2>=1", "2[0:4]>=1", "2[2:2]>=1"])
def test_symbolic_bytes_a_param_binds_are_an_error(ring4, command, sym, capsys):
    assert main([command, str(ring4), *BLOCK, "--param", "2=4", "--symbolic", sym]) == 2
    err = capsys.readouterr().err
    assert "of parameter ring_state_param_2 are also bound by --param" in err and "Traceback" not in err


def test_symbolic_bytes_beside_bound_bytes_of_one_struct_are_accepted_and_overlap_is_not(tmp_path, capsys):
    """CUTLASS's Params: the fields before K (bytes 4..11) bound, K (12..15) symbolic is the intended use
    (tests/test_ptx_symbolic.py extracts it); a binding that reaches into K's bytes is refused at once."""
    import gzip

    ptx = tmp_path / "gemm.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "sm90_gemm_coop_1x1_s2.ptx.gz").read_bytes()))
    fields = DATA / "sm90_gemm_coop_1x1_s2_fields_256x128x192.bin"
    args = ["extract", str(ptx), "--grid", "1x2x1", "--block", "384x1x1", "--dynamic-smem", "100352",
            "--param", f"0[4:12]=@{fields}", "--symbolic", "0[12:4]>=64", "-o", str(tmp_path / "g.sync")]
    assert main(args) == 2
    assert "--symbolic 0[12:4]: bytes 12..15 of parameter" in capsys.readouterr().err
