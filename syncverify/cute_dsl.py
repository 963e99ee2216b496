"""A CuTe DSL (`nvidia-cutlass-dsl`) kernel checked from the `@cute.jit` call that launches it, without a GPU.

The DSL compiles for a named architecture with no device present (`cute.compile(..., options="--gpu-arch
sm_90a")`) and keeps the PTX it generates (`--keep-ptx --dump-dir DIR`, `--generate-line-info` for `.loc`
lines into the Python source). The launch is the one the host function makes: while the call is traced,
each `KernelLauncher.launch(grid=..., block=..., cluster=..., smem=...)` is recorded -- with static shapes
those are Python integers; a launch whose sizes are only known at run time (dynamic shapes) is refused
rather than guessed, and `grid=`/`block=` given to `check` stand in for it. The PTX is then extracted at
that launch and checked as any kernel; findings land on the Python lines of the `@cute.kernel`.

Kernel parameters are left unknown: a static-shape tensor argument is a bare pointer, and a decision of the
protocol that reads a parameter is refused at its PTX line. One launch per jit function is supported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .options import Options
from .ptx.launch import Launch
from .ptx.parse import parse_ptx_file
from .triton.call import CallError, Compiled
from .triton.check import TritonCheck, check_compiled


def _cache() -> Path:
    base = os.environ.get("SYNCVERIFY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "syncverify")
    return Path(base) / "cute_dsl"


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, int) for v in vals) or not 1 <= len(vals) <= 3:
        raise CallError(f"the kernel's {what} {value!r} is not known when it is compiled (a dynamic shape): "
                        f"give {what}= to syncverify.cute_dsl.check")
    vals += [1] * (3 - len(vals))
    return (vals[0], vals[1], vals[2])


def compile_call(fn: Any, args: Sequence[Any], kwargs: dict[str, Any], arch: str = "sm_90a",
                 grid: Sequence[int] | None = None, block: Sequence[int] | None = None) -> Compiled:
    """Compile `fn(*args, **kwargs)` (a `@cute.jit` function) for `arch`, keep its PTX, record its launch."""
    import cutlass.cute as cute
    from cutlass.cutlass_dsl.cutlass import KernelLauncher

    launches: list[dict[str, Any]] = []
    original = KernelLauncher.launch

    def recording(self: Any, *a: Any, **kw: Any) -> Any:
        launches.append(dict(kw))
        return original(self, *a, **kw)

    out = _cache() / f"{getattr(fn, '__name__', 'kernel')}-{os.getpid()}"
    out.mkdir(parents=True, exist_ok=True)
    KernelLauncher.launch = recording  # type: ignore[method-assign]
    try:
        compiled = cute.compile(fn, *args, **kwargs,
                                options=f"--gpu-arch {arch} --keep-ptx --generate-line-info --dump-dir {out}")
    finally:
        KernelLauncher.launch = original  # type: ignore[method-assign]
    ptx = Path(str(compiled.artifacts.PTX))
    if not (len(str(ptx)) < 4096 and ptx.is_file()):
        found = sorted(out.glob(f"*.{arch}.ptx"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise CallError(f"the DSL kept no PTX in {out}")
        ptx = found[-1]
    if len(launches) != 1:
        raise CallError(f"{getattr(fn, '__name__', fn)} launches {len(launches)} kernels; one is checked at a time")
    la = launches[0]
    mod = parse_ptx_file(str(ptx))
    entries = mod.entries()
    if len(entries) != 1:
        raise CallError(f"{ptx} has {len(entries)} kernels; one is checked at a time")
    cluster = la.get("cluster")
    launch = Launch(block=_dims(block if block is not None else la.get("block"), "block"),
                    grid=_dims(grid if grid is not None else la.get("grid"), "grid"),
                    cluster=_dims(cluster, "cluster") if cluster is not None else (1, 1, 1),
                    dynamic_smem=int(la["smem"]) if isinstance(la.get("smem"), int) else None)
    return Compiled(ptx, entries[0].name, launch, {"arch": arch})


def check(fn: Any, *args: Any, arch: str = "sm_90a", grid: Sequence[int] | None = None,
          block: Sequence[int] | None = None, options: Options | None = None, **kwargs: Any) -> TritonCheck:
    """Check the kernel `fn(*args, **kwargs)` launches, at that launch (docs/cute_dsl.md)."""
    return check_compiled(compile_call(fn, args, kwargs, arch, grid, block), options or Options())
