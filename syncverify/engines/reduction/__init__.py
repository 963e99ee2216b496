"""The search's partial-order reduction: which of the steps the model offers a search explores.

The model (semantics/) says what can happen — every enabled step (``Machine.successors``) and
what each step touches (semantics/footprint.py) — and knows nothing of the search. This package
decides what to explore: where one step may be taken alone (a persistent set of size one), the
reduced successor function yields it and nothing else (docs/model.md, "The search and its
reductions", says why each rule is sound).

successors.py holds the reduced successor function (``Reduction``, bound to one machine); the
rules it asks are element.py (per barrier element), tx.py (byte counts and landings), named.py
(named-barrier arrivals), exit.py (exits), first_wait.py (a plain arrive that completes a phase
before a first wait), cp_arrive.py (cp.async arrive-ons and their issues) and probe_pair.py (both outcomes of
a completed probe together); precede_walk.py is the walk of what can come before a step, precede_memo.py
remembers its answers; cta_local.py gives the steps of one CTA where CTAs meet only through global memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from ...semantics.core import ModelBound
from .successors import Reduction

if TYPE_CHECKING:
    from ...semantics.core import StepResult
    from ...semantics.machine import Machine
    from ...semantics.state import State


# ``reduce`` that reduces but keeps every kept probe's true step (probe_outcome.py): the search explore() runs
# again where the one that left some out may have named a stale waiter at the wait instead of the probe
KEEP_TRUE_PROBES = "keep-true-probes"


def successors_of(machine: Machine, reduce: bool | str = True,
                  cut: bool = False) -> Callable[[State], Iterable[StepResult]]:
    """The successor function a search explores ``machine`` with: the reduced one, or with ``reduce``
    off every step the model offers (KEEP_TRUE_PROBES: the reduced one with every probe's true step).
    With ``cut`` a step past the model's bounds is handed on as not taken (``StepResult.cut``) rather
    than ending the search: the searches that go on past it (explicit, parallel) ask for that."""
    if not reduce:
        step: Callable[[State], Iterable[StepResult]] = machine.successors
    else:
        step = Reduction(machine, cover_probes=reduce != KEEP_TRUE_PROBES).successors
    return partial(_cut_steps, machine, step) if cut else step


def _cut_steps(machine: Machine, step: Callable[[State], Iterable[StepResult]], state: State) -> list[StepResult]:
    """``step``'s steps in ``state``; where computing them meets a step past the model's bounds, every step the
    model offers, that one not taken. A reduced set may not leave out the others then: the argument that a
    path through them can start with a step of the set assumes that step can be taken (docs/model.md,
    "Steps past the model's bounds")."""
    try:
        return list(step(state))
    except ModelBound:
        return list(machine.successors(state, cut=True))


__all__ = ["KEEP_TRUE_PROBES", "Reduction", "successors_of"]
