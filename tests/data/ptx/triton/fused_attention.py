"""Triton's tutorial flash-attention forward, the TMA-descriptor form (`_attn_fwd_tma` and
`_attn_fwd_inner_tma` of `python/tutorials/06-fused-attention.py`, triton-lang/triton, triton 3.9), compiled
by Triton's own ahead-of-time path for sm_90 (`triton.compile` with `GPUTarget("cuda", 90, 32)`: no GPU is
needed) to the PTX beside this file.

The tutorial's kernels are taken from the tutorial file as it ships (its path is the first argument; the
file itself is not kept here; the PTX beside this file was built from triton-lang/triton commit
003da478d84f5bb0f51b3988cf0ea0bbe60282b7): the two functions are cut out of it by name with `ast`, the
`autotune` decorator left off (the configuration is given here instead, as one of the tutorial's
`configs_tma`: BLOCK_M 64, BLOCK_N 64, 4 warps, fp16, non-causal STAGE 1) and written, at their own line
numbers, to a module of their own, since the tutorial file imports torch and asks for a GPU at import.
N_CTX is compiled as a constant (a small shape, 320: five k tiles, so that every configuration's stages are
refilled), as `_attn_fwd_inner_tma` takes it as a constexpr. The module's name in the PTX's line table is
the tutorial's file name; findings name the tutorial's lines.

Usage: python3 fused_attention.py TUTORIAL.py OUT_DIR [NUM_STAGES]
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HEAD_DIM, BLOCK_M, BLOCK_N, N_CTX = 64, 64, 64, 320
KERNELS = ("_attn_fwd_inner_tma", "_attn_fwd_tma")


def kernels(tutorial: Path, into: Path):  # type: ignore[no-untyped-def]
    """The tutorial's two TMA kernels, unchanged but for the autotune decorator, as a module of their own in
    which every line of them keeps its line number in the tutorial (the other lines are left empty; the
    imports share line 1, the tutorial's docstring), so the PTX's line table names the tutorial's lines."""
    text = tutorial.read_text()
    lines = text.splitlines()
    keep = [""] * len(lines)
    keep[0] = "import triton; import triton.language as tl  # noqa: E702"
    found = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name in KERNELS:
            found.add(node.name)
            assert any(ast.unparse(d) == "triton.jit" for d in node.decorator_list), \
                f"{node.name} is not @triton.jit in {tutorial}"
            first = min(d.lineno for d in node.decorator_list)
            assert node.end_lineno is not None
            for n in range(first, node.end_lineno + 1):
                keep[n - 1] = lines[n - 1]
            for d in node.decorator_list:  # the configuration is given here, not autotuned
                if ast.unparse(d) != "triton.jit":
                    assert d.end_lineno is not None
                    for n in range(d.lineno, d.end_lineno + 1):
                        keep[n - 1] = ""
    assert found == set(KERNELS), f"{tutorial} lacks one of {KERNELS}"
    path = into / tutorial.name
    path.write_text("\n".join(keep) + "\n")
    spec = importlib.util.spec_from_file_location("fused_attention_tutorial", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def main(tutorial: str, out: str, stages: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mod, path = kernels(Path(tutorial), Path(tmp))
        box_q, box_kv = f"fp16[{BLOCK_M}, {HEAD_DIM}]", f"fp16[{BLOCK_N}, {HEAD_DIM}]"
        src = ASTSource(
            fn=mod._attn_fwd_tma,
            signature={"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
                       "desc_q": f"tensordesc<{box_q}>", "desc_k": f"tensordesc<{box_kv}>",
                       "desc_v": f"tensordesc<{box_kv}>", "desc_o": f"tensordesc<{box_q}>", "N_CTX": "constexpr",
                       "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                       "FP8_OUTPUT": "constexpr", "STAGE": "constexpr"},
            constexprs={"N_CTX": N_CTX, "HEAD_DIM": HEAD_DIM, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N,
                        "FP8_OUTPUT": False, "STAGE": 1})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_stages": stages, "num_warps": 4})
        name = f"fused_attention_s{stages}.ptx"
        # source paths made relative: the kernels' module by the tutorial's name, Triton's own by their place
        # (whatever temporary directory it was compiled in: Triton's cache may hold an earlier one's)
        ptx = re.sub(r'"[^"\n]*/' + re.escape(path.name) + '"', f'"{path.name}"', k.asm["ptx"])
        ptx = ptx.replace(f'"{Path(triton.__file__).parent.parent}/', '"')
        Path(out, name).write_text(ptx)
        print(name, k.metadata.shared, "bytes of shared memory,", k.metadata.num_warps, "warps, triton",
              triton.__version__)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
