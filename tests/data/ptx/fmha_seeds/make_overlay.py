"""Writes a copy of CUTLASS example 88's directory (examples/88_hopper_fmha, nvidia-cutlass 4.2.0.0) with a
seeded bug in the Hopper FMHA forward's mainloop into OUT, for compiling ../fmha_hopper_fwd_ws_64.cu with
`-DSV_SEED=N -I<include> -I OUT` in place of `-I<examples>/88_hopper_fmha`. Each edit replaces one line by one
line, so every other line keeps its number and a finding is reported at the example's line it is about.
SV_SEED selects the bug (0: none), in collective/fmha_collective_tma_warpspecialized.hpp, the math
warpgroups' first K/V tile (lines 399-431):

  1 release before the wgmma wait   the K stage is released (pipeline.consumer_release, line 430) before
                                    warpgroup_wait<0>() (line 413) retires the Q*K^T wgmma that reads it, so
                                    the producer may refill the stage while the tensor cores still read it

Build (nvcc 13.0: 26 s of CPU, 4 min of wall on the loaded two-core host):

  python3 make_overlay.py <examples>/88_hopper_fmha OUT
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -DSV_SEED=1 -I<include> -I OUT \\
       ../fmha_hopper_fwd_ws_64.cu -o fmha_hopper_fwd_ws_64_seed1.ptx

then the paths in its `.file` lines made relative as in ../fmha_hopper_fwd_ws_64.ptx.gz (OUT written as
cutlass_library/source/examples/88_hopper_fmha) and the file gzipped.

Usage: python3 make_overlay.py EXAMPLE_DIR OUT
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from overlay import write_overlay

MAINLOOP = "collective/fmha_collective_tma_warpspecialized.hpp"

# (file, line, the line's text as shipped, its replacement)
EDITS = [
    (MAINLOOP, 413, "        warpgroup_wait<0>();",
     "        if (SV_SEED == 1) pipeline.consumer_release(smem_pipe_release); warpgroup_wait<0>();"),
    (MAINLOOP, 430, "        pipeline.consumer_release(smem_pipe_release);",
     "        if (SV_SEED != 1) pipeline.consumer_release(smem_pipe_release);"),
]


if __name__ == "__main__":
    write_overlay(sys.argv[1], sys.argv[2], EDITS)
