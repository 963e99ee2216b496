"""The `__shared__` words that carry a value read from a flag to the CTA's threads (kept.py), checked over the
whole CTA and named for the protocol.

kept.py writes a store of a kept value to a `__shared__` word as the CTA's flag of that word (`st.relaxed.cta
S[c], E;`) and a load of the word as `let v = ld.relaxed.cta S[c];`. That is the word's value only if every
write of its bytes is such a store: a constant stored there by another warp (`am_last = false;` before the
barrier), a copy into it, would change the word without changing the flag, and the load would keep the wrong
value. Warps are executed one after another, so a write by a warp executed later than the load is seen only
here, over the events of every warp of the CTA: any other write of the word's bytes is refused at its line.
A load that took the value as 0 or 1 (what a narrow store carries unchanged) is refused where some store of
the word stores a wider value. And a load is refused unless it is ordered after a store of the word by the
warp's program order or by a CTA barrier (`bar.sync 0` of the whole CTA, counted: the load follows more of them
than the store): one that may run before every store would read the word uninitialized, which the flag (0 at
launch) does not model. A load ordered so by the count that the barriers do not in fact order (warps that skip
barriers) is not ordered after the store by the model either, and its read of the slot is SV301.
"""

from __future__ import annotations

import re

from .globalcomm import GlobalAccesses
from .launch import Event, Launch, Memory
from .parse import Function, Module

_LOCAL_STATIC = re.compile(r"E(\d+)([A-Za-z_]\w*)$")  # _ZZ10last_blockE7am_last: a function's static


def _name(offsets: dict[str, int], off: int, taken: set[str]) -> str:
    """`NAME_value` for the __shared__ variable NAME at byte ``off`` (`am_last_value`; the slot of its bytes is
    `am_last`), else `s{off}_value`."""
    for var, o in offsets.items():
        m = _LOCAL_STATIC.search(var)
        name = m.group(2) if m and int(m.group(1)) == len(m.group(2)) else var
        if o == off and re.fullmatch(r"[A-Za-z_]\w*", name) and f"{name}_value" not in taken:
            return f"{name}_value"
    return f"s{off}_value"


def kept_words(mod: Module, fn: Function, launch: Launch, events: dict[tuple[int, int], list[Event]],
               gcomm: GlobalAccesses) -> dict[int, str]:
    """Offset -> flag name of every __shared__ word that holds a kept value; refused as the module docstring
    says."""
    stores: dict[tuple[int, int], list[Event]] = {}
    loads: list[tuple[int, Event]] = []
    for (ci, _w), evs in events.items():
        for e in evs:
            if e.kind != "kflag":
                continue
            if str(e.args[0]).startswith("let "):
                loads.append((ci, e))
            else:
                stores.setdefault((ci, int(e.args[1])), []).append(e)  # type: ignore[call-overload]
    if not stores and not loads:
        return {}
    sizes = {int(e.args[1]): int(e.args[2]) for evs in stores.values() for e in evs}  # type: ignore[call-overload]
    kept_data = {d for evs in stores.values() for e in evs for d in e.args[4]}  # type: ignore[attr-defined]
    for (ci, _w), evs in events.items():
        for e in evs:
            if e.kind in ("read", "kflag") or id(e) in kept_data:
                continue
            for _rank, s, t in e.ranges:
                for off, n in sizes.items():
                    if (ci, off) in stores and s < off + n and off < t:
                        raise gcomm._at(e.instr, f"cannot extract (CTA {ci}): this instruction writes the __shared__ "
                                        f"word at byte {off:#x}, which carries a value read from a flag to the CTA's "
                                        "threads (the store at PTX line "
                                        f"{stores[(ci, off)][0].instr.line}); a write of it that is not that value "
                                        "would change the word and not the flag, which is not modelled")
    _ordered_after_a_store(events, gcomm)
    for ci, e in loads:
        off = int(e.args[1])  # type: ignore[call-overload]
        wide = [x for x in stores.get((ci, off), []) if not x.args[3]]
        if e.args[3] and wide:
            raise gcomm._at(e.instr, f"cannot extract (CTA {ci}): this load takes the __shared__ word as 0 or 1, and "
                            f"the store at PTX line {wide[0].instr.line} may store another value there")
    taken: set[str] = set()
    out: dict[int, str] = {}
    for off in sorted(sizes):
        out[off] = _name(Memory(mod, fn, launch).shared, off, taken)
        taken.add(out[off])
    return out


def _barriers(evs: list[Event]) -> list[tuple[int, int]]:
    """For each event of a warp, (fewest, most) CTA barriers (`bar.sync 0` of every thread) before it on the paths
    through the branches extracted as `if … { } else { }` (their arms follow each other in the list)."""
    lo = hi = 0
    stack: list[list[int]] = []  # per open `if`: its (lo, hi) at the start, and the then-arm's at its end
    out = []
    for e in evs:
        out.append((lo, hi))
        text = str(e.args[0]) if e.kind == "text" and e.args else ""
        if e.kind == "bar_sync" and e.args[0] == 0 and e.args[1] is None:
            lo, hi = lo + 1, hi + 1
        elif (text.startswith("if ") and text.endswith("{")) or (e.kind == "probe" and e.args[-1] == "if"):
            stack.append([lo, hi, -1, -1])
        elif text == "} else {" and stack:
            stack[-1][2:] = [lo, hi]
            lo, hi = stack[-1][0], stack[-1][1]
        elif text == "}" and stack:
            a, b, tl, th = stack.pop()
            if tl < 0:  # no else: the path that skips the arm
                tl, th = a, b
            lo, hi = min(lo, tl), max(hi, th)
    return out


def _ordered_after_a_store(events: dict[tuple[int, int], list[Event]], gcomm: GlobalAccesses) -> None:
    """Every kept load of a word follows one of its stores in the same CTA (module docstring)."""
    stores: dict[tuple[int, int], list[tuple[int, int, int]]] = {}  # (CTA, offset) -> (warp, index, most)
    loads: list[tuple[int, int, int, int, Event]] = []
    for (ci, w), evs in events.items():
        counts = _barriers(evs)
        for i, e in enumerate(evs):
            if e.kind != "kflag":
                continue
            off = int(e.args[1])  # type: ignore[call-overload]
            if str(e.args[0]).startswith("let "):
                loads.append((ci, w, i, counts[i][0], e))
            else:
                stores.setdefault((ci, off), []).append((w, i, counts[i][1]))
    for ci, w, i, fewest, e in loads:
        before = stores.get((ci, int(e.args[1])), [])  # type: ignore[call-overload]
        if not any((sw == w and si < i) or fewest > most for sw, si, most in before):
            raise gcomm._at(e.instr, f"cannot extract (CTA {ci}, warp {w}): this load of a __shared__ word that "
                            "carries a value read from a flag may run before every store of it (no CTA barrier "
                            "orders it after one): it would read the word uninitialized, which is not modelled")
