"""An arrive sent to the wrong CTA named at its line (syncverify/diagnose_rank.py): the lane-guarded release that
goes to each lane's own CTA instead of lane r to CTA r, named only when the protocol with `@ lane` there checks
clean; silent where the own-CTA release is right or where retargeting it does not clear the error."""

from __future__ import annotations

from pathlib import Path

from syncverify import Options, check_protocol, load

SPECS = Path(__file__).resolve().parent.parent / "specs"
WRONG = (SPECS / "deepgemm_lane_rank_release_wrong_rank.sync").read_text()
SMALL = {"ITERS": 2, "STAGES": 1}  # the stage is reused once: the multicast overwrites the peer's copy
CAUSE = "arrive on the wrong CTA"
MULTICAST = "        tma.load tile[2 * s + cta] bytes HALF -> full[s] multicast 0b11;\n"
WAIT = "        wait empty[s] parity (k / STAGES + 1) % 2;\n"


def _check(text: str):  # type: ignore[no-untyped-def]
    return check_protocol(load(text, SMALL, path="rank.sync"), Options(engine="explicit"))


def _causes(result):  # type: ignore[no-untyped-def]
    return [d for d in result.diagnostics if CAUSE in d.message]


def test_the_own_cta_release_of_a_multicast_stage_is_named_at_the_arrive():
    res = _check(WRONG)
    (cause,) = _causes(res)
    line = next(n for n, t in enumerate(WRONG.splitlines(), 1) if "BUG: every lane arrives on its own CTA" in t)
    assert cause is res.diagnostics[0] and cause.span.line == line
    assert cause.code in {"SV302", "SV303"} and "`@ lane`" in cause.message and "lanes 0..1" in cause.message
    assert cause.related[0].span.line == next(n for n, t in enumerate(WRONG.splitlines(), 1) if "tma.load" in t)


def test_lane_r_to_cta_r_is_safe_and_silent():
    res = _check((SPECS / "deepgemm_lane_rank_release.sync").read_text())
    assert res.verdict.value == "safe" and not res.diagnostics


def test_the_own_cta_release_without_multicast_is_right_and_silent():
    """Each CTA loads both halves of its stage itself: its own math warps are all it must hear from."""
    assert WRONG.count(MULTICAST) == 1
    own = WRONG.replace(MULTICAST, "        tma.load tile[2 * s] bytes HALF -> full[s];\n"
                                   "        tma.load tile[2 * s + 1] bytes HALF -> full[s];\n")
    res = _check(own)
    assert res.verdict.value == "safe" and not _causes(res)


def test_a_release_whose_retarget_leaves_the_race_is_not_blamed():
    """Without the producer's wait on `empty` the refill races whatever the releases do: `@ lane` does not make
    the protocol clean, so the arrive is not named."""
    assert WRONG.count(WAIT) == 1
    res = _check(WRONG.replace(WAIT, ""))
    assert res.verdict.value == "violation" and res.codes() & {"SV302", "SV303"}
    assert not _causes(res)
