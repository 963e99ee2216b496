"""A fingerprint of what the checker answers, to compare before and after a change that must not
change behaviour (a move of modules, a split of one).

For every .sync file under the given folders, at its own params:
  * the explicit engine, reductions on and off: verdict, each finding (code, line, message), the
    counterexample's steps, the number of states;
  * the bmc engine's Z3 queries at its loop params set to 1, at depths 4 and 8: a hash of the
    solver's assertions (Z3's structural hashes; they cover the static layout and the transition
    relation), or its refusal;
  * the Promela export's text (a hash), or its refusal;
  * the emitted CUDA kernel and its launch description (a hash), or the refusal.
Budgets are deterministic (states), never the wall clock, so two runs of the same code give the
same file.

    python bench/house_invariance.py --out /tmp/before.json specs bench/families tests/data
    python bench/house_invariance.py --out /tmp/after.json specs bench/families tests/data
    python bench/house_invariance.py --compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import importlib
import inspect
import io
import json
import pathlib
import sys
import tempfile
from typing import Any

MAX_STATES = 400_000
MAX_STATES_UNREDUCED = 50_000  # without reductions the big specs explode; the count that stops is fixed
BMC_QUERIES = 2  # the queries at depths 4 and 8


def _first(*paths: str) -> Any:
    """The first importable of ``module:attribute`` names (the harness runs before and after moves)."""
    for path in paths:
        module, _, attribute = path.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {paths}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _explicit(protocol: Any, reduce: bool) -> dict:
    Machine = _first("syncverify.semantics.machine:Machine")
    Budget = _first("syncverify.engines.explicit:Budget")
    explore = _first("syncverify.engines.explicit:explore")
    merge_static = _first("syncverify.engines:merge_static")
    static_findings = _first("syncverify.static.checks:static_findings", "syncverify.staticcheck:static_findings")
    # partial-order reduction: the search's choice (explore's `reduce`) or, before it was, the machine's
    by_search = "reduce" in inspect.signature(explore).parameters
    try:
        machine = Machine(protocol) if by_search else Machine(protocol, reduce=reduce)
    except Exception as err:
        return {"refused": f"{type(err).__name__}: {err}"}
    states = MAX_STATES if reduce else MAX_STATES_UNREDUCED
    if by_search:
        res = explore(protocol, Budget(states, 10_000.0), machine, symmetry=reduce, reduce=reduce)
    else:
        res = explore(protocol, Budget(states, 10_000.0), machine, symmetry=reduce)
    res = merge_static(res, static_findings(protocol, machine.programs))
    return {
        "verdict": str(res.verdict.value),
        "states": res.stats.states,
        "findings": [json.loads(json.dumps(dataclasses.asdict(d), default=str)) for d in res.diagnostics],
    }


def _bmc(path: pathlib.Path) -> dict:
    import z3

    from syncverify import budget
    from syncverify.lang import load

    BMC = _first("syncverify.engines.bmc:BMC")
    Machine = _first("syncverify.semantics.machine:Machine")
    protocol = load(str(path))
    loops = {name: 1 for name in protocol.loop_params}
    if loops:
        protocol = load(str(path), defines=loops)
    hashes: list[str] = []

    def solve(solver: Any, meter: Any = None, units: Any = None) -> tuple:
        # Z3's structural hash of each assertion (the solver's text would be tens of MB on the big specs)
        hashes.append(_digest(",".join(str(a.hash()) for a in solver.assertions()) + f"/{len(solver.assertions())}"))
        return (z3.unsat, "", "") if len(hashes) < BMC_QUERIES else (z3.unknown, "harness", "harness")

    real = budget.solve
    budget.solve = solve
    try:
        engine = BMC(Machine(protocol))
        outcome = engine.run(10_000.0)
    except Exception as err:
        return {"refused": f"{type(err).__name__}: {err}"}
    finally:
        budget.solve = real
    return {"outcome": outcome.verdict if hasattr(outcome, "verdict") else str(outcome)[:200], "queries": hashes,
            "reason": getattr(outcome, "reason", "")[:300]}


def _cli(args: list[str]) -> tuple[int, str]:
    main = _first("syncverify.cli:main", "syncverify.__main__:main")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return code or 0, out.getvalue() + err.getvalue()


def _export(path: pathlib.Path) -> dict:
    code, text = _cli(["export", "--promela", str(path)])
    return {"rc": code, "text": _digest(text)}


def _emit(path: pathlib.Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        target = pathlib.Path(tmp) / "k.cu"
        code, text = _cli(["emit", "-o", str(target), str(path)])
        if code:
            return {"rc": code, "said": text.replace(tmp, "TMP")[-400:]}
        return {"rc": 0, "cu": _digest(target.read_text()), "json": _digest(target.with_suffix(".json").read_text())}


PARTS = ("explicit", "unreduced", "bmc", "promela", "emit")


def fingerprint(path: pathlib.Path, parts: tuple[str, ...] = PARTS) -> dict:
    from syncverify.lang import load

    record: dict = {}
    try:
        protocol = load(str(path))
    except Exception as err:  # a refusal is part of the fingerprint
        return {"load": f"{type(err).__name__}: {err}"}
    makers = {"explicit": lambda: _explicit(protocol, True), "unreduced": lambda: _explicit(protocol, False),
              "bmc": lambda: _bmc(path), "promela": lambda: _export(path), "emit": lambda: _emit(path)}
    for part in parts:
        record[part] = makers[part]()
    return record


def compare(before: dict, after: dict) -> int:
    """Every part of every file fingerprinted in ``after`` against ``before`` (a run of some parts
    or some files is compared on those)."""
    differences = 0
    for name in sorted(after):
        for part in sorted(after[name]):
            a, b = before.get(name, {}).get(part), after.get(name, {}).get(part)
            if a != b:
                differences += 1
                print(f"DIFFERS {name} {part}\n  before: {json.dumps(a)[:600]}\n  after:  {json.dumps(b)[:600]}")
    total = sum(len(v) for v in after.values())
    print(f"{len(after)} files, {total} parts compared; {differences} differ")
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*")
    parser.add_argument("--out")
    parser.add_argument("--compare", nargs=2)
    parser.add_argument("--only", default="", help="a substring of the paths to fingerprint")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"a comma-separated subset of {PARTS}")
    args = parser.parse_args()
    if args.compare:
        return compare(*(json.loads(pathlib.Path(p).read_text()) for p in args.compare))
    files = sorted(f for folder in args.folders for f in pathlib.Path(folder).rglob("*.sync") if args.only in str(f))
    result = {}
    for f in files:
        print(f, file=sys.stderr, flush=True)
        result[str(f)] = fingerprint(f, tuple(args.parts.split(",")))
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
