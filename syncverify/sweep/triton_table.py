"""`[[triton]]` tables of a manifest: one point per autotune config × problem shape (triton_point.py runs them).

The module is imported here, once, to count and name its kernel's configs, so that a manifest names its
points before any of them runs (and a wrong module, kernel or call is SV119 at its line, not a crashed point).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..diagnostics import InputError
from .points import BUDGETS, Point, common_fields, fill

_KEYS = {"name", "module", "kernel", "call", "axes", "expect", "engine", *BUDGETS}


def triton_points(table: Mapping[str, Any], defaults: Mapping[str, Any], base: Path,
                  bad: Callable[[str | None, str], InputError], line: int) -> list[Point]:
    for key in table:
        if key not in _KEYS:
            raise bad(key, f"unknown key `{key}` (expected one of: {', '.join(sorted(_KEYS))})")
    for key in ("module", "kernel", "call"):
        if not isinstance(table.get(key), str):
            raise bad(key if key in table else None, f"a [[triton]] table needs `{key} = \"…\"`")
    module_path = (base / table["module"]).resolve()
    if module_path.suffix != ".py" or not module_path.is_file():
        raise bad("module", f"{table['module']}: no such Python file (relative to the manifest's folder {base})")
    try:
        from .triton_point import config_label, configs_of, load_module

        module = load_module(str(module_path))
    except Exception as err:  # ImportError (no Triton), or the module's own error
        raise bad("module", f"{table['module']}: cannot import it: {type(err).__name__}: {err}") from None
    kernel = getattr(module, table["kernel"], None)
    if kernel is None:
        raise bad("kernel", f"{table['module']} has no `{table['kernel']}`")
    if not callable(getattr(module, table["call"], None)):
        raise bad("call", f"{table['module']} has no function `{table['call']}` (shape -> (grid, args, kwargs))")
    axes = table.get("axes", {})
    if not isinstance(axes, dict) or not all(isinstance(v, list) and v for v in axes.values()):
        raise bad("axes", "`axes` must be a table of non-empty lists, e.g. { K = [512, 4096] }")
    merged = {**{k: v for k, v in defaults.items() if k in _KEYS}, **table}
    expect, engine, budgets = common_fields(merged, bad)
    names = list(axes)
    out = []
    for combo in itertools.product(*(axes[n] for n in names)):
        shape = dict(zip(names, combo, strict=True))
        for index, config in enumerate(configs_of(kernel)):
            label = config_label(config)
            name = fill(table.get("name", f"{table['kernel']} {{config}}" + "".join(f" {n}={{{n}}}" for n in names)),
                        {**shape, "config": label})
            spec = {"module": str(module_path), "kernel": table["kernel"], "call": table["call"], "config": index,
                    "shape": shape, "engine": engine, "budgets": dict(budgets)}
            out.append(Point(name=str(name), path=str(module_path), expect=expect, engine=engine, budgets=budgets,
                             config=(("config", label), *((n, str(v)) for n, v in shape.items())), line=line,
                             triton=json.dumps(spec, sort_keys=True)))
    return out
