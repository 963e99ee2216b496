"""The call of tests/data/triton/ring_sum.py's autotuned row sum at one problem shape, for a sweep manifest:
`sweep_call(K=...)` returns what `ring_sum[grid](*args, **kwargs)` would be given (the autotune config adds
BLOCK_K, NUM_STAGES and num_warps)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "triton"))

from ring_sum import ring_sum  # noqa: F401  (the kernel the manifest names)
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from syncverify import triton as svt

BLOCK_M, BLOCK_K = 128, 64


def sweep_call(K: int, M: int = 128):
    x = svt.tensor([M, K], "fp16")  # stand-ins for device tensors: no GPU is needed
    out = svt.tensor([M], "fp32")
    layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.float16)
    desc = TensorDescriptor.from_tensor(x, [BLOCK_M, BLOCK_K], layout)
    return (M // BLOCK_M,), (desc, out, K), {"BLOCK_M": BLOCK_M}
