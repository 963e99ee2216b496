"""Counterexamples as reported: replayed in the frame of the real warps, then shortened.

Why a separate replay frame. Under symmetry reduction the search stores one
representative per orbit of states, so the warp indices in its step labels and
in the violation it found are those of the representative. A message naming
"consumer[0].w1" and a trace whose steps were re-attributed to the real warps
("consumer[1].w2") then disagree although both are correct on their own. Here the
representative path is translated once into a path over the real (never
canonicalized) states, and the last step is taken again there: the message, the
processes it names, and every step are then in one frame.

Why these steps are kept. A shortened trace must still show the bug: both
accesses of a race (all steps of the warps the finding names), the arrive that
should have released and the wait that should have acquired (steps of those same
warps), and every step that changed a barrier those steps used, in particular the
step that completes each of its phases. Rows of the same operation by several
warps merge into one row, but never a row that completes a phase or a
generation: that step says who let the others through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

from .. import ir
from ..diagnostics import Diagnostic, Related, Span, TraceStep, make
from ..semantics.machine import Machine, StepResult, Violation
from ..semantics.state import P_PC, P_VARS, State
from ..semantics.symmetry import Symmetry
from ..semantics.symmetry_perm import IDENTITY, Auto, PermutedSymmetry

MAX_UNTRIMMED = 12  # traces this short are shown whole


class Replays:
    """The model's steps and canonical forms met while replaying the paths of one search's
    findings, remembered by the identity of the state (kept alive here, so no other state has its
    id meanwhile).

    Why. Every finding is replayed from the initial state up to three times (to translate the path
    into the real warps' frame, to find the finding again there, and to describe each step), and the
    paths of one search's findings share long prefixes (they are branches of the one tree the search
    built). On the extracted 2x1 cooperative GEMM the 32 reports replayed 52,590 steps, four times
    the search's own 2,252 states: most of the check's CPU. A step and a canonical form are
    functions of the state alone, and a remembered step hands back the same successor object, so
    the next step of a shared prefix is found remembered too: the reports are the same."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self._steps: dict[tuple[int, tuple], tuple[State, StepResult | None]] = {}
        self._canon: dict[tuple[int, int], tuple[State, Symmetry, tuple]] = {}
        self._initial: State | None = None
        self._diffs: dict[tuple[int, int], str] = {}

    def initial(self) -> State:
        """The machine's initial state, one object for every replay (so that their steps are shared)."""
        if self._initial is None:
            self._initial = self.machine.initial()
        return self._initial

    def step(self, state: State, label: tuple) -> StepResult | None:
        key = (id(state), label)
        kept = self._steps.get(key)
        if kept is None:
            kept = self._steps[key] = (state, self.machine.step(state, label))
        return kept[1]

    def diff(self, before: State, after: State) -> str:
        """What a step changed in the barriers, as a trace row shows it (both states are kept alive by
        the remembered step that led from one to the other)."""
        key = (id(before), id(after))
        text = self._diffs.get(key)
        if text is None:
            text = self._diffs[key] = _diff(self.machine, before, after)
        return text

    def canon(self, symmetry: Symmetry, state: State) -> tuple:
        """``symmetry.canon(state)``: (the representative, the permutation that maps to it)."""
        key = (id(symmetry), id(state))
        kept = self._canon.get(key)
        if kept is None:
            kept = self._canon[key] = (state, symmetry, symmetry.canon(state))
        return kept[2]

_PART = re.compile(r"^(?P<name>[^:]+): (?:phase (?P<phase>\d+)|.*\bgen (?P<gen>\d+))")


def real_path(machine: Machine, labels: Sequence[tuple], symmetry: Symmetry | None,
              replays: Replays | None = None) -> list[tuple]:
    """The search's path (over representatives) as a path over the real states: each process
    label names the real warp, each agent label the real issuing warp (and, under a renaming
    automorphism, semantics/symmetry_perm.py, the real slot, barrier and line). ``replays``: the
    steps remembered across the reports of one search."""
    if symmetry is None or not symmetry.groups:
        return list(labels)
    replays = replays or Replays(machine)
    if isinstance(symmetry, PermutedSymmetry):
        return _real_path_permuted(replays, labels, symmetry)
    state, perm = replays.canon(symmetry, replays.initial())
    real = _follow(list(range(len(machine.procs))), perm)
    out: list[tuple] = []
    for label in labels:
        if label[0] == "p":
            out.append(("p", real[label[1]], *label[2:]))  # (a probe's false outcome keeps its mark)
        else:
            a = label[1]
            out.append(("a", (*a[:6], real[a[6]], *a[7:])))
        res = replays.step(state, label)
        if res is None or res.state is None:
            break
        state, perm = replays.canon(symmetry, res.state)
        real = _follow(real, perm)
    return out


def _real_path_permuted(replays: Replays, labels: Sequence[tuple], symmetry: PermutedSymmetry) -> list[tuple]:
    """real_path under renaming automorphisms: ``acc`` maps the real state to the stored one, so
    each stored label's real counterpart is its image under acc's inverse."""
    state, g = replays.canon(symmetry, replays.initial())
    acc = g or IDENTITY
    out: list[tuple] = []
    for label in labels:
        out.append(acc.inverse().map_label(label))
        res = replays.step(state, label)
        if res is None or res.state is None:
            break
        state, g = replays.canon(symmetry, res.state)
        if g is not None:
            acc = g.compose(acc)
    return out


def barrier_of(machine: Machine, state: State, p: int, op: ir.Op | None) -> str:
    """The mbarrier a local arrive or a wait of process p uses in this state (`full[0]`), or ""."""
    if not isinstance(op, ir.MbarWait | ir.MbarArrive) or getattr(op, "remote", None) is not None:
        return ""
    from ..expr import evaluate

    try:
        env = machine.env(p, state.procs[p][P_VARS])
        index = evaluate(op.bar.index, env, machine.ctx[p]) if op.bar.index is not None else 0
        return machine.mb_label(machine.mb_index[(machine.procs[p].cta, op.bar.name, index)])
    except Exception:  # a step that fails to evaluate is reported by its rule; no edge to draw
        return ""


def final_finding(machine: Machine, labels: Sequence[tuple], v: Violation,
                  replays: Replays | None = None) -> Violation | None:
    """Replay a real path and find `v` again at its end: raised or recorded by the last step, or,
    for a deadlock, in the state the path ends in; with the real warps' names. None if the replay
    does not reproduce it (then the caller keeps the search's own finding)."""
    line = v.span.line if v.span else 0
    replays = replays or Replays(machine)
    state = replays.initial()
    for n, label in enumerate(labels, start=1):
        res = replays.step(state, label)
        if res is None:
            return None
        if n == len(labels):
            found = [f for f in ([res.violation] if res.violation else []) + res.soft + res.warnings
                     if f.code == v.code and (f.span.line if f.span else 0) == line]
            if found:
                return found[0]
        if res.state is None:
            return None
        state = res.state
    if v.message.startswith("deadlock"):
        again = deadlock(machine, state)
        return again if again.code == v.code else None
    return None


def _changes(step: TraceStep) -> dict[str, tuple[str, int]]:
    """Barrier name -> ("phase" | "gen", number) for each barrier the step changed."""
    out = {}
    for part in step.state.split("; "):
        m = _PART.match(part)
        if m:
            out[m["name"]] = ("phase", int(m["phase"])) if m["phase"] is not None else ("gen", int(m["gen"]))
        elif part:
            out[part.split(":")[0]] = ("", 0)
    return out


def completions(steps: Sequence[TraceStep]) -> list[set[str]]:
    """For each step, the barriers whose phase (mbarrier) or generation (named, cluster barrier)
    it completed: the number after it is higher than the last one seen."""
    last: dict[str, int] = {}
    out = []
    for s in steps:
        done = set()
        for name, (kind, n) in _changes(s).items():
            if kind and name in last and n > last[name]:
                done.add(name)
            if kind:
                last[name] = n
        out.append(done)
    return out


def trim(steps: Sequence[TraceStep], involved: set[str]) -> tuple[TraceStep, ...]:
    """The reported steps: `kept` of them, rows of one operation by several warps merged."""
    actors = {steps[-1].role} | involved if steps else set()
    return merge(tuple(steps[i] for i in kept(steps, involved)), actors)


def kept(steps: Sequence[TraceStep], involved: set[str]) -> list[int]:
    """Keep the last step, every step of its actor and of the warps the finding names, closing
    backwards every step that changed a barrier a kept step changed, and every step that
    completes a phase or generation of one of those barriers."""
    if len(steps) <= MAX_UNTRIMMED:
        return list(range(len(steps)))
    actors = {steps[-1].role} | involved
    done = completions(steps)
    keep = {len(steps) - 1} | {i for i, s in enumerate(steps) if s.role in actors}
    while True:
        touched: set[str] = set()
        closed: set[int] = set()
        for i in range(len(steps) - 1, -1, -1):
            changed = set(_changes(steps[i]))
            if i in keep or changed & touched:
                closed.add(i)
                touched |= changed
        # the step that completes each phase or generation of a barrier the kept steps use (the
        # arrival that let a waiter through), then what that step depended on in turn
        closed |= {i for i, names in enumerate(done) if names & touched}
        if closed == keep:
            break
        keep = closed
    return sorted(keep)


def merge(steps: Sequence[TraceStep], apart: Set[str] = frozenset()) -> tuple[TraceStep, ...]:
    """Merge runs of one operation (same line, iteration, CTA) by different warps into one row
    that counts them. A step that completes a phase or a generation, and a step of a warp in
    `apart` (the ones the finding names), stay rows of their own."""
    done = completions(steps)
    out: list[TraceStep] = []
    members: list[str] = []
    for s, completes in zip(steps, done, strict=True):
        prev = out[-1] if out else None
        alone = bool(completes) or s.role in apart
        if prev is not None and not alone and prev.line == s.line and prev.op == s.op \
                and prev.iteration == s.iteration and prev.cta == s.cta and not s.note and not prev.note \
                and members and s.role not in members:
            members.append(s.role)
            who = f"{len(members)} warps: {members[0]} … {members[-1]}" if len(members) > 2 \
                else f"2 warps: {members[0]}, {members[1]}"
            out[-1] = TraceStep(step=s.step, cta=s.cta, role=who, line=s.line, op=s.op, note="",
                                iteration=s.iteration, state=s.state)
        else:
            out.append(s)
            members = [] if alone else [s.role]
    return tuple(out)


def diagnostic(machine: Machine, v: Violation, labels: list[tuple], full_trace: bool,
               symmetry: Symmetry | None, replays: Replays | None = None) -> Diagnostic:
    """The reported finding: message, names, related locations and trace all in the real warps'
    frame; the trace shortened unless `full_trace`. ``replays``: the steps remembered across the
    reports of one search (see Replays)."""
    replays = replays or Replays(machine)
    path = real_path(machine, labels, symmetry, replays)
    found = final_finding(machine, path, v, replays) if symmetry is not None and symmetry.groups else None
    if found is None:  # no symmetry, or a replay that did not reproduce it: the search's own finding
        found, path, frame = v, labels, symmetry
    else:
        frame = None
    steps = build_trace(machine, path, full=True, symmetry=frame, replays=replays)
    involved = {machine.proc_label(p) for p in found.procs} if frame is None else \
        set(names_in(found.message, steps))
    trace = tuple(steps) if full_trace else trim(steps, involved)
    notes: tuple[str, ...] = ()
    if not full_trace and len(trace) < len(steps):
        notes = (f"trace trimmed to {len(trace)} of {len(steps)} steps (--full-trace shows all)",)
    related = tuple(Related(_line_span(machine.protocol, line, msg), msg) for line, msg in found.related)
    span = found.span
    if span is not None and span.column == 1 and span.path == machine.protocol.path:
        span = _line_span(machine.protocol, span.line)  # a rule that knows only the line: point at its operation
    return make(found.code, found.message, span, severity=found.severity, trace=trace, related=related,
                notes=notes)


def _line_span(protocol: ir.Protocol, line: int, message: str = "") -> Span:
    """The span of an operation on a line (for a caret under it): the first whose mnemonic the
    message names (`read`, `write`, `tma.load`…), else the line's first; else the line's start."""
    ops = _op_spans(protocol).get(line, [])
    words = set(re.findall(r"[\w.]+", message))
    for span in ops:
        mnemonic = protocol.text_of(span).split(" ")[0].rstrip(";")
        if mnemonic in words:
            return span
    return ops[0] if ops else Span(protocol.path, line, 1, line, 2)


def _op_spans(protocol: ir.Protocol) -> dict[int, list[Span]]:
    cached = _SPANS.get(id(protocol))
    if cached is not None and cached[0] is protocol:
        return cached[1]
    spans: dict[int, list[Span]] = {}

    def walk(stmts: tuple[ir.Stmt, ...]) -> None:
        for st in stmts:
            if isinstance(st, ir.For | ir.Elect):
                walk(st.body)
            elif isinstance(st, ir.If):
                walk(st.then)
                walk(st.orelse)
            elif not isinstance(st, ir.Let) and st.span.path == protocol.path:
                spans.setdefault(st.span.line, []).append(st.span)

    walk(protocol.body)
    for found in spans.values():
        found.sort(key=lambda sp: sp.column)
    _SPANS.clear()  # one protocol at a time: its reports are built together
    _SPANS[id(protocol)] = (protocol, spans)
    return spans


_SPANS: dict[int, tuple[ir.Protocol, dict[int, list[Span]]]] = {}


def names_in(message: str, steps: Sequence[TraceStep]) -> list[str]:
    """The warps of the trace that a message names (used when the finding's own process indices
    are in the representatives' frame)."""
    return [role for role in {s.role for s in steps} if re.search(rf"(?<![\w\[.]){re.escape(role)}(?![\w\]])",
                                                                  message)]


def deadlock(machine: Machine, state: State) -> Violation:
    """SV201 (or SV503 when bytes that never arrive are the cause): every blocked process."""
    blocked = [p for p in range(len(machine.procs)) if not machine.done(state, p)]
    lines = [f"{machine.proc_label(p)} {machine.blocked_reason(state, p)}" for p in blocked]
    first = blocked[0]
    ins = machine.programs[first].code[state.procs[first][P_PC]]
    span = ins.op.span if ins.op is not None else machine.protocol.span
    tx_stuck = [m for m in range(len(machine.mb_names)) if state.mbars[m][0] and state.mbars[m][2] == 0
                and state.mbars[m][4] != 0]
    roles = sorted({machine.procs[p].role or "cta" for p in blocked})
    if tx_stuck and any(machine.mb_label(m) in line for m in tx_stuck for line in lines):
        desc = "; ".join(machine.describe_mbar(state, m) for m in tx_stuck)
        return Violation("SV503", f"deadlock: all arrivals are in but the transaction bytes never balance ({desc}). "
                         "Blocked: " + "; ".join(lines), span, procs=tuple(blocked))
    spinning = [p for p in blocked if isinstance(machine.programs[p].code[state.procs[p][P_PC]].op,
                                                  ir.FlagOp | ir.GridSync)]
    if spinning:  # through global memory (semantics/families/globalmem.py)
        first = spinning[0]
        span = machine.programs[first].code[state.procs[first][P_PC]].op.span
        if machine.resident is not None:
            ctas = ", ".join(str(c) for c in sorted(machine.resident))
            return Violation("SV803", f"co-residency: with only CTA{'s' if len(machine.resident) > 1 else ''} "
                             f"{ctas} resident, {machine.proc_label(first)} can never leave its wait: it depends "
                             "on a CTA that this launch may not run until the waiting one exits (say `launch "
                             "cooperative;` or `launch persistent;` if the grid is resident at once, `launch "
                             "ordered;` if CTAs start in block order). Blocked: " + "; ".join(lines), span,
                             procs=tuple(blocked))
        return Violation("SV801", f"deadlock through global memory: {', '.join(roles)} can never move again. "
                         "Blocked: " + "; ".join(lines), span, procs=tuple(blocked))
    return Violation("SV201", f"deadlock: {', '.join(roles)} can never move again. Blocked: " + "; ".join(lines),
                     span, procs=tuple(blocked))


def _diff(machine: Machine, before: State, after: State) -> str:
    parts = []
    for m, (a, b) in enumerate(zip(before.mbars, after.mbars, strict=True)):
        if a[:5] != b[:5]:
            parts.append(machine.describe_mbar(after, m))
    for i, (a, b) in enumerate(zip(before.named, after.named, strict=True)):
        if a != b:
            cta = f"@cta{i // 16}" if machine.ncta > 1 else ""
            parts.append(f"bar {i % 16}{cta}: {b.arrived} arrived, gen {b.gen}")
    if before.cluster != after.cluster:
        parts.append(f"cluster barrier: {after.cluster[1]} arrived, gen {after.cluster[0]}")
    return "; ".join(parts)


def build_trace(machine: Machine, labels: list[tuple], full: bool = True,
                symmetry: Symmetry | None = None, involved: tuple[int, ...] = (),
                replays: Replays | None = None) -> tuple[TraceStep, ...]:
    """Replay a path of step labels and describe each step.

    Under symmetry reduction the search stored representatives; the replay
    applies the same canonicalization and tracks the permutations so that each
    step is attributed to the warp that really took it."""
    replays = replays or Replays(machine)
    state = replays.initial()
    real = list(range(len(machine.procs)))  # representative index -> real process
    if symmetry is not None:
        state, perm = replays.canon(symmetry, state)
        real = _follow(real, perm)
    steps: list[TraceStep] = []
    for n, label in enumerate(labels, start=1):
        if label[0] == "p":
            p = label[1]
            ps = state.procs[p]
            ins = machine.programs[p].code[ps[P_PC]]
            proc = machine.procs[real[p]]
            role = machine.proc_label(real[p])
            line = ins.line
            op_text = machine.protocol.text_of(ins.op.span if ins.op is not None else None)
            iteration = machine.iteration(p, ps[P_VARS], ps[P_PC])
            cta = proc.cta
            note = ""
            if isinstance(ins.op, ir.MbarProbe):  # which result the probe returned on this path
                note = "→ false" if len(label) > 2 or not machine.probe_passes(state, p) else "→ true"
            elif len(label) > 3:  # a flag read of an older write (families/globalmem.py)
                note = machine.stale_read_note(state, p, label[3])
            barrier = barrier_of(machine, state, p, ins.op)
        else:
            a = label[1]
            cta, line = a[1], a[7]
            role = "async agent"
            iteration = ""
            op_text = ("bulk copy completes", "tensor-core commit arrives", "cp.async.mbarrier.arrive arrives")[a[0]]
            note = f"into {machine.slot_label(a[1], a[2], a[3])}" if a[0] == 0 else ""
            barrier = ""
        res = replays.step(state, label)
        after = res.state if res is not None and res.state is not None else state
        if res is not None and res.violation is not None:
            note = (note + " " if note else "") + f"<- {res.violation.code}"
        steps.append(TraceStep(step=n, cta=cta, role=role, line=line, op=op_text, note=note, iteration=iteration,
                               state=replays.diff(state, after), barrier=barrier))
        state = after
        if symmetry is not None and res is not None and res.state is not None:
            state, perm = replays.canon(symmetry, state)
            real = _follow(real, perm)
    if full:
        return tuple(steps)

    return trim(steps, {machine.proc_label(real[p]) for p in involved})


def _follow(real: list[int], perm: dict[int, int] | Auto | None) -> list[int]:
    if isinstance(perm, Auto):  # (a renaming automorphism: its processes' part)
        perm = dict(perm.procs)
    if not perm:
        return real
    out = list(real)
    for old, new in perm.items():
        out[new] = real[old]
    return out
