"""Findings that need no search (issue: "static checks … reported only when certain").

* SV504 — an arrive whose arrivals in one instruction exceed the barrier's count:
  `count × threads executing it` > the count the barrier is initialized with.
  pending never exceeds that count, so the first execution overflows.
* SV503 — transaction bytes that can never balance: a barrier that some
  operation expects bytes on but that nothing ever completes bytes on (no copy
  signals it, no complete_tx), or the reverse; or, inside one straight-line
  block that holds a barrier's only expect and only copies, constant byte
  counts that differ.
* SV405 — a remote operation or multicast mask naming a constant CTA rank
  outside the cluster.
* SV206, SV406 — collectives run by too few threads, tensor memory left
  allocated at exit (syncverify.collective).
* SV509 — the shared memory a CTA declares (buffers, 8 bytes per mbarrier) is
  more than one CTA can have on sm_90 (227 KB, CUTLASS's
  `sm90_smem_capacity_bytes`): such a kernel does not launch.

"Certain" means: the operation is in the compiled program of some warp (its
role guards hold), and the arithmetic is on constants. Anything less certain
is left to the search, which decides it exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from .. import ir
from ..diagnostics import Diagnostic, make
from ..semantics.program import OP, Program
from .collective import collective_findings, tmem_findings
from .tmem_walk import WalkIncomplete


def _ops(programs: list[Program]) -> Iterator[tuple[Program, ir.Op, int, bool]]:
    seen = set()
    for prog in programs:
        for ins in prog.code:
            if ins.kind == OP and (id(ins.op), ins.threads) not in seen:
                seen.add((id(ins.op), ins.threads))
                yield prog, ins.op, ins.threads, ins.leader_only


def _const(e: ir.Expr | None) -> int | None:
    return e.value if isinstance(e, ir.Const) else None


def check_overflow(protocol: ir.Protocol, programs: list[Program]) -> list[Diagnostic]:
    out = []
    init_counts: dict[str, set[int | None]] = defaultdict(set)
    for _, op, _, _ in _ops(programs):
        if isinstance(op, ir.MbarInit):
            decl = protocol.mbarrier(op.bar.name)
            init_counts[op.bar.name].add(decl.count if op.count is None else _const(op.count))
    for _, op, threads, _ in _ops(programs):
        if not isinstance(op, ir.MbarArrive):
            continue
        counts = init_counts.get(op.bar.name)
        each = _const(op.count)
        if not counts or None in counts or each is None:
            continue
        limit = max(counts)  # type: ignore[type-var]
        if each * threads > limit:
            who = f"{threads} threads each arrive {each}" if threads > 1 else f"one thread arrives {each}"
            out.append(make("SV504", f"{who} on `{op.bar.name}` in one instruction: {each * threads} arrivals, but "
                            f"the barrier is initialized with count {limit} (wrap it in `elect`, or raise the "
                            "count)", op.span))
    return out


def check_tx_balance(protocol: ir.Protocol, programs: list[Program]) -> list[Diagnostic]:
    expects: dict[str, list[ir.Op]] = defaultdict(list)
    completes: dict[str, list[ir.Op]] = defaultdict(list)
    for _, op, _, _ in _ops(programs):
        if isinstance(op, ir.MbarArrive) and op.tx_bytes is not None:
            expects[op.bar.name].append(op)
        elif isinstance(op, ir.MbarTx):
            (expects if op.kind == "expect" else completes)[op.bar.name].append(op)
        elif isinstance(op, ir.TmaLoad):
            completes[op.bar.name].append(op)
    out = []
    for name in sorted(expects.keys() | completes.keys()):
        if expects[name] and not completes[name]:
            op = expects[name][0]
            out.append(make("SV503", f"bytes are expected on `{name}` but no copy or complete_tx ever signals it: "
                            "its tx-count never returns to 0, so the phase never completes", op.span))
        elif completes[name] and not expects[name]:
            op = completes[name][0]
            out.append(make("SV503", f"bytes complete on `{name}` but nothing expects them (no arrive.expect_tx or "
                            "expect_tx): its tx-count goes negative and the phase never completes", op.span))
    out += _block_balance(protocol.body, expects, completes)
    return out


def _block_balance(stmts: tuple[ir.Stmt, ...], expects, completes) -> list[Diagnostic]:
    """In one straight-line block: the barrier's only expect and all its copies, constant bytes, unequal."""
    out = []
    for name, exp_ops in expects.items():
        ops_here = [s for s in stmts if isinstance(s, ir.MbarArrive | ir.TmaLoad | ir.MbarTx)]
        mine_exp = [s for s in ops_here if s in exp_ops]
        mine_cmp = [s for s in ops_here if s in completes.get(name, ())]
        if len(exp_ops) != 1 or len(mine_exp) != 1 or not mine_cmp or len(mine_cmp) != len(completes[name]):
            continue
        if any(isinstance(c, ir.TmaLoad) and c.multicast is not None for c in mine_cmp):
            continue  # bytes from peers' multicasts land here too: not a local matter
        e = mine_exp[0]
        expected = _const(e.tx_bytes)
        got = [_const(c.tx_bytes) for c in mine_cmp]
        if expected is None or None in got or not _same_index(e, mine_cmp):
            continue
        total = sum(got)  # type: ignore[arg-type]
        if total != expected:
            out.append(make("SV503", f"`{name}` expects {expected} bytes per phase but the copies that signal it "
                            f"complete {total}: the tx-count never balances", e.span))
    for s in stmts:
        if isinstance(s, ir.For | ir.Elect):
            out += _block_balance(s.body, expects, completes)
        elif isinstance(s, ir.If):
            out += _block_balance(s.then, expects, completes) + _block_balance(s.orelse, expects, completes)
    return out


def _same_index(e: ir.Op, others: list[ir.Op]) -> bool:
    key = _index_key(e.bar.index)  # type: ignore[union-attr]
    return all(_index_key(o.bar.index) == key for o in others)  # type: ignore[union-attr]


def _index_key(expr: ir.Expr | None) -> object:
    """An expression without its spans, to compare two index expressions."""
    match expr:
        case None:
            return None
        case ir.Const(value=v):
            return ("c", v)
        case ir.Var(name=n):
            return ("v", n)
        case ir.Builtin(name=n):
            return ("b", n)
        case ir.InRole(role=r):
            return ("r", r)
        case ir.BinOp(op=op, left=left, right=right):
            return (op, _index_key(left), _index_key(right))
        case ir.UnOp(op=op, operand=x):
            return (op, _index_key(x))
        case ir.Cond(cond=c, then=then, orelse=orelse):
            return ("?:", _index_key(c), _index_key(then), _index_key(orelse))
        case ir.Pick(name=n, values=values, index=index, per_cta=per_cta):
            return ("pick", n, values, _index_key(index), per_cta)
    return expr


def check_ranks(protocol: ir.Protocol, programs: list[Program]) -> list[Diagnostic]:
    out = []
    for _, op, _, _ in _ops(programs):
        remote = getattr(op, "remote", None)
        rank = _const(remote)
        if rank is not None and not 0 <= rank < protocol.cluster:
            out.append(make("SV405", f"remote operation targets CTA rank {rank}, outside the cluster "
                            f"(ranks 0..{protocol.cluster - 1})", op.span))
        mask = _const(getattr(op, "multicast", None))
        if mask is not None and (mask <= 0 or mask >= 1 << protocol.cluster):
            out.append(make("SV405", f"multicast mask {mask:#b} names CTAs outside the cluster of "
                            f"{protocol.cluster}", op.span))
    return out


SMEM_CAPACITY = 232_448  # bytes of shared memory one CTA may use on sm_90 (227 KB; docs/model.md)
MBARRIER_BYTES = 8


def check_smem_capacity(protocol: ir.Protocol) -> list[Diagnostic]:
    buffers = sum((b.slots or 1) * b.bytes for b in protocol.buffers)
    # (a barrier declared in a buffer's bytes takes none of its own)
    bars = sum((m.size or 1) * MBARRIER_BYTES for m in protocol.mbarriers if m.storage is None)
    if buffers + bars <= SMEM_CAPACITY:
        return []
    largest = max(protocol.buffers, key=lambda b: (b.slots or 1) * b.bytes)
    return [make("SV509", f"the CTA declares {buffers + bars:,} bytes of shared memory ({buffers:,} in buffers, "
                 f"{bars:,} in mbarriers), more than the {SMEM_CAPACITY:,} bytes (227 KB) one CTA can use on sm_90: "
                 f"the kernel would not launch (largest: `{largest.name}`, {(largest.slots or 1) * largest.bytes:,} "
                 "bytes)", largest.span)]


@dataclass(frozen=True)
class StaticOutcome:
    """The search-free findings, and what could not be decided without a search either: ``gap`` says
    why (empty when everything was), ``stopped_by`` which budget ended it (budget.KINDS). A gap
    makes a check that is otherwise safe inconclusive (engines.merge_static)."""

    findings: list[Diagnostic]
    gap: str = ""
    stopped_by: str = ""


def static_outcome(protocol: ir.Protocol, programs: list[Program], deadline: float | None = None) -> StaticOutcome:
    """Every static finding; ``deadline`` (time.monotonic) is the check's --timeout."""
    found = check_overflow(protocol, programs) + check_tx_balance(protocol, programs) + \
        check_ranks(protocol, programs) + collective_findings(protocol, programs)
    gap = stopped_by = ""
    try:
        found += tmem_findings(protocol, programs, deadline)
    except WalkIncomplete as why:
        gap, stopped_by = f"SV406 not decided: {why}", why.kind
    return StaticOutcome(found + check_smem_capacity(protocol), gap, stopped_by)


def static_findings(protocol: ir.Protocol, programs: list[Program]) -> list[Diagnostic]:
    """The static findings alone, for callers that compare them; raises WalkIncomplete rather than
    leave out what it could not decide."""
    out = static_outcome(protocol, programs)
    if out.gap:
        raise WalkIncomplete(out.stopped_by, out.gap)
    return out.findings
