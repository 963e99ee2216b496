"""Lanes of one warp that give a synchronizing instruction different operands.

DeepGEMM's sm90 GEMM releases a stage with `lane_idx < kNumTMAMulticast ?
empty_barriers[s]->arrive(lane_idx) : void()`: one `mbarrier.arrive.shared::cluster` whose
address is `mapa` of the barrier with the lane as the CTA rank, so lane 0 arrives on CTA 0's
barrier and lane 1 on CTA 1's. PTX executes the instruction once per active thread with that
thread's operands; the language says the same thing with a lane guard and, where the operand
follows the lane, `@ lane` (docs/language.md §6.1: "an operation whose operands use `lane` runs
once per executing lane with that lane's value").

Extraction computes the operands of every executing lane. Lanes that agree form one group; an
instruction whose lanes fall into several groups becomes one event per group (`Event.per_lane`),
each written under a guard naming exactly its lanes (skeleton.py: `guarded_lanes`, `_Ctx.lane_guarded`). Only the
operations the language lets some lanes run are split so (`LANEWISE`: arrivals, tx counts, TMA
loads -- none acquires or waits, so the model's two knowledge holders of a warp stay exact,
semantics/program.py `_LANE_OPS` -- and TMA stores); any other instruction whose lanes disagree is
refused at its line with the reason, as before.

TMA stores by several lanes (DeepGEMM's epilogue with BLOCK_N 128: `if (threadIdx.x < BLOCK_N /
TMA_D_BLOCK_N)` one store per 64-column half, then `cute::tma_store_arrive()`, and before the next
tile `cute::tma_store_wait<0>()` by the same threads) are each thread's own: so are the bulk
async-groups that commit and wait for them (PTX cp.async.bulk.commit_group: "per-thread bulk
async-group"). The stores are split like the arrivals; their `cp.async.bulk.commit_group` and
`cp.async.bulk.wait_group` by those lanes are written under the lanes' guard (`LANE_GUARDED`), and
the model gives those lanes their own groups (semantics/families/lane_groups.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .launch import lanes_of
from .parse import Instr
from .values import UNKNOWN

if TYPE_CHECKING:
    from .warp import WarpState

# event kinds that some lanes of a warp may run, each lane with its own operands (docs/language.md §6.1)
LANEWISE = frozenset({"arrive", "arrive_drop", "arrive_tx", "arrive_drop_tx", "expect_tx", "complete_tx",
                      "tma_load", "tma_store"})

# event kinds that some lanes (more than one, not the whole warp) may run under a lane guard with the
# operands they agree on: the LANEWISE ones, and the bulk groups of some lanes' stores
LANE_GUARDED = LANEWISE | {"bulk_commit", "bulk_wait"}


def _unknown(v: object) -> bool:
    return v is None or v is UNKNOWN or (isinstance(v, tuple) and any(_unknown(x) for x in v))


def lane_groups(run: WarpState, ins: Instr, lanes: int, kind: str,
                f: Callable[[int], object]) -> list[tuple[int, object]]:
    """The executing lanes grouped by the operands ``f(lane)`` gives them: ``(lane mask, operands)``
    in the order of each group's first lane. One group when the lanes agree; several only for an
    operation in LANEWISE, else the instruction is refused at its line. An operand that is not
    known (loaded from memory, an unbound parameter) is refused whatever the lanes do."""
    groups: dict[object, int] = {}
    for lane in lanes_of(lanes):
        v = f(lane)
        if _unknown(v):
            raise run.refuse(ins, "an operand that names a barrier or buffer, or a count, parity or byte "
                             "count, is not known (loaded from memory or from an unbound parameter?)")
        groups[v] = groups.get(v, 0) | 1 << lane
    if len(groups) > 1 and kind not in LANEWISE:
        shown = ", ".join(sorted(map(str, groups)))[:120]
        why = ("the language gives per-lane operands only to arrivals, tx counts, TMA loads and TMA stores "
               "(docs/language.md §6.1); let the whole warp, or its elected lane, run this one")
        raise run.refuse(ins, f"the lanes of one warp give this instruction different operands ({shown}): {why}")
    return [(m, v) for v, m in groups.items()]
