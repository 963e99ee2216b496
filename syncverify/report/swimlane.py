"""Swimlane trace view: one self-contained HTML page with an SVG per trace.

What it draws, left to right in step order:

* one lane per process of the model (every warp of every role instance in every
  CTA, including warps in no role) and one lane per asynchronous agent that took
  a step (a bulk copy into a slot, a tensor-core commit), so a reader sees who
  moved and who did not;
* one box per step in the lane of the warp or agent that took it, coloured by
  the kind of operation; hovering shows the step, the spec line (number and
  text), the loop iteration and the barrier state after the step (SVG
  ``<title>``, so it works without scripts);
* in-flight asynchronous copies as bars from the issuing step to the completion;
* one track per barrier below the lanes, its phases (mbarrier), generations
  (named barrier, cluster barrier) as coloured spans, with a tick per change
  inside a phase;
* the failing step outlined in red with a band across every lane; for a
  deadlock, a red mark at the end of every lane still blocked.

Where the steps come from: a counterexample is the diagnostic's trace as the
checker reports it: the same steps as the text, JSON and SARIF reports (every step
with ``--full-trace``); for a
protocol with no violation, :func:`schedule` runs ONE schedule of the same
``Machine`` the checker explores (a round-robin choice among the enabled steps)
and describes it with the checker's own trace builder. No second interpreter.

The barrier tracks are read back from the ``state`` text of each step (the
``describe_mbar`` wording, e.g. ``full[0]: phase 1 pending 0/1 tx 16384``);
parts it does not recognise are shown in the hover text only.

The page has no scripts and loads nothing: styles are inline and the only
graphics are SVG, so it can be attached to a bug report or a CI artifact.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .. import ir
from ..demangle import title_name
from ..diagnostics import Diagnostic, Severity, TraceStep
from ..result import CheckResult, Verdict

if TYPE_CHECKING:
    from ..semantics.machine import Assumptions

MAX_SCHEDULE_STEPS = 20_000

# geometry (px)
LABEL_W = 200
STEP_W = 30  # wide enough for a few letters of label on each box
LANE_H = 26
TRACK_H = 18
TOP = 34
GAP = 14

# operation kinds -> fill colour (colour-blind-safe hues, distinct from the barrier palette's tints)
KIND_COLOURS: dict[str, str] = {
    "wait": "#2563eb",
    "arrive": "#16a34a",
    "sync": "#7c3aed",
    "read": "#64748b",
    "write": "#ca8a04",
    "async": "#ea580c",
    "complete": "#db2777",
    "setup": "#0f766e",
    "other": "#94a3b8",
}
KIND_NAMES = {
    "wait": "mbarrier wait / group wait", "arrive": "mbarrier arrive / tx", "sync": "named, CTA or cluster barrier",
    "read": "read", "write": "write", "async": "async issue (TMA, bulk, wgmma, umma)",
    "complete": "async agent completes", "setup": "init / inval / fence", "other": "other",
}
BARRIER_HUES = (210, 140, 30, 280, 0, 180, 330, 60, 250, 100)

_MBAR = re.compile(r"^(?P<name>[A-Za-z_]\w*(?:\[\d+\])?(?:@cta\d+)?): "
                   r"(?:phase (?P<k>\d+) pending (?P<pend>\d+)/(?P<exp>\d+)(?: tx (?P<tx>-?\d+))?|not initialized)$")
_NAMED = re.compile(r"^(?P<name>bar \d+(?:@cta\d+)?): (?P<arr>\d+) arrived, gen (?P<gen>\d+)$")
_CLUSTER = re.compile(r"^(?P<name>cluster barrier): (?P<arr>\d+) arrived, gen (?P<gen>\d+)$")


@dataclass(frozen=True, slots=True)
class TraceView:
    """One trace to draw: a counterexample of one diagnostic, or one schedule."""

    title: str
    steps: tuple[TraceStep, ...]
    code: str | None = None  # the diagnostic's code; None for a schedule
    message: str = ""
    line: int = 0  # the diagnostic's line
    failing: int | None = None  # the step number to highlight
    blocked: tuple[str, ...] = ()  # lanes stuck at the end (deadlock)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Span:
    track: str
    label: str
    start: int
    end: int  # inclusive step index
    detail: str
    shade: int  # 0/1: alternate tints for consecutive phases


# ---------------------------------------------------------------------------- lanes


def process_lanes(protocol: ir.Protocol) -> tuple[str, ...]:
    """The label of every process of the model, in process order (the checker's own labels)."""
    from ..semantics.machine import Machine

    m = Machine(protocol)
    return tuple(m.proc_label(p) for p in range(len(m.procs)))


def _agent_lane(step: TraceStep, ncta: int) -> str:
    what = step.note.removeprefix("into ").strip() if step.note.startswith("into ") else ""
    where = f"@cta{step.cta}" if ncta > 1 and "@cta" not in what else ""
    if step.op.startswith("bulk copy"):
        return f"async: copy → {what}{where}" if what else f"async: copy{where}"
    return f"async: {step.op.split(' ')[0]} commit{where}" if step.op else f"async{where}"


def _lane_of(step: TraceStep, ncta: int) -> str:
    return _agent_lane(step, ncta) if step.role == "async agent" else step.role


# ---------------------------------------------------------------------------- schedules


def _actor(label: tuple) -> tuple:
    """Who takes a step, for the round-robin: a process, or the async agents of one CTA together
    (so that copies complete in turn with the warps rather than all at once)."""
    return ("p", label[1]) if label[0] == "p" else ("a", label[1][1])


def schedule(protocol: ir.Protocol, *, assumptions: Assumptions | None = None,
             max_steps: int = MAX_SCHEDULE_STEPS) -> TraceView:
    """One schedule of the model, fairly interleaved: at each state take the enabled step
    of the process (or CTA's async agents) that moved least recently.

    The steps are the model's (``Machine.successors``), described by the checker's
    trace builder, so the page shows exactly what the checker would report for this
    path. If the schedule reaches a violation or a state where nobody can move, it
    stops there and that step is highlighted. ``assumptions``: the readings of the check whose
    result the page shows (``Assumptions.of`` its Options), all of them, so that the schedule takes
    the steps the check took; the defaults when None."""
    from ..engines.witness import build_trace
    from ..semantics.machine import Assumptions, Machine

    m = Machine(protocol, Assumptions() if assumptions is None else replace(assumptions, used=set()))
    state = m.initial()
    labels: list[tuple] = []
    last_moved: dict[tuple, int] = {}
    ending = "every process ran to its end"
    failing_label: tuple | None = None
    blocked: list[str] = []
    while True:
        if len(labels) >= max_steps:
            ending = f"stopped after {max_steps} steps"
            break
        results = list(m.successors(state))
        ok = [r for r in results if r.state is not None]
        if not ok:
            bad = [r for r in results if r.violation is not None]
            if bad:
                failing_label = bad[0].label
                ending = f"the last step is a violation, {bad[0].violation.code}: {bad[0].violation.message}"
            elif not all(m.done(state, p) for p in range(len(m.procs))):
                blocked = [m.proc_label(p) for p in range(len(m.procs)) if not m.done(state, p)]
                ending = "deadlock: " + "; ".join(f"{m.proc_label(p)} {m.blocked_reason(state, p)}"
                                                  for p in range(len(m.procs)) if not m.done(state, p))
            break
        res = min(ok, key=lambda r: last_moved.get(_actor(r.label), -1))
        last_moved[_actor(res.label)] = len(labels)
        labels.append(res.label)
        state = res.state
    if failing_label is not None:
        labels.append(failing_label)
    steps = build_trace(m, labels, full=True)
    return TraceView(title="one schedule of the model", steps=steps,
                     failing=len(steps) if failing_label is not None else None,
                     blocked=tuple(blocked), notes=(ending,))


# ---------------------------------------------------------------------------- from results


def _is_deadlock(d: Diagnostic) -> bool:
    return d.message.startswith("deadlock")


def view_of(d: Diagnostic, lanes: Sequence[str], trimmed: bool = False) -> TraceView:
    """The view of one diagnostic's counterexample (given whole). `trimmed`: only the steps the
    text, JSON and SARIF reports show, each in its own warp's lane (the reports merge rows of one
    operation by several warps; the page keeps them apart)."""
    if trimmed:
        from ..engines.witness import kept, names_in

        d = replace(d, trace=tuple(d.trace[i] for i in kept(d.trace, set(names_in(d.message, d.trace)))))
    blocked: tuple[str, ...] = ()
    failing: int | None = len(d.trace) if d.trace else None
    if _is_deadlock(d):
        failing = None
        after = d.message.split("Blocked:", 1)[-1]
        blocked = tuple(lane for lane in lanes if re.search(rf"(^|; ){re.escape(lane)} line ", after.strip()))
    where = f" (line {d.span.line})" if d.span else ""
    return TraceView(title=f"{d.code} {d.severity.value}{where}", steps=d.trace, code=d.code, message=d.message,
                     line=d.span.line if d.span else 0, failing=failing, blocked=blocked,
                     notes=tuple(f"{r.span.path}:{r.span.line}: {r.message}" for r in d.related) + d.notes)


def views_for(protocol: ir.Protocol, result: CheckResult, codes: Iterable[str] = (), *,
              lanes: Sequence[str] | None = None, trimmed: bool = False,
              assumptions: Assumptions | None = None) -> list[TraceView]:
    """The traces to draw for a check result: every diagnostic with a counterexample
    (errors first; only ``codes`` when given), then — when no error has one and no
    code was asked for — one schedule of the model."""
    lanes = process_lanes(protocol) if lanes is None else lanes
    wanted = {c.upper() for c in codes}
    diags = [d for d in result.diagnostics if d.trace and (not wanted or d.code in wanted)]
    diags.sort(key=lambda d: (d.severity is not Severity.ERROR, d.span.line if d.span else 0, d.code))
    views = [view_of(d, lanes, trimmed) for d in diags]
    if wanted or any(d.is_error for d in diags):
        return views
    view = schedule(protocol, assumptions=assumptions)
    if result.verdict is not Verdict.SAFE:
        why = {Verdict.INCONCLUSIVE: f"the check was inconclusive ({result.coverage}); this schedule is not a proof",
               Verdict.VIOLATION: "the findings have no counterexample trace (they need no search)"}
        view = replace(view, notes=(*view.notes, why.get(result.verdict, "")))
    return [*views, view]


# ---------------------------------------------------------------------------- classification


def _kind(step: TraceStep) -> str:
    if step.role == "async agent":
        return "complete"
    word = step.op.split(" ", 1)[0].rstrip(";")
    base = word.split(".")[0]
    if base in ("wait",) or word in ("mbarrier.try_wait", "wgmma.wait", "bulk.wait_read"):
        return "wait"
    if base in ("arrive", "arrive_drop", "expect_tx", "complete_tx") or word.startswith("mbarrier.arrive"):
        return "arrive"
    if base in ("syncthreads", "__syncthreads", "syncwarp", "__syncwarp", "bar", "barrier", "cluster"):
        return "sync"
    if base == "read":
        return "read"
    if base == "write":
        return "write"
    if base in ("tma", "bulk", "wgmma", "umma", "tmem", "tcgen05"):
        return "async"
    if base in ("init", "inval", "fence") or word.startswith(("mbarrier.init", "mbarrier.inval")):
        return "setup"
    return "other"


def _barrier_spans(steps: Sequence[TraceStep]) -> tuple[list[str], list[_Span], dict[str, list[int]]]:
    """Phases / generations of every barrier named in the steps' state text, and the steps that touched each."""
    order: list[str] = []
    spans: list[_Span] = []
    ticks: dict[str, list[int]] = {}
    open_: dict[str, tuple[str, int, str, int]] = {}  # track -> (label, start, detail, shade)
    count: dict[str, int] = {}
    n = len(steps)
    for i, step in enumerate(steps):
        for part in filter(None, (p.strip() for p in step.state.split("; "))):
            if m := _MBAR.match(part):
                track, phase = m["name"], (f"phase {m['k']}" if m["k"] is not None else "not initialized")
            elif m := (_NAMED.match(part) or _CLUSTER.match(part)):
                track, phase = m["name"], f"gen {m['gen']}"
            else:
                continue
            if track not in count:
                order.append(track)
                count[track] = 0
            ticks.setdefault(track, []).append(i)
            cur = open_.get(track)
            if cur is not None and cur[0] == phase:
                open_[track] = (phase, cur[1], part, cur[3])
                continue
            if cur is not None:
                spans.append(_Span(track, cur[0], cur[1], i - 1, cur[2], cur[3]))
            if phase != "not initialized":
                open_[track] = (phase, i, part, count[track] % 2)
                count[track] += 1
            else:
                open_.pop(track, None)
    for track, (label, start, detail, shade) in open_.items():
        spans.append(_Span(track, label, start, n - 1, detail, shade))
    return order, spans, ticks


def _async_spans(steps: Sequence[TraceStep], lane_of: dict[int, str]) -> list[tuple[str, int, int, str]]:
    """(agent lane, issue index, completion index, text) for each completion matched to the step that issued it
    (same spec line, earliest one not yet matched; a multicast issue may feed several completions)."""
    issued: dict[int, list[int]] = {}
    used: set[int] = set()
    out = []
    for i, step in enumerate(steps):
        if step.role != "async agent":
            if _kind(step) == "async":
                issued.setdefault(step.line, []).append(i)
            continue
        cands = [j for j in issued.get(step.line, []) if j < i]
        if not cands:
            continue
        fresh = [j for j in cands if j not in used]
        j = fresh[0] if fresh else cands[-1]
        used.add(j)
        out.append((lane_of[i], j, i, f"in flight: steps {steps[j].step}–{step.step}, issued by {steps[j].role} "
                                      f"at line {steps[j].line}"))
    return out


# ---------------------------------------------------------------------------- SVG


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _hsl(hue: int, shade: int) -> str:
    return f"hsl({hue},70%,{78 if shade else 64}%)"


def _spec_line(protocol: ir.Protocol, line: int) -> str:
    lines = protocol.source.splitlines()
    return " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""


def _step_title(protocol: ir.Protocol, s: TraceStep, ncta: int) -> str:
    who = s.role if ncta == 1 else f"{s.role} (CTA {s.cta})"
    parts = [f"step {s.step} · {who}" + (f" · {s.iteration}" if s.iteration else "")]
    text = _spec_line(protocol, s.line)
    parts.append(f"line {s.line}: {text}" if text else f"line {s.line}: {s.op}")
    if s.role == "async agent":
        parts.append(s.op + (f" {s.note}" if s.note else ""))
    elif s.note:
        parts.append(s.note)
    if s.state:
        parts.append("after: " + s.state)
    return "\n".join(parts)


def render_svg(protocol: ir.Protocol, view: TraceView, lanes: Sequence[str]) -> str:
    """The SVG of one trace view (see the module docstring for what it shows)."""
    from . import swimlane_marks as marks

    steps = view.steps
    ncta = protocol.cluster
    lane_of = {i: _lane_of(s, ncta) for i, s in enumerate(steps)}
    agent_lanes = list(dict.fromkeys(lane for i, lane in lane_of.items() if steps[i].role == "async agent"))
    proc_lanes = list(lanes) + [lane for lane in dict.fromkeys(lane_of.values())
                                if lane not in lanes and lane not in agent_lanes]  # never drop a step
    # identical warps share a lane; the ones the finding is about keep their own
    keep = set(view.blocked) | {lane for lane in proc_lanes if re.search(
        rf"(?<![\w\[.]){re.escape(lane)}(?![\w\]])", view.message)}
    if view.failing is not None and 0 < view.failing <= len(steps):
        keep.add(lane_of[view.failing - 1])
    proc_lanes, alias, members = marks.fold(proc_lanes, steps, lane_of, keep)
    lane_of = {i: alias.get(lane, lane) for i, lane in lane_of.items()}
    inflight_spans = _async_spans(steps, lane_of)
    pending = marks.in_flight(steps, {j for _, j, _, _ in inflight_spans})
    agent_lanes += list(dict.fromkeys(lane for lane, _ in pending))
    all_lanes = proc_lanes + agent_lanes
    row = {lane: n for n, lane in enumerate(all_lanes)}
    tracks, spans, ticks = _barrier_spans(steps)
    hue = {t: BARRIER_HUES[n % len(BARRIER_HUES)] for n, t in enumerate(dict.fromkeys(
        re.sub(r"\[\d+\]|@cta\d+", "", t) for t in tracks))}
    track_y0 = TOP + len(all_lanes) * LANE_H + GAP
    ncols = max(len(steps), 1) + (1 if view.blocked else 0)
    sw = STEP_W if ncols <= 300 else 8  # long schedules: narrower boxes (unlabelled) keep the page drawable
    width = LABEL_W + ncols * sw + 100 + LABEL_W  # lane names again on the right, where the page opens
    height = track_y0 + len(tracks) * TRACK_H + 20

    def x_of(i: int) -> int:
        return LABEL_W + i * sw

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="swimlane" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(view.title)}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#0f172a"/></marker></defs>',
    ]
    # step axis
    out.append('<g class="axis">')
    for i in range(len(steps)):
        if i == 0 or (i + 1) % 5 == 0:
            out.append(f'<text x="{x_of(i) + sw / 2:.0f}" y="{TOP - 8}" text-anchor="middle">'
                       f'{steps[i].step}</text>')
    out.append("</g>")
    # lanes
    for lane in all_lanes:
        y = TOP + row[lane] * LANE_H
        kind = "agent" if lane in agent_lanes else "process"
        fill = "#f8fafc" if row[lane] % 2 == 0 else "#eef2f7"
        group = members.get(lane, [lane])
        out.append(f'<g class="lane" data-kind="{kind}" data-lane="{_e(lane)}" data-count="{len(group)}" '
                   f'data-members="{_e(" ".join(group))}">'
                   f'<rect class="lane-bg" x="0" y="{y}" width="{width}" height="{LANE_H}" fill="{fill}"/>'
                   f'<text class="lane-label" x="8" y="{y + LANE_H / 2 + 4:.0f}"><title>{_e(", ".join(group))}'
                   f'</title>{_e(lane)}</text><text class="lane-label end" x="{x_of(ncols) + 44}" '
                   f'y="{y + LANE_H / 2 + 4:.0f}">{_e(lane)}</text></g>')
    out.append(f'<line x1="{LABEL_W - 4}" y1="{TOP}" x2="{LABEL_W - 4}" y2="{track_y0 - GAP}" stroke="#cbd5e1"/>')
    # failing band (under the steps)
    if view.failing is not None and 0 < view.failing <= len(steps):
        i = view.failing - 1
        out.append(f'<rect class="fail-band" x="{x_of(i) - 2}" y="{TOP - 4}" width="{sw + 4}" '
                   f'height="{height - TOP}" fill="#fecaca" opacity="0.7"/>')
        out.append(f'<text class="fail-label" x="{x_of(i) + sw / 2:.0f}" y="{TOP - 20}" text-anchor="middle" '
                   f'fill="#b91c1c">{_e(view.code or "stop")}</text>')
    # in-flight async operations
    for lane, j in pending:
        y = TOP + row[lane] * LANE_H + LANE_H / 2
        out.append(f'<line class="inflight pending" x1="{x_of(j) + sw / 2:.0f}" y1="{y:.0f}" x2="{x_of(ncols):.0f}" '
                   f'y2="{y:.0f}" stroke="{KIND_COLOURS["async"]}" stroke-width="4" stroke-dasharray="6 3" '
                   f'opacity="0.6"><title>copy issued at step {steps[j].step} (line {steps[j].line}), still in '
                   f'flight at the end of the trace</title></line>')
    for lane, j, i, text in inflight_spans:
        y = TOP + row[lane] * LANE_H + LANE_H / 2
        out.append(f'<line class="inflight" x1="{x_of(j) + sw / 2:.0f}" y1="{y:.0f}" '
                   f'x2="{x_of(i) + sw / 2:.0f}" y2="{y:.0f}" stroke="{KIND_COLOURS["async"]}" '
                   f'stroke-width="4" stroke-linecap="round" opacity="0.45"><title>{_e(text)}</title></line>')
    # steps
    other = marks.other_access(view.message, steps, view.failing)
    for i, s in enumerate(steps):
        lane = lane_of[i]
        y = TOP + row[lane] * LANE_H + 4
        kind = _kind(s)
        failing = view.failing == i + 1
        cls = "step fail" if failing else "step other-access" if i == other else "step"
        stroke = ' stroke="#dc2626" stroke-width="3"' if failing else \
            ' stroke="#f59e0b" stroke-width="3"' if i == other else ' stroke="#ffffff" stroke-width="1"'
        out.append(f'<rect class="{cls}" data-step="{s.step}" data-line="{s.line}" data-kind="{kind}" '
                   f'x="{x_of(i) + 1}" y="{y}" width="{sw - 2}" height="{LANE_H - 8}" rx="3" '
                   f'fill="{KIND_COLOURS[kind]}"{stroke}><title>{_e(_step_title(protocol, s, ncta))}</title></rect>')
        if sw >= STEP_W:
            out.append(f'<text class="step-label" data-step="{s.step}" x="{x_of(i) + sw / 2:.0f}" '
                       f'y="{y + (LANE_H - 8) / 2 + 1:.0f}" text-anchor="middle">{_e(marks.label(s, kind))}</text>')
        if i == other:
            out.append(f'<text class="other-label" x="{x_of(i) + sw / 2:.0f}" y="{y - 2}" text-anchor="middle">'
                       'other access</text>')
    # release -> acquire edges
    for i, j, bar in marks.edges(steps, lane_of):
        y0 = TOP + row[lane_of[i]] * LANE_H + LANE_H / 2
        y1 = TOP + row[lane_of[j]] * LANE_H + LANE_H / 2
        x0, x1 = x_of(i) + sw / 2, x_of(j) + 2
        out.append(f'<path class="edge" data-from="{steps[i].step}" data-to="{steps[j].step}" '
                   f'data-barrier="{_e(bar)}" d="M{x0:.0f},{y0:.0f} C{(x0 + x1) / 2:.0f},{y0:.0f} '
                   f'{(x0 + x1) / 2:.0f},{y1:.0f} {x1:.0f},{y1:.0f}" fill="none" stroke="#0f172a" '
                   f'stroke-width="1.5" opacity="0.55" marker-end="url(#arrow)"><title>release → acquire on '
                   f'{_e(bar)}: step {steps[i].step} completed the phase, step {steps[j].step} waited for it'
                   f'</title></path>')
    # blocked at the end (deadlock)
    if view.blocked:
        i = len(steps)
        out.append(f'<rect class="fail-band" x="{x_of(i) - 2}" y="{TOP - 4}" width="{sw + 4}" '
                   f'height="{height - TOP}" fill="#fecaca" opacity="0.7"/>')
        out.append(f'<text class="fail-label" x="{x_of(i) + sw / 2:.0f}" y="{TOP - 20}" text-anchor="middle" '
                   f'fill="#b91c1c">{_e(view.code or "deadlock")}</text>')
        for lane in dict.fromkeys(alias.get(b, b) for b in view.blocked):
            if lane not in row:
                continue
            y = TOP + row[lane] * LANE_H + 4
            out.append(f'<rect class="step fail blocked" data-lane="{_e(lane)}" x="{x_of(i) + 1}" y="{y}" '
                       f'width="{sw - 2}" height="{LANE_H - 8}" rx="3" fill="#ffffff" stroke="#dc2626" '
                       f'stroke-width="3"><title>{_e(lane)} can never move again\n{_e(view.message)}</title></rect>')
    # barrier tracks
    for n, track in enumerate(tracks):
        y = track_y0 + n * TRACK_H
        out.append(f'<g class="barrier-track" data-barrier="{_e(track)}">'
                   f'<text class="track-label" x="8" y="{y + TRACK_H - 5}">{_e(track)}</text>'
                   f'<text class="track-label end" x="{x_of(ncols) + 44}" y="{y + TRACK_H - 5}">{_e(track)}</text></g>')
    base = {t: hue[re.sub(r"\[\d+\]|@cta\d+", "", t)] for t in tracks}
    for sp in spans:
        y = track_y0 + tracks.index(sp.track) * TRACK_H + 2
        x0, x1 = x_of(sp.start), x_of(sp.end + 1)
        label = f'<text x="{x0 + 3}" y="{y + TRACK_H - 7}" class="span-label">{_e(sp.label)}</text>' \
            if x1 - x0 >= 60 else ""
        out.append(f'<g class="phase" data-barrier="{_e(sp.track)}"><rect x="{x0}" y="{y}" width="{x1 - x0}" '
                   f'height="{TRACK_H - 4}" fill="{_hsl(base[sp.track], sp.shade)}"><title>{_e(sp.track)} '
                   f'{_e(sp.label)}: steps {steps[sp.start].step}–{steps[sp.end].step}\nlast: {_e(sp.detail)}'
                   f'</title></rect>{label}</g>')
    for track, idxs in ticks.items():
        y = track_y0 + tracks.index(track) * TRACK_H + 2
        for i in idxs:
            out.append(f'<line class="tick" x1="{x_of(i) + sw / 2:.0f}" y1="{y}" '
                       f'x2="{x_of(i) + sw / 2:.0f}" y2="{y + TRACK_H - 4}" stroke="#1e293b" opacity="0.5"/>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------- page

_STYLE = """
body { font: 14px/1.4 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 16px 24px; color: #0f172a;
       background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 18px 0 4px; }
.meta, .note { color: #475569; } .msg { margin: 4px 0; }
.verdict-safe { color: #15803d; font-weight: 600; } .verdict-violation, .verdict-error { color: #b91c1c;
  font-weight: 600; } .verdict-inconclusive { color: #a16207; font-weight: 600; }
.scroll { overflow-x: auto; border: 1px solid #e2e8f0; border-radius: 6px; margin: 8px 0; direction: rtl; }
/* an overflowing trace opens scrolled to its end, where the failing step is */
.scroll > svg { direction: ltr; display: block; margin-left: 0; margin-right: auto; }
svg.swimlane text.step-label { font-size: 9px; fill: #ffffff; pointer-events: none; dominant-baseline: middle; }
svg.swimlane text.other-label { font-size: 9px; font-weight: 700; fill: #b45309; }
svg.swimlane text { font: 11px ui-monospace, 'DejaVu Sans Mono', monospace; fill: #0f172a; }
svg.swimlane .axis text { fill: #64748b; font-size: 9px; }
svg.swimlane .fail-label { font-weight: 700; font-size: 11px; fill: #b91c1c; }
svg.swimlane rect.step:hover { stroke: #0f172a; stroke-width: 2; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 6px 0; color: #334155; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 3px; vertical-align: -1px;
  margin-right: 4px; }
table.lines { border-collapse: collapse; font: 12px ui-monospace, 'DejaVu Sans Mono', monospace; }
table.lines td { padding: 0 8px; vertical-align: top; } table.lines td.n { color: #64748b; text-align: right; }
table.lines tr.hit td { background: #fee2e2; }
code.kernel-name { overflow-wrap: anywhere; }
"""


def _legend() -> str:
    items = "".join(f'<span><i style="background:{c}"></i>{_e(KIND_NAMES[k])}</span>' for k, c in KIND_COLOURS.items()
                    if k != "other")
    return (f'<div class="legend">{items}<span><i style="background:#fecaca;border:2px solid #dc2626"></i>'
            f'failing step</span><span><i style="background:{_hsl(210, 0)}"></i><i style="background:'
            f'{_hsl(210, 1)}"></i>barrier phases (alternating)</span></div>')


def _lines_table(protocol: ir.Protocol, view: TraceView) -> str:
    used = sorted({s.line for s in view.steps if s.line} | ({view.line} if view.line else set()))
    rows = "".join(f'<tr class="{"hit" if n == view.line else ""}"><td class="n">{n}</td>'
                   f"<td>{_e(_spec_line(protocol, n))}</td></tr>" for n in used)
    return f'<details><summary>spec lines in this trace</summary><table class="lines">{rows}</table></details>'


def render_html(protocol: ir.Protocol, result: CheckResult, views: Sequence[TraceView],
                lanes: Sequence[str] | None = None) -> str:
    """The whole page: a header with the verdict, a legend, and one section per view."""
    lanes = process_lanes(protocol) if lanes is None else lanes
    verdict = result.verdict.value
    bound = f" · bound {result.bound}" if result.bound else ""
    sections = []
    for n, view in enumerate(views, start=1):
        msg = f'<p class="msg">{_e(view.message)}</p>' if view.message else ""
        notes = "".join(f'<p class="note">{_e(note)}</p>' for note in view.notes if note)
        sections.append(
            f'<section class="trace" id="trace-{n}" data-code="{_e(view.code or "")}" '
            f'data-steps="{len(view.steps)}"><h2>{_e(view.title)} — {len(view.steps)} steps</h2>{msg}{notes}'
            f'<div class="scroll">{render_svg(protocol, view, lanes)}</div>{_lines_table(protocol, view)}</section>')
    # an extracted kernel's protocol is named after its PTX entry: the title is its C++ name, short
    short, whole = title_name(protocol.name)
    full = (f'<details class="meta"><summary>full name</summary><code class="kernel-name">{_e(whole)}</code>'
            f"<br><code>{_e(protocol.name)}</code></details>") if whole else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(short)} — syncverify trace</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(short)}</h1>{full}"
        f'<p class="meta">{_e(protocol.path)} · <span class="verdict-{verdict}">{verdict}</span>{_e(bound)} · '
        f"{len(lanes)} processes, {protocol.cluster} CTA{'s' if protocol.cluster > 1 else ''} · hover a box for its "
        f"spec line</p>{_legend()}{''.join(sections)}</body></html>\n"
    )
