"""Run the CUTLASS sm_90 cooperative GEMM and its seeded bugs on a Hopper GPU, from the checked PTX.

    python3 bench/cutlass_gpu/cutlass_run.py [--build build/cutlass] [--only NAME,...] [--runs N]
                                             [--deadline S] [--gdb] [--out DIR]

Everything it runs is built beforehand on any machine by bench/cutlass_gpu/build.sh: a cubin of each PTX
the checker verified (ptxas of that very PTX, so the GPU runs what was checked) and the host programs
gemm_run_1x1/gemm_run_2x1/gemm_run_1x1_s2, whose Params and TMA descriptors come from CUTLASS's own host
code at run time. `--only` takes names, or prefixes ending in `_` (`--only s2_`: the two-stage 1x1 kernel and
its seeds); build.sh puts what those need alone in build/cutlass/s2, so the GPU machine can be given just that:
    python3 bench/cutlass_gpu/cutlass_run.py --build build/cutlass/s2 --only s2_ --gdb --out "$OUT"
It imports only the standard library (no z3, no lark), so it runs on a GPU machine that lacks the checker.

Each variant runs in its own process with a deadline of its own: a hung kernel poisons its CUDA context, and
the host program exits at its deadline without waiting for the GPU. With --gdb, each variant that hung is
run once more under cuda-gdb, which stops it at the deadline (the host program raises SIGINT there) and
prints, for each range of threads of each CTA, the source line it is at (`info cuda threads`), so the
place each warp waits can be compared with the checker's counterexample (the PCs are looked up in
nvdisasm's inlined line table, which names the CUTLASS call site of each wait). Prints one JSON line per variant,
with the checker's verdict on that build at that size beside it (from bench/cutlass_gpu/checks/, made by
check.sh) and, for a hang, which of the counterexample's blocked waits each warp's call sites name; it writes
the same lines and the debugger logs under --out, in at most five files. With --sanitize, one launch of each
variant that cannot hang runs under each compute-sanitizer tool named (racecheck, synccheck, memcheck), and
the record gets each tool's summary and first reports (the whole logs go to sanitizer.log).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@dataclass(frozen=True)
class Variant:
    """One kernel build at one problem size, and what the checker says of it (for the reader of the record)."""

    name: str
    cluster: str  # "1x1", "2x1" or "1x1_s2": which host program, gemm_run_<cluster> (the Params type differs)
    ptx: str  # the stem of the PTX/cubin in the build directory
    mnk: tuple[int, int, int]
    bug: str  # "none", "race" or "deadlock": what the seeded edit can do
    note: str
    check: str = ""  # bench/cutlass_gpu/checks/<check>.json: the checker on this PTX at this size, if run
    host: str = ""  # the host program's suffix when it is not the cluster's (gemm_run_<host>)
    sms: int = 0  # the SM count the tile scheduler is given (the checked launch's), else the device's


GOOD = "sm90_gemm_coop_2x1"
S2 = "sm90_gemm_coop_1x1_s2"
VARIANTS: tuple[Variant, ...] = (
    Variant("coop_1x1", "1x1", "sm90_gemm_coop_1x1", (256, 128, 128), "none",
            "the checked launch: 1x1 cluster, one 128x128 tile per CTA, two k-tiles"),
    Variant("coop_2x1", "2x1", GOOD, (256, 128, 128), "none", "the checked launch: cluster 2x1, two k-tiles"),
    Variant("coop_2x1_k512", "2x1", GOOD, (256, 128, 512), "none",
            "the unseeded twin of the seeds at K=512 (8 k-tiles, 6 stages: stages reused)"),
    Variant("seed1_consumer_wait_skipped", "2x1", GOOD + "_seed1", (256, 128, 128), "race",
            "checker: SV301 at copy_sm90_tma.hpp:185 at this launch"),
    Variant("seed1_consumer_wait_skipped_k512", "2x1", GOOD + "_seed1", (256, 128, 512), "race", "as above, K=512"),
    Variant("seed2_producer_acquire_skipped", "2x1", GOOD + "_seed2", (256, 128, 512), "race",
            "a stage is overwritten while the consumers read it; needs a reused stage (K >= 448)"),
    Variant("seed3_arrival_count_plus_one", "2x1", GOOD + "_seed3", (256, 128, 512), "deadlock",
            "the empty barriers never complete: the producer's first reuse of a stage waits forever"),
    Variant("seed3_arrival_count_plus_one_k128", "2x1", GOOD + "_seed3", (256, 128, 128), "deadlock",
            "at the checked launch: no stage is reused, the deadlock is at the producer's load_tail"),
    Variant("seed4_cluster_sync_removed", "2x1", GOOD + "_seed4", (256, 128, 128), "race",
            "checker: SV402 at copy_sm90_tma.hpp:705, SV401 at barrier.h:470 (peer's init may come late)"),
    Variant("seed5_release_before_wait", "2x1", GOOD + "_seed5", (256, 128, 512), "race",
            "the stage is released while the wgmma reading it may still run; needs a reused stage"),
    # K=2048 (32 k-tiles: each stage reused five times) gives the races more chances; not checked at this size
    Variant("coop_2x1_k2048", "2x1", GOOD, (256, 128, 2048), "none", "the unseeded twin at K=2048"),
    Variant("seed2_producer_acquire_skipped_k2048", "2x1", GOOD + "_seed2", (256, 128, 2048), "race",
            "seed 2 with more stage reuse (not checked at this size)"),
    Variant("seed5_release_before_wait_k2048", "2x1", GOOD + "_seed5", (256, 128, 2048), "race",
            "seed 5 with more stage reuse (not checked at this size)"),
    # The 1x1 GEMM with two mainloop stages (sm90_gemm_coop_1x1.cu -DSV_STAGES=2): a stage is reused from the
    # third k-tile on, so at K=192 the seeds that need a reused stage are decided by the checker
    # (tests/test_ptx_cutlass.py). The seeds are one PTX with the `sv_seed` constant rewritten (build.sh).
    Variant("s2_coop_1x1", "1x1_s2", S2, (256, 128, 192), "none",
            "two stages, three k-tiles: the checked launch of the seeds' unseeded twin", "s2_coop_1x1"),
    Variant("s2_seed2_producer_acquire_skipped", "1x1_s2", S2 + "_seed2", (256, 128, 192), "race",
            "the third k-tile's copy refills stage 0 while the first k-tile's wgmma reads it",
            "s2_seed2_producer_acquire_skipped"),
    Variant("s2_seed3_arrival_count_plus_one", "1x1_s2", S2 + "_seed3", (256, 128, 192), "deadlock",
            "the producer's wait for stage 0 to be released never ends (256 of 257 arrivals)",
            "s2_seed3_arrival_count_plus_one"),
    Variant("s2_seed5_release_before_wait", "1x1_s2", S2 + "_seed5", (256, 128, 192), "race",
            "stage 0 is released before warpgroup_wait: its refill may start under the wgmma still reading it",
            "s2_seed5_release_before_wait"),
    # K=2048: 32 k-tiles, each of the two stages reused 15 times, so the races have more chances to show
    Variant("s2_coop_1x1_k2048", "1x1_s2", S2, (256, 128, 2048), "none", "the unseeded twin at K=2048",
            "s2_coop_1x1_k2048"),
    Variant("s2_seed2_producer_acquire_skipped_k2048", "1x1_s2", S2 + "_seed2", (256, 128, 2048), "race",
            "seed 2 with every stage reused 15 times", "s2_seed2_producer_acquire_skipped_k2048"),
    Variant("s2_seed5_release_before_wait_k2048", "1x1_s2", S2 + "_seed5", (256, 128, 2048), "race",
            "seed 5 with every stage reused 15 times", "s2_seed5_release_before_wait_k2048"),
    # Seed 6 is in CUTLASS's host code: make_tma_copy_desc encodes B's multicast box whole (16 KiB) instead of
    # each CTA's 8 KiB slice. The kernel is the unseeded 2x1 cubin; only its Params' tensor map differs.
    Variant("seed6_b_box_unsliced", "2x1", GOOD, (256, 128, 128), "race",
            "B's box encoded whole: the two CTAs' multicast copies overlap and 48 KiB reach each full barrier "
            "against the 32 KiB of expect_tx; the checker with --tensor-bytes 0[384]=16384: SV303 at "
            "copy_sm90_tma.hpp:705 (bench/RESULTS-ptx.md)", "seed6_b_box_unsliced", host="2x1_seed6"),
    # The ping-pong GEMM (KernelTmaWarpSpecializedPingpong, tile 64x128x64), checked at M=N=K=128 with one SM
    # (docs/extract.md): one CTA whose two consumer warpgroups take one tile each, as the checker saw it.
    Variant("pingpong_1x1", "pp1x1", "sm90_gemm_pingpong_1x1", (128, 128, 128), "none",
            "the checked launch: one CTA, the two consumer warpgroups on one tile each", sms=1),
    Variant("pingpong_1x1_k2048", "pp1x1", "sm90_gemm_pingpong_1x1", (128, 128, 2048), "none",
            "the same CTA with 32 k-tiles (stages reused; not checked at this size)", sms=1),
    Variant("pingpong_2x1", "pp2x1", "sm90_gemm_pingpong_2x1", (256, 128, 128), "none",
            "cluster 2x1, one cluster: each CTA's two warpgroups on one tile each", sms=2),
)


def parse_record(stdout: str) -> dict | None:
    """The last JSON object line the host program printed (it prints one), or None."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def selected(name: str, only: str) -> bool:
    """Whether --only picks the variant: every one when empty, else a listed name, or a prefix ending in `_`."""
    picks = [p for p in only.split(",") if p]
    return not picks or any(name == p or (p.endswith("_") and name.startswith(p)) for p in picks)


def host_command(build: str, v: Variant, runs: int, deadline_s: float) -> list[str]:
    m, n, k = v.mnk
    return [os.path.join(build, f"gemm_run_{v.host or v.cluster}"), os.path.join(build, v.ptx + ".cubin"), v.name,
            str(m), str(n), str(k), str(runs), str(deadline_s), *([str(v.sms)] if v.sms else [])]


def summarize(rec: dict) -> dict:
    """The host record with its per-launch list folded: launch times, the largest error and wrong count, and
    the first few launches that were not clean (the whole list stays in the raw record)."""
    runs = rec.pop("runs", None)
    if not runs:
        return rec
    ms = sorted(r["ms"] for r in runs)
    rec["median_ms"] = ms[len(ms) // 2]
    rec["max_err"] = max(r["max_err"] for r in runs)
    rec["max_wrong"] = max(r["wrong"] for r in runs)
    bad = [dict(r, run=i + 1) for i, r in enumerate(runs) if r["outcome"] != "completed"]
    if bad:
        rec["first_corrupt"] = bad[:3]
    return rec


def run_variant(build: str, v: Variant, runs: int, deadline_s: float) -> dict:
    """Runs the variant in a child process killed at a deadline of its own (startup allowed for)."""
    cmd = host_command(build, v, runs, deadline_s)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + runs * (deadline_s + 2))
    except subprocess.TimeoutExpired as e:  # the host program's own deadline did not fire: record, never wait
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rec = parse_record(out) or {"variant": v.name, "outcome": "hung", "note": "killed by the runner"}
        rec["wall_s"] = round(time.monotonic() - t0, 2)
        return rec
    rec = parse_record(p.stdout) or {"variant": v.name, "outcome": "error", "error": p.stderr[-2000:]}
    rec["rc"] = p.returncode
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    return rec


THREADS_RE = re.compile(
    r"^\*?\s*\((\d+,\d+,\d+)\)\s+\((\d+),\d+,\d+\)\s+\((\d+,\d+,\d+)\)\s+\((\d+),\d+,\d+\)\s+(\d+)\s+"
    r"(0x[0-9a-f]+)\s+(\S+)\s+(\d+)\s*$", re.M)
XI_RE = re.compile(r"=> (0x[0-9a-f]+) <([^+>]+)\+(\d+)>")
SECTION_RE = re.compile(r"^\s*\.section\s+\.text\.(\S+?),", re.M)
OFFSET_RE = re.compile(r"/\*([0-9a-f]{4,})\*/")


def gdb_script(blocks: list[tuple[int, int, int]], warps: int) -> list[str]:
    """cuda-gdb commands: run to the host's SIGINT at the deadline, then where every thread is.

    `info cuda threads` gives each range of threads with the same PC and its innermost source line;
    `x/i $pc` in each warp gives the PC as function + offset, from which the offset of every PC follows,
    to be looked up in nvdisasm's inlined line table (with -lineinfo, cuda-gdb's own backtrace shows one
    inlined level only: all waits are the same ClusterBarrier::wait loop there)."""
    cmds = ["set pagination off", "set confirm off", "set print frame-arguments none", "run",
            "info cuda kernels", "info cuda threads", "x/i $pc", "info cuda warps"]
    for x, y, z in blocks:
        for w in range(warps):
            cmds += [f"echo @@ cta {x},{y},{z} warp {w}\\n", f"cuda block ({x},{y},{z}) thread ({32 * w},0,0)",
                     "x/i $pc"]
    cmds += ["echo @@ end\\n", "kill", "quit"]
    return cmds


def thread_ranges(log: str) -> list[dict]:
    """The rows of `info cuda threads`: CTA (x, or "x,y,z" where y or z is not 0: the 1x1 GEMM's grid is
    1x2x1), thread range, count, PC and innermost file:line."""
    rows = []
    for m in THREADS_RE.finditer(log):
        b0, t0, b1, t1, count, pc, file, line = m.groups()
        cta: int | str = int(b0.split(",")[0]) if b0.endswith(",0,0") else b0
        rows.append({"cta": cta, "threads": f"{t0}-{t1}" if (b0, t0) != (b1, t1) else t0,
                     "count": int(count), "pc": pc, "line": f"{file}:{line}"})
    return rows


def pc_offsets(log: str) -> dict[str, tuple[str, int]]:
    """PC -> (function, offset) for each `x/i $pc` the log shows, and for every PC of `info cuda threads` in
    the same function (same base address)."""
    known = {pc: (fn, int(off)) for pc, fn, off in XI_RE.findall(log)}
    bases = {fn: int(pc, 16) - off for pc, (fn, off) in known.items()}
    if len(bases) == 1:
        (fn, base), = bases.items()
        for row in thread_ranges(log):
            known.setdefault(row["pc"], (fn, int(row["pc"], 16) - base))
    return known


LINEINFO_RE = re.compile(r'//##\s*File "([^"]+)", line (\d+)')
LABEL_RE = re.compile(r"^\s*(\.L_\w+):")
BRANCH_RE = re.compile(r"BRA\s+`\((\.L_\w+)\)")


@dataclass(frozen=True)
class Insn:
    """One instruction of `nvdisasm -c -gi`: its offset and text, the call sites of the line info in force
    there (innermost first, one per `//##` line of the block nvdisasm printed last), whether that block was
    printed right before it, and the labels that name it."""

    offset: int
    text: str
    sites: tuple[str, ...]
    fresh: bool
    labels: tuple[str, ...]


def parse_sass(disasm: str) -> dict[str, list[Insn]]:
    """The instructions of each function (`.text.NAME` section) of an nvdisasm -c -gi listing."""
    out: dict[str, list[Insn]] = {}
    fn, sites, block, fresh, labels = "", (), [], False, []  # type: ignore[var-annotated]
    for line in disasm.splitlines():
        sec = SECTION_RE.match(line)
        if sec:
            fn, sites, block, fresh, labels = sec.group(1), (), [], False, []
            out.setdefault(fn, [])
            continue
        info = LINEINFO_RE.search(line)
        if info:
            block.append(f"{info.group(1)}:{info.group(2)}")
            continue
        lab = LABEL_RE.match(line)
        if lab:
            labels.append(lab.group(1))
            continue
        off = OFFSET_RE.search(line)
        if off and fn:
            if block:
                sites, block, fresh = tuple(block), [], True
            out[fn].append(Insn(int(off.group(1), 16), line.split("*/", 1)[-1].strip(), sites, fresh,
                                tuple(labels)))
            fresh, labels = False, []
    return out


def call_sites(insns: list[Insn], offset: int) -> tuple[tuple[str, ...], str]:
    """The CUTLASS call sites of the instruction at OFFSET, innermost first, and how they were found.

    ptxas moves the slow path of a wait loop (the retry after a failed try_wait) out of line, to the end of
    the function, where nvdisasm prints no line info of its own: the line in force there belongs to whatever
    came before. So a PC in such a block (no line info printed since the previous unconditional branch or
    exit) takes the call sites of the branch that jumps to it from elsewhere -- the wait it retries."""
    idx = next((i for i, x in enumerate(insns) if x.offset == offset), None)
    if idx is None:
        return (), "offset not in the disassembly"
    j = idx
    while j > 0 and not re.match(r"^(BRA|EXIT)\b", insns[j - 1].text):
        j -= 1
    if any(x.fresh for x in insns[j:idx + 1]):
        return insns[idx].sites, "line info at the PC"
    k = idx  # the block runs on to its unconditional branch back (the retry loop's own branches are in it)
    while k + 1 < len(insns) and not re.match(r"^(BRA|EXIT)\b", insns[k].text):
        k += 1
    names = {lab for x in insns[j:idx + 1] for lab in x.labels}
    inside = {x.offset for x in insns[j:k + 1]}
    for x in insns:
        m = BRANCH_RE.search(x.text)
        if m and m.group(1) in names and x.offset not in inside:
            return x.sites, f"out-of-line retry of the wait branching at {hex(x.offset)}"
    return insns[idx].sites, "line info in force (no branch into the block found)"


def disasm_excerpts(disasm: str, wanted: set[tuple[str, int]], before: int = 12) -> dict[tuple[str, int], str]:
    """The nvdisasm lines up to and including each wanted instruction (its line-info comments among them),
    for the record: the comment format is nvdisasm's, not parsed beyond `//##`."""
    lines = disasm.splitlines()
    out: dict[tuple[str, int], str] = {}
    fn = ""
    for i, line in enumerate(lines):
        sec = SECTION_RE.match(line)
        if sec:
            fn = sec.group(1)
            continue
        off = OFFSET_RE.search(line)
        if off and (fn, int(off.group(1), 16)) in wanted:
            out[(fn, int(off.group(1), 16))] = "\n".join(lines[max(0, i - before):i + 1])
    return out


def where_threads_wait(log: str, cubin: str, out_dir: str, name: str) -> list[dict]:
    """Each range of threads of `info cuda threads` with its innermost line and, where nvdisasm is there,
    the line info of its PC with every inlined call site (which CUTLASS function's wait it is); the
    disassembly around each PC is appended to sass.txt."""
    rows = thread_ranges(log)
    offsets = pc_offsets(log)
    nvdisasm = shutil.which("nvdisasm")
    if not (nvdisasm and rows):
        return rows
    p = subprocess.run([nvdisasm, "-c", "-gi", cubin], capture_output=True, text=True, timeout=120)
    sass = parse_sass(p.stdout)
    excerpts = disasm_excerpts(p.stdout, set(offsets.values()))
    with open(os.path.join(out_dir, "sass.txt"), "a", encoding="utf-8") as fh:
        for (fn, off), text in sorted(excerpts.items(), key=lambda kv: kv[0][1]):
            fh.write(f"==== {name}: {hex(off)} in {fn[:60]}...\n{text}\n")
        if p.returncode:
            fh.write(f"==== {name}: nvdisasm exit {p.returncode}: {p.stderr[-2000:]}\n")
    for row in rows:
        fn_off = offsets.get(row["pc"])
        if fn_off:
            row["offset"] = hex(fn_off[1])
            if fn_off[0] in sass:
                row["sites"], row["how"] = call_sites(sass[fn_off[0]], fn_off[1])
    return rows


def grid_blocks(grid: list[int] | None) -> list[tuple[int, int, int]]:
    """Every CTA of the grid the host program reported (M=256 N=128 in 128x128 tiles: two CTAs, 2x1x1 for
    the 2x1 cluster, 1x2x1 for the two-stage 1x1 kernel); two along x where the record has no grid."""
    gx, gy, gz = grid if grid and len(grid) == 3 else (2, 1, 1)
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


CHECKS = os.path.join(HERE, "checks")


def checker_says(v: Variant, checks: str = CHECKS) -> dict | None:
    """The checker's verdict on the variant's PTX at its size (check.sh's JSON): verdict, search time, and
    each diagnostic's code and the start of its message; None where no check was recorded."""
    path = os.path.join(checks, v.check + ".json") if v.check else ""
    if not (path and os.path.exists(path)):
        return None
    with open(path, encoding="utf-8") as fh:
        res = json.load(fh)["results"][0]
    out = {"verdict": res["verdict"], "seconds": (res.get("stats") or {}).get("seconds")}
    if res.get("stopped_by"):
        out["stopped_by"] = res["stopped_by"]
    out["diagnostics"] = [f"{d['code']} line {d['line']}: {d['message'][:120]}" for d in res.get("diagnostics", [])]
    return out


LAUNCH_RE = re.compile(r"--grid (\d+)x(\d+)x(\d+) --block (\d+)x1x1 .*--dynamic-smem (\d+)")


def agreement(v: Variant, rec: dict) -> str:
    """What the run says of the seeded bug, in the batch's words: AGREES where the hardware shows what the
    build was seeded with (a hang for a deadlock; wrong data, a fault or a hang for a race), NOT FORCED for a
    race that every launch ran past (a compiled CUTLASS kernel has no replay hooks to force the order the
    counterexample names), DISAGREES for a correct build that did not complete exactly or a deadlock that
    completed."""
    out = rec.get("outcome")
    runs = rec.get("completed_runs", 0) + rec.get("corrupt_runs", 0)
    if v.bug == "none":
        return "AGREES (safe: completed exactly)" if out == "completed" else f"DISAGREES (safe, but {out})"
    if v.bug == "deadlock":
        if out == "hung":
            waits = rec.get("waits_vs_counterexample")
            where = "" if waits is None else (" at the counterexample's waits" if waits.get("agree")
                                              else ", not at the counterexample's waits")
            return f"AGREES (hang{where})"
        return f"DISAGREES (deadlock, but {out})"
    if out in ("corrupt", "fault", "hung"):
        return f"AGREES (race: {out})"
    if out == "completed":
        return (f"NOT FORCED (race: {runs} launches completed exactly; the compiled kernel has no hook to "
                "force the counterexample's order)")
    return f"DISAGREES ({out})"


def checked_launch(v: Variant, checks: str = CHECKS) -> dict | None:
    """The launch the checker was given for the variant (its check.sh line in checks/commands.txt: grid,
    block, dynamic shared memory, all from CUTLASS's host code with the kernel's own defines); the last
    line of the check wins. None where there is none."""
    path = os.path.join(checks, "commands.txt")
    if not (v.check and os.path.exists(path)):
        return None
    found = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = LAUNCH_RE.search(line) if line.startswith(v.check + ": ") else None
            if m:
                gx, gy, gz, block, smem = (int(x) for x in m.groups())
                found = {"grid": [gx, gy, gz], "block": block, "smem": smem}
    return found


def launch_as_checked(rec: dict, v: Variant, checks: str = CHECKS) -> bool | None:
    """Whether the host program launched the grid, block and shared memory the checker verified (so the
    Params type, and with it the stage count, is the checked kernel's); None where either is unknown."""
    want = checked_launch(v, checks)
    if want is None or "grid" not in rec:
        return None
    return rec["grid"] == want["grid"] and rec.get("block") == want["block"] and rec.get("smem") == want["smem"]


def hung_waits_of(v: Variant, checks: str = CHECKS) -> list[dict] | None:
    """The waits the checker's deadlock counterexample leaves blocked (checks/<check>.waits.json, made by
    check.sh with hung_waits.py), or None."""
    path = os.path.join(checks, v.check + ".waits.json") if v.check else ""
    if not (path and os.path.exists(path)):
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _site_matches(expected: str, got: str) -> bool:
    """file:line of the extracted protocol against file:line of nvdisasm: the same line, and one path the
    other's suffix at a path boundary (the two tools may print the include path differently)."""
    (ef, _, el), (gf, _, gl) = expected.rpartition(":"), got.rpartition(":")
    if el != gl:
        return False
    short, long_ = sorted((ef, gf), key=len)
    return long_ == short or long_.endswith("/" + short)


def _row_warps(row: dict) -> set[int]:
    first, _, last = str(row["threads"]).partition("-")
    return set(range(int(first) // 32, int(last or first) // 32 + 1))


def _at_wait(row: dict, wait: dict) -> bool:
    """Whether the range of threads is of the wait's warps and its call sites begin with the wait's, or with
    those of the try_wait its spin retries at (`retry_sites`: the folded consumer_try_wait/consumer_wait)."""
    got = list(row.get("sites", ()))

    def begins(sites: list[str]) -> bool:
        return bool(sites) and len(got) >= len(sites) and all(
            _site_matches(e, g) for e, g in zip(sites, got[:len(sites)], strict=True))

    ours = bool(_row_warps(row) & set(wait["warps"]))
    return ours and (begins(wait["sites"]) or begins(wait.get("retry_sites", [])))


def compare_waits(rows: list[dict], expected: list[dict]) -> dict:
    """Which of the counterexample's blocked waits cuda-gdb finds, CTA by CTA: a wait is seen in a CTA when
    some range of threads of its warps sits at a PC whose call sites begin (innermost first) with the wait's
    sites. Ranges of those warps elsewhere (for example the lanes of an elected warp that did not wait) are
    listed as `elsewhere`; `agree` holds when every wait is seen in every CTA cuda-gdb showed."""
    ctas = sorted({str(r["cta"]) for r in rows})
    waits = []
    for w in expected:
        seen = []
        for cta in ctas:
            if any(str(r["cta"]) == cta and _at_wait(r, w) for r in rows):
                seen.append(cta)
        waits.append({"wait": w["wait"], "warps": w["warps"], "sites": w["sites"], "seen_in_ctas": seen})
    claimed = {id(r) for r in rows if any(_at_wait(r, w) for w in expected)}
    elsewhere = [{"cta": r["cta"], "threads": r["threads"], "line": r["line"], "sites": list(r.get("sites", ()))[:3]}
                 for r in rows if id(r) not in claimed]
    return {"agree": bool(ctas) and all(len(w["seen_in_ctas"]) == len(ctas) for w in waits), "ctas": ctas,
            "waits": waits, "elsewhere": elsewhere}


def run_under_gdb(build: str, v: Variant, deadline_s: float, out_dir: str, grid: list[int] | None = None) -> dict:
    """Runs one launch of the variant under cuda-gdb; at the deadline, where each thread of the grid is."""
    gdb = shutil.which("cuda-gdb")
    if gdb is None:
        return {"gdb": "cuda-gdb not found on PATH"}
    args = [gdb, "-batch", "-nx"]
    for c in gdb_script(grid_blocks(grid), 12):
        args += ["-ex", c]
    cmd = host_command(build, v, 1, deadline_s)
    args += ["--args", *cmd]
    env = dict(os.environ, SV_SIGINT_ON_HANG="1")
    t0 = time.monotonic()
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150, env=env)
        log = p.stdout
    except subprocess.TimeoutExpired as e:
        so = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        log = so + "\n--- killed after 150 s ---"
    path = os.path.join(out_dir, "gdb.log")  # one file for all variants: few files come back from a device
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"==== {v.name}\n{log}\n")
    return {"gdb_log": os.path.basename(path), "gdb_s": round(time.monotonic() - t0, 1),
            "threads": where_threads_wait(log, cmd[1], out_dir, v.name)}


SAN_LINE_RE = re.compile(r"^========= ?(.*)$", re.M)
SAN_SKIP = ("COMPUTE-SANITIZER", "Program hit", "Saved host backtrace", "Host Frame", "Target application")


def sanitizer_findings(log: str) -> dict:
    """compute-sanitizer's report in brief: its summary lines and the first reports, each with the line that
    follows it (where the access or barrier is: `at FUNCTION+OFFSET in FILE:LINE`)."""
    lines = [m.group(1) for m in SAN_LINE_RE.finditer(log)]
    summary = [ln.strip() for ln in lines if "SUMMARY" in ln]
    first = []
    for i, ln in enumerate(lines):
        if not ln or ln[0].isspace() or "SUMMARY" in ln or ln.startswith(SAN_SKIP):
            continue
        where = next((x.strip() for x in lines[i + 1:i + 4] if x.strip().startswith(("at ", "and "))), "")
        first.append(f"{ln.strip()} | {where}" if where else ln.strip())
        if len(first) == 8:
            break
    return {"summary": summary, "first": first}


def run_under_sanitizer(build: str, v: Variant, tool: str, deadline_s: float, out_dir: str) -> dict:
    """One launch of the variant under compute-sanitizer's TOOL (racecheck, synccheck, memcheck); its log is
    appended to sanitizer.log, its findings summarized."""
    cs = shutil.which("compute-sanitizer")
    if cs is None:
        return {"tool": tool, "error": "compute-sanitizer not found on PATH"}
    cmd = [cs, "--tool", tool, "--print-limit", "50", *host_command(build, v, 1, deadline_s)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        log = p.stdout
    except subprocess.TimeoutExpired as e:
        so = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        log = so + "\n--- killed after 300 s ---"
    with open(os.path.join(out_dir, "sanitizer.log"), "a", encoding="utf-8") as fh:
        fh.write(f"==== {v.name} {tool}\n{log}\n")
    rec = parse_record(log) or {}
    return {"tool": tool, "outcome": rec.get("outcome", "?"), "s": round(time.monotonic() - t0, 1),
            **sanitizer_findings(log)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "cutlass"))
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--runs", type=int, default=20, help="launches per variant, in one process (default 20)")
    ap.add_argument("--deadline", type=float, default=5.0, help="seconds a launch may take (default 5)")
    ap.add_argument("--gdb", action="store_true", help="rerun each hung variant under cuda-gdb")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where the records and logs go")
    ap.add_argument("--sanitize", default="", help="comma-separated compute-sanitizer tools run on one launch of "
                    "each chosen variant that is not a deadlock (racecheck, synccheck, memcheck)")
    ap.add_argument("--list", action="store_true", help="print the variants and exit")
    a = ap.parse_args(argv)
    chosen = [v for v in VARIANTS if selected(v.name, a.only)]
    if a.list:
        for v in chosen:
            print(f"{v.name}: {v.ptx} {v.cluster} MNK={v.mnk} ({v.bug}) {v.note}")
        return 0
    missing = [p for v in chosen for p in host_command(a.build, v, 1, 1)[:2] if not os.path.exists(p)]
    if missing:
        print(f"cutlass_run: not built: {', '.join(sorted(set(missing)))} (run bench/cutlass_gpu/build.sh)",
              file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    records = []
    for v in chosen:
        rec = run_variant(a.build, v, a.runs, a.deadline)
        with open(os.path.join(a.out, "host_raw.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
        rec = summarize(rec)
        if a.gdb and rec.get("outcome") == "hung":
            rec.update(run_under_gdb(a.build, v, a.deadline, a.out, rec.get("grid")))
            expected = hung_waits_of(v)
            if expected is not None and rec.get("threads"):
                rec["waits_vs_counterexample"] = compare_waits(rec["threads"], expected)
        tools = [t for t in a.sanitize.split(",") if t] if v.bug != "deadlock" else []
        if tools:
            rec["sanitizer"] = [run_under_sanitizer(a.build, v, t, max(a.deadline, 60.0), a.out) for t in tools]
        rec["checker"] = checker_says(v)
        rec["launch_as_checked"] = launch_as_checked(rec, v)
        rec["bug"], rec["note"] = v.bug, v.note
        rec["agreement"] = agreement(v, rec)
        print(json.dumps(rec), flush=True)
        records.append(rec)
    with open(os.path.join(a.out, "cutlass_run.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    return 0 if all(r.get("outcome") in ("completed", "corrupt", "hung", "fault") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
