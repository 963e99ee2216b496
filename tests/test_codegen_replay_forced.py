"""Replays that force a race's order, and how their runs are judged (codegen/replay.py, gpu/outcome.py).

A RAW race whose counterexample ends with the write is forced by the gate alone: the read comes first and is
checked against the write it was due to see. A run's wrong data counts as the race only at a step of the
forced order; a violation no run can show is reported "not forced".
"""

from __future__ import annotations

from test_codegen import _order

from syncverify.codegen import emit
from syncverify.codegen.schedule import stamp
from syncverify.gpu import outcome as oc


def _line(launch: dict, site: int) -> int:
    return launch["sites"][site]["line"]


def test_no_sync_replay_gates_the_read_before_the_copy_and_expects_the_copy():
    protocol, order = _order("cutlass_sm80_multistage_cp_async_no_sync")
    assert order.code == "SV301" and order.holds == () and order.not_forced == ""
    launch = emit(protocol, replay=order).launch
    # the gated order: warp 0's line-22 read of warp 1's part, then warp 1's prologue copy into it
    (rp, rsite, rocc, _), (wp, wsite, wocc, _) = order.steps[-2], order.steps[-1]
    assert (rp, _line(launch, rsite), rocc) == (0, 22, 0) and (wp, _line(launch, wsite), wocc) == (1, 15, 0)
    # that read is checked against the copy the order puts after it, not against what the schedule saw
    want = stamp(wp, wsite, wocc, launch["nsites"])
    assert order.expect == ((rp, rsite, rocc, want),)
    free = emit(protocol).launch
    assert launch["replay"]["expect"] == [[rp, rsite, rocc, want]]
    assert want in launch["expected"] and launch["expected"] != free["expected"]
    # the kernel gates the read and does not defer it past the copy (the late-process hold it had before)
    src = emit(protocol, replay=order).source
    block = src[src.index("line 22: read"):src.index("line 24: cp.async")]
    assert "sv_gate(c, replay" in block and "defer" not in block and "sv_hold" not in block


def test_war_replays_keep_their_holds_and_the_schedules_expectations():
    """The near twin: a WAR race (the read was due to see the older content) is held, not re-expected."""
    protocol, order = _order("nvfuser_cb_no_war_wait")
    assert order.code == "SV302" and [h.kind for h in order.holds] == ["late-lanes"]
    assert order.expect == () and order.not_forced == ""
    assert emit(protocol, replay=order).launch["expected"] == emit(protocol).launch["expected"]


def test_unobserved_phase_replay_says_why_it_is_not_forced():
    _, order = _order("nvfuser_cb_prologue_unobserved_phase")
    assert order.code == "SV502" and order.holds == () and "synccheck" in order.not_forced
    _, held = _order("nvfuser_cb_no_war_wait")  # SV502 too, but its race is held: forced
    assert held.not_forced == ""


def _corrupt(trace_step: str) -> oc.Rep:
    first = {"line": 21, "proc": 1, "site": 3, "occurrence": 0}
    if trace_step:
        first["trace_step"] = trace_step
    return oc.Rep(oc.CORRUPT, corrupt={"bad_words": 8, "first": [first]})


FORCED = {"code": "SV301", "steps": [[0, 4, 0, 0], [1, 0, 0, 0]]}


def test_wrong_data_off_the_forced_order_is_not_the_race():
    agree, why = oc.agreement({"SV301"}, set(), [_corrupt("")] * 3, FORCED)
    assert not agree and "not at the counterexample's step" in why
    agree, why = oc.agreement({"SV301"}, set(), [_corrupt(""), _corrupt("step 7/8 of the counterexample: x")],
                              FORCED)
    assert agree and "the bug showed" in why


def test_unforced_runs_keep_the_old_rule():
    """Twins: the free kernel, an ungated replay and a non-race order count any wrong data as before."""
    for replay in (None, {"code": "SV301", "steps": []}, {"code": "SV504", "steps": [[0, 1, 0, 0]]}):
        assert oc.agreement({"SV301"}, set(), [_corrupt("")] * 3, replay)[0]


def test_a_clean_run_of_an_unforceable_replay_is_not_forced():
    clean = [oc.Rep(oc.COMPLETED)] * 3
    agree, why = oc.agreement({"SV502"}, set(), clean, {"code": "SV502", "steps": [[0, 1, 0, 0]],
                                                        "not_forced": "no data shows it"})
    assert not agree and "not forced" in why and "no data shows it" in why
    agree, why = oc.agreement({"SV502"}, set(), clean, {"code": "SV502", "steps": [[0, 1, 0, 0]]})
    assert not agree and "not reproduced" in why


def test_a_war_race_with_no_hold_is_not_forced_and_one_ending_with_the_read_is():
    """lane 31's release covers only its own read: no hold keeps lanes 0..30's reads open, so the gated order
    completes them before the refill. The twin ends with the read (the write came first): forced as it is."""
    from syncverify import ir
    from syncverify.codegen.replay import Hold, _not_forced

    _, order = _order("lane_last_release_no_syncwarp")
    assert order.code == "SV302" and order.holds == () and "no hold" in order.not_forced
    tma = next(k for k in _kinds("lane_last_release_no_syncwarp") if isinstance(k, ir.TmaLoad))
    acc = next(k for k in _kinds("lane_last_release_no_syncwarp") if isinstance(k, ir.Access) and k.kind == "read")
    assert _not_forced("SV302", (), [acc, tma], []) and not _not_forced("SV302", (), [tma, acc], [])
    assert not _not_forced("SV302", (Hold("late-lanes", 0),), [acc, tma], [])


def _kinds(name: str) -> list:
    from syncverify.codegen.sites import collect_sites

    protocol, _ = _order(name)
    return [s.op for s in collect_sites(protocol)]


def test_the_batch_prints_not_forced_apart_from_a_disagreement():
    clean = [oc.Rep(oc.COMPLETED)] * 2
    replay = {"code": "SV502", "steps": [[0, 1, 0, 0]], "not_forced": "why"}
    assert oc.agreement_word(*oc.agreement({"SV502"}, set(), clean, replay)) == "NOT FORCED"
    assert oc.agreement_word(*oc.agreement({"SV502"}, set(), clean, {**replay, "not_forced": ""})) == "DISAGREES"
    assert oc.agreement_word(*oc.agreement(set(), set(), clean)) == "AGREES"
