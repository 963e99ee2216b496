"""A CTA's exit with a bulk store's source read never retired (docs/model.md, "A CTA's exit and its bulk
stores"), and the one table of readings every consumer of them derives from (options.READINGS).

PTX completes a bulk store's source read at `cp.async.bulk.wait_group.read` and does not say that the CTA's
exit waits for it; DeepGEMM's sm90 epilogues rely on it, and an H100 does wait (bench/gpu_exit_drain.py). The
reading `exit-drains-bulk-reads` is the default and the result names it; `--letter exit-drains-bulk-reads` (or
`--no-assume`) takes the letter (SV404, whose message says so), on every engine."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from syncverify import Options, check_protocol, load
from syncverify.cli import main
from syncverify.options import READINGS, assumption_fields, readings_asked
from syncverify.report import swimlane
from syncverify.semantics.machine import Assumptions

# One elected lane writes a tile, fences it for the async proxy, stores it and commits the store, and the
# warp ends: no `bulk.wait_read` retires the store's read of d[0] (DeepGEMM's last tile, in little).
NO_TAIL_WAIT = """protocol store_no_tail_wait {
  cta threads 32;
  role epi = warp 0;
  smem d[1] bytes 1024;
  if epi {
    elect {
      write d[0];
      fence.proxy.async;
      tma.store d[0];
      bulk.commit;
      TAIL
    }
  }
}
"""
READING = "exit-drains-bulk-reads"


def _check(tail: str = "", engine: str = "explicit", **readings: bool):  # type: ignore[no-untyped-def]
    protocol = load(NO_TAIL_WAIT.replace("TAIL", tail), path="tail.sync")
    return check_protocol(protocol, Options(engine=engine, timeout=60, **readings))


@pytest.mark.parametrize("engine", ["explicit", "bmc", "z3"])
def test_the_exit_with_a_store_unretired_is_safe_under_the_reading_and_sv404_to_the_letter(engine: str) -> None:
    letter = _check(engine=engine, **readings_asked(False, letter=[READING]))
    assert letter.verdict == "violation" and {d.code for d in letter.diagnostics} == {"SV404"}
    (d,) = letter.diagnostics
    assert "bulk store still reads d[0]" in d.message and "cp.async.bulk.wait_group.read" in d.message
    assert f"--letter {READING}" in d.message and READING not in letter.assumed
    assert [r.span.line for r in d.related] == [9]  # the tma.store
    assert _check(engine=engine, **readings_asked(True)).verdict == "violation"  # --no-assume: the letter too
    taken = _check(engine=engine)
    assert taken.verdict == "safe" and READING in taken.assumed and not taken.diagnostics


def test_the_reading_is_not_used_where_a_wait_retires_the_store() -> None:
    waited = _check("bulk.wait_read 0;")
    assert waited.verdict == "safe" and READING not in waited.assumed
    assert _check("bulk.wait_read 0;", **readings_asked(False, letter=[READING])).verdict == "safe"


def test_the_reading_does_not_retire_the_read_before_the_exit() -> None:
    """The exit waits for the read; a rewrite of the slot before it still races the store (SV302)."""
    res = _check("write d[0];")
    assert res.verdict == "violation" and {d.code for d in res.diagnostics if d.is_error} == {"SV302"}


def test_no_assume_drops_every_reading_and_assume_takes_one() -> None:
    """`--no-assume` turns every `assume_*` field off, the ones on by default and the ones asked for alike;
    each field maps to one Assumptions field, so `Assumptions.of` hands every one on."""
    assert set(READINGS.values()) == set(assumption_fields())
    strict = Assumptions.of(Options(**readings_asked(True)))
    flags = [f.name for f in fields(Assumptions) if f.compare]
    assert len(flags) == len(READINGS) and not any(getattr(strict, n) for n in flags)
    every = Assumptions.of(Options(**{name: True for name in assumption_fields()}))
    assert all(getattr(every, n) for n in flags)
    assert Assumptions.of(Options()) == Assumptions()  # each default the same in both
    with pytest.raises(ValueError, match="no reading named"):
        readings_asked(False, ["exit-drains"])
    with pytest.raises(ValueError, match="no reading named"):
        readings_asked(False, letter=["exit-drains"])
    # --no-assume, then --assume takes one back; --letter drops one and keeps the others
    back = Assumptions.of(Options(**readings_asked(True, [READING])))
    assert back.exit_drains_bulk_reads and not back.warp_collective_orders
    one = Assumptions.of(Options(**readings_asked(False, letter=[READING])))
    assert not one.exit_drains_bulk_reads and one.warp_collective_orders


def test_the_trace_view_takes_the_assumptions_of_its_check(tmp_path: Path) -> None:
    """`schedule` and `views_for` take an Assumptions, not one keyword per reading (a reading added later
    reaches the page by the same argument); `syncverify trace --assume` draws the schedule under it."""
    for fn in (swimlane.schedule, swimlane.views_for):
        assert not [p for p in inspect.signature(fn).parameters if p.startswith("assume")]
    protocol = load(NO_TAIL_WAIT.replace("TAIL", ""), path="tail.sync")
    assert "SV404" in swimlane.schedule(protocol, assumptions=Assumptions(exit_drains_bulk_reads=False)).notes[0]
    view = swimlane.schedule(protocol)
    assert view.notes == ("every process ran to its end",)
    spec = tmp_path / "tail.sync"
    spec.write_text(NO_TAIL_WAIT.replace("TAIL", ""))
    assert main(["trace", str(spec), "-o", str(tmp_path / "a.html")]) == 0
    assert main(["trace", str(spec), "-o", str(tmp_path / "b.html"), "--letter", READING]) == 1
    assert main(["check", str(spec), "--letter", READING]) == 1 and main(["check", str(spec)]) == 0
