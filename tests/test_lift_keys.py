"""The lift searches each state as its merge key (engines/symbolic/search.py, key.py), held packed (packed.py).

Two things make that sound, and both are checked here on real searches: a key normalizes to itself
(so the key and the state it came from have equal keys, and the same futures up to the translation),
and a finding whose path passed a shift of the counters is replayed at the trip count the path runs
at, not the key's (the shift is kept per key). And the packed form is exact: each held key opens to
``normalize``'s key of the same state, and its code is the one the records, cut into their runs
afresh, are given (so equal keys are held alike, and the lift merges what it merged before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.check import check_path
from syncverify.engines.symbolic import key, search
from syncverify.options import Options
from syncverify.result import Verdict

SPECS = Path(__file__).resolve().parents[1] / "specs"


def _watch_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Key the lift's states through a wrapper that checks each held key: that it opens to the key
    ``normalize`` gives, that this key normalizes to itself and is held as the same key again, and
    that its code is its records' cut afresh; and counts the keys whose trip-count mode moved (a
    counter shift)."""
    seen = {"keys": 0, "not fixed points": 0, "not opened alike": 0, "codes not canonical": 0,
            "counters shifted": 0}
    real = search.held_key

    def held_key(sh, state, mode):  # type: ignore[no-untyped-def]
        held = real(sh, state, mode)
        opened = sh.table.open(held)
        seen["keys"] += 1
        seen["not opened alike"] += opened != key.normalize(sh, state, mode)
        seen["not fixed points"] += key.normalize(sh, *opened) != opened or real(sh, *opened) != held
        seen["codes not canonical"] += sh.table.code(sh.table.numbers(opened[0].records)) != sh.table.code_of(held)
        seen["counters shifted"] += opened[1] != mode
        return held

    monkeypatch.setattr(search, "held_key", held_key)
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
    assert seen["keys"] > 20, seen
    assert seen["not fixed points"] == seen["not opened alike"] == seen["codes not canonical"] == 0, seen


def test_a_finding_past_a_counter_shift_replays_at_the_trip_count_its_path_runs(monkeypatch):  # type: ignore[no-untyped-def]
    """The path to the missing wait of the second lane's store crosses a shift of the tile counters:
    replayed at the key's trip count instead, its labels are not a run of the machine."""
    seen = _watch_keys(monkeypatch)
    result = check_path(str(SPECS / "deepgemm_sm90_two_lane_store_one_wait.sync"), Options(engine="z3"))
    assert seen["counters shifted"] > 0, seen
    assert (result.verdict, result.bound) == (Verdict.VIOLATION, "TILES=2"), result.coverage
    assert "SV302" in result.codes()
