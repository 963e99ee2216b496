"""`st.weak F, V;`: a plain store of a flag (the reset of a "last CTA" counter), semantics/families/flag_weak.py.

A weak store is a data race unless causality orders it with every other thread's access of the flag (PTX ISA
§8.7, §8.10.1). Each finding has its near twin that keeps the other answer: the reset by the CTA that drew the
last ticket (ordered after every atomic through the chain of atomics) and by any CTA; a later atomic ordered
after the store by a release/acquire hand-off and the same atomic without it. What the model does not order (a
load of the flag beside a weak store, a weak store after another thread's store) is inconclusive, never safe.
"""

from __future__ import annotations

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import InputError
from syncverify.result import Verdict


def check(text: str):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine="explicit", timeout=120))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


RESET = """\
protocol reset {{
  grid 2;
  cta threads 32;
  flag tickets;
  first thread {{
    let t = atom.inc.relaxed.gpu tickets, 2;
    if {cond} {{ st.weak tickets, 0; }}
  }}
}}
"""


def test_the_cta_that_drew_the_last_ticket_resets_without_a_race():
    r = check(RESET.format(cond="t == 1"))
    assert r.verdict == Verdict.SAFE, r.diagnostics


def test_the_cta_that_drew_the_first_ticket_resets_while_the_other_may_still_take_one():
    r = check(RESET.format(cond="t == 0"))
    assert errors(r) == {"SV807"}
    lines = {d.span.line for d in r.diagnostics if d.code == "SV807"}
    assert lines and lines <= {6, 7}  # the store, or the other CTA's atomic after it


HANDOFF = """\
protocol handoff {{
  grid 2;
  cta threads 32;
  launch persistent;
  flag counter;
  flag go;
  if block == 0 {{ first thread {{ st.weak counter, 5; st.release.gpu go, 1; }} }}
  if block == 1 {{ first thread {{ {wait} red.add.relaxed.gpu counter, 1; }} }}
}}
"""


def test_an_atomic_ordered_after_the_weak_store_by_release_acquire_is_no_race():
    r = check(HANDOFF.format(wait="wait.until.acquire.gpu go == 1;"))
    assert r.verdict == Verdict.SAFE, r.diagnostics


def test_the_same_atomic_without_the_handoff_races_with_the_weak_store():
    r = check(HANDOFF.format(wait=""))
    assert errors(r) == {"SV807"}


def test_a_weak_store_of_a_flag_another_thread_loads_is_inconclusive_never_safe():
    text = """\
protocol loaded {
  grid 2;
  cta threads 32;
  flag f;
  if block == 0 { first thread { st.weak f, 1; } }
  if block == 1 { first thread { let v = ld.relaxed.gpu f; if v == 1 { } } }
}
"""
    r = check(text)
    assert r.verdict == Verdict.INCONCLUSIVE and "weak store" in r.coverage


def test_a_weak_store_after_another_threads_store_is_inconclusive_never_safe():
    text = """\
protocol stores {
  grid 2;
  launch persistent;
  cta threads 32;
  flag f;
  flag go;
  if block == 1 { first thread { st.relaxed.gpu f, 2; st.release.gpu go, 1; } }
  if block == 0 { first thread { wait.until.acquire.gpu go == 1; st.weak f, 0; } }
}
"""
    r = check(text)
    assert r.verdict == Verdict.INCONCLUSIVE and "weak store" in r.coverage


@pytest.mark.parametrize("op", ["st.weak.gpu f, 0;", "st.weak.relaxed f, 0;"])
def test_a_weak_store_takes_no_scope_and_no_other_semantics(op):
    with pytest.raises(InputError, match=r"st\.weak"):
        syncverify.load(f"protocol p {{ grid 2; cta threads 32; flag f; first thread {{ {op} }} }}", path="t.sync")


def test_a_strong_store_after_the_weak_one_does_not_order_the_weak_one_for_others():
    """The storer's later `st.relaxed` does not take the weak store's race away: the other CTA's atomic must still
    be ordered after the latest write (and so after the weak store); with the release/acquire hand-off it is."""
    text = """\
protocol after {{
  grid 2;
  launch persistent;
  cta threads 32;
  flag counter;
  flag go;
  if block == 0 {{ first thread {{ st.weak counter, 5; st.relaxed.gpu counter, 6; st.release.gpu go, 1; }} }}
  if block == 1 {{ first thread {{ {wait} red.add.relaxed.gpu counter, 1; }} }}
}}
"""
    assert errors(check(text.format(wait=""))) == {"SV807"}
    assert check(text.format(wait="wait.until.acquire.gpu go == 1;")).verdict == Verdict.SAFE


def test_a_weak_store_of_a_flag_another_thread_probes_is_inconclusive():
    text = """\
protocol probed {
  grid 2;
  cta threads 32;
  flag f;
  if block == 0 { first thread { st.weak f, 1; } }
  if block == 1 { first thread { probe.acquire.gpu f == 1; } }
}
"""
    r = check(text)
    assert r.verdict == Verdict.INCONCLUSIVE and "weak store" in r.coverage
