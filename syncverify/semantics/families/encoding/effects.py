"""What one step of the bmc encoding is built of: the sequential updates of a move on top of the
step's start state (``Work``), and the move's effect (``Effect``: when it is taken, whether it can
move, the rules it breaks, its updates and the objects it uses, for the partial-order reduction).

A module of its own, in semantics/, because the families' Z3 encodings (the ``*Encoding`` mixins
and ``EVENTS`` entries of semantics/families/*.py) are written in these terms; the engine
(engines/bmc/step.py) assembles the transition relation from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....z3_lazy import z3


class Work:
    """Sequential updates on top of a step's start state (as the machine's _Work)."""

    def __init__(self, S: dict):
        self.S = S
        self.upd: dict = {}

    def __getitem__(self, key):
        return self.upd[key] if key in self.upd else self.S[key]

    def __setitem__(self, key, value) -> None:
        self.upd[key] = value

    def cond(self, c: Any, key, value) -> None:
        self[key] = z3.If(c, value, self[key])


@dataclass
class Effect:
    guard: Any
    enabled: Any
    hard: list[tuple[str, Any]]
    soft: list[tuple[str, Any]]
    upd: dict
    objects: dict = field(default_factory=dict)  # object -> "r" / "a" / "w" (see Encoding.objects)
    # objects a move writes after all, and when: an adding move that completes its phase or
    # generation (see Encoding.adds_to), the move that ends a CTA (Encoding.final_exit_objects),
    # a move that breaks a rule
    dynamic: list[tuple[tuple, Any]] = field(default_factory=list)
