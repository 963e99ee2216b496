"""Verdicts and check results: what every engine returns and every reporter prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .diagnostics import Diagnostic, Severity


class Verdict(StrEnum):
    SAFE = "safe"
    VIOLATION = "violation"
    ERROR = "error"
    INCONCLUSIVE = "inconclusive"

    @property
    def exit_code(self) -> int:
        return {Verdict.SAFE: 0, Verdict.VIOLATION: 1, Verdict.ERROR: 2, Verdict.INCONCLUSIVE: 3}[self]


@dataclass(frozen=True, slots=True)
class Stats:
    states: int = 0
    transitions: int = 0
    seconds: float = 0.0
    peak_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of checking one protocol file."""

    path: str
    protocol: str | None
    verdict: Verdict
    bound: str
    diagnostics: tuple[Diagnostic, ...] = ()
    stats: Stats = field(default_factory=Stats)
    coverage: str = ""  # for inconclusive: what was covered
    # The budget that ended a search before it decided (budget.KINDS: "states" and "rlimit" are
    # deterministic, "time" and "memory" depend on the machine); "" when none did
    stopped_by: str = ""
    # The point of a -D sweep this result is for (NAME, value) pairs; () when no -D was swept
    sweep: tuple[tuple[str, int], ...] = ()
    # The named readings of behaviour PTX does not settle that this check relied on (machine.Assumptions,
    # dropped by --no-assume); () when none was used
    assumed: tuple[str, ...] = ()

    def point(self) -> str:
        """The sweep point as the text report names it (" [STAGES=2, ITERS=8]"), or ""."""
        return " [" + ", ".join(f"{n}={v}" for n, v in self.sweep) + "]" if self.sweep else ""

    def codes(self, severity: Severity | None = None) -> set[str]:
        return {d.code for d in self.diagnostics if severity is None or d.severity is severity}


def combine_exit(results: list[CheckResult]) -> int:
    """Exit status over several files: an input error dominates, then a violation, then inconclusive."""
    verdicts = {r.verdict for r in results}
    for v in (Verdict.ERROR, Verdict.VIOLATION, Verdict.INCONCLUSIVE):
        if v in verdicts:
            return v.exit_code
    return 0
