"""Promela export: a SPIN model of a protocol, derived from the same semantics.

The model is generated from what the explicit engine runs, not written beside
it: the processes and their compiled programs come from
``semantics.program`` (one proctype per warp process, its flat instruction
list turned into a ``pc`` automaton), the layouts of barriers, slots and
knowledge holders from ``semantics.machine.Machine``, and every mbarrier update
is the rule of ``semantics.rules`` itself, run over Promela expressions
(``mb_update``) instead of integers. docs/promela.md describes the mapping; in short:

* one step of the explicit engine (an operation plus the local control flow
  after it) is one ``d_step`` of the proctype, so SPIN interleaves exactly the
  steps the engine interleaves;
* every in-flight bulk copy is served by an agent proctype (one per slot that
  copies target; two copies into one slot in flight at once are a race, which
  the model reports first), completing at any later moment;
* happens-before is the engine's knowledge scheme: every live access record
  carries the bitmask of holders ordered after it, and release, acquire and
  phase completion move bits exactly as ``semantics.state`` does;
* a rule broken is ``assert(cond || SVnnn)``: SPIN prints the code with the
  violated assertion; a deadlock is caught by a monitor on SPIN's `timeout` (SV201).

Soundness first: whatever cannot be mirrored exactly is refused with an
``ExportError`` (the CLI exits 2) instead of being approximated. The readings
that differ from the explicit engine, and why they preserve verdicts, are
listed in docs/promela.md.

The package mirrors semantics/families/: the model's skeleton — the layout and declarations
(exporter.py), the run of every process that sizes and admits the model (facts.py), the proctypes
and the init process (processes.py), the C knowledge operations (knowledge.py), the rules over
Promela text (terms.py) — and one module per primitive family (mbarrier.py, barriers.py,
memory.py, async_agents.py, fences.py, tcgen05.py, lifecycle.py) that reads its operations in the
run and writes their steps. A new primitive family adds its module and registers its operations
in ``FACTS`` and ``STEPS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import ir
from ...lang.choices import open_choices
from ...semantics.families.storage import uses_storage
from .base import ExportError
from .exporter import _Exporter

__all__ = ["ExportError", "PromelaModel", "export_model", "export_promela"]


@dataclass(frozen=True)
class PromelaModel:
    """A model and the length of its longest path (every step of every process and copy once, plus
    the creation of the processes): pass it to pan as -m so that no path is cut off."""

    text: str
    max_depth: int


def export_model(protocol: ir.Protocol) -> PromelaModel:
    """The Promela model of a loaded protocol. Raises ExportError when it cannot be exported faithfully."""
    several = open_choices(protocol)
    if several:  # a model of the first assignment would say nothing of the others
        raise ExportError(f"{several}; the model is built for one assignment: pin each with -D NAME=VALUE")
    shared = uses_storage(protocol)
    if shared is not None:  # the model has no bytes: a barrier's storage becoming data is not mirrored
        raise ExportError(f"a barrier in a buffer's bytes ({shared}) is not exported: the model keeps barriers and "
                          "data slots apart, so the lifetime of bytes that are both (SV408, SV409) has no counterpart")
    exp = _Exporter(protocol)
    return PromelaModel(exp.render(), exp.max_depth())


def export_promela(protocol: ir.Protocol) -> str:
    """The Promela text of a loaded protocol (see export_model)."""
    return export_model(protocol).text
