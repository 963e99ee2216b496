"""The Z3 bounded model checker beside the explicit engine on every spec in specs/.

Each spec runs with its loop-bound params at 1 (the smallest trip count; the BMC depth
grows with every operation) and, with --native, also at its own params. Both engines get
the same params; the table shows both verdicts, whether they agree where both decided,
the BMC depth bound and the seconds.

    python bench/run_bmc_specs.py --seconds 40 --out bench/RESULTS-bmc.md
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from syncverify.check import Options, check_protocol  # noqa: E402
from syncverify.engines.bmc import BMC, Unsupported  # noqa: E402
from syncverify.lang import load  # noqa: E402
from syncverify.semantics.machine import Machine  # noqa: E402

CONCLUSIVE = ("safe", "violation")


def run(path: Path, defines: dict[str, int], seconds: float) -> dict:
    protocol = load(str(path), defines=defines)
    row: dict = {"spec": path.stem, "params": ", ".join(f"{k}={v}" for k, v in defines.items()) or "as written"}
    t = time.monotonic()
    ref = check_protocol(protocol, Options(engine="explicit", timeout=seconds))
    row["explicit"] = (ref.verdict.value, sorted(ref.codes() & {d.code for d in ref.diagnostics if d.is_error}),
                       time.monotonic() - t)
    try:
        row["depth"] = BMC(Machine(protocol)).depth_bound()
    except Unsupported as why:
        row["depth"] = f"unsupported: {why}"
    t = time.monotonic()
    res = check_protocol(protocol, Options(engine="bmc", timeout=seconds))
    row["bmc"] = (res.verdict.value, sorted(d.code for d in res.diagnostics if d.is_error), time.monotonic() - t,
                  res.coverage)
    both = ref.verdict.value in CONCLUSIVE and res.verdict.value in CONCLUSIVE
    row["agree"] = ("yes" if ref.verdict == res.verdict else "**NO**") if both else "—"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--native", action="store_true", help="also run every spec at its own params")
    ap.add_argument("--only", nargs="+", metavar="SPEC", help="these specs (file stems) only")
    ap.add_argument("--skip", nargs="+", metavar="SPEC", default=[], help="leave these specs out")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    start = time.monotonic()
    for path in sorted((ROOT / "specs").glob("*.sync")):
        if (args.only and path.stem not in args.only) or path.stem in args.skip:
            continue
        protocol = load(str(path))
        small = {name: 1 for name in protocol.loop_params}
        variants = [small] + ([{}] if args.native and small else [])
        for defines in variants:
            row = run(path, defines, args.seconds)
            rows.append(row)
            print(row["spec"], row["params"], row["explicit"][0], "| bmc", row["bmc"][0], f"{row['bmc'][2]:.1f}s",
                  row["agree"], flush=True)
    wall = time.monotonic() - start
    decided = [r for r in rows if r["agree"] != "—"]
    lines = [
        "# The Z3 bounded model checker on the specs",
        "",
        f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, Python "
        f"{platform.python_version()}, the shared 2-core development machine; {args.seconds:g} s per engine and spec.",
        "",
        f"Command: `python bench/run_bmc_specs.py {' '.join(sys.argv[1:])}`",
        "",
        f"Both engines conclusive on {len(decided)} of {len(rows)} runs; they agree on "
        f"{sum(r['agree'] == 'yes' for r in decided)}, disagree on {sum(r['agree'] != 'yes' for r in decided)}. "
        f"Wall {wall / 60:.1f} min.",
        "",
        "| spec | params | explicit | s | bmc depth | bmc | s | agree | bmc note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ev, ec, et = r["explicit"]
        bv, bc, bt, note = r["bmc"]
        depth = r["depth"] if isinstance(r["depth"], int) else "—"
        lines.append(f"| {r['spec']} | {r['params']} | {ev} {' '.join(ec)} | {et:.1f} | {depth} | {bv} {' '.join(bc)} "
                     f"| {bt:.1f} | {r['agree']} | {note[:90]} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 1 if any(r["agree"] == "**NO**" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
