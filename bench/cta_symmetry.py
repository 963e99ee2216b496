"""States with and without the symmetry over CTAs (semantics/symmetry_cta.py) on grids.

For each case: the CTA classes proved (or why none), then the explicit search with the plain swaps
only (main's default before CTA symmetry) and with CTA symmetry (today's default), both with
partial-order reduction: states, CPU seconds (time.process_time), verdict and findings (code, line).

    PYTHONPATH=$PWD python3 bench/cta_symmetry.py            # the grid specs of specs/ and the grid barrier
    PYTHONPATH=$PWD python3 bench/cta_symmetry.py --max-states 400000
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


def cases() -> list[tuple[pathlib.Path, dict[str, int]]]:
    grid = sorted(p for p in (ROOT / "specs").glob("*.sync")
                  if any(line.strip().startswith("grid ") for line in p.read_text().splitlines()))
    out: list[tuple[pathlib.Path, dict[str, int]]] = [(p, {}) for p in grid]
    out += [(BARRIER, {"CTAS": 4}), (BARRIER, {"CTAS": 8}), (BARRIER, {"CTAS": 4, "ROUNDS": 2})]
    reset = ROOT / "specs" / "flashinfer_grid_barrier_reset_fixed.sync"
    out += [(reset, {"CTAS": 4, "ROUNDS": 1})]
    return out


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
    args = ap.parse_args()
    print("| spec | params | CTA classes | plain: states | plain: CPU s | CTA: states | CTA: CPU s | verdict (both) "
          "| findings (both) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, params in cases():
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
