"""tcgen05.shift (#33; PTX ISA §9.7.16.9.3): "an asynchronous instruction which initiates the shifting of 32-byte
elements downwards across all the rows, except the last, by one row" of a tensor-memory matrix. In the language
`tcgen05.shift REGION [cta_group N]`: an asynchronous read and write of the region, completed by a
`tcgen05.commit` as an MMA is; pipelined after an MMA of its thread and before one (§9.7.16.6.2, pairs 3 and 5),
not before a `tcgen05.cp` (pair 4 is the 4x256b shape only, and shapes are not modelled). Explicit and z3
engines; bmc and the Promela export refuse it with the reason. Extraction: tests/data/ptx/sm100/shift.cu.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.export.promela import ExportError, export_model
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import parse_ptx_file
from syncverify.result import Verdict

DATA = Path(__file__).parent / "data" / "ptx" / "sm100"

ONE_THREAD = """
protocol shift_pipeline {
  cta threads 32;
  smem a bytes 1024;
  smem sf bytes 512;
  tmem acc cols 128;
  mbarrier done count 1;
  first thread { init done; }
  syncwarp;
  elect { BODY tcgen05.commit done; }
  WAIT
  tcgen05.ld acc;
  tcgen05.wait::ld;
}
"""


def run(body: str, wait: str = "wait done parity 0; tcgen05.fence::after_thread_sync;",
        engine: str = "explicit") -> tuple[Verdict, set[str]]:
    text = ONE_THREAD.replace("BODY", body).replace("WAIT", wait)
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=60))
    return res.verdict, {d.code for d in res.diagnostics if d.is_error}


def test_mma_shift_mma_on_one_accumulator_is_a_pipeline():
    """mma -> shift and shift -> mma (same cta_group) execute in issue order: no wait between them."""
    assert run("tcgen05.mma acc, a; tcgen05.shift acc; tcgen05.mma acc, a;") == (Verdict.SAFE, set())


def test_shift_then_cp_into_the_region_needs_the_commit():
    """A cp into the shifted columns is not pipelined after the shift (shapes are not modelled): a race."""
    verdict, codes = run("tcgen05.shift acc; tcgen05.cp acc, sf;")
    assert verdict is Verdict.VIOLATION and "SV303" in codes
    # the cp into other columns is no conflict at all
    text = ONE_THREAD.replace("tmem acc cols 128;", "tmem acc cols 128;\n  tmem acc2 cols 8;")
    res = check_protocol(syncverify.load(text.replace("BODY", "tcgen05.shift acc; tcgen05.cp acc2, sf;").replace(
        "WAIT", "wait done parity 0; tcgen05.fence::after_thread_sync;"), path="t.sync"), Options(timeout=60))
    assert res.verdict is Verdict.SAFE


def test_loading_before_the_commit_completes_races_with_the_shift():
    verdict, codes = run("tcgen05.shift acc;", wait="")
    assert verdict is Verdict.VIOLATION and "SV301" in codes


def test_a_shift_no_commit_tracks_is_in_flight_at_exit():
    text = """
protocol shift_never_committed {
  cta threads 32;
  tmem acc cols 128;
  elect { tcgen05.shift acc; }
}
"""
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(timeout=60))
    assert {d.code for d in res.diagnostics if d.is_error} == {"SV404"}
    assert any("uncommitted" in d.message for d in res.diagnostics)


HANDOVER = """
protocol shift_handover {
  cta threads 64;
  role mma = warp 0;
  role epi = warp 1;
  smem a bytes 1024;
  tmem acc cols 128;
  mbarrier full count 1;
  mbarrier shifted count 1;
  first thread { init full; init shifted; }
  syncthreads;
  if mma { elect { tcgen05.mma acc, a; tcgen05.commit full; } }
  if epi {
    wait full parity 0;
    tcgen05.fence::after_thread_sync;
    elect { tcgen05.shift acc; tcgen05.commit shifted; }
    WAIT
    tcgen05.ld acc;
    tcgen05.wait::ld;
  }
}
"""


def test_a_shift_by_another_thread_after_the_mma_commit_then_its_own_commit_is_safe():
    text = HANDOVER.replace("WAIT", "wait shifted parity 0; tcgen05.fence::after_thread_sync;")
    assert check_protocol(syncverify.load(text, path="t.sync"), Options(timeout=60)).verdict is Verdict.SAFE


def test_the_lift_agrees_and_bmc_and_promela_refuse():
    assert run("tcgen05.mma acc, a; tcgen05.shift acc;", engine="z3") == (Verdict.SAFE, set())
    verdict, codes = run("tcgen05.shift acc;", wait="", engine="z3")
    assert verdict is Verdict.VIOLATION and "SV301" in codes
    assert run("tcgen05.shift acc;", engine="bmc")[0] is Verdict.INCONCLUSIVE
    text = ONE_THREAD.replace("BODY", "tcgen05.shift acc;").replace("WAIT", "wait done parity 0;")
    with pytest.raises(ExportError, match="tcgen05"):
        export_model(syncverify.load(text, path="t.sync"))


def test_bad_shift_operands_are_input_errors(capsys, tmp_path):  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.sync"
    bad.write_text(ONE_THREAD.replace("BODY", "tcgen05.shift a;").replace("WAIT", ""))
    assert main(["check", str(bad)]) == 2
    assert "bad.sync:" in capsys.readouterr().out


# ---- extraction: tests/data/ptx/sm100/shift.cu --------------------------------------------------------------

def test_the_shift_extracts_to_its_statement_and_checks_safe(capsys):  # type: ignore[no-untyped-def]
    text = extract(parse_ptx_file(str(DATA / "shift.ptx")), Launch(block=(32, 1, 1))).text
    body = [ln.split("//")[0].strip() for ln in text.splitlines()]
    assert "tmem t0 cols 8;" in body  # the 8 columns (32 bytes) a row's shift moves
    i = body.index("tcgen05.shift t0 cta_group 1;")
    assert re.fullmatch(r"tcgen05\.commit \w+ cta_group 1;", body[i + 1])
    capsys.readouterr()
    assert main(["check", str(DATA / "shift.ptx"), "--block", "32"]) == 0
    got = capsys.readouterr()
    assert "1 safe" in got.out + got.err


def test_the_load_without_the_commit_wait_is_flagged_at_its_line(capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_NO_COMMIT_WAIT: the warp loads the columns while the shift may still move them."""
    capsys.readouterr()
    assert main(["check", str(DATA / "shift_no_commit_wait.ptx"), "--block", "32"]) == 1
    out = capsys.readouterr().out
    assert "shift.cu:36:" in out and "SV301 RAW race on tmem t0: tcgen05.ld" in out
    assert "tcgen05.shift at shift.cu:25" in out
