"""The bounded-exhaustive cross-check of "the last CTA to arrive" as extraction writes it (ptx/kept.py):
tests/exhaustive_programs.py, GLOBAL_SCOPES["tickets"] -- two CTAs of a grid, three statements each, over a
ticket kept by one thread and stored to a per-CTA word, the word loaded by the warp and branched on (the
partial read and the counter's weak reset under the branch), an unconditional weak reset, the partial's write,
`fence.sc` and a CTA barrier.

The reference (the explicit engine with its reductions) is compared on a deterministic slice with the explicit
engine without them and with --engine z3; both must agree wherever both conclude. The slice reaches the
findings of the family (SV301 on the partial, SV807 on the weak reset) and safe programs.
"""

from __future__ import annotations

import collections

from diff_engines import CONCLUSIVE, compare, engines
from exhaustive_programs import GLOBAL_SCOPES, sample

from syncverify import load
from syncverify.diagnostics import InputError

ENGINES = {e.name: e for e in engines()}
SCOPE = GLOBAL_SCOPES["tickets"]


def _slice(every: int, names: list[str], offset: int = 0) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for index, text in sample(SCOPE, every, offset):
        try:
            protocol = load(text, path="slice.sync")
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


def test_reduced_and_unreduced_explicit_agree_on_tickets():
    tally = _slice(263, ["explicit-unreduced"])
    assert tally["explicit-unreduced agrees"] >= 60, tally
    assert tally["safe"] and tally["code SV301"] and tally["code SV807"], tally


def test_z3_agrees_on_tickets():
    tally = _slice(977, ["symbolic"], offset=7)
    assert tally["symbolic agrees"] >= 15, tally
