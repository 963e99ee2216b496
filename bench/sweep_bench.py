"""A sweep of more than 100 points, locally and on a Ray cluster started on this machine, then again from the
cache: wall time, cache hits, and the wall time N workers would take, projected from the points' costs.

    python3 bench/sweep_bench.py [--jobs 2] [--out bench/RESULTS-sweep.md]

The points (bench/sweep/manifest.toml, written by this script):
- a Triton TMA matmul's autotune space (tile width × pipeline depth × warps: 12 configs) × 2 problem shapes;
- tests/data/triton/ring_sum.py's autotune space (3 configs) × 12 values of K;
- two CUTLASS sm90 GEMM instantiations (cooperative 2x1, ping-pong 1x1) from their committed PTX, each at its
  problem shape through `--cutlass-problem` (CUTLASS's host code gives the launch);
- every spec of specs/, with the verdict its header states.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench" / "sweep"


def manifest_text(build: Path) -> str:
    lines = ["# written by bench/sweep_bench.py", "[defaults]", "timeout = 900", "",
             "[[triton]]", 'name = "tma_matmul {config} {M}x{N}x{K}"', 'module = "tma_matmul_autotune.py"',
             'kernel = "tma_matmul"', 'call = "sweep_call"', "axes = { M = [128], N = [128], K = [256, 512] }",
             'expect = "safe"', "",
             "[[triton]]", 'name = "ring_sum {config} K={K}"', 'module = "../../tests/data/sweep/ring_sum_sweep.py"',
             'kernel = "ring_sum"', 'call = "sweep_call"',
             "axes = { K = [" + ", ".join(str(64 * i) for i in range(4, 16)) + "] }", ""]
    for name, shape in (("sm90_gemm_coop_2x1", "256x128x128"), ("sm90_gemm_pingpong_1x1", "128x128x128")):
        ptx = build / f"{name}.ptx"
        if not ptx.exists():
            ptx.write_bytes(gzip.decompress((ROOT / "tests" / "data" / "ptx" / f"{name}.ptx.gz").read_bytes()))
        lines += ["[[point]]", f'name = "CUTLASS {name} {shape}"', f'path = "{os.path.relpath(ptx, HERE)}"',
                  f'args = ["--cutlass-problem", "{shape}"]', 'expect = "safe"', ""]
    for spec in sorted((ROOT / "specs").glob("*.sync")):
        header = spec.read_text().splitlines()[0]
        expect = header.split("expect:", 1)[1].strip() if "expect:" in header else None
        lines += ["[[point]]", f'name = "spec {spec.stem}"', f'path = "../../specs/{spec.name}"']
        if expect:
            codes = [c.strip() for c in expect.split(",")]
            lines.append('expect = "safe"' if codes == ["safe"] else "expect = [" + ", ".join(f'"{c}"' for c in codes)
                         + "]")
        lines.append("")
    return "\n".join(lines)


def run_sweep(manifest: Path, cache: Path, extra: list[str]) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "syncverify", "check", "--manifest", str(manifest), "--cache",
                           str(cache), "--format", "json", "-q", *extra], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    wall = time.monotonic() - started
    if not proc.stdout.strip():
        raise SystemExit(f"the sweep printed nothing: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), wall


def projected(costs: list[float], workers: int) -> float:
    """Longest-processing-time-first over ``workers``: what the per-point costs allow, without overheads."""
    loads = [0.0] * workers
    for c in sorted(costs, reverse=True):
        loads[loads.index(min(loads))] += c
    return max(loads)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-sweep.md"))
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    build = HERE / "build"
    build.mkdir(exist_ok=True)
    manifest = HERE / "manifest.toml"
    manifest.write_text(manifest_text(build))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        local_cache, ray_cache = Path(tmp) / "local", Path(tmp) / "ray"
        local, local_wall = run_sweep(manifest, local_cache, ["-j", str(args.jobs)])
        rows.append(("local, cold cache", f"{args.jobs} worker threads", local, local_wall))
        again, again_wall = run_sweep(manifest, local_cache, ["-j", str(args.jobs)])
        rows.append(("local, same cache again", f"{args.jobs} worker threads", again, again_wall))
        ray_doc = None
        if not args.no_ray:
            from ray.cluster_utils import Cluster

            store = 80 * 1024 * 1024
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": store})
            try:
                for _ in range(args.jobs):
                    cluster.add_node(num_cpus=1, object_store_memory=store)
                cluster.wait_for_nodes()
                ray_doc, ray_wall = run_sweep(manifest, ray_cache, ["--ray", cluster.address])
            finally:
                cluster.shutdown()
            rows.append(("Ray, cold cache", f"head + {args.jobs} workers on this machine", ray_doc, ray_wall))
    points = local["points"]
    same = ray_doc is None or [(p["name"], p["status"], p["codes"]) for p in ray_doc["points"]] == \
        [(p["name"], p["status"], p["codes"]) for p in points]
    costs = [p["seconds"] for p in points]
    counts: dict[str, int] = {}
    for p in points:
        counts[p["status"]] = counts.get(p["status"], 0) + 1
    met = sum(1 for p in points if p["expect_met"])
    stated = sum(1 for p in points if p["expect_met"] is not None)
    out = [
        "# A sweep of a kernel library's points: local, Ray, and the cache",
        "",
        f"Command: `python3 bench/sweep_bench.py --jobs {args.jobs}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
        f" {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}). The manifest it writes is"
        " bench/sweep/manifest.toml.",
        "",
        f"{len(points)} points: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        + f"; {met} of the {stated} with an `expect` met it.",
        "",
        "| run | executor | wall s | from the cache | built |",
        "|---|---|---:|---:|---:|",
    ]
    for name, how, doc, wall in rows:
        cached = sum(1 for p in doc["points"] if p["cached"])
        built = sum(1 for p in doc["points"] if p["built"])
        out.append(f"| {name} | {how} | {wall:.0f} | {cached} | {built} |")
    out += ["", "Ray's results equal the local run's, point for point (name, status, codes): "
            f"{'yes' if same else 'NO'}.",
            "", "Projected wall time from the cold local run's per-point seconds (longest first onto the least loaded"
            " worker; no start-up or transfer costs):", "", "| workers | projected wall s |", "|---:|---:|"]
    for n in (1, 2, 8, 32, 128):
        out.append(f"| {n} | {projected(costs, n):.0f} |")
    slow = sorted(points, key=lambda p: -p["seconds"])[:5]
    out += ["", "The slowest points (the floor of any number of workers):", ""]
    out += [f"- {p['name']}: {p['seconds']:.0f} s ({p['status']})" for p in slow]
    Path(args.out).write_text("\n".join(out) + "\n")
    print("\n".join(out))
    shutil.rmtree(build, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
