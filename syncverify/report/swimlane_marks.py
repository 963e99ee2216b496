"""What the swimlane draws beyond one box per step: why the failing step fails.

* fold: warps whose steps in the view are the same (same lines, operations and
  iterations, or no step at all) and that belong to one role share one lane labelled
  with their count; a warp the finding names, that takes the failing step or that is
  blocked keeps its own lane;
* edges: release → acquire, from the step that completed a phase of an mbarrier to
  the first wait on that barrier of each other lane that passed after it;
* the other access of a race, found from the message ("… with the read at line 49 by
  consumer[0].w1"), so both accesses can be outlined;
* short labels written on the boxes (the hover text keeps the whole step);
* copies still in flight at the end of the view, which no completion step shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..diagnostics import TraceStep
from ..engines.witness import completions

_OTHER = re.compile(r"with the (?:read|write) at line (\d+) by (?:the async operation issued by )?([\w\[\].@-]+)")


def role_of(lane: str) -> str:
    """`consumer[1].w9` -> `consumer`; `cta.w3` -> `cta`."""
    return re.sub(r"\[\d+\]", "", lane.split(".w")[0].split(".t")[0])


def fold(lanes: Sequence[str], steps: Sequence[TraceStep], lane_of: dict[int, str],
         keep: set[str]) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """(folded lane names in order, member -> folded name, folded name -> members)."""
    sig: dict[str, list[tuple]] = {lane: [] for lane in lanes}
    for i, s in enumerate(steps):
        if lane_of[i] in sig:
            sig[lane_of[i]].append((s.line, s.op, s.iteration))
    groups: dict[tuple, list[str]] = {}
    for lane in lanes:
        key = ("own", lane) if lane in keep else (role_of(lane), tuple(sig[lane]))
        groups.setdefault(key, []).append(lane)
    names: list[str] = []
    alias: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for group in groups.values():
        name = group[0] if len(group) == 1 else f"{group[0]} … {group[-1]} (×{len(group)})"
        names.append(name)
        members[name] = group
        for lane in group:
            alias[lane] = name
    order = {lane: n for n, lane in enumerate(lanes)}
    names.sort(key=lambda name: order[members[name][0]])
    return names, alias, members


def edges(steps: Sequence[TraceStep], lane_of: dict[int, str]) -> list[tuple[int, int, str]]:
    """(completing step index, acquiring wait index, barrier) for each release → acquire edge."""
    done = completions(steps)
    out = []
    for i, names in enumerate(done):
        for bar in names:
            seen: set[str] = set()
            for j in range(i + 1, len(steps)):
                if bar in done[j]:
                    break
                s = steps[j]
                if s.barrier == bar and s.op.startswith("wait") and lane_of[j] != lane_of[i] \
                        and lane_of[j] not in seen:
                    seen.add(lane_of[j])
                    out.append((i, j, bar))
    return out


def other_access(message: str, steps: Sequence[TraceStep], failing: int | None) -> int | None:
    """Index of the step that made the other access of a race the message describes."""
    m = _OTHER.search(message)
    if m is None or failing is None:
        return None
    line, who = int(m[1]), m[2]
    for j in range(failing - 2, -1, -1):
        if steps[j].line == line and steps[j].role == who:
            return j
    return None


def label(step: TraceStep, kind: str) -> str:
    """A few letters for the box: the operation's mnemonic."""
    if kind == "complete":
        return "done"
    word = step.op.split(" ", 1)[0].rstrip(";")
    short = {"arrive.expect_tx": "a.tx", "syncthreads": "sync", "fence.mbarrier_init": "fnc", "fence.proxy.async":
             "fnc", "arrive": "arr", "write": "wr", "read": "rd", "tma.load": "tma", "tma.store": "st",
             "expect_tx": "e.tx", "complete_tx": "c.tx", "cluster.sync": "cl", "syncwarp": "sw"}
    return short.get(word, word.split(".")[0][:4])


def in_flight(steps: Sequence[TraceStep], matched: set[int]) -> list[tuple[str, int]]:
    """(lane name, issue index) for copies issued in the view and not completed in it."""
    out = []
    for i, s in enumerate(steps):
        if s.role != "async agent" and i not in matched and s.op.startswith("tma.load"):
            out.append((f"async: copy of step {s.step} in flight", i))
    return out
