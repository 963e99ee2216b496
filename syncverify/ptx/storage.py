"""Barriers whose bytes are data too: an mbarrier that a kernel invalidates and whose bytes it then uses for
data (Triton's one-shot load barriers, reused for a pipeline stage), or data bytes it initialises as a barrier.

Extraction writes such a barrier in the slot that holds its bytes (`mbarrier mb0 in s0[0] at 0;`,
docs/language.md §3.4), and the checker decides whether every data access of those bytes is ordered outside the
barrier's life (SV408, SV409: semantics/families/storage.py). Only the placement is decided here: the slots are
cut so that a barrier's 8 bytes lie in one slot (slots.partition), and barrier arrays are formed only of
neighbours that lie in the same slot one after the other (or in none).
"""

from __future__ import annotations

MBAR = 8  # bytes of an mbarrier object


def hosts(hosted: set[int], slot_of: list[tuple[int, int, str]]) -> dict[int, tuple[str, int]]:
    """barrier offset -> (slot, its byte offset in the slot) for the barriers whose bytes accesses touch. A slot
    of several pieces counts its bytes piece after piece, in address order (the bytes of the slot as the
    protocol numbers them: every access touches all of a slot's pieces or none, so only the barriers' own
    bytes need a place in it)."""
    out: dict[int, tuple[str, int]] = {}
    for b in sorted(hosted):
        before = 0
        for a, end, name in sorted(slot_of):
            if a <= b < end:
                out[b] = (name, before + b - a)
                break
            if any(n == name for _a, _e, n in slot_of if _a <= b < _e):
                before += end - a
    return out


def runs(offsets: list[int], host: dict[int, tuple[str, int]]) -> list[tuple[int, int]]:
    """Barrier arrays: (first offset, count) of neighbours 8 bytes apart, each array either in no slot or in one
    slot at consecutive bytes (an array's elements are at OFF + 8e of its slot, docs/language.md §3.4)."""
    out: list[tuple[int, int]] = []
    for o in offsets:
        if out:
            start, n = out[-1]
            last = start + MBAR * (n - 1)
            if last + MBAR == o and _same_host(host.get(last), host.get(o)):
                out[-1] = (start, n + 1)
                continue
        out.append((o, 1))
    return out


def _same_host(a: tuple[str, int] | None, b: tuple[str, int] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a[0] == b[0] and a[1] + MBAR == b[1]


def declaration(ref: str, offset: int) -> str:
    """How the language writes the placement (`in s0[1] at 8`)."""
    return f" in {ref}" + (f" at {offset}" if offset else "")
