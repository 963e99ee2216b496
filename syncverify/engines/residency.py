"""Co-residency: a CTA that spins on another CTA's progress hangs if that CTA may not be resident.

A launch that is not cooperative gives no guarantee that the CTAs of a grid run at the same time:
the GPU may hold fewer than the grid, and start the others only as resident ones exit. What a
protocol may assume is its `launch` declaration (docs/language.md §3.7):

* `launch cooperative;` / `launch persistent;` — every CTA is resident at once (a cooperative
  launch; a persistent grid no larger than the GPU holds, as CUTLASS's persistent schedulers size
  it): no further check.
* `launch ordered;` — CTAs start in block order: CTAs 0..k may be the only ones resident, for every
  k; each such prefix must not wait for a later CTA.
* none — any CTA may be the only one resident first: each CTA alone must not wait for another.

Each of those schedules is one search of the explicit machine in which the other CTAs never run
(Machine.restrict_to: their processes get the program of an empty body, so the search and its
reductions see them as exited from the start); a deadlock there at a flag spin or a grid barrier is
SV803, with the counterexample. A search that does not finish leaves the verdict inconclusive, never
safe.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .. import ir
from ..result import CheckResult, Verdict

if TYPE_CHECKING:
    from ..options import Options
    from ..semantics.machine import Assumptions


def resident_sets(protocol: ir.Protocol) -> list[frozenset[int]]:
    """The sets of CTAs a launch may leave alone on the GPU, that a check must try."""
    if protocol.launch in ("cooperative", "persistent") or protocol.cluster < 2 or not protocol.cluster_dim:
        return []
    if not any((isinstance(op, ir.FlagOp) and op.kind == "wait") or isinstance(op, ir.GridSync)
               for op in ir.ops_of(protocol.body)):
        return []
    dim = protocol.cluster_dim  # a cluster is always resident whole (it is launched together)
    clusters = protocol.cluster // dim
    if protocol.launch == "ordered":
        return [frozenset(range((k + 1) * dim)) for k in range(clusters - 1)]
    return [frozenset(range(k * dim, (k + 1) * dim)) for k in range(clusters)]


def check_residency(protocol: ir.Protocol, options: Options, assumptions: Assumptions,
                    result: CheckResult, programs: list | None = None) -> CheckResult:
    """``result`` with the SV803 findings of every schedule the launch allows (see the module)."""
    sets = resident_sets(protocol)
    if not sets or result.verdict is Verdict.ERROR:
        return result
    from ..semantics.machine import Machine
    from .explicit import Budget, explore

    found = []
    unfinished = ""
    for resident in sets:
        machine = Machine(protocol, assumptions)
        machine.restrict_to(resident)
        budget = Budget(options.max_states, options.timeout, options.max_memory_mb)
        sub = explore(protocol, budget, machine, full_trace=options.full_trace)
        # (a spin that hangs with every CTA resident is the main search's SV801, not a residency question)
        hits = [d for d in sub.diagnostics if d.code == "SV803"
                and not any(m.code == "SV801" and m.span == d.span for m in result.diagnostics)]
        found += [d for d in hits if not any(f.span == d.span for f in found)]
        if sub.verdict is Verdict.INCONCLUSIVE and not unfinished:
            unfinished = f"co-residency with CTAs {sorted(resident)} alone: {sub.coverage}"
        if found:
            break  # one schedule that hangs is the finding
    if found:
        diags = tuple(sorted((*result.diagnostics, *found), key=lambda d: (d.span.line if d.span else 0, d.code)))
        verdict = Verdict.VIOLATION if result.verdict is not Verdict.VIOLATION else result.verdict
        return replace(result, diagnostics=diags, verdict=verdict)
    if unfinished and result.verdict is Verdict.SAFE:
        return replace(result, verdict=Verdict.INCONCLUSIVE, coverage=unfinished)
    return result
