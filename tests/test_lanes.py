"""Lane guards and warpgroup-wide wgmma (docs/language.md §6, §7.4; docs/model.md).

`if lane …` is decided per lane when a process's program is compiled; an operation whose
operands use `lane` runs once per lane. Some lanes of a warp publish only their own accesses
(program.own_part_hidden). The warps of a warpgroup share their wgmma-groups
(program.wgmma_teams): a warp's wgmma.wait retires every warp's reads in the groups it waits
for, so one signalling thread may release after it. Each rule is checked on the compiled
programs, by the explicit engine, by bmc, in the Promela export and in the emitted kernel.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_promela import CC_FLAGS, needs_spin

import syncverify
from syncverify import ir
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.diagnostics import InputError
from syncverify.export import export_model
from syncverify.export.spin import run_spin
from syncverify.result import Verdict
from syncverify.semantics.program import OP, compile_program, processes

SPECS = Path(__file__).resolve().parent.parent / "specs"


def check(text: str, engine: str = "explicit", **defines: int):
    return check_protocol(syncverify.load(text, defines, path="t.sync"), Options(engine=engine, timeout=300))


def errors(r) -> set[str]:
    return {d.code for d in r.diagnostics if d.severity.name == "ERROR"}


def arrivals(text: str) -> list[tuple[str, int, int, bool, str]]:
    """(process, lanes, threads, leader_only, target CTA expression) of every compiled arrive."""
    p = syncverify.load(text, path="t.sync")
    out = []
    for proc in processes(p):
        for ins in compile_program(p, proc).code:
            if ins.kind == OP and isinstance(ins.op, ir.MbarArrive):
                remote = ins.op.remote
                out.append((f"{proc.label()}@{proc.cta}", ins.lanes, ins.threads, ins.leader_only,
                            "" if remote is None else repr(getattr(remote, "value", remote))))
    return out


# ---------------------------------------------------------------------------------------------
# Compiling lane guards

RANKS = """\
protocol ranks {
  cluster 2;
  cta threads 32;
  mbarrier b count 2;
  first thread { init b; fence.mbarrier_init; }
  cluster.sync;
  if lane < 2 { arrive.release.cluster b @ lane; }
  cluster.sync;
}
"""


def test_an_operand_on_lane_runs_once_per_lane():
    got = [(who, lanes, threads, leader, target) for who, lanes, threads, leader, target in arrivals(RANKS)
           if who == "cta.w0@0"]
    assert got == [("cta.w0@0", 0b01, 1, True, "0"), ("cta.w0@0", 0b10, 1, False, "1")]


def test_an_operand_without_lane_runs_once_for_all_guarded_lanes():
    text = RANKS.replace("arrive.release.cluster b @ lane;", "arrive.release.cluster b @ 1 - cta;")
    text = text.replace("count 2", "count 3").replace("lane < 2", "lane >= 29")
    got = [(lanes, threads, leader) for who, lanes, threads, leader, _ in arrivals(text) if who == "cta.w0@0"]
    assert got == [(0b111 << 29, 3, False)]


def test_lane_zero_alone_is_the_leader_and_an_empty_guard_runs_nothing():
    text = RANKS.replace("if lane < 2 { arrive.release.cluster b @ lane; }",
                         "if lane == 0 { arrive b count 2; } if lane > 40 { arrive b; }")
    assert [(lanes, threads, leader) for who, lanes, threads, leader, _ in arrivals(text) if who == "cta.w0@0"] \
        == [(1, 1, True)]


def test_lane_ranks_are_safe_and_the_wrong_rank_hangs():
    assert check(RANKS).verdict is Verdict.SAFE
    wrong = check(RANKS.replace("@ lane;", "@ 0;"))  # CTA 0 gets four arrivals, CTA 1 none
    assert wrong.verdict is Verdict.VIOLATION and errors(wrong) & {"SV201", "SV502", "SV504"}, errors(wrong)


@pytest.mark.parametrize("body, code, what", [
    ("let x = lane;", "SV116", "`lane` in a `let` value"),
    ("for k in 0..lane { syncwarp; }", "SV109", "a loop bound must be a constant"),
    ("for k in 0..2 { if lane < k { arrive b; } }", "SV116", "a condition on `lane`"),
    ("if lane < 2 { wait b parity 0; }", "SV116", "by some lanes of cta.w0"),
    ("if lane < 2 { syncwarp; }", "SV116", "by some lanes of cta.w0"),
    ("if lane < 2 { elect { arrive b; } }", "SV116", "`elect` inside a lane guard"),
])
def test_what_lanes_cannot_do_is_refused_with_its_line(body, code, what, capsys, tmp_path):
    text = "protocol p {\n  cta threads 32;\n  mbarrier b count 2;\n  first thread { init b; }\n  syncthreads;\n" \
           f"  {body}\n}}\n"
    with pytest.raises(InputError) as err:
        for proc in processes(syncverify.load(text, path="t.sync")):
            compile_program(syncverify.load(text, path="t.sync"), proc)
    assert err.value.diagnostics[0].code == code and what in err.value.diagnostics[0].message
    assert err.value.diagnostics[0].span.line == 6
    spec = tmp_path / "p.sync"
    spec.write_text(text)
    assert main(["check", str(spec)]) == 2
    out = capsys.readouterr()
    assert "p.sync:6:" in out.out + out.err and "Traceback" not in out.out + out.err


def test_wgmma_by_some_lanes_is_sv206():
    text = (SPECS / "wgmma_release_after_wait.sync").read_text().replace(
        "      wgmma.read tile[s];", "      if lane < 16 { wgmma.read tile[s]; }")
    r = check(text, ITERS=1)
    assert "SV206" in errors(r)


# ---------------------------------------------------------------------------------------------
# The per-thread release rule

OWN_PART = """\
protocol own_part {
  cta threads 64;
  role w = warp 0;
  role r = warp 1;
  smem buf bytes 1024;
  mbarrier b count 1;
  if r { elect { init b; } }
  syncthreads;
  if w {
    write buf;
    SYNC
    if lane == WHO { arrive b; }
  }
  if r { wait b parity 0; read buf; }
}
"""


@pytest.mark.parametrize("engine", ["explicit", "bmc"])
@pytest.mark.parametrize("sync, who, verdict", [
    ("", 1, Verdict.VIOLATION),          # lane 1 releases only its own part of the warp's write
    ("", 0, Verdict.VIOLATION),          # so does lane 0
    ("syncwarp;", 0, Verdict.SAFE),      # after __syncwarp lane 0 holds every lane's part
    ("syncwarp;", 1, Verdict.SAFE),      # ... and so does every other lane (PTX bar.warp.sync)
])
def test_a_lane_publishes_its_own_part_only(engine, sync, who, verdict):
    r = check(OWN_PART.replace("SYNC", sync).replace("WHO", str(who)), engine)
    assert r.verdict is verdict, (r.verdict, errors(r))
    if verdict is Verdict.VIOLATION:
        assert errors(r) == {"SV301"}


@pytest.mark.parametrize("engine", ["explicit", "z3", "bmc"])
def test_a_syncwarp_orders_only_the_accesses_before_it(engine):
    """A write by the whole warp after the syncwarp is again published lane by lane: lane 1's
    release covers its own part only (SV301), while the same write before the syncwarp is covered
    (the syncwarp marks the records it ordered, not the process)."""
    after = OWN_PART.replace("    write buf;\n    SYNC\n", "    syncwarp;\n    write buf;\n").replace("WHO", "1")
    assert errors(check(after, engine)) == {"SV301"}
    before = OWN_PART.replace("SYNC", "syncwarp;").replace("WHO", "1")
    assert check(before, engine).verdict is Verdict.SAFE


def test_lanes_that_made_an_access_publish_it_together():
    text = OWN_PART.replace("    write buf;\n", "    if lane < 4 { write buf; }\n").replace("SYNC", "")
    text = text.replace("if lane == WHO { arrive b; }", "if lane < 4 { arrive b; }").replace("count 1", "count 4")
    assert check(text).verdict is Verdict.SAFE
    fewer = text.replace("if lane < 4 { arrive b; }", "if lane < 2 { arrive b count 2; }")
    assert errors(check(fewer)) == {"SV301"}


# ---------------------------------------------------------------------------------------------
# Warpgroup-wide wgmma and the new specs, on every engine

NEW_SPECS = ["cutlass_consumer_release_warpgroup", "cutlass_consumer_release_warpgroup_early",
             "cutlass_consumer_release_multicast", "cutlass_consumer_release_multicast_early",
             "deepgemm_lane_rank_release", "deepgemm_lane_rank_release_wrong_rank",
             "lane_reduction_reads", "lane_reduction_reads_one_release",
             "lane_last_release_syncwarp", "lane_last_release_no_syncwarp"]


@pytest.mark.parametrize("name", NEW_SPECS)
def test_new_specs_match_their_headers(name):
    path = SPECS / f"{name}.sync"
    head = path.read_text().splitlines()[0].removeprefix("// expect:").replace(",", " ").split()
    r = check_protocol(syncverify.load(str(path)), Options(engine="explicit", timeout=300))
    assert errors(r) == (set() if head == ["safe"] else set(head)), errors(r)


def test_one_signalling_thread_releases_after_the_warpgroup_wide_wait():
    """Thread 0's release after warpgroup_wait covers the wgmma reads of all four warps; before the
    wait it covers none of them (SV302); and a wait for an older group only (`wgmma.wait 1`) does
    not cover the group just committed."""
    text = (SPECS / "cutlass_consumer_release_warpgroup.sync").read_text()
    assert check(text).verdict is Verdict.SAFE
    assert errors(check((SPECS / "cutlass_consumer_release_warpgroup_early.sync").read_text())) == {"SV302"}
    assert errors(check(text.replace("wgmma.wait 0;  ", "wgmma.wait 1;  "))) == {"SV302"}


def test_each_warpgroup_is_its_own_team():
    """Two consumer warpgroups, one signalling thread each (count 2): safe; when warpgroup 1 releases
    before its wait, warpgroup 0's wait does not cover warpgroup 1's reads (SV302 on warp 4's)."""
    text = (SPECS / "cutlass_consumer_release_warpgroup.sync").read_text()
    for old, new in (("cta threads 160;", "cta threads 288;"), ("role consumer = warpgroup 0;", "role consumer[2] = "
                     "warpgroup i;"), ("role producer = warp 4;", "role producer = warp 8;"),
                     ("empty[STAGES] count 1;", "empty[STAGES] count 2;")):
        assert old in text
        text = text.replace(old, new)
    assert check(text, ITERS=3).verdict is Verdict.SAFE
    early = text.replace("""      wgmma.wait 0;                              // warpgroup_wait<0>
      first thread { arrive empty[s]; }          // consumer_release: the signalling thread""",
                         """      if instance == 1 { first thread { arrive empty[s]; } }
      wgmma.wait 0;
      if instance == 0 { first thread { arrive empty[s]; } }""")
    r = check(early, ITERS=3)
    assert errors(r) == {"SV302"} and "consumer[1].w4" in r.diagnostics[0].message


# The explicit engine and bmc on the reproducers, at params where the bug shows (a stage reused).
CROSS = [("cutlass_consumer_release_warpgroup", {"ITERS": 2, "STAGES": 1}),
         ("cutlass_consumer_release_warpgroup_early", {"ITERS": 2, "STAGES": 1}),
         ("lane_reduction_reads", {"ITERS": 2}),
         ("lane_reduction_reads_one_release", {"ITERS": 2}),
         ("lane_last_release_syncwarp", {"ITERS": 2, "STAGES": 1}),
         ("lane_last_release_no_syncwarp", {"ITERS": 2, "STAGES": 1}),
         ("deepgemm_lane_rank_release", {"ITERS": 1, "STAGES": 1}),
         ("deepgemm_lane_rank_release_wrong_rank", {"ITERS": 2, "STAGES": 1})]


@pytest.mark.slow
@pytest.mark.parametrize("name, defines", CROSS, ids=[c[0] for c in CROSS])
def test_bmc_agrees_on_the_new_specs(name, defines):
    if not os.environ.get("SYNCVERIFY_SLOW"):
        pytest.skip(f"the solver needs minutes on {name} at these params; run with SYNCVERIFY_SLOW=1 (the specs "
                    "at loop params 1 are cross-checked in tests/test_bmc.py)")
    protocol = syncverify.load(str(SPECS / f"{name}.sync"), defines)
    ref = check_protocol(protocol, Options(engine="explicit", timeout=300))
    res = check_protocol(protocol, Options(engine="bmc", timeout=1800))
    assert res.verdict is ref.verdict, (res.coverage, errors(res), errors(ref))
    assert errors(res) <= errors(ref)


@needs_spin
@pytest.mark.parametrize("name, defines", CROSS[:6], ids=[c[0] for c in CROSS[:6]])
def test_spin_agrees_on_the_new_specs(name, defines, tmp_path):
    protocol = syncverify.load(str(SPECS / f"{name}.sync"), defines)
    ref = check_protocol(protocol, Options(engine="explicit", timeout=300))
    model = export_model(protocol)
    spin = run_spin(model.text, tmp_path / name, timeout=300, memlim_mb=1024, depth=model.max_depth,
                    cc_flags=CC_FLAGS)
    assert spin.verdict == ref.verdict.value, spin.detail
