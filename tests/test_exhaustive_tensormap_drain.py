"""The bounded-exhaustive cross-check over the drain of a copy's map reads (tests/exhaustive_programs.py,
TENSORMAP_SCOPES["tensormap-drain"]): two warps with copies that read a tensor map, `bulk.commit; bulk.wait_read 0;`
(the bulk-group reading: semantics/families/tensormap.py, docs/model.md "Tensor maps"), rewrites, the proxy fence
halves and the copy's completion wait. The reference (the explicit engine with its reductions) is compared with the
explicit engine without them and with --engine z3 on a deterministic slice; on the same slice, every program the
drain makes safe is one the reference reads with `bulk-wait-map-reads` in its `assumed`, and SV606 without it.
"""

from __future__ import annotations

import collections

from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import TENSORMAP_SCOPES, sample

from syncverify import load
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

ENGINES = {e.name: e for e in engines()}
SCOPE = TENSORMAP_SCOPES["tensormap-drain"]  # 1,950 programs


def test_engines_agree_on_a_slice():
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPE, 41, 4):
        try:
            protocol = load(text, path="slice.sync")
        except InputError:
            tally["rejected"] += 1
            continue
        got = {n: ENGINES[n].run(protocol, 100_000, 60.0) for n in ("explicit", "explicit-unreduced", "symbolic")}
        ref = got.pop("explicit")
        tally[ref.verdict] += 1
        tally.update(f"code {c}" for c in ref.codes)
        for name, answer in got.items():
            if ref.verdict in CONCLUSIVE and answer.verdict in CONCLUSIVE:
                c = compare(ref, answer, ENGINES[name])
                assert c.kind == "agree", (index, name, answer, ref, text)
                tally[f"{name} agrees"] += 1
    assert tally["explicit-unreduced agrees"] >= 30 and tally["symbolic agrees"] >= 30, tally
    assert tally["safe"] and tally["code SV606"], tally


def test_a_safe_answer_that_needs_the_reading_is_sv606_without_it():
    """Every program with a completed copy and a drained rewrite: safe with `bulk-wait-map-reads` in `assumed`
    exactly when it is SV606 (and nothing else) without the reading; safe without the name, safe without it."""
    tally: collections.Counter = collections.Counter()
    for _index, text in sample(SCOPE, 1):
        if not ("tma.load" in text and "bulk.wait_read" in text and "wait mb" in text):
            continue
        protocol = load(text, path="drain.sync")
        res = check_protocol(protocol, Options(timeout=60))
        strict = check_protocol(protocol, Options(timeout=60, assume_bulk_wait_map_reads=False))
        tally[res.verdict] += 1
        if res.verdict is Verdict.SAFE and "bulk-wait-map-reads" in res.assumed:
            tally["needs the reading"] += 1
            assert {d.code for d in strict.diagnostics if d.is_error} == {"SV606"}, text
        elif res.verdict is Verdict.SAFE:
            assert strict.verdict is Verdict.SAFE, text
        else:
            assert strict.verdict is not Verdict.SAFE, text
    assert tally["needs the reading"] >= 2, tally
