"""The search's partial-order reduction: which of the steps the model offers a search explores.

The model (semantics/) says what can happen — every enabled step (``Machine.successors``) and
what each step touches (semantics/footprint.py) — and knows nothing of the search. This package
decides what to explore: where one step may be taken alone (a persistent set of size one), the
reduced successor function yields it and nothing else (docs/model.md, "The search and its
reductions", says why each rule is sound).

successors.py holds the reduced successor function (``Reduction``, bound to one machine); the
rules it asks are element.py (per barrier element), tx.py (byte counts and landings), named.py
(named-barrier arrivals) and exit.py (exits); precede_walk.py is the walk of what can come before a
step, precede_memo.py remembers its answers; cta_local.py gives the steps of one CTA where CTAs meet only
through global memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .successors import Reduction

if TYPE_CHECKING:
    from ...semantics.core import StepResult
    from ...semantics.machine import Machine
    from ...semantics.state import State


def successors_of(machine: Machine, reduce: bool = True) -> Callable[[State], Iterator[StepResult]]:
    """The successor function a search explores ``machine`` with: the reduced one, or with ``reduce``
    off every step the model offers."""
    return Reduction(machine).successors if reduce else machine.successors


__all__ = ["Reduction", "successors_of"]
