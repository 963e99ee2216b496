"""Writes a copy of CUTLASS's include directory (nvidia-cutlass 4.2.0.0) with seeded bugs in three headers
into OUT, for compiling sm90_gemm_coop_2x1.cu with `-DSV_SEED=N -I OUT` (a whole copy: the headers include
each other by relative paths, so copies of a few beside the originals would be included twice). Every edit
replaces one line by one line, so every other line keeps its number and a finding is reported at the
CUTLASS line it is about. SV_SEED selects the bug (0: none):

  1 consumer wait skipped    PipelineTmaAsync::consumer_try_wait / consumer_wait do not wait
  2 producer acquire skipped PipelineTmaAsync::producer_try_acquire / producer_acquire do not wait
  3 wrong arrival count      the empty barriers are initialized with one arrival too many
  4 cluster sync removed     the kernel's cluster arrive/wait after the barrier init is left out
  5 release before wait      the mainloop releases the stage before warpgroup_wait<K_PIPE_MMAS>()
  6 multicast box unsliced   make_tma_copy_desc encodes a multicast copy's box whole, not truncated by the
                             number of CTAs it is multicast to; host code only (the descriptor is encoded on
                             the host), so the kernel's PTX is the unseeded one and only the host program
                             that makes the Params is built with it

Usage: python3 make_overlay.py INCLUDE OUT
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from overlay import write_overlay

PIPE = "cutlass/pipeline/sm90_pipeline.hpp"
KERNEL = "cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp"
MMA = "cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp"
TMA = "cute/atom/copy_traits_sm90_tma.hpp"

# (file, line, the line's text as shipped, its replacement)
EDITS = [
    (PIPE, 507, "    bool barrier_status = empty_barrier_ptr_[stage].try_wait(phase);",
     "    bool barrier_status = SV_SEED == 2 || empty_barrier_ptr_[stage].try_wait(phase);"),
    (PIPE, 513, "    empty_barrier_ptr_[stage].wait(phase);",
     "    if (SV_SEED != 2) empty_barrier_ptr_[stage].wait(phase);"),
    (PIPE, 534, "      empty_barrier_ptr_[stage].wait(phase);",
     "      if (SV_SEED != 2) empty_barrier_ptr_[stage].wait(phase);"),
    (PIPE, 595, "    bool barrier_status = full_barrier_ptr_[stage].try_wait(phase);",
     "    bool barrier_status = SV_SEED == 1 || full_barrier_ptr_[stage].try_wait(phase);"),
    (PIPE, 613, "    full_barrier_ptr_[stage].wait(phase);",
     "    if (SV_SEED != 1) full_barrier_ptr_[stage].wait(phase);"),
    (PIPE, 621, "      full_barrier_ptr_[stage].wait(phase);",
     "      if (SV_SEED != 1) full_barrier_ptr_[stage].wait(phase);"),
    (PIPE, 321, "          storage.full_barrier_, storage.empty_barrier_, producer_arv_cnt, "
                "multicast_consumer_arrival_count);",
     "          storage.full_barrier_, storage.empty_barrier_, producer_arv_cnt, "
     "multicast_consumer_arrival_count + (SV_SEED == 3));"),
    (KERNEL, 504, "        cute::cluster_arrive_relaxed();",
     "        if (SV_SEED != 4) cute::cluster_arrive_relaxed();"),
    (KERNEL, 505, "        return [] () { cute::cluster_wait(); };",
     "        return [] () { if (SV_SEED != 4) cute::cluster_wait(); };"),
    (MMA, 547, "      warpgroup_wait<K_PIPE_MMAS>();",
     "      if (SV_SEED == 5) pipeline.consumer_release(smem_pipe_release); warpgroup_wait<K_PIPE_MMAS>();"),
    (MMA, 551, "      pipeline.consumer_release(smem_pipe_release);",
     "      if (SV_SEED != 5) pipeline.consumer_release(smem_pipe_release);"),
    (TMA, 991, "  for (uint32_t i = tma_dim-1, multicast = num_multicast; multicast > 1; --i) {",
     "  for (uint32_t i = tma_dim-1, multicast = SV_SEED == 6 ? 1u : num_multicast; multicast > 1; --i) {"),
]


def main(src: str, out: str) -> None:
    write_overlay(src, out, EDITS)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
