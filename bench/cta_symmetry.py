"""States with and without the symmetry over CTAs (semantics/symmetry_cta.py) on grids.

For each case: the CTA classes proved (or why none), then the explicit search with the plain swaps
only (main's default before CTA symmetry) and with CTA symmetry (today's default), both with
partial-order reduction: states, CPU seconds (time.process_time), verdict and findings (code, line).

    PYTHONPATH=$PWD python3 bench/cta_symmetry.py            # the grid specs of specs/ and the grid barrier
    PYTHONPATH=$PWD python3 bench/cta_symmetry.py --max-states 400000
    PYTHONPATH=$PWD python3 bench/cta_symmetry.py --clusters # the cluster specs of specs/, bench/families and
                                                             # tests/data/symmetry_cta (remote ranks renamed)
    PYTHONPATH=$PWD python3 bench/cta_symmetry.py --ptx      # the classes of the extracted cluster kernels only

``--ptx`` extracts the 2x1 ping-pong and cooperative GEMMs and DeepGEMM with multicast 2 (the launches of
bench/search_speed.py and tests/test_ptx_deepgemm.py) and prints their CTA classes or why there are none;
where there are none, their search is the plain one, which bench/search_speed.py measures.
"""

from __future__ import annotations

import argparse
import pathlib
import time

from syncverify.engines import witness
from syncverify.engines.explicit import Budget, search
from syncverify.lang import load
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry_cta import cta_classes, cta_symmetry
from syncverify.semantics.symmetry_perm import symmetry_for

ROOT = pathlib.Path(__file__).resolve().parent.parent
BARRIER = ROOT / "tests" / "data" / "symmetry_cta" / "grid_barrier_4cta.sync"
LEADER = ROOT / "tests" / "data" / "symmetry_cta" / "cluster_leader_dsmem.sync"


def cases() -> list[tuple[pathlib.Path, dict[str, int]]]:
    grid = sorted(p for p in (ROOT / "specs").glob("*.sync")
                  if any(line.strip().startswith("grid ") for line in p.read_text().splitlines()))
    out: list[tuple[pathlib.Path, dict[str, int]]] = [(p, {}) for p in grid]
    out += [(BARRIER, {"CTAS": 4}), (BARRIER, {"CTAS": 8}), (BARRIER, {"CTAS": 4, "ROUNDS": 2})]
    reset = ROOT / "specs" / "flashinfer_grid_barrier_reset_fixed.sync"
    out += [(reset, {"CTAS": 4, "ROUNDS": 1})]
    return out


def cluster_cases() -> list[tuple[pathlib.Path, dict[str, int]]]:
    """Every spec of specs/ and bench/families that declares a cluster of two CTAs or more, and the
    cluster programs of tests/data/symmetry_cta."""
    def clustered(p: pathlib.Path) -> bool:
        return any(line.split("//")[0].strip().startswith("cluster ") and not line.strip().startswith("cluster 1;")
                   for line in p.read_text().splitlines())
    found = sorted(p for folder in (ROOT / "specs", ROOT / "bench" / "families") for p in folder.glob("*.sync")
                   if clustered(p))
    out: list[tuple[pathlib.Path, dict[str, int]]] = [(p, {}) for p in found]
    out += [(p, {}) for p in sorted((ROOT / "tests" / "data" / "symmetry_cta").glob("cluster_*.sync"))]
    out += [(LEADER, {"LATE": 1}), (LEADER, {"ITERS": 4}), (LEADER, {"ITERS": 8})]
    return out


def ptx_classes() -> None:
    """The CTA classes of the extracted cluster kernels (extraction only: no search)."""
    import gzip
    import sys
    import tempfile

    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
    import search_speed as speed  # (the launch arguments of the GEMM cases)
    import test_ptx_deepgemm as deepgemm

    from syncverify.cli import main as cli
    kernels = [("pingpong 2x1 K=128", "sm90_gemm_pingpong_2x1.ptx.gz",
                speed._kernel_args(speed.PP_2X1, "sm90_gemm_pingpong_2x1_fields_256x128x128.bin", speed.PP_2X1_BOXES)),
               ("coop 2x1 K=128", "sm90_gemm_coop_2x1.ptx.gz",
                speed._kernel_args(speed.COOP_2X1, "sm90_gemm_coop_2x1_fields_256x128x128.bin", speed.COOP_BOXES)),
               ("DeepGEMM sm90 fp8 1d2d, multicast 2", "deepgemm_sm90_fp8_1d2d.ptx.gz", deepgemm.ARGS)]
    print("| kernel | CTA classes |")
    print("|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, gz, args in kernels:
            ptx = pathlib.Path(scratch) / gz.removesuffix(".gz")
            ptx.write_bytes(gzip.decompress((speed.DATA / gz).read_bytes()))
            out = ptx.with_suffix(".sync")
            assert cli(["extract", str(ptx), *args, "-o", str(out)]) == 0, name
            classes, rejected = cta_classes(Machine(load(str(out), {})))
            what = "; ".join("{" + ", ".join(map(str, sorted(m))) + "}" for m, _ in classes) or \
                f"none ({'; '.join(rejected[:2])})"
            print(f"| {name} | {what} |", flush=True)


def run(path: pathlib.Path, params: dict[str, int], cta: bool, max_states: int) -> tuple[int, float, str, str]:
    machine = Machine(load(str(path), params))
    sym = (cta_symmetry(machine) if cta else None) or symmetry_for(machine, permuted=False)
    t0 = time.process_time()
    out = search(machine, Budget(max_states, 3600.0), sym)
    cpu = time.process_time() - t0
    found = sorted({(d.code, d.span.line if d.span else 0) for d in
                    (witness.diagnostic(machine, v, labels, False, sym) for v, labels in out.errors)})
    verdict = ("violation" if out.errors else "safe") if out.complete else f"inconclusive ({out.states:,})"
    return out.states, cpu, verdict, " ".join(f"{c}@{ln}" for c, ln in found) or "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-states", type=int, default=400_000)
    ap.add_argument("--clusters", action="store_true", help="the cluster specs instead of the grids")
    ap.add_argument("--ptx", action="store_true", help="the CTA classes of the extracted cluster kernels")
    args = ap.parse_args()
    if args.ptx:
        ptx_classes()
        return
    print("| spec | params | CTA classes | plain: states | plain: CPU s | CTA: states | CTA: CPU s | verdict (both) "
          "| findings (both) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, params in (cluster_cases() if args.clusters else cases()):
        machine = Machine(load(str(path), params))
        classes, rejected = cta_classes(machine)
        what = "; ".join("{" + ", ".join(map(str, sorted(m))) + "}" for m, _ in classes) or \
            (f"none ({rejected[0]})" if rejected else "none (no two CTAs of one shape)")
        a = run(path, params, False, args.max_states)
        b = run(path, params, True, args.max_states) if classes else a
        same = a[2:] == b[2:]
        verdict = a[2] if same else f"{a[2]} / {b[2]}"
        found = a[3] if same else f"{a[3]} / {b[3]}"
        pstr = ", ".join(f"{k}={v}" for k, v in params.items()) or "-"
        print(f"| {path.name} | {pstr} | {what} | {a[0]:,} | {a[1]:.2f} | {b[0]:,} | {b[1]:.2f} | {verdict} "
              f"| {found} |", flush=True)


if __name__ == "__main__":
    main()
