"""A TMA matmul in Triton (the TMA-descriptor form of Triton's tutorial matmul, as tests/data/ptx/triton/tma_matmul.py
writes it), autotuned over tile width, pipeline depth and warps, and the call that launches it at one problem shape
(`sweep_call(M=..., N=..., K=...)`) for a sweep manifest."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from syncverify import triton as svt

BLOCK_M, BLOCK_K = 128, 64
CONFIGS = [triton.Config({"BLOCK_N": bn}, num_stages=s, num_warps=w)
           for bn in (64, 128) for s in (2, 3, 4) for w in (4, 8)]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def tma_matmul(a_desc, b_desc, c_desc, M, N, K,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


def sweep_call(M: int, N: int, K: int, BLOCK_N: int = 128):
    """What `tma_matmul[grid](...)` is given; the config's BLOCK_N sizes the B and C descriptors' blocks, as the
    config's pre_hook would set them (the manifest's point passes it)."""
    a, b, c = svt.tensor([M, K], "fp16"), svt.tensor([N, K], "fp16"), svt.tensor([M, N], "fp16")
    return ((1, 1),
            (TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]), TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K]),
             TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N]), M, N, K),
            {"BLOCK_M": BLOCK_M, "BLOCK_K": BLOCK_K})
