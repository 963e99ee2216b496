"""Mutation testing of a safe protocol: does the spec (and the checker) catch small protocol bugs?

A mutant is the spec text with one protocol mutation applied at one site:
drop a wait, flip a parity, init count ±1, change expect_tx bytes, drop a
fence, drop a barrier, move an arrive before the access it publishes, drop an
`elect`, swap two adjacent statements. Mutations are edits of the *source
text* at positions taken from the parse tree, so every mutant is itself a spec
that can be printed, saved and checked by hand — the useful form for a
surviving mutant.

Each mutant is checked with its own budget. Its outcome is one of:

* ``killed``: the check reports an error (the codes say which);
* ``warned``: no error, but a warning the original spec does not get;
* ``survived``: checked safe — either the spec does not constrain this (an
  equivalent mutant) or the checker misses a bug; a person must decide which;
* ``equivalent``: the mutant compiles to exactly the model of the original
  (same processes, same instructions, only source positions differ), so it
  cannot be told apart by any check; decided without a search;
* ``inconclusive``: the budget ran out (never counted as killed or survived);
* ``invalid``: the mutant is not a valid spec (an SV1xx input error).

Exit codes of `syncverify mutate`: 0 no survivor and nothing inconclusive;
1 at least one survivor (each needs a look); 3 no survivor, but some mutants
inconclusive; 2 the spec cannot be mutation-tested (input error, or it is not
safe itself: mutants of a violating spec say nothing).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import StrEnum
from typing import Any

from lark import Token, Tree

from . import ir
from .check import Options, check_protocol
from .diagnostics import InputError
from .lang import load
from .lang.parse import parse
from .lang.resolve.operations import _MBARRIER_OPS, _split_mnemonic
from .result import CheckResult, Verdict

# ---------------------------------------------------------------------------
# Mutants


@dataclass(frozen=True)
class Mutant:
    """One mutation at one site: ``text`` is the whole mutated spec."""

    ident: str  # stable name: operator@line:column[/variant]
    operator: str
    line: int
    column: int
    description: str
    text: str


OPERATORS: dict[str, str] = {
    "drop-wait": "remove an mbarrier `wait`",
    "flip-parity": "wait for the other parity (`parity 1 ^ (P)`)",
    "init-count": "initialize an mbarrier with its count + 1 or - 1",
    "tx-bytes": "expect 16 bytes more or fewer (`arrive.expect_tx`, `expect_tx`)",
    "drop-fence": "remove a `fence.proxy.async` or `fence.mbarrier_init`",
    "drop-cluster-barrier": "remove a `cluster.arrive`, `cluster.wait` or `cluster.sync`",
    "drop-barrier": "remove a `syncthreads`, `bar.sync`, `bar.arrive` or `syncwarp`",
    "drop-group-wait": "remove a `wgmma.wait` or `bulk.wait_read`",
    "move-arrive": "move an arrive (mbarrier or named) before the nearest earlier access in its block",
    "drop-elect": "run the body of an `elect` / `first thread` on every lane",
    "swap": "swap two adjacent statements",
}

_DECLS = frozenset({"param", "cluster", "cta_threads", "role", "smem", "mbarrier", "named"})
_ACCESSES = frozenset({"read", "write", "wgmma.read", "tma.store"})
_DROPS = {
    "wait": "drop-wait",
    "fence.proxy.async": "drop-fence", "fence.mbarrier_init": "drop-fence",
    "cluster.arrive": "drop-cluster-barrier", "cluster.wait": "drop-cluster-barrier",
    "cluster.sync": "drop-cluster-barrier",
    "syncthreads": "drop-barrier", "bar.sync": "drop-barrier", "bar.arrive": "drop-barrier",
    "barrier.sync": "drop-barrier", "barrier.arrive": "drop-barrier",
    "syncwarp": "drop-barrier",
    "wgmma.wait": "drop-group-wait", "bulk.wait_read": "drop-group-wait",
}


def op_name(t: Tree) -> tuple[str | None, list[str]]:
    """The canonical operation name of an `op` node and its qualifiers (as the resolver reads them)."""
    head = t.children[0]
    if head.data == "clusterop":
        words = ["cluster", *(str(q)[1:] for q in head.children)]
    elif head.data == "mbarrierop":
        words = [str(q)[1:] for q in head.children]
    else:
        words = [str(head.children[0]), *(str(q)[1:] for q in head.children[1:])]
    name, quals = _split_mnemonic(words)
    if head.data == "mbarrierop" and name not in _MBARRIER_OPS:
        return None, []
    return name, quals


@dataclass
class _Site:
    """A statement node with its container (the list of items it sits in)."""

    node: Tree
    container: list[Tree]
    index: int


class _Mutator:
    def __init__(self, text: str, path: str):
        self.text = text
        self.tree = parse(text, path)
        self.sites: list[_Site] = []
        proto = self.tree.children[0]
        self._collect([c for c in proto.children if isinstance(c, Tree)])
        self.decl_counts: dict[str, str] = {}
        for item in proto.children:
            if isinstance(item, Tree) and item.data == "mbarrier":
                name = str(item.children[0])
                count = [c for c in item.children[1:] if isinstance(c, Tree) and c.data != "array"]
                if count:
                    self.decl_counts[name] = self.src(count[-1])

    def _collect(self, items: list[Tree]) -> None:
        for i, node in enumerate(items):
            site = _Site(node, items, i)
            self.sites.append(site)
            for block in self._blocks(node):
                self._collect([c for c in block.children if isinstance(c, Tree)])

    @staticmethod
    def _blocks(node: Tree) -> Iterator[Tree]:
        for child in node.children:
            if isinstance(child, Tree):
                if child.data == "block":
                    yield child
                elif child.data in ("if_stmt", "probe_if"):  # `else if`: its blocks belong to this statement
                    yield from _Mutator._blocks(child)

    def src(self, node: Tree | Token) -> str:
        start, end = self.pos(node)
        return self.text[start:end]

    @staticmethod
    def pos(node: Tree | Token) -> tuple[int, int]:
        if isinstance(node, Token):
            return node.start_pos or 0, node.end_pos or 0
        return node.meta.start_pos, node.meta.end_pos

    def where(self, node: Tree) -> tuple[int, int]:
        return node.meta.line, node.meta.column

    def edit(self, edits: list[tuple[int, int, str]]) -> str:
        out = self.text
        for start, end, new in sorted(edits, reverse=True):
            out = out[:start] + new + out[end:]
        return out

    # ---- the operators ----------------------------------------------------
    def mutants(self) -> Iterator[Mutant]:
        for site in self.sites:
            node = site.node
            if node.data == "op":
                yield from self._op_mutants(site)
            elif node.data in ("elect", "per_warp", "first_thread"):
                block = node.children[0]
                inner = self.text[block.meta.start_pos + 1: block.meta.end_pos - 1]
                yield self._mutant("drop-elect", node, f"`{_short(self.src(node))}` runs on every lane",
                                   [(*self.pos(node), inner)])
            nxt = site.index + 1
            if node.data not in _DECLS and nxt < len(site.container) and site.container[nxt].data not in _DECLS:
                other = site.container[nxt]
                a, b = self.pos(node), self.pos(other)
                yield self._mutant("swap", node, f"swap `{_short(self.src(node))}` and `{_short(self.src(other))}`",
                                   [(*a, self.src(other)), (*b, self.src(node))])

    def _op_mutants(self, site: _Site) -> Iterator[Mutant]:
        node = site.node
        name, quals = op_name(node)
        if name is None:
            return
        text = _short(self.src(node))
        clauses = {c.data: c for c in node.children[1:] if isinstance(c, Tree) and c.data.startswith("c_")}
        if name in _DROPS:
            yield self._mutant(_DROPS[name], node, f"remove `{text}`", [(*self.pos(node), "")])
        if name == "wait" and "c_parity" in clauses:
            clause = clauses["c_parity"]
            expr = self.src(clause.children[0])
            yield self._mutant("flip-parity", node, f"`{text}` waits for parity 1 ^ ({expr})",
                               [(*self.pos(clause), f"parity 1 ^ ({expr})")])
        if name == "init":
            count = clauses.get("c_count")
            for delta in (+1, -1):
                sign = "+" if delta > 0 else "-"
                if count is not None:
                    expr = self.src(count.children[0])
                    edits = [(*self.pos(count), f"count ({expr}) {sign} 1")]
                else:
                    decl = self.decl_counts.get(self._object_name(node) or "")
                    if decl is None:
                        continue
                    end = node.meta.end_pos - 1  # before the `;`
                    expr = decl
                    edits = [(end, end, f" count ({decl}) {sign} 1")]
                yield self._mutant("init-count", node, f"`{text}` with count ({expr}) {sign} 1", edits,
                                   variant=f"{sign}1")
        if name in ("arrive", "arrive_drop", "expect_tx") and (".expect_tx" in quals or name == "expect_tx") \
                and "c_bytes" in clauses:
            clause = clauses["c_bytes"]
            expr = self.src(clause.children[0])
            for sign in "+-":
                yield self._mutant("tx-bytes", node, f"`{text}` expects ({expr}) {sign} 16 bytes",
                                   [(*self.pos(clause), f"bytes ({expr}) {sign} 16")], variant=f"{sign}16")
        if (name in ("arrive", "arrive_drop") and ".expect_tx" not in quals) or name == "bar.arrive":
            moved = self._move_before_access(site)
            if moved is not None:
                yield moved

    def _object_name(self, op: Tree) -> str | None:
        operands = next((c for c in op.children[1:] if isinstance(c, Tree) and c.data == "operands"), None)
        if operands is None or not operands.children:
            return None
        first = operands.children[0]
        if isinstance(first, Tree) and first.data in ("name", "index", "index_all"):
            return str(first.children[0])
        return None

    def _move_before_access(self, site: _Site) -> Mutant | None:
        """Move the arrive (with an `elect`/`first thread`/`for` wrapping only it) before the nearest
        earlier statement of its block that accesses a buffer: the access it is meant to publish."""
        unit = site
        while True:
            for j in range(unit.index - 1, -1, -1):
                sibling = unit.container[j]
                if sibling.data in _DECLS:
                    break
                if self._has_access(sibling):
                    u0, u1 = self.pos(unit.node)
                    s0 = self.pos(sibling)[0]
                    moved = self.src(unit.node)
                    indent = self._indent(s0)
                    return self._mutant("move-arrive", site.node,
                                        f"`{_short(moved)}` moved before `{_short(self.src(sibling))}` "
                                        f"(line {sibling.meta.line})",
                                        [(s0, s0, moved + "\n" + indent), (u0, u1, "")])
            outer = self._wrapper(unit)
            if outer is None:
                return None
            unit = outer

    def _wrapper(self, unit: _Site) -> _Site | None:
        """The enclosing elect / per warp / first thread / for whose body is exactly this statement."""
        for site in self.sites:
            if site.node.data in ("elect", "per_warp", "first_thread", "for_"):
                block = site.node.children[-1]
                items = [c for c in block.children if isinstance(c, Tree)]
                if len(items) == 1 and items[0] is unit.node:
                    return site
        return None

    def _has_access(self, node: Tree) -> bool:
        for sub in node.iter_subtrees():
            if sub.data == "op" and op_name(sub)[0] in _ACCESSES:
                return True
        return False

    def _indent(self, pos: int) -> str:
        line_start = self.text.rfind("\n", 0, pos) + 1
        prefix = self.text[line_start:pos]
        return prefix if not prefix.strip() else ""

    def _mutant(self, operator: str, node: Tree, description: str, edits: list[tuple[int, int, str]],
                variant: str = "") -> Mutant:
        line, col = self.where(node)
        ident = f"{operator}@{line}:{col}" + (f"/{variant}" if variant else "")
        return Mutant(ident, operator, line, col, description, self.edit(edits))


def _short(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def mutants(text: str, path: str = "<spec>", operators: set[str] | None = None) -> list[Mutant]:
    """Every mutant of a spec, one per operator and site; duplicates (same text) and no-ops dropped."""
    seen = {text}
    out = []
    for m in _Mutator(text, path).mutants():
        if (operators is None or m.operator in operators) and m.text not in seen:
            seen.add(m.text)
            out.append(m)
    return out


# ---------------------------------------------------------------------------
# Checking the mutants


class Outcome(StrEnum):
    KILLED = "killed"
    WARNED = "warned"
    SURVIVED = "survived"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"


@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    outcome: Outcome
    codes: tuple[str, ...] = ()
    detail: str = ""
    states: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class MutationReport:
    path: str
    baseline: CheckResult
    results: tuple[MutantResult, ...] = ()
    original: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.outcome is Outcome.SURVIVED]

    def exit_code(self) -> int:
        if self.baseline.verdict is not Verdict.SAFE:
            return 3 if self.baseline.verdict is Verdict.INCONCLUSIVE else 2
        if self.survivors:
            return 1
        if any(r.outcome is Outcome.INCONCLUSIVE for r in self.results):
            return 3
        return 0

    def diff(self, result: MutantResult) -> str:
        lines = difflib.unified_diff(self.original.splitlines(), result.mutant.text.splitlines(),
                                     "original", result.mutant.ident, n=1, lineterm="")
        return "\n".join(list(lines)[2:])


def _shape(obj: Any) -> Any:
    """A value with every source position removed: two models with equal shapes are the same model."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,
                *(_shape(getattr(obj, f.name)) for f in fields(obj) if f.name not in ("span", "line")))
    if isinstance(obj, (tuple, list)):
        return tuple(_shape(x) for x in obj)
    return obj


def model_shape(protocol: ir.Protocol) -> Any:
    """What the checker sees of a protocol: declarations and each process's compiled program."""
    from .semantics.machine import Machine

    machine = Machine(protocol)
    return (_shape(protocol.params), protocol.cluster, protocol.threads, _shape(protocol.roles),
            _shape(protocol.buffers), _shape(protocol.mbarriers), _shape(machine.programs))


def run(path: str, defines: Mapping[str, int] | None = None, *, max_states: int | None = None,
        timeout: float = 60.0, operators: set[str] | None = None,
        progress: Callable[[int, int, MutantResult], None] | None = None) -> MutationReport:
    """Check the spec, then every mutant of it (see the module docstring for outcomes).

    ``max_states`` defaults to 20 times the original's state count (at least
    50,000): a mutant that needs far more than the original is reported
    inconclusive rather than stalling the run.
    """
    from .lang.load import read_source

    defines = dict(defines or {})
    text = read_source(path)
    base_protocol = load(text, defines, path=path)
    baseline = check_protocol(base_protocol, Options(defines=defines))
    if baseline.verdict is not Verdict.SAFE:
        return MutationReport(path, baseline, original=text)
    budget = max_states or max(50_000, 20 * baseline.stats.states)
    options = Options(defines=defines, max_states=budget, timeout=timeout)
    base_shape = model_shape(base_protocol)
    base_warnings = {d.code for d in baseline.diagnostics if not d.is_error}
    todo = mutants(text, path, operators)
    results = []
    for n, m in enumerate(todo):
        result = check_mutant(m, path, defines, options, base_shape, base_warnings)
        results.append(result)
        if progress is not None:
            progress(n + 1, len(todo), result)
    counts = {o.value: sum(1 for r in results if r.outcome is o) for o in Outcome}
    return MutationReport(path, baseline, tuple(results), text, counts)


def check_mutant(m: Mutant, path: str, defines: Mapping[str, int], options: Options, base_shape: Any,
                 base_warnings: set[str]) -> MutantResult:
    start = time.monotonic()
    try:
        protocol = load(m.text, defines, path=path)
    except InputError as err:
        first = err.diagnostics[0] if err.diagnostics else None
        detail = f"{first.code}: {first.message}" if first else "input error"
        return MutantResult(m, Outcome.INVALID, tuple(sorted({d.code for d in err.diagnostics})), detail)
    try:
        same = model_shape(protocol) == base_shape
    except InputError:
        same = False
    if same:
        return MutantResult(m, Outcome.EQUIVALENT, detail="same compiled model as the original",
                            seconds=time.monotonic() - start)
    res = check_protocol(protocol, options)
    errors = tuple(sorted({d.code for d in res.diagnostics if d.is_error}))
    new_warnings = tuple(sorted({d.code for d in res.diagnostics if not d.is_error} - base_warnings))
    seconds = time.monotonic() - start
    if res.verdict is Verdict.ERROR:
        return MutantResult(m, Outcome.INVALID, errors, _first_message(res), res.stats.states, seconds)
    if errors:
        return MutantResult(m, Outcome.KILLED, errors, _first_message(res), res.stats.states, seconds)
    if res.verdict is Verdict.INCONCLUSIVE:
        return MutantResult(m, Outcome.INCONCLUSIVE, new_warnings, res.coverage, res.stats.states, seconds)
    if new_warnings:
        return MutantResult(m, Outcome.WARNED, new_warnings, _first_message(res, warnings=True), res.stats.states,
                            seconds)
    return MutantResult(m, Outcome.SURVIVED, (), "checked safe", res.stats.states, seconds)


def _first_message(res: CheckResult, warnings: bool = False) -> str:
    for d in res.diagnostics:
        if d.is_error != warnings:
            return f"{d.code}: {d.message}"
    return ""


def report_dict(rep: MutationReport) -> dict[str, Any]:
    return {
        "version": 1,
        "path": rep.path,
        "baseline": {"verdict": rep.baseline.verdict.value, "states": rep.baseline.stats.states,
                     "codes": sorted(rep.baseline.codes())},
        "summary": {"mutants": len(rep.results), **rep.counts},
        "mutants": [
            {"id": r.mutant.ident, "operator": r.mutant.operator, "line": r.mutant.line,
             "column": r.mutant.column, "description": r.mutant.description, "outcome": r.outcome.value,
             "codes": list(r.codes), "detail": r.detail, "states": r.states, "seconds": round(r.seconds, 3),
             **({"diff": rep.diff(r)} if r.outcome in (Outcome.SURVIVED, Outcome.WARNED) else {})}
            for r in rep.results
        ],
        "exit_code": rep.exit_code(),
    }
