"""The bounded-exhaustive cross-check over registers read by an RS-form wgmma (tests/exhaustive_programs.py,
REGISTER_SCOPES): one whole warpgroup with up to four statements — their `read`/`write` of
registers, `wgmma.read` of them and of shared memory, the groups and the waits (`wgmma.wait 0`, `wgmma.wait 1`),
a barrier — on a deterministic slice.

The reference (the explicit engine with its reductions) is compared with the explicit engine without them
and with --engine z3; the bmc engine must refuse every program that declares registers, with the reason.
"""

from __future__ import annotations

import collections

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import REGISTER_SCOPES, sample

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
SCOPE = REGISTER_SCOPES["registers"]
# Every k-th program of the scope's 168,000, per engine: each test stays under a minute here
EVERY_UNREDUCED, EVERY_Z3, EVERY_BMC = 997, 2999, 4999


def _slice(every: int, names: list[str], offset: int = 0) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPE, every, offset):
        try:
            protocol = load(text, path="slice.sync")
        except InputError:
            tally["rejected"] += 1
            continue
        got = {n: ENGINES[n].run(protocol, 100_000, 60.0) for n in ["explicit", *names]}
        ref = got.pop("explicit")
        tally[ref.verdict] += 1
        tally.update(f"code {c}" for c in ref.codes)
        for name, answer in got.items():
            if answer.verdict == "unsupported" and name == "bmc":
                tally[f"{name} refuses"] += 1
                assert "does not model registers" in answer.detail or "regs" not in text, (index, answer)
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, ENGINES[name])
                assert c.kind == "agree", (index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    return tally


def test_reduced_and_unreduced_explicit_agree():
    tally = _slice(EVERY_UNREDUCED, ["explicit-unreduced"])
    assert tally["explicit-unreduced agrees"] >= 100, tally
    assert tally["safe"] and tally["violation"], tally
    assert tally["code SV605"], tally  # the slice reaches the family's finding, not only races


def test_z3_agrees():
    tally = _slice(EVERY_Z3, ["symbolic"], offset=7)
    assert tally["symbolic agrees"] >= 30 and tally["code SV605"], tally


@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
def test_bmc_refuses_with_the_reason():
    tally = _slice(EVERY_BMC, ["bmc"], offset=3)
    assert tally["bmc refuses"] >= 10, tally

