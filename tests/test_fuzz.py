"""Fuzzing the front end: whatever the input, `load` returns a Protocol or raises an
InputError of SV1xx diagnostics with spans, and the CLI exits 2 or 3 — never a traceback.

Inputs: random text, token soups from the grammar's own vocabulary, and
mutations of valid specs (characters and tokens deleted, duplicated, swapped;
numbers made huge, negative or zero; keywords inserted). The CLI runs with
the engine stubbed to "inconclusive", so this file tests the front end and
the CLI plumbing, not the model checker, and stays fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncverify
from syncverify import ir
from syncverify.cli import main
from syncverify.diagnostics import CODES, InputError
from syncverify.lang.parse import _parser
from syncverify.result import CheckResult, Verdict

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLI_FUZZ = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def load_text(text: str) -> ir.Protocol:
    # A trailing newline keeps `load` from taking one-line text for a file name.
    return syncverify.load(text + "\n", path="fuzz.sync")


def assert_front_end_contract(text: str) -> ir.Protocol | None:
    """Either a Protocol, or an InputError made only of located SV1xx errors. Anything else fails."""
    try:
        protocol = load_text(text)
    except InputError as err:
        assert err.diagnostics, "an InputError without diagnostics"
        lines = text.count("\n") + 2
        for d in err.diagnostics:
            assert d.code in CODES and d.code.startswith("SV1"), d
            assert d.is_error and d.message, d
            assert d.span is not None and d.span.path == "fuzz.sync", d
            assert 1 <= d.span.line <= lines and d.span.column >= 1, d
        return None
    assert isinstance(protocol, ir.Protocol)
    return protocol


# ---------------------------------------------------------------------------
# Vocabulary and seeds

KEYWORDS = sorted({t.pattern.value for t in _parser().terminals if t.pattern.type == "str"})
OPERATORS = ["==", "!=", "<=", ">=", "<", ">", "|", "^", "&", "<<", ">>", "+", "-", "*", "/", "%"]
OP_NAMES = ["init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "wait", "try_wait",
            "syncthreads", "syncwarp", "bar", "barrier", "read", "write", "tma", "bulk", "wgmma", "fence",
            "tmem", "umma", "full", "empty", "tile", "producer", "consumer", "STAGES", "k", "s", "i"]
QUALS = [".release", ".acquire", ".relaxed", ".cta", ".cluster", ".expect_tx", ".sync", ".arrive", ".wait",
         ".load", ".store", ".commit", ".wait_read", ".proxy", ".async", ".mbarrier_init", ".shared::cta",
         ".parity", ".aligned", ".alloc", ".dealloc", ".bogus"]
NUMBERS = ["0", "1", "2", "16", "32", "128", "1024", "0x10", "0b101", "1_000", "007", "0x_",
           str(1 << 20), str((1 << 20) - 1), str(1 << 62), str(1 << 63), "9" * 40]
JUNK = ["$", "#", "`", "\\", "'", '"', "→", "\u00a0", "\t", "\r\n", "/*", "*/", "//", "\x00"]

VOCAB = KEYWORDS + OPERATORS + OP_NAMES + QUALS + NUMBERS + JUNK

RING = """\
// CUTLASS-style warp-specialized TMA ring
// expect: safe
protocol ws_ring {
  param STAGES = 4;
  param ITERS  = 16;
  param BYTES  = 16384;
  cta threads 384;
  role producer    = warp 0;
  role consumer[2] = warpgroup 1 + i;
  smem tile[STAGES] bytes BYTES;
  mbarrier full[STAGES]  count 1;
  mbarrier empty[STAGES] count 256;
  if producer { elect { init full[*]; init empty[*]; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait empty[s] parity (k / STAGES + 1) % 2;
      elect {
        arrive.expect_tx full[s] bytes BYTES;
        tma.load tile[s] bytes BYTES -> full[s];
      }
    }
  }
  if consumer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      read tile[s];
      arrive empty[s];
    }
  }
}
"""

KITCHEN_SINK = """\
// expect: SV201
protocol sink {
  param N = 2;
  cluster 2;
  cta threads 512;
  role prod = warp 0;
  role mma[2] = warpgroups 1 + i..2 + i;
  role epi = threads 384..512;
  smem a[N] bytes 1024;
  smem c bytes 256;
  mbarrier full[N] count 1;
  mbarrier empty[N];
  mbarrier acc count 1;
  named sched[2] id 1 + i count 256;
  named store id 5 count 128;
  if prod && cta == 0 { elect { init full[*]; init empty[*] count 2; init acc; fence.mbarrier_init.release.cluster; } }
  cluster.arrive.relaxed; cluster.wait;
  if prod {
    for k in 0..2 * N {
      let s = k % N;
      wait.acquire.cta empty[s] parity ((k / N) ^ 1) & 1;
      elect { arrive.expect_tx full[s] bytes 2048; tma.load a[s] -> full[s] multicast 0b11; }
    }
  } else if mma {
    for k in 0..2 * N {
      wait full[k % N] parity k / N % 2;
      wgmma.read a[k % N]; wgmma.commit; wgmma.wait 1;
      per warp { arrive.release.cluster empty[k % N] @ cta ^ 1; }
    }
    bar.arrive sched[instance];
    elect { umma.commit acc multicast 3; }
  } else {
    bar.sync store; write c; fence.proxy.async.shared::cta; syncwarp;
    elect { tma.store c; bulk.commit; bulk.wait_read 0; expect_tx acc bytes 16; complete_tx acc bytes 16; }
    tmem.alloc cta_group 2 cols 64; tmem.dealloc cta_group 2;
    arrive_drop acc; inval.shared::cta acc;
  }
  cluster.sync;
}
"""


def _seeds() -> list[str]:
    seeds = [RING, KITCHEN_SINK]
    specs = Path(__file__).resolve().parent.parent / "specs"
    if specs.is_dir():  # specs written elsewhere join the seeds when they exist
        seeds += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(specs.rglob("*.sync"))[:20]]
    return seeds


SEEDS = _seeds()
TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|0[xXbB][0-9a-fA-F_]*|\d[\d_]*|[A-Za-z_][A-Za-z_0-9]*|\.[A-Za-z_][\w:]*|"
                   r"\.\.|->|<<|>>|<=|>=|==|!=|&&|\|\||\s+|.", re.S)


def test_seeds_are_valid():
    for seed in (RING, KITCHEN_SINK):
        assert isinstance(load_text(seed), ir.Protocol)


# ---------------------------------------------------------------------------
# Strategies

soup_token = st.one_of(st.sampled_from(VOCAB), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
                       st.integers(-(1 << 70), 1 << 70).map(str))
separator = st.sampled_from([" ", " ", " ", "\n", "", "\t"])


@st.composite
def token_soup(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(st.tuples(soup_token, separator), max_size=60))
    body = "".join(t + sep for t, sep in tokens)
    if draw(st.booleans()):
        body = f"protocol fuzz {{\n  cta threads 128;\n{body}\n}}\n"
    return body


MUTATION_VALUES = ["0", "-1", "1", "3", "17", "31", "33", str(1 << 20), str((1 << 20) - 1), str(1 << 62),
                   str(1 << 62 + 1), "9" * 30, "-" + "9" * 30, "0x", "08", "4096", "4097", "16", "1024", "65536"]
INSERTS = KEYWORDS + OP_NAMES + QUALS + ["{", "}", ";", "(", ")", "[*]", "@ 1", "-> full[0]", "count 0",
                                          "elect {", "if producer {", "for z in 0..N {", "\n", "//", "/*"]


@st.composite
def mutated_spec(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["del_chars", "dup_chars", "swap_chars", "del_token", "dup_token",
                                     "swap_tokens", "number", "insert"]))
        if kind in ("del_chars", "dup_chars", "swap_chars"):
            if not text:
                continue
            i = draw(st.integers(0, len(text) - 1))
            j = min(len(text), i + draw(st.integers(1, 12)))
            if kind == "del_chars":
                text = text[:i] + text[j:]
            elif kind == "dup_chars":
                text = text[:j] + text[i:j] + text[j:]
            else:
                k = draw(st.integers(0, len(text) - 1))
                chars = list(text)
                chars[i], chars[k] = chars[k], chars[i]
                text = "".join(chars)
            continue
        tokens = TOKEN.findall(text)
        if not tokens:
            continue
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "del_token":
            del tokens[i]
        elif kind == "dup_token":
            tokens.insert(i, tokens[i])
        elif kind == "swap_tokens":
            k = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[k] = tokens[k], tokens[i]
        elif kind == "number":
            numbers = [n for n, t in enumerate(tokens) if t[:1].isdigit()]
            if numbers:
                tokens[draw(st.sampled_from(numbers))] = draw(st.sampled_from(MUTATION_VALUES))
        else:
            tokens.insert(i, " " + draw(st.sampled_from(INSERTS)) + " ")
        text = "".join(tokens)
    return text


# ---------------------------------------------------------------------------
# The front end


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text):
    assert_front_end_contract(text)


@FUZZ
@given(st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_random_bytes_as_text(text):
    assert_front_end_contract(text)


@FUZZ
@given(token_soup())
def test_token_soup(text):
    assert_front_end_contract(text)


@FUZZ
@given(mutated_spec())
def test_mutated_specs(text):
    assert_front_end_contract(text)


@FUZZ
@given(mutated_spec(), st.dictionaries(st.sampled_from(["STAGES", "ITERS", "BYTES", "N", "X"]),
                                       st.integers(-(1 << 64), 1 << 64), max_size=3))
def test_mutated_specs_with_defines(text, defines):
    try:
        syncverify.load(text + "\n", defines=defines, path="fuzz.sync")
    except InputError as err:
        assert all(d.code.startswith("SV1") and d.span is not None for d in err.diagnostics)


# ---------------------------------------------------------------------------
# The CLI


def _stub_engine(protocol: ir.Protocol, options: object) -> CheckResult:
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound="",
                       coverage="engine stubbed by the fuzz tests")


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.sync"


def run_cli(path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out, err = io.StringIO(), io.StringIO()
    with mock.patch("syncverify.check.check_protocol", _stub_engine), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        rc = main(["check", str(path), *args])
    return rc, out.getvalue(), err.getvalue()


@CLI_FUZZ
@given(st.one_of(mutated_spec(), token_soup(), st.text(max_size=200)))
def test_cli_text_report(fuzz_file, text):
    rc, out, err = run_cli(fuzz_file, text)
    assert rc in (2, 3), out + err
    assert "Traceback" not in out + err
    assert out.rstrip().endswith(": error" if rc == 2 else "engine stubbed by the fuzz tests")


@CLI_FUZZ
@given(st.one_of(mutated_spec(), token_soup()))
def test_cli_json_report(fuzz_file, text):
    rc, out, err = run_cli(fuzz_file, text, "--format", "json")
    assert rc in (2, 3) and "Traceback" not in err
    (result,) = json.loads(out)["results"]
    assert result["verdict"] == ("error" if rc == 2 else "inconclusive")
    assert all(d["code"].startswith("SV1") and d["line"] >= 1 for d in result["diagnostics"])
