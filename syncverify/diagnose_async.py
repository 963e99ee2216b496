"""A release made while the warp's asynchronous read of the buffer is still in flight, named at its arrive,
as the counterexample itself shows it.

A wgmma (or a TMA store's bulk read of its source) reads shared memory asynchronously until the issuing warp's
`wgmma.wait N` (`bulk.wait_read N`) retires it; an arrive between the issue and that wait releases the stage
without the read (PTX ISA §9.7.15.7.3, `wgmma.wait_group`: it waits until at most N of the most recent groups
are pending and all older ones are complete). The search sees the consequence -- the producer's next write of
the stage races with the read (SV302 for a TMA load over it) -- but the line to change is the arrive.

Moving the arrive and searching again (diagnose_release.py's way) is certain but not affordable on a kernel:
the refill that shows the bug needs a deeper bound than a clean search of the kernel fits in. This check reads
the violation's own counterexample instead, and speaks only when all of this holds in it:

* the race's other side is an async read issued by process R at line Lr, and one issue of it on the path is
  known to be the raced one: R issued that line once, or, in a loop, once with an index that evaluates (at
  the step's loop variables and the `let`s in scope) to the raced slot; and the issuing statement is followed
  in its block by the arrive and then by a wait of the read's unit (the retirement the arrive should follow);
* R's arrive on barrier B, made after that issue with no wait of the read's unit by R in between (so the read
  was issued and not retired when R arrived), landed in phase p of B;
* the racing writer's last mbarrier wait before its write is on B, after R's arrive, and passed when B was in
  phase p + 1: it observed the completion of phase p, the one R's arrive counted towards.

Each is a fact of one execution the search found, so the finding is certain as an observation; it does not
claim that moving the arrive fixes everything, and says so. The trace keeps every step of R and of the writer
and every step that changed B (engines/witness.py, `kept`), which is what is read here.
"""

from __future__ import annotations

import dataclasses
import re

from . import ir
from .diagnose_ir import RACES, blocks
from .diagnostics import Diagnostic, Related, TraceStep, make
from .expr import Context, EvalError, evaluate
from .result import CheckResult

# the async readers and the unit of the group wait that retires each one's read
READERS: dict[type, ir.GroupUnit] = {ir.WgmmaRead: "wgmma", ir.TmaStore: "bulk"}
_OTHER = re.compile(r"\bread at line (\d+) by the async operation issued by ([^\s)]+)\)")
_SLOT = re.compile(r"race on (\S+?):")
_STATE = re.compile(r"(?:^|; )(\S+): phase \d+ ")


def _leaf(s: ir.Stmt) -> ir.Stmt:
    """The one operation an elect block (or a one-statement lane guard) holds, else the statement."""
    if isinstance(s, ir.Elect) and len(s.body) == 1:
        return _leaf(s.body[0])
    if isinstance(s, ir.If) and s.probe is None and len(s.then) == 1 and not s.orelse:
        return _leaf(s.then[0])
    return s


def _retire_after(protocol: ir.Protocol, read_line: int, arrive_line: int, unit: str) -> ir.GroupWait | None:
    """The group wait that retires the read at `read_line`, when in one block the read is followed by an arrive
    at `arrive_line` with no such wait in between, and then by the wait; else None."""
    for block in blocks(protocol.body):
        ops = [_leaf(s) for s in block]
        reads = [i for i, s in enumerate(ops) if isinstance(s, tuple(READERS)) and s.span.line == read_line]
        arrives = [i for i, s in enumerate(ops) if isinstance(s, ir.MbarArrive) and s.span.line == arrive_line]
        if not reads or not arrives or arrives[0] < reads[0]:
            continue
        waits = [i for i, s in enumerate(ops) if isinstance(s, ir.GroupWait) and s.unit == unit]
        if any(reads[0] < i < arrives[0] for i in waits):
            return None
        later = [ops[i] for i in waits if i > arrives[0]]
        return later[0] if later and isinstance(later[0], ir.GroupWait) else None
    return None


def _ops_by_line(protocol: ir.Protocol) -> dict[tuple[int, str], ir.Stmt]:
    """(line, the statement's text as a trace shows it) -> the operation."""
    out: dict[tuple[int, str], ir.Stmt] = {}
    for block in blocks(protocol.body):
        for s in block:
            if not isinstance(s, ir.Let | ir.For | ir.If | ir.Elect):
                out.setdefault((s.span.line, protocol.text_of(s.span)), s)
    return out


def _phase_before(steps: tuple[TraceStep, ...], end: int, bar: str) -> int | None:
    """The phase barrier `bar` is in just before step `end`, from the last state of it the trace shows."""
    pattern = re.compile(rf"(?:^|; ){re.escape(bar)}: phase (\d+) ")
    for s in reversed(steps[:end]):
        m = pattern.search(s.state)
        if m:
            return int(m[1])
    return None


def _arrived_on(step: TraceStep) -> str:
    """The barrier an arrive step used: the trace names a local one; a remote arrive (`@ r`), the one barrier
    whose state it changed."""
    if step.barrier:
        return step.barrier
    changed = _STATE.findall(step.state)
    return changed[0] if len(changed) == 1 else ""


def released_in_flight(protocol: ir.Protocol, result: CheckResult) -> list[Diagnostic]:
    """The arrive that released a stage while the arriving warp's async read of it was in flight, when the
    race's counterexample shows the writer passing the phase that arrive counted towards."""
    out: list[Diagnostic] = []
    named: set[int] = set()
    ops = _ops_by_line(protocol)
    for d in result.diagnostics:
        m = _OTHER.search(d.related[0].message) if d.code in RACES and d.is_error and d.related and d.span \
            else None
        if m is None or not d.trace:
            continue
        found = _observed(protocol, d, int(m[1]), m[2], ops)
        if found is None or found[0].span.line in named:
            continue
        named.add(found[0].span.line)
        out.append(found[1])
    return out


def _observed(protocol: ir.Protocol, race: Diagnostic, read_line: int, reader: str,
              ops: dict[tuple[int, str], ir.Stmt]) -> tuple[ir.MbarArrive, Diagnostic] | None:
    steps = race.trace
    end = max((i for i, s in enumerate(steps) if f"<- {race.code}" in s.note), default=-1)
    if end < 0:
        return None
    writer = steps[end].role
    mine = [(i, ops.get((s.line, s.op))) for i, s in enumerate(steps[:end]) if s.role == reader]
    issues = [i for i, op in mine if isinstance(op, tuple(READERS)) and op.span.line == read_line]
    slot = _SLOT.search(race.message)
    if len(issues) > 1 and slot is not None:  # a loop: the issues that read the raced slot, when each is known
        read_slots = [_slot_read(protocol, ops[(steps[i].line, steps[i].op)], steps[i]) for i in issues]
        issues = [i for i, s in zip(issues, read_slots, strict=True) if s == slot[1]] \
            if None not in read_slots else issues
    if len(issues) != 1:
        return None  # the raced issue is not known for certain
    issue = issues[0]
    read = ops[(steps[issue].line, steps[issue].op)]
    unit = READERS[type(read)]
    for i, op in mine:
        if i <= issue:
            continue
        if isinstance(op, ir.GroupWait) and op.unit == unit:
            return None  # retired (perhaps) before any later arrive of this warp
        bar = _arrived_on(steps[i])
        if not (isinstance(op, ir.MbarArrive) and op.tx_bytes is None and not op.drop and bar):
            continue
        phase = _phase_before(steps, i, bar)
        # the writer's last wait before its write: on this barrier, after the arrive, and B one phase further
        waits = [j for j in range(end) if steps[j].role == writer
                 and isinstance(ops.get((steps[j].line, steps[j].op)), ir.MbarWait)]
        if phase is None or not waits or waits[-1] < i or steps[waits[-1]].barrier != bar \
                or _phase_before(steps, waits[-1], bar) != phase + 1:
            continue
        retire = _retire_after(protocol, read_line, op.span.line, unit)
        if retire is None:
            continue
        what = f"`{slot[1]}`" if slot else "the buffer"
        kind = "wgmma" if unit == "wgmma" else "TMA store's"
        wait = "wgmma.wait" if unit == "wgmma" else "bulk.wait_read"
        return op, make(
            race.code, f"released before the read retires, as this counterexample shows: {reader}'s arrive on "
            f"`{bar}` counts towards phase {phase} while its {kind} read of {what} at line {read_line} is still in "
            f"flight (the `{wait}` at line {retire.span.line}, after the arrive, retires it); {writer}'s wait on "
            f"`{bar}` at line {steps[waits[-1]].line} passed on that phase's completion, and its write at line "
            f"{race.span.line} races with the read ({race.code}). An observation of this execution, not a "
            f"re-search: release the stage after the `{wait}` that retires its reads", op.span, trace=race.trace,
            related=(Related(read.span, f"the {kind} read in flight"),
                     Related(retire.span, f"the `{wait}` that retires it"),
                     Related(race.span, f"the race it causes ({race.code})")))
    return None


def _slot_read(protocol: ir.Protocol, read: ir.Stmt, step: TraceStep) -> str | None:
    """The slot a read issued at this step reads, as the race names slots (`tile[2]@cta1`): its index
    evaluated with the step's loop variables and the `let`s in scope; None where it needs anything else
    (a lane, a role instance, a probe's result)."""
    buf = read.buf if isinstance(read, ir.WgmmaRead | ir.TmaStore) else None
    lets = _lets_before(protocol.body, read, [])
    if buf is None or lets is None:
        return None
    suffix = f"@cta{step.cta}" if protocol.cluster > 1 else ""
    if buf.index is None:
        return buf.name + suffix
    env: dict[str, int] = {}
    for word in step.iteration.split():
        name, _, value = word.partition("=")
        if value.lstrip("-").isdigit():
            env[name] = int(value)
    ctx = Context(step.cta, -1, frozenset())
    for let in lets:
        env.pop(let.name, None)
        if let.probe is None and _only_cta(let.value):
            try:
                env[let.name] = evaluate(let.value, env, ctx)
            except EvalError:
                pass
    if not _only_cta(buf.index):
        return None
    try:
        return f"{buf.name}[{evaluate(buf.index, env, ctx)}]{suffix}"
    except EvalError:
        return None


def _only_cta(expr: object) -> bool:
    """Does the expression use no builtin but `cta` (and no role test)? Those are the ones a trace step fixes."""
    if isinstance(expr, ir.Builtin):
        return expr.name == "cta"
    if isinstance(expr, ir.InRole):
        return False
    if dataclasses.is_dataclass(expr):
        return all(_only_cta(getattr(expr, f.name)) for f in dataclasses.fields(expr) if f.name != "span")
    return True


def _lets_before(stmts: tuple[ir.Stmt, ...], target: ir.Stmt, lets: list[ir.Let]) -> list[ir.Let] | None:
    """The `let`s in scope at `target`, in order (None if it is not in the body)."""
    scope = list(lets)
    for s in stmts:
        if s is target:
            return scope
        if isinstance(s, ir.Let):
            scope.append(s)
        bodies = (s.body,) if isinstance(s, ir.For | ir.Elect) else (s.then, s.orelse) if isinstance(s, ir.If) else ()
        for body in bodies:
            found = _lets_before(body, target, scope)
            if found is not None:
                return found
    return None
