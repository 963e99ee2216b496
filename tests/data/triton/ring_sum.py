"""A TMA-pipelined row sum written in Gluon, autotuned over its tile width and ring depth.

Rows of a (M, K) fp16 matrix are streamed through NUM_STAGES shared-memory buffers, one mbarrier each:
the tile k + NUM_STAGES - 1 is loaded while tile k is summed, and every warp has read a buffer
(`gl.barrier`) before it is refilled. The ring position is `k & (NUM_STAGES - 1)`, the usual
strength-reduced `k % NUM_STAGES` -- right only while NUM_STAGES is a power of two. With 3 stages the
positions run 0, 1, 2, 3 & 2 = 2, ...: a buffer still being read is refilled, and the phases waited for
no longer match the loads that complete them.
"""

from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

CONFIGS = [
    triton.Config({"BLOCK_K": 64, "NUM_STAGES": 2}, num_warps=4),
    triton.Config({"BLOCK_K": 64, "NUM_STAGES": 3}, num_warps=4),
    triton.Config({"BLOCK_K": 64, "NUM_STAGES": 4}, num_warps=4),
]


@gluon.jit
def ring_sum_kernel(x_desc, out_ptr, K, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr, NUM_STAGES: gl.constexpr):
    pid = gl.program_id(0)
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    bufs = gl.allocate_shared_memory(x_desc.dtype, [NUM_STAGES, BLOCK_M, BLOCK_K], x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
    num_k = gl.cdiv(K, BLOCK_K)
    for i in gl.static_range(NUM_STAGES - 1):
        mbarrier.expect(ready.index(i), x_desc.block_type.nbytes)
        tma.async_load(x_desc, [pid * BLOCK_M, i * BLOCK_K], ready.index(i), bufs.index(i))
    acc = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, layout))
    for k in range(num_k):
        nk = k + NUM_STAGES - 1
        if nk < num_k:
            ns = nk & (NUM_STAGES - 1)
            mbarrier.expect(ready.index(ns), x_desc.block_type.nbytes)
            tma.async_load(x_desc, [pid * BLOCK_M, nk * BLOCK_K], ready.index(ns), bufs.index(ns))
        s = k & (NUM_STAGES - 1)
        mbarrier.wait(ready.index(s), (k // NUM_STAGES) & 1)
        tile = bufs.index(s).load(layout)
        acc += gl.sum(tile.to(gl.float32), axis=1)
        gl.barrier()
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, layout))
    gl.store(out_ptr + rows, acc)


ring_sum = triton.autotune(configs=CONFIGS, key=["K"])(ring_sum_kernel)
