"""The real-kernel families (bench/families/), syncverify's explicit engine beside SPIN.

Each point runs syncverify (`check --engine explicit` in its own process) and SPIN on the
model `syncverify export --promela` writes for the same parameters, exactly as
bench/spin_compare.py does for the ring families (its runners and table are reused here).
Points (issue 21): FlashAttention-3's forward mainloop at 1, 2 and 4 warps per MMA
warpgroup; the DeepGEMM-shaped 2-CTA multicast GEMM at 2, 4 and 8 math warps, each without
and with 3 idle warps; the CUTLASS sm_90 cooperative GEMM; and each family's bug variant
(BUG=1), which must be reported as a violation.

Usage:
    python bench/run_families.py                     # writes bench/RESULTS-families.md
    python bench/run_families.py --timeout 60 --only fa3 --out -
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from spin_compare import Point, Row, finished, run_spin_point, run_syncverify, write_md  # noqa: E402

FAM = ROOT / "bench" / "families"


def points() -> list[Point]:
    fa3, gemm, coop = FAM / "fa3_fwd.sync", FAM / "gemm_2cta_multicast.sync", FAM / "cutlass_coop_gemm.sync"
    out = [Point("fa3", fa3, {"W": w}, ("fa3",), "W") for w in (1, 2, 4)]
    out += [Point("fa3 bug", fa3, {"W": w, "BUG": 1}, ("fa3 bug", w), "W") for w in (1, 4)]
    out += [Point("gemm 2cta", gemm, {"MATH": m, "IDLE": i}, ("gemm", i), "MATH") for i in (0, 3) for m in (2, 4, 8)]
    out += [Point("gemm 2cta bug", gemm, {"MATH": m, "IDLE": 3, "BUG": 1}, ("gemm bug", m), "MATH") for m in (2, 8)]
    out += [Point("cutlass coop", coop, {}, ("coop",), ""), Point("cutlass coop bug", coop, {"BUG": 1}, ("coopb",), "")]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per tool per point")
    ap.add_argument("--memlim", type=int, default=4096, help="SPIN's -DMEMLIM (MB)")
    ap.add_argument("--only", default="", help="run the points whose family starts with this")
    ap.add_argument("--no-spin", action="store_true", help="syncverify only")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-families.md"), help="Markdown file, or - for stdout")
    args = ap.parse_args()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    shown = []  # the arguments as given, less --out and its value
    argv = iter(sys.argv[1:])
    for a in argv:
        if a == "--out":
            next(argv, None)
        elif not a.startswith("--out="):
            shown.append(a)
    command = " ".join(["nice -n 10 python bench/run_families.py", *shown])
    rows: list[tuple[Row, str | None, str | None]] = []
    failed: set[tuple] = set()
    with tempfile.TemporaryDirectory(prefix="families_") as tmp:
        work = Path(tmp)
        for pt in points():
            if not pt.family.startswith(args.only):
                continue
            row = Row(pt)
            row.sv = run_syncverify(pt, args.timeout, work)
            spin_skip = "--no-spin" if args.no_spin else None
            if pt.shape in failed:
                spin_skip = "larger than a point SPIN did not finish"
            if not spin_skip:
                row.spin = run_spin_point(pt, args.timeout, args.memlim, work / "spin")
                if not finished(row.spin):
                    failed.add(pt.shape)
            rows.append((row, None, spin_skip))
            sp = "not run" if spin_skip else f"{row.spin['verdict']} {row.spin['states']} {row.spin['wall']:.1f}s"
            print(f"{pt.family:16s} {pt.label():24s} syncverify {row.sv['verdict']} {row.sv['states']} "
                  f"{row.sv['wall']:.1f}s {row.sv['peak']:.0f}MB  SPIN {sp}", flush=True)
    args.quick, args.family = False, None  # what write_md's header reads
    md = write_md(rows, args, started, load, command).replace(
        "# syncverify vs SPIN on the exported Promela model", "# Real-kernel families: syncverify vs SPIN")
    if args.out == "-":
        print(md)
    else:
        Path(args.out).write_text(md)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
