"""Root causes named at their own line, after the search has found the symptoms.

A wrong arrival count, a wrong first parity or a release that publishes one lane
shows up in the search as a race, a consumption-rule breach or a deadlock at the
lines where the damage is done, none of them at the line to change. The checks
here name that line. Each one is certain before it speaks:

* SV508 (a `per warp` release with no `syncwarp` before it) speaks only when the
  search found a race whose other side is an access that the warp's lanes make
  just before that release, with nothing in between that synchronizes the warp:
  the pattern is there and its consequence was observed.
* SV506 (an mbarrier's count below the threads that arrive on it per phase) and
  SV507 (a first wait whose parity can only be satisfied after it passes) are
  counterfactual: the protocol is searched again with only that count, or only
  that wait's parity, changed; the cause is named only when that search is
  complete and finds no error at all. A count that differs from the arrivals by
  design (turns taken by phase) fails that test and stays silent.

Nothing here runs on a protocol the search found no error in, so none of these
can make a correct protocol fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from . import ir
from .diagnose_ir import RACES, blocks, map_ops, operations
from .diagnostics import Diagnostic, Related, Span, code_and_line, make
from .result import CheckResult, Verdict
from .semantics.program import OP

if TYPE_CHECKING:
    from .options import Options
    from .semantics.machine import Machine

RERUN_SECONDS = 60.0  # each counterfactual search at most this long (never more than --timeout)


def root_causes(protocol: ir.Protocol, result: CheckResult, options: Options) -> CheckResult:
    """The result with the causes that are certain added in front of the symptoms."""
    if result.verdict is not Verdict.VIOLATION or not any(d.is_error for d in result.diagnostics):
        return result
    from .semantics.machine import Assumptions, Machine

    machine = Machine(protocol, Assumptions.of(options))
    found = per_warp_release(protocol, machine, result)
    found += arrival_counts(protocol, machine, result, options)
    found += first_parity(protocol, machine, result, options)
    from .diagnose_async import released_in_flight
    from .diagnose_rank import wrong_rank
    from .diagnose_release import early_release

    found += early_release(protocol, result, options, _search_clean, same_site)
    found += released_in_flight(protocol, result)
    found += wrong_rank(protocol, result, options, _search_clean, same_site)
    have = {code_and_line(d) for d in result.diagnostics}
    found = [d for d in found if code_and_line(d) not in have]
    return replace(result, diagnostics=tuple(found) + result.diagnostics) if found else result


def _executions(machine: Machine, op: ir.Stmt, cta: int = 0) -> int:
    """Threads of CTA `cta` that execute `op` each time their warp reaches it."""
    total = 0
    for prog in machine.programs:
        if prog.process.cta != cta:
            continue
        for ins in prog.code:
            if ins.kind == OP and ins.op is op:
                total += 1 if ins.leader_only else ins.threads
                break
    return total


def _search_clean(protocol: ir.Protocol, options: Options, spent: float = 0.0) -> bool:
    """Does a complete search of this variant find no error (warnings allowed)? Its time: at most
    RERUN_SECONDS and --timeout, and four times what the original search took (at least 5 s); a
    variant that needs more stays unproven, and the cause unnamed."""
    from .engines.explicit import Budget, explore
    from .semantics.machine import Assumptions, Machine

    try:
        machine = Machine(protocol, Assumptions.of(options))
    except Exception:  # a variant the model rejects proves nothing
        return False
    seconds = min(options.timeout, RERUN_SECONDS, max(5.0, 4 * spent))
    budget = Budget(options.max_states, seconds, options.max_memory_mb)
    res = explore(protocol, budget, machine)
    return res.verdict is Verdict.SAFE and not any(d.is_error for d in res.diagnostics)


def _word_span(protocol: ir.Protocol, line: int, word: str, after: int = 1) -> Span | None:
    """The span of `word` on a source line, at or after column `after` (for a caret at a count)."""
    lines = protocol.source.splitlines()
    if not 0 < line <= len(lines):
        return None
    col = lines[line - 1].find(word, max(after - 1, 0))
    return None if col < 0 else Span(protocol.path, line, col + 1, line, col + 1 + len(word))


# ---------------------------------------------------------------------------- SV508


def per_warp_release(protocol: ir.Protocol, machine: Machine, result: CheckResult) -> list[Diagnostic]:
    """A `per warp` arrive right after an access all lanes make, with no warp synchronization in
    between, when the search found a race whose other side is that access."""
    race_lines: dict[int, Diagnostic] = {}
    for d in result.diagnostics:
        if d.code in RACES and d.span:
            race_lines.setdefault(d.span.line, d)
            for rel in d.related:
                race_lines.setdefault(rel.span.line, d)
    out = []
    for block in blocks(protocol.body):
        for i, s in enumerate(block):
            if not (isinstance(s, ir.Elect) and s.per_warp):
                continue
            arrives = [op for op in operations(s.body) if isinstance(op, ir.MbarArrive)]
            if not arrives:
                continue
            for prev in reversed(block[:i]):
                if isinstance(prev, ir.Syncwarp | ir.BarSync | ir.ClusterWait | ir.Elect | ir.If | ir.For):
                    break  # the warp synchronizes (or control flow we do not follow): nothing certain
                if isinstance(prev, ir.Access | ir.TmemAccess) and prev.span.line in race_lines \
                        and _executions(machine, prev) > _executions(machine, arrives[0]):
                    race = race_lines[prev.span.line]
                    # a tcgen05.ld/st is each lane's own, completed by each lane's own tcgen05.wait
                    ref = prev.buf if isinstance(prev, ir.Access) else prev.region
                    kind = prev.kind if isinstance(prev, ir.Access) else f"tcgen05.{prev.kind}"
                    what = f"{kind} of {ref.name}{'[…]' if ref.index is not None else ''}"
                    out.append(make(
                        "SV508", f"`per warp` release without `syncwarp`: lane 0's arrive on `{arrives[0].bar.name}` "
                        f"publishes only lane 0's own accesses; lanes 1..31's {what} at line {prev.span.line} are "
                        f"not published (the {race.code} at line {race.span.line}). Put `syncwarp;` before "
                        "`per warp`", s.span,
                        related=(Related(prev.span, f"the {kind} by all lanes"),
                                 Related(race.span, f"the race it causes ({race.code})"))))
                    break
    return out


# ---------------------------------------------------------------------------- SV506


def _count_span(protocol: ir.Protocol, bar: ir.Mbarrier, init: ir.MbarInit | None) -> Span:
    if init is not None and init.count is not None:
        return init.count.span
    return _word_span(protocol, bar.span.line, "count", bar.span.column) or bar.span


def arrival_counts(protocol: ir.Protocol, machine: Machine, result: CheckResult, options: Options) -> list[Diagnostic]:
    """A barrier with one arrive site whose threads per phase differ from its count, when the
    protocol searched again with the count set to those threads has no error."""
    out = []
    ops = list(operations(protocol.body))
    for bar in protocol.mbarriers:
        inits = [op for op in ops if isinstance(op, ir.MbarInit) and op.bar.name == bar.name]
        arrives = [op for op in ops if isinstance(op, ir.MbarArrive) and op.bar.name == bar.name]
        others = [op for op in ops if isinstance(op, ir.UmmaCommit) and op.bar.name == bar.name]
        if len(inits) != 1 or len(arrives) != 1 or others:
            continue
        (init,), (arrive,) = inits, arrives
        count = bar.count if init.count is None else (init.count.value if isinstance(init.count, ir.Const) else None)
        each = arrive.count.value if isinstance(arrive.count, ir.Const) else None
        if count is None or each is None or arrive.remote is not None or protocol.cluster > 1:
            continue
        overflow = re.compile(rf"\bon `?{re.escape(bar.name)}(?![\w])")
        if any(d.code == "SV504" and overflow.search(d.message) for d in result.diagnostics):
            continue  # an overflow (SV504) already names the arrive and the count
        threads = _executions(machine, arrive)
        per_phase = threads * each
        # only more arrivals than the count: the phase then completes early, which the search sees only
        # as races and stale phases elsewhere. Fewer arrivals deadlock at the wait, whose message shows
        # the pending count, and may as well mean a missing arrive (a warp that should arrive_drop).
        if per_phase <= count or per_phase >= 1 << 20:
            continue
        fixed = _with_count(protocol, bar, per_phase)
        if not _search_clean(fixed, options, result.stats.seconds):
            continue
        out.append(make(
            "SV506", f"`{bar.name}` is initialized with count {count}, but "
            + (f"{threads} threads arrive" if threads != 1 else "1 thread arrives") + " on it per phase "
            f"(the arrive at line {arrive.span.line}{'' if each == 1 else f', {each} each'}): the phase completes "
            f"before all of them have arrived. With count {per_phase} the protocol checks without error at this "
            "bound",
            _count_span(protocol, bar, init), related=(Related(arrive.span, "the arrive"),)))
    return out


def _with_count(protocol: ir.Protocol, bar: ir.Mbarrier, count: int) -> ir.Protocol:
    def change(op: ir.Stmt) -> ir.Stmt:
        if isinstance(op, ir.MbarInit) and op.bar.name == bar.name and op.count is not None:
            return replace(op, count=ir.Const(count, op.count.span))
        return op

    bars = tuple(replace(b, count=count) if b is bar else b for b in protocol.mbarriers)
    return replace(protocol, mbarriers=bars, body=map_ops(protocol.body, change))


# ---------------------------------------------------------------------------- SV507


def _flip(waits: list[ir.MbarWait]) -> Callable[[ir.Stmt], ir.Stmt]:
    """An operation map that makes each of `waits` wait for the other parity (`1 ^ (P)`)."""
    flipped = {id(w): replace(w, parity=ir.BinOp("^", ir.Const(1, w.parity.span), w.parity, w.parity.span))
               for w in waits}
    return lambda op: flipped.get(id(op), op)


def same_site(options: Options, line: int, lines: list[int]) -> list[int]:
    """The lines of `lines` written from the same source site as `line` (options.sites: an extracted
    kernel, whose one CUDA statement nvcc unrolled into a statement per stage); a spec's line is its own."""
    site = options.sites.get(line)
    return [line] if site is None else [n for n in lines if options.sites.get(n) == site]

_BLOCKED_WAIT = re.compile(r"line (\d+): wait on (\S+) for parity (\d) — \S+: phase (\d+) pending (\d+)/(\d+)")


def _loop_waits(stmts: tuple[ir.Stmt, ...], loop_vars: frozenset[str] = frozenset()) -> dict[int, ir.MbarWait]:
    """Line -> wait, for the waits inside a loop whose parity follows a loop variable: the ring idiom
    (`parity (k / STAGES + 1) % 2`), where the first round must pass on a fresh barrier. A wait
    outside a loop, or with a fixed parity, waits for one phase on purpose: never blamed."""
    from .expr import free_names

    out: dict[int, ir.MbarWait] = {}
    for s in stmts:
        if isinstance(s, ir.For):
            out |= _loop_waits(s.body, loop_vars | {s.var})
        elif isinstance(s, ir.Elect):
            out |= _loop_waits(s.body, loop_vars)
        elif isinstance(s, ir.If):
            out |= _loop_waits(s.then, loop_vars) | _loop_waits(s.orelse, loop_vars)
        elif isinstance(s, ir.Let):
            if free_names(s.value) & loop_vars:
                loop_vars = loop_vars | {s.name}
        elif isinstance(s, ir.MbarWait) and free_names(s.parity) & loop_vars:
            out[s.span.line] = s
    return out


def _arrives_on(machine: Machine, who: str, bar: str) -> bool:
    """Does the warp labelled `who` have an arrive on barrier `bar` in its program?"""
    for prog in machine.programs:
        if machine.proc_label(prog.process.index) == who:
            return any(ins.kind == OP and isinstance(ins.op, ir.MbarArrive) and ins.op.bar.name == bar
                       for ins in prog.code)
    return False


def first_parity(protocol: ir.Protocol, machine: Machine, result: CheckResult,
                 options: Options) -> list[Diagnostic]:
    """A deadlock in which a warp waits for the completion of phase 0 of a release barrier (one
    with no bytes and no asynchronous arrivals) still in phase 0, when waiting for the other
    parity at that site alone makes the protocol check clean."""
    out = []
    ops = list(operations(protocol.body))
    waits = _loop_waits(protocol.body)
    # barriers that carry bytes or asynchronous arrivals: a wait on one waits for data, and its
    # first parity is 0 by rule; the "phase before 0 counts as complete" idiom is for releases
    data = {op.bar.name for op in ops if isinstance(op, ir.TmaLoad | ir.MbarTx | ir.UmmaCommit)
            or (isinstance(op, ir.MbarArrive) and op.tx_bytes is not None)}
    tried: set[int] = set()
    for d in result.diagnostics:
        if d.code != "SV201":
            continue
        blocked = dict(re.findall(r"(?:Blocked: |; )(\S+) line (\d+):", d.message))
        for m in _BLOCKED_WAIT.finditer(d.message):
            line, name, parity, phase = int(m[1]), m[2], int(m[3]), int(m[4])
            wait = waits.get(line)
            if wait is None or parity != 0 or phase != 0 or line in tried or wait.bar.name in data:
                continue
            # the arrivals that would complete phase 0 must be held back by this wait: some other
            # blocked warp arrives on this barrier later in its program (else the count is the cause)
            waiters = {who for who, at in blocked.items() if int(at) == line}
            if not any(_arrives_on(machine, who, wait.bar.name) for who in set(blocked) - waiters):
                continue
            group = same_site(options, line, sorted(waits))
            tried.update(group)
            variant = replace(protocol, body=map_ops(protocol.body, _flip([waits[n] for n in group])))
            if not _search_clean(variant, options, result.stats.seconds):
                continue
            out.append(make(
                "SV507", f"the first wait on `{name}` waits for parity 0, the completion of phase 0 of a fresh "
                "barrier, but phase 0 can only complete after this warp goes on (a deadlock). A fresh barrier counts "
                "the phase before phase 0 (parity 1) as complete: a producer's first wait on an `empty` barrier "
                "uses parity 1. With the other parity here the protocol checks without error at this bound",
                wait.parity.span, related=(Related(d.span, "the deadlock"),) if d.span else ()))
    return out
