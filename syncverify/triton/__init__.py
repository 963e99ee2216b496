"""Triton and Gluon kernels checked from their Python call, without a GPU.

`check(kernel, grid, *args, **kwargs)` compiles the call as Triton would before launching it (for sm_90
by default; `arch=100` for Blackwell), maps the call to the launch -- threads, cluster, grid, the integer
arguments that decide control flow, each tensor descriptor's box -- extracts the protocol and checks it
(call.py, check.py). `guard(autotuned)` checks each autotune config's compiled kernel before the
autotuner benchmarks or launches it, and drops those that hang or race (guard.py). docs/triton.md.
"""

from .call import CallError, Compiled, Tensor, compile_call, tensor
from .check import TritonCheck, check, check_all, check_compiled
from .guard import Guard, UnsafeConfigs, guard

__all__ = ["CallError", "Compiled", "Guard", "Tensor", "TritonCheck", "UnsafeConfigs", "check", "check_all",
           "check_compiled", "compile_call", "guard", "tensor"]
