"""Differential testing on random protocols: every available engine against the explicit engine.

Protocols come from tests/strategies.py (`random_protocol(seed)` for seeds
0..N-1, so any row is reproduced from its seed). The reference is the
explicit engine with its reductions; the others are listed in
tests/diff_engines.py (the explicit engine without partial-order reduction,
without symmetry, without either; the all-iterations engine; SPIN through
the Promela export), each joining when it is part of the installed version.
SPIN costs seconds per protocol (spin, a C compile, pan), so it runs on every
``--spin-every``-th protocol. Every disagreement is written to
tests/data/differential/ as a spec with its seed, to become a regression test.

    nice -n 19 python bench/differential.py --count 1000 --out bench/DIFFERENTIAL.md
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from diff_engines import compare, engines, family  # noqa: E402
from strategies import random_async_protocol, random_protocol  # noqa: E402

import syncverify  # noqa: E402

DISAGREEMENTS = ROOT / "tests" / "data" / "differential"
# `mixed`: the patterns of tests/strategies.py PATTERNS; `async`: its asynchronous-copy stress protocols
GENERATORS = {"mixed": random_protocol, "async": random_async_protocol}


def _shown(path: Path | None) -> Path | None:
    """The --out path as the command line in the report shows it: relative to the repository
    where it lies inside it."""
    if path is None or not path.is_absolute():
        return path
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def run_seed(seed: int, args: argparse.Namespace) -> dict:
    """Every active engine on the protocol of one seed, compared with the reference."""
    text = GENERATORS[args.generator](seed)
    protocol = syncverify.load(text, path=f"seed{seed}.sync")
    active = active_engines(args)
    ref_engine = next(e for e in active if e.reference)
    ref = ref_engine.run(protocol, args.max_states, args.seconds)
    out: dict = {"seed": seed, "pattern": protocol.name, "text": text, "ref": ref, "others": {}}
    for engine in active:
        if engine.reference:
            continue
        every = {"spin": args.spin_every, "symbolic": args.symbolic_every, "bmc": args.bmc_every}.get(engine.name, 1)
        if every <= 0 or seed % every:
            continue
        try:
            other = engine.run(protocol, args.max_states, args.seconds)
        except Exception as err:  # an engine crash is a finding of its own, never agreement
            out["others"][engine.name] = {"crash": repr(err)[:300]}
            continue
        entry: dict = {"answer": other}
        if other.verdict not in ("unsupported", "error", "inconclusive"):
            c = compare(ref, other, engine)
            if c.kind == "beyond-bound":
                c = confirm_beyond_bound(protocol, text, seed, other, ref_engine, args)
            disjoint = engine.scope == "bounded" and not (family(other.codes) <= family(ref.codes)
                                                          or family(ref.codes) <= family(other.codes))
            entry.update(kind=c.kind, note=c.note, codes_differ=c.codes_differ, disjoint=disjoint)
        out["others"][engine.name] = entry
    return out


def active_engines(args: argparse.Namespace) -> list:
    chosen = set(args.engines.split(",")) if args.engines else None
    return [e for e in engines() if not e.unavailable and (chosen is None or e.name in chosen or e.reference)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--max-states", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=30.0, help="budget per engine and protocol")
    ap.add_argument("--spin-every", type=int, default=10, help="run SPIN on every k-th protocol (0: never)")
    ap.add_argument("--symbolic-every", type=int, default=1,
                    help="run the all-iterations engine on every k-th protocol (0: never)")
    ap.add_argument("--bmc-every", type=int, default=1,
                    help="run the Z3 bounded model checker on every k-th protocol (0: never)")
    ap.add_argument("--engines", help="comma-separated subset of engine names")
    ap.add_argument("--generator", choices=sorted(GENERATORS), default="mixed",
                    help="which random protocols (async: copies, byte counts and first waits in every order)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path, help="also write every row here")
    args = ap.parse_args()

    all_engines = engines()
    active = active_engines(args)
    ref_engine = next(e for e in active if e.reference)
    stats = {e.name: collections.Counter() for e in active}
    timing = collections.defaultdict(float)
    ref_verdicts: collections.Counter[tuple[str, str]] = collections.Counter()
    ref_codes: collections.Counter[str] = collections.Counter()
    ref_warns = 0  # safe protocols whose reference warns: the other engines compared on their warnings too
    disagreements: list[dict] = []
    rows = []
    start = time.monotonic()
    seeds = range(args.first_seed, args.first_seed + args.count)
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor
        from functools import partial

        pool = ProcessPoolExecutor(args.jobs)
        results = pool.map(partial(run_seed, args=args), seeds, chunksize=4)
    else:
        results = (run_seed(seed, args) for seed in seeds)
    for n, res in enumerate(results, start=1):
        seed, text, ref = res["seed"], res["text"], res["ref"]
        timing[ref_engine.name] += ref.seconds
        ref_verdicts[(res["pattern"], ref.verdict)] += 1
        ref_codes.update(ref.codes)
        ref_warns += ref.verdict == "safe" and bool(ref.warnings)
        row = {"seed": seed, "pattern": res["pattern"], ref_engine.name: [ref.verdict, sorted(ref.codes)]}
        for name, entry in res["others"].items():
            if "crash" in entry:
                stats[name]["engine-crash"] += 1
                disagreements.append({"seed": seed, "engine": name, "kind": "engine-crash", "note": entry["crash"],
                                      "text": text})
                continue
            other = entry["answer"]
            timing[name] += other.seconds
            row[name] = [other.verdict, sorted(other.codes)]
            if "kind" not in entry:
                stats[name][other.verdict] += 1
                continue
            stats[name][entry["kind"]] += 1
            if entry["kind"] == "agree" and entry["codes_differ"]:
                stats[name]["agree, other codes"] += 1
                stats[name]["agree, disjoint codes"] += entry["disjoint"]
            if entry["kind"] == "disagree":
                disagreements.append({"seed": seed, "engine": name, "kind": "disagree", "note": entry["note"],
                                      "reference": [ref.verdict, sorted(ref.codes)],
                                      "other": [other.verdict, sorted(other.codes)], "text": text})
        rows.append(row)
        if n % 100 == 0:
            print(f"{n} protocols, {time.monotonic() - start:.0f}s, {len(disagreements)} disagreements", flush=True)
    elapsed = time.monotonic() - start
    if disagreements:
        DISAGREEMENTS.mkdir(parents=True, exist_ok=True)
        for d in disagreements:
            (DISAGREEMENTS / f"seed{d['seed']}_{d['engine']}.sync").write_text(
                f"// differential: seed {d['seed']}, {d['engine']}: {d['note']}\n" + d["text"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=0) + "\n")
    if args.out:
        args.out.write_text(report(args, all_engines, active, stats, timing, ref_verdicts, ref_codes, ref_warns,
                                   disagreements, elapsed))
    for name, c in stats.items():
        print(name, dict(c))
    print(f"{len(disagreements)} disagreements in {elapsed:.0f}s")
    return 1 if disagreements else 0


def confirm_beyond_bound(protocol, text: str, seed: int, other, ref_engine, args):
    """A violation the all-iterations engine places at another trip count must be one the explicit
    engine finds when run at that trip count; otherwise the two disagree."""
    from diff_engines import Comparison

    try:
        name, value = other.bound.split("=")
        again = syncverify.load(text, {name.strip(): int(value)}, path=f"seed{seed}.sync")
    except (ValueError, syncverify.InputError) as err:
        return Comparison("disagree", f"violation at `{other.bound}`, which cannot be checked again: {err}")
    ref = ref_engine.run(again, args.max_states, args.seconds)
    if ref.verdict == "violation":
        return Comparison("beyond-bound", f"confirmed at {other.bound}")
    if ref.verdict == "inconclusive":
        return Comparison("skipped", f"explicit engine inconclusive at {other.bound}")
    return Comparison("disagree", f"all-iterations engine: violation at {other.bound}; explicit engine there: "
                      f"{ref.verdict}")


def report(args, all_engines, active, stats, timing, ref_verdicts, ref_codes, ref_warns, disagreements,
           elapsed) -> str:
    intro = [
        "Random small protocols (`tests/strategies.py`: TMA/generic rings with full/empty mbarriers, named-barrier",
        "hand-offs, TMA-store epilogues, two-CTA clusters with remote arrivals; bug knobs drawn at random: parities,",
        "counts, missing waits, fences, syncwarps, cluster barriers) checked by every available engine and compared",
        "with the explicit engine as `syncverify check` runs it (reductions on). Rules: `tests/diff_engines.py`.",
    ] if args.generator == "mixed" else [
        "Random small asynchronous-copy protocols (`tests/strategies.py`, `random_async_protocol`: producer/consumer",
        "rings filled by bulk copies over one or two stages and CTAs, with the producer's expect_tx, copies,",
        "complete_tx and arrive in several orders and mutated byte counts, parities, counts, waits and exits; and",
        "warps running random operations on two mbarriers) checked by every available engine and compared with the",
        "explicit engine as `syncverify check` runs it (reductions on). Rules: `tests/diff_engines.py`.",
    ]
    lines = [
        "# Differential testing",
        "",
        *intro,
        "",
        f"- command: `nice -n 19 python bench/differential.py --count {args.count} --spin-every {args.spin_every} "
        + (f"--jobs {args.jobs} " if args.jobs > 1 else "") +
        f"--symbolic-every {args.symbolic_every} --bmc-every {args.bmc_every} --max-states {args.max_states} "
        f"--seconds {args.seconds:g} " + (f"--engines {args.engines} " if args.engines else "") +
        (f"--first-seed {args.first_seed} " if args.first_seed else "") +
        (f"--generator {args.generator} " if args.generator != "mixed" else "") +
        f"--out {_shown(args.out)}`",
        f"- protocols: {args.count:,} (seeds {args.first_seed}..{args.first_seed + args.count - 1}); wall "
        f"{elapsed / 60:.1f} min ({args.jobs} worker process{'es' if args.jobs > 1 else ''}, {os.cpu_count()} CPUs); "
        f"Python {platform.python_version()}",
        f"- disagreements: **{len(disagreements)}**",
        f"- safe protocols whose reference warns (the engines compared on their warnings too): {ref_warns}",
        "",
        "## Reference verdicts (explicit engine)",
        "",
        "| pattern | safe | violation | inconclusive |",
        "|---|---|---|---|",
    ]
    for pattern in sorted({p for p, _ in ref_verdicts}):
        lines.append(f"| {pattern} | " + " | ".join(str(ref_verdicts.get((pattern, v), 0))
                                                    for v in ("safe", "violation", "inconclusive")) + " |")
    lines += ["", "Error codes found (protocols reporting each): " +
              ", ".join(f"{c} {n}" for c, n in sorted(ref_codes.items())), "",
              "## Agreement per engine", "",
              "| engine | scope | compared | agree | disagree | beyond bound | inconclusive | unsupported | "
              "error | codes differ | time |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in all_engines:
        if e.unavailable:
            lines.append(f"| {e.name} | {e.scope} | not available: {e.unavailable} | | | | | | | | |")
            continue
        if e.name not in {a.name for a in active}:
            continue
        c = stats[e.name]
        if e.reference:
            lines.append(f"| {e.name} | {e.scope} | reference | | | | | | | | {timing[e.name]:.0f}s |")
            continue
        compared = sum(c[k] for k in ("agree", "disagree", "beyond-bound", "skipped"))
        lines.append(f"| {e.name} | {e.scope} | {compared + c['inconclusive'] + c['unsupported'] + c['error']} | "
                     f"{c['agree']} | {c['disagree']} | {c['beyond-bound']} | {c['inconclusive'] + c['skipped']} | "
                     f"{c['unsupported']} | {c['error'] + c['engine-crash']} | {c['agree, other codes']} | "
                     f"{timing[e.name]:.0f}s |")
    lines += [
        "",
        "*compared*: protocols the engine ran on; *agree*/*disagree*: verdicts of two conclusive answers;",
        "*beyond bound*: the all-iterations engine finds a violation at another trip count, and the explicit",
        "engine run at that trip count confirms it (no contradiction); *codes differ*: same verdict, other error",
        "codes. Expected: SPIN stops at its first",
        "violated assertion (one code, where the explicit engine reports every distinct finding) and the",
        "all-iterations engine reports what its replay confirms; with reductions one race may be named RAW or",
        "WAR depending on the interleaving explored first (docs/model.md), which the comparison merges.",
        "",
        "## Disagreements",
        "",
    ]
    if not disagreements:
        lines.append("None.")
    for d in disagreements:
        lines += [f"### seed {d['seed']}: {d['engine']} ({d['kind']})", "", d["note"], "",
                  f"reference {d.get('reference')}, {d['engine']} {d.get('other')}; spec: "
                  f"`tests/data/differential/seed{d['seed']}_{d['engine']}.sync`", "", "```", d["text"].rstrip(),
                  "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
