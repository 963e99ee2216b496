"""Differential test of the all-iterations lift: its claim against the explicit engine, trip count by trip count.

Protocols come from `tests/strategies.random_trip_protocol(seed)`: rings whose params are
derived from ITERS (min, max, equalities, comparisons, divisions, prologue and tail
lengths) and feed conditions, barrier counts and loop bounds, with first-iteration
arrivals and counter expressions that may exceed 2^62. Each is checked with
`--engine z3` (the lift alone). Then:

* `safe` with an `all-iterations` bound: the explicit engine runs at every trip count
  from 0 to the periodic search's start + its threshold K + three periods P (capped by
  the bound's upper limit, if it has one). Every one must be safe, or not valid input
  and left out by the bound. Anything else is a disagreement.
* Each warning the explicit engine reports at a trip count compared (its code and line) must be among the
  lift's: a warning the lift leaves out is a `--strict` violation answered safe. A warning of the lift the
  explicit engine meets at no trip count compared is counted (it may lie beyond them), not a disagreement.
* `violation` at `ITERS=n`: the explicit engine at n must find a violation too.
* `inconclusive`: counted with its reason (the lift refused, or a budget ran out).

    nice -n 10 python3 bench/lift_differential.py --count 300 --out bench/DIFFERENTIAL-lift.md
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from strategies import random_trip_protocol  # noqa: E402

from syncverify.check import Options, check_protocol  # noqa: E402
from syncverify.diagnostics import InputError, Severity, code_and_line  # noqa: E402
from syncverify.engines import periodic  # noqa: E402
from syncverify.engines.explicit import Budget, explore  # noqa: E402
from syncverify.lang import load  # noqa: E402
from syncverify.result import Verdict  # noqa: E402
from syncverify.semantics.machine import Machine  # noqa: E402


def _excluded(bound: str, n: int) -> bool:
    """Does an all-iterations bound leave trip count n out (`ITERS >= m`, `ITERS != a, b`, `ITERS <= u`)?"""
    inside = bound[bound.find("(") + 1:bound.find(")")] if "(" in bound else ""
    if m := re.search(r">= (\d+)", inside):
        if n < int(m.group(1)):
            return True
    if m := re.search(r"!= ([\d, ]+?)(?:, \w+ [<>]|$)", inside):
        if n in {int(x) for x in m.group(1).split(",") if x.strip()}:
            return True
    if m := re.search(r"<= (\d+)", inside):
        if n > int(m.group(1)):
            return True
    return False


def _chosen_plan(protocol) -> periodic.Plan:
    """The plan of the param the lift lifts (the first that qualifies, as ``symbolic.lift`` picks it)."""
    for param in periodic.liftable_params(protocol):
        try:
            return periodic.plan(protocol.source, {}, param, source_path=protocol.path)
        except periodic.Refusal:
            continue
    raise AssertionError("an all-iterations verdict without a plan")


def run_seed(seed: int, max_states: int = 100_000, seconds: float = 60.0) -> dict:
    """The lift's answer on the protocol of one seed and the explicit engine's at the trip counts it covers."""
    return {"seed": seed, **run_text(random_trip_protocol(seed), f"seed{seed}.sync", max_states, seconds)}


def run_text(text: str, path: str, max_states: int = 100_000, seconds: float = 60.0) -> dict:
    """The lift's answer on one protocol and the explicit engine's at the trip counts it covers."""
    protocol = load(text, path=path)
    result = check_protocol(protocol, Options(engine="z3", max_states=max_states, timeout=seconds))
    row: dict = {"verdict": result.verdict.value, "bound": result.bound, "coverage": result.coverage,
                 "checked": [], "invalid": [], "disagree": "", "explicit_inconclusive": [],
                 "warnings": sorted(_warnings(result)), "warnings_unseen": []}
    seen: set[tuple[str, int]] = set()
    if result.verdict is Verdict.SAFE and result.bound.startswith("all-iterations"):
        plan = _chosen_plan(protocol)
        param = plan.param
        row["param"] = param
        top = plan.min_iters + plan.threshold + 3 * plan.period
        if getattr(plan, "max_iters", None) is not None:
            top = min(top, plan.max_iters)
        for n in range(top + 1):
            try:
                concrete = load(text, {param: n}, path=protocol.path)
            except InputError:
                row["invalid"].append(n)
                if not _excluded(result.bound, n):
                    row["disagree"] = f"{param}={n} is not valid input, but the bound {result.bound!r} covers it"
                continue
            explicit = explore(concrete, Budget(max_states, seconds), Machine(concrete))
            if explicit.verdict is Verdict.VIOLATION:
                row["disagree"] = (f"all-iterations safe, explicit at {param}={n}: violation "
                                   f"{sorted(explicit.codes())}")
                break
            if explicit.verdict is Verdict.INCONCLUSIVE:
                row["explicit_inconclusive"].append(n)
                continue
            row["checked"].append(n)
            warned = _warnings(explicit)
            missed = warned - set(row["warnings"])
            if missed:
                row["disagree"] = f"all-iterations safe, explicit at {param}={n} warns {sorted(missed)}, the lift not"
                break
            seen |= warned
        if not row["disagree"] and not row["explicit_inconclusive"]:
            row["warnings_unseen"] = sorted(set(row["warnings"]) - seen)
    elif result.verdict is Verdict.VIOLATION and "=" in result.bound:
        param, value = result.bound.split(", ")[-1].split("=")
        n = int(value)
        concrete = load(text, {param: n}, path=protocol.path)
        explicit = explore(concrete, Budget(max_states, seconds), Machine(concrete))
        row["checked"].append(n)
        if explicit.verdict is not Verdict.VIOLATION:
            row["disagree"] = f"violation at ITERS={n}, explicit there: {explicit.verdict.value}"
    return row


def _warnings(result) -> set[tuple[str, int]]:  # type: ignore[no-untyped-def]
    """A result's warnings, each as its code and line."""
    return {code_and_line(d) for d in result.diagnostics if d.severity is Severity.WARNING}


def _reason(coverage: str) -> str:
    """A refusal's reason without its particulars (lines, params, numbers), for the tally."""
    text = re.sub(r"`\w+`", "`P`", coverage)
    text = re.sub(r"\d+", "N", text)
    return text[:140]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--max-states", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    start = time.monotonic()
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.count):
        row = run_seed(seed, args.max_states, args.seconds)
        rows.append(row)
        if row["disagree"]:
            print(f"seed {seed}: DISAGREE {row['disagree']}\n{random_trip_protocol(seed)}", flush=True)
    elapsed = time.monotonic() - start
    verdicts = collections.Counter((r["verdict"], "all-iterations" if r["bound"].startswith("all-iterations")
                                    else ("ITERS=n" if r["bound"] else "")) for r in rows)
    reasons = collections.Counter(_reason(r["coverage"]) for r in rows if r["verdict"] == "inconclusive")
    bad = [r for r in rows if r["disagree"]]
    checked = sum(len(r["checked"]) for r in rows)
    ranged = collections.Counter(r["bound"] for r in rows if r["bound"].startswith("all-iterations ("))
    lines = [
        "# Differential test of the all-iterations lift (trip-count-derived protocols)",
        "",
        "Reproduce:",
        "",
        "```",
        f"nice -n 10 python3 bench/lift_differential.py --count {args.count} --first-seed {args.first_seed} "
        f"--max-states {args.max_states} --seconds {args.seconds:g}" + (f" --out {args.out}" if args.out else ""),
        "```",
        "",
        "Protocols: `tests/strategies.random_trip_protocol(seed)`. Each is checked with `--engine z3`; every",
        "`all-iterations` safe is compared with the explicit engine at each trip count from 0 to the",
        "periodic search's start + K + 3P (capped by the bound's upper limit); every violation at `ITERS=n`",
        "with the explicit engine at n. A trip count the protocol is not valid input at must be left out",
        "by the bound.",
        "",
        f"* protocols: {len(rows)} (seeds {args.first_seed}..{args.first_seed + args.count - 1}), "
        f"{elapsed:.0f} s on this machine",
        f"* explicit runs compared: {checked}",
        f"* **disagreements: {len(bad)}**",
        f"* trip counts left out as invalid input (and so named by the bound): "
        f"{sum(len(r['invalid']) for r in rows)}",
        f"* explicit runs out of budget (not compared): {sum(len(r['explicit_inconclusive']) for r in rows)}",
        f"* all-iterations safes with warnings (their codes and lines compared): "
        f"{sum(1 for r in rows if r['warnings'] and r['bound'].startswith('all-iterations'))}; warnings of the lift "
        f"the explicit engine met at no trip count compared: {sum(len(r['warnings_unseen']) for r in rows)}",
        "",
        "| lift verdict | bound | protocols |",
        "|---|---|---|",
        *[f"| {v} | {b or '—'} | {n} |" for (v, b), n in sorted(verdicts.items())],
        "",
        "All-iterations bounds with a range:",
        "",
        *([f"* `{b}`: {n}" for b, n in sorted(ranged.items())] or ["* none"]),
        "",
        "Why the lift did not decide (inconclusive):",
        "",
        *([f"* {n} × {r}" for r, n in reasons.most_common()] or ["* none"]),
        "",
    ]
    if bad:
        lines += ["## Disagreements", ""] + [f"* seed {r['seed']}: {r['disagree']}" for r in bad] + [""]
    report = "\n".join(lines)
    if args.out:
        args.out.write_text(report)
    print(report)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
