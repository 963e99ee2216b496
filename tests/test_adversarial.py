"""Adversarial specs: huge params, deep nesting, thousands of barriers, processes or statements.

Whatever the size, `syncverify check` must end within its budgets in one of
two ways: exit 3 (inconclusive) with coverage figures ("no violation in N
states; … budget reached"), or exit 2 with a clear SV1xx error — never a
traceback, never a hang. Each check runs in-process under an alarm, so a hang
fails the test instead of stalling the suite; wall times are bounded
generously (the machine may be loaded), but far below "forever".
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import time
from pathlib import Path

import pytest

from syncverify.cli import main

MAX_STATES = 1500
TIMEOUT = 4.0
HANG = 90  # seconds: a check still running after this is a hang


def ring(stages: str | int, iters: str | int, extra: str = "", nbytes: int = 256) -> str:
    return f"""protocol ring {{
  param STAGES = {stages};
  param ITERS = {iters};
  cta threads 64;
  role prod = warp 0;
  role cons = warp 1;
  smem tile[STAGES] bytes {nbytes};
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES] count 32;
  {extra}
  if prod {{ elect {{ init full[*]; init empty[*]; }} }}
  syncthreads;
  if prod {{ for k in 0..ITERS {{ let s = k % STAGES; wait empty[s] parity (k / STAGES + 1) % 2;
    elect {{ arrive.expect_tx full[s] bytes {nbytes}; tma.load tile[s] -> full[s]; }} }} }}
  if cons {{ for k in 0..ITERS {{ let s = k % STAGES; wait full[s] parity (k / STAGES) % 2;
    read tile[s]; arrive empty[s]; }} }}
}}
"""


def nested(depth: int) -> str:
    return "protocol deep {\n  cta threads 32;\n" + "if 1 { " * depth + "syncwarp;" + " }" * depth + "\n}\n"


def handoffs(n: int) -> str:
    body = "  if a { write s; } bar.sync n; if b { read s; } bar.sync n;\n" * n
    return ("protocol many_ops {\n  cta threads 64;\n  role a = warp 0;\n  role b = warp 1;\n  smem s bytes 16;\n"
            f"  named n id 1 count 64;\n{body}}}\n")


class Hang(Exception):
    pass


def check(tmp_path: Path, text: str, *extra: str, hang: int = HANG) -> tuple[int, dict, float]:
    """Run `syncverify check --format json` on the text; returns (exit code, the result, seconds)."""
    path = tmp_path / "adversarial.sync"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise Hang(f"no answer after {hang}s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(hang)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["check", str(path), "--format", "json", "--max-states", str(MAX_STATES),
                       "--timeout", str(TIMEOUT), *extra])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    seconds = time.monotonic() - start
    assert "Traceback" not in out.getvalue() + err.getvalue()
    (result,) = json.loads(out.getvalue())["results"]
    return rc, result, seconds


def assert_inconclusive_with_coverage(rc: int, result: dict) -> None:
    assert rc == 3, result
    assert result["verdict"] == "inconclusive"
    assert "no violation in" in result["coverage"] and "budget" in result["coverage"], result["coverage"]
    assert result["stats"]["states"] > 0


def assert_input_error(rc: int, result: dict, code: str, words: str) -> None:
    assert rc == 2, result
    codes = [d["code"] for d in result["diagnostics"]]
    assert code in codes, codes
    d = next(d for d in result["diagnostics"] if d["code"] == code)
    assert words in d["message"] and d["line"] >= 1, d


# ---------------------------------------------------------------------------
# Budgets run out: exit 3 with coverage


@pytest.mark.parametrize("text, extra", [
    (ring(2, "1 << 40"), ()),                                   # a trip count of 2^40
    (ring(2, 4), ("-D", "ITERS=1099511627776")),               # the same through -D
    ("protocol loops {\n  cta threads 32;\n  smem b bytes 16;\n"
     "  for a in 0..1 << 30 { for c in 0..1 << 30 { write b; } }\n}\n", ()),
    ("protocol threads {\n  cta threads 1024;\n  role t[1024] = thread i;\n  smem b[1024] bytes 16;\n"
     "  for k in 0..1 << 20 { if t { write b[instance]; } }\n}\n", ()),  # 1024 one-thread processes
    ("protocol cluster16 {\n  param ITERS = 1000;\n  cluster 16;\n  cta threads 1024;\n  role w[32] = warp i;\n"
     "  named nb id 1 count 1024;\n  smem b bytes 16;\n  for k in 0..ITERS { bar.sync nb; "
     "if w && instance == k % 32 { write b; } bar.sync nb; read b; }\n}\n", ()),  # 512 warps
    (ring(2, "1 << 20", "mbarrier pool[4096] count 1; mbarrier spare[4096] count 2; named nb[16] id i count 64;"),
     ()),                                                       # thousands of declared barriers
    (handoffs(400), ()),                                        # 1,600 statements
], ids=["iters-2^40", "define-2^40", "nested-loops-2^60", "1024-processes", "cluster-16x32-warps",
        "8192-declared-mbarriers", "1600-statements"])
def test_budget_ends_inconclusive(tmp_path, text, extra):
    rc, result, seconds = check(tmp_path, text, *extra)
    assert_inconclusive_with_coverage(rc, result)
    assert seconds < HANG


def test_time_budget_holds_with_thousands_of_live_barriers(tmp_path):
    """4,096 stages initialized and used: slow per state; the search must still stop on time. (16-byte
    stages: 4,096 of 256 bytes would not fit in a CTA's shared memory, SV509.)"""
    rc, result, seconds = check(tmp_path, ring(4096, 64, nbytes=16), "--max-states", "1000000", "--timeout", "1")
    assert rc == 3, result  # it ends, inconclusive
    assert "time budget" in result["coverage"] and seconds < 4.0, f"--timeout 1 but the check took {seconds:.1f}s"


def test_time_budget_holds_while_the_cta_symmetry_and_the_walks_run(tmp_path):
    """512 warps in a cluster of 16 CTAs, 1,000 rounds: proving the CTAs interchangeable and one walk of what
    can come first each took longer than the whole budget (the check stopped after 43 s with --timeout 4)."""
    text = ("protocol cluster16 {\n  param ITERS = 1000;\n  cluster 16;\n  cta threads 1024;\n  role w[32] = warp i;\n"
            "  named nb id 1 count 1024;\n  smem b bytes 16;\n  for k in 0..ITERS { bar.sync nb; "
            "if w && instance == k % 32 { write b; } bar.sync nb; read b; }\n}\n")
    rc, result, seconds = check(tmp_path, text, "--timeout", "1")
    assert rc == 3 and "time budget" in result["coverage"], result
    assert seconds < 15.0, f"--timeout 1 but the check took {seconds:.1f}s"


def test_loop_without_operations_costs_nothing(tmp_path):
    """A loop in which a process executes no operation is compiled away for that process (it used to spin
    2^40 times inside one step of the search, out of reach of every budget: found by bench/fuzz.py)."""
    text = "protocol p {\n  cta threads 32;\n  for k in 0..1 << 40 { let x = k; for j in 0..1 << 40 { } }\n}\n"
    rc, result, seconds = check(tmp_path, text, hang=20)
    assert rc == 0 and result["verdict"] == "safe" and seconds < 15


def test_loop_whose_operations_belong_to_no_process_costs_nothing(tmp_path):
    """bench/fuzz.py input #0:3376: the writer's guard names an instance that does not exist, so warp 0
    runs the 2^62-round loop without an operation; the others deadlock at once."""
    text = ("protocol handoff {\n  param ROUNDS = 3;\n  cta threads 128;\n  role w[4] = warp i;\n"
            "  smem buf bytes 512;\n  named ready id 1 count 128;\n  for r in 0..ROUNDS {\n"
            "    if w && instance == 2147483648 { write buf; bar.arrive ready; }\n"
            "    if w && instance != 0 { bar.sync ready; read buf; }\n  }\n}\n")
    rc, result, seconds = check(tmp_path, text, "-D", "ROUNDS=4611686018427387904", hang=20)
    assert rc == 1 and [d["code"] for d in result["diagnostics"]] == ["SV201"] and seconds < 15


def test_loop_whose_operations_never_run_stays_within_budget(tmp_path):
    text = "protocol p {\n  cta threads 32;\n  smem b bytes 16;\n  for k in 0..1 << 40 { if k < 0 { write b; } }\n}\n"
    rc, _result, _ = check(tmp_path, text, "--timeout", "1", hang=5)
    assert rc == 3


# ---------------------------------------------------------------------------
# Limits of the front end: exit 2 with a clear error


@pytest.mark.parametrize("text, code, words", [
    (nested(5000), "SV116", "nested more than"),
    ("protocol e {\n  cta threads 32;\n  param X = " + "- " * 5000 + "1;\n}\n", "SV115", "nested more than"),
    ("protocol e {\n  cta threads 32;\n  param X = " + " + ".join(["1"] * 5000) + ";\n}\n", "SV115", "split it"),
    ("protocol h {\n  cta threads 32;\n  smem b[1 << 40] bytes 16;\n}\n", "SV104", "outside 1..4096"),
    ("protocol h {\n  cta threads 32;\n  mbarrier m[1 << 62] count 1;\n}\n", "SV104", "outside 1..4096"),
    ("protocol h {\n  cta threads 32;\n  mbarrier m count 1 << 40;\n  elect { init m; }\n}\n", "SV105", "outside"),
    ("protocol h {\n  param X = 1 << 62;\n  param Y = X * X;\n  cta threads 32;\n}\n", "SV115", ""),
    ("protocol h {\n  cluster 1 << 40;\n  cta threads 32;\n}\n", "SV113", ""),
    ("protocol h {\n  cta threads 1 << 40;\n}\n", "SV113", ""),
    ("protocol h {\n  cta threads 32;\n  named n id 1 << 40 count 32;\n}\n", "SV106", ""),
], ids=["blocks-5000-deep", "unary-5000-deep", "sum-of-5000", "smem-2^40-slots", "mbarrier-2^62",
        "count-2^40", "param-overflow", "cluster-2^40", "threads-2^40", "named-id-2^40"])
def test_limits_are_input_errors(tmp_path, text, code, words):
    rc, result, _ = check(tmp_path, text)
    assert_input_error(rc, result, code, words)


def test_blocks_at_the_nesting_limit_still_check(tmp_path):
    rc, result, _ = check(tmp_path, nested(99))
    assert rc == 0 and result["verdict"] == "safe"


def test_oversized_file(tmp_path):
    text = "// " + "x" * (1 << 20) + "\nprotocol big {\n  cta threads 32;\n}\n"
    rc, result, _ = check(tmp_path, text)
    assert_input_error(rc, result, "SV112", "1 MiB")
