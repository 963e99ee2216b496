"""Who runs `elect`, `per warp` and `first thread` (docs/language.md §5.4, §6).

`elect` is `elect.sync` with a full mask (`cute::elect_one_sync()`): one lane of every warp
that reaches it. `first thread` is one thread: the first of the guarding role's instance, or
thread 0 of the CTA. Both rules are defined once (``semantics.program._Compiler.elected``);
these tests check the rule itself, the verdicts it leads to in each engine, the Promela
export, the CUDA emitter and the builder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_promela import CC_FLAGS, needs_spin

import syncverify
from syncverify import ProtocolBuilder, ir
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.codegen import emit
from syncverify.diagnostics import InputError
from syncverify.export import export_model
from syncverify.export.spin import run_spin
from syncverify.result import Verdict
from syncverify.semantics.program import OP, compile_program, processes


def check(text: str, engine: str = "explicit"):
    return check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=60))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


def runners(text: str, kind: type = ir.MbarArrive) -> list[tuple[str, int]]:
    """(process label, threads) of every compiled execution of a `kind` operation."""
    p = syncverify.load(text, path="t.sync")
    out = []
    for proc in processes(p):
        for ins in compile_program(p, proc).code:
            if ins.kind == OP and isinstance(ins.op, kind):
                out.append((proc.label(), ins.threads))
    return out


# ---------------------------------------------------------------------------------------------
# Reproducer 1: a consumer warpgroup passes a warpgroup barrier, then `elect { arrive empty; }`
# on a barrier of count 1. In CUDA each of the four warps elects a lane: four arrivals on count 1.

WARPGROUP_RELEASE = """\
protocol wg_release {
  cta threads 160;
  role prod = warp 4;
  role cons = warpgroup 0;
  named cb id 1 count 128;
  smem tile bytes 1024;
  mbarrier empty count 1;
  if prod { first thread { init empty; } }
  syncthreads;
  if cons {
    read tile;
    bar.sync cb;
    elect { arrive empty; }        // RELEASE
  }
  if prod {
    wait empty parity 0;
    write tile;
  }
}
"""


def test_elect_in_a_warpgroup_is_four_arrivals():
    assert runners(WARPGROUP_RELEASE) == [(f"cons.w{w}", 1) for w in range(4)]


@pytest.mark.parametrize("engine", ["explicit", "z3"])
def test_elect_by_a_warpgroup_on_count_1_is_flagged(engine):
    r = check(WARPGROUP_RELEASE, engine)
    # the second arrival lands in phase 1 before anyone observed phase 0
    assert r.verdict is Verdict.VIOLATION and "SV502" in errors(r), r.diagnostics


def test_elect_by_a_warpgroup_on_count_4_is_safe():
    assert check(WARPGROUP_RELEASE.replace("mbarrier empty count 1;", "mbarrier empty count 4;")).verdict \
        is Verdict.SAFE


def test_first_thread_of_a_warpgroup_on_count_1_is_safe():
    """CUTLASS's `if (warp_idx_in_warpgroup == 0 && elect_one_sync())`: one arrival per warpgroup."""
    text = WARPGROUP_RELEASE.replace("elect { arrive empty; }", "first thread { arrive empty; }")
    assert runners(text) == [("cons.w0", 1)]
    assert check(text).verdict is Verdict.SAFE


# A small twin for the bounded model checker (and SPIN): two consumer warps, count 1.
TWO_WARP_RELEASE = """\
protocol two_warp_release {
  cta threads 96;
  role cons = warps 0..2;
  role prod = warp 2;
  mbarrier empty count 1;
  if prod { first thread { init empty; } }
  syncthreads;
  if cons { elect { arrive empty; } }
  if prod { wait empty parity 0; }
}
"""


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_every_engine_counts_one_elected_lane_per_warp(engine):
    """Two warps' elected lanes arrive on a count-1 barrier: the second arrival lands in the next
    phase (SV502), which bmc may report as what it proves, SV506 (2 threads arrive per phase),
    beside whichever finding its counterexample ends at; counted as one lane per warp, count 2
    is safe."""
    found = errors(check(TWO_WARP_RELEASE, engine))
    assert found & {"SV502", "SV506"}, found
    assert check(TWO_WARP_RELEASE.replace("count 1;", "count 2;"), engine).verdict is Verdict.SAFE


@needs_spin
def test_promela_export_counts_one_elected_lane_per_warp(tmp_path: Path):
    outcomes = []
    for count in (1, 2):
        model = export_model(syncverify.load(TWO_WARP_RELEASE.replace("count 1;", f"count {count};")))
        spin = run_spin(model.text, tmp_path / f"spin{count}", timeout=60, memlim_mb=1024, depth=model.max_depth,
                        cc_flags=CC_FLAGS)
        outcomes.append(spin.verdict)
    assert outcomes == ["violation", "safe"]


# ---------------------------------------------------------------------------------------------
# Reproducer 2: `if !prod { elect { arrive m; } }`. Every warp that is not the producer elects a
# lane: three arrivals. The old rule chose CTA thread 0, which is in `prod` and never gets there.

NOT_PROD = """\
protocol not_prod {
  cta threads 128;
  role prod = warp 0;
  mbarrier m count 3;
  if prod { first thread { init m; } }
  syncthreads;
  if !prod { elect { arrive m; } }
  if prod { wait m parity 0; }
}
"""


def test_elect_under_a_negated_guard_arrives_once_per_executing_warp():
    assert runners(NOT_PROD) == [("cta.w1", 1), ("cta.w2", 1), ("cta.w3", 1)]


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_elect_under_a_negated_guard_is_not_a_deadlock(engine):
    assert check(NOT_PROD, engine).verdict is Verdict.SAFE


def test_first_thread_under_a_negated_guard_is_cta_thread_0_and_never_runs():
    """`if (!prod && threadIdx.x == 0)`: thread 0 is a producer thread, so nobody arrives."""
    text = NOT_PROD.replace("elect { arrive m; }", "first thread { arrive m; }")
    assert runners(text) == []
    assert "SV201" in errors(check(text))


# ---------------------------------------------------------------------------------------------
# Near twins that must stay as they were: a one-warp role elects exactly what `first thread` does.

ONE_WARP_PRODUCER = """\
protocol one_warp_producer {
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem tile bytes 1024;
  mbarrier full count 1;
  if producer { elect { init full; } }
  syncthreads;
  if producer { elect { arrive.expect_tx full bytes 1024; tma.load tile -> full; } }
  if consumer { wait full parity 0; read tile; }
}
"""


def test_one_warp_producer_with_elect_is_unchanged():
    assert runners(ONE_WARP_PRODUCER) == [("producer.w0", 1)]
    assert check(ONE_WARP_PRODUCER).verdict is Verdict.SAFE
    a = syncverify.load(ONE_WARP_PRODUCER)
    b = syncverify.load(ONE_WARP_PRODUCER.replace("elect {", "first thread {"))
    for pa, pb in zip(processes(a), processes(b), strict=True):
        ca, cb = compile_program(a, pa).code, compile_program(b, pb).code
        assert [(i.kind, i.threads, i.leader_only, i.line) for i in ca] == \
            [(i.kind, i.threads, i.leader_only, i.line) for i in cb]


def test_one_warp_producer_arriving_with_every_lane_is_caught():
    """The one-warp twin with every lane arriving: 32 arrivals on count 1."""
    text = ONE_WARP_PRODUCER.replace("elect { arrive.expect_tx full bytes 1024; tma.load tile -> full; }",
                                     "arrive.expect_tx full bytes 1024; elect { tma.load tile -> full; }")
    assert check(text).verdict is Verdict.VIOLATION


def test_per_warp_is_the_old_spelling_of_elect():
    text = WARPGROUP_RELEASE.replace("elect { arrive empty; }", "per warp { arrive empty; }")
    assert runners(text) == runners(WARPGROUP_RELEASE)
    assert errors(check(text)) == errors(check(WARPGROUP_RELEASE))


# ---------------------------------------------------------------------------------------------
# `first thread`: which thread, for each guard

ROLES = """\
protocol roles {
  cta threads 512;
  role producer = warp 1;
  role consumer[2] = warpgroup 1 + i;
  mbarrier m count 1;
  BODY
}
"""


_OWNER = {1: "producer", **{w: "consumer[0]" for w in range(4, 8)}, **{w: "consumer[1]" for w in range(8, 12)}}


@pytest.mark.parametrize("body, expected", [
    ("first thread { arrive m; }", [("cta.w0", 1)]),                                   # thread 0 of the CTA
    ("if producer { first thread { arrive m; } }", [("producer.w1", 1)]),              # thread 32
    ("if consumer { first thread { arrive m; } }", [("consumer[0].w4", 1), ("consumer[1].w8", 1)]),
    ("if consumer && instance == 1 { first thread { arrive m; } }", [("consumer[1].w8", 1)]),
    ("if consumer { elect { arrive m; } }", [("consumer[0].w4", 1), ("consumer[0].w5", 1), ("consumer[0].w6", 1),
                                             ("consumer[0].w7", 1), ("consumer[1].w8", 1), ("consumer[1].w9", 1),
                                             ("consumer[1].w10", 1), ("consumer[1].w11", 1)]),
    ("elect { arrive m; }", [(f"{_OWNER.get(w, 'cta')}.w{w}", 1) for w in range(16)]),   # every warp
])
def test_who_runs_the_block(body, expected):
    assert runners(ROLES.replace("BODY", body)) == expected


def test_first_thread_of_a_split_warp_role():
    """`first thread` is one thread, so a role that is part of a warp may use it."""
    text = ("protocol p { cta threads 64; role a = threads 8..16; mbarrier m count 1;\n"
            "  if a { first thread { init m; arrive m; } } }")
    assert runners(text) == [("a.t8-15", 1)]


def test_elect_by_part_of_a_warp_is_refused(tmp_path, capsys):
    """elect.sync with a full mask waits for all 32 lanes; the rest of the warp is another process."""
    text = ("protocol p {\n  cta threads 64;\n  role a = threads 8..16;\n  mbarrier m count 1;\n"
            "  if a { elect { init m; } }\n}\n")
    r = check(text)
    (d,) = r.diagnostics
    assert r.verdict is Verdict.ERROR
    assert (d.code, d.span.line, d.span.column) == ("SV116", 5, 10) and "first thread" in d.message
    path = tmp_path / "split.sync"
    path.write_text(text)
    rc = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out + err
    assert f"{path}:5:10: SV116 `elect` reached by a.t8-15" in out


def test_elect_by_the_whole_of_a_split_warp_outside_roles_is_refused_too():
    text = ("protocol p {\n  cta threads 32;\n  role a = threads 0..16;\n  mbarrier m count 1;\n"
            "  elect { init m; }\n}\n")
    assert [d.code for d in check(text).diagnostics] == ["SV116"]
    assert check(text.replace("elect {", "first thread {")).verdict is Verdict.SAFE


@pytest.mark.parametrize("text, message", [
    ("first thread { elect { } }", "`elect`/`first thread` inside another one"),
    ("elect { first thread { } }", "`elect`/`first thread` inside another one"),
    ("first thread { syncwarp; }", "`syncwarp` must be executed by every lane of a warp"),
])
def test_first_thread_nesting_and_collectives_are_refused(text, message):
    with pytest.raises(InputError) as info:
        syncverify.load(f"protocol p {{ cta threads 64; {text} }}")
    assert [d.code for d in info.value.diagnostics] == ["SV116"]
    assert message in info.value.diagnostics[0].message


def test_first_alone_is_a_syntax_error():
    with pytest.raises(InputError) as info:
        syncverify.load("protocol p { cta threads 64; first { } }")
    assert info.value.diagnostics[0].code == "SV100"


# ---------------------------------------------------------------------------------------------
# CUDA emitter and builder

def test_emitter_uses_elect_sync_for_elect_and_a_thread_index_for_first_thread():
    p = syncverify.load(WARPGROUP_RELEASE)
    src = emit(p).source
    assert "elect.sync _|p, 0xffffffff;" in src
    assert "if (sv_elect_sync()) {  // line 13: elect" in src
    assert "if (in_prod && c.tid == 128u) {  // line 8: first thread" in src
    first = emit(syncverify.load(WARPGROUP_RELEASE.replace("elect { arrive empty; }",
                                                           "first thread { arrive empty; }"))).source
    assert "if (sv_elect_sync())" not in first and "if (in_cons && c.tid == 0u) {  // line 13: first thread" in first


def test_builder_writes_each_construct():
    b = ProtocolBuilder("p")
    b.cta_threads(64)
    prod = b.role("prod", "warp", 0)
    m = b.mbarrier("m", count=1)
    with b.if_(prod), b.first_thread():
        b.init(m)
    with b.elect():
        b.arrive(m)
    with b.per_warp():
        b.arrive(m)
    lines = [ln.strip() for ln in b.source.splitlines()]
    assert "first thread {" in lines and lines.count("elect {") == 2 and "per warp {" not in lines
    body = b.build().body
    assert [s.per_warp for s in body if isinstance(s, ir.Elect)] == [True, True]
    assert not body[0].then[0].per_warp and body[0].then[0].role == "prod"
