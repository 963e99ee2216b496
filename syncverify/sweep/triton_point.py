"""A Triton kernel's autotune space × problem shapes, as points of a sweep.

A manifest's `[[triton]]` table names an autotuned kernel in a Python file and a function of that file that
builds the call for one problem shape:

    [[triton]]
    name = "ring_sum {config} K={K}"    # {config}: the config's values; {AXIS}: the shape's
    module = "kernels/ring_sum.py"       # relative to the manifest
    kernel = "ring_sum"                   # an @triton.autotune'd kernel: one point per config
    call = "sweep_call"                   # sweep_call(K=512) -> (grid, args, kwargs), as kernel[grid](*args, **kwargs)
    axes = { K = [512, 4096] }

Each point is one config at one shape: the call's arguments with the config's values and its `num_warps`,
`num_stages`, `num_ctas` (a config's `pre_hook` is not run: it touches device tensors; the call function may
take the config values it needs as keyword parameters -- a descriptor's block, as a pre_hook sets it), checked by
`syncverify.triton.check` without a GPU. It runs in a child process, as every point does: `python3 -m
syncverify.sweep.triton_point POINT_JSON` prints the check's SARIF and exits as `check` does (2 with the
refusal on stderr when extraction refuses the kernel).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def load_module(path: str) -> Any:
    """The Python file as a module (its folder on sys.path, so it can import its neighbours)."""
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = "syncverify_sweep_" + Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def configs_of(kernel: Any) -> list[Any]:
    """An autotuned kernel's configs; a plain JIT kernel is one point with no config."""
    return list(getattr(kernel, "configs", None) or [None])


def config_label(config: Any) -> str:
    if config is None:
        return "default"
    values = {**config.kwargs, **{k: getattr(config, k) for k in CONFIG_OPTIONS if getattr(config, k, None)}}
    return ",".join(f"{k}={v}" for k, v in values.items())


def jit_function(kernel: Any) -> Any:
    """The JIT function under an autotuner (and under `@triton.heuristics`)."""
    from triton.runtime.jit import JITFunction

    fn = kernel
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def run(spec: dict[str, Any]) -> int:
    """Check one point; SARIF on stdout, the exit code of `check`."""
    from .. import triton as svt
    from ..options import Options
    from ..report import sarif

    module = load_module(spec["module"])
    kernel = getattr(module, spec["kernel"])
    config = configs_of(kernel)[spec["config"]]
    call = getattr(module, spec["call"])
    # the config's values the call names (a descriptor's block, which a config's pre_hook would set)
    wanted = inspect.signature(call).parameters
    given = {k: v for k, v in (config.kwargs if config is not None else {}).items() if k in wanted}
    grid, args, kwargs = call(**spec["shape"], **given)
    kwargs = dict(kwargs)
    if config is not None:
        kwargs.update(config.kwargs)
        kwargs.update({k: getattr(config, k) for k in CONFIG_OPTIONS if getattr(config, k, None)})
    budgets = dict(spec.get("budgets", {}))
    named = {"timeout": ("timeout", float), "max_states": ("max_states", int),
             "max_memory": ("max_memory_mb", float), "rlimit": ("rlimit", int)}
    options = Options(engine=spec.get("engine", "auto"),
                      **{named[k][0]: named[k][1](v) for k, v in budgets.items() if k in named})
    got = svt.check(jit_function(kernel), grid, *args, options=options, **kwargs)
    if got.refusal is not None:
        print(got.refusal.render(), file=sys.stderr)
        return 2
    print(sarif.render([got.result]))
    return got.result.verdict.exit_code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run(json.loads(args[0]))


if __name__ == "__main__":
    sys.exit(main())
