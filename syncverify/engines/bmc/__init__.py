"""The bmc engine (`--engine bmc`): bounded model checking of every interleaving with Z3.

A package of its own because it is one search, in five modules (engine.py describes the
encoding): engine.py (the solver loop, counterexamples and their replay, the `--engine bmc`
check), layout.py (the unrolled events and the static layout), por.py (which moves are
independent), symmetry.py (which warps are interchangeable) and step.py (the transition
relation). The families' Z3 encodings it assembles live in semantics/families/, and import
nothing from here.

``Unsupported`` (what ``BMC`` raises for a protocol the encoding does not model) is defined with
the events in semantics/families/encoding/events.py and exported here with the engine.
"""

from __future__ import annotations

from ...semantics.families.encoding.events import Unsupported
from .engine import BMC, SEED, TACTIC, Outcome, check, replay
from .layout import MAX_EVENTS, REFUSED, Encoding
from .step import EVENTS, Step
from .symmetry import STATE_COMPONENTS

__all__ = ["BMC", "EVENTS", "MAX_EVENTS", "REFUSED", "SEED", "STATE_COMPONENTS", "TACTIC", "Encoding", "Outcome",
           "Step", "Unsupported", "check", "replay"]
