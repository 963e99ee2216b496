"""`--cutlass-problem MxNxK[xL]` on `check` and `extract`: a CUTLASS sm90 GEMM's launch, Params fields and
tensor-map boxes computed by CUTLASS's own host code (ptx/cutlass_host.py), so that no host program is
written by hand. The kernel's type comes from its PTX entry; a `.cu` is compiled first. sm100 GEMMs and
example 88's FMHA (`--cutlass-fmha B,H,Q,K,D`) have host programs of their own (ptx/cutlass_host_kinds.py)."""

from __future__ import annotations

import argparse
import copy
import re

from ..ptx.cutlass_host import cutlass_include, host_launch
from ..ptx.cutlass_host_kinds import host_launch_of, with_example_includes
from ..ptx.extract import load_module, pick_kernel
from ..ptx.parse import Module


def _problem(text: str) -> tuple[int, int, int, int]:
    parts = [p for p in re.split(r"[x,]", text) if p.strip()]
    try:
        vals = [int(p, 0) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MxNxK or MxNxKxL") from None
    if len(vals) not in (3, 4) or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: expected MxNxK or MxNxKxL of positive numbers")
    return (vals[0], vals[1], vals[2], vals[3] if len(vals) == 4 else 1)


def _fmha(text: str) -> tuple[int, int, int, int, int]:
    parts = [p for p in re.split(r"[x,]", text) if p.strip()]
    try:
        vals = [int(p, 0) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected B,H,Q,K,D") from None
    if len(vals) != 5 or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: expected B,H,Q,K,D: five positive numbers")
    return (vals[0], vals[1], vals[2], vals[3], vals[4])


def add_args(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--cutlass-problem", type=_problem, metavar="MxNxK[xL]",
                   help="a CUTLASS sm90 or sm100 GEMM: compute its launch, Params fields and tensor-map boxes for this "
                        "problem with CUTLASS's own host code (built once with nvcc; docs/cutlass.md)")
    g.add_argument("--cutlass-fmha", type=_fmha, metavar="B,H,Q,K,D",
                   help="CUTLASS example 88's Hopper FMHA forward kernel: its launch, Params fields and boxes "
                        "for batch B, H heads, query length Q, key length K, head dim D (docs/cutlass.md)")
    g.add_argument("--cutlass-sms", type=int, metavar="N",
                   help="SMs the tile scheduler is given (default: the CTAs of one cluster, so that every tile "
                        "of the problem passes through the cluster that is extracted)")
    g.add_argument("--cutlass-beta", type=float, default=0.0, metavar="BETA",
                   help="the epilogue's beta (0: C is not loaded)")
    g.add_argument("--cutlass-splits", type=int, default=None, metavar="N",
                   help="a stream-K GEMM's decomposition: 1 (default) forces stream-K, N > 1 split-K into N; its "
                        "grid is extracted as one protocol (--whole-grid) on a persistent launch")


def resolve(path: str, args: argparse.Namespace) -> tuple[Module, argparse.Namespace]:
    """The module, and the arguments with the launch CUTLASS's host code computed: --grid, --block,
    --cluster and --dynamic-smem set from it; its Params fields and boxes bound to parameter 0 before any
    --param / --tensor-bytes given too (those are applied on top)."""
    includes = list(args.includes)
    auto = cutlass_include()  # a .cu of a CUTLASS kernel compiles against the nvidia-cutlass headers too
    if auto is not None and auto not in includes:
        includes.append(auto)
    includes = with_example_includes(args, includes)  # --cutlass-fmha: the example's own headers too
    mod = load_module(path, includes, getattr(args, "nvcc_flags", ()))
    name = pick_kernel(mod, args.kernel)
    fn = next(f for f in mod.entries() if f.name == name)
    host = host_launch_of(path, fn, includes, args)  # an sm100 GEMM or the FMHA example (ptx/cutlass_host_kinds.py)
    if host is None:
        host = host_launch(path, fn, includes, args.cutlass_problem, args.cutlass_sms,
                           args.cutlass_beta, quiet=getattr(args, "quiet", False),
                           splits=getattr(args, "cutlass_splits", None))
    out = copy.copy(args)
    out.kernel = name
    out.includes = includes
    out.grid, out.block, out.cluster, out.dynamic_smem = host.grid, host.block, host.cluster, host.dynamic_smem
    out.param = [("0", host.param_bytes()), *args.param]
    out.tensor_bytes = [(("0", o), n) for o, n, _ in host.boxes] + list(args.tensor_bytes)
    out.smem_members = host.members  # the SharedStorage members: the names of the protocol's objects
    if host.workspace is not None:
        # stream-K: the CTAs that share an output tile meet through the workspace (its flags and partials,
        # at the fake address the Params point to): the grid is one protocol, on the persistent launch
        # CUTLASS's scheduler sizes (no more CTAs than SMs)
        out.whole_grid = True
        out.grid_launch = getattr(args, "grid_launch", None) or "persistent"
    return mod, out
