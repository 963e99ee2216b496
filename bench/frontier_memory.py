"""Where an explicit search's memory is, part by part, when it stops at a state budget (issue #36).

The search (engines/explicit.py) keeps: the visited set of packed states (engines/store.py's
``Visited._packed``), the tables that number the parts, each state's parent link and step label
(``Parents``), the frontier (the queue of states waiting to be expanded) and the cache of the two
levels' whole states (``Visited._level``, ``Visited._previous``). This script runs one check in
process, keeps those objects when the search ends (it wraps ``Visited`` and the queue's ``deque`` in
engines/explicit.py to hold on to them), and sizes each part by walking its objects with
``sys.getsizeof``: each object counted once, in the first part that reaches it, in the order the
table lists them (the tables first: the parts the states share), so a part's bytes are what it
holds beyond the parts above it.

Usage:
    PYTHONPATH=$PWD python3 bench/frontier_memory.py SPEC --max-states 100000
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import deque
from types import FunctionType, ModuleType

from syncverify.engines import explicit, store
from syncverify.lang import load
from syncverify.options import Options


def deep_size(root: object, seen: set[int]) -> int:
    """The bytes of ``root`` and of every object it reaches that ``seen`` does not hold yet (added)."""
    total = 0
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, ModuleType, FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--max-states", type=int, default=100_000)
    args = ap.parse_args()
    kept: dict[str, object] = {}

    class KeptVisited(store.Visited):
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, **k)
            kept["visited"] = self

    class KeptDeque(deque):
        def __init__(self, *a: object) -> None:
            super().__init__(*a)
            kept.setdefault("queue", self)

    class KeptParents(explicit.Parents):
        def __init__(self) -> None:
            super().__init__()
            kept["parents"] = self

    explicit.Visited, explicit.deque, explicit.Parents = KeptVisited, KeptDeque, KeptParents  # type: ignore[misc]
    from syncverify.check import check_protocol
    protocol = load(args.spec)
    t0 = time.process_time()
    result = check_protocol(protocol, Options(engine="explicit", max_states=args.max_states, timeout=100_000,
                                              max_memory_mb=100_000))
    cpu = time.process_time() - t0
    visited, queue, parents = kept["visited"], kept["queue"], kept["parents"]
    vs = visited.store  # type: ignore[attr-defined]
    states = len(visited)  # type: ignore[arg-type]
    print(f"{args.spec}: {result.verdict.value}, {states} states, frontier {len(queue)} "  # type: ignore[arg-type]
          f"({100 * len(queue) / states:.0f}%), {cpu:.1f} CPU s, search's peak {result.stats.peak_mb:.0f} MB")
    seen: set[int] = {id(vs)}
    tables = {name: getattr(vs, name) for name in ("procs", "mbars", "named", "cluster", "agents", "tmem",
                                                    "record_table")}
    tables["chunks"] = vs.records.chunks
    parts: list[tuple[str, object]] = [*(("table " + n, t) for n, t in tables.items()),
                                       ("visited set (packed)", visited._packed),  # type: ignore[attr-defined]
                                       ("parents and labels", parents),
                                       ("frontier (queue)", queue)]
    parts += [(f"level cache {name}", getattr(visited, name)) for name in ("_level", "_previous", "_records",
                                                                           "_previous_records")
              if hasattr(visited, name)]
    total = 0
    print(f"{'part':32} {'MB':>9} {'B/state':>9}")
    for name, obj in parts:
        size = deep_size(obj, seen)
        total += size
        print(f"{name:32} {size / 1e6:9.1f} {size / states:9.0f}")
    print(f"{'total':32} {total / 1e6:9.1f} {total / states:9.0f}")

if __name__ == "__main__":
    main()
