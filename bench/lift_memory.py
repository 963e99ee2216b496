"""The lift's states, CPU and memory per residue protocol of the K-symbolic ping-pong GEMMs (issue #36).

`check --symbolic` answers a GEMM with one protocol per residue of its K loop's trip count, and each is
searched by the lift (engines/symbolic/search.py) in one process. This script extracts those protocols
once, with the working tree (`syncverify extract ... --symbolic ... -o DIR`), and runs the lift alone
on the residues asked for, each in a process of its own, under the tree of ``--before`` and under the
working tree: the keys searched, the CPU seconds of the search, the growth of the process's peak
resident set over the search (what the search held at its peak, the tables and caches included) and
that growth per key. Over a search of some 20,000 keys that growth is mostly the bounded tables and
caches of the normalization and the reduction, still filling at its end. So the last column is what
the stored keys themselves hold, per key: the bytes of every object reachable from the search's
table of keys, its list of keys, their parents and counter shifts (and, where the keys are held
packed, their numbered runs and parts: engines/symbolic/packed.py), each object counted once
(sys.getsizeof), at the end of the search, in a run of its own. The same keys under both trees is
part of the answer: the lift's key space does not depend on how a key is stored or which state of
it is searched.

Usage:
    nice -n 5 python3 bench/lift_memory.py --before 8b836f6                 # adds a section to RESULTS-speed.md
    python3 bench/lift_memory.py --before 8b836f6 --gemms 1x1 --out -
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from issue36_table import _symbolic_args, write_section
from search_speed import (
    PP_1X1,
    PP_1X1_BOXES,
    PP_2X1,
    PP_2X1_BOXES,
    ROOT,
    command_line,
    materialize,
    publish,
    tree_at,
)

GEMMS = {
    "1x1": ("gz:sm90_gemm_pingpong_1x1.ptx", PP_1X1, "sm90_gemm_pingpong_1x1_fields_128x128x128.bin", PP_1X1_BOXES,
            "1x2x1"),
    "2x1": ("gz:sm90_gemm_pingpong_2x1.ptx", PP_2X1, "sm90_gemm_pingpong_2x1_fields_256x128x128.bin", PP_2X1_BOXES,
            "2x2x1"),
}

# run in a process of its own under the tree measured: the lift alone on one residue protocol
_LIFT = """
import json, resource, sys, time
from syncverify.engines import periodic
from syncverify.engines.symbolic.search import lifted_search
p = periodic.plan(sys.argv[1], {}, sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF)
out = lifted_search(p, max_states=int(sys.argv[3]), seconds=float(sys.argv[4]))
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"keys": out.states, "complete": out.complete, "errors": len(out.errors),
                  "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                  "growth_mb": (after.ru_maxrss - before.ru_maxrss) / 1024}))
"""


def extract(gemm: str, scratch: Path) -> list[Path]:
    """The GEMM's residue protocols (and those of its small trip counts), extracted with the working tree."""
    source, launch, fields, boxes, grid = GEMMS[gemm]
    ptx = materialize(source, scratch)
    folder = scratch / gemm
    folder.mkdir()
    args = list(_symbolic_args(launch, fields, boxes, grid))
    subprocess.run([sys.executable, "-m", "syncverify", "extract", str(ptx), *args, "-o", str(folder / "g.sync")],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return sorted(folder.glob("*.sync"))


def loop_param(path: Path) -> str | None:
    """The protocol's trip-count parameter (a protocol without one, where no synchronization depends
    on N, is checked as it stands, not lifted)."""
    found = re.search(r"^\s*param (\w+)", path.read_text(), re.M)
    return found[1] if found else None


# the same, the bytes the stored keys hold counted at the end of the search (the search's locals, read
# where it makes its outcome: this tree's names, and those of earlier trees alike)
_HELD = """
import json, sys
from array import array
from syncverify.engines import periodic
from syncverify.engines.symbolic import search


def deep_size(roots):
    seen, total, todo = set(), 0, list(roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            todo += obj.keys()
            todo += obj.values()
        elif isinstance(obj, (tuple, list, set, frozenset)):
            todo += obj
        elif not isinstance(obj, (int, bytes, str, float, array)):
            if hasattr(obj, "__dict__"):
                todo.append(vars(obj))
            todo += [getattr(obj, slot) for kind in type(obj).__mro__ for slot in getattr(kind, "__slots__", ())
                     if hasattr(obj, slot)]
    return total


found = {}
made = search.LiftOutcome


def outcome(*args, **kwargs):
    where = sys._getframe(1).f_locals
    roots = [where[name] for name in ("index", "nodes", "parents", "shifts")]
    table = getattr(where["sh"], "table", None)
    found["held_bytes"] = deep_size(roots + ([table] if table is not None else []))
    found["keys"] = len(where["nodes"])
    return made(*args, **kwargs)


search.LiftOutcome = outcome
p = periodic.plan(sys.argv[1], {}, sys.argv[2])
search.lifted_search(p, max_states=int(sys.argv[3]), seconds=float(sys.argv[4]))
print(json.dumps(found))
"""


def measure(path: Path, param: str, tree: Path, max_states: int, seconds: float, script: str = _LIFT) -> dict:
    got = subprocess.run([sys.executable, "-c", script, str(path), param, str(max_states), str(seconds)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)),
                         cwd=str(tree))  # (`-c` puts the working directory first on the path)
    if got.returncode != 0:
        return {"failed": got.stderr.strip().splitlines()[-1:] or [f"exit {got.returncode}"]}
    return json.loads(got.stdout.strip().splitlines()[-1])


def measure_both(path: Path, param: str, tree: Path, max_states: int, seconds: float) -> tuple[dict, dict]:
    """The lift timed, and again with what its stored keys hold counted."""
    return (measure(path, param, tree, max_states, seconds),
            measure(path, param, tree, max_states, seconds, _HELD))


def _cells(run: dict, held: dict) -> list[str]:
    if "failed" in run:
        return ["failed: " + " ".join(run["failed"]), "", "", "", "", ""]
    per_key = run["growth_mb"] * 2**20 / run["keys"] if run["keys"] else 0.0
    done = "" if run["complete"] else " (not finished)"
    held_per_key = f"{held['held_bytes'] / held['keys']:,.0f}" if held.get("keys") else "—"
    return [f"{run['keys']:,}{done}", f"{run['cpu_s']:.1f}", f"{run['growth_mb']:.0f}", f"{per_key:,.0f}",
            f"{run['keys'] / run['cpu_s']:,.0f}" if run["cpu_s"] else "—", held_per_key]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="main", help="git ref of the tree measured first")
    ap.add_argument("--gemms", default="1x1,2x1", help="which GEMMs (comma-separated: 1x1, 2x1)")
    ap.add_argument("--residues", default="r0", help="the protocols whose tag ends so (comma-separated: r0, kt0, ...)")
    ap.add_argument("--max-states", type=int, default=2_000_000)
    ap.add_argument("--seconds", type=float, default=900.0, help="the lift's time budget per protocol")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-speed.md"),
                    help="Markdown file (the section goes before its first section), or - for stdout")
    args = ap.parse_args()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    command = command_line("lift_memory.py")
    tags = tuple(f"_{t}.sync" for t in args.residues.split(","))
    head = ["GEMM", "protocol"] + [f"{h} ({t})" for t in (args.before, "working tree")
                                   for h in ("keys", "CPU s", "peak growth MB", "B/key", "keys/CPU s",
                                             "B/key held by the keys")]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "ptx"
        scratch.mkdir()
        base = tree_at(args.before, Path(tmp) / "before")
        for gemm in args.gemms.split(","):
            for path in extract(gemm, scratch):
                param = loop_param(path)
                if not path.name.endswith(tags) or param is None:
                    continue
                before = measure_both(path, param, base, args.max_states, args.seconds)
                after = measure_both(path, param, ROOT, args.max_states, args.seconds)
                row = [gemm, path.stem.removeprefix("g_"), *_cells(*before), *_cells(*after)]
                rows.append("| " + " | ".join(row) + " |")
                print(rows[-1], file=sys.stderr, flush=True)
    lines = [f"## {started} UTC: the lift per residue protocol, before ({args.before}) and after", "",
             "```sh", command, "```", "", f"Load at the end: `{os.getloadavg()}`.", "", *rows, ""]
    publish(args.out, "\n".join(lines), write_section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
