"""The autotune guard: every config's compiled kernel checked before the autotuner benchmarks or launches it.

A hanging candidate wedges the GPU and every candidate after it, so the check has to come before the
first launch, and it has to see the call: the grid, the arguments, the config's values. Triton's
autotuner offers exactly that point -- `prune_configs_by={"early_config_prune": f}` is called with the
configs, the named arguments and the launch's keyword arguments (the grid among them) before any config
is compiled or benchmarked, once per new tuning key. `guard(autotuned)` installs itself there, after a
pruning function the kernel already had; a config whose kernel is proved to hang, race or misuse a
barrier at that call is dropped and reported, the others are kept. A config the check cannot decide
(extraction refuses an instruction, a budget runs out) is reported and kept -- or dropped with
`strict=True`. The autotuner skips pruning when it has one config, so the guard also checks a lone
config before its launch, and refuses to launch it when it is unsafe.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..options import Options
from .check import TritonCheck, check


class UnsafeConfigs(RuntimeError):
    """Every config of the autotuned kernel hangs or races at this call: there is none left to launch."""


@dataclass
class Guard:
    """The early_config_prune hook of one autotuned kernel (and the record of what it decided)."""

    autotuner: Any
    options: Options = field(default_factory=Options)
    arch: int = 90
    strict: bool = False
    report: Callable[[str], None] | None = None
    previous: Callable[..., Any] | None = None
    # (config, check) of every config checked, in order; a config is checked once per tuning key
    checks: list[tuple[Any, TritonCheck]] = field(default_factory=list)
    seen: set[Any] = field(default_factory=set)  # call shapes a lone config was checked at

    def __call__(self, configs: Sequence[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        if self.previous is not None:
            configs = list(self.previous(configs, named_args, **kwargs))
        kept = [c for c in configs if self.admit(c, named_args, kwargs)]
        if not kept:
            raise UnsafeConfigs(f"{self._name()}: every config hangs or races at this call:\n"
                                + "\n".join(self._line(c, ch) for c, ch in self.checks[-len(configs):]))
        return kept

    def admit(self, config: Any, named_args: dict[str, Any], kwargs: dict[str, Any]) -> bool:
        """Check one config at this call; True when it may be launched."""
        got = self.check_config(config, named_args, kwargs)
        self.checks.append((config, got))
        if got.safe:
            return True
        drop = got.unsafe or self.strict
        self._say(("dropped " if drop else "kept, undecided: ") + self._line(config, got))
        return not drop

    def check_config(self, config: Any, named_args: dict[str, Any], kwargs: dict[str, Any]) -> TritonCheck:
        """The call the autotuner would make for `config` (its pre_hook applied, as Triton applies it
        before that config's launch), checked."""
        grid = kwargs.get("grid")
        if grid is None:
            raise TypeError(f"{self._name()}: the guard needs the launch's grid (kernel[grid](...))")
        call = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        values = {k: v for k, v in config.all_kwargs().items() if v is not None}
        full = {**named_args, **call, **values}
        if config.pre_hook is not None:
            config.pre_hook(full)
        from triton.runtime.jit import JITFunction

        fn = self.autotuner.fn
        while not isinstance(fn, JITFunction):  # @triton.heuristics between: its values join the call
            for name, value in getattr(fn, "values", {}).items():
                full[name] = value(dict(full))
            fn = fn.fn
        names = list(named_args)
        args = [full[n] for n in names]
        rest = {k: v for k, v in full.items() if k not in names}
        return check(fn, grid, *args, options=self.options, arch=self.arch, **rest)

    def _name(self) -> str:
        return getattr(self.autotuner.base_fn, "__name__", "kernel")

    def _line(self, config: Any, got: TritonCheck) -> str:
        if got.refusal is not None:
            why = got.refusal.render().splitlines()[0]
        elif got.result.diagnostics:
            d = next((d for d in got.result.diagnostics if d.is_error), got.result.diagnostics[0])
            at = f"{d.span.path}:{d.span.line}:{d.span.column}: " if d.span else ""
            why = f"{at}{d.code} {d.message}"
        else:
            why = f"{got.verdict.value}: {got.result.coverage}"
        return f"config {config}: {why}"

    def _say(self, text: str) -> None:
        (self.report or (lambda s: print(f"syncverify: {self._name()}: {s}", file=sys.stderr)))(text)


def guard(autotuned: Any = None, *, options: Options | None = None, arch: int = 90, strict: bool = False,
          report: Callable[[str], None] | None = None) -> Any:
    """Install the guard on a `@triton.autotune` kernel and return it (usable as a decorator, with or
    without arguments, above `@triton.autotune`). `report` receives one line per dropped or undecided
    config (default: stderr); the decisions stay in `kernel.syncverify_guard.checks`."""
    if autotuned is None:
        return lambda k: guard(k, options=options, arch=arch, strict=strict, report=report)
    from triton.runtime.autotuner import Autotuner

    if not isinstance(autotuned, Autotuner):
        raise TypeError(f"{autotuned!r} is not a @triton.autotune kernel; check a plain kernel with "
                        "syncverify.triton.check")
    g = Guard(autotuned, options or Options(), arch, strict, report, autotuned.early_config_prune)
    autotuned.early_config_prune = g
    autotuned.syncverify_guard = g
    run = autotuned.run

    def guarded_run(*args: Any, **kwargs: Any) -> Any:
        # one config: Triton launches it without pruning, so it is checked here, once per call shape
        if len(autotuned.configs) == 1:
            named = dict(zip(autotuned.arg_names, args, strict=False))
            key = _shape_key(named, kwargs)
            if key is None or key not in g.seen:
                g(autotuned.configs, named, **kwargs)
                if key is not None:
                    g.seen.add(key)
        return run(*args, **kwargs)

    autotuned.run = guarded_run
    return autotuned


def _shape_key(named: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """What a lone config's check depends on in a call -- integers, tensors' dtypes and shapes,
    descriptors' shapes and boxes, the grid -- or None when it cannot be told (then it is checked again)."""

    def one(v: Any) -> Any:
        if isinstance(v, (int, float, bool, str)) or v is None:
            return v
        if hasattr(v, "block_shape"):
            return ("desc", tuple(v.shape), tuple(v.strides), tuple(v.block_shape), one(v.base))
        if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
            return ("tensor", str(v.dtype), tuple(getattr(v, "shape", ())), v.data_ptr() % 16)
        if isinstance(v, tuple):
            return tuple(one(x) for x in v)
        raise TypeError

    try:
        key = (tuple((k, one(v)) for k, v in named.items()),
               tuple((k, one(v)) for k, v in sorted(kwargs.items()) if k != "grid"))
        grid = kwargs.get("grid")
        if callable(grid):
            return None
        hash(key)
        return (*key, grid)
    except TypeError:
        return None
