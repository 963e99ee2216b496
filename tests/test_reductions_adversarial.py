"""Hand-written programs aimed at the conditions of the rules that take both outcomes of a completed probe
together (engines/reduction/probe_pair.py) and cp.async arrive-ons, their issues and copies alone
(engines/reduction/cp_arrive.py), searched three ways: with the reductions, with the reductions but without those
rules, and without reductions.

Each program puts next to the probe or the arrive-on something its rule's argument must rule out: a further
completion that flips the parity the probe names (arrivals, bytes alone, a commit or an arrive-on in flight), an
inval or init, an arrive_drop, a peer CTA's remote arrivals; arrive-ons with and without .noinc beside an
arrive.expect_tx and its bulk copy, an expect_tx/complete_tx, an inval, a commit, a probe, whole warps, a peer's
remote arrive. The three verdicts must be equal, and the findings (code, line; SV301/SV302 as one family) of both
reduced searches among the unreduced search's (each path of a reduced search stops at its first violation, so it
may report fewer); the rules must act on some of them (fewer states than without them).

Where the rules keep the verdict but not a finding's line (the copy taken alone while a reader's wait can pass
without the copier's arrive-on: the race reported at the read, not also at the copy), bench/RESULTS-soundness.md
says so; the subset assertion here is the one the exhaustive cross-checks make.
"""

from __future__ import annotations

import pytest
from por_slices import findings

from syncverify import load
from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction import probe_pair, successors
from syncverify.result import CheckResult, Verdict
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=50_000, seconds=60)

HEAD = """protocol adversarial {{
  {cluster}cta threads 128;
  role w0 = warp 0;
  role w1 = warp 1;
  role w2 = warp 2;
  role setup = warp 3;
  mbarrier mb count {count};
  smem buf bytes 64;
  smem pair[2] bytes 64;
  if setup {{ elect {{ init mb; {fence}}} }}
  {sync};
  if w0 {{ {w0} }}
  if w1 {{ {w1} }}
  if w2 {{ {w2} }}
}}
"""


def _spec(w0: str, w1: str, w2: str = "", count: int = 1, cluster: bool = False) -> str:
    return HEAD.format(cluster="cluster 2;\n  " if cluster else "", count=count,
                       fence="fence.mbarrier_init; " if cluster else "",
                       sync="cluster.sync" if cluster else "syncthreads", w0=w0, w1=w1, w2=w2)


def _elect(body: str) -> str:
    return f"elect {{ {body} }}"


PROBE = "if try_wait mb parity 0 { elect { write buf; } } else { elect { read buf; } }"
TEST_PROBE = PROBE.replace("try_wait", "test_wait")
TOKEN = "let t = try_wait mb parity 0; elect { read pair[0]; } if !t { wait mb parity 0; } elect { write pair[t]; }"
COPY = "cp.async buf; cp.async.mbarrier.arrive.noinc mb;"
COPY_INC = "cp.async buf; cp.async.mbarrier.arrive mb;"
READER = "wait mb parity 0; read buf;"
LOAD = "arrive.expect_tx mb bytes 64; tma.load pair[0] -> mb;"

PROGRAMS: dict[str, str] = {
    # a further completion of mb before the prober moves would make parity 0 name the incomplete phase 2
    "probe, two arrivals": _spec(_elect("arrive mb; arrive mb;"), PROBE),
    "test_wait, two arrivals": _spec(_elect("arrive mb; arrive mb;"), TEST_PROBE),
    "token, two arrivals": _spec(_elect("arrive mb; arrive mb;"), TOKEN),
    "probe, another warp's arrival": _spec(_elect("arrive mb;"), PROBE, _elect("arrive mb;")),
    "probe, bytes alone complete phase 1": _spec(
        _elect("arrive mb; expect_tx mb bytes 64; arrive mb; tma.load pair[1] -> mb;"), PROBE),
    "probe, complete_tx completes phase 1": _spec(
        _elect("arrive mb; expect_tx mb bytes 64; arrive mb; complete_tx mb bytes 64;"), PROBE),
    "probe, a commit in flight": _spec(_elect("arrive mb; umma.commit mb;"), PROBE),
    "probe, an arrive-on in flight": _spec(_elect("arrive mb; cp.async pair[1]; cp.async.mbarrier.arrive.noinc mb;"),
                                           PROBE),
    "probe, an inc arrive-on then an arrival": _spec(
        _elect("arrive mb; cp.async pair[1]; cp.async.mbarrier.arrive mb; arrive mb;"), PROBE),
    # the barrier's lifecycle reaching the probe
    "probe, inval": _spec(_elect("arrive mb; inval mb;"), PROBE),
    "probe, inval and init": _spec(_elect("arrive mb; inval mb; init mb;"), PROBE),
    "token, inval and init": _spec(_elect("arrive mb; inval mb; init mb;"), TOKEN),
    "probe, arrive_drop": _spec(_elect("arrive mb; arrive mb; arrive_drop mb;"), PROBE, count=2),
    # a peer CTA completing the prober's barrier
    "probe, peer's remote arrivals": _spec(
        "if cta == 1 { elect { arrive.release.cluster mb @ cta ^ 1; arrive.release.cluster mb @ cta ^ 1; } }",
        "if cta == 0 { " + PROBE + " }", cluster=True),
    # arrive-ons beside byte counts, lifecycle changes, commits, probes and each other
    "noinc beside arrive.expect_tx": _spec(_elect(COPY), _elect(LOAD), READER, count=2),
    "inc beside arrive.expect_tx": _spec(_elect(COPY_INC), _elect(LOAD), READER, count=1),
    "inc and arrive beside arrive.expect_tx": _spec(_elect(COPY_INC + " arrive mb;"), _elect(LOAD), READER, count=2),
    "noinc beside expect_tx and its copy": _spec(_elect(COPY), _elect("expect_tx mb bytes 64; tma.load pair[0] -> mb;"),
                                                 READER),
    "noinc beside complete_tx": _spec(_elect(COPY), _elect("expect_tx mb bytes 64; complete_tx mb bytes 64;"), READER),
    "noinc beside arrive_drop": _spec(_elect(COPY), _elect("arrive_drop mb;"), READER, count=2),
    "noinc beside inval and init": _spec(_elect(COPY), _elect("inval mb; init mb;"), READER),
    "noinc beside a commit": _spec(_elect(COPY), _elect("umma.commit mb;"), READER, count=2),
    "noinc and inc, one warp": _spec(_elect(COPY + " " + COPY_INC), _elect("arrive mb;"), READER, count=2),
    "two noinc on a count of 1": _spec(_elect(COPY), _elect(COPY), READER),
    "noinc beside a probe": _spec(_elect(COPY), _elect("arrive mb;"),
                                  "if try_wait mb parity 0 { elect { read buf; } } else { elect { write buf; } }",
                                  count=2),
    "noinc beside a token": _spec(_elect(COPY), _elect("arrive mb;"),
                                  "let t = try_wait mb parity 0; if !t { wait mb parity 0; } elect { read pair[t]; }",
                                  count=2),
    "whole warps, noinc": _spec(COPY, "arrive mb;", READER, count=64),
    "whole warps, inc": _spec(COPY_INC, "arrive mb;", READER, count=32),
    "whole warp noinc beside arrive.expect_tx": _spec(COPY, _elect(LOAD), READER, count=33),
    "whole warps, two phases": _spec(COPY + " wait mb parity 0; " + COPY, "arrive mb; wait mb parity 0; arrive mb;",
                                     READER + " wait mb parity 1;", count=64),
    "noinc beside a peer's remote arrive": _spec(_elect(COPY), "if cta == 1 { elect { arrive mb @ cta ^ 1; } }",
                                                 "if cta == 0 { " + READER + " }", count=2, cluster=True),
}


def _search(text: str, reduce: bool = True) -> CheckResult:
    protocol = load(text, path="adversarial.sync")
    return explore(protocol, BUDGET, Machine(protocol), symmetry=reduce, reduce=reduce)


def _without_rules(patch: pytest.MonkeyPatch) -> None:
    """The reduction without the probe pair and without any cp.async step taken alone."""
    patch.setattr(probe_pair, "ENABLED", False)
    patch.setattr(successors, "lone_cp_copy", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrival", lambda *args: False)
    patch.setattr(successors, "lone_cp_arrive_issue", lambda *args: False)


def test_the_programs_keep_verdicts_and_findings(monkeypatch):
    acted = []
    verdicts = set()
    for name, text in PROGRAMS.items():
        on = _search(text)
        none = _search(text, reduce=False)
        with monkeypatch.context() as patch:
            _without_rules(patch)
            off = _search(text)
        assert Verdict.INCONCLUSIVE not in (on.verdict, off.verdict, none.verdict), name
        assert on.verdict == off.verdict == none.verdict, (name, on.verdict, off.verdict, none.verdict)
        assert findings(on) <= findings(none), (name, findings(on), findings(none))
        assert findings(off) <= findings(none), (name, findings(off), findings(none))
        assert on.stats.states <= none.stats.states, name
        verdicts.add(on.verdict)
        if on.stats.states < off.stats.states:
            acted.append(name)
    assert verdicts == {Verdict.SAFE, Verdict.VIOLATION}
    assert len(acted) >= 10, acted


def test_the_inval_after_a_completed_probe_is_kept_only_by_the_walk(monkeypatch):
    """The inval that can come before the prober moves is what the walk's condition is for: with it dropped the
    probe's outcomes go first, the SV401 of a probe on the invalidated barrier is lost and the search says safe."""
    text = PROGRAMS["probe, inval and init"]
    probe = 1 + text.splitlines().index("  if w1 { " + PROBE + " }")
    assert ("SV401", probe) in findings(_search(text)) and ("SV401", probe) in findings(_search(text, reduce=False))
    monkeypatch.setattr(probe_pair, "CONDITION", False)
    assert _search(text).verdict == Verdict.SAFE
