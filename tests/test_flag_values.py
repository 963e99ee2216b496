"""A value read from a flag that decides control flow (#34): `let v = atom.add.acq_rel F, 1;` and
`let v = ld.acquire F;`, then `if v == N - 1 { … }` — "the last CTA to arrive reduces and resets"
(docs/language.md §3.7, semantics/families/flag_values.py).

Each finding comes with its near twin: the last CTA's reads race or not with the ticket's semantics, a
value used in an `if` and the same value used as an index (SV806), one thread keeping an atomic's result
and a warp doing so (SV806). The explicit engine explores each value a read can return: every order of
the tickets, and every write a kept load may read (families/globalmem_views.py: an older write than the
latest where the hand-off is relaxed, the latest only where release/acquire put it in the reader's view).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify import ir
from syncverify.check import Options, check_protocol
from syncverify.diagnostics import InputError
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

SPECS = Path(__file__).resolve().parent.parent / "specs"


def check(text: str, engine: str = "explicit", **defines: int):
    return check_protocol(syncverify.load(text, path="t.sync", defines=defines), Options(engine=engine, timeout=120))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


# Two CTAs each write their partial, take a ticket, and the one that drew `WHO` reads both partials.
LAST = """\
protocol last {{
  grid 2;
  cta threads 32;
  global psum[2] bytes 64;
  flag tickets bound 2;
  write psum[block] part warp;
  syncthreads;
  first thread {{
    let t = atom.add.{sem}.gpu tickets, 1;
    if t == {who} {{ read psum[0]; read psum[1]; }}
  }}
}}
"""


def test_a_ticket_is_parsed_as_the_atomic_it_reads():
    proto = syncverify.load(LAST.format(sem="acq_rel", who=1), path="t.sync")
    (elect,) = [s for s in proto.body if isinstance(s, ir.Elect)]
    let = elect.body[0]
    assert isinstance(let, ir.Let) and let.name == "t"
    assert isinstance(let.probe, ir.FlagOp)
    assert (let.probe.kind, let.probe.rmw, let.probe.sem, let.probe.scope) == ("atom", "add", "acq_rel", "gpu")
    load = syncverify.load("protocol p { grid 2; cta threads 32; flag f bound 1; let v = ld.acquire.gpu f; "
                           "if v == 1 { } }", path="t.sync")
    assert load.body[0].probe.kind == "ld"


def test_the_last_cta_reads_every_partial_safely_with_an_acq_rel_ticket():
    assert check(LAST.format(sem="acq_rel", who=1)).verdict == Verdict.SAFE


def test_a_relaxed_ticket_leaves_the_last_ctas_reads_racing_with_the_others_write():
    r = check(LAST.format(sem="relaxed", who=1))
    assert errors(r) == {"SV301"}
    (d,) = [d for d in r.diagnostics if d.code == "SV301"]
    assert d.span.line == 10 and "line 6" in d.message


def test_the_first_cta_to_arrive_reads_before_the_other_wrote():
    # t == 0 is drawn by whichever CTA comes first: the search takes both orders, and in one of them
    # the first CTA reads the other's partial before that CTA wrote it
    r = check(LAST.format(sem="acq_rel", who=0))
    assert errors(r) == {"SV301"}


def test_a_branch_no_ticket_can_take_is_never_run():
    assert check(LAST.format(sem="relaxed", who=2)).verdict == Verdict.SAFE


def test_each_cta_sees_the_value_of_its_own_order():
    # the CTA that drew 1 writes `out`; exactly one CTA does in every order, so there is no race on `out`,
    # while a branch on `t == 0 || t == 1` makes both CTAs write it unordered
    text = """\
protocol one_writer {{
  grid 2;
  cta threads 32;
  global out bytes 64;
  flag tickets bound 2;
  first thread {{
    let t = atom.add.relaxed.gpu tickets, 1;
    if {cond} {{ write out; }}
  }}
}}
"""
    assert check(text.format(cond="t == 1")).verdict == Verdict.SAFE
    assert errors(check(text.format(cond="t == 0 || t == 1"))) == {"SV303"}


def test_a_loaded_value_decides_a_branch_for_the_whole_cta():
    # thread 0 stores its vote, every warp loads it after the barrier (__syncthreads_or / a __shared__ bool)
    text = """\
protocol vote {{
  grid 2;
  cta threads 64;
  global psum[2] bytes 64;
  flag tickets bound 2;
  flag last[2] bound 1;
  write psum[block] part warp;
  syncthreads;
  first thread {{
    let t = atom.add.acq_rel.gpu tickets, 1;
    st.relaxed.cta last[block], t == 1 ? 1 : 0;
  }}
  {barrier}
  let v = ld.relaxed.cta last[block];
  if v == 1 {{ read psum[0]; read psum[1]; }}
}}
"""
    assert check(text.format(barrier="syncthreads;")).verdict == Verdict.SAFE
    # without the barrier the other warp may load the vote before thread 0 stored it (then it reads nothing),
    # or after: its reads are then not ordered after the other CTA's writes; and the lanes of a warp that load
    # while the store is not in their view may read different writes (inconclusive). Never safe.
    r = check(text.format(barrier=""))
    assert r.verdict != Verdict.SAFE
    assert errors(r) <= {"SV301"}


def test_a_kept_load_takes_the_value_of_every_write_it_may_read():
    # Which write a load reads is the views' (families/globalmem_views.py): CTA 1 waits for g, then loads f.
    # With a relaxed hand-off its view of f is still the initial write, so the load may return 0 although the
    # interleaving already stored 1, and the branch on 0 runs into CTA 0's later write (SV301). The
    # release/acquire hand-off puts the store of f in CTA 1's view: the load returns 1, the branch never runs.
    text = """\
protocol stale {{
  grid 2;
  launch cooperative;
  cta threads 32;
  global late bytes 64;
  flag f bound 1;
  flag g bound 1;
  if block == 0 {{ first thread {{ st.relaxed.gpu f, 1; st.{rel}.gpu g, 1; write late; }} }}
  else {{
    first thread {{
      wait.until.{acq}.gpu g == 1;
      let v = ld.relaxed.gpu f;
      if v == 0 {{ read late; }}
    }}
  }}
}}
"""
    assert check(text.format(rel="release", acq="acquire")).verdict == Verdict.SAFE
    r = check(text.format(rel="relaxed", acq="relaxed"))
    assert errors(r) == {"SV301"}
    assert 13 in {d.span.line for d in r.diagnostics if d.code == "SV301"}  # the read the old value leads to
    # the same with the acquire half only: the relaxed store of g releases nothing
    assert errors(check(text.format(rel="relaxed", acq="acquire"))) == {"SV301"}


def test_a_warp_keeps_a_loaded_value_only_where_the_load_reads_one_write():
    # 32 threads load f while CTA 0's store may or may not be in their view: they could read different writes
    # and the language keeps one value per process, so the check is inconclusive, never safe. After grid.sync
    # the store is in every lane's view: one write, one value.
    text = """\
protocol warp_load {{
  grid 2;
  launch cooperative;
  cta threads 32;
  flag f bound 1;
  if block == 0 {{ first thread {{ st.relaxed.gpu f, 1; }} }}
  {sync}
  let v = ld.relaxed.gpu f;
  if v == 1 {{ }}
}}
"""
    assert check(text.format(sync="grid.sync;")).verdict == Verdict.SAFE
    r = check(text.format(sync=""))
    assert r.verdict == Verdict.INCONCLUSIVE
    assert "could disagree" in str(r.to_json() if hasattr(r, "to_json") else r)


@pytest.mark.parametrize(("use", "ok"), [
    ("if t == 0 { read D[0]; } else { read D[1]; }", True),
    ("read D[t % 2];", False),
    ("let u = t + 1; read D[u % 2];", False),
    ("st.relaxed.gpu tickets, t + 1;", True),
])
def test_a_value_of_the_run_may_decide_an_if_but_not_index_an_object(use, ok):
    text = f"""\
protocol use {{
  grid 2;
  cta threads 32;
  global D[2] bytes 64;
  flag tickets bound 4;
  first thread {{
    let t = atom.add.acq_rel.gpu tickets, 1;
    {use}
  }}
}}
"""
    proto = syncverify.load(text, path="t.sync")
    if ok:
        Machine(proto)
        return
    with pytest.raises(InputError) as info:
        Machine(proto)
    (d,) = info.value.diagnostics
    assert d.code == "SV806" and d.span.line == 8


def test_an_atomic_kept_by_a_warp_is_refused_at_its_line():
    text = "protocol p {{ grid 2; cta threads 32; flag f bound 64;\n  {kept}\n  if t == 1 {{ }}\n}}"
    with pytest.raises(InputError) as info:
        Machine(syncverify.load(text.format(kept="let t = atom.add.acq_rel.gpu f, 1;"), path="t.sync"))
    (d,) = info.value.diagnostics
    assert d.code == "SV806" and d.span.line == 2 and "32 threads" in d.message
    Machine(syncverify.load(text.format(kept="first thread { let t = atom.add.acq_rel.gpu f, 1; if t == 1 { } }")
                            .replace("\n  if t == 1 { }", ""), path="t.sync"))


def test_flagread_is_a_keyword_only_after_let():
    # `atom`/`ld` followed by a qualifier after `let NAME =`; elsewhere the operation statement
    with pytest.raises(InputError) as info:
        syncverify.load("protocol p { grid 2; cta threads 32; flag f bound 1; let v = ld f; }", path="t.sync")
    assert info.value.diagnostics[0].code in ("SV100", "SV101")
    syncverify.load("protocol p { grid 2; cta threads 32; flag f bound 1; first thread { atom.add.relaxed.gpu f, 1; "
                    "} let ld_count = 1; let x = ld_count + 1; }", path="t.sync")


def test_the_z3_lift_and_the_engines_without_the_family_refuse_with_the_reason():
    text = LAST.format(sem="acq_rel", who=1)
    z3 = check(text, "z3")
    assert z3.verdict == Verdict.SAFE  # no loop to lift: the same bounded search
    looped = """\
protocol looped {
  param R = 2;
  grid 2;
  cta threads 32;
  global D bytes 64;
  flag f bound 8;
  for r in 0..R { first thread { let v = atom.add.acq_rel.gpu f, 1; if v == 3 { read D; } } }
}
"""
    lifted = check(looped, "z3")
    assert lifted.verdict == Verdict.INCONCLUSIVE
    assert "decides control flow" in repr(lifted)
    bmc = check(text, "bmc")
    assert bmc.verdict == Verdict.INCONCLUSIVE and "global" in repr(bmc)


def test_trtllm_multiblock_as_written_races_and_its_fix_is_safe():
    as_written = check((SPECS / "trtllm_mmha_multiblock_last_block.sync").read_text())
    (d,) = [d for d in as_written.diagnostics if d.code == "SV301"]
    assert "read partial[t]" in (SPECS / "trtllm_mmha_multiblock_last_block.sync").read_text().splitlines()[
        d.span.line - 1]
    assert "write at line" in d.message
    assert check((SPECS / "trtllm_mmha_multiblock_last_block_syncwarp.sync").read_text()).verdict == Verdict.SAFE
    assert errors(check((SPECS / "trtllm_mmha_multiblock_last_block_relaxed.sync").read_text())) == {"SV301"}
