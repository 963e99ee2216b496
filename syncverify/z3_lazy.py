"""z3, loaded when it is first used.

Each primitive family defines its SMT encoding beside its explicit semantics (semantics/families), so its
module names z3 at the top; but a check with the explicit engine never encodes anything, and z3's import
was about 30 ms of an extracted GEMM's 1.4 s check. The families take z3 from here instead: a module
object that loads z3 at its first attribute look-up (importlib's LazyLoader), which every encoding does
before it builds a term. Whoever imports z3 afterwards gets the same module; ``loaded`` tells whether it
has been loaded, without loading it."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def _lazy(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


z3 = _lazy("z3")


def loaded() -> ModuleType | None:
    """z3 if it has been loaded (used) in this process, else None: a look-up on the module would load it."""
    module = sys.modules.get("z3")
    # a lazy module is of a subclass of ModuleType until it loads, then of ModuleType itself (type() looks
    # nothing up on it)
    return module if type(module) is ModuleType else None


__all__ = ["loaded", "z3"]
