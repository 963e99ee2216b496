"""The bounded-exhaustive cross-check over bulk async-groups of some lanes (tests/exhaustive_programs.py,
LANE_GROUP_SCOPES), on a deterministic slice: two warps with bulk stores committed (and waited for) by the whole
warp, its elected lane, lanes 0..15 or lane 1 alone, lane-guarded waits, the writes and reads of the slot, and the
`syncwarp` and barrier that hand a lane's retired store to the other lanes.

The reference (the explicit engine with its reductions: the stores, commits and waits are local steps) is
compared with the explicit engine without them and with --engine z3; the bmc engine must refuse every program
in which some lanes (not the leader alone, not the whole warp) run a bulk group, with the reason.
"""

from __future__ import annotations

import collections

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import LANE_GROUP_SCOPES, sample

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
# the letter of a CTA's exit (`--letter exit-drains-bulk-reads`): a store no wait retired is SV404 there
LETTER = {e.name: e for e in engines(assume_exit_drains_bulk_reads=False)}
SCOPE = LANE_GROUP_SCOPES["lane-groups"]  # 21,296 programs
EVERY = {"explicit-unreduced": 97, "symbolic": 211, "bmc": 499}


def _slice(every: int, names: list[str], offset: int = 0, by: dict | None = None) -> collections.Counter:
    by = by or ENGINES
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPE, every, offset):
        try:
            protocol = load(text, path="slice.sync")
        except InputError:
            tally["rejected"] += 1
            continue
        got = {n: by[n].run(protocol, 100_000, 60.0) for n in ["explicit", *names]}
        ref = got.pop("explicit")
        tally[ref.verdict] += 1
        tally.update(f"code {c}" for c in ref.codes)
        lane_groups = "if lane == 1 { tma.store" in text or "if lane < 16 { tma.store" in text \
            or "if lane == 1 { bulk" in text or "if lane < 16 { bulk" in text
        tally["lane groups"] += lane_groups
        for name, answer in got.items():
            if answer.verdict == "unsupported" and name == "bmc":
                tally[f"{name} refuses"] += 1
                assert ("bulk async-groups of some lanes" in answer.detail and lane_groups) \
                    or "by different lanes" in answer.detail, (index, answer)
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, by[name])
                assert c.kind == "agree", (index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    return tally


def test_reduced_and_unreduced_explicit_agree():
    tally = _slice(EVERY["explicit-unreduced"], ["explicit-unreduced"])
    assert tally["explicit-unreduced agrees"] >= 150 and tally["lane groups"] >= 100, tally
    assert tally["safe"] and tally["violation"], tally
    # a store that another lane meets with no syncwarp between; the exit waits for a store no wait retired
    assert tally["code SV301"] + tally["code SV302"] and not tally["code SV404"], tally


def test_reduced_and_unreduced_explicit_agree_to_the_letter_of_the_exit():
    """The same, with the exit's reading dropped: a store that no wait of its lanes retired is SV404."""
    tally = _slice(2 * EVERY["explicit-unreduced"], ["explicit-unreduced"], offset=7, by=LETTER)
    assert tally["explicit-unreduced agrees"] >= 75 and tally["code SV404"], tally


def test_z3_agrees():
    tally = _slice(EVERY["symbolic"], ["symbolic"], offset=5)
    assert tally["symbolic agrees"] >= 60 and tally["code SV301"] + tally["code SV302"], tally


@pytest.mark.skipif(ENGINES["bmc"].unavailable is not None, reason="the bmc engine is not available")
def test_bmc_refuses_with_the_reason():
    tally = _slice(EVERY["bmc"], ["bmc"], offset=3)
    assert tally["bmc refuses"] >= 10 and tally["bmc agrees"] >= 5, tally
