"""CuTe DSL kernels, checked from the @cute.jit call that launches them (tests/test_cute_dsl_frontdoor.py).

`naive_elementwise_add` is the CuTe DSL example of CUTLASS's examples/python/CuTeDSL/notebooks/
elementwise_add.ipynb (nvidia-cutlass 4.2.0.0), as it ships. `rotate` stages a block's values through
shared memory and reads each thread's neighbour's: right with the `sync_threads` between the write and
the read, a race without it (SYNC=False).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute


@cute.kernel
def naive_elementwise_add_kernel(
    gA: cute.Tensor,
    gB: cute.Tensor,
    gC: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()

    thread_idx = bidx * bdim + tidx

    # Map thread index to logical index of input tensor
    m, n = gA.shape  # noqa: RUF059 (the example as it ships)
    ni = thread_idx % n
    mi = thread_idx // n

    # Map logical index to physical address via tensor layout
    a_val = gA[mi, ni]
    b_val = gB[mi, ni]

    # Perform element-wise addition
    gC[mi, ni] = a_val + b_val


@cute.jit
def naive_elementwise_add(
    mA: cute.Tensor,
    mB: cute.Tensor,
    mC: cute.Tensor
):
    num_threads_per_block = 256

    m, n = mA.shape
    kernel = naive_elementwise_add_kernel(mA, mB, mC)
    kernel.launch(grid=((m * n) // num_threads_per_block, 1, 1),
                  block=(num_threads_per_block, 1, 1))


@cute.kernel
def rotate_kernel(gA: cute.Tensor, gC: cute.Tensor, SYNC: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    buf = smem.allocate_tensor(cutlass.Float32, cute.make_layout(128), 16)
    buf[tidx] = gA[bidx * 128 + tidx]
    if cutlass.const_expr(SYNC):
        cute.arch.sync_threads()
    gC[bidx * 128 + tidx] = buf[(tidx + 1) % 128]


@cute.jit
def rotate(mA: cute.Tensor, mC: cute.Tensor, SYNC: cutlass.Constexpr = True):
    rotate_kernel(mA, mC, SYNC).launch(grid=[cute.size(mA) // 128, 1, 1], block=[128, 1, 1], smem=1024)
