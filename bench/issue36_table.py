"""Issue #36's table: every case its "Why" names, before and after in one run.

The issue measured (main at c1ac97d, 2026-12-05): a CUTLASS sm_90 ping-pong GEMM with cluster 1x2 and two
tiles per CTA, extracted from its PTX, with three seeded bugs (a deadlock, a race between the math
warpgroups at K=128 and K=64, an arrival-count bug); the 2x1 cooperative GEMM with a stage reused; the
ping-pong GEMMs with K symbolic (the 2x1 one's residue protocols, the 1x1 one); and two specs of real
kernels written from their sources (a TileLang warp-specialized kernel with four cp.async producer warps,
a CuTe-DSL 2-CTA blockscaled GEMM). This script runs each of them under the tree of ``--before`` and
under the working tree, alternating per case so that both see the same load, and writes one table:
states, states per CPU second, CPU s, peak MB, bytes per stored state, the verdict and, for a finding,
its code at its source line; then, per row of the working tree, which of the issue's targets hold, judged
against the issue's own figures for the case (`Row`): on an extracted GEMM the rate, and, where the issue
reports the case's states, how many times fewer states it takes now (the issue's alternative to the rate:
"or fewer states by the same factor — report both figures"); on the ping-pong family, the CPU and the peak
against the issue's where it gives them (20× and 1.5×); on a K-symbolic check, 5 minutes.

How a case is run, capped and measured is bench/search_speed.py's (`run_case`: one process per check,
RLIMIT_CPU, CPU from wait4, peak from ru_maxrss); this script only adds the cases and the columns.

Bytecode. Python compiles a module's source the first time it is imported and keeps the bytecode beside
it, as pip does at install time: a user's check reads it. So each tree is compiled once before its first
case (not timed) and the checks run with the bytecode cache, whatever PYTHONDONTWRITEBYTECODE says here.
``--compile-each-run`` measures as the sections before 2026-12-08 did, on this host's setting
(PYTHONDONTWRITEBYTECODE=1, and no bytecode beside the sources): every process compiles the modules it
imports, about 0.3 CPU s of a kernel's check. It reads none of syncverify's either: the trees' `__pycache__`
folders are removed first (the standard library's and the dependencies' bytecode, written at their install,
is read in both modes).

The ping-pong 1x2 GEMM is tests/data/ptx/sm90_gemm_pingpong_1x2.ptx.gz (CUTLASS 4.2 as it ships) at
128x256xK, the launch CUTLASS's host code computes for it (`--cutlass-problem`, ptx/cutlass_host.py); the
launch, Params fields and boxes are passed explicitly, so that a tree without `--cutlass-problem` checks
the same protocol. Its seeds are one-line edits of that PTX (every other line keeps its number):

* deadlock: the math warpgroups' order-barrier arrive after the mainloop removed (PTX line 2450,
  `OrderedSequenceBarrier::arrive`, barrier.h:511): the other warpgroup's turn never comes;
* race between the math warpgroups: the epilogue's order wait replaced by a true predicate (PTX line
  2523; the 1x1 build's twin is tests/test_ptx_pingpong.py's patch of line 2456);
* arrival count: the pipeline's empty barriers initialised with 3 arrivals, not 2 (PTX line 241,
  barrier.h:137 via sm90_pipeline.hpp:320): the producer waits for a release that never completes.

The issue's own seeded builds were not committed, so these are the repository's stand-ins for them.

Usage:
    nice -n 5 python3 bench/issue36_table.py --before c1ac97d            # adds a section to RESULTS-speed.md
    python3 bench/issue36_table.py --only "1x2" --before-cap 30 --after-cap 30 --out -
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_speed import (
    DATA,
    FAM,
    PARAM_FIELDS,
    PP_1X1,
    PP_1X1_BOXES,
    PP_2X1,
    PP_2X1_BOXES,
    ROOT,
    Case,
    Run,
    cases,
    command_line,
    publish,
    run_case,
    tree_at,
)

PP_1X2 = "sm90_gemm_pingpong_1x2.ptx"
# (PTX line, the line as shipped, the seeded line): see the module docstring
PP_1X2_SEEDS = {
    "deadlock": (2450, "\tmbarrier.arrive.shared::cta.b64 _, [%r45];", "\t// order arrive removed"),
    "race": (2523, "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r47], %r1221, %r566; ",
             "\tsetp.eq.u32 P1, 0, 0;"),
    "count": (241, "\tmov.u32 \t%r306, 2;", "\tmov.u32 \t%r306, 3;"),
}
# the Params fields with K (bytes 12..15) left out: tests/test_ptx_symbolic.py's GEMM_PARAMS
SYMBOLIC_FIELDS = [(0, 4), (4, 8), (16, 4), *PARAM_FIELDS[2:]]
SYMBOLIC_K = ("--symbolic", "0[12:4]>=64")


# the issue's rate target, and its "fewer states by the same factor": it measured about 2,000 states per CPU s
RATE_TARGET = 50_000
FEWER_STATES_TARGET = RATE_TARGET // 2_000


@dataclass(frozen=True)
class Row:
    """A case of the issue: what runs, the issue's own figure for it (as text, and the numbers its targets are
    judged against), and the working tree's CPU cap.

    ``issue_states``: the states the issue reports for the case, with ``states_at_least`` where its search had
    not finished (the count, and so the factor, is then a lower bound). ``issue_cpu_s``, ``issue_peak_mb``:
    its CPU seconds and peak where it gives them (``cpu_at_least`` likewise). ``extracted``: an extracted
    GEMM, of which the issue asks 50,000 states per CPU s or that many times fewer states; ``symbolic``: a
    K-symbolic check, whose target is 5 minutes, not 30 s; ``ping_pong``: the family the issue asks 20×
    faster and 1.5× less memory of."""

    case: Case
    issue: str
    after_cap: float
    issue_states: int | None = None
    states_at_least: bool = False
    issue_cpu_s: float | None = None
    cpu_at_least: bool = False
    issue_peak_mb: float | None = None
    extracted: bool = False
    symbolic: bool = False
    ping_pong: bool = False


def _pp1x2_ptx(scratch: Path, seed: str | None) -> Path:
    """The ping-pong 1x2 PTX as shipped, or with one seed's line edited."""
    out = scratch / (f"sm90_gemm_pingpong_1x2_{seed}.ptx" if seed else PP_1X2)
    if not out.exists():
        lines = gzip.decompress((DATA / f"{PP_1X2}.gz").read_bytes()).decode().split("\n")
        if seed:
            line, shipped, seeded = PP_1X2_SEEDS[seed]
            assert lines[line - 1] == shipped, (seed, lines[line - 1])
            lines[line - 1] = seeded
        out.write_text("\n".join(lines))
    return out


def _pp1x2_launch(scratch: Path, k: int) -> tuple[str, ...]:
    """The launch of the ping-pong 1x2 GEMM at 128x256xK as CUTLASS's host code computes it, spelled as
    explicit --grid/--block/--cluster/--dynamic-smem/--param/--tensor-bytes arguments."""
    from syncverify.ptx.cutlass_host import cutlass_include, host_launch
    from syncverify.ptx.extract import load_module, pick_kernel

    ptx = _pp1x2_ptx(scratch, None)
    includes = [p for p in [cutlass_include()] if p]
    mod = load_module(str(ptx), includes, ())
    fn = next(f for f in mod.entries() if f.name == pick_kernel(mod, None))
    host = host_launch(str(ptx), fn, includes, (128, 256, k, 1), None, quiet=True)
    blob = scratch / f"pp1x2_fields_128x256x{k}.bin"
    blob.write_bytes(host.image)
    out = ["--grid", "x".join(map(str, host.grid)), "--block", "x".join(map(str, host.block)),
           "--cluster", "x".join(map(str, host.cluster)), "--dynamic-smem", str(host.dynamic_smem)]
    for off, n, _ in host.fields:
        out += ["--param", f"0[{off}:{n}]=@{blob}"]
    for off, n, _ in host.boxes:
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return tuple(out)


def _symbolic_args(launch: list[str], fields: str, boxes: dict[int, int], grid: str) -> tuple[str, ...]:
    out = list(launch)
    out[out.index("--grid") + 1] = grid
    for off, n in SYMBOLIC_FIELDS:
        out += ["--param", f"0[{off}:{n}]=@{DATA / fields}"]
    for off, n in boxes.items():
        out += ["--tensor-bytes", f"0[{off}]={n}"]
    return (*out, *SYMBOLIC_K)


def rows(scratch: Path, long_cap: float, symbolic_cap: float) -> list[Row]:
    k128, k64 = _pp1x2_launch(scratch, 128), _pp1x2_launch(scratch, 64)
    by_name = {c.name: c for c in cases()}

    def pp(name: str, seed: str | None, launch: tuple[str, ...], *more: str) -> Case:
        return Case(name, str(_pp1x2_ptx(scratch, seed)), (*launch, *more))

    pp_family = {"extracted": True, "ping_pong": True}

    return [
        Row(pp("ping-pong 1x2 K=128 (two tiles per CTA)", None, k128),
            "safe, 154,261 states, 72 s CPU, 1.58 GB", long_cap, issue_states=154_261, issue_cpu_s=72,
            issue_peak_mb=1580, **pp_family),
        Row(pp("ping-pong 1x2 K=128, deadlock seed (order arrive removed)", "deadlock", k128),
            "deadlock at 70,034 states, 31 s CPU", long_cap, issue_states=70_034, issue_cpu_s=31, **pp_family),
        Row(pp("ping-pong 1x2 K=128, race seed (epilogue order wait removed)", "race", k128, "--fail-fast"),
            "not found in 600 s, 827,854 states", long_cap, issue_states=827_854, states_at_least=True,
            issue_cpu_s=600, cpu_at_least=True, **pp_family),
        Row(pp("ping-pong 1x2 K=64, race seed (epilogue order wait removed)", "race", k64, "--fail-fast"),
            "found after 354k states", long_cap, issue_states=354_000, **pp_family),
        Row(pp("ping-pong 1x2 K=128, arrival-count seed (empty count 3, not 2)", "count", k128),
            "search not finished at 1,068,527 states", long_cap, issue_states=1_068_527, states_at_least=True,
            **pp_family),
        Row(by_name["coop 2x1 K=448 (a stage reused)"], "safe, 581,288 states, 436 s CPU", long_cap,
            issue_states=581_288, issue_cpu_s=436, extracted=True),
        Row(Case("ping-pong 2x1, K symbolic (grid 2x2: one tile per CTA)", f"gz:{'sm90_gemm_pingpong_2x1.ptx'}",
                 _symbolic_args(PP_2X1, "sm90_gemm_pingpong_2x1_fields_256x128x128.bin", PP_2X1_BOXES, "2x2x1")),
            "one of its 16 residue protocols searched in 600 s", symbolic_cap, symbolic=True, **pp_family),
        Row(Case("ping-pong 1x1, K symbolic (grid 1x2: one tile per CTA)", "gz:sm90_gemm_pingpong_1x1.ptx",
                 _symbolic_args(PP_1X1, "sm90_gemm_pingpong_1x1_fields_128x128x128.bin", PP_1X1_BOXES, "1x2x1")),
            "not decided in 25 minutes", symbolic_cap, symbolic=True, **pp_family),
        Row(Case("TileLang warp-specialized, 4 cp.async producer warps", str(FAM / "tilelang_ws_cp_async.sync"), ()),
            "not decided in 60 s", long_cap),
        Row(Case("TileLang, seed: one producer's async arrive without .noinc", str(FAM / "tilelang_ws_cp_async.sync"),
                 ("-D", "SEED=1")), "", long_cap),
        Row(Case("CuTe-DSL 2-CTA blockscaled GEMM (12 warps a CTA)",
                 str(FAM / "cute_dsl_2cta_blockscaled_gemm.sync"), ()),
            "3.2 million states, 4.5 GB, 20 minutes, no answer", long_cap, issue_states=3_200_000,
            states_at_least=True, issue_peak_mb=4500),
        Row(Case("CuTe-DSL 2-CTA blockscaled GEMM, seed: scale-factor wait skipped",
                 str(FAM / "cute_dsl_2cta_blockscaled_gemm.sync"), ("-D", "SEED=1")), "", long_cap),
    ]


def _cell(run: Run, cap: float) -> list[str]:
    if not run.finished:
        verdict = f"not decided in {cap:.0f} s" if run.note == "CPU cap" or run.verdict == "inconclusive" \
            else f"{run.verdict} [{run.note}]"
    else:
        verdict = run.verdict + (f": {run.where}" if run.where else "")
    states = f"{run.states:,}" if run.states else "—"
    rate = f"{run.rate:,.0f}" if run.states else "—"
    bps = f"{run.bytes_per_state:,.0f}" if run.states and run.search_mb > 0 else "—"
    return [states, rate, f"{run.cpu_s:.1f}", f"{run.peak_mb:.0f}", bps, verdict]


def _times(factor: float, at_least: bool) -> str:
    return f"{'≥ ' if at_least else ''}{factor:,.0f}×" if factor >= 10 else f"{'≥ ' if at_least else ''}{factor:.1f}×"


def _targets(row: Row, run: Run, before: Run | None = None, before_name: str = "") -> str:
    """Which of the issue's targets the working tree's run meets, judged against the issue's own figures for the
    case: its time (30 CPU s a case, 5 minutes for a K-symbolic check) and memory (1 GB); on an extracted GEMM
    50,000 states per CPU s or 25 times fewer states than the issue reports (both figures shown; a lower bound
    where the issue's search had not finished); on the ping-pong family 20 times less CPU and 1.5 times less
    memory than the issue's figures for the case, where it gives them; 1 KB per stored state. Where the tree
    measured first (``before``) decided the case in the same run, the factors against it are judged too: the
    repository's seeded builds stand in for the issue's, which were not committed, and may be easier."""
    if not run.finished:
        return "not decided"
    limit, said = (300, "5 min") if row.symbolic else (30, "30 s")
    out = [f"≤ {said} CPU" if run.cpu_s <= limit else f"> {said} CPU", "≤ 1 GB" if run.peak_mb <= 1024 else "> 1 GB"]
    if row.extracted:
        rate = f"{run.rate:,.0f} st/s"
        if run.rate >= RATE_TARGET:
            out.append(f"{rate} (≥ 50k)")
        elif row.issue_states:
            fewer = row.issue_states / run.states
            verdict = "holds" if fewer >= FEWER_STATES_TARGET else "fails"
            out.append(f"{rate} (< 50k), {_times(fewer, row.states_at_least)} fewer states "
                       f"(≥ {FEWER_STATES_TARGET}×: {verdict})")
        else:
            out.append(f"{rate} (< 50k; the issue gives no states to compare)")
        if before is not None and before.finished and before.states and run.rate < RATE_TARGET:
            fewer = before.states / run.states
            out.append(f"{_times(fewer, False)} fewer states than {before_name} here "
                       f"(≥ {FEWER_STATES_TARGET}×: {'holds' if fewer >= FEWER_STATES_TARGET else 'fails'})")
    if row.ping_pong and row.issue_cpu_s:
        faster = row.issue_cpu_s / run.cpu_s
        out.append(f"{_times(faster, row.cpu_at_least)} less CPU than the issue's (≥ 20×: "
                   f"{'holds' if faster >= 20 else 'fails'})")
    if row.ping_pong and before is not None and before.finished:
        faster = before.cpu_s / run.cpu_s
        out.append(f"{_times(faster, False)} less CPU than {before_name} here (≥ 20×: "
                   f"{'holds' if faster >= 20 else 'fails'})")
    if row.issue_peak_mb:
        less = row.issue_peak_mb / run.peak_mb
        judged = f" (≥ 1.5×: {'holds' if less >= 1.5 else 'fails'})" if row.ping_pong else ""
        out.append(f"{_times(less, False)} less memory than the issue's{judged}")
    if run.search_mb <= 0:  # a --symbolic check reports no search memory of its own (several processes' worth)
        out.append("B/state not measured")
    elif run.states >= 10_000:  # below that the fixed tables dominate the growth of the resident set
        out.append("≤ 1 KB/state" if run.bytes_per_state <= 1024 else "> 1 KB/state")
    return ", ".join(out)


def table(measured: list[tuple[Row, Run, Run]], before_cap: float, before: str) -> list[str]:
    head = ["case", "the issue's figure"]
    head += [f"{h} ({before})" for h in ("states", "states/CPU s", "CPU s", "peak MB", "B/state", "verdict")]
    head += [f"{h} (after)" for h in ("states", "states/CPU s", "CPU s", "peak MB", "B/state", "verdict")]
    head += ["CPU ×", "peak ×", "targets (after)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, b, a in measured:
        ratio = mem = ""
        if a.finished and a.cpu_s > 0:
            ratio = f"{b.cpu_s / a.cpu_s:.2f}" if b.finished else f"> {b.cpu_s / a.cpu_s:.2f}"
            mem = f"{b.peak_mb / max(a.peak_mb, 1e-9):.2f}"
        out.append("| " + " | ".join([row.case.name, row.issue, *_cell(b, before_cap), *_cell(a, row.after_cap),
                                      ratio, mem, _targets(row, a, b, before)]) + " |")
    return out


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="c1ac97d", help="git ref of the tree measured first (default: main when "
                    "the work on #36 began)")
    ap.add_argument("--before-cap", type=float, default=120.0, help="CPU seconds per case under --before")
    ap.add_argument("--after-cap", type=float, default=300.0, help="CPU seconds per case under the working tree")
    ap.add_argument("--symbolic-cap", type=float, default=300.0, help="CPU seconds for the K-symbolic cases "
                    "under the working tree")
    ap.add_argument("--max-states", type=int, default=5_000_000, help="the search's state budget")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    ap.add_argument("--whole-periods", action="store_true", help="the K-symbolic cases under the working tree "
                    "with `--whole-periods` (the tree measured first runs them as it runs them)")
    ap.add_argument("--compile-each-run", action="store_true", help="no bytecode cache: every check compiles "
                    "the modules it imports (PYTHONDONTWRITEBYTECODE as this environment sets it)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-speed.md"),
                    help="Markdown file (the section goes before its first section), or - for stdout")
    args = ap.parse_args()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    load_before = _load()
    command = command_line("issue36_table.py")
    measured: list[tuple[Row, Run, Run]] = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "ptx"
        scratch.mkdir()
        base = tree_at(args.before, Path(tmp) / "before")
        if args.compile_each_run:  # none of syncverify's bytecode written, and none read
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            for tree in (base, ROOT):
                for cache in (tree / "syncverify").rglob("__pycache__"):
                    shutil.rmtree(cache)
        else:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
            for tree in (base, ROOT):
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "syncverify")], check=True)
        for row in rows(scratch, args.after_cap, args.symbolic_cap):
            if args.only not in row.case.name:
                continue
            before = run_case(row.case, base, scratch, args.before_cap, args.max_states)
            mine = row.case
            if args.whole_periods and "--symbolic" in mine.args:
                mine = dataclasses.replace(mine, args=(*mine.args, "--whole-periods"))
            after = run_case(mine, ROOT, scratch, row.after_cap, args.max_states)
            measured.append((row, before, after))
            print(" | ".join([row.case.name, *_cell(before, args.before_cap), *_cell(after, row.after_cap)]),
                  file=sys.stderr, flush=True)
    lines = [f"## {started} UTC: issue #36's table, every case of its \"Why\", before ({args.before}) and after",
             "", "```sh", command, "```", "",
             f"Load before: `{load_before}`; after: `{_load()}`. CPU caps: {args.before_cap:.0f} s under "
             f"{args.before}, {args.after_cap:.0f} s under the working tree ({args.symbolic_cap:.0f} s for the "
             f"K-symbolic cases); state budget {args.max_states:,}. "
             + ("Every check compiled the modules it imported (`--compile-each-run`)." if args.compile_each_run
                else "Each tree's modules compiled once before its first case, not timed (the bytecode a check "
                     "reads, as an installed package's)."), "",
             *table(measured, args.before_cap, args.before), ""]
    publish(args.out, "\n".join(lines), write_section)
    return 0


def write_section(path: Path, text: str) -> None:
    """The section goes first among the results: before the first `## ` section of ``path`` (a file that
    does not exist yet is written with the section alone)."""
    old = path.read_text() if path.exists() else ""
    at = old.find("\n## ")
    path.write_text(old[:at + 1] + text + "\n" + old[at + 1:] if at >= 0 else old + "\n" + text + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    sys.exit(main())
