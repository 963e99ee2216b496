"""Checking one protocol: load, static checks, the search engines, the verdict.

Soundness rule: a protocol is only ever called safe by an engine that
explored everything it had to; any budget that runs out makes it
inconclusive, never safe.
"""

from __future__ import annotations

from . import ir
from .diagnostics import InputError, Severity
from .lang import load
from .options import Options
from .result import CheckResult, Stats, Verdict

__all__ = ["Options", "check_path", "check_protocol", "verdict_of"]


def verdict_of(diags, strict: bool) -> Verdict:
    if any(d.code.startswith("SV1") and d.severity is Severity.ERROR for d in diags):
        return Verdict.ERROR
    if any(d.severity is Severity.ERROR or (strict and d.severity is Severity.WARNING) for d in diags):
        return Verdict.VIOLATION
    return Verdict.SAFE


def check_protocol(protocol: ir.Protocol, options: Options = Options()) -> CheckResult:
    """Run the engines on a loaded protocol, mark the findings the spec allows at their site
    (suppress.py), then name the root causes of the errors still in force (diagnose.py: only causes
    that are certain, ahead of the symptoms) and mark those the spec allows: an allowed race is
    not the reason for a cause that would fail the check in its place."""
    from . import suppress
    from .diagnose import root_causes
    from .engines import run_engines

    allowed = suppress.apply(protocol, run_engines(protocol, options), options.strict)
    return suppress.apply(protocol, root_causes(protocol, allowed, options), options.strict)


def check_path(path: str, options: Options = Options()) -> CheckResult:
    """Load and check one file; input errors become an `error` result, never an exception."""
    try:
        protocol = load(path, options.defines)
    except InputError as err:
        return CheckResult(path=path, protocol=None, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics), stats=Stats())
    return check_protocol(protocol, options)
