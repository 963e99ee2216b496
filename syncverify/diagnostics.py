"""Diagnostics: source spans, the code table, and the error type for bad input.

Every finding syncverify reports — an input error, a deadlock, a race — is a
:class:`Diagnostic` with a stable code (design contract: codes are never reused
for another meaning). Input errors are raised as :class:`InputError` carrying
one or more diagnostics, so the CLI can print them all and exit with code 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file; lines and columns are 1-based, end inclusive-exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of a counterexample, as the JSON contract names it."""

    step: int
    cta: int
    role: str
    line: int
    op: str
    note: str = ""
    iteration: str = ""
    state: str = ""
    barrier: str = ""  # the mbarrier an arrive or wait of this step used (`full[0]`), for drawing edges


@dataclass(frozen=True, slots=True)
class Related:
    """A second source location that explains a finding (the other access, the peer barrier)."""

    span: Span
    message: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span | None = None
    trace: tuple[TraceStep, ...] = ()
    related: tuple[Related, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # the reason given in a `// syncverify: allow SVnnn — reason` comment at the site; None: in force
    suppressed: str | None = None

    @property
    def is_error(self) -> bool:
        """An error in force (a suppressed one is reported but does not fail the check)."""
        return self.severity is Severity.ERROR and self.suppressed is None


class InputError(Exception):
    """Raised for input that cannot be turned into a protocol (exit code 2)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


# code -> (short title, default severity). Titles are the first line of
# `syncverify explain`; docs/diagnostics.md has the long form.
CODES: dict[str, tuple[str, Severity]] = {
    "SV100": ("syntax error", Severity.ERROR),
    "SV101": ("unknown name", Severity.ERROR),
    "SV102": ("duplicate name", Severity.ERROR),
    "SV103": ("roles overlap or leave the CTA", Severity.ERROR),
    "SV104": ("index out of range", Severity.ERROR),
    "SV105": ("mbarrier count or tx bytes out of range", Severity.ERROR),
    "SV106": ("bad named-barrier id or thread count", Severity.ERROR),
    "SV107": ("bytes not a positive multiple of 16", Severity.ERROR),
    "SV108": ("remote operation not allowed here", Severity.ERROR),
    "SV109": ("bad loop bound", Severity.ERROR),
    "SV110": ("unknown operation, qualifier or clause", Severity.ERROR),
    "SV111": ("wrong kind of object for this operation", Severity.ERROR),
    "SV112": ("file cannot be read", Severity.ERROR),
    "SV113": ("bad kernel shape", Severity.ERROR),
    "SV114": ("bad -D parameter override", Severity.ERROR),
    "SV115": ("bad expression", Severity.ERROR),
    "SV116": ("construct not supported in this position", Severity.ERROR),
    "SV117": ("malformed `expect:` header", Severity.ERROR),
    "SV118": ("bad `choose` declaration or use", Severity.ERROR),
    "SV119": ("bad sweep manifest", Severity.ERROR),
    "SV201": ("deadlock", Severity.ERROR),
    "SV202": ("named-barrier thread counts disagree within one generation", Severity.ERROR),
    "SV203": ("a warp contributes twice to one named-barrier generation", Severity.WARNING),
    "SV204": ("aligned barrier reached from different sites", Severity.WARNING),
    "SV205": ("cluster barrier arrived twice before it completed", Severity.ERROR),
    "SV206": ("collective operation not executed by its whole warp or warpgroup", Severity.ERROR),
    "SV207": ("warp-collective instruction executed by a lane outside its member mask", Severity.ERROR),
    "SV301": ("RAW race", Severity.ERROR),
    "SV302": ("WAR race", Severity.ERROR),
    "SV303": ("WAW race", Severity.ERROR),
    "SV401": ("barrier used before init or after inval", Severity.ERROR),
    "SV402": ("peer CTA may use a barrier before its init is visible", Severity.ERROR),
    "SV403": ("init of a live barrier", Severity.ERROR),
    "SV404": ("CTA exits while its shared memory is still in use", Severity.ERROR),
    "SV405": ("remote operation targets a CTA outside the cluster", Severity.ERROR),
    "SV406": ("tensor memory not deallocated before exit", Severity.ERROR),
    "SV407": ("local-form mbarrier arrive on a peer CTA's barrier", Severity.ERROR),
    "SV408": ("bytes of a live barrier used as data", Severity.ERROR),
    "SV409": ("barrier storage re-used while still in use", Severity.ERROR),
    "SV501": ("parity aliasing", Severity.ERROR),
    "SV502": ("phase completes while no wait observed the previous one", Severity.ERROR),
    "SV503": ("tx-count out of range or never balanced", Severity.ERROR),
    "SV504": ("more arrivals than pending", Severity.ERROR),
    "SV505": ("arrive-on in a phase before a wait observed the previous one", Severity.WARNING),
    "SV506": ("mbarrier count below the threads that arrive per phase", Severity.ERROR),
    "SV507": ("first wait on a fresh barrier waits for a phase it holds back", Severity.ERROR),
    "SV508": ("per-warp release without syncwarp", Severity.ERROR),
    "SV509": ("shared memory per CTA over capacity", Severity.ERROR),
    "SV601": ("missing fence.proxy.async", Severity.ERROR),
    "SV602": ("cross-CTA synchronization with .cta scope", Severity.ERROR),
    "SV603": ("tensor-memory access ordered by a thread synchronization without the tcgen05 fence pair",
              Severity.ERROR),
    "SV604": ("tensor-memory allocation after the CTA relinquished the right to allocate", Severity.ERROR),
    "SV605": ("registers accessed while an asynchronous wgmma still reads them", Severity.ERROR),
    "SV606": ("tensor map rewritten while a TMA copy may still read it", Severity.ERROR),
    "SV607": ("TMA copy reads a rewritten tensor map without the tensormap proxy fences", Severity.ERROR),
    "SV608": ("tensor-memory access ordered by release/acquire synchronization without the tcgen05 fence pair",
              Severity.WARNING),
    "SV609": ("release by some lanes publishes the other lanes' accesses ordered only by a warp-collective wgmma "
              "or tcgen05.wait instruction", Severity.WARNING),
    "SV701": ("verification inconclusive", Severity.WARNING),
    "SV801": ("deadlock through global memory", Severity.ERROR),
    "SV802": ("flag reset while a spin waits for the value", Severity.ERROR),
    "SV803": ("wait on a CTA that may not be resident", Severity.ERROR),
    "SV804": ("grid.sync without a cooperative launch", Severity.ERROR),
    "SV806": ("a flag's value used where the language cannot take it", Severity.ERROR),
    "SV807": ("data race on a flag: a weak store not ordered with another thread's access", Severity.ERROR),
}


# Codes only the extraction of a kernel reports: no protocol can express what they are about (a member mask),
# so their documentation shows a kernel checked, not a protocol.
KERNEL_ONLY = frozenset({"SV207"})


class Located(Protocol):
    """A finding at a place: a Diagnostic, or the model's Violation before it is reported."""

    @property
    def code(self) -> str: ...

    @property
    def span(self) -> Span | None: ...


def code_and_line(found: Located) -> tuple[str, int]:
    """What makes two findings one: their code and line. A report lists each once, whichever engine, trip
    count or pass found it (the first one found is kept)."""
    return found.code, found.span.line if found.span else 0


def one_per_code_and_line(diags: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The first finding of each code and line, in their order."""
    seen: set[tuple[str, int]] = set()
    out = []
    for d in diags:
        if code_and_line(d) not in seen:
            seen.add(code_and_line(d))
            out.append(d)
    return tuple(out)


def make(code: str, message: str, span: Span | None = None, *, severity: Severity | None = None,
         **kwargs: object) -> Diagnostic:
    """Build a diagnostic with the code's default severity unless one is given."""
    sev = severity if severity is not None else CODES[code][1]
    return Diagnostic(code=code, severity=sev, message=message, span=span, **kwargs)  # type: ignore[arg-type]
