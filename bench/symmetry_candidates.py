"""Which automorphisms (semantics/symmetry_perm.py) the search's kernels have, and why each
rejected candidate is not one.

For each case of bench/search_speed.py (and example 88's FMHA at one Q tile and one K/V tile), the
machine `syncverify check` builds is taken at the point the explicit search would start, and every
candidate is verified. Prints one block per case: the proved automorphisms (what each moves) and
the distinct reasons of the rejected candidates, with how many were rejected for each.

    python3 bench/symmetry_candidates.py                 # every case
    python3 bench/symmetry_candidates.py --only pingpong
"""

from __future__ import annotations

import argparse
import collections
import gzip
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import search_speed  # noqa: E402

import syncverify.engines.explicit as explicit  # noqa: E402
from syncverify.cli import main  # noqa: E402
from syncverify.semantics.symmetry_perm import automorphisms  # noqa: E402


class _Taken(Exception):
    pass


def machine_of(path: Path, args: list[str]):
    """The machine the explicit search of `check path args` would run on."""
    taken = {}

    def take(protocol, budget, machine, *a, **k):
        taken["machine"] = machine
        raise _Taken

    saved = explicit.explore  # (engines._run imports it at each call)
    explicit.explore = take
    try:
        main(["check", "--engine", "explicit", str(path), *args])
    except (_Taken, SystemExit):
        pass
    finally:
        explicit.explore = saved
    return taken.get("machine")


def report(name: str, machine) -> None:
    print(f"== {name}")
    if machine is None:
        print("   (no machine: the check ended before the search)")
        return
    autos, rejected = automorphisms(machine)
    for g in autos:
        print(f"   automorphism: {len(g.procs)} processes, {len(g.slots)} slots, {len(g.mbars)} mbarriers, "
              f"{len(g.named)} named barriers, {len(g.lines)} lines moved")
    for why, n in collections.Counter(rejected).most_common():
        print(f"   rejected ({n}): {why}")


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for case in search_speed.cases():
            if opts.only in case.name:
                report(case.name, machine_of(search_speed.materialize(case.source, scratch), list(case.args)))
        if opts.only in "fmha":
            ptx = scratch / "fmha_hopper_fwd_ws_64.ptx"
            ptx.write_bytes(gzip.decompress((search_speed.DATA / "fmha_hopper_fwd_ws_64.ptx.gz").read_bytes()))
            report("fmha 1,1,128,128,64", machine_of(ptx, ["--cutlass-fmha", "1,1,128,128,64"]))


if __name__ == "__main__":
    run()
