"""What checking every assignment of `choose` values costs: the varlen pair's fix at 1..N tiles.

    PYTHONPATH=. python3 bench/choose_cost.py [--tiles 6]

Writes `tests/data/choose/varlen_peeled_guarded.sync` with `param TILES = T` and the prefix
sums of `kv` spelled out for T tiles, then checks it for every assignment of `kv` (3^T) and
pinned to one (`kv=2`), in this process (no interpreter start-up in the times).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from syncverify import load
from syncverify.check import Options, check_protocol

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "data" / "choose" / "varlen_peeled_guarded.sync"


def varlen(tiles: int) -> str:
    """The spec at ``tiles`` tiles: tile t's first block is kv[0] + … + kv[t-1]."""
    prefix = [" + ".join(f"kv[{j}]" for j in range(t)) or "0" for t in range(tiles)]
    base = "".join(f"t == {t} ? {p} : " for t, p in enumerate(prefix[:-1])) + prefix[-1]
    return SPEC.read_text().replace("param TILES = 2;", f"param TILES = {tiles};") \
        .replace("t == 0 ? 0 : kv[0]", base)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=6)
    args = ap.parse_args()
    print("| TILES | assignments | states | every assignment | `kv=2` (one) |")
    print("|---|---|---|---|---|")
    for tiles in range(1, args.tiles + 1):
        text = varlen(tiles)
        start = time.monotonic()
        every = check_protocol(load(text, path=f"varlen_{tiles}.sync"))
        mid = time.monotonic()
        one = check_protocol(load(text, {"kv": 2}, path=f"varlen_{tiles}.sync"), Options(defines={"kv": 2}))
        end = time.monotonic()
        assert every.verdict.value == one.verdict.value == "safe", (every, one)
        print(f"| {tiles} | {3 ** tiles} | {every.stats.states:,} | {mid - start:.2f} s | {end - mid:.2f} s |")


if __name__ == "__main__":
    main()
