"""SV602 and data only the writing CTA touches (#33; docs/model.md, "Scopes across CTAs": "Data nobody else can
touch").

DeepGEMM's sm90 FP8 GEMM with TMA multicast 2 releases each stage with CUTLASS's `.release.cta` remote arrive after
its math warps wrote their CTA's B scales; the write is learned by the peer's producer through that arrive, but no
thread outside the writing CTA ever accesses the scales, so it is not the SV602 error (the reuse warning stays). The
twin in which the peer reads the scales through DSMEM after its wait keeps the error, at the arrive.
"""

from __future__ import annotations

from pathlib import Path

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import Severity
from syncverify.result import Verdict

SPECS = Path(__file__).resolve().parent.parent / "specs"


def _check(text: str):  # type: ignore[no-untyped-def]
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine="explicit", timeout=300))


def _line(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def test_scales_only_their_cta_touches_are_not_the_error():
    text = (SPECS / "deepgemm_sm90_cta_release_scales.sync").read_text()
    res = _check(text)
    assert res.verdict is Verdict.SAFE, [d.message for d in res.diagnostics if d.is_error]
    warned = {d.span.line for d in res.diagnostics if d.code == "SV602" and d.severity is Severity.WARNING}
    assert _line(text, "arrive empty[s] @ lane;") in warned  # the reuse warning at the remote arrive


def test_the_peer_reading_the_scales_remotely_is_the_error_at_the_arrive():
    text = (SPECS / "deepgemm_sm90_cta_release_scales_read_remotely.sync").read_text()
    res = _check(text)
    errors = [d for d in res.diagnostics if d.is_error]
    assert res.verdict is Verdict.VIOLATION and {d.code for d in errors} == {"SV602"}
    assert {d.span.line for d in errors} == {_line(text, "arrive empty[s] @ lane;")}
    assert "publishes generic-proxy data" in errors[0].message


def test_a_cluster_scope_release_needs_no_such_reasoning():
    """The twin with `.release.cluster` on the remote arrive (as deepgemm_lane_rank_release.sync writes it): the
    remote read is ordered, safe and without the error."""
    text = (SPECS / "deepgemm_sm90_cta_release_scales_read_remotely.sync").read_text()
    text = text.replace("arrive empty[s] @ lane;", "arrive.release.cluster empty[s] @ lane;")
    res = _check(text)
    assert res.verdict is Verdict.SAFE and not any(d.code == "SV602" and d.is_error for d in res.diagnostics)
