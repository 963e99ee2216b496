"""What a stored state costs, part by part: the explicit search's store after a check (issue #36).

issue36_table.py reports bytes per stored state as the search's resident growth over its states. That
growth holds more than the store: the tables the search keeps to save work (the knowledge updates it
remembers, semantics/state.py; the reduction's tables) and what the allocator keeps of memory freed. This
script runs each case of issue #36's table that it is asked for, each in a process of its own, and then
measures the objects the search's store (engines/store.py) holds, each object once, in this order: the packed states
(the visited set), each table of parts (its dict, its list, its values and what they alone hold), and the
remembered knowledge updates. Sizes are `sys.getsizeof` summed over the objects reached
(`gc.get_referents`), an object reached from an earlier part not counted again; classes, modules and
functions are not counted. The resident growth it also reports is the search's own figure in that
process, which imported this script's modules as well: memory they freed is reused, so it can read below
the `syncverify check` command's (issue36_table.py's column).

Usage:
    python3 bench/state_bytes.py --only "CuTe-DSL 2-CTA blockscaled GEMM (12"   # adds a section to RESULTS-speed.md
    python3 bench/state_bytes.py --only "coop 2x1 K=448" --out -
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from issue36_table import rows, write_section
from search_speed import ROOT, command_line, materialize, publish

from syncverify import cli
from syncverify.engines import explicit
from syncverify.semantics import state as state_mod

_NOT_COUNTED = (type, type(sys), type(len), type(rows))


class _Sizes:
    """Deep sizes, each object counted once across every call."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def __call__(self, root: object) -> int:
        total, stack = 0, [root]
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or isinstance(obj, _NOT_COUNTED):
                continue
            self.seen.add(id(obj))
            total += sys.getsizeof(obj)
            stack.extend(gc.get_referents(obj))
        return total


def measure(name: str, args: list[str]) -> tuple[dict, list[tuple[str, int]]]:
    """Check one case in this process; its stats and the store's parts, in bytes."""
    kept: list = []

    class Kept(explicit.Visited):
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            kept.append(self)

    explicit.Visited, original = Kept, explicit.Visited
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            try:
                cli.main(["check", *args, "--engine", "explicit", "--format", "json", "-q",
                          "--timeout", "100000", "--max-memory", "100000"])
            except SystemExit:
                pass
    finally:
        explicit.Visited = original
    result = json.loads(out.getvalue())["results"][0]
    if len(kept) != 1:
        raise SystemExit(f"{name}: {len(kept)} searches, not one (a --symbolic case is several)")
    visited = kept[0]
    store = visited.store
    size = _Sizes()
    parts = [("visited set (packed states)", size(visited._packed))]
    for label, table in [("processes", store.procs), ("access records", store.record_table),
                         ("record chunks", store.records.chunks), ("mbarriers", store.mbars),
                         ("named barriers", store.named), ("cluster barrier", store.cluster),
                         ("agents in flight", store.agents), ("tensor memory", store.tmem)]:
        parts.append((f"{label} ({len(table.value):,} values)", size(table)))
    parts.append(("the two levels' cache", size(visited._level) + size(visited._previous) + size(visited._records)
                  + size(visited._previous_records)))
    parts.append((f"remembered knowledge updates ({len(state_mod._knowledge_memo):,})",
                  size(state_mod._knowledge_memo)))
    return result, parts


def _one(name: str) -> None:
    """Measure the case named, alone in this process; its stats and parts as JSON on stdout."""
    cli.collect_less()  # as the command sets the collector
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "ptx"
        scratch.mkdir()
        row = next(r for r in rows(scratch, 60, 600) if r.case.name == name)
        path = materialize(row.case.source, scratch)
        result, parts = measure(name, [str(path), *row.case.args])
    print(json.dumps({"verdict": result["verdict"], "stats": result["stats"], "parts": parts}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="the cases whose name contains this "
                    "(repeatable)")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process (what --only runs each in)
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-speed.md"),
                    help="Markdown file (the section goes before its first section), or - for stdout")
    args = ap.parse_args()
    if args.case:
        _one(args.case)
        return 0
    if not args.only:
        ap.error("name the cases with --only")
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    lines = [f"## {started} UTC: what a stored state costs, part by part", "", "```sh",
             command_line("state_bytes.py"), "```", ""]
    with tempfile.TemporaryDirectory() as tmp:
        names = [r.case.name for r in rows(Path(tmp), 60, 600) if any(o in r.case.name for o in args.only)]
    for name in names:
        done = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True,
                              check=True, cwd=ROOT)
        one = json.loads(done.stdout)
        parts = [(label, b) for label, b in one["parts"]]
        states, growth = one["stats"]["states"], one["stats"]["peak_mb"]
        lines += [f"**{name}**: {one['verdict']}, {states:,} states; the search's resident growth "
                  f"in this process {growth:.1f} MB, {growth * 2**20 / states:,.0f} B a stored state.", "",
                  "| part | MB | bytes a stored state |", "|---|---:|---:|"]
        lines += [f"| {label} | {b / 2**20:.2f} | {b / states:,.0f} |" for label, b in parts]
        total = sum(b for _, b in parts)
        lines += [f"| **all of these** | **{total / 2**20:.2f}** | **{total / states:,.0f}** |", ""]
        print(f"{name}: {total / states:,.0f} B a state in these parts, {growth * 2**20 / states:,.0f} resident",
              file=sys.stderr, flush=True)
    publish(args.out, "\n".join(lines), write_section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
