"""Run every committed kernel N times, compare with the checker's verdicts, and measure the ring's bandwidth.

    python3 syncverify/gpu/batch.py --kernels kernels --verdicts VERDICTS.json --repeat 20 --out DIR \
        [--bench KERNEL.cu LAUNCH.json ...] [--sanitize racecheck synccheck] [--only NAME ...]

Runs by path on the GPU machine (no syncverify imports). VERDICTS.json is the
output of `syncverify check --format json specs/`, made where the checker runs.
Prints one line per kernel and the agreement; writes DIR/agreement.json (every
repetition's details) and DIR/log.txt (the child processes' raw output). With
--sanitize, every emitted kernel (and every replay kernel of a violation) runs
once more under each compute-sanitizer tool, several at a time since each waits
mostly on the sanitizer's own start; DIR/sanitizer.json keeps the parsed
findings and the raw reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

try:
    from . import outcome as oc
    from . import runner
except ImportError:  # run by path
    import outcome as oc  # type: ignore[no-redef]
    import runner  # type: ignore[no-redef]


def load_verdicts(path: str) -> dict[str, tuple[set[str], set[int], str]]:
    """spec path -> (error codes, SV201 blocked lines, verdict)."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for r in data["results"]:
        errors = {d["code"] for d in r["diagnostics"] if d["severity"] == "error"}
        blocked: set[int] = set()
        for d in r["diagnostics"]:
            if d["code"] == "SV201":
                blocked |= oc.model_blocked_lines(d["message"])
        out[os.path.normpath(r["path"])] = (errors, blocked, r["verdict"])
    return out


def run_kernels(kernels: str, verdicts: dict, repeat: int, deadline: float, log: Any,
                only: list[str] | None = None) -> list[dict]:
    with open(os.path.join(kernels, "index.json")) as f:
        index = json.load(f)["specs"]
    rows = []
    for entry in index:
        if only and entry["name"] not in only:
            continue
        spec = os.path.normpath(entry["spec"])
        errors, blocked, verdict = verdicts.get(spec, (set(), set(), "unknown"))
        if entry["status"] != "emitted":
            rows.append({"spec": spec, "verdict": verdict, "errors": sorted(errors), "run": "refused",
                         "why": entry.get("reason", "")})
            print(f"{entry['name']}: refused — {entry.get('reason', '')}", flush=True)
            continue
        kinds = [("free", entry["kernel"], entry["launch"])]
        if entry.get("replay"):
            kinds.append(("replay", entry["replay"], entry["replay"][:-3] + ".json"))
        for kind, cu, js in kinds:
            with open(os.path.join(kernels, js)) as f:
                launch = json.load(f)
            log.write(f"==== {entry['name']} ({kind})\n")
            t0 = time.monotonic()
            res = runner.run(os.path.join(kernels, cu), launch, repeat, deadline, log=log)
            agree, why = (oc.agreement(errors, blocked, res.reps, launch.get("replay") if kind == "replay" else None)
                          if res.reps else (False, res.error))
            text = runner.format_result(res)
            shown = [r for r in res.reps if r.status in (oc.HANG, oc.CORRUPT, oc.FAULT)]
            at = [oc.traced(r) for r in shown if oc.traced(r)]
            where = f"; {len(at)} of them at a step of the counterexample ({at[0]})" if at else ""
            shows = f"\n  the bug showed in {len(shown)}/{len(res.reps)}{where}" if errors and shown else ""
            print(f"[{kind}] {text}{shows}\n  verdict {verdict} {sorted(errors) or ''}: "
                  f"{oc.agreement_word(agree, why)} — {why}  ({time.monotonic() - t0:.1f} s)", flush=True)
            rows.append({"spec": spec, "name": entry["name"], "run": kind, "verdict": verdict,
                         "errors": sorted(errors), "summary": oc.summary(res.reps) if res.reps else res.error,
                         "agrees": agree, "why": why, "text": text, "result": res.to_json()})
    return rows


def sanitize_kernels(kernels: str, verdicts: dict, tools: list[str], deadline: float, jobs: int,
                     only: list[str] | None = None) -> list[dict]:
    """Each emitted kernel, and the replay kernel of each violation, once under each sanitizer tool."""
    with open(os.path.join(kernels, "index.json")) as f:
        index = json.load(f)["specs"]
    work = []
    for entry in index:
        if entry["status"] != "emitted" or (only and entry["name"] not in only):
            continue
        errors, _, verdict = verdicts.get(os.path.normpath(entry["spec"]), (set(), set(), "unknown"))
        kinds = [("free", entry["kernel"], entry["launch"])]
        if entry.get("replay") and errors:
            kinds.append(("replay", entry["replay"], entry["replay"][:-3] + ".json"))
        for tool in tools:
            for kind, cu, js in kinds:
                work.append((entry["name"], kind, tool, cu, js, verdict, sorted(errors)))

    def one(item: tuple) -> dict:
        name, kind, tool, cu, js, verdict, errors = item
        with open(os.path.join(kernels, js)) as f:
            launch = json.load(f)
        t0 = time.monotonic()
        res = runner.run(os.path.join(kernels, cu), launch, 1, deadline, sanitize=tool)
        return {"name": name, "run": kind, "tool": tool, "verdict": verdict, "errors": errors,
                "outcome": oc.summary(res.reps) if res.reps else res.error, "seconds": time.monotonic() - t0,
                "report": res.sanitizer.to_json() if res.sanitizer else None, "raw": res.sanitizer_log}

    rows = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for row in pool.map(one, work):
            rep = row["report"] or {"summary": f"{row['tool']}: no report"}
            print(f"[{row['tool']}] {row['name']} ({row['run']}; verdict {row['verdict']} "
                  f"{' '.join(row['errors'])}): {rep['summary']}; run {row['outcome']} ({row['seconds']:.0f} s)",
                  flush=True)
            rows.append(row)
    return rows


def bench(kernel: str, launch_path: str, repeat: int, log: Any) -> dict:
    """The ring's global->shared bytes per second, and a device-to-device copy in the same process."""
    with open(launch_path) as f:
        launch = json.load(f)
    res = runner.run(kernel, launch, repeat, 30.0, log=log)
    moved = launch["sources"]["bytes_per_cluster"] * launch["grid"]
    times = sorted(r.ms for r in res.reps if r.status == oc.COMPLETED)
    out: dict[str, Any] = {"kernel": kernel, "params": launch["params"], "grid": launch["grid"],
                           "check_stride": launch.get("check_stride", 1), "bytes": moved,
                           "summary": oc.summary(res.reps), "ms": [r.ms for r in res.reps]}
    if times:
        best = times[0]
        out["best_ms"], out["ring_GBps"] = best, moved / best / 1e6
        out["median_ms"] = times[len(times) // 2]
    return out


def copy_bandwidth(nbytes: int, repeat: int = 10) -> dict:
    """cupy device-to-device copy: bytes copied per second, and DRAM traffic (read + write) per second."""
    import cupy as cp

    a = cp.ones(nbytes // 4, dtype=cp.uint32)
    b = cp.empty_like(a)
    b[...] = a
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(repeat):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        b[...] = a
        e.record()
        e.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(s, e))
    return {"bytes": nbytes, "best_ms": best, "copy_GBps": nbytes / best / 1e6,
            "dram_GBps": 2 * nbytes / best / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="batch.py")
    ap.add_argument("--kernels", default="kernels")
    ap.add_argument("--verdicts", required=True)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--deadline", type=float, default=10.0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--bench", nargs=2, action="append", default=[], metavar=("KERNEL", "LAUNCH"))
    ap.add_argument("--bench-repeat", type=int, default=5)
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these kernels")
    ap.add_argument("--sanitize", nargs="+", default=[], choices=["racecheck", "synccheck"],
                    help="also run each kernel once under these compute-sanitizer tools")
    ap.add_argument("--jobs", type=int, default=8, help="sanitizer runs at a time")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    env = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(), "python": sys.version.split()[0]}
    try:
        env["nvidia-smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        env["nvidia-smi"] = str(err)
    print(json.dumps(env), flush=True)
    report: dict[str, Any] = {"env": env}
    with open(os.path.join(args.out, "log.txt"), "w") as log:
        if not args.skip_kernels:
            verdicts = load_verdicts(args.verdicts)
            rows = run_kernels(args.kernels, verdicts, args.repeat, args.deadline, log, args.only)
            report["kernels"] = rows
            ran = [r for r in rows if r["run"] != "refused"]
            print(f"\n{sum(r['agrees'] for r in ran)} of {len(ran)} runs agree with the verdict", flush=True)
        if args.sanitize:
            found = sanitize_kernels(args.kernels, load_verdicts(args.verdicts), args.sanitize, args.deadline,
                                     args.jobs, args.only)
            with open(os.path.join(args.out, "sanitizer.json"), "w") as f:
                json.dump({"env": env, "runs": found}, f, indent=1)
        benches = [bench(k, j, args.bench_repeat, log) for k, j in args.bench]
        for b in benches:
            print(f"bench {b['params']} grid {b['grid']} stride {b['check_stride']}: {b['summary']}; "
                  f"{b.get('ring_GBps', 0):.0f} GB/s (best {b.get('best_ms', 0):.3f} ms for {b['bytes'] / 1e9:.2f} GB)",
                  flush=True)
        if benches:
            report["bench"] = benches
            try:
                report["copy"] = copy_bandwidth(max(b["bytes"] for b in benches) // 2)
                c = report["copy"]
                print(f"cupy copy of {c['bytes'] / 1e9:.2f} GB: {c['best_ms']:.3f} ms = {c['copy_GBps']:.0f} GB/s "
                      f"copied ({c['dram_GBps']:.0f} GB/s of DRAM read+write)", flush=True)
            except Exception as err:
                report["copy"] = {"error": f"{type(err).__name__}: {err}"}
                print(f"cupy copy failed: {err}", flush=True)
    with open(os.path.join(args.out, "agreement.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
