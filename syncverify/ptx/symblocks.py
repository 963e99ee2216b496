"""A loop's period written as half a period, its mbarrier parities a function of the loop counter.

A software pipeline over S stages repeats after 2*S iterations: the second round of the stages
waits on the same barriers as the first with every parity flipped (CUTLASS's `PipelineState`:
`phase ^= 1` when the index wraps). symloop.py records the whole period P_w = 2*S, so the
residue protocols of symextract.py are P = lcm(P_w) in number, each checked by the z3 engine's
lift: for the ping-pong GEMMs, 16 protocols whose prologue and loop are the same.

Here, where a warp's recorded period is two runs of one block of H = P_w / 2 iterations that
differ only in the parities of their waits and probes, each flipped (and so are its exit suffixes
s and H + s), the loop is written over blocks: iteration t of block j is iteration t of the first
block with each such parity XOR (j mod 2), written `(q + b) % 2` for the loop counter q. The
residues are then lcm(H_w) in number; the lift sees a counter of period 2 where it saw an unrolled
period of 2*H iterations. The protocol for each KT is the same list of events as symextract.py's
(`_warp_events`), iteration for iteration, with each parity the value the recorded period has
there: only its spelling changes.
"""

from __future__ import annotations

from dataclasses import replace

from .launch import WARP, Event, Launch
from .symloop import WarpLoop

PARITY_KINDS = ("wait", "probe")  # events whose args[1] is a parity
EXIT_NAME = "qx"  # the counter of the one-pass loop after the main one: Q, so that a parity can read it


def iterations(lp: WarpLoop) -> list[tuple[Event, ...]]:
    """The recorded period's iterations, one list of events each (``mids[s]`` is the first s of them)."""
    cuts = [len(m) for m in lp.mids] + [len(lp.body)]
    return [lp.body[cuts[i]: cuts[i + 1]] for i in range(lp.period)]


def _flips(a: tuple[Event, ...], b: tuple[Event, ...]) -> tuple[bool, ...] | None:
    """Per event: whether b's is a's with its parity flipped (else equal); None where they differ otherwise."""
    if len(a) != len(b):
        return None
    out: list[bool] = []
    for x, y in zip(a, b, strict=True):
        if x == y:
            out.append(False)
        elif (x.kind == y.kind and x.kind in PARITY_KINDS and x.args[1] in (0, 1) and y.args[1] == 1 - x.args[1]
              and replace(y, args=(y.args[0], x.args[1], *y.args[2:])) == x):
            out.append(True)
        else:
            return None
    return tuple(out)


def half(lp: WarpLoop) -> tuple[tuple[tuple[bool, ...], ...], tuple[tuple[bool, ...], ...]] | None:
    """Where the period is two blocks with flipped parities: each first-block iteration's flips, and each
    suffix's (s against H + s); else None."""
    if lp.period % 2:
        return None
    h = lp.period // 2
    its = iterations(lp)
    it_flips, suffix_flips = [], []
    for t in range(h):
        f = _flips(its[t], its[h + t])
        if f is None:
            return None
        it_flips.append(f)
    for s in range(h):
        f = _flips(lp.suffixes[s], lp.suffixes[h + s])
        if f is None:
            return None
        suffix_flips.append(f)
    return tuple(it_flips), tuple(suffix_flips)


def block_size(lp: WarpLoop) -> int:
    """H where the period halves, else the whole period."""
    return lp.period // 2 if half(lp) is not None else lp.period


def _spelled(events: tuple[Event, ...], flips: tuple[bool, ...], odd: int, bump: int, counter: str) -> list[Event]:
    """The first block's events in block j = a + bump * counter (odd = a % 2): each flipped parity p becomes
    (p + j) % 2, a number where it does not depend on the counter (bump even)."""
    out = []
    for e, flip in zip(events, flips, strict=True):
        if not flip:
            out.append(e)
            continue
        base = (int(e.args[1]) + odd) % 2  # type: ignore[call-overload]
        value: object = base if bump % 2 == 0 else (f"{counter} % 2" if base == 0 else f"({counter} + 1) % 2")
        out.append(replace(e, args=(e.args[0], value, *e.args[2:])))
    return out


def block_events(lp: WarpLoop, c: int, period: int, launch: Launch, warp: int, qname: str) -> list[Event]:
    """A warp's events for KT = k0 + r + period * Q (c + period * Q iterations after its transient), with its
    loop over blocks of H iterations: the same events as symextract._warp_events, parities spelled by block."""
    split = half(lp)
    assert split is not None and c >= 0 and period % (lp.period // 2) == 0
    it_flips, suffix_flips = split
    h = lp.period // 2
    its = iterations(lp)
    m, s = divmod(c, h)
    per = period // h  # blocks per trip of the loop over Q
    lanes = (1 << max(0, min(WARP, launch.threads - WARP * warp))) - 1

    def text(line: str) -> Event:
        return Event("text", (line,), lanes, lp.instr)

    out = list(lp.pre)
    for i in range(m * h):  # whole blocks before the loop: as recorded
        out += its[i % lp.period]
    out.append(text(f"for q in 0..{qname} {{"))
    for b in range(per):  # block m + per * q + b
        for t in range(h):
            out += _spelled(its[t], it_flips[t], (m + b) % 2, per, "q")
    out.append(text("}"))
    # block m + per * Q: its first s iterations, then the exit from iteration s of it
    tail = [e for t in range(s) for e in _spelled(its[t], it_flips[t], m % 2, per, EXIT_NAME)]
    tail += _spelled(lp.suffixes[s], suffix_flips[s], m % 2, per, EXIT_NAME)
    if per % 2 == 0:
        return out + tail
    return [*out, text(f"for {EXIT_NAME} in {qname}..{qname} + 1 {{"), *tail, text("}")]
