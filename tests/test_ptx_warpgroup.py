"""The four warps of a wgmma warpgroup as one role: wgmma is .sync.aligned over the warpgroup, so the
language wants one statement run by all four (SV206 otherwise); warps that differ elsewhere -- CUTLASS's
consumer_release signals each CTA of the cluster from a different warp -- keep those statements under
`if instance == k`."""

from __future__ import annotations

from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import parse_ptx

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _kernel(skip_wait_in_warp: int = -1) -> str:
    """One warpgroup: commit a wgmma group; warp 1 alone does a __syncwarp; then every warp waits for the
    group -- except warp SKIP_WAIT_IN_WARP, if given (a broken kernel)."""
    skip = (f"  setp.eq.u32 %p2, %r2, {skip_wait_in_warp};\n  @%p2 bra $L__BB0_3;\n"
            if skip_wait_in_warp >= 0 else "")
    return HEAD + f""".visible .entry k()
{{
  .reg .b32 %r<8>;
  .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  wgmma.fence.sync.aligned;
  wgmma.commit_group.sync.aligned;
  setp.ne.u32 %p1, %r2, 1;
  @%p1 bra $L__BB0_2;
  bar.warp.sync -1;
$L__BB0_2:
{skip}  wgmma.wait_group.sync.aligned 0;
$L__BB0_3:
  ret;
}}
"""


def test_warps_of_a_warpgroup_that_differ_share_their_wgmma_statements(tmp_path):
    text = extract(parse_ptx(_kernel(), "t.ptx"), Launch(block=(128, 1, 1))).text
    assert "role w0_3[4] = warp 0 + i;" in text
    body = text[text.index("if w0_3 {"):]
    assert body.index("wgmma.commit;") < body.index("if instance == 1 {\n      syncwarp;") \
        < body.index("wgmma.wait 0;")
    ptx = tmp_path / "t.ptx"
    ptx.write_text(_kernel())
    assert main(["check", str(ptx), "--block", "128"]) == 0


def test_a_warp_that_skips_a_wgmma_operation_is_still_sv206(tmp_path, capsys):
    ptx = tmp_path / "t.ptx"
    ptx.write_text(_kernel(skip_wait_in_warp=2))
    text = extract(parse_ptx(ptx.read_text(), "t.ptx"), Launch(block=(128, 1, 1))).text
    assert "if instance == 0 || instance == 1 || instance == 3 {\n      wgmma.wait 0;" in text
    assert main(["check", str(ptx), "--block", "128"]) == 1
    got = capsys.readouterr()
    assert "SV206" in got.out + got.err and "not by warps [2]" in got.out + got.err


def test_alike_warps_stay_one_plain_role():
    text = extract(parse_ptx(_kernel().replace("  bar.warp.sync -1;\n", ""), "t.ptx"), Launch(block=(128, 1, 1))).text
    assert "role w0_3[4] = warp 0 + i;" in text and "instance" not in text
