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


# ``reduce`` that reduces but keeps every kept probe's true step (probe_outcome.py): the search explore() runs
# again where the one that left some out may have named a stale waiter at the wait instead of the probe
KEEP_TRUE_PROBES = "keep-true-probes"


def successors_of(machine: Machine, reduce: bool | str = True) -> Callable[[State], Iterator[StepResult]]:
    """The successor function a search explores ``machine`` with: the reduced one, or with ``reduce``
    off every step the model offers (KEEP_TRUE_PROBES: the reduced one with every probe's true step)."""
    if not reduce:
        return machine.successors
    return Reduction(machine, cover_probes=reduce != KEEP_TRUE_PROBES).successors


__all__ = ["KEEP_TRUE_PROBES", "Reduction", "successors_of"]
