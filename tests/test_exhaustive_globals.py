"""The bounded-exhaustive cross-check over global memory (tests/exhaustive_programs.py, GLOBAL_SCOPES):
every program of two CTAs of a grid with up to three statements of a warp — a global buffer, a flag's
atomics at each semantics and scope, resets, spins, thread fences, grid.sync — on a deterministic slice.

The reference (the explicit engine with its reductions) is compared with the explicit engine without
them and with --engine z3; the bmc engine must refuse every such program with the reason, never answer.
"""

from __future__ import annotations

import collections
import os

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import GLOBAL_SCOPES, sample

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
SCOPE = GLOBAL_SCOPES["globals2"]


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
            if answer.verdict == "unsupported":
                tally[f"{name} refuses"] += 1
                assert "global memory" in answer.detail, (index, answer)
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, ENGINES[name])
                assert c.kind == "agree", (index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    return tally


WIDE = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="every 13th program, some 63,000: minutes; run with SYNCVERIFY_SLOW=1")


@pytest.mark.parametrize("every", [587, pytest.param(13, marks=WIDE)])
def test_reduced_and_unreduced_explicit_agree(every: int):
    """Every 587th program in CI (some 1,400), every 13th with SYNCVERIFY_SLOW."""
    tally = _slice(every, ["explicit-unreduced"])
    assert tally["explicit-unreduced agrees"] >= 50, tally
    assert tally["safe"] and tally["violation"], tally
    # the slice reaches the family's findings, not only races
    assert tally["code SV301"] and tally["code SV801"] and tally["code SV802"], tally


def test_z3_agrees():
    tally = _slice(778, ["symbolic"], offset=11)
    assert tally["symbolic agrees"] >= 15, tally


@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
def test_bmc_refuses_with_the_reason():
    tally = _slice(1999, ["bmc"], offset=5)
    assert tally["bmc refuses"] >= 10 and not tally["bmc agrees"], tally
