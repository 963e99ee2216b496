"""How the search-free findings (static/checks.py) join an engine's result: one rule for every
engine, in a module of its own so that each engine and the dispatcher (engines/__init__.py)
import it without importing one another."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..diagnostics import code_and_line
from ..result import CheckResult, Verdict

if TYPE_CHECKING:
    from ..static.checks import StaticOutcome


def searched(static: StaticOutcome) -> StaticOutcome:
    """The static outcome for an engine that runs the machine (explicit, the lift): its searches
    check SV406 at every CTA's exit (Machine._tmem_exit), so a complete one — the only kind that
    says safe — has decided what the walk could not add up (the gap). The bmc engine, which has
    no such check, keeps the gap."""
    return replace(static, gap="", stopped_by="")


def merge_static(result: CheckResult, findings: list | StaticOutcome) -> CheckResult:
    """Add the search-free findings; a static error makes the protocol a violation. What the static
    checks could not decide (a StaticOutcome's gap) makes a safe verdict inconclusive."""
    if isinstance(findings, list):
        from ..static.checks import StaticOutcome as Outcome  # (lazy, like static_outcome above)

        findings = Outcome(findings)
    if findings.gap and result.verdict is Verdict.SAFE:
        result = replace(result, verdict=Verdict.INCONCLUSIVE, coverage=findings.gap,
                         stopped_by=findings.stopped_by)
    seen = {code_and_line(d) for d in result.diagnostics}
    extra = [d for d in findings.findings if code_and_line(d) not in seen]
    if not extra:
        return result
    verdict = Verdict.VIOLATION if any(d.is_error for d in extra) else result.verdict
    return replace(result, verdict=verdict, diagnostics=tuple(extra) + result.diagnostics)
