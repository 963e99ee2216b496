"""The lanes of a warp in extracted shared-memory accesses.

Extraction knows every lane's bytes (`Event.footprint`). Two rules follow from them:

* **Each slot gets the lanes that touch it.** An access is written, slot by slot, for the lanes
  whose bytes lie in that slot (`if lane == 0 { read s0; }`), not for every lane that executed
  the instruction: lane 0 writing `buf[0]` and then every lane reading `buf[lane]` is lane 0
  reading what it wrote (program order) and lanes 1..31 reading bytes nobody wrote.
* **Lanes that touch each other's bytes** with nothing between the two accesses that orders the
  lanes of the warp are a race unless something else orders them.
  Under independent thread scheduling (sm_70 and later) the lanes of a warp
  are not ordered with one another: lane i reading what lane j wrote needs `__syncwarp()` (PTX
  `bar.warp.sync`: it "guarantee[s] memory ordering among threads participating in barrier") or a
  barrier the whole warp takes part in (`bar.sync`). The language's accesses of several lanes are
  "each lane to its own part of the slot" (docs/language.md §6), so a pair of two such accesses
  would be read as program order (safe): both are written lane by lane instead (one lane's own
  region of the slot, which the model keeps apart from other lanes': program.lanes_meet_unordered).
  Lane 0's accesses are kept apart from the other lanes' already (the elected lane of the model),
  so a pair of lane 0 alone and other lanes is written as it is, and the checker finds the race,
  or the order. A collective `ldmatrix`/`stmatrix` in such a pair has no lanes to write: refused.
"""

from __future__ import annotations

from collections.abc import Callable

from .launch import Event, Refusal, source_of
from .parse import Module

_CHUNK = 16
# events after which every lane of the warp is ordered after every lane's earlier accesses
_ORDERS_LANES = ("syncwarp", "bar_sync")


def lane_condition(mask: int) -> str:
    """A lane guard's condition for exactly the lanes in ``mask``."""
    parts = []
    lane = 0
    while lane < 32:
        if mask >> lane & 1:
            end = lane
            while end + 1 < 32 and mask >> (end + 1) & 1:
                end += 1
            if end == lane:
                parts.append(f"lane == {lane}")
            elif lane == 0:
                parts.append(f"lane < {end + 1}")
            elif end == 31:
                parts.append(f"lane >= {lane}")
            else:
                parts.append(f"lane >= {lane} && lane < {end + 1}")
            lane = end + 1
        else:
            lane += 1
    if len(parts) == 1:
        return parts[0]
    return " || ".join(f"({p})" if "&&" in p else p for p in parts)


def slot_lanes(e: Event, s: int, t: int, rank: int) -> int:
    """The lanes of access ``e`` whose bytes meet [s, t) of CTA ``rank`` (a collective access: all)."""
    out = 0
    for lane, r, a, b in e.footprint:
        if r == rank and a < t and s < b:
            if lane < 0:
                return e.lanes
            out |= 1 << lane
    return out if e.footprint else e.lanes


def check_crossing(mod: Module, events: dict[tuple[int, int], list[Event]],
                   side: Callable[[tuple[int, int], int, int, int], str]) -> set[tuple[tuple[int, int], int]]:
    """The accesses to write lane by lane: of each pair of accesses of one warp by different lanes to
    the same bytes (at least one a write) with no `syncwarp` or `bar.sync` of the warp between them,
    those the protocol would not tell apart. ``side(key, index, rank, byte)`` says how the access
    ``events[key][index]`` is written for the slot holding that byte -- "L" for lane 0 alone (the
    elected lane, whose accesses the model keeps apart from the other lanes'), "O" for other lanes.
    A pair with one access on each side is a race the checker finds (or an ordering it sees) as it
    is written; a pair on the same side would be read as program order, so both are returned, to be
    written as one statement per lane (each lane's own bytes: skeleton._Ctx.lane_by_lane), which the model
    keeps apart (program.lanes_meet_unordered). A collective access (ldmatrix/stmatrix) has no lanes
    to write, and two accesses both written as lane 0's (an elected lane other than lane 0 is lane 0
    in the protocol, with the synchronization it runs, and lane 0's own access) cannot be split
    without splitting the elected lane from its releases: such a pair is refused at the later
    access. A loop kept as a loop (symextract.py's `for` text events) is checked with its body
    twice, so that one iteration's accesses meet the next one's."""
    out: set[tuple[tuple[int, int], int]] = set()
    for key, evs in events.items():
        _check_warp(mod, key, _unrolled_twice(list(enumerate(evs))), side, out)
    return out


def _unrolled_twice(evs: list[tuple[int, Event]]) -> list[tuple[int, Event]]:
    out: list[tuple[int, Event]] = []
    stack: list[int] = []  # where each open `for` began; -1 for the block of a probe's `if` (probe.py)
    for i, e in evs:
        if e.kind == "text" and str(e.args[0]).startswith("for "):
            stack.append(len(out))
            continue
        if (e.kind == "text" and str(e.args[0]).startswith("if ")) or (e.kind == "probe" and e.args[3] == "if"):
            stack.append(-1)
        if e.kind == "text" and str(e.args[0]) == "}" and stack:
            start = stack.pop()
            if start >= 0:
                out += out[start:]
                continue
        out.append((i, e))
    return out


def _check_warp(mod: Module, key: tuple[int, int], evs: list[tuple[int, Event]],
                side: Callable[[tuple[int, int], int, int, int], str], out: set[tuple[tuple[int, int], int]]) -> None:
    seen: dict[tuple[int, int], list[tuple[int, int, int, int, Event]]] = {}
    for i, e in evs:
        if e.kind in _ORDERS_LANES:
            seen = {}
            continue
        if e.kind not in ("read", "write") or not e.footprint:
            continue
        for lane, r, s, t in e.footprint:
            for c in range(s // _CHUNK, (t - 1) // _CHUNK + 1):
                for lane2, s2, t2, i2, e2 in seen.get((r, c), ()):
                    if lane2 != lane and s2 < t and s < t2 and "write" in (e2.kind, e.kind):
                        byte = max(s, s2)
                        both = side(key, i, r, byte)
                        if both == side(key, i2, r, byte):
                            if lane < 0 or lane2 < 0 or both == "L":
                                raise _crossing(mod, key, e, lane, (lane2, e2), byte, min(t, t2))
                            out.update(((key, i), (key, i2)))
        for lane, r, s, t in e.footprint:
            for c in range(s // _CHUNK, (t - 1) // _CHUNK + 1):
                seen.setdefault((r, c), []).append((lane, s, t, i, e))


def _who(lane: int) -> str:
    return "the warp (collectively)" if lane < 0 else f"lane {lane}"


def _crossing(mod: Module, key: tuple[int, int], e: Event, lane: int, other: tuple[int, Event],
              s: int, t: int) -> Refusal:
    rank, warp = key
    lane2, e2 = other
    kind2, ins2 = e2.kind, e2.instr
    where = f"ptx:{ins2.line}" + (f", {source_of(ins2)}" if ins2.src else "")
    return Refusal(mod.path, e.instr.line, e.instr.column,
                   f"cannot extract: {_who(lane)} of warp {warp} (CTA {rank}) {e.kind}s shared-memory bytes "
                   f"[{s:#x}, {t:#x}) that {_who(lane2)} of the same warp {'read' if kind2 == 'read' else 'wrote'}"
                   f" at {where}, with no __syncwarp() or barrier of the warp "
                   "between them: the lanes of a warp are not ordered with one another (independent thread "
                   "scheduling), so this is a race unless something else orders the two lanes, and the "
                   "protocol cannot keep these two lanes apart (a collective matrix access, or an elected lane "
                   "other than lane 0 that the protocol writes as lane 0); put __syncwarp() between them if the "
                   "lanes communicate",
                   mod.source_line(e.instr.line), f"CUDA source: {source_of(e.instr)}" if e.instr.src else "")
