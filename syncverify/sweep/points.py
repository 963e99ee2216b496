"""A point of a sweep and the keys every kind of point shares (the manifest's tables build them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BUDGETS = ("timeout", "max_states", "max_memory", "rlimit")
ENGINES = ("auto", "explicit", "z3", "bmc")


@dataclass(frozen=True)
class Point:
    """One check of the sweep, as the manifest names it (paths made absolute)."""

    name: str
    path: str
    define: tuple[tuple[str, int], ...] = ()
    args: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    expect: tuple[str, ...] | None = None  # error codes; () is "safe"; None: no expectation
    engine: str = "auto"
    budgets: tuple[tuple[str, float], ...] = ()
    config: tuple[tuple[str, str], ...] = ()  # a sweep point's axis values (for the table by configuration)
    line: int = 0  # where the manifest names it
    # a `[[triton]]` point: its module, kernel, call, config index and shape, as JSON (triton_point.py); "" else
    triton: str = ""

    def argv(self, path: str | None = None) -> list[str]:
        """The `syncverify check` arguments of this point (its .cu replaced by ``path`` once compiled)."""
        out = [path or self.path, "--engine", self.engine]
        for name, value in self.define:
            out += ["-D", f"{name}={value}"]
        for key, value in self.budgets:
            out += [f"--{key.replace('_', '-')}", _number(value)]
        if self.path.endswith((".ptx", ".cu")) and not any(a.startswith("--after-first-error") for a in self.args):
            # a kernel's search goes on after its first error, so that the codes a point reports do not depend
            # on the machine's speed (`check` stops a kernel's search 10 s after it by default)
            out += ["--after-first-error", "0"]
        return out + list(self.args)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def common_fields(merged: Mapping[str, Any], bad: Any) -> tuple[tuple[str, ...] | None, str,
                                                                tuple[tuple[str, float], ...]]:
    """A point's `expect`, `engine` and budgets, checked (``bad(key, message)`` makes the input error)."""
    expect = merged.get("expect")
    if expect is not None:
        if expect == "safe":
            expect = []
        if not isinstance(expect, list) or not all(isinstance(c, str) and re.fullmatch(r"SV\d{3}", c) for c in expect):
            raise bad("expect", "`expect` must be \"safe\" or a list of codes, e.g. [\"SV201\"]")
    engine = merged.get("engine", "auto")
    if engine not in ENGINES:
        raise bad("engine", f"`engine` must be one of {', '.join(ENGINES)}")
    budgets = []
    for key in BUDGETS:
        if key in merged:
            value = merged[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise bad(key, f"`{key}` must be a positive number")
            budgets.append((key, float(value)))
    return None if expect is None else tuple(sorted(expect)), engine, tuple(budgets)


def fill(value: Any, config: Mapping[str, Any]) -> Any:
    """`{AXIS}` in a string takes the axis value; a string that is only `{AXIS}` takes it with its type."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\{(\w+)\}", value)
        if whole and whole[1] in config:
            return config[whole[1]]
        return re.sub(r"\{(\w+)\}", lambda m: str(config[m[1]]) if m[1] in config else m[0], value)
    if isinstance(value, list):
        return [fill(v, config) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, config) for k, v in value.items()}
    return value

