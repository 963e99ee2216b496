"""Fuzzing the front end and a small-budget check: no traceback, no hang, no memory blow-up.

Every input goes through what `syncverify check` does with a file: `load`
(parse, resolve, `-D` overrides), then the engines with a small state and time
budget (static checks included). The contract is that each input ends in a
Protocol with a verdict, or an InputError made of located SV1xx diagnostics;
any other exception, an input that runs past the per-input time limit, or a
process that grows past the memory limit is a finding.

Inputs come from five generators, drawn in turn from one seeded
`random.Random`, so that a finding is reproduced by its seed and index:

* ``grammar``: random derivations of the grammar (spec.lark's own rules and
  terminals), with names from a small pool so that some of them resolve;
* ``protocol``: valid random protocols (tests/strategies.py), sometimes with
  random `-D` overrides, which reach the engines;
* ``mutant``: real specs (specs/, bench/) and generated protocols with
  characters and tokens deleted, duplicated, swapped, replaced by extreme
  numbers or keywords;
* ``soup``: token soups from the grammar's vocabulary and junk characters;
* ``text``: random unicode text.

Usage (the 100,000-input run recorded in bench/FUZZ.md):

    nice -n 19 python bench/fuzz.py --count 100000 --seed 1 --out bench/FUZZ.md
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from strategies import random_protocol  # noqa: E402

import syncverify  # noqa: E402
from syncverify.check import Options, check_protocol  # noqa: E402
from syncverify.diagnostics import CODES, InputError  # noqa: E402
from syncverify.lang.parse import _parser  # noqa: E402

# ---------------------------------------------------------------------------
# Generators

NAMES = ["producer", "consumer", "full", "empty", "tile", "STAGES", "ITERS", "k", "s", "r", "i", "x", "bar",
         "init", "arrive", "wait", "read", "write", "syncthreads", "syncwarp", "tma", "bulk", "wgmma", "fence",
         "tmem", "umma", "inval", "expect_tx", "complete_tx", "arrive_drop", "try_wait", "barrier", "epi", "w"]
QUALS = [".release", ".acquire", ".relaxed", ".cta", ".cluster", ".expect_tx", ".sync", ".arrive", ".wait",
         ".load", ".store", ".commit", ".wait_read", ".proxy", ".async", ".mbarrier_init", ".shared::cta",
         ".parity", ".aligned", ".alloc", ".dealloc", ".read", ".bogus"]
NUMBERS = ["0", "1", "2", "3", "16", "31", "32", "33", "64", "128", "256", "1024", "4096", "0x10", "0b11",
           "1_000", "007", str(1 << 20), str((1 << 20) - 1), str(1 << 31), str(1 << 62), str(1 << 63), "9" * 30]
JUNK = ["$", "#", "`", "\\", "'", '"', "→", "\u00a0", "\t", "\r\n", "/*", "*/", "//", "\x00", "\ufeff", "é"]


class GrammarGen:
    """Random derivations of spec.lark: each rule picks a random expansion; past a
    depth limit it takes the expansion with the fewest nonterminals, so every
    derivation ends."""

    def __init__(self) -> None:
        parser = _parser()
        self.rules: dict[str, list[list[str]]] = collections.defaultdict(list)
        for rule in parser.rules:
            self.rules[rule.origin.name].append([s.name for s in rule.expansion])
        self.literal = {t.name: t.pattern.value for t in parser.terminals if t.pattern.type == "str"}
        self.regex = {
            "NAME": lambda r: r.choice(NAMES) if r.random() < 0.8 else r.choice(["a", "_x9", "é", "Z" * 40]),
            "NUMBER": lambda r: r.choice(NUMBERS),
            "QUAL": lambda r: r.choice(QUALS),
            "EQOP": lambda r: r.choice(["==", "!="]),
            "RELOP": lambda r: r.choice(["<", "<=", ">", ">="]),
            "SHIFTOP": lambda r: r.choice(["<<", ">>"]),
            "ADDOP": lambda r: r.choice(["+", "-"]),
            "MULOP": lambda r: r.choice(["*", "/", "%"]),
        }
        self.short = {name: min(exps, key=lambda e: sum(1 for s in e if s in self.rules))
                      for name, exps in self.rules.items()}

    def __call__(self, r: random.Random) -> str:
        out: list[str] = []
        max_depth = r.choice([6, 10, 16, 30])
        stack: list[tuple[str, int]] = [("start", 0)]
        while stack and len(out) < 4000:
            sym, depth = stack.pop()
            if sym in self.rules:
                exps = self.rules[sym]
                exp = self.short[sym] if depth > max_depth else r.choice(exps)
                stack.extend((s, depth + 1) for s in reversed(exp))
            elif sym in self.literal:
                out.append(self.literal[sym])
            elif sym in self.regex:
                out.append(self.regex[sym](r))
            if r.random() < 0.02:
                out.append(r.choice(["// c\n", "/* c */", "\n"]))
        text = " ".join(out) + "\n"
        if r.random() < 0.5:  # most derivations lack the required `cta threads`: let some resolve further
            text = text.replace("{", "{ cta threads 128; role producer = warp 0; mbarrier full count 1; ", 1)
        return text


def _seed_texts() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "specs").glob("*.sync"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "bench").glob("*.sync"))]
    return texts


TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|0[xXbB][0-9a-fA-F_]*|\d[\d_]*|[A-Za-z_][A-Za-z_0-9]*|\.[A-Za-z_][\w:]*|"
                   r"\.\.|->|<<|>>|<=|>=|==|!=|&&|\|\||\s+|.", re.S)
INSERTS = ["{", "}", ";", "(", ")", "[*]", "@ 1", "-> full[0]", "count 0", "elect {", "if producer {",
           "for z in 0..1000000 {", "\n", "//", "/*", "per warp {", "cluster 16;", "param X = 1 << 62;",
           "mbarrier m[4096];", "let q = 1 / 0;", "bar.sync 15, 1024;"]


def mutate(r: random.Random, text: str) -> str:
    for _ in range(r.randint(1, 6)):
        kind = r.choice(["del_chars", "dup_chars", "swap_chars", "del_token", "dup_token", "swap_tokens",
                         "number", "insert", "keyword"])
        if kind.endswith("chars"):
            if not text:
                continue
            i = r.randrange(len(text))
            j = min(len(text), i + r.randint(1, 12))
            if kind == "del_chars":
                text = text[:i] + text[j:]
            elif kind == "dup_chars":
                text = text[:j] + text[i:j] + text[j:]
            else:
                k = r.randrange(len(text))
                chars = list(text)
                chars[i], chars[k] = chars[k], chars[i]
                text = "".join(chars)
            continue
        tokens = TOKEN.findall(text)
        if not tokens:
            continue
        i = r.randrange(len(tokens))
        if kind == "del_token":
            del tokens[i]
        elif kind == "dup_token":
            tokens.insert(i, tokens[i])
        elif kind == "swap_tokens":
            k = r.randrange(len(tokens))
            tokens[i], tokens[k] = tokens[k], tokens[i]
        elif kind == "number":
            numbers = [n for n, t in enumerate(tokens) if t[:1].isdigit()]
            if numbers:
                tokens[r.choice(numbers)] = r.choice([*NUMBERS, "-1", "-" + "9" * 20, "0x", "08"])
        elif kind == "insert":
            tokens.insert(i, " " + r.choice(INSERTS) + " ")
        else:
            tokens.insert(i, " " + r.choice(NAMES + QUALS) + " ")
        text = "".join(tokens)
    return text


def soup(r: random.Random, vocab: list[str]) -> str:
    body = "".join(r.choice(vocab) + r.choice([" ", " ", "\n", "", "\t"]) for _ in range(r.randint(0, 60)))
    if r.random() < 0.5:
        body = f"protocol fuzz {{\n  cta threads 128;\n{body}\n}}\n"
    return body


def random_text(r: random.Random) -> str:
    alphabet = "protcl{};=[]()*.,@->!&|^%/+<>0123456789abcdefxyz_ \n\t" + "".join(JUNK)
    if r.random() < 0.3:
        return "".join(chr(r.randint(1, 0x2FFF)) for _ in range(r.randint(0, 200)))
    return "".join(r.choice(alphabet) for _ in range(r.randint(0, 300)))


def make_generators(seeds: list[str]) -> dict[str, Callable[[random.Random, int], tuple[str, dict[str, int]]]]:
    grammar = GrammarGen()
    vocab = sorted(set(grammar.literal.values())) + NAMES + QUALS + NUMBERS + JUNK

    def defines(r: random.Random, text: str) -> dict[str, int]:
        params = re.findall(r"param\s+([A-Za-z_]\w*)", text)
        if not params or r.random() < 0.6:
            return {}
        return {p: r.choice([0, 1, 2, 3, 5, 64, 4096, -1, 1 << 20, 1 << 40, 1 << 62, 1 << 63])
                for p in r.sample(params, r.randint(1, len(params)))}

    def protocol(r: random.Random, n: int) -> tuple[str, dict[str, int]]:
        text = random_protocol(r.randrange(1 << 30))
        return text, defines(r, text)

    def mutant(r: random.Random, n: int) -> tuple[str, dict[str, int]]:
        base = r.choice(seeds) if r.random() < 0.6 else random_protocol(r.randrange(1 << 30))
        text = mutate(r, base)
        return text, defines(r, text)

    return {
        "grammar": lambda r, n: (grammar(r), {}),
        "protocol": protocol,
        "mutant": mutant,
        "soup": lambda r, n: (soup(r, vocab), {}),
        "text": lambda r, n: (random_text(r), {}),
    }


# ---------------------------------------------------------------------------
# Harness


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_one(text: str, defines: dict[str, int], options: Options) -> str:
    """One input through load + engines; returns its outcome class (raises on a contract break)."""
    try:
        protocol = syncverify.load(text + "\n", defines, path="fuzz.sync")
    except InputError as err:
        bad = [d for d in err.diagnostics if not (d.code in CODES and d.code.startswith("SV1") and d.span)]
        if not err.diagnostics or bad:
            raise AssertionError(f"InputError with bad diagnostics: {bad or 'none'}") from None
        return "input-error"
    result = check_protocol(protocol, options)
    return f"verdict-{result.verdict.value}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=float, default=20.0, help="per-input time limit (s): past it, a hang")
    ap.add_argument("--max-states", type=int, default=300, help="state budget of the check per input")
    ap.add_argument("--mem-limit", type=float, default=2048.0, help="RSS (MB) past which the run is a blow-up")
    ap.add_argument("--out", type=Path, help="write a Markdown report here")
    ap.add_argument("--log", type=Path, help="append progress lines here")
    ap.add_argument("--json", type=Path, help="write the summary (with findings) as JSON here")
    ap.add_argument("--jobs", type=int, default=1,
                    help="run this many worker processes (seeds SEED*1000+i), each with its share of --count")
    args = ap.parse_args()
    if args.jobs > 1:
        return run_jobs(args)

    seeds = _seed_texts()
    gens = make_generators(seeds)
    names = sorted(gens)
    rng = random.Random(args.seed)
    options = Options(max_states=args.max_states, timeout=min(5.0, args.limit / 2), max_memory_mb=512)
    signal.signal(signal.SIGALRM, _alarm)
    outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
    findings: dict[str, dict] = {}
    slowest = (0.0, "", -1)
    start = time.monotonic()
    base_rss = rss_mb()
    peak_rss = base_rss
    for n in range(args.count):
        gen = names[n % len(names)]
        r = random.Random(rng.randrange(1 << 62))
        text, defines = gens[gen](r, n)
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, args.limit)
        try:
            outcome = run_one(text, defines, options)
        except Hang:
            outcome = "HANG"
            findings[f"hang:{gen}#{n}"] = {"index": n, "generator": gen, "kind": "hang", "input": text[:2000],
                                           "defines": defines}
            if args.log:
                with args.log.open("a") as f:
                    f.write(f"HANG at #{n} ({gen}) defines={defines}\n{text}\n")
        except Exception as err:  # a contract break: record it, keep going
            outcome = "CRASH"
            tb = traceback.extract_tb(err.__traceback__)
            where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
            key = f"{type(err).__name__}@{where}"
            if key not in findings:
                findings[key] = {"index": n, "generator": gen, "kind": "crash", "input": text[:2000],
                                 "defines": defines, "traceback": traceback.format_exc()[-3000:]}
                if args.log:
                    with args.log.open("a") as f:
                        f.write(f"FINDING {key} at #{n} ({gen}) defines={defines}\n{text}\n"
                                f"{findings[key]['traceback']}\n")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.monotonic() - t0
        if dt > slowest[0]:
            slowest = (dt, gen, n)
        outcomes[(gen, outcome)] += 1
        if n % 500 == 0 or n == args.count - 1:
            peak_rss = max(peak_rss, rss_mb())
            if peak_rss > args.mem_limit:
                findings.setdefault("memory", {"index": n, "generator": gen, "kind": "memory",
                                               "input": text[:2000], "defines": defines})
            if args.log:
                with args.log.open("a") as f:
                    f.write(f"{n + 1} inputs, {time.monotonic() - start:.0f}s, findings {len(findings)}, "
                            f"rss {peak_rss:.0f} MB\n")
    elapsed = time.monotonic() - start
    summary = {"count": args.count, "seed": args.seed, "seconds": elapsed, "peak_rss_mb": peak_rss,
               "base_rss_mb": base_rss, "slowest": slowest, "outcomes": {f"{g}/{o}": c for (g, o), c in
                                                                         sorted(outcomes.items())},
               "findings": findings}
    print(json.dumps({k: v for k, v in summary.items() if k != "findings"}, indent=1))
    for key, f in findings.items():
        print(f"FINDING {key}: generator {f['generator']}, input #{f['index']}\n{f.get('traceback', '')}")
    if args.json:
        args.json.write_text(json.dumps(summary))
    if args.out:
        args.out.write_text(report(summary, args))
    return 1 if findings else 0


def run_jobs(args: argparse.Namespace) -> int:
    """Split the run over worker processes and merge their summaries (wall time is the whole run's)."""
    import subprocess
    import tempfile

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sv-fuzz-") as tmp:
        procs = []
        for i in range(args.jobs):
            count = args.count // args.jobs + (1 if i < args.count % args.jobs else 0)
            cmd = [sys.executable, __file__, "--count", str(count), "--seed", str(args.seed * 1000 + i),
                   "--limit", str(args.limit), "--max-states", str(args.max_states), "--mem-limit",
                   str(args.mem_limit), "--json", f"{tmp}/{i}.json"]
            if args.log:
                cmd += ["--log", f"{args.log}.{i}"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        errors = [p.communicate()[1] for p in procs]
        parts = []
        for i, p in enumerate(procs):
            path = Path(f"{tmp}/{i}.json")
            if not path.exists():  # a worker that died is a finding of its own
                print(f"worker {i} ended with {p.returncode} and no summary:\n{errors[i][-3000:]}")
                return 2
            parts.append(json.loads(path.read_text()))
    outcomes: collections.Counter[str] = collections.Counter()
    findings: dict[str, dict] = {}
    for i, part in enumerate(parts):
        outcomes.update(part["outcomes"])
        for key, f in part["findings"].items():
            findings.setdefault(key, {**f, "index": f"{i}:{f['index']}"})
    summary = {"count": sum(p["count"] for p in parts), "seed": args.seed, "seconds": time.monotonic() - start,
               "peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
               "base_rss_mb": min(p["base_rss_mb"] for p in parts),
               "slowest": max((p["slowest"] for p in parts), key=lambda x: x[0]),
               "outcomes": dict(sorted(outcomes.items())), "findings": findings}
    print(json.dumps({k: v for k, v in summary.items() if k != "findings"}, indent=1))
    for key, f in findings.items():
        print(f"FINDING {key}: generator {f['generator']}, input {f['index']}\n{f.get('traceback', '')}")
    if args.json:
        args.json.write_text(json.dumps(summary))
    if args.out:
        args.out.write_text(report(summary, args))
    return 1 if findings else 0


def report(s: dict, args: argparse.Namespace) -> str:
    by_gen: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, c in s["outcomes"].items():
        g, o = key.split("/", 1)
        by_gen[g][o] += c
    kinds = sorted({o for c in by_gen.values() for o in c})
    lines = [
        "# Front-end fuzzing",
        "",
        "Every input goes through `load` (parse, resolve, `-D`) and, when it loads, the engines with a small",
        f"budget ({args.max_states} states; static checks included). Contract: a verdict, or an InputError of",
        "located SV1xx diagnostics — no other exception, no input past the per-input time limit, no memory",
        "blow-up. Generators and harness: `bench/fuzz.py`.",
        "",
        "## Run",
        "",
        f"- command: `nice -n 19 python bench/fuzz.py --count {args.count} --seed {args.seed} "
        f"--limit {args.limit:g} --max-states {args.max_states}"
        + (f" --jobs {args.jobs}" if args.jobs > 1 else "") + " --out bench/FUZZ.md`",
        f"- inputs: {s['count']:,} ({s['count'] / max(s['seconds'], 1e-9):,.0f}/s), "
        f"time {s['seconds'] / 60:.1f} min ({args.jobs} worker process{'es' if args.jobs > 1 else ''}; "
        f"{platform.node() or 'host'}, {os.cpu_count()} CPUs)",
        f"- per-input limit {args.limit:g} s; slowest input {s['slowest'][0]:.2f} s "
        f"(generator `{s['slowest'][1]}`, #{s['slowest'][2]})",
        f"- peak RSS {s['peak_rss_mb']:.0f} MB (start {s['base_rss_mb']:.0f} MB)",
        f"- Python {platform.python_version()}, {platform.machine()}",
        f"- findings: **{len(s['findings'])}**",
        "",
        "## Outcomes per generator",
        "",
        "| generator | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for g, c in sorted(by_gen.items()):
        lines.append(f"| {g} | " + " | ".join(f"{c.get(k, 0):,}" for k in kinds) + " |")
    lines += ["", "## Findings", ""]
    if not s["findings"]:
        lines.append("None: no traceback, no hang, no memory blow-up.")
    for key, f in s["findings"].items():
        lines += [f"### {key} ({f['kind']}, generator `{f['generator']}`, input #{f['index']})", "", "```",
                  f["input"][:1500], "```", ""]
        if f.get("traceback"):
            lines += ["```", f["traceback"][-1500:], "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
