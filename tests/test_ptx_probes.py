"""Probes read from PTX (ptx/probe.py; docs/extract.md, "Probes"): a `try_wait` whose result decides a branch
is extracted as the language's probe, both outcomes written, instead of refused.

The kernels are tests/data/ptx/probes/token.cu (built by build.sh there, the PTX committed): a two-stage
TMA ring whose consumer takes CUTLASS's token shape -- `tok = consumer_try_wait(...)`, other work,
`consumer_wait(..., tok)` = `if (!tok) wait` -- and its twins: the wait skipped when the token is false,
and a bounded retry after the token. Small hand-written kernels pin the forms the structure cannot be
written for (refused at the probe's line).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx import probe_lanes
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch, ParamBytes
from syncverify.ptx.parse import PtxError, parse_ptx, parse_ptx_file
from tests.test_ptx_sm100 import BOXES, FIELDS, PARAM_FIELDS
from tests.test_ptx_sm100 import DATA as SM100

DATA = Path(__file__).parent / "data" / "ptx" / "probes"
TOKEN = str(DATA / "token.ptx")
ENGINES = ["explicit", "z3"]


def _code(text: str) -> str:
    """The protocol without its comments, one statement a line, unindented."""
    return "\n".join(ln.split("//")[0].strip() for ln in text.splitlines() if ln.split("//")[0].strip()) + "\n"


def _kernel_line(marker: str) -> int:
    lines = (DATA / "token.cu").read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
    return n


def _check(kernel: str, *extra: str, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(["check", TOKEN, "--kernel", kernel, "--block", "64", *extra])
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_the_token_is_let_and_tested_where_consumer_wait_tests_it():
    """The probe, the work between (a syncwarp), and `if !tok { wait … }` at the branch: a loop of two
    stages, each with its own token (the writer names them apart: the language lets no name twice).
    Extraction's own names: `full` is mb0[0..1], stage 0 of `tile` is s0 (and s1: its bytes the lanes
    do not read)."""
    code = _code(extract(load_module(TOKEN), Launch(block=(64, 1, 1)), "token_wait").text)
    assert ("let tok = try_wait mb0[0] parity k0 % 2;\nsyncwarp;\nif !tok {\nwait mb0[0] parity k0 % 2;\n}\n"
            "read s0;\n") in code, code
    assert ("let tok_2 = try_wait mb0[1] parity k0 % 2;\nsyncwarp;\nif !tok_2 {\nwait mb0[1] parity k0 % 2;\n}\n"
            in code), code
    assert "wait mb0[0] parity k0 % 2;" in code and code.count("try_wait") == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_the_token_then_the_wait_is_safe(engine, capsys):  # type: ignore[no-untyped-def]
    rc, out = _check("token_wait", "--engine", engine, capsys=capsys)
    assert rc == 0 and "(token_wait): safe" in out, out


@pytest.mark.parametrize("engine", ENGINES)
def test_skipping_the_wait_on_a_false_token_races_at_the_read(engine, capsys):  # type: ignore[no-untyped-def]
    """The twin: `if (!tok) __nanosleep(32);` -- the branch is still on the token, but neither outcome waits."""
    code = _code(extract(load_module(TOKEN), Launch(block=(64, 1, 1)), "token_skip").text)
    assert "let tok = try_wait mb0[0] parity k0 % 2;\nsyncwarp;\nif tok {\n}\nread s0;\n" in code, code
    rc, out = _check("token_skip", "--engine", engine, capsys=capsys)
    line = _kernel_line("KERNEL(token_skip,")
    assert rc == 1 and re.search(rf"token\.cu:{line}:\d+: SV301 RAW race on tile_0", out), out


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bounded_retry_after_the_token_falls_through_and_races(engine, capsys):  # type: ignore[no-untyped-def]
    code = _code(extract(load_module(TOKEN), Launch(block=(64, 1, 1)), "token_retry").text)
    assert ("let tok = try_wait mb0[0] parity k0 % 2;\nsyncwarp;\nif !tok {\nif !try_wait mb0[0] parity k0 % 2 {\n"
            "if !try_wait mb0[0] parity k0 % 2 {\nif try_wait mb0[0] parity k0 % 2 {\n}\n}\n}\n}\nread s0;\n"
            in code), code
    rc, out = _check("token_retry", "--engine", engine, capsys=capsys)
    line = _kernel_line("KERNEL(token_retry,")
    assert rc == 1 and re.search(rf"token\.cu:{line}:\d+: SV301 RAW race on tile_0", out), out


def test_bmc_says_it_cannot_decide_a_probe(capsys):  # type: ignore[no-untyped-def]
    rc, out = _check("token_wait", "--engine", "bmc", capsys=capsys)
    assert rc != 0 and "inconclusive" in out and ": safe" not in out, out


# ---- hand-written forms ----------------------------------------------------------------------------

def _kernel(body: str):  # type: ignore[no-untyped-def]
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k()\n{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<8>;\n  .reg .pred %p<4>;\n"
            f"{body}}}\n")
    return parse_ptx(text, "t.ptx")


_HEAD = "  mov.u32 %r1, 0;\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"


def test_a_probe_that_guards_an_instruction_is_an_if_on_its_token():
    """`@p st.shared` right after the probe (nvcc predicates short bodies): the step is the use."""
    body = _HEAD + "  @%p1 st.shared.u32 [%r1+16], %r1;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n"
    code = _code(extract(_kernel(body), Launch(block=(32, 1, 1))).text)
    assert re.search(r"if try_wait mb0 parity 0 \{\nwrite s0[^\n]*;\n\}\nread s0", code), code


def test_a_probe_used_twice_is_a_token_with_two_uses():
    body = (_HEAD + "  @%p1 st.shared.u32 [%r1+16], %r1;\n  bar.warp.sync -1;\n  @!%p1 bra $L__BB0_2;\n"
            "  ld.shared.u32 %r3, [%r1+16];\n$L__BB0_2:\n  ret;\n")
    code = _code(extract(_kernel(body), Launch(block=(32, 1, 1))).text)
    assert re.search(r"let tok = try_wait mb0 parity 0;\nif tok \{\nwrite s0[^\n]*;\n\}\nsyncwarp;\n"
                     r"if tok \{\nread s0[^\n]*;\n\}\n", code), code


@pytest.mark.parametrize(("body", "why", "line"), [
    # the false outcome goes to its own end of the kernel, the true one to another
    (_HEAD + "  @!%p1 bra $L__BB0_2;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n$L__BB0_2:\n  exit;\n",
     "do not join before the kernel ends", 10),
    # the false outcome ends the thread at once
    (_HEAD + "  @!%p1 exit;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n", "ends threads the other does not", 10),
    # a second probe while the first one's result is still to be used
    (_HEAD + "  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r1+8], 0;\n  bar.warp.sync -1;\n"
     "  @%p2 bra $L__BB0_2;\n  @%p1 bra $L__BB0_2;\n  ld.shared.u32 %r3, [%r1+16];\n$L__BB0_2:\n  ret;\n",
     "two probes whose results are both pending", 11),
])
def test_what_cannot_be_written_as_an_if_is_refused_at_the_probe(body, why, line):  # type: ignore[no-untyped-def]
    """Probed by lane 0 alone (one lane: one result; the other lanes go to the end), on the same PTX lines;
    probed by the whole warp, the first two are also lanes whose results differ exiting apart
    (test_counted_operations_on_one_outcome_of_a_warp_probe_are_refused)."""
    one_lane = "  mov.u32 %r1, 0; mov.u32 %r2, %laneid; setp.ne.u32 %p3, %r2, 0; @%p3 bra $L__END;\n"
    body = body.replace("  mov.u32 %r1, 0;\n", one_lane, 1) + "$L__END:\n  ret;\n"
    with pytest.raises(PtxError) as err:
        extract(_kernel(body), Launch(block=(32, 1, 1)))
    assert why in err.value.message, err.value.message
    assert err.value.line == line  # the probe's (the second probe's) PTX line


def test_a_probe_of_some_lanes_is_refused():
    body = ("  mov.u32 %r1, 0;\n  mov.u32 %r2, %laneid;\n  setp.lt.u32 %p2, %r2, 4;\n  @!%p2 bra $L__BB0_3;\n"
            "  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n  @%p1 bra $L__BB0_3;\n"
            "  ld.shared.u32 %r3, [%r1+16];\n$L__BB0_3:\n  ret;\n")
    with pytest.raises(PtxError, match="only some lanes of the warp execute it"):
        extract(_kernel(body), Launch(block=(32, 1, 1)))


def test_a_test_wait_probe_and_a_test_wait_spin():
    """`test_wait` was refused as unmodelled: a branch on it is a probe, a loop on it a wait."""
    probe = ("  mov.u32 %r1, 0;\n  mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
             "  @!%p1 bra $L__BB0_2;\n  ld.shared.u32 %r3, [%r1+16];\n$L__BB0_2:\n  ret;\n")
    code = _code(extract(_kernel(probe), Launch(block=(32, 1, 1))).text)
    assert "if test_wait mb0 parity 0 {\nread s0;\n}\n" in code, code
    spin = ("  mov.u32 %r1, 0;\n$L__BB0_1:\n  mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
            "  @!%p1 bra $L__BB0_1;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n")
    code = _code(extract(_kernel(spin), Launch(block=(32, 1, 1))).text)
    assert "wait mb0 parity 0;\nread s0;\n" in code and "test_wait" not in code, code


# ---- lanes with different results (ptx/probe_lanes.py) ----------------------------------------------
# PTX executes try_wait per thread and each thread's test may time out on its own: the two uniform outcomes
# cover a mixed one only where they differ in waits and per-lane accesses, or where a vote of the result
# decides. tests/data/ptx/probes/lanes.cu: one TMA load, warp 1 probes it and, where the probe failed,
# arrives on a second barrier `late`.

LANES = str(DATA / "lanes.ptx")


def _ptx_line(kernel: str, needle: str) -> int:
    """The PTX line of the first `needle` in `kernel`'s body in lanes.ptx."""
    lines = Path(LANES).read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith(f".visible .entry {kernel}("))
    return next(i + 1 for i in range(start, len(lines)) if needle in lines[i])


@pytest.mark.parametrize("kernel", ["lanes_arrive", "lanes_novote"])
def test_a_whole_warp_arrive_on_a_failed_probe_is_refused_at_the_probe(kernel, capsys):  # type: ignore[no-untyped-def]
    """`if (!tok) arrive(&late)` by 32 lanes: lanes with different results arrive between 0 and 32 times
    (on `late` of count 32, fewer arrivals and a wait that never ends, which neither uniform outcome has);
    `lanes_novote` is lanes_vote without its `__all_sync`: the `__syncwarp` then lies on one lane's path."""
    probe, arrive = _ptx_line(kernel, "mbarrier.try_wait"), _ptx_line(kernel, "mbarrier.arrive.shared")
    with pytest.raises(PtxError) as err:
        extract(load_module(LANES), Launch(block=(64, 1, 1)), kernel)
    msg = err.value.message
    assert err.value.line == probe and "32 lanes execute this probe" in msg, msg
    assert f"`mbarrier.arrive.shared::cta.b64` at PTX line {arrive} (CUDA lanes.cu:37)" in msg, msg
    capsys.readouterr()
    rc = main(["check", LANES, "--kernel", kernel, "--block", "64"])
    got = capsys.readouterr()
    assert rc == 2 and f"lanes.ptx:{probe}:" in got.out + got.err and "^" in got.out + got.err


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("kernel", "block"), [
    # the result voted across the warp first: one branch for the warp, one lane arrives, the warp meets
    ("lanes_vote", "if !try_wait mb0[0] parity 0 {\nelect {\narrive mb0[1];\n}\nsyncwarp;\nwait mb0[1] parity 0;\n}\n"),
    # one lane probes and arrives: one result
    ("lanes_one", "elect {\nif !try_wait mb0[0] parity 0 {\narrive mb0[1];\n}\n}\nsyncwarp;\n"),
])
def test_a_voted_or_single_lane_probe_before_an_arrive_extracts_and_is_safe(kernel, block, engine, capsys):  # type: ignore[no-untyped-def]
    code = _code(extract(load_module(LANES), Launch(block=(64, 1, 1)), kernel).text)
    assert block + "wait mb0[0] parity 0;\nread s0;\n" in code, code
    capsys.readouterr()
    rc = main(["check", LANES, "--kernel", kernel, "--block", "64", "--engine", engine])
    out = capsys.readouterr().out
    assert rc == 0 and f"({kernel}): safe" in out, out


def test_the_token_kernels_probe_with_the_whole_warp_and_differ_only_by_a_wait():
    """The token kernels' consumer_try_wait is executed by all 32 lanes of warp 1 (no `elect` around it),
    and its outcomes differ by a wait (or a back-off, or further probes): the uniform reading stands."""
    for kernel in ("token_wait", "token_skip", "token_retry"):
        code = _code(extract(load_module(TOKEN), Launch(block=(64, 1, 1)), kernel).text)
        w1 = code[code.index("if w1 {"):]
        assert "try_wait mb0[" in w1 and "elect {\nlet tok" not in w1 and "elect {\nif try_wait" not in w1, code


_VOTE = "  selp.u32 %r2, 1, 0, %p1;\n  setp.ne.u32 %p2, %r2, 0;\n"


@pytest.mark.parametrize(("body", "counted"), [
    # the result guards a whole-warp arrive
    (_HEAD + "  @!%p1 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n  ret;\n", "mbarrier.arrive"),
    # a __syncwarp on the false outcome's path only
    (_HEAD + "  @%p1 bra $L__BB0_2;\n  bar.warp.sync -1;\n$L__BB0_2:\n  ret;\n", "bar.warp.sync"),
    # vote.sync.uni: lanes with different results give `false`, which no uniform outcome gives
    (_HEAD + _VOTE + "  vote.sync.uni.pred %p3, %p2, -1;\n  @!%p3 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n"
     "  ret;\n", "mbarrier.arrive"),
    # a ballot gives each lane its own result back
    (_HEAD + _VOTE + "  vote.sync.ballot.b32 %r3, %p2, -1;\n  mov.u32 %r4, %lanemask_eq;\n  and.b32 %r5, %r3, %r4;\n"
     "  setp.ne.u32 %p3, %r5, 0;\n  @!%p3 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n  ret;\n", "mbarrier.arrive"),
    # the same through control flow: the voted predicate written on two paths the lanes take by their id
    (_HEAD + "  selp.u32 %r2, 1, 0, %p1;\n  mov.u32 %r3, %laneid;\n  setp.lt.u32 %p4, %r3, 16;\n"
     "  @%p4 bra $L__BB0_1;\n  setp.ne.u32 %p2, %r2, 0;\n  bra.uni $L__BB0_2;\n$L__BB0_1:\n"
     "  setp.eq.u32 %p2, %r2, 0;\n$L__BB0_2:\n  vote.sync.all.pred %p3, %p2, -1;\n"
     "  @!%p3 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n  ret;\n", "mbarrier.arrive"),
    # the false outcome exits (a warp's lanes exit apart), or ends at its own exit
    (_HEAD + "  @!%p1 exit;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n", "exit"),
    (_HEAD + "  @!%p1 bra $L__BB0_2;\n  ld.shared.u32 %r3, [%r1+16];\n  ret;\n$L__BB0_2:\n  exit;\n", "ret"),
    # a vote of a predicate that also reads the lane id: not the same function of the result in every lane
    (_HEAD + _VOTE + "  mov.u32 %r3, %laneid;\n  setp.lt.u32 %p4, %r3, 16;\n  xor.pred %p2, %p2, %p4;\n"
     "  vote.sync.all.pred %p3, %p2, -1;\n  @!%p3 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n  ret;\n",
     "mbarrier.arrive"),
])
def test_counted_operations_on_one_outcome_of_a_warp_probe_are_refused(body, counted):  # type: ignore[no-untyped-def]
    with pytest.raises(PtxError) as err:
        extract(_kernel(body), Launch(block=(32, 1, 1)))
    msg = err.value.message
    assert err.value.line == 10 and "32 lanes execute this probe" in msg and f"`{counted}" in msg, msg


@pytest.mark.parametrize(("vote", "uniform"), [
    ("all.pred %p3, %p2", "if !try_wait"),  # all lanes true, or not: true only when every lane's probe passed
    ("any.pred %p3, !%p2", "if try_wait"),  # some lane false, or none: the same, negated
    ("any.pred %p3, %p2", None),            # true when some lane passed: the others did not acquire
    ("all.pred %p3, !%p2", None),           # the same, negated
])
def test_a_vote_of_the_result_makes_the_warp_probe_one_outcome(vote, uniform):  # type: ignore[no-untyped-def]
    """The near twins of the refused forms: a vote of the result, then the arrive. A vote stands for the
    probe only when its all-true value means that every lane's test passed: a lane whose try_wait returned
    false did not acquire, even where another lane saw the phase complete."""
    body = _HEAD + _VOTE + f"  vote.sync.{vote}, -1;\n  @!%p3 mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n  ret;\n"
    if uniform:
        code = _code(extract(_kernel(body), Launch(block=(32, 1, 1))).text)
        assert f"{uniform} mb0[0] parity 0 {{\narrive mb0[1];\n}}\n" in code, code
    else:
        with pytest.raises(PtxError) as err:
            extract(_kernel(body), Launch(block=(32, 1, 1)))
        assert err.value.line == 10 and "`mbarrier.arrive.shared::cta.b64` at PTX line 14" in err.value.message


def test_cutlass_sm100_gemm_probes_are_whole_warp_and_read_uniformly(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """CUTLASS's sm100 2-SM GEMM (tests/test_ptx_sm100.py builds and checks it): its pipelines'
    `consumer_try_wait` (barrier.h:470, the MMA warp) and `producer_try_acquire` (the load warp) are executed
    by all 32 lanes of their warps, and the lanes' results are followed through to `consumer_wait(token)` /
    `producer_acquire(token)`: the outcomes differ only by that wait, so the uniform reading stands and the
    GEMM extracts with its tokens."""
    started: list[tuple[int, int]] = []
    start = probe_lanes.LaneWatch.start

    def record(parent, p, value):  # type: ignore[no-untyped-def]
        started.append((p.ins.line, bin(p.lanes).count("1")))
        return start(parent, p, value)

    monkeypatch.setattr(probe_lanes.LaneWatch, "start", staticmethod(record))
    out = tmp_path / "gemm.ptx"
    out.write_bytes(gzip.decompress((SM100 / "sm100_gemm_2sm_2x1_s2.ptx.gz").read_bytes()))
    blob = FIELDS.read_bytes()
    launch = Launch(block=(256, 1, 1), cluster=(2, 1, 1), grid=(2, 1, 1), dynamic_smem=83968,
                    params={"0": ParamBytes(tuple((o, blob[o: o + n]) for o, n in PARAM_FIELDS))},
                    tensor_bytes={("0", o): n for o, n in BOXES.items()})
    code = _code(extract(parse_ptx_file(str(out)), launch).text)
    assert "let tok = try_wait mb0[0] parity 0;\n" in code and "let tok = try_wait mb0[3] parity 1;\n" in code
    assert (1804, 32) in started, started  # consumer_try_wait, by the MMA warp's 32 lanes
