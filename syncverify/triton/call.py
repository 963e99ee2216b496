"""A `@triton.jit` (or `@gluon.jit`) kernel's Python call, compiled for a GPU that is not here, and the
launch it makes.

Triton's own binder specializes the arguments (types, `tt.divisibility`, the integers it folds to
constants), its own `_pack_args` splits constexprs from the signature, and `triton.compile` compiles for
`GPUTarget("cuda", ARCH, 32)`: the PTX is the one the call would have launched, with no driver. The
launch is then read from the compiled kernel and the call, as Triton's launcher makes it
(backends/nvidia/driver.py, driver.c `_launch`): `num_warps * 32` threads (the PTX's `.reqntid` where the
kernel adds warps of its own), clusters of `num_ctas` CTAs along x and a grid of `grid[0] * num_ctas`,
`metadata.shared` bytes of dynamic shared memory; the parameters follow the expanded signature
(`backends/driver.py` `expand_signature`): each constexpr is dropped, a host-side tensor descriptor becomes
its 128-byte CUtensorMap then its shape (i32) and strides (i64), a tuple is flattened, and two pointers
(global and profile scratch) end the list. Integers are bound to their values; pointers and floats stay
unknown (nothing that decides a protocol reads them, and one that does is refused at its line); a
descriptor's box -- `tensordesc_meta[i]["block_size"]` times the element size, the box Triton's launcher
encodes (`make_tensordesc_arg`) -- is the bytes each copy through it moves.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ptx.launch import Launch
from ..ptx.parse import Module, parse_ptx_file

# Triton appends these two pointer parameters to every kernel it compiles (compiler/code_generator.py)
SCRATCH_PARAMS = 2
Grid = tuple[int, ...] | Callable[[dict[str, Any]], tuple[int, ...]]


class CallError(Exception):
    """The call cannot be mapped to a launch: what was expected, in the call's own terms."""


@dataclass(frozen=True)
class Tensor:
    """A stand-in for a device tensor where there is no GPU (and no torch): what Triton's binder reads of a
    tensor argument -- its dtype, shape, strides and the address's alignment -- and nothing else. Any
    object with `data_ptr()` and `dtype` (a torch tensor, CPU or not) serves as well."""

    shape: tuple[int, ...]
    dtype: Any
    strides: tuple[int, ...] | None = None
    ptr: int = 0  # 0: the address is a multiple of 16, as a real allocation's is

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self, dim: int | None = None) -> Any:
        if self.strides is not None:
            s = self.strides
        else:
            out, run = [], 1
            for n in reversed(self.shape):
                out.append(run)
                run *= n
            s = tuple(reversed(out))
        return s if dim is None else s[dim]

    def element_size(self) -> int:
        return int(self.dtype.itemsize)


def tensor(shape: Sequence[int], dtype: Any = "fp16", strides: Sequence[int] | None = None, ptr: int = 0) -> Tensor:
    """A `Tensor` of `dtype` (a `triton.language` dtype or its name: "fp16", "bf16", "fp32", "fp8e4nv", …)."""
    import triton.language as tl

    if isinstance(dtype, str):
        dtype = tl.str_to_ty(dtype, None) if hasattr(tl, "str_to_ty") else getattr(tl, dtype)
    return Tensor(tuple(int(n) for n in shape), dtype, None if strides is None else tuple(int(s) for s in strides),
                  ptr)


@dataclass(frozen=True)
class Compiled:
    """A call compiled and mapped: the PTX file, its kernel, the launch, and what each parameter was
    bound to (for the verdict's bound line and for errors)."""

    ptx: Path
    kernel: str
    launch: Launch
    metadata: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)  # PTX parameter -> the call's argument
    constexprs: Mapping[str, Any] = field(default_factory=dict)  # by argument name

    def module(self) -> Module:
        return parse_ptx_file(str(self.ptx))


def cache_dir() -> Path:
    """Where compiled PTX is kept ($SYNCVERIFY_CACHE, else ~/.cache/syncverify), one file per compile hash."""
    base = os.environ.get("SYNCVERIFY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "syncverify")
    return Path(base) / "triton"


def _target(arch: int) -> Any:
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", arch, 32)


def _source_class(fn: Any) -> Any:
    """Gluon compiles its kernels from a source of its own; a plain Triton kernel from ASTSource."""
    try:
        from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
    except ImportError:  # a Triton without Gluon
        GluonJITFunction = None
    if GluonJITFunction is not None and isinstance(fn, GluonJITFunction):
        return GluonASTSource
    from triton.compiler import ASTSource

    return ASTSource


def compile_call(fn: Any, grid: Grid, args: Sequence[Any], kwargs: Mapping[str, Any], arch: int = 90,
                 out_dir: Path | None = None) -> Compiled:
    """Compile `fn[grid](*args, **kwargs)` for sm_`arch` as Triton would before launching it, and map the
    call to the launch extraction is given."""
    import triton
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    if not isinstance(fn, JITFunction):
        raise CallError(f"{fn!r} is not a @triton.jit or @gluon.jit function (an autotuned kernel: pass its "
                        "config's values, or use syncverify.triton.guard)")
    target = _target(arch)
    backend = make_backend(target)
    kw = dict(kwargs)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    try:
        bound, specialization, options = binder(*args, **kw)
        options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization, options)
    except TypeError as err:
        raise CallError(f"the call does not match {fn.__name__}{fn.signature}: {err}") from None
    kernel = triton.compile(_source_class(fn)(fn, signature, constexprs, attrs), target=target,
                            options=options.__dict__)
    md = kernel.metadata._asdict() if hasattr(kernel.metadata, "_asdict") else dict(vars(kernel.metadata))
    ptx_text = kernel.asm["ptx"]
    out = out_dir or cache_dir()
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(ptx_text.encode()).hexdigest()[:16]
    ptx = out / f"{md['name']}-{digest}.ptx"
    if not ptx.exists():
        tmp = ptx.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(ptx_text)
        tmp.replace(ptx)
    mod = parse_ptx_file(str(ptx))
    entry = next((f for f in mod.entries() if f.name == md["name"]), None)
    if entry is None:
        raise CallError(f"the compiled PTX {ptx} has no kernel {md['name']!r}")
    params = _bind(signature, bound, md.get("tensordesc_meta") or [], [p.name for p in entry.params], fn.__name__)
    grid_dims = _grid(grid, bound)
    ctas = int(md.get("num_ctas", 1) or 1)
    reqntid = entry.directives.get(".reqntid")
    threads = math.prod(reqntid) if reqntid else 32 * int(md["num_warps"])
    launch = Launch(block=(threads, 1, 1), cluster=(ctas, 1, 1),
                    grid=(grid_dims[0] * ctas, grid_dims[1], grid_dims[2]),
                    params=params.ints, dynamic_smem=int(md.get("shared", 0) or 0), tensor_bytes=params.boxes)
    names = list(signature)
    consts = {".".join(names[p[0]] if k == 0 else str(p[k]) for k in range(len(p))): v
              for p, v in constexprs.items()}
    return Compiled(ptx, md["name"], launch, md, params.labels, consts)


def _grid(grid: Grid, bound: Mapping[str, Any]) -> tuple[int, int, int]:
    """The grid as Triton's launcher canonicalizes it: a callable is given the bound arguments."""
    g = grid(dict(bound)) if callable(grid) else grid
    dims = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise CallError(f"grid {g!r}: expected 1 to 3 positive sizes")
    return (dims[0], dims[1] if len(dims) > 1 else 1, dims[2] if len(dims) > 2 else 1)


@dataclass
class _Bound:
    ints: dict[str, int] = field(default_factory=dict)
    boxes: dict[tuple[str, int], int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _flat(sig: Any, value: Any, name: str) -> Iterator[tuple[str, Any, str]]:
    """(type, value, argument name) of each leaf of a (possibly tuple) argument, in order."""
    if isinstance(sig, tuple):
        for k, (s, v) in enumerate(zip(sig, value, strict=True)):
            yield from _flat(s, v, f"{name}[{k}]")
    else:
        yield sig, value, name


def _bind(signature: Mapping[str, Any], bound: Mapping[str, Any], meta: Sequence[Mapping[str, Any] | None],
          names: Sequence[str], kernel: str) -> _Bound:
    """Each PTX parameter's value from the call, in the order of Triton's expanded signature."""
    out = _Bound()
    slots: list[tuple[str, Any, str]] = []  # (kind, value, argument), one per PTX parameter
    descs = 0
    for arg, sig in signature.items():
        for ty, value, label in _flat(sig, bound[arg], arg):
            if ty == "constexpr":
                continue
            if isinstance(ty, str) and ty.startswith("tensordesc"):
                m = meta[descs] if descs < len(meta) else None
                descs += 1
                slots += _descriptor(ty, value, m, label)
                continue
            slots.append((ty, value, label))
    if len(slots) + SCRATCH_PARAMS != len(names):
        raise CallError(f"{kernel}: the call maps to {len(slots)} parameters and Triton's two scratch pointers, "
                        f"but the compiled kernel has {len(names)}: this Triton's calling convention is not the "
                        "one read here")
    for (ty, value, label), pname in zip(slots, names, strict=False):
        out.labels[pname] = label
        if ty == "box":
            out.boxes[(pname, 0)] = int(value)
        elif isinstance(ty, str) and ty[:1] in "iu" and ty[1:].isdigit():
            if not isinstance(value, (int, bool)):
                raise CallError(f"argument {label} of type {ty} is {value!r}, not an integer")
            out.ints[pname] = int(value)
    return out


def _descriptor(ty: str, desc: Any, meta: Mapping[str, Any] | None, label: str) -> list[tuple[str, Any, str]]:
    """A host-side tensor descriptor's parameters: with the compiler's metadata, its CUtensorMap (the box
    bytes) then shape and strides; without, the decomposed form the kernel encodes a map from itself."""
    shape, strides = list(desc.shape), list(desc.strides)
    tail = [("i32", int(n), f"{label}.shape") for n in shape] + [("i64", int(s), f"{label}.strides") for s in strides]
    if meta is None:
        return ([("*", None, f"{label}.base")] + [("i64", int(n), f"{label}.shape") for n in shape]
                + [("i64", int(s), f"{label}.strides") for s in strides]
                + [("i1", int(desc.padding == "nan"), f"{label}.padding"),
                   ("i1", int(bool(desc.round_f32_to_tf32)), f"{label}.round_f32_to_tf32")] + tail)
    if meta.get("is_im2col") or meta.get("fp4_padded"):
        raise CallError(f"argument {label}: an im2col or padded-fp4 tensor map's box is not read here")
    box = math.prod(int(n) for n in meta["block_size"]) * int(meta["elem_size"])
    return [("box", box, label), *tail]
