"""Writes a copy of CUTLASS's include directory (nvidia-cutlass 4.2.0.0) with seeded bugs in the sm100
cluster-launch-control tile scheduler into OUT, for compiling ../sm100_gemm_1sm_1x1.cu with
`-DSV_SEED=N -I OUT` (a whole copy: the headers include each other by relative paths). Each edit replaces
one line by one line, so every other line keeps its number and a finding is reported at the CUTLASS line
it is about. SV_SEED selects the bug (0: none), both in PersistentTileSchedulerSm100::fetch_next_work
(cutlass/gemm/kernel/sm100_tile_scheduler.hpp:461-464), which every warp that needs the next tile runs:

  1 release before read   the CLC pipeline's stage is released (consumer_release) before its response is
                          read, so the scheduler warp's next try_cancel may write it while it is read
  2 read without wait     the response is read without consumer_wait on the stage's full barrier, so it
                          may be read while the try_cancel is still writing it

and one in the 2-SM GEMM's mainloop (../sm100_gemm_2sm_2x1.cu, cutlass/gemm/collective/
sm100_mma_warpspecialized.hpp:681), which the MMA warp runs for every k-tile:

  3 MMA without wait      mainloop_pipeline.consumer_wait is skipped, so the tcgen05.mma reads a stage the TMA
                          loads may still be writing (the missing wait of issue #33's seeds)

Usage: python3 make_overlay.py INCLUDE OUT
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from overlay import write_overlay

SCHED = "cutlass/gemm/kernel/sm100_tile_scheduler.hpp"
MMA = "cutlass/gemm/collective/sm100_mma_warpspecialized.hpp"

# (file, line, the line's text as shipped, its replacement)
EDITS = [
    (SCHED, 461, "    scheduler_pipeline.consumer_wait(scheduler_pipe_consumer_state);",
     "    if (SV_SEED != 2) scheduler_pipeline.consumer_wait(scheduler_pipe_consumer_state);"),
    (SCHED, 463, "    auto work_tile = work_tile_info_from_clc_response(smem_addr);",
     "    if (SV_SEED == 1) scheduler_pipeline.consumer_release(scheduler_pipe_consumer_state); "
     "auto work_tile = work_tile_info_from_clc_response(smem_addr);"),
    (SCHED, 464, "    scheduler_pipeline.consumer_release(scheduler_pipe_consumer_state);",
     "    if (SV_SEED != 1) scheduler_pipeline.consumer_release(scheduler_pipe_consumer_state);"),
    (MMA, 681, "      mainloop_pipeline.consumer_wait(mainloop_pipe_consumer_state, barrier_token);",
     "      if (SV_SEED != 3) mainloop_pipeline.consumer_wait(mainloop_pipe_consumer_state, barrier_token);"),
]


def main(src: str, out: str) -> None:
    write_overlay(src, out, EDITS)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
