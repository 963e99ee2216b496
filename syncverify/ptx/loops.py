"""Natural loops and register liveness of a flattened PTX function, for keeping a loop as a loop.

A branch decided by the symbolic parameter (`--symbolic`) may be kept as a loop
only when it is the exit test of a natural loop that every iteration
evaluates: a back edge u -> h with h dominating u, the branch inside the loop
with one successor in it and one outside, and the branch dominating every
latch. Liveness says which registers the state at the loop head consists of:
a register overwritten on every path before it is read is not part of it, so
the stale exit predicate or a temporary does not keep the head state from
repeating.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import networkx as nx

from .cfg import EXIT, Cfg, affects_sync
from .parse import Addr, Instr, Name, NegName, Operand, Pair, TensorAddr, Vec

# instructions whose first operand is only written (a definition, when unguarded)
_DEFS = {"mov", "add", "sub", "mul", "mad", "mul24", "mad24", "div", "rem", "and", "or", "xor", "not", "cnot",
         "neg", "abs", "min", "max", "shl", "shr", "selp", "setp", "set", "cvt", "cvta", "ld", "ldu", "popc",
         "clz", "brev", "bfe", "bfi", "shf", "lop3", "prmt", "sad", "slct", "mapa", "getctarank", "activemask"}


@dataclass(frozen=True)
class ExitTest:
    """A branch that is the exit test of the natural loop headed at `head`; `stay_taken`: taking the branch
    stays in the loop."""

    branch: int
    head: int
    stay_taken: bool


def _names(op: Operand) -> list[str]:
    if isinstance(op, Name | NegName):
        return [op.name]
    if isinstance(op, Pair):
        return [op.first, op.second]
    if isinstance(op, Addr):
        return [op.base] if op.base else []
    if isinstance(op, Vec):
        return [n for item in op.items for n in _names(item)]
    if isinstance(op, TensorAddr):
        return [op.base, *[n for c in op.coords for n in _names(c)]]
    return []


def uses_defs(ins: Instr) -> tuple[set[str], set[str]]:
    """Registers the instruction may read, and those it surely writes (a guarded write kills nothing)."""
    ops = ins.operands
    defines = ins.base in _DEFS and bool(ops) and not isinstance(ops[0], Addr)
    uses = {n for op in (ops[1:] if defines else ops) for n in _names(op)}
    if ins.guard:
        uses.add(ins.guard)
    defs = set(_names(ops[0])) if defines and ins.guard is None else set()
    return uses, defs


class LoopInfo:
    """Dominators, natural loops and liveness over a Cfg (computed once per function, on demand)."""

    def __init__(self, cfg: Cfg):
        self.cfg = cfg
        self.n = len(cfg.body)
        self._relevant: dict[object, frozenset[str]] = {}

    @cached_property
    def idom(self) -> dict[int, int]:
        g = nx.DiGraph()
        g.add_node(0)
        for i in range(self.n):
            for s in self.cfg.successors(i):
                if s != EXIT:
                    g.add_edge(i, s)
        return nx.immediate_dominators(g, 0)

    def dominates(self, a: int, b: int) -> bool:
        idom = self.idom
        while True:
            if a == b:
                return True
            up = idom.get(b, b)  # the entry (and an unreachable node) has no dominator but itself
            if up == b:
                return False
            b = up

    @cached_property
    def latches(self) -> dict[int, list[int]]:
        """Loop head -> the sources of its back edges."""
        out: dict[int, list[int]] = {}
        for i in range(self.n):
            for s in self.cfg.successors(i):
                if s != EXIT and self.dominates(s, i):
                    out.setdefault(s, []).append(i)
        return out

    def body(self, head: int) -> set[int]:
        preds: dict[int, list[int]] = self._preds
        seen = {head}
        todo = [u for u in self.latches[head] if u != head]
        seen.update(todo)
        while todo:
            x = todo.pop()
            for p in preds.get(x, []):
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
        return seen

    @cached_property
    def _preds(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in range(self.n):
            for s in self.cfg.successors(i):
                out.setdefault(s, []).append(i)
        return out

    def exit_test(self, branch: int) -> ExitTest | None:
        """The innermost natural loop whose exit test `branch` is, if any."""
        ins = self.cfg.body[branch]
        if ins.base != "bra" or ins.guard is None:
            return None
        target, nxt = self.cfg.target(ins), branch + 1
        best: tuple[int, ExitTest] | None = None
        for head, latches in self.latches.items():
            if not self.dominates(head, branch):
                continue
            body = self.body(head)
            if branch not in body or (target in body) == (nxt in body):
                continue
            if not all(self.dominates(branch, u) for u in latches):
                continue
            if best is None or len(body) < best[0]:
                best = (len(body), ExitTest(branch, head, target in body))
        return None if best is None else best[1]

    @cached_property
    def _live_in(self) -> list[frozenset[str]]:
        body = self.cfg.body
        ud = [uses_defs(ins) for ins in body]
        live: list[frozenset[str]] = [frozenset()] * self.n
        changed = True
        while changed:
            changed = False
            for i in range(self.n - 1, -1, -1):
                out: set[str] = set()
                for s in self.cfg.successors(i):
                    if s != EXIT:
                        out |= live[s]
                uses, defs = ud[i]
                new = frozenset(uses | (out - defs))
                if new != live[i]:
                    live[i] = new
                    changed = True
        return live

    def relevant(self, zero_global: bool) -> frozenset[str]:
        """Registers whose value can reach synchronization (flow-insensitive, over every instruction).

        The seeds (`_seeds`) and, backwards through every instruction that writes a register, its inputs:
        for the arithmetic of `_DEFS` those of a relevant destination, for anything else all its operands
        once one of them is relevant. A register outside this set never changes an event, so the loop
        head's state is compared without it (a TMA copy's k coordinate, a global pointer).
        """
        key = ("relevant", zero_global)
        hit = self._relevant.get(key)
        if hit is not None:
            return hit
        body = self.cfg.body
        rel: set[str] = set()
        for ins in body:
            rel |= _seeds(ins, zero_global)
        # each writer as (the names that make it relevant, the names it then makes relevant): for the
        # arithmetic of _DEFS its destination and its inputs, for anything else all its operands and all
        # of them; read once, not at every pass of the fixpoint
        rules: list[tuple[frozenset[str], frozenset[str]]] = []
        for ins in body:
            ops = ins.operands
            if not ops or ins.base in ("ld", "ldu", "st", "bra") or affects_sync(ins) or \
                    ins.opcode.startswith("cp.async.bulk.tensor"):
                continue
            if ins.base in _DEFS:
                rules.append((frozenset(_names(ops[0])), frozenset(n for op in ops[1:] for n in _names(op))))
            else:
                names = frozenset(n for op in ops for n in _names(op))
                rules.append((names, names))
        changed = True
        while changed:
            changed = False
            for trigger, inputs in rules:
                if rel.isdisjoint(trigger) or inputs <= rel:
                    continue
                rel |= inputs
                changed = True
        out = frozenset(rel)
        self._relevant[key] = out
        return out

    def live_at(self, pc: int) -> frozenset[str]:
        """Registers that some path from `pc` reads before writing them."""
        return self._live_in[pc]


def _seeds(ins: Instr, zero_global: bool) -> set[str]:
    """Registers whose value at this instruction can matter to synchronization by themselves.

    A guard decides who executes; a synchronizing instruction's operands are
    its barrier, buffer, count, parity and byte count -- but for the
    coordinates of a tensor copy, which choose global memory only. Loads and
    stores matter by their address unless it is a global one (unless
    --zero-global reads global memory), and by their value only through local
    memory (the executor follows local stores; shared and global memory values
    are unknown to it).
    """
    out = {ins.guard} if ins.guard else set()
    base, mods, ops = ins.base, ins.mods, ins.operands
    glob = "global" in mods and not zero_global
    if base in ("ld", "ldu"):
        return out if glob else out | set(_names(ops[1])) if len(ops) > 1 else out
    if base == "st":
        addr = set() if glob else set(_names(ops[0]))
        return out | addr | (set(_names(ops[1])) if "local" in mods or not any(
            m in mods for m in ("global", "shared")) else set())
    if ins.opcode.startswith("cp.async.bulk.tensor"):
        return out | {n for op in ops for n in ([op.base] if isinstance(op, TensorAddr) else _names(op))}
    if affects_sync(ins) or base in ("atom", "red"):
        return out | {n for op in ops for n in _names(op)}
    return out


_CACHE: dict[int, tuple[Cfg, LoopInfo]] = {}


def loop_info(cfg: Cfg) -> LoopInfo:
    hit = _CACHE.get(id(cfg))
    if hit is None or hit[0] is not cfg:
        hit = (cfg, LoopInfo(cfg))
        _CACHE[id(cfg)] = hit
    return hit[1]
