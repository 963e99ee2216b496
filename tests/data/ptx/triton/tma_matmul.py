"""A TMA-pipelined matmul written in Triton, compiled by Triton's own ahead-of-time path for sm_90
(`triton.compile` with `GPUTarget("cuda", 90, 32)`: no GPU is needed) to the PTX beside this file.

Host-side tensor descriptors (`tensordesc<...>` arguments: a 128-byte CUtensorMap passed by value, as
CUTLASS passes its maps) and a k loop that Triton software-pipelines over `num_stages` shared-memory
buffers with one mbarrier each. Usage: python3 tma_matmul.py OUT_DIR [NUM_STAGES]
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64


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


def main(out: str, stages: int = 3) -> None:
    src = ASTSource(
        fn=tma_matmul,
        signature={"a_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_K}]>",
                   "b_desc": f"tensordesc<fp16[{BLOCK_N}, {BLOCK_K}]>",
                   "c_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_N}]>",
                   "M": "i32", "N": "i32", "K": "i32",
                   "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
        constexprs={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_stages": stages, "num_warps": 4})
    name = f"tma_matmul_s{stages}.ptx"
    # source paths made relative: this file by its name, Triton's own by their place in the package
    ptx = k.asm["ptx"].replace(f'"{Path(__file__).resolve()}"', f'"{Path(__file__).name}"')
    ptx = ptx.replace(f'"{Path(triton.__file__).parent.parent}/', '"')
    Path(out, name).write_text(ptx)
    print(name, k.metadata.shared, "bytes of shared memory,", k.metadata.num_warps, "warps, triton",
          triton.__version__)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
