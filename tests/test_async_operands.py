"""Registers read by an asynchronous RS-form wgmma (`regs`, issue #33 item 5): an access of them by their
thread before the `wgmma.wait` that retires the wgmma's group is SV605 (PTX ISA, wgmma.wait_group: "Accessing
the accumulator register or the input register containing the fragments of matrix A of a wgmma.mma_async
instruction without first performing a wgmma.wait_group ... is undefined behavior"), on the explicit engine
and on --engine z3; the bmc engine, the Promela export and the CUDA emitter refuse registers with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.codegen import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

SPECS = Path(__file__).resolve().parent.parent / "specs"
BUG = SPECS / "deepgemm_hc_prenorm_rs_wgmma_a_overwrite.sync"  # deepseek-ai/DeepGEMM#449
FIX = SPECS / "deepgemm_hc_prenorm_rs_wgmma_wait_after_commit.sync"  # its fix, PR #448

ENGINES = ("explicit", "z3")

# A pipelined RS mainloop with two A fragments: `wgmma.wait 1` retires the group that read the fragment
# about to be rewritten (the one of iteration k - 2), while the group of iteration k - 1 stays in flight.
DOUBLE = """
protocol rs_double_fragment {
  param ITERS = 4;
  cta threads 128;
  role mma = warpgroup 0;
  smem b bytes 4096;
  regs a[2];
  regs acc;
  if mma {
    for k in 0..ITERS {
      write a[k % 2];
      wgmma.read a[k % 2];
      wgmma.read b;
      wgmma.read acc;
      wgmma.commit;
      wgmma.wait 1;
    }
    wgmma.wait 0;
    read acc;
  }
}
"""
# near twin: one fragment, the same `wgmma.wait 1`: the group of iteration k - 1 still reads `a`
SINGLE = DOUBLE.replace("regs a[2];", "regs a;").replace("a[k % 2]", "a")
# near twin: the accumulator read before the last group is retired
EARLY_ACC = DOUBLE.replace("    wgmma.wait 0;\n    read acc;", "    read acc;\n    wgmma.wait 0;")


def _run(text: str, engine: str = "explicit"):  # type: ignore[no-untyped-def]
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120))


def _errors(res) -> set[str]:  # type: ignore[no-untyped-def]
    return {d.code for d in res.diagnostics if d.is_error}


def _line(text: str, needle: str, nth: int = 0) -> int:
    return [i for i, t in enumerate(text.splitlines(), 1) if needle in t][nth]


@pytest.mark.parametrize("engine", ENGINES)
def test_deepgemm_a_fragment_written_before_the_wait_is_sv605_at_the_write(engine: str):
    res = check_protocol(syncverify.load(str(BUG)), Options(engine=engine, timeout=120))
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV605"}, res.diagnostics
    text = BUG.read_text()
    found = next(d for d in res.diagnostics if d.code == "SV605")
    assert found.span.line == _line(text, "write a;")
    assert _line(text, "wgmma.read a;") in [r.span.line for r in found.related]


@pytest.mark.parametrize("engine", ENGINES)
def test_deepgemm_with_the_wait_after_the_commit_is_safe(engine: str):
    res = check_protocol(syncverify.load(str(FIX)), Options(engine=engine, timeout=120))
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics
    if engine == "z3":
        assert res.bound == "all-iterations"


@pytest.mark.parametrize("engine", ENGINES)
def test_two_fragments_and_wait_1_are_safe_one_fragment_is_not(engine: str):
    safe = _run(DOUBLE, engine)
    assert safe.verdict is Verdict.SAFE and not _errors(safe), safe.diagnostics
    bad = _run(SINGLE, engine)
    assert bad.verdict is Verdict.VIOLATION and _errors(bad) == {"SV605"}, bad.diagnostics
    assert next(d for d in bad.diagnostics if d.code == "SV605").span.line == _line(SINGLE, "write a;")


@pytest.mark.parametrize("engine", ENGINES)
def test_reading_the_accumulator_before_the_last_wait_is_sv605(engine: str):
    res = _run(EARLY_ACC, engine)
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV605"}, res.diagnostics
    assert next(d for d in res.diagnostics if d.code == "SV605").span.line == _line(EARLY_ACC, "    read acc;")


def test_wgmmas_sharing_registers_without_a_wait_between_them_are_safe():
    # one A fragment and one accumulator for several MMAs of a group, and across groups (CUTLASS's RS
    # mainloop issues its k-block MMAs into one accumulator): only the threads' own accesses need the wait
    text = """
protocol rs_shared_operands {
  cta threads 128;
  role mma = warpgroup 0;
  smem b[2] bytes 4096;
  regs a;
  regs acc;
  if mma {
    write a;
    wgmma.read a; wgmma.read b[0]; wgmma.read acc;
    wgmma.read a; wgmma.read b[1]; wgmma.read acc;
    wgmma.commit;
    wgmma.read a; wgmma.read b[0]; wgmma.read acc;
    wgmma.commit;
    wgmma.wait 0;
    write a;
    read acc;
  }
}
"""
    res = _run(text)
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics


def test_another_warps_wait_is_not_this_warps():
    # warps 0..3 wait on their own; warp 1 rewrites its fragment before its own wait: SV605 for warp 1 only
    text = """
protocol rs_per_warp {
  cta threads 128;
  role w[4] = warp i;
  smem b bytes 4096;
  regs a;
  if w {
    write a;
    wgmma.read a; wgmma.read b;
    wgmma.commit;
    if instance == 1 { write a; }
    wgmma.wait 0;
  }
}
"""
    res = _run(text)
    assert _errors(res) == {"SV605"}, res.diagnostics
    found = next(d for d in res.diagnostics if d.code == "SV605")
    assert found.span.line == _line(text, "if instance == 1") and "w[1]" in found.message
    fixed = _run(text.replace("    if instance == 1 { write a; }\n    wgmma.wait 0;",
                              "    wgmma.wait 0;\n    if instance == 1 { write a; }"))
    assert fixed.verdict is Verdict.SAFE, fixed.diagnostics


@pytest.mark.parametrize(("access", "code", "words"), [
    ("write a @ 0;", "SV108", "`@ CTA`"),
    ("write a part warp;", "SV110", "`part ...`"),
    ("read a bytes 0..16;", "SV110", "`bytes LO..HI`"),
    ("tma.store a;", "SV111", "needs a buffer"),
])
def test_registers_take_no_remote_region_or_copy(access: str, code: str, words: str):
    text = f"""
protocol bad {{
  cta threads 128;
  role mma = warpgroup 0;
  regs a;
  if mma {{ {access} }}
}}
"""
    with pytest.raises(InputError) as err:
        syncverify.load(text, path="t.sync")
    assert any(d.code == code and words in d.message for d in err.value.diagnostics), err.value.diagnostics


def test_bmc_the_promela_export_and_the_emitter_refuse_registers_with_the_reason():
    res = _run(DOUBLE, engine="bmc")
    assert res.verdict is Verdict.INCONCLUSIVE and "does not model registers" in (res.coverage or "")
    with pytest.raises(EmitRefused, match="does not model registers"):
        emit(syncverify.load(DOUBLE, path="t.sync"))
    from syncverify.export.promela import export_promela
    from syncverify.export.promela.exporter import ExportError
    with pytest.raises(ExportError, match="does not model registers"):
        export_promela(syncverify.load(DOUBLE, path="t.sync"))


# ---- extraction: the A fragment of an RS-form wgmma, known by its registers' names -------------------------

PTX = Path(__file__).resolve().parent / "data" / "ptx"


def _ptx_line(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


def test_extracted_fragment_written_after_the_wait_is_safe(capsys):
    """tests/data/ptx/wgmma_rs_a_reuse.cu as DeepGEMM PR #448 orders it: the wait right after the commit, so
    the next stage's ld.shared into the A registers comes after the wgmma that read them retired."""
    from syncverify.cli import main

    assert main(["check", str(PTX / "wgmma_rs_a_reuse.ptx"), "--block", "160", "--param", "2=4"]) == 0
    assert "safe" in capsys.readouterr().out


def test_extracted_fragment_written_before_the_wait_is_sv605_at_the_load(capsys):
    """-DSV_LATE_WAIT (DeepGEMM #449's order): the next stage's `ld.shared.v4.u32 {%r42, …}` writes the A
    registers the previous RS wgmma still reads: SV605 at that PTX line, the wgmma named beside it."""
    from syncverify.cli import main

    path = PTX / "wgmma_rs_a_reuse_late_wait.ptx"
    assert main(["check", str(path), "--block", "160", "--param", "2=4"]) == 1
    out = capsys.readouterr().out
    load = _ptx_line(path, "ld.shared.v4.u32")
    mma = _ptx_line(path, "wgmma.mma_async")
    assert f"wgmma_rs_a_reuse_late_wait.ptx:{load}:2: SV605" in out, out
    assert f"ptx:{mma}" in out and "SV302" not in out and "SV301" not in out, out


def test_an_rs_fragment_that_is_never_rewritten_is_safe(capsys):
    """tests/data/ptx/wgmma_mn_major.cu reads one constant A fragment in every stage: its registers are read
    again by the next wgmma, never written, so the register tracking adds no finding."""
    from syncverify.cli import main

    assert main(["check", str(PTX / "wgmma_mn_major.ptx"), "--block", "160", "--param", "2=4"]) == 0
    out = capsys.readouterr().out
    assert "safe" in out and "SV605" not in out


def test_the_destination_registers_of_an_instruction():
    from syncverify.ptx.parse import parse_ptx_file
    from syncverify.ptx.wgmma_regs import dest_names

    fn = parse_ptx_file(str(PTX / "wgmma_rs_a_reuse_late_wait.ptx")).functions[0]
    by_op = {ins.opcode: ins for ins in fn.body}
    assert dest_names(by_op["ld.shared.v4.u32"]) == ["%r42", "%r43", "%r44", "%r45"]
    assert dest_names(by_op["mbarrier.arrive.shared::cta.b64"]) == []  # no register it writes as a destination
    assert dest_names(next(i for o, i in by_op.items() if o.startswith("wgmma.mma_async"))) == []


# ---- sub-ranges (lanes x columns) of a tensor-memory region ------------------------------------------------

TLX_BUG = SPECS / "tlx_fa_bwd_tmem_chunk_alias.sync"  # facebookexperimental/triton PR #1992
TLX_FIX = SPECS / "tlx_fa_bwd_tmem_chunk_alias_barrier.sync"

CHUNKS = """
protocol tmem_chunks {
  cta threads 256;
  role w[8] = warp i;
  tmem t cols 128;
  if w {
    tcgen05.ld t lanes 32 * (instance % 4)..32 * (instance % 4) + 32 cols 64 * (instance / 4)..64 * (instance / 4) + 64;
    tcgen05.wait::ld;
    tcgen05.st t lanes 32 * (instance % 4)..32 * (instance % 4) + 32 cols STORE;
    tcgen05.wait::st;
  }
}
"""
# each warp stores inside the chunk it loaded (the same map for both): no other warp's chunk is touched
SAME_MAP = CHUNKS.replace("STORE", "64 * (instance / 4)..64 * (instance / 4) + 32")
# the store's map differs: warp w stores into warp w + 4's chunk (and warp w + 4 into its own)
OTHER_MAP = CHUNKS.replace("STORE", "64 + 32 * (instance / 4)..96 + 32 * (instance / 4)")


@pytest.mark.parametrize("engine", ENGINES)
def test_tlx_fa_bwd_store_chunk_over_another_warps_load_is_a_race_at_the_load(engine: str):
    res = check_protocol(syncverify.load(str(TLX_BUG)), Options(engine=engine, timeout=300))
    assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV301"}, res.diagnostics
    text = TLX_BUG.read_text()
    found = next(d for d in res.diagnostics if d.code == "SV301")
    assert found.span.line == _line(text, "tcgen05.ld qk lanes")
    assert _line(text, "tcgen05.st qk lanes") in [r.span.line for r in found.related]


@pytest.mark.parametrize("engine", ENGINES)
def test_tlx_fa_bwd_with_a_barrier_between_load_and_store_is_safe(engine: str):
    res = check_protocol(syncverify.load(str(TLX_FIX)), Options(engine=engine, timeout=300))
    assert res.verdict is Verdict.SAFE and not _errors(res), res.diagnostics


@pytest.mark.parametrize("engine", ENGINES)
def test_chunks_conflict_only_where_they_overlap(engine: str):
    same = _run(SAME_MAP, engine)
    assert same.verdict is Verdict.SAFE and not _errors(same), same.diagnostics
    other = _run(OTHER_MAP, engine)
    assert other.verdict is Verdict.VIOLATION and _errors(other) & {"SV301", "SV302"}, other.diagnostics


def test_the_whole_region_form_keeps_its_meaning():
    # without ranges every access covers the region: the same-map program is then a race between warps
    whole = SAME_MAP.replace(" lanes 32 * (instance % 4)..32 * (instance % 4) + 32 cols 64 * (instance / 4)..64 * "
                             "(instance / 4) + 64", "").replace(
        " lanes 32 * (instance % 4)..32 * (instance % 4) + 32 cols 64 * (instance / 4)..64 * (instance / 4) + 32", "")
    assert "lanes" not in whole
    res = _run(whole)
    assert res.verdict is Verdict.VIOLATION and _errors(res) & {"SV301", "SV302", "SV303"}, res.diagnostics
    # and a range over every lane and column is the whole region
    full = whole.replace("tcgen05.ld t;", "tcgen05.ld t lanes 0..128 cols 0..128;")
    again = _run(full)
    assert again.verdict is Verdict.VIOLATION and _errors(again) == _errors(res), again.diagnostics


@pytest.mark.parametrize(("lanes", "overlap"), [("0..32", True), ("32..64", False)])
def test_two_warps_storing_the_same_columns_race_only_on_shared_lanes(lanes: str, overlap: bool):
    text = f"""
protocol two_stores {{
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  tmem t cols 64;
  if a {{ tcgen05.st t lanes 0..32 cols 0..32; tcgen05.wait::st; }}
  if b {{ tcgen05.st t lanes {lanes} cols 16..48; tcgen05.wait::st; }}
}}
"""
    res = _run(text)
    if overlap:
        assert res.verdict is Verdict.VIOLATION and _errors(res) == {"SV303"}, res.diagnostics
    else:
        assert res.verdict is Verdict.SAFE, res.diagnostics


def test_a_range_outside_the_region_is_sv104():
    text = """
protocol bad_range {
  cta threads 32;
  role a = warp 0;
  tmem t cols 64;
  if a { tcgen05.ld t lanes 0..32 cols 32..96; tcgen05.wait::ld; }
}
"""
    with pytest.raises(InputError) as err:
        syncverify.load(text, path="t.sync")
    assert any(d.code == "SV104" and "32..96" in d.message for d in err.value.diagnostics)
    # a bound known only when it runs: SV104 at the access
    res = _run(text.replace("cols 32..96", "cols 32 * instance..32 * instance + 32").replace(
        "role a = warp 0;", "role a[3] = warp i;").replace("cta threads 32;", "cta threads 96;"))
    assert "SV104" in _errors(res), res.diagnostics
