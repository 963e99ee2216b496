"""`syncverify mutate`: the mutants it makes, the outcomes it gives them, its exit codes."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections import Counter
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.diagnostics import InputError
from syncverify.mutate import OPERATORS, Outcome, mutants, run

SPECS = Path(__file__).resolve().parent.parent / "specs"
RING = SPECS / "cutlass_ws_ring.sync"


def test_ring_mutants_cover_every_applicable_operator():
    text = RING.read_text()
    ms = mutants(text, str(RING))
    by_op = Counter(m.operator for m in ms)
    # two waits (producer, consumer), four inits' counts ±1, one expect_tx ±16, one consumer release
    assert by_op["drop-wait"] == 2 and by_op["flip-parity"] == 2
    assert by_op["init-count"] == 4 and by_op["tx-bytes"] == 2
    assert by_op["move-arrive"] == 1 and by_op["drop-fence"] == 1 and by_op["drop-barrier"] == 1
    assert by_op["drop-elect"] == 2 and by_op["swap"] >= 8
    assert set(by_op) <= set(OPERATORS)
    assert len({m.text for m in ms}) == len(ms) and text not in {m.text for m in ms}
    assert len({m.ident for m in ms}) == len(ms)


# Every mutant with SYNCVERIFY_SLOW=1; every third in CI, from an offset that turns with the spec so that each
# position in the list is tried on some spec (all of them: about 90 s of parsing in a 20-minute CI, 2026-12-07).
@pytest.mark.parametrize("index, path", [pytest.param(i, p, id=p.name)
                                         for i, p in enumerate(sorted(SPECS.glob("*.sync")))])
def test_every_mutant_is_spec_text_that_loads_or_is_refused_cleanly(index, path):
    every = mutants(path.read_text(), str(path))
    for m in every if os.environ.get("SYNCVERIFY_SLOW") else every[index % 3::3]:
        try:
            syncverify.load(m.text, path=str(path))
        except InputError as err:
            assert all(d.code.startswith("SV1") for d in err.diagnostics)


def test_mutant_text_is_the_original_with_one_local_edit():
    text = RING.read_text()
    (flip,) = [m for m in mutants(text, str(RING)) if m.ident == "flip-parity@54:7"]
    assert flip.text == text.replace("wait full[s] parity (k / STAGES) % 2;",
                                     "wait full[s] parity 1 ^ ((k / STAGES) % 2);")
    (moved,) = [m for m in mutants(text, str(RING)) if m.operator == "move-arrive"]
    consumer = moved.text[moved.text.index("if consumer"):]
    assert consumer.index("arrive empty[s];") < consumer.index("read tile[s];")


SMALL_RING = """\
// expect: safe
protocol small_ring {
  param STAGES = 2;
  param ITERS = 3;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile[STAGES] bytes 1024;
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES] count 32;
  if producer { elect { init full[*]; init empty[*]; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait empty[s] parity (k / STAGES + 1) % 2;
      elect { arrive.expect_tx full[s] bytes 1024; tma.load tile[s] -> full[s]; }
    }
  }
  if consumer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      read tile[s];
      arrive empty[s];
    }
  }
}
"""


@pytest.fixture()
def small_ring(tmp_path) -> Path:
    path = tmp_path / "small_ring.sync"
    path.write_text(SMALL_RING)
    return path


def test_outcomes_on_a_ring(small_ring):
    rep = run(str(small_ring), operators={"drop-wait", "move-arrive", "swap", "drop-fence"}, max_states=20_000)
    outcome = {r.mutant.ident: r for r in rep.results}
    assert outcome["drop-wait@16:7"].outcome is Outcome.KILLED
    assert "SV302" in outcome["drop-wait@16:7"].codes
    assert outcome["move-arrive@25:7"].outcome is Outcome.KILLED
    assert outcome["move-arrive@25:7"].codes == ("SV302",)
    # swapping the producer and consumer blocks compiles to the same model: decided without a search
    assert outcome["swap@13:3"].outcome is Outcome.EQUIVALENT
    # `let s` swapped after its first use: not a valid spec
    assert outcome["swap@22:7"].outcome is Outcome.INVALID
    # cluster of 1: the init fence publishes nothing the syncthreads does not (an equivalent survivor)
    assert outcome["drop-fence@11:54"].outcome is Outcome.SURVIVED
    assert rep.exit_code() == 1


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["mutate", *args])
    return rc, out.getvalue()


def test_cli_exit_codes_and_json(small_ring):
    rc, out = _cli(str(small_ring), "--operators", "drop-wait,flip-parity", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and data["exit_code"] == 0
    assert data["summary"]["mutants"] == 4 and data["summary"]["killed"] == 4
    assert all(m["codes"] and m["outcome"] == "killed" for m in data["mutants"])
    rc, out = _cli(str(small_ring), "--operators", "drop-fence")
    assert rc == 1 and "survived" in out and "-  if producer { elect { init full[*]; init empty[*]; fence" in out
    rc, out = _cli(str(SPECS / "peer_init_race.sync"))
    assert rc == 2 and "mutation testing needs a safe spec" in out
    rc, _ = _cli(str(small_ring), "--operators", "no-such-operator")
    assert rc == 2
    rc, _ = _cli(str(SPECS / "does_not_exist.sync"))
    assert rc == 2


def test_budget_exhaustion_is_inconclusive_not_survival(small_ring):
    rep = run(str(small_ring), operators={"flip-parity", "drop-fence"}, max_states=5)
    assert {r.outcome for r in rep.results} <= {Outcome.INCONCLUSIVE, Outcome.KILLED}
    assert any(r.outcome is Outcome.INCONCLUSIVE for r in rep.results)
    assert rep.exit_code() == 3


def test_progress_lines_outside_a_terminal(small_ring, monkeypatch):
    """Piped (CI, a hook), mutate says how far it got instead of staying silent; --quiet drops it."""
    monkeypatch.setattr("syncverify.report.live.PROGRESS_EVERY", 0.0)
    for quiet in (False, True):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(["mutate", str(small_ring), "--operators", "drop-wait", *(["-q"] if quiet else [])])
        assert rc == 0
        lines = [line for line in err.getvalue().splitlines() if line.startswith("syncverify mutate: ")]
        if quiet:
            assert lines == []
        else:
            assert lines[-1].startswith("syncverify mutate: 2/2 mutants checked (last: drop-wait@")
