"""Checking an own kernel file as a kernel engineer does (#35): the finding at the line to change, with
the names the source uses, streamed as found; nvcc flags; no temporary files left behind; a refusal that
names the parameter to bind; the pre-commit hook's kernels; a safe kernel's warnings summarized.

The kernel is tests/data/ptx/own/ws_rowsum.cu (a producer warp loading tiles with TMA into a 3-stage
ring guarded by full/empty mbarriers, two consumer warps summing rows, inline-asm helpers in
tma_helpers.cuh); its two planted bugs are compiled by build.sh into the PTX beside it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from syncverify.cli import main

OWN = Path(__file__).parent / "data" / "ptx" / "own"
CU = str(OWN / "ws_rowsum.cu")
SAFE = str(OWN / "ws_rowsum.ptx")
EARLY = str(OWN / "ws_rowsum_early_release.ptx")
PARITY = str(OWN / "ws_rowsum_wrong_parity.ptx")
LAUNCH = ["--block", "96", "--param", "2=6"]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _line_of(text: str) -> int:
    """The line of ws_rowsum.cu that holds `text` (so the test follows the source, not a number)."""
    lines = (OWN / "ws_rowsum.cu").read_text().splitlines()
    (n,) = [i for i, ln in enumerate(lines, 1) if text in ln]
    return n


def _json(capsys, *argv: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    code = main(["check", *argv, "--format", "json", "-q"])
    (res,) = json.loads(capsys.readouterr().out)["results"]
    return code, res


# ---- the line to change -------------------------------------------------------------------------------

def test_early_release_is_reported_at_the_arrive_that_must_move(capsys):  # type: ignore[no-untyped-def]
    code, res = _json(capsys, EARLY, *LAUNCH)
    assert code == 1
    at = {(d["code"], Path(d["file"]).name, d["line"]) for d in res["diagnostics"]}
    lines = (OWN / "ws_rowsum.cu").read_text().splitlines()
    ifdef = lines.index("#ifdef EARLY_RELEASE") + 2  # the arrive under it, above the read
    assert "mbar_arrive(&empty[s])" in lines[ifdef - 1]
    assert ("SV302", "ws_rowsum.cu", ifdef) in at  # the root cause, at the line to change
    assert ("SV302", "ws_rowsum.cu", _line_of("tma_load_1d(tile[s]")) in at  # the race, at the helper's call
    # no finding is placed inside the inline-asm helpers
    assert not any(Path(d["file"]).name == "tma_helpers.cuh" for d in res["diagnostics"])


def test_the_fixed_kernel_has_no_early_release(capsys):  # type: ignore[no-untyped-def]
    """The near twin: the same kernel with the arrive after the read is safe (nothing to blame)."""
    code, res = _json(capsys, SAFE, *LAUNCH)
    assert code == 0 and res["verdict"] == "safe" and not res["diagnostics"]


def test_wrong_parity_is_reported_at_the_wait_call(capsys):  # type: ignore[no-untyped-def]
    code, res = _json(capsys, PARITY, *LAUNCH)
    assert code == 1
    sv507 = [d for d in res["diagnostics"] if d["code"] == "SV507"]
    assert len(sv507) == 1  # every stage's wait is one CUDA line: flipped together, named once
    assert Path(sv507[0]["file"]).name == "ws_rowsum.cu"
    assert sv507[0]["line"] == _line_of("mbar_wait(&empty[s], (t / STAGES) & 1);")
    assert "`empty[0]`" in sv507[0]["message"]


def test_a_library_pattern_moves_the_location_out_of_that_file(capsys):  # type: ignore[no-untyped-def]
    """--library: a file named a library is not the user's; with every frame a library's, the innermost
    is kept (here the helper's asm statement)."""
    _, res = _json(capsys, EARLY, *LAUNCH, "--library", "ws_rowsum.cu")
    race = [d for d in res["diagnostics"] if d["code"] == "SV302" and "WAR race" in d["message"]]
    assert race and Path(race[0]["file"]).name == "tma_helpers.cuh"


# ---- names ----------------------------------------------------------------------------------------------

def test_extracted_objects_carry_the_source_names(tmp_path, capsys):  # type: ignore[no-untyped-def]
    out = tmp_path / "k.sync"
    assert main(["extract", SAFE, *LAUNCH, "-o", str(out)]) == 0
    text = out.read_text()
    assert re.search(r"^  mbarrier full\[3\];", text, re.M) and re.search(r"^  mbarrier empty\[3\];", text, re.M)
    assert "smem tile_0 " in text and "mb0" not in text and not re.search(r"\bs0\b", text)
    assert "wait empty[" in text and "arrive.expect_tx full[" in text
    # each role named by the source branch that selects it (the comment on it: `// producer`, `// consumers`;
    # the two consumer warps kept apart by their warps), with its warps and that branch
    producer = f"under `if (warp == 0) {{` (ws_rowsum.cu:{_line_of('if (warp == 0) {')})"
    consumers = f"under `}} else {{` (ws_rowsum.cu:{_line_of('} else {  // consumers')})"
    assert re.search(r"role producer = warp 0; +// warp 0: threads 0\.\.31, " + re.escape(producer), text)
    assert re.search(r"role consumers_w2 = warp 2; +// warp 2: threads 64\.\.95, " + re.escape(consumers), text)
    _code, res = _json(capsys, PARITY, *LAUNCH)
    assert res["protocol"] == "ws_rowsum(float const*, float*, int)"  # demangled
    assert "wait on empty[0]" in next(d["message"] for d in res["diagnostics"] if d["code"] == "SV201")


# ---- no line of a file that was not written -------------------------------------------------------------

def test_notes_cite_no_unwritten_file_and_no_stale_one_is_read(tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    ptx = tmp_path / "ws_rowsum_early_release.ptx"
    shutil.copy(EARLY, ptx)
    stale = tmp_path / "ws_rowsum_early_release.extracted.sync"
    stale.write_text("STALE PROTOCOL LINE\n" * 200)
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(ptx), *LAUNCH, "-q"]) == 1
    out = capsys.readouterr().out
    assert "STALE PROTOCOL LINE" not in out and ".extracted.sync" not in out
    assert "PTX instruction (line " in out


def test_extract_o_writes_the_protocol_the_notes_refer_to(tmp_path, capsys):  # type: ignore[no-untyped-def]
    _, res = _json(capsys, EARLY, *LAUNCH)
    root = next(d for d in res["diagnostics"] if d["code"] == "SV302" and "releases" in d["message"])
    note = next(r["message"] for r in root["related"] if "PTX instruction" in r["message"])
    n = int(re.search(r"line (\d+) of the protocol", note)[1])  # type: ignore[index]
    out = tmp_path / "k.sync"
    assert main(["extract", EARLY, *LAUNCH, "-o", str(out)]) == 0
    assert re.match(r"\s*arrive empty\[\d\];", out.read_text().splitlines()[n - 1])


# ---- answers in seconds -----------------------------------------------------------------------------------

def test_the_first_finding_is_streamed_placed_and_the_search_stops_after_it(capsys):  # type: ignore[no-untyped-def]
    """jsonl: the finding record (already at the CUDA line) comes before the file's result; with
    --after-first-error the search ends soon after its first error (fewer states than the whole search),
    and the verdict is the violation, never safe."""
    assert main(["check", EARLY, *LAUNCH, "--format", "jsonl", "-q", "--after-first-error", "1e-9",
                 "--engine", "explicit"]) == 1
    records = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds.index("diagnostic") < kinds.index("result")
    first = records[kinds.index("diagnostic")]
    assert Path(first["file"]).name == "ws_rowsum.cu"
    short = records[kinds.index("result")]
    assert short["verdict"] == "violation" and "after the first error" in short["coverage"]
    assert main(["check", EARLY, *LAUNCH, "--format", "json", "-q", "--after-first-error", "0",
                 "--engine", "explicit"]) == 1
    (whole,) = json.loads(capsys.readouterr().out)["results"]
    assert short["stats"]["states"] < whole["stats"]["states"]


def test_a_specs_search_stops_after_its_first_error_by_default_as_a_kernels_does(capsys, monkeypatch):  # type: ignore[no-untyped-def]
    """A spec's check takes the kernels' default --after-first-error (here made 1e-9 s, so that the stop
    does not wait on the machine's speed): the violation, with fewer states than the whole search and
    the stop named; 0 goes to the end, and so does --search-jobs 2 without the option (a stop by the
    clock cannot be replayed on several processes: not refused, not applied)."""
    from syncverify.cli import extract as cli_extract

    monkeypatch.setattr(cli_extract, "AFTER_FIRST_ERROR", 1e-9)
    spec = str(Path(__file__).resolve().parents[1] / "specs" / "trtllm_mmha_multiblock_last_block.sync")
    runs = {}
    for name, extra in (("default", []), ("to the end", ["--after-first-error", "0"]),
                        ("two processes", ["--search-jobs", "2"])):
        assert main(["check", spec, "--format", "json", "-q", "--engine", "explicit", *extra]) == 1, name
        (runs[name],) = json.loads(capsys.readouterr().out)["results"]
    short, whole, parallel = runs["default"], runs["to the end"], runs["two processes"]
    assert short["verdict"] == whole["verdict"] == parallel["verdict"] == "violation"
    assert "after the first error" in short["coverage"], short["coverage"]
    assert "after the first error" not in whole["coverage"] and "not finished" not in whole["coverage"]
    assert short["stats"]["states"] < whole["stats"]["states"] == parallel["stats"]["states"]


def test_a_safe_kernels_warnings_are_one_line_per_code():
    from syncverify.diagnostics import Diagnostic, Severity, Span, TraceStep
    from syncverify.report.live import summarized
    from syncverify.result import CheckResult, Verdict

    steps = tuple(TraceStep(i, 0, "w0", 1, "op") for i in range(30))
    warns = tuple(Diagnostic("SV602", Severity.WARNING, f"w{i}", Span("k.cu", 10 + i, 1, 10 + i, 2), steps)
                  for i in range(8))
    r = CheckResult(path="k.cu", protocol="k", verdict=Verdict.SAFE, bound="", diagnostics=warns)
    rest, lines = summarized(r)
    assert not rest.diagnostics and len(lines) == 1
    assert lines[0].startswith("k.cu:10:1: SV602 warning x8")
    errors = (Diagnostic("SV302", Severity.ERROR, "race", Span("k.cu", 5, 1, 5, 2)),)
    kept, lines = summarized(CheckResult(path="k.cu", protocol="k", verdict=Verdict.VIOLATION, bound="",
                                         diagnostics=errors + warns[:2]))
    assert kept.diagnostics == errors and lines[0].startswith("k.cu:10:1: SV602 warning x2")


# ---- rough edges ----------------------------------------------------------------------------------------

@needs_nvcc
def test_nvcc_flags_reach_the_compiler_and_no_temporary_files_remain(tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    start = time.monotonic()
    code, res = _json(capsys, CU, *LAUNCH, "--nvcc-flag=-DEARLY_RELEASE")
    seconds = time.monotonic() - start
    assert code == 1 and any(d["code"] == "SV302" for d in res["diagnostics"])
    assert seconds < 120, seconds  # (the first finding comes within seconds; generous for a loaded machine)
    code, res = _json(capsys, CU, *LAUNCH)
    assert code == 0 and res["verdict"] == "safe"
    # nvcc fails: a refusal (exit 2), and still nothing left behind
    assert main(["check", CU, *LAUNCH, "--nvcc-flag=-DSTAGES=(", "-q"]) == 2
    capsys.readouterr()
    assert not [p for p in os.listdir(tmp_path) if p.startswith("syncverify-ptx-")]


def test_an_unbound_trip_count_is_refused_naming_the_parameter(capsys):  # type: ignore[no-untyped-def]
    assert main(["check", SAFE, "--block", "96", "-q"]) == 2
    err = capsys.readouterr().err
    assert "bind it with --param 2=N" in err and "parameter 2 (`_Z9ws_rowsumPKfPfi_param_2`)" in err
    assert main(["check", SAFE, *LAUNCH, "-q"]) == 0  # the near twin: bound, it extracts


@needs_nvcc
def test_a_cu_refusal_points_at_the_loop_in_the_source(capsys):  # type: ignore[no-untyped-def]
    assert main(["check", CU, "--block", "96", "-q"]) == 2
    err = capsys.readouterr().err
    loops = [n for n, ln in enumerate((OWN / "ws_rowsum.cu").read_text().splitlines(), 1)
             if "for (int t = 0; t < num_tiles; ++t) {" in ln]
    loop = loops[0]  # the producer's loop comes first (warp 0 is executed first)
    first = next(ln for ln in err.splitlines() if ": error: " in ln)
    assert f"ws_rowsum.cu:{loop}:" in first
    assert "--param 2=N" in first


# ---- the pre-commit hook ------------------------------------------------------------------------------------

def _listed(tmp_path: Path, *ptx: str) -> None:
    table = "[tool.syncverify]\ntimeout = 120\n"
    for p in ptx:
        shutil.copy(p, tmp_path / Path(p).name)
        table += f'\n[[tool.syncverify.kernels]]\npath = "{Path(p).name}"\nargs = {json.dumps(LAUNCH)}\n'
    (tmp_path / "pyproject.toml").write_text(table)


def test_the_kernels_hook_blocks_a_listed_buggy_kernel(tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    yaml = pytest.importorskip("yaml")

    hooks = {h["id"]: h for h in yaml.safe_load((Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text())}
    hook = hooks["syncverify-kernels"]
    assert hook["entry"].split() == ["syncverify", "kernels"] and hook["pass_filenames"] is False
    assert re.search(hook["files"], "src/ws_rowsum.cu") and re.search(hook["files"], "pyproject.toml")
    monkeypatch.chdir(tmp_path)
    _listed(tmp_path, SAFE, EARLY)
    assert main(["kernels", "ws_rowsum.cu"]) == 1
    out = capsys.readouterr().out
    assert "ws_rowsum.cu:" in out and "SV302" in out and "safe" in out  # both kernels were checked
    _listed(tmp_path, SAFE)  # the near twin: only the fixed kernel listed
    assert main(["kernels"]) == 0


def test_the_kernels_hook_refuses_a_bad_table(tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[[tool.syncverify.kernels]]\nargs = ["--block", "96"]\n')
    assert main(["kernels"]) == 2
    assert "needs `path" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text("[tool.syncverify]\ntimeout = 60\n")
    assert main(["kernels"]) == 2
    assert "no kernels listed" in capsys.readouterr().err


def test_a_long_demangled_name_keeps_its_outer_template_only():
    from syncverify.cli.kernel import _brief

    inner = ", ".join(f"cute::C<{i}>" for i in range(40))
    full = f"void ns::device_kernel<ns::Gemm<cute::tuple<{inner}>, int> >(ns::Gemm<cute::tuple<{inner}>, int>::Params)"
    short = _brief(full)
    assert short == "void ns::device_kernel<ns::Gemm<…> >(ns::Gemm<cute::tuple<…>, int>::Params)"
    assert _brief("k(int)") == "k(int)"  # a short name as it is
