"""`choose` values, C's conditional operator and loop variables named `i`.

The `choose` protocols in tests/data/choose come in pairs: a kernel whose hang (or race)
only some values read from memory reach, and its fix, which must be safe for every value.
Each hang was called safe before `choose` existed, when the count was a `param` at one value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_path, check_protocol
from syncverify.cli import main
from syncverify.codegen import EmitRefused
from syncverify.codegen.emit import emit
from syncverify.diagnostics import InputError
from syncverify.export.promela import ExportError, export_model
from syncverify.export.spin import run_spin, tools_available
from syncverify.lang import choices
from syncverify.result import Verdict

DATA = Path(__file__).resolve().parent / "data" / "choose"


def _errors(result) -> set[str]:
    return {d.code for d in result.diagnostics if d.is_error}


def _check(name: str, **options) -> syncverify.CheckResult:
    return check_path(str(DATA / f"{name}.sync"), Options(**options))


# ---------------------------------------------------------------------- choose: one value per launch
def test_hang_reached_by_one_assignment_is_found_and_named():
    res = _check("peeled_hang")
    assert res.verdict is Verdict.VIOLATION
    assert _errors(res) == {"SV201"}
    (d,) = res.diagnostics
    assert d.message.endswith("[with NBLK=0]"), d.message
    assert d.span.line == 32 and d.trace
    assert not d.notes  # NBLK=0 is the only assignment that reaches it
    assert "every assignment of NBLK in 0..4 (4)" in res.bound


def test_guarded_peel_is_safe_for_every_assignment():
    res = _check("peeled_guarded")
    assert res.verdict is Verdict.SAFE, res.diagnostics
    assert "every assignment of NBLK in 0..4 (4)" in res.bound


def test_a_param_at_one_value_misses_the_hang_that_choose_finds():
    """What the issue is about: with the count a param, the check answers for that value only."""
    text = (DATA / "peeled_hang.sync").read_text()
    as_param = text.replace("choose NBLK in 0..4;", "param NBLK = 2;")
    assert as_param != text
    bounded = check_protocol(syncverify.load(as_param, path="p.sync"), Options(engine="explicit"))
    assert bounded.verdict is Verdict.SAFE and bounded.bound == "NBLK=2"
    assert check_protocol(syncverify.load(text, path="c.sync")).verdict is Verdict.VIOLATION
    # here NBLK is a loop's trip count, so the all-iterations lift, which checks the trip counts
    # below its start one by one, reaches the hang at 0 too; a count that is no loop bound it cannot
    lifted = check_protocol(syncverify.load(as_param, path="p.sync"))
    assert lifted.verdict is Verdict.VIOLATION and lifted.bound == "NBLK=0"


def test_define_pins_a_choice():
    safe = _check("peeled_hang", defines={"NBLK": 2})
    assert safe.verdict is Verdict.SAFE
    assert "NBLK=2" in safe.bound and "(1)" not in safe.bound
    hang = _check("peeled_hang", defines={"NBLK": 0})
    assert _errors(hang) == {"SV201"}
    assert "[with" not in hang.diagnostics[0].message  # one assignment: nothing to tell apart


def test_define_outside_the_range_is_an_input_error():
    res = _check("peeled_hang", defines={"NBLK": 4})
    assert res.verdict is Verdict.ERROR
    assert [d.code for d in res.diagnostics] == ["SV114"]
    assert "outside the range 0..4" in res.diagnostics[0].message


def test_every_engine_names_the_assignment():
    # NBLK in 0..2 keeps the solver's part short: the hang (NBLK=0) and one safe assignment
    texts = [(DATA / f"{n}.sync").read_text().replace("choose NBLK in 0..4;", "choose NBLK in 0..2;")
             for n in ("peeled_hang", "peeled_guarded")]
    for engine in ("explicit", "bmc"):
        hang, fixed = (check_protocol(syncverify.load(t, path="p.sync"), Options(engine=engine)) for t in texts)
        assert hang.verdict is Verdict.VIOLATION, engine
        assert [(d.code, d.message.endswith("[with NBLK=0]")) for d in hang.diagnostics] == [("SV201", True)], engine
        assert fixed.verdict is Verdict.SAFE, engine
        assert "every assignment of NBLK in 0..2 (2)" in fixed.bound, engine


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_machine_readable_reports_name_the_assignment(fmt, capsys):
    rc = main(["check", "--format", fmt, str(DATA / "peeled_hang.sync")])
    assert rc == 1
    doc = json.loads(capsys.readouterr().out)
    text = json.dumps(doc)
    assert "[with NBLK=0]" in text
    assert "NBLK=1" not in text and "NBLK=2" not in text


# ---------------------------------------------------------------------- choose: per element and per CTA
def test_array_of_chosen_counts():
    res = _check("varlen_peeled_hang")
    assert _errors(res) == {"SV201", "SV502"}
    by_code = {d.code: d for d in res.diagnostics}
    assert by_code["SV201"].message.endswith("[with kv=[0, 0]]")
    assert any("also reached with 2 other assignments" in n for n in by_code["SV201"].notes)
    assert "kv=[0, 1]" in by_code["SV502"].message
    fixed = _check("varlen_peeled_guarded")
    assert fixed.verdict is Verdict.SAFE, fixed.diagnostics
    assert "every assignment of kv[2] in 0..3 (9)" in fixed.bound


def test_values_chosen_per_cta():
    res = _check("cluster_tiles_hang")
    assert _errors(res) == {"SV404", "SV503"}
    by_code = {d.code: d for d in res.diagnostics}
    assert by_code["SV503"].message.endswith("[with NT@cta0=1, NT@cta1=2]")
    assert by_code["SV404"].message.endswith("[with NT@cta0=2, NT@cta1=1]")
    assert _check("cluster_tiles_padded").verdict is Verdict.SAFE


def test_per_cta_values_reach_each_cta():
    proto = syncverify.load(str(DATA / "cluster_tiles_hang.sync"), assignment={"NT": (1, 2)})
    assert proto.assignment == (("NT", (1, 2)),)
    equal = syncverify.load(str(DATA / "cluster_tiles_hang.sync"), assignment={"NT": (2, 2)})
    assert check_protocol(equal).verdict is Verdict.SAFE  # the twin: equal counts never hang
    assert check_protocol(proto).verdict is Verdict.VIOLATION


def test_assignments_are_enumerated_exactly():
    proto = syncverify.load(str(DATA / "cluster_tiles_hang.sync"))
    found = list(choices.assignments(proto))
    assert found == [(("NT", v),) for v in [(1, 1), (1, 2), (2, 1), (2, 2)]]
    assert choices.count(proto) == 4
    assert choices.describe(proto, found[1]) == "NT@cta0=1, NT@cta1=2"


def test_an_index_out_of_range_is_found_where_it_happens():
    text = """protocol p {
  choose kv[2] in 0..2;
  cta threads 32;
  smem t[4] bytes 16;
  for k in 0..3 { read t[kv[k]]; }
}"""
    res = check_protocol(syncverify.load(text, path="p.sync"))
    assert res.verdict is Verdict.VIOLATION
    assert any("index 2 is out of range for `kv[2]`" in d.message for d in res.diagnostics)
    twin = text.replace("0..3", "0..2")
    assert check_protocol(syncverify.load(twin, path="p.sync")).verdict is Verdict.SAFE


def test_too_many_assignments_is_inconclusive_not_safe():
    text = """protocol p {
  choose kv[11] in 0..2;
  cta threads 32;
}"""
    proto = syncverify.load(text, path="p.sync")
    assert choices.count(proto) == 2048 > choices.MAX_ASSIGNMENTS
    res = check_protocol(proto)
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "-D NAME=VALUE" in res.coverage
    pinned = check_protocol(syncverify.load(text, {"kv": 1}, path="p.sync"))
    assert pinned.verdict is Verdict.SAFE


def test_input_error_of_one_assignment_names_it():
    text = """protocol p {
  choose N in 0..2;
  cta threads 32;
  mbarrier b;
  elect { init b count N; }
}"""
    res = check_path_text(text, "p.sync")
    assert res.verdict is Verdict.ERROR
    (d,) = res.diagnostics
    assert d.code == "SV105" and (d.span.line, d.span.column) == (5, 24)
    assert d.notes == ("resolved with the first value of each `choose` (N=0; per CTA and per element alike)",)
    assert check_protocol(syncverify.load(text, {"N": 1}, path="p.sync")).verdict is Verdict.SAFE
    # the first assignment is valid input, a later one is not: that one is named
    later = text.replace("0..2", "1..3").replace("count N", "count 2 - N")
    res = check_path_text(later, "p.sync")
    assert res.verdict is Verdict.ERROR
    (d,) = res.diagnostics
    assert d.code == "SV105" and d.message.endswith("[with N=2]")


def check_path_text(text: str, name: str) -> syncverify.CheckResult:
    try:
        protocol = syncverify.load(text, path=name)
    except InputError as err:
        return syncverify.CheckResult(path=name, protocol=None, verdict=Verdict.ERROR, bound="",
                                      diagnostics=tuple(err.diagnostics))
    return check_protocol(protocol)


# ---------------------------------------------------------------------- what other engines and outputs do
def test_all_iterations_lift_is_refused_with_the_reason():
    res = _check("varlen_peeled_guarded", engine="z3")
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "`choose` values: kv" in res.coverage
    auto = _check("varlen_peeled_guarded")
    assert auto.verdict is Verdict.SAFE and auto.bound.startswith("TILES=2;")  # the bounded answer stays
    assert "`choose` values: kv" in auto.coverage


def test_lift_runs_when_every_choice_is_pinned():
    text = RING.replace("PARITY", "(i / 2) % 2").replace("cta threads 64;", "cta threads 64;\n  choose X in 0..2;") \
        .replace("read tile[i % 2];", "if X == 1 { read tile[i % 2]; }")
    res = check_protocol(syncverify.load(text, path="r.sync"), Options(engine="z3"))
    assert res.verdict is Verdict.INCONCLUSIVE and "`choose` values: X" in res.coverage
    pinned = check_protocol(syncverify.load(text, {"X": 1}, path="r.sync"), Options(engine="z3", defines={"X": 1}))
    assert pinned.verdict is Verdict.SAFE, pinned.coverage
    assert pinned.bound.startswith("all-iterations") and pinned.bound.endswith("; X=1")
    # a bound that reads an array of chosen values is not one the lift takes, pinned or not
    arr = _check("varlen_peeled_guarded", engine="z3", defines={"kv": 1})
    assert arr.verdict is Verdict.INCONCLUSIVE and "not lifted to all iterations" in arr.coverage


def test_export_and_emit_refuse_several_assignments_but_take_a_pinned_one():
    proto = syncverify.load(str(DATA / "peeled_guarded.sync"))
    with pytest.raises(ExportError, match="pin each with -D"):
        export_model(proto)
    with pytest.raises(EmitRefused, match="pin each with -D"):
        emit(proto)
    pinned = syncverify.load(str(DATA / "peeled_guarded.sync"), {"NBLK": 2})
    assert "proctype" in export_model(pinned).text
    assert emit(pinned).source


def test_trace_page_refuses_several_assignments(tmp_path, capsys):
    rc = main(["trace", str(DATA / "peeled_hang.sync"), "-o", str(tmp_path / "t.html")])
    out = capsys.readouterr()
    assert rc == 2 and "SV118" in out.err + out.out and "Traceback" not in out.err
    assert main(["trace", "-D", "NBLK=0", str(DATA / "peeled_hang.sync"), "-o", str(tmp_path / "t.html")]) == 1


# ---------------------------------------------------------------------- input errors
@pytest.mark.parametrize("body, expected", [
    ("  choose N in 0..4;\n  smem kv[N] bytes 1024;\n",
     "4:11: SV118 `N` is a `choose` value; declarations fix the kernel's shape for every assignment and cannot "
     "depend on it (use a `param`)"),
    ("  choose N in 3..3;\n", "3:18: SV118 `choose N` has no value to choose: the range 3..3 is empty (ranges are "
     "half-open, as in `for`)"),
    ("  choose kv[2] in 0..3;\n  let x = kv;\n", "4:11: SV118 `kv` is an array of 2 chosen values; index it (`kv[k]`)"),
    ("  choose kv[2] in 0..3;\n  let x = kv[2];\n", "4:14: SV104 index 2 is out of range for `kv[2]`"),
    ("  choose N in 0..3;\n  let x = N[0];\n", "4:11: SV104 `N` is one chosen value, not an array"),
    ("  choose N in 0..3;\n  param M = N + 1;\n", "4:13: SV118 `N` is a `choose` value; declarations fix the "
     "kernel's shape for every assignment and cannot depend on it (use a `param`)"),
    ("  choose N in 0..3;\n  let N = 1;\n", "4:7: SV102 `N` is already declared; pick another name for the variable"),
])
def test_choose_input_errors(tmp_path, capsys, body, expected):
    path = tmp_path / "spec.sync"
    path.write_text("protocol p {\n  cta threads 32;\n" + body + "}\n")
    rc = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out + err
    assert f"{path}:{expected.split(' ', 1)[0]} {expected.split(' ', 1)[1]}" in out, out
    assert "^" in out  # the caret under the column


# ---------------------------------------------------------------------- the conditional operator
@pytest.mark.parametrize("expr, value", [
    ("1 ? 2 : 3", 2), ("0 ? 2 : 3", 3),
    ("0 || 1 ? 10 : 20", 10),            # `||` binds tighter than `?:`
    ("1 ? 2 : 0 ? 3 : 4", 2), ("0 ? 2 : 0 ? 3 : 4", 4), ("0 ? 2 : 1 ? 3 : 4", 3),  # right-associative
    ("0 ? 1 : 2 + 5", 7), ("(0 ? 1 : 2) + 5", 7), ("1 ? 1 : 2 + 5", 1),
    ("1 ? 0 ? 5 : 6 : 7", 6),             # the middle operand is a whole expression
    ("0 ? 1 / 0 : 9", 9), ("1 ? 9 : 1 / 0", 9),  # only the branch taken is evaluated, as in C
])
def test_conditional_follows_c(expr, value):
    proto = syncverify.load(f"protocol p {{ param X = {expr}; cta threads 32; }}", path="p.sync")
    assert proto.param("X") == value


def test_conditional_taken_branch_errors_still_reported():
    with pytest.raises(InputError) as info:
        syncverify.load("protocol p { param X = 1 ? 1 / 0 : 9; cta threads 32; }", path="p.sync")
    assert [d.code for d in info.value.diagnostics] == ["SV115"]


RING = """protocol ring {
  param ITERS = 4;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile[2] bytes 1024;
  mbarrier full[2] count 1;
  mbarrier empty[2] count 32;
  if producer { elect { init full[*]; init empty[*]; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    for i in 0..ITERS {
      wait empty[i % 2] parity (i / 2) % 2 == 0 ? 1 : 0;
      elect { arrive.expect_tx full[i % 2] bytes 1024; tma.load tile[i % 2] bytes 1024 -> full[i % 2]; }
    }
  }
  if consumer {
    for i in 0..ITERS {
      wait full[i % 2] parity PARITY;
      read tile[i % 2];
      arrive empty[i % 2];
    }
  }
}"""


def test_conditional_and_loop_variable_i_in_a_ring():
    """Both were input errors before (SV100 for `?`, SV102 for `i`); the ring is safe, and its
    twin with the consumer's parity inverted is still flagged."""
    good = RING.replace("PARITY", "(i / 2) % 2 == 1 ? 1 : 0")
    bad = RING.replace("PARITY", "(i / 2) % 2 == 1 ? 0 : 1")
    for engine, iters in (("explicit", 4), ("bmc", 2)):
        res = check_protocol(syncverify.load(good, {"ITERS": iters}, path="r.sync"), Options(engine=engine))
        assert res.verdict is Verdict.SAFE, (engine, res.diagnostics)
        assert check_protocol(syncverify.load(bad, {"ITERS": iters}, path="r.sync"), Options(engine=engine)).verdict \
            is Verdict.VIOLATION
    lifted = check_protocol(syncverify.load(good, path="r.sync"))
    assert lifted.verdict is Verdict.SAFE and lifted.bound.startswith("all-iterations"), lifted


def test_conditional_in_promela_and_cuda():
    proto = syncverify.load(RING.replace("PARITY", "(i / 2) % 2 == 1 ? 1 : 0"), path="r.sync")
    assert "-> 1 : 0)" in export_model(proto).text
    assert "? 1 : 0)" in emit(proto).source


@pytest.mark.skipif(tools_available() is not None, reason="needs spin and a C compiler")
def test_spin_agrees_on_the_conditional(tmp_path):
    for parity, verdict in (("(i / 2) % 2 == 1 ? 1 : 0", "safe"), ("(i / 2) % 2 == 1 ? 0 : 1", "violation")):
        model = export_model(syncverify.load(RING.replace("PARITY", parity), path="r.sync"))
        out = run_spin(model.text, tmp_path / verdict, depth=model.max_depth + 10, cc_flags=("-O0",))
        assert out.verdict == verdict, out.detail


# ---------------------------------------------------------------------- `i`
def test_i_as_variable_next_to_role_index():
    text = """protocol p {
  cta threads 384;
  role consumer[2] = warpgroup 1 + i;
  smem t[4] bytes 16;
  if consumer { for i in 0..2 { let j = i + 2 * instance; read t[j]; } }
}"""
    proto = syncverify.load(text, path="p.sync")
    assert proto.role("consumer").instances == ((128, 256), (256, 384))
    assert check_protocol(proto).verdict is Verdict.SAFE
    # the near twin: both instances read the same slots, and a write makes it a race
    race = text.replace("read t[j];", "write t[i];")
    assert _errors(check_protocol(syncverify.load(race, path="p.sync"))) == {"SV303"}


def test_i_outside_a_declaration_is_an_ordinary_unknown_name():
    with pytest.raises(InputError) as info:
        syncverify.load("protocol p { cta threads 32; let x = i; }", path="p.sync")
    (d,) = info.value.diagnostics
    assert d.code == "SV101" and "element index" in d.message


def test_loop_variable_i_indexes_a_named_barrier_array():
    """`sched[i]` substitutes the loop's `i` into the declaration's `4 + i` (its element index)."""
    text = """protocol p {
  cta threads 256;
  role wg[2] = warpgroup i;
  named sched[2] id 4 + i count 256;
  smem t bytes 16;
  for i in 0..2 { bar.sync sched[i]; read t; }
}"""
    assert check_protocol(syncverify.load(text, path="p.sync")).verdict is Verdict.SAFE
    half = text.replace("bar.sync sched[i];", "if wg && instance == 0 { bar.sync sched[i]; }")
    res = check_protocol(syncverify.load(half, path="p.sync"))
    assert _errors(res) == {"SV201"} and "bar.sync 4 — 128 of 256" in res.diagnostics[0].message


# ---------------------------------------------------------------------- the builder API
def _built_peel(guarded: bool) -> syncverify.ProtocolBuilder:
    b = syncverify.ProtocolBuilder("built_peel")
    nblk = b.choose("NBLK", 0, 4)
    b.cta_threads(64)
    producer, consumer = b.role("producer", "warp", 0), b.role("consumer", "warp", 1)
    kv = b.smem("kv", 1024, slots=2)
    full, empty = b.mbarrier("full", count=1, size=2), b.mbarrier("empty", count=32, size=2)
    with b.if_(producer), b.elect():
        b.op("init", full.all)
        b.op("init", empty.all)
        b.op("fence.mbarrier_init")
    b.op("syncthreads")
    with b.if_(producer), b.for_("i", 0, nblk) as i:
        b.op("wait", empty[i % 2], parity=(i / 2 + 1) % 2)
        with b.elect():
            b.op("arrive.expect_tx", full[i % 2], bytes=1024)
            b.op("tma.load", kv[i % 2], bytes=1024, target=full[i % 2])
    with b.if_(consumer):
        with b.if_(nblk > 0) if guarded else b.if_(1):
            b.op("wait", full[0], parity=0)
            b.op("read", kv[0])
            b.op("arrive", empty[0])
        with b.for_("i", 1, (nblk > 1).if_else(nblk, 1)) as i:
            b.op("wait", full[i % 2], parity=(i / 2) % 2)
            b.op("read", kv[i % 2])
            b.op("arrive", empty[i % 2])
    return b


def test_builder_writes_choose_the_conditional_and_i():
    b = _built_peel(guarded=False)
    assert "choose NBLK in 0..4;" in b.source and "for i in 1..NBLK > 1 ? NBLK : 1 {" in b.source
    res = check_protocol(b.build())
    assert _errors(res) == {"SV201"} and res.diagnostics[0].message.endswith("[with NBLK=0]")
    assert check_protocol(_built_peel(guarded=True).build()).verdict is Verdict.SAFE
    assert check_protocol(b.build({"NBLK": 1})).verdict is Verdict.SAFE  # pinned past the hang
    with pytest.raises(ValueError, match="reserved"):
        b.param("i", 1)  # still the element index of array declarations
    t = syncverify.builder.Term("k")
    assert str((t < 2).if_else(t, 0) + 1) == "(k < 2 ? k : 0) + 1"
    assert str(t.eq(0).if_else(1, t.eq(1).if_else(2, 3))) == "k == 0 ? 1 : k == 1 ? 2 : 3"
    assert str((t > 0).if_else(1, 2).if_else(3, 4)) == "(k > 0 ? 1 : 2) ? 3 : 4"


@pytest.mark.skipif(tools_available() is not None, reason="needs spin and a C compiler")
def test_spin_agrees_with_each_pinned_assignment(tmp_path):
    """The export of NBLK=0 used to fail on the producer's wait, which no trip of its loop reaches."""
    for nblk, verdict in ((0, "violation"), (1, "safe")):
        proto = syncverify.load(str(DATA / "peeled_hang.sync"), {"NBLK": nblk})
        assert check_protocol(proto, Options(defines={"NBLK": nblk})).verdict.value == verdict
        model = export_model(proto)
        out = run_spin(model.text, tmp_path / str(nblk), depth=model.max_depth + 10, cc_flags=("-O0",))
        assert out.verdict == verdict, out.detail
