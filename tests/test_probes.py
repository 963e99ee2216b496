"""Probes: a branch on `try_wait`/`test_wait` and the token `let T = try_wait …` (docs/language.md §7.1.1,
semantics/families/mbarrier_probe.py).

Each semantic test has a near twin that differs in one line and must get the other answer: the probe's
true result is the wait (it orders), its false result orders nothing and may come at any time, and the
probe-then-wait pair is the wait.
"""

from __future__ import annotations

import os

import pytest
from diff_engines import compare, engines

from syncverify import ir, load
from syncverify.check import Options, check_protocol
from syncverify.codegen.base import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.export.promela import export_promela
from syncverify.export.promela.base import ExportError
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import OP

ENGINES = {e.name: e for e in engines()}

# A producer warp publishes `buf` through `mb` (release); the consumer warp runs BODY.
_PAIR = """protocol p {{
  cta threads 64;
  role prod = warp 0;
  role cons = warp 1;
  mbarrier mb count 32;
  mbarrier other count 32;
  smem buf bytes 64;
  if prod {{ elect {{ init mb; init other; }} }}
  syncthreads;
  if prod {{ write buf; arrive mb; }}
  if cons {{
    {body}
  }}
}}
"""


def _check(body: str, engine: str = "explicit"):
    return check_protocol(load(_PAIR.format(body=body), path="p.sync"), Options(engine=engine))


def _codes(res) -> set[str]:
    return {d.code for d in res.diagnostics if d.severity.name == "ERROR"}


def test_a_read_under_a_true_probe_is_ordered_and_its_twin_after_the_branch_races():
    inside = _check("if try_wait mb parity 0 { read buf; }")
    after = _check("if try_wait mb parity 0 { } read buf;")
    assert inside.verdict == Verdict.SAFE, inside.diagnostics
    assert after.verdict == Verdict.VIOLATION and "SV301" in _codes(after), after.diagnostics


def test_negation_swaps_the_blocks():
    guarded = _check("if !try_wait mb parity 0 { } else { read buf; }")
    wrong = _check("if !try_wait mb parity 0 { read buf; }")
    assert guarded.verdict == Verdict.SAFE, guarded.diagnostics
    assert "SV301" in _codes(wrong), wrong.diagnostics


def test_false_may_come_after_the_phase_completed():
    """The else block runs even where the phase completed and the thread itself waited for it (a
    time-out): its arrive on `other` lands in phase 1 with phase 0 unobserved (SV502). The twin
    without that arrive is safe, so the finding is the false result's."""
    body = "arrive other; wait mb parity 0; if try_wait mb parity 0 { } else { arrive other; }"
    twin = "arrive other; wait mb parity 0; if try_wait mb parity 0 { } else { }"
    assert "SV502" in _codes(_check(body))
    assert _check(twin).verdict == Verdict.SAFE
    never = "if try_wait mb parity 1 { } else { read buf; }"  # parity 1 passes on a fresh barrier
    got = _check(never)
    assert "SV301" in _codes(got), got.diagnostics  # false although it would pass: the read is unordered


def test_a_relaxed_true_probe_does_not_acquire():
    relaxed = _check("if try_wait.relaxed mb parity 0 { read buf; }")
    assert "SV301" in _codes(relaxed), relaxed.diagnostics


def test_a_token_is_the_probe_result_read_later():
    kept = _check("let t = try_wait mb parity 0; syncwarp; if !t { wait mb parity 0; } read buf;")
    dropped = _check("let t = try_wait mb parity 0; syncwarp; if t { wait mb parity 0; } read buf;")
    assert kept.verdict == Verdict.SAFE, kept.diagnostics
    assert "SV301" in _codes(dropped), dropped.diagnostics


def _program_ops(text: str) -> list[type]:
    machine = Machine(load(text, path="p.sync"))
    return [type(ins.op) for prog in machine.programs for ins in prog.code if ins.kind == OP]


def test_probe_then_the_same_wait_compiles_to_the_wait_and_a_different_parity_does_not():
    folded = _program_ops(_PAIR.format(body="if !try_wait mb parity 0 { wait mb parity 0; } read buf;"))
    kept = _program_ops(_PAIR.format(body="if !try_wait mb parity 0 { wait mb parity 1; } read buf;"))
    relaxed = _program_ops(_PAIR.format(body="if !try_wait.relaxed mb parity 0 { wait mb parity 0; } read buf;"))
    assert ir.MbarProbe not in folded and ir.MbarWait in folded
    assert ir.MbarProbe in kept and ir.MbarProbe in relaxed


# (spec, params): small trip counts, so that the unreduced search stays quick
SPECS = [# the fresh token's spec with a ring of 2 stages: the producer's next K waits for a slot whose V the
         # consumer releases only after that K (SV201, 5,375 states unreduced); safe at 3 stages (88,816
         # states unreduced) and at its 4 (164,408; 40 s of CI): those two with SYNCVERIFY_SLOW=1
         ("specs/cutlass_fmha_consumer_try_wait_token.sync", {"STAGES": 2}),
         *(pytest.param("specs/cutlass_fmha_consumer_try_wait_token.sync", defines,
                        marks=pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                                                 reason="15-40 s of CI; its 2-stage twin runs; SYNCVERIFY_SLOW=1"))
           for defines in ({"STAGES": 3}, {})),
         # 27 s of CI on two cores: the fresh token's spec above is its twin in CI
         pytest.param("specs/cutlass_fmha_consumer_try_wait_stale_token.sync", {},
                      marks=pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                                               reason="27 s of CI; its fresh-token twin runs; SYNCVERIFY_SLOW=1")),
         # the unreduced search of the fall-through takes over a minute of CPU: with SYNCVERIFY_SLOW=1
         pytest.param("specs/bounded_try_wait_fallthrough.sync", {"TRIES": 2},
                      marks=pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                                               reason="the unreduced search takes over a minute; SYNCVERIFY_SLOW=1")),
         ("specs/cutlass_sm90_consumer_try_wait.sync", {"ITERS": 2})]


@pytest.mark.parametrize("path, defines", SPECS)
def test_reduced_unreduced_and_z3_agree_on_the_probe_specs(path, defines):
    """The reduction with probes against the full search; `--engine z3` where its lift takes the
    protocol (it declines the FMHA specs' `2 * k` tile index, a limit of the lift, not of probes)."""
    protocol = load(open(path).read(), defines, path=path)
    ref = ENGINES["explicit"].run(protocol, 200_000, 120.0)
    assert ref.verdict in ("safe", "violation"), ref
    other = ENGINES["explicit-unreduced"].run(protocol, 400_000, 240.0)
    assert compare(ref, other, ENGINES["explicit-unreduced"]).kind == "agree", (ref, other)
    z3 = ENGINES["symbolic"].run(protocol, 400_000, 240.0)
    kind = compare(ref, z3, ENGINES["symbolic"]).kind
    assert kind == "agree" or ("fmha" in path and kind == "skipped"), (z3, ref)


def test_bmc_refuses_a_probe_with_its_reason_and_checks_the_probe_then_wait_pair():
    def bmc(body: str):
        return ENGINES["bmc"].run(load(_PAIR.format(body=body), path="p.sync"), 100_000, 60.0)

    probe = bmc("if try_wait mb parity 0 { read buf; }")
    assert probe.verdict == "unsupported" and "try_wait" in probe.detail, probe
    pair = bmc("if !try_wait mb parity 0 { wait mb parity 0; } read buf;")
    assert pair.verdict == "safe", pair
    twin = bmc("if !try_wait mb parity 0 { wait mb parity 1; } read buf;")  # not the pair: a probe
    assert twin.verdict == "unsupported", twin


def test_promela_and_the_emitter_refuse_a_probe_with_the_reason():
    protocol = load(_PAIR.format(body="if try_wait mb parity 0 { read buf; }"), path="p.sync")
    with pytest.raises(ExportError, match="probe"):
        export_promela(protocol)
    with pytest.raises(EmitRefused, match="probe"):
        emit(protocol)
    export_promela(load(_PAIR.format(body="if !try_wait mb parity 0 { wait mb parity 0; } read buf;"),
                        path="p.sync"))  # the pair is a wait: exported


@pytest.mark.parametrize("body, code, where", [
    ("let t = !try_wait mb parity 0;", "SV110", "test `!t`"),
    ("if try_wait.release mb parity 0 { }", "SV110", ".release"),
    ("if try_wait buf parity 0 { }", "SV111", "mbarrier"),
    ("if lane < 4 { if try_wait mb parity 0 { } }", "SV116", "lane"),
    ("if try_wait mb @ 1 parity 0 { }", "SV100", ""),
])
def test_bad_probes_are_input_errors_at_their_line(body, code, where):
    with pytest.raises(InputError) as err:
        Machine(load(_PAIR.format(body=body), path="p.sync"))
    diags = err.value.diagnostics
    assert diags[0].code == code, diags
    assert diags[0].span is not None and diags[0].span.line == 12, diags
    assert where in diags[0].message, diags
