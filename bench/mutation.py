"""Mutation testing of every safe spec in specs/ (writes bench/MUTATION.md).

For each spec whose checked verdict is safe, `syncverify.mutate.run` applies
every mutation operator at every site and checks each mutant. Every mutant
that survives (is checked safe) or is inconclusive must be explained below in
EXPLANATIONS, keyed by spec file and mutant id, as an equivalent mutant with
the reason; a survivor without an explanation is listed as UNEXPLAINED and
makes this script exit 1. A survivor that is a real missed bug is a checker
bug: it gets a regression test, not an explanation.

    nice -n 19 python bench/mutation.py --jobs 2            # check everything, write MUTATION.md
    python bench/mutation.py --report-only                  # rewrite MUTATION.md from bench/mutation.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
RESULTS = ROOT / "bench" / "mutation.json"
REPORT = ROOT / "bench" / "MUTATION.md"

# Per spec: -D overrides for the mutation run (kept at the spec's own values unless a spec's
# mutants are too slow at them) and state budgets per mutant (default: 20x the original's states,
# at least 50,000). FA3's ping-pong without its scheduler `bar.sync` lets 8 warps arrive freely:
# ROUNDS=2 and 400,000 states make that mutant conclusive.
DEFINES: dict[str, dict[str, int]] = {"fa3_pingpong.sync": {"ROUNDS": 2}, "fa3_pingpong_source.sync": {"ROUNDS": 2}}
MAX_STATES: dict[str, int] = {"fa3_pingpong.sync": 400_000, "fa3_pingpong_source.sync": 400_000}
TIMEOUT = 300.0

# Reasons shared by several specs.
SAME_THREAD_INITS = ("both inits are done by the same elected thread before the barrier that publishes them "
                     "(syncthreads, or fence.mbarrier_init + cluster barrier); nothing uses either barrier in "
                     "between, so their order is invisible")
FENCE_CLUSTER1 = ("`fence.mbarrier_init` only releases inits to *peer* CTAs (PTX: "
                  "fence.mbarrier_init.release.cluster); with `cluster 1` there is none, and `syncthreads` "
                  "orders the init before every use in the CTA")
TX_BEFORE_COPY = ("a copy may complete before its expect_tx (tx goes transiently negative, ptx-semantics §1.2); "
                  "the phase still needs the producer's arrival (pending 1), which comes with the expect_tx, so "
                  "it completes only when both are in, whatever their order; the copy's write is still "
                  "released by its own complete_tx")
TX_BEFORE_MULTICAST = TX_BEFORE_COPY + ("; with multicast the peer's copy may land first as well, which the "
                                        "original order allows too")
READS_COMMUTE = ("two reads by the same thread with no synchronization between them: every other access is "
                 "ordered with both or with neither (same acquire before, same release after), and reads never "
                 "conflict with each other")
LET_UNUSED = "the `let` is not used by the statement it is swapped with: the same operations run with the same values"
NO_TMEM_DATA = ("these `syncthreads` order no modelled access: the spec has no shared-memory data, and the "
                "language does not model the TMEM address warp 0 hands to the CTA (docs/language.md §10, "
                "tcgen05 data path), which is what they guard in the kernel")
WAIT_READ_ALL_LANES = ("`bulk.wait_read` by every lane instead of lane 0: bulk groups are per thread, lanes "
                       "1..31 have none and return at once; lane 0 waits exactly as before")
SCHEDULER_ONLY = ("the scheduler barriers order only the two warpgroups' GEMMs, which the spec does not model "
                  "(no shared data): without the `bar.sync` nothing blocks, the arrivals still fill each "
                  "generation (256 threads) or stay pending at exit as in the original, and no access is left "
                  "to order — the mutant is safe in the model; in the kernel it only loses the GEMM scheduling")

EXPLANATIONS: dict[str, dict[str, str]] = {
    "cluster_multicast_ring.sync": {
        "swap@45:25": SAME_THREAD_INITS,
        "swap@54:9": TX_BEFORE_MULTICAST,
        "swap@63:7": READS_COMMUTE,
    },
    "cluster_multicast_ring_cta_scope.sync": {
        "swap@36:25": SAME_THREAD_INITS,
        "swap@45:9": TX_BEFORE_MULTICAST,
        "swap@54:7": READS_COMMUTE,
    },
    "cutlass_2sm_tmem_alloc_fixed.sync": {
        "swap@24:3": NO_TMEM_DATA,
        "drop-barrier@27:3": NO_TMEM_DATA,
        "swap@27:3": NO_TMEM_DATA + "; the cluster.sync still follows both allocations",
        "swap@28:3": NO_TMEM_DATA + "; the cluster.sync still precedes both deallocations",
        "drop-barrier@30:3": NO_TMEM_DATA,
        "swap@30:3": NO_TMEM_DATA,
        "drop-cluster-barrier@28:3": (
            "the second cluster barrier is there to order both CTAs' allocations before either deallocation. "
            "The model's `tmem.alloc cta_group 2` is a rendezvous (each warp blocks until the peer warp joins, "
            "docs/language.md §7.6), and so is the deallocation: neither can overtake the peer's allocation. "
            "Equivalent under the modelled semantics. Whether a 2-SM allocation really is a full rendezvous on "
            "hardware is the question behind NVIDIA/cutlass #3435, which the spec cites: if it is not, this "
            "mutant is a bug the model cannot see (raised as a modelling question, not a checker bug)"),
    },
    "cutlass_ws_ring.sync": {
        "swap@38:25": SAME_THREAD_INITS,
        "swap@38:39": FENCE_CLUSTER1,
        "drop-fence@38:54": FENCE_CLUSTER1,
        "swap@46:9": TX_BEFORE_COPY,
    },
    "cutlass_ws_ring_per_warp_release_syncwarp.sync": {
        "swap@25:25": SAME_THREAD_INITS,
        "swap@25:39": FENCE_CLUSTER1,
        "drop-fence@25:54": FENCE_CLUSTER1,
        "swap@33:9": TX_BEFORE_COPY,
    },
    "fa3_pingpong.sync": {
        "drop-barrier@46:7": SCHEDULER_ONLY,
    },
    "fa3_pingpong_source.sync": {
        "drop-barrier@34:7": SCHEDULER_ONLY,
    },
    "nvfuser_cb_mbarrier_war.sync": {
        "swap@44:18": SAME_THREAD_INITS,
        "swap@44:32": FENCE_CLUSTER1,
        "drop-fence@44:45": FENCE_CLUSTER1,
        "swap@55:7": ("in the prologue the `wait war[k]` guards the copy into tile[k], which still comes after "
                      "it; the arrive.expect_tx moved before it touches no slot, and full[k]'s first phase "
                      "cannot complete before the copy's bytes arrive (no consumption-rule issue: it is the "
                      "barrier's first phase)"),
        "swap@56:7": TX_BEFORE_COPY,
        "swap@65:5": LET_UNUSED,
        "swap@67:7": TX_BEFORE_COPY,
    },
    "nvfuser_cb_syncthreads.sync": {
        "swap@35:18": FENCE_CLUSTER1,
        "drop-fence@35:32": FENCE_CLUSTER1,
        "swap@36:3": ("the prologue's copies are issued by thread 0, the thread that initialized full[*]: "
                      "program order puts its init before its copies (and their complete_tx after their issue); "
                      "the `syncthreads`, now after the prologue, still orders the init before every other "
                      "thread's first wait"),
        "swap@41:7": TX_BEFORE_COPY,
        "swap@49:5": LET_UNUSED,
        "swap@50:7": TX_BEFORE_COPY,
    },
    "nvfuser_warp_specialized.sync": {
        "swap@46:18": SAME_THREAD_INITS,
        "swap@46:32": FENCE_CLUSTER1,
        "drop-fence@46:45": FENCE_CLUSTER1,
        "swap@54:9": TX_BEFORE_COPY,
    },
    "peer_init_fixed.sync": {
        "swap@35:3": ("CTA 0's remote arrival precedes its cluster.arrive, so CTA 1's wait, now after the "
                      "cluster barrier, still finds phase 0 complete; after the barrier nothing touches CTA 0, "
                      "so CTA 0 may exit while CTA 1 waits"),
        "drop-wait@36:5": ("the wait guards no data (nothing is written or read): without it CTA 1 just does "
                           "not observe the phase, and no later arrival on `bar` makes that unobserved phase "
                           "matter (SV502); the final cluster.sync still keeps CTA 1 alive for the arrival"),
        "drop-cluster-barrier@38:3": (
            "the only cross-CTA access is CTA 0's arrival on CTA 1's barrier, and CTA 1's wait already orders "
            "it before CTA 1 exits; CTA 0's shared memory is never accessed by CTA 1"),
    },
    "tilelang_bar_h_fixed.sync": {
        **{k: SAME_THREAD_INITS for k in ("swap@44:7", "swap@44:20", "swap@44:33", "swap@44:46", "swap@45:7",
                                           "swap@45:20", "swap@45:33")},
        "swap@45:46": FENCE_CLUSTER1,
        "drop-fence@46:7": FENCE_CLUSTER1,
        **{k: TX_BEFORE_COPY for k in ("swap@54:15", "swap@56:15", "swap@58:15", "swap@60:15")},
    },
    "tma_store_epilogue.sync": {
        "swap@45:7": LET_UNUSED,
        "drop-elect@47:9": WAIT_READ_ALL_LANES,
        "drop-elect@62:7": WAIT_READ_ALL_LANES,
        "swap@55:11": ("two bulk stores issued back to back by one thread into the same bulk group: both reads "
                       "stay in flight until the same `bulk.wait_read` retires the group, and reads of two "
                       "slots never conflict"),
    },
    "wgmma_release_after_wait.sync": {
        "swap@36:25": SAME_THREAD_INITS,
        "swap@36:39": FENCE_CLUSTER1,
        "drop-fence@36:54": FENCE_CLUSTER1,
        "swap@44:9": TX_BEFORE_COPY,
    },
}

# Checker bugs that mutation testing found, fixed, with their regression tests (listed in the report).
FIXED = [
    ("tma_store_epilogue.sync", "drop-elect@54:9",
     "every lane issuing the bulk stores while lane 0 alone runs `bulk.wait_read` was checked safe: bulk groups "
     "were tracked per warp, so lane 0's wait retired the other lanes' stores (PTX: per-thread bulk "
     "async-groups). Fixed in `Machine.op_group_wait`; regression: "
     "`tests/test_engine_regressions.py::test_bulk_wait_retires_only_the_waiting_lanes_groups`"),
]

# Found while fixing the above, not fixed (the per-thread commit needs per-lane group counters in the state).
OPEN = [
    ("an elected `bulk.commit` after stores by every lane is checked safe: the commit counter is per warp, so "
     "lane 0's commit closes lanes 1..31's groups too and a later `bulk.wait_read` by every lane retires stores "
     "that were never committed (PTX: commit_group commits the executing thread's own operations). Strict xfail "
     "`tests/test_engine_regressions.py::test_elected_bulk_commit_leaves_the_other_lanes_stores_uncommitted`"),
]


def safe_specs() -> list[Path]:
    out = []
    for p in sorted(SPECS.glob("*.sync")):
        header = next((ln for ln in p.read_text().splitlines() if "expect:" in ln), "")
        codes = header.split("expect:", 1)[-1].replace(",", " ").split()
        from syncverify.diagnostics import CODES, Severity

        if all(c == "safe" or (c in CODES and CODES[c][1] is Severity.WARNING) for c in codes) and codes:
            out.append(p)
    return out


def run_spec(path: str) -> dict:
    from syncverify.mutate import report_dict, run

    start = time.monotonic()
    name = Path(path).name
    rep = run(path, DEFINES.get(name, {}), max_states=MAX_STATES.get(name), timeout=TIMEOUT)
    data = report_dict(rep)
    data["path"] = f"specs/{name}"
    data["defines"] = DEFINES.get(name, {})
    data["wall_seconds"] = round(time.monotonic() - start, 1)
    return data


def write_report(results: list[dict]) -> int:
    from syncverify.mutate import OPERATORS

    lines = [
        "# Mutation testing of the safe specs",
        "",
        "`syncverify mutate SPEC` applies each protocol mutation at every applicable site of a safe spec",
        "(operators: `syncverify/mutate.py`) and checks every mutant with its own budget. Outcomes: **killed**",
        "(an error is reported), **warned** (only a new warning), **equivalent** (compiles to exactly the",
        "original's model, decided without a search), **invalid** (not a valid spec: SV1xx), **inconclusive**",
        "(budget out), **survived** (checked safe). Every survivor is examined below: an equivalent mutant with",
        "the reason, or a checker bug.",
        "",
        "Reproduce: `nice -n 19 python bench/mutation.py --jobs 2` (results in `bench/mutation.json`). The recorded",
        "run used `--jobs 7` on a 16-core machine; *time* is each spec's wall time there (baseline check and all",
        "mutants, one process per spec).",
        "",
        "Operators: " + "; ".join(f"`{k}`: {v}" for k, v in OPERATORS.items()) + ".",
        "",
        "| spec | mutants | killed | warned | equivalent | invalid | inconclusive | survived | explained | time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    unexplained = []
    details: list[str] = []
    totals = dict.fromkeys(["mutants", "killed", "warned", "equivalent", "invalid", "inconclusive", "survived"], 0)
    explained_total = 0
    for data in results:
        name = Path(data["path"]).name
        s = data["summary"]
        reasons = EXPLANATIONS.get(name, {})
        look = [m for m in data["mutants"] if m["outcome"] in ("survived", "inconclusive", "warned")]
        explained = [m for m in look if m["id"] in reasons]
        explained_total += sum(1 for m in explained if m["outcome"] == "survived")
        for k in totals:
            totals[k] += s.get(k, 0)
        lines.append(f"| {name} | {s['mutants']} | {s['killed']} | {s['warned']} | {s['equivalent']} | "
                     f"{s['invalid']} | {s['inconclusive']} | {s['survived']} | "
                     f"{sum(1 for m in explained if m['outcome'] == 'survived')} | {data['wall_seconds']:.0f}s |")
        if not look:
            continue
        details += [f"### {name}", ""]
        if data.get("defines"):
            details += [f"Checked with {', '.join(f'-D {k}={v}' for k, v in data['defines'].items())}.", ""]
        for m in look:
            reason = reasons.get(m["id"])
            if reason is None and m["outcome"] == "survived":
                unexplained.append(f"{name} {m['id']}")
                reason = "**UNEXPLAINED**"
            elif reason is None:
                reason = m["detail"]
            codes = f" ({', '.join(m['codes'])})" if m["codes"] else ""
            details += [f"- **{m['outcome']}**{codes} `{m['id']}` — {m['description']}", f"  - {reason}"]
        details.append("")
    lines.append(f"| **total** | {totals['mutants']} | {totals['killed']} | {totals['warned']} | "
                 f"{totals['equivalent']} | {totals['invalid']} | {totals['inconclusive']} | {totals['survived']} | "
                 f"{explained_total} | |")
    lines += ["", f"Unexplained survivors: **{len(unexplained)}**" + (": " + ", ".join(unexplained)
                                                                      if unexplained else "."), ""]
    lines += ["## Checker bugs found", ""]
    for spec, ident, what in FIXED:
        lines.append(f"- `{spec}` `{ident}`: {what}.")
    for what in OPEN:
        lines.append(f"- open: {what}.")
    lines += ["", "## Survivors, warned and inconclusive mutants", "", *details]
    REPORT.write_text("\n".join(lines) + "\n")
    return 1 if unexplained else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--report-only", action="store_true", help="rewrite MUTATION.md from bench/mutation.json")
    ap.add_argument("specs", nargs="*", help="spec file names to (re)run; the others keep their stored results")
    args = ap.parse_args()
    stored = {Path(d["path"]).name: d for d in json.loads(RESULTS.read_text())} if RESULTS.exists() else {}
    if not args.report_only:
        todo = [p for p in safe_specs() if not args.specs or p.name in args.specs]
        with ProcessPoolExecutor(args.jobs) as pool:
            for path, data in zip(todo, pool.map(run_spec, [str(p) for p in todo]), strict=False):
                stored[path.name] = data
                print(f"{path.name}: {data['summary']} in {data['wall_seconds']}s", flush=True)
                RESULTS.write_text(json.dumps([stored[k] for k in sorted(stored)], indent=1) + "\n")
    return write_report([stored[k] for k in sorted(stored)])


if __name__ == "__main__":
    sys.exit(main())
