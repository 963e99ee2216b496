"""tcgen05 in extraction (#33): Blackwell kernels built from CUTLASS's sm100 building blocks, extracted from their
PTX and checked.

* tests/data/ptx/sm100/umma_2sm.cu: a 2-SM tcgen05 mainloop and epilogue written with CUTLASS 4.2.0.0's own
  sm100 pieces (TMEM::Allocator2Sm, SM100_TMA_2SM_LOAD_2D, SM100_MMA_F16BF16_2x1SM_SS, umma_arrive_multicast_2x1SM,
  SM100_TMEM_LOAD_32dp32b8x, fence_view_async_tmem_load, umma_arrive_2x1SM_sm0) and PTX's tcgen05 fence pair;
  its PTX builds (gzipped) are the kernel as written, with .release.cluster on the epilogue's remote arrive, and
  three seeded bugs, each flagged at its CUDA line.
* tests/data/ptx/sm100_gemm_2sm_2x1.cu: CUTLASS's sm100 2-SM warp-specialized GEMM (cluster 2x1, two stages),
  with its Params fields from its own host code (sm100_gemm_2sm_2x1_fields.cu): extraction gets through every
  tcgen05 instruction and the pipelines' probes (`consumer_try_wait`, `producer_try_acquire`; issue #33).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import parse_ptx_file

DATA = Path(__file__).parent / "data" / "ptx"
LAUNCH = ["--block", "96", "--cluster", "2", "--grid", "2", "--dynamic-smem", "16384",
          "--tensor-bytes", "0[0]=4096", "--tensor-bytes", "1[0]=2048"]


def _ptx(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    out.write_bytes(gzip.decompress((DATA / "sm100" / f"{name}.gz").read_bytes()))
    return out


def _check(tmp_path: Path, capsys, name: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(["check", str(_ptx(tmp_path, name)), *LAUNCH])
    got = capsys.readouterr()
    return rc, got.out + got.err


def _findings(text: str) -> set[tuple[str, str]]:
    """(code, CUDA line of umma_2sm.cu it is reported at or inlined at) of every finding."""
    out = set()
    for block in re.split(r"\n(?=\S)", text):
        m = re.match(r"\S+?:\d+:\d+: (SV\d{3}) ", block)
        if m:
            where = re.search(r"umma_2sm\.cu:(\d+)", block)
            out.add((m.group(1), where.group(1) if where else ""))
    return out


def _line(text: str) -> str:
    """The line of umma_2sm.cu holding ``text`` (1-based)."""
    lines = (DATA / "sm100" / "umma_2sm.cu").read_text().splitlines()
    return str(next(i for i, s in enumerate(lines, 1) if text in s))


def test_every_tcgen05_instruction_becomes_its_statement(tmp_path):  # type: ignore[no-untyped-def]
    ptx = parse_ptx_file(str(_ptx(tmp_path, "umma_2sm_rc.ptx")))
    launch = Launch(block=(96, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=16384,
                    tensor_bytes={("0", 0): 4096, ("1", 0): 2048})
    body = re.sub(r" *//[^\n]*", "", extract(ptx, launch).text)
    # one region: the columns the MMA writes and the epilogue's four 8-column loads
    assert "tmem t0 cols 128;" in body
    # the allocation writes the address to shared memory; the epilogue reads it back after the named barrier
    assert "tmem.alloc cta_group 2 cols 128;\n    write s2;" in body
    assert "bar.sync 9, 64;\n    tcgen05.fence::after_thread_sync;\n    read s2;" in body
    # 2-SM TMA: each CTA's copy completes on the leader's full barrier; only the leader expects the bytes
    assert body.count("tma.load s0[k0 % 2] bytes 4096 -> mb0[k0 % 2] cta_group 2;") == 2
    assert body.count("arrive.expect_tx mb0[k0 % 2] bytes 12288;") == 1
    # the leader's MMA warp: one MMA per k-block, released by a multicast commit; then the accumulator
    assert "tcgen05.mma t0, s0[k0 % 2], s1[k0 % 2] cta_group 2;\n        tcgen05.commit mb0[2 + k0 % 2] " \
        "multicast 0x3 cta_group 2;" in body
    assert "tcgen05.commit mb0[4] multicast 0x3 cta_group 2;" in body
    assert body.count("tmem.relinquish cta_group 2;") == 2 and body.count("tmem.dealloc cta_group 2 cols 128;") == 2
    # the epilogue: after-fence, loads and their waits, before-fence, the arrive on the leader's barrier
    assert "wait mb0[4] parity 0;\n    tcgen05.fence::after_thread_sync;\n    for k0 in 0..4 {\n" \
        "      tcgen05.ld t0;\n      tcgen05.wait::ld;\n    }\n    tcgen05.fence::before_thread_sync;" in body
    # CTA 1's release names CTA 0's barrier: umma_arrive_2x1SM_sm0 clears the address's CTA-pair bit
    assert body.count("arrive.release.cluster mb0[5] @ 0;") == 1 and body.count("arrive.release.cluster mb0[5];") == 1


def test_the_kernel_checks_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Safe; what remains is the SV602 warning on CUTLASS's `.cta` wait (ClusterBarrier::wait)."""
    rc, text = _check(tmp_path, capsys, "umma_2sm_rc.ptx")
    assert rc == 0 and "1 file: 1 safe" in text
    assert {code for code, _ in _findings(text)} == {"SV602"}


def test_cutlass_release_of_the_accumulator_is_cta_scope(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The same kernel with umma_arrive_2x1SM_sm0 as CUTLASS ships it: `mbarrier.arrive.shared::cluster` on the
    leader's barrier, default .release.cta. The generic data that arrive carries to CTA 0 is CTA 1's own
    tensor-memory address word (written by its allocation, read by its epilogue after the named barrier), which no
    thread of CTA 0 touches and every thread of CTA 1 that does already knows: only the reuse warning, SV602 at the
    arrive (docs/model.md, "Scopes across CTAs": "Data nobody else can touch"; it was the error before, on any such
    write the waiter learned)."""
    rc, text = _check(tmp_path, capsys, "umma_2sm_base.ptx")
    assert rc == 0 and "1 safe" in text
    assert {code for code, _ in _findings(text)} == {"SV602"} and "SV602 warning" in text
    assert "publishes generic-proxy data" not in text


def test_the_load_without_the_after_fence_is_sv608_and_sv603_to_the_letter(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_NO_AFTER_FENCE: the epilogue's tcgen05.ld after its (acquire) wait on the accumulator barrier with no
    tcgen05.fence::after_thread_sync — CUTLASS 4.2's own sm100 epilogues read the accumulator this way. Safe with the
    SV608 warning at the load by default (the release/acquire reading, docs/model.md "The fence pair"); SV603 at the
    same line with --no-assume, the canonical pattern of PTX §9.7.16.6.4.4 to the letter."""
    at = _line("SM100_TMEM_LOAD_32dp32b8x::copy")
    rc, text = _check(tmp_path, capsys, "umma_2sm_no_after_fence.ptx")
    assert rc == 0 and ("SV608", at) in _findings(text) and "sync-orders-tcgen05" in text
    capsys.readouterr()
    rc = main(["check", "--no-assume", str(_ptx(tmp_path, "umma_2sm_no_after_fence.ptx")), *LAUNCH])
    got = capsys.readouterr()
    assert rc == 1 and ("SV603", at) in _findings(got.out + got.err)


@pytest.mark.parametrize(("name", "code", "at"), [
    ("umma_2sm_no_acc_full_wait.ptx", "SV302", "cute::SM100_MMA_F16BF16_2x1SM_SS<"),  # the MMA overwriting the read
    ("umma_2sm_wrong_commit.ptx", "SV502", "umma_arrive_multicast_2x1SM(&s.acc_full, 0x3);"),  # the stage's commit
])
def test_seeded_bug_is_flagged_at_its_line(tmp_path, capsys, name, code, at):  # type: ignore[no-untyped-def]
    """Each bug at its line; the kernel as written has none of these codes (test_the_kernel_checks_safe)."""
    rc, text = _check(tmp_path, capsys, name)
    assert rc == 1
    assert (code, _line(at)) in _findings(text), _findings(text)


def test_the_wrong_commit_also_races_and_hangs(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Each stage's commit lands on the accumulator barrier: the epilogue can load the accumulator while later
    MMAs still write it, and the producer waits forever for the stage's empty barrier."""
    rc, text = _check(tmp_path, capsys, "umma_2sm_wrong_commit.ptx")
    codes = {code for code, _ in _findings(text)}
    assert rc == 1 and {"SV201", "SV301"} <= codes
    # at the kernel's call of CUTLASS's commit (the user's own line), the header frames as notes
    assert f"umma_2sm.cu:{_line('umma_arrive_multicast_2x1SM(&s.acc_full, 0x3);')}:9: SV" in text


# ---- CUTLASS's sm100 2-SM GEMM ------------------------------------------------------------------------

FIELDS = DATA / "sm100_gemm_2sm_2x1_fields_256x128x128.bin"
# what `fields 256 128 128 148 FIELDS` prints: mode, problem shape, scheduler, hardware info, epilogue fusion
# parameters, and the boxes of A (byte 128: 16 KiB, this CTA's half), B (384: 8 KiB), C (1408) and D (1664)
PARAM_FIELDS = [(0, 4), (4, 16), (1920, 120), (2040, 36), (1280, 72)]
BOXES = {128: 16384, 384: 8192, 1408: 4096, 1664: 4096}


def _code(text: str) -> str:
    return "\n".join(ln.split("//")[0].strip() for ln in text.splitlines() if ln.split("//")[0].strip()) + "\n"


def test_cutlass_sm100_gemm_extracts_with_the_mainloop_probes(tmp_path):  # type: ignore[no-untyped-def]
    """Every tcgen05 instruction is extracted (the 2-SM allocation that used to be refused at
    tmem_allocator_sm100.hpp:141, the address word, the 2-SM copies), and the pipelines' probes are (they
    were refused at PTX line 1804 before, docs/extract.md "Probes"): the MMA warp's `consumer_try_wait`
    (barrier.h:470), whose false outcome goes on to the accumulator's `producer_acquire` before
    `consumer_wait(token)` (sm90_pipeline.hpp:620) tests the phase again, is a token let there and tested
    there; so is the load warp's `producer_try_acquire`, issued before the stage's copies and tested by the
    next `producer_acquire(token)` (sm90_pipeline.hpp:533)."""
    out = tmp_path / "gemm.ptx"
    out.write_bytes(gzip.decompress((DATA / "sm100_gemm_2sm_2x1_s2.ptx.gz").read_bytes()))
    blob = FIELDS.read_bytes()
    launch = Launch(block=(256, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=83968,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in BOXES.items()})
    text = extract(parse_ptx_file(str(out)), launch).text
    code = _code(text)
    # the MMA warp (warp 0 of the leader CTA): the probe of stage 0, the accumulator buffer, the token
    assert "let tok = try_wait mb0[0] parity 0;\nwait mb0[22] parity 1;\nif !tok {\nwait mb0[0] parity 0;\n}\n" \
        in code, code
    assert re.search(r"let tok = try_wait mb0\[0\] parity 0; +// [^\n]*barrier\.h:470[^\n]*ptx:1804", text)
    assert re.search(r"if !tok \{ +// [^\n]*sm90_pipeline\.hpp:620", text)
    # the load warp (warp 2), in both CTAs: the next stage's probe before this stage's copies
    assert code.count("let tok = try_wait mb0[3] parity 1;\n") == 2
    assert code.count("if !tok {\nwait mb0[3] parity 1;\n}\n") == 2
    assert "tcgen05.mma t0, s17, s25 cta_group 2;" in code


# ---- the one-SM forms: tests/data/ptx/sm100/umma_1sm.cu ------------------------------------------------

def test_the_one_sm_forms_extract_and_check_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """cta_group::1 allocation, MMA and plain commit (umma_arrive), tcgen05.cp into its own columns, the
    epilogue's tcgen05.st and wait::st: three regions, one per column range; safe."""
    ptx = _ptx(tmp_path, "umma_1sm_ok.ptx")
    launch = Launch(block=(96, 1, 1), dynamic_smem=16384)
    body = re.sub(r" *//[^\n]*", "", extract(parse_ptx_file(str(ptx)), launch).text)
    for decl in ("tmem t0 cols 64;", "tmem t1 cols 8;", "tmem t2 cols 8;"):  # MMA (N 64), cp (256 bits), st (x8)
        assert decl in body
    assert "elect {\n      tcgen05.cp t1, s2 cta_group 1;\n    }" in body
    assert "elect {\n      tcgen05.mma t0, s0, s1 cta_group 1;\n      tcgen05.commit mb0[1] cta_group 1;\n    }" in body
    assert "tcgen05.st t2;\n    tcgen05.wait::st;\n    tcgen05.fence::before_thread_sync;" in body
    capsys.readouterr()
    assert main(["check", str(ptx), "--block", "96", "--dynamic-smem", "16384"]) == 0
    got = capsys.readouterr()
    assert "1 file: 1 safe" in got.out + got.err


def test_a_store_never_waited_for_races_with_the_dealloc(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """-DSV_SEED_ST_NO_WAIT: the store is still in flight when the MMA warp frees the columns."""
    ptx = _ptx(tmp_path, "umma_1sm_st_no_wait.ptx")
    capsys.readouterr()
    assert main(["check", str(ptx), "--block", "96", "--dynamic-smem", "16384"]) == 1
    text = capsys.readouterr().out
    assert "umma_1sm.cu:106:5: SV303 WAW race on tmem t2: tmem.dealloc" in text
