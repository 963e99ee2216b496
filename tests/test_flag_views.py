"""Which write a flag read returns (#34; semantics/families/globalmem_views.py, docs/model.md "Global
memory: which write a read returns"): each flag keeps its writes in coherence order, each thread its
view, and a `ld` / `wait.until` may read any write from the view on.

Each case comes with its near twin whose answer must stay: the relaxed hand-off that lets a read see an
older write and the release that forbids it; the store-buffering pair without fence.sc and with it; a
spin that passes on a value from before a reset and the one whose hand-off carries the reset; the
thread that already read the newer value (coherence) and the one that did not. The explicit engine and
`--engine z3` must agree on each; a slice of the exhaustive small programs over two flags compares the
reduced explicit search with the unreduced one and with z3.
"""

from __future__ import annotations

import collections
from collections import deque

import pytest
from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import GLOBAL_SCOPES, sample

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import InputError
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine


def check(text: str, engine: str = "explicit"):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


def both(text: str) -> tuple[Verdict, set[str]]:
    """The explicit engine's verdict and error codes, after checking that --engine z3 agrees."""
    ref, sym = check(text), check(text, "z3")
    assert sym.verdict == ref.verdict, (ref, sym)
    assert errors(sym) == errors(ref)
    return ref.verdict, errors(ref)


_GRID2 = """\
protocol t {
  grid 2;
  launch cooperative;
  cta threads 32;
  global data bytes 64;
  flag f bound 16;
  flag g bound 4;
  if block == 0 { first thread { CTA0 } }
  if block == 1 { first thread { CTA1 } }
}
"""


class _Grid2:
    """Two CTAs, the first thread of each running its statements (``format(a=..., b=...)``)."""

    @staticmethod
    def format(a: str, b: str) -> str:
        return _GRID2.replace("CTA0", a).replace("CTA1", b)

    @staticmethod
    def replace(old: str, new: str) -> str:
        return _GRID2.replace(old, new)


GRID2 = _Grid2()


def test_a_relaxed_hand_off_lets_the_next_load_read_the_older_write():
    """Message passing through two flags: `ready` is stored with release after the data, `progress` after
    it. A relaxed spin on `progress` orders nothing, so the `ld.acquire` of `ready` may still return the
    initial 0 (PTX: no causality from the store of ready to the load) and acquire nothing: the read of the
    data races. With the release/acquire pair on `progress` the load can return only the new `ready`."""
    a = "write data; st.release.gpu f, 1; st.{w}.gpu g, 1;"
    b = "wait.until.{r}.gpu g == 1; ld.acquire.gpu f; read data;"
    assert both(GRID2.format(a=a.format(w="relaxed"), b=b.format(r="relaxed"))) == (Verdict.VIOLATION, {"SV301"})
    assert both(GRID2.format(a=a.format(w="release"), b=b.format(r="relaxed"))) == (Verdict.VIOLATION, {"SV301"})
    assert both(GRID2.format(a=a.format(w="release"), b=b.format(r="acquire"))) == (Verdict.SAFE, set())


def test_a_spin_passes_on_a_value_from_before_the_reset():
    """CTA 0 gives the go of round 1 on `f`, waits for CTA 1's pass on `g`, resets `f`, tells CTA 1 (g = 2)
    and gives the go of round 2 once its data is written. Told with a relaxed store, CTA 1's view of `f`
    may still be the go of round 1, which it reads again and runs into the round-2 data before it is
    written (SV301); told with a release that carries the reset, only the new go satisfies its spin. Under
    sequential consistency both are safe: the reset is the latest value when CTA 1 spins again."""
    a = "st.release.gpu f, 1; wait.until.acquire.gpu g == 1; st.relaxed.gpu f, 0; st.{w}.gpu g, 2; write data; " \
        "st.release.gpu f, 1;"
    b = "wait.until.acquire.gpu f == 1; st.release.gpu g, 1; wait.until.{r}.gpu g == 2; " \
        "wait.until.acquire.gpu f == 1; read data;"
    assert both(GRID2.format(a=a.format(w="relaxed"), b=b.format(r="relaxed"))) == (Verdict.VIOLATION, {"SV301"})
    assert both(GRID2.format(a=a.format(w="release"), b=b.format(r="acquire"))) == (Verdict.SAFE, set())


def test_coherence_a_thread_that_read_the_new_value_never_reads_the_old_one():
    """CoRR (PTX §8.10.5): after its spin read f == 1, CTA 1 cannot read the initial 0 again, so a spin
    for 0 never passes (a deadlock); before reading it, it may (the initial value is still readable)."""
    assert both(GRID2.format(a="st.relaxed.gpu f, 1;", b="wait.until.relaxed.gpu f == 1; "
                             "wait.until.relaxed.gpu f == 0;"))[1] == {"SV801"}
    # the twin: a spin for 0 before reading 1 may read the initial 0 (or be left spinning: SV802)
    assert both(GRID2.format(a="st.relaxed.gpu f, 1;", b="wait.until.relaxed.gpu f == 0;"))[1] == {"SV802"}


def test_happens_before_brings_the_view_grid_sync_and_fence_sc():
    """A write before grid.sync is in the view of every thread after it: a spin for the overwritten value
    never passes. Without the grid barrier, nothing orders the store before the spin, which may read the
    initial value."""
    text = GRID2.format(a="st.relaxed.gpu f, 1;", b="wait.until.relaxed.gpu f == 0;")
    assert both(text.replace("if block == 1", "grid.sync;\n  if block == 1"))[1] == {"SV801"}
    # unordered, the spin may read the initial 0 (or be left spinning by the store: the reset race)
    assert both(text)[1] == {"SV802"}


STORE_BUFFERING = GRID2.format(a="st.relaxed.gpu f, 1; FENCE wait.until.relaxed.gpu g == 0; write data;",
                               b="st.relaxed.gpu g, 1; FENCE wait.until.relaxed.gpu f == 0; write data;")


def test_store_buffering_both_absence_checks_pass_only_without_fence_sc():
    """Dekker's entry: each CTA sets its flag, then checks that the other's is still 0. PTX lets both
    reads miss the other's store unless fence.sc separates the store and the read (the SB litmus test of
    PTX §8.10.6): both enter and their writes race (SV303). With fence.sc, the later fence synchronizes
    with the earlier one, so one of the two sees the other's flag; nothing resets them, so that one waits
    for ever (SV801), but the race is gone."""
    # (each store also lands while the other CTA may spin on the 0 it takes away: SV802 beside the finding)
    assert both(STORE_BUFFERING.replace("FENCE", "")) == (Verdict.VIOLATION, {"SV303", "SV802"})
    assert both(STORE_BUFFERING.replace("FENCE", "fence.sc.gpu;")) == (Verdict.VIOLATION, {"SV801", "SV802"})
    # fence.sc at .cta scope in different CTAs is not morally strong: both may still miss
    assert "SV303" in both(STORE_BUFFERING.replace("FENCE", "fence.sc.cta;"))[1]
    # fence.acq_rel does not order a store before a later load: both may still miss
    assert "SV303" in both(STORE_BUFFERING.replace("FENCE", "fence.acq_rel.gpu;"))[1]


def _outcomes(text: str) -> set[tuple[int, ...]]:
    """Every final state's flag histories, by a plain search of the machine's successors (no reduction)."""
    m = Machine(syncverify.load(text, path="t.sync"))
    seen, todo, finals = set(), deque([m.initial()]), set()
    while todo:
        s = todo.popleft()
        if s in seen:
            continue
        seen.add(s)
        succ = [r for r in m.successors(s) if r.state is not None]
        if not succ:
            finals.add(tuple(s.procs[p][0] for p in range(len(m.procs))))
        todo.extend(r.state for r in succ)
    return finals


def test_store_buffering_litmus_with_loads_every_outcome_terminates():
    """The SB litmus test with `ld` (no control on the values): every interleaving ends, with or without
    fence.sc (the reads that may return an older write are extra steps, never a block)."""
    text = GRID2.format(a="st.relaxed.gpu f, 1; FENCE ld.relaxed.gpu g;",
                        b="st.relaxed.gpu g, 1; FENCE ld.relaxed.gpu f;")
    assert _outcomes(text.replace("FENCE", "")) and _outcomes(text.replace("FENCE", "fence.sc.gpu;"))
    assert both(text.replace("FENCE", "")) == (Verdict.SAFE, set())


def test_an_rmw_reads_the_latest_write():
    """Atomicity: two CTAs add 1 each; however stale CTA 1's view, its add reads the latest, so the count
    reaches 2 and a spin for it passes (no deadlock). A spin for 3 never passes."""
    a = "red.add.relaxed.gpu f, 1;"
    b = "red.add.relaxed.gpu f, 1; wait.until.relaxed.gpu f == {n};"
    assert both(GRID2.format(a=a, b=b.format(n=2))) == (Verdict.SAFE, set())
    assert both(GRID2.format(a=a, b=b.format(n=3)))[1] == {"SV801"}


def test_a_reader_that_falls_too_far_behind_is_inconclusive_never_safe():
    """The history of a flag is bounded (globalmem_views.HISTORY): a reader that may still read the first
    of many writes keeps them all readable; past the bound the check is inconclusive. The twin without
    the read of `f` keeps only the latest write and is safe."""
    text = GRID2.format(a="for i in 0..20 { red.add.relaxed.gpu f, 1; }", b="READS").replace("bound 16", "bound 32")
    far = check(text.replace("READS", "ld.relaxed.gpu g; ld.relaxed.gpu f;"))
    assert far.verdict is Verdict.INCONCLUSIVE and "writes a thread may still read" in far.coverage, far
    near = check(text.replace("READS", "ld.relaxed.gpu g;"))
    assert near.verdict is Verdict.SAFE, near


ENGINES = {e.name: e for e in engines()}


def _slice(scope: str, every: int, names: list[str], offset: int = 0) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text in sample(GLOBAL_SCOPES[scope], every, offset):
        try:
            protocol = syncverify.load(text, path="slice.sync")
        except InputError:
            tally["rejected"] += 1
            continue
        got = {n: ENGINES[n].run(protocol, 100_000, 60.0) for n in ["explicit", *names]}
        ref = got.pop("explicit")
        tally[ref.verdict] += 1
        tally.update(f"code {c}" for c in ref.codes)
        for name, answer in got.items():
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, ENGINES[name])
                assert c.kind == "agree", (index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    return tally


@pytest.mark.parametrize("scope", ["views-sb", "views-mp"])
def test_exhaustive_views_reduced_unreduced_and_z3_agree(scope):
    """A slice of the two-flag programs: the reduced explicit search, the unreduced one and z3 agree, and
    the slice reaches the races that older writes make possible."""
    every = 157 if scope == "views-sb" else 877
    tally = _slice(scope, every, ["explicit-unreduced", "symbolic"], offset=3)
    assert tally["explicit-unreduced agrees"] >= 120 and tally["symbolic agrees"] >= 120, tally
    assert tally["safe"] and tally["violation"], tally
    # the races that a read of an older write makes: both CTAs past their absence checks (store buffering),
    # the data read after a hand-off that carries no view (message passing)
    assert tally["code SV303" if scope == "views-sb" else "code SV301"], tally
