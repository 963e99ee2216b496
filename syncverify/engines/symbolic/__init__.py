"""Proofs for every trip count: the explicit semantics with ITERS symbolic and loop counters kept modulo a period.

The engine behind `--engine z3` and the lift of `auto` (docs/engines.md), in five rooms, from the
innermost out (a protocol enters at ``entry`` and reaches ``hook`` last):

* ``hook``: the symbolic trip count, the ``Machine.loop_hook`` that answers the trip-count tests
  of the plan's loops (``periodic.plan``), and the modes it leaves in a state (ITERS fixed or not);
* ``key``: the merge key of a state (``normalize``), which forgets absolute counter values, and
  why two states with equal keys have the same futures;
* ``search``: the breadth-first search over the periodic abstraction (``lifted_search``), branching
  per trip count;
* ``answers``: the trip counts below and beyond the search, the replay of its findings at their
  trip count, and the ``Lift`` it concludes (``lift``);
* ``entry``: the engine's two entries, ``check`` (the proof alone) and ``lift_result`` (a bounded
  `safe` lifted to every trip count), as ``CheckResult``s.
"""

from __future__ import annotations

from .answers import Lift, lift, replay
from .entry import as_result, check, lift_result
from .hook import TripCount
from .key import normalize
from .search import LiftOutcome, lifted_search

__all__ = ["Lift", "LiftOutcome", "TripCount", "as_result", "check", "lift", "lift_result", "lifted_search",
           "normalize", "replay"]
