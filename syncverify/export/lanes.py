"""What the Promela export cannot mirror of the lanes of a warp: one lane's access meeting other lanes'.

The explicit and bmc engines order two generic accesses of one warp by different lanes, one of them
by a single lane other than the leader, only through a `syncwarp` or `bar.sync` of the warp between
them (semantics.program.lanes_meet_unordered, state.F_LANESYNCED). The Promela model keeps the
warp's two knowledge holders but not that mark, so it would read such a pair as ordered: a protocol
in which one can happen is refused rather than exported with a weaker verdict.
"""

from __future__ import annotations

from ..semantics.program import lanes_meet_unordered


def lane_pairs_refusal(uses: dict[int, set[tuple[int, int, bool, int, int, int]]]) -> str | None:
    """``uses``: per slot key, the generic accesses the dry run met, as (process, part, is a write,
    line, first byte, end byte). The reason to refuse, or None."""
    for accesses in uses.values():
        for p, part, write, line, lo, hi in accesses:
            for q, part2, write2, line2, lo2, hi2 in accesses:
                if (write or write2) and lo < hi2 and lo2 < hi and lanes_meet_unordered(p, part, q, part2):
                    return (f"line {max(line, line2)}: an access by one lane of a warp meets the same slot's "
                            f"access by other lanes of that warp at line {min(line, line2)}; the lanes' order "
                            "through syncwarp and bar.sync has no Promela counterpart yet (check it with "
                            "`syncverify check`)")
    return None
