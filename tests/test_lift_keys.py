"""The lift searches each state as its merge key (engines/symbolic/search.py, key.py).

Two things make that sound, and both are checked here on real searches: a key normalizes to itself
(so the key and the state it came from have equal keys, and the same futures up to the translation),
and a finding whose path passed a shift of the counters is replayed at the trip count the path runs
at, not the key's (the shift is kept per key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.check import check_path
from syncverify.engines.symbolic import search
from syncverify.options import Options
from syncverify.result import Verdict

SPECS = Path(__file__).resolve().parents[1] / "specs"


def _watch_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Normalize through a wrapper that checks each key normalizes to itself and counts the keys whose
    trip-count mode moved (a counter shift)."""
    seen = {"keys": 0, "not fixed points": 0, "counters shifted": 0}
    real = search.normalize

    def normalize(sh, state, mode):  # type: ignore[no-untyped-def]
        key = real(sh, state, mode)
        seen["keys"] += 1
        seen["not fixed points"] += real(sh, *key) != key
        seen["counters shifted"] += key[1] != mode
        return key

    monkeypatch.setattr(search, "normalize", normalize)
    return seen


@pytest.mark.parametrize(("name", "defines", "verdict"), [
    ("cutlass_ws_ring", {"STAGES": 2}, Verdict.SAFE),
    ("nvfuser_cb_mbarrier_war", {}, Verdict.SAFE),
    ("cutlass_ws_ring_no_empty_wait", {"STAGES": 2}, Verdict.VIOLATION),
])
def test_every_key_the_lift_searches_normalizes_to_itself(monkeypatch, name, defines, verdict):  # type: ignore[no-untyped-def]
    seen = _watch_keys(monkeypatch)
    result = check_path(str(SPECS / f"{name}.sync"), Options(engine="z3", defines=defines))
    assert result.verdict is verdict, result.coverage
    assert seen["keys"] > 20 and seen["not fixed points"] == 0, seen


def test_a_finding_past_a_counter_shift_replays_at_the_trip_count_its_path_runs(monkeypatch):  # type: ignore[no-untyped-def]
    """The path to the missing wait of the second lane's store crosses a shift of the tile counters:
    replayed at the key's trip count instead, its labels are not a run of the machine."""
    seen = _watch_keys(monkeypatch)
    result = check_path(str(SPECS / "deepgemm_sm90_two_lane_store_one_wait.sync"), Options(engine="z3"))
    assert seen["counters shifted"] > 0, seen
    assert (result.verdict, result.bound) == (Verdict.VIOLATION, "TILES=2"), result.coverage
    assert "SV302" in result.codes()
