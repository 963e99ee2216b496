"""Probes read from PTX (ptx/probe.py; docs/extract.md, "Probes"): a `try_wait` whose result decides a branch
is extracted as the language's probe, both outcomes written, instead of refused.

The kernels are tests/data/ptx/probes/token.cu (built by build.sh there, the PTX committed): a two-stage
TMA ring whose consumer takes CUTLASS's token shape -- `tok = consumer_try_wait(...)`, other work,
`consumer_wait(..., tok)` = `if (!tok) wait` -- and its twins: the wait skipped when the token is false,
and a bounded retry after the token. Small hand-written kernels pin the forms the structure cannot be
written for (refused at the probe's line).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.extract import extract, load_module
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx

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
