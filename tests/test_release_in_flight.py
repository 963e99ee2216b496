"""A release made while the warp's async read is in flight, named at its arrive from the race's own counterexample
(syncverify/diagnose_async.py): reported only when the path shows the read issued and not retired at the arrive and
the racing writer passing the phase that arrive counted towards; silent wherever one of those is missing."""

from __future__ import annotations

from pathlib import Path

from syncverify import Options, check_protocol, load

SPECS = Path(__file__).resolve().parent.parent / "specs"
CAUSE = "released before the read retires"

STORE = """protocol store_release {
  cta threads 64;
  role epilogue = warp 0;
  role producer = warp 1;
  smem out bytes 1024;
  mbarrier done count 1;
  if epilogue { elect { init done; } }
  syncthreads;
  if epilogue {
    elect {
      write out;
      fence.proxy.async;
      tma.store out bytes 1024;
      bulk.commit;
      arrive done;
      bulk.wait_read 0;
    }
  }
  if producer { wait done parity 0; write out; }
}
"""


def _check(text: str, name: str = "t.sync"):  # type: ignore[no-untyped-def]
    return check_protocol(load(text, path=name), Options(engine="explicit"))


def _line(text: str, part: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if part in ln)


def _causes(result):  # type: ignore[no-untyped-def]
    return [d for d in result.diagnostics if CAUSE in d.message]


def test_a_release_before_the_wgmma_wait_is_named_at_the_arrive():
    text = (SPECS / "cutlass_consumer_release_warpgroup_early.sync").read_text()
    res = _check(text)
    (cause,) = _causes(res)
    assert cause.code == "SV302" and cause is res.diagnostics[0]
    assert cause.span.line == _line(text, "BUG: consumer_release before warpgroup_wait")
    assert "as this counterexample shows" in cause.message and "not a re-search" in cause.message
    assert [r.span.line for r in cause.related] == [_line(text, "wgmma.read tile[s]"), _line(text, "wgmma.wait 0"),
                                                    _line(text, "tma.load tile[s]")]


def test_a_release_before_the_stores_wait_read_is_named_and_after_it_is_safe():
    (cause,) = _causes(_check(STORE))
    assert cause.span.line == _line(STORE, "arrive done") and "TMA store's read of `out`" in cause.message
    fixed = STORE.replace("      arrive done;\n      bulk.wait_read 0;", "      bulk.wait_read 0;\n      arrive done;")
    res = _check(fixed)
    assert res.verdict.value == "safe" and not res.diagnostics


def test_a_writer_that_passed_no_wait_on_the_barrier_blames_no_release():
    """The release is as early as above, but the producer never waits on `empty`: its refill races whatever the
    consumer does, and the counterexample shows no acquire of the early arrive's phase."""
    text = (SPECS / "cutlass_consumer_release_warpgroup_early.sync").read_text()
    wait = "      wait empty[s] parity (k / STAGES + 1) % 2;   // producer_acquire\n"
    assert wait in text
    res = _check(text.replace(wait, ""))
    assert res.verdict.value == "violation" and "SV302" in res.codes()
    assert not _causes(res)


def test_a_race_elsewhere_with_releases_after_the_wait_blames_none():
    """The FMHA token pipeline without its `consumer_wait(…, tok)`: the PV wgmma reads the V tile under its copy
    (SV301); the releases that follow the MMA issue free stages whose reads a `wgmma.wait` already retired."""
    text = (SPECS / "cutlass_fmha_consumer_try_wait_token.sync").read_text()
    wait = "if !tok { wait full[tv % STAGES] parity (tv / STAGES) % 2; }"
    res = _check(text.replace(wait, "").replace("param ITERS  = 2;", "param ITERS  = 3;"))
    assert res.verdict.value == "violation" and "SV301" in res.codes()
    assert not _causes(res)


def test_an_allowed_race_names_no_cause_that_fails_the_check():
    """The race allowed at its line (`// syncverify: allow SV302`): the check does not fail, and no cause of it is
    named in its place (the causes are named from the errors still in force)."""
    text = (SPECS / "cutlass_consumer_release_warpgroup_early.sync").read_text()
    load_line = "        tma.load tile[s] bytes BYTES -> full[s];\n"
    assert load_line in text
    res = _check(text.replace(load_line, load_line.rstrip("\n") + "  // syncverify: allow SV302 — reviewed\n"))
    assert res.verdict.value == "inconclusive" and not _causes(res) and not any(d.is_error for d in res.diagnostics)


def test_in_a_loop_the_issue_of_the_raced_slot_is_told_apart_by_its_index():
    """The multicast ring's consumer releases each stage (on a peer's barrier: a remote arrive) before its wgmma
    wait, in a loop: the read line is issued once per k tile, and the raced slot's issue is the one whose index,
    evaluated at its step's `k`, is the race's `tile[0]@cta0`."""
    text = (SPECS / "cutlass_consumer_release_multicast_early.sync").read_text()
    res = _check(text)
    causes = _causes(res)
    assert causes and all(c.code == "SV302" for c in causes)
    arrive = _line(text, "arrive.release.cluster empty[s] @")
    assert {c.span.line for c in causes} == {arrive}
    assert "`tile[0]@cta0`" in causes[0].message
