"""Per-site suppression: `// syncverify: allow SV602 — reason`.

A reviewed finding that a team accepts (CUTLASS's `.cta`-scope remote release of a
buffer, say) can be allowed where it is reported: the comment goes at the end of the
finding's line or alone on the line above it, names one or more codes, and gives a
reason. The finding is still reported, marked suppressed with that reason (text, JSON
`"suppressed"`, SARIF `suppressions`), and no longer fails the check.

Soundness: the search does not go past an error that ends a path (a race, a deadlock:
the state after undefined behaviour means nothing). Allowing such an error therefore
cannot make the protocol safe: what lies beyond it was never explored, and the verdict
becomes inconclusive, saying so. Only findings after which the search goes on (SV502,
SV602, warnings) and findings of no search (SV509) can leave a safe verdict behind.
"""

from __future__ import annotations

import re
from dataclasses import replace

from . import ir
from .diagnostics import Diagnostic, Severity
from .result import CheckResult, Verdict

ALLOW = re.compile(r"//\s*syncverify:\s*allow\s+(?P<codes>SV\d{3}(?:\s*,\s*SV\d{3})*)\s*(?:[—:-]+\s*(?P<why>.*))?$",
                   re.I)
# findings after which the search explores on, or that no search produced: allowing them
# leaves nothing unexplored
GOES_ON = frozenset({"SV502", "SV602", "SV509"})


def allowances(source: str) -> dict[int, dict[str, str]]:
    """Line -> {code: reason} for the lines an allow comment covers (its own, and the next line
    when the comment stands alone on its line)."""
    out: dict[int, dict[str, str]] = {}
    for n, text in enumerate(source.splitlines(), start=1):
        m = ALLOW.search(text)
        if not m:
            continue
        why = (m["why"] or "").strip() or "no reason given"
        codes = {c.strip().upper(): why for c in m["codes"].split(",")}
        out.setdefault(n, {}).update(codes)
        if text.strip().startswith("//"):
            out.setdefault(n + 1, {}).update(codes)
    return out


def apply(protocol: ir.Protocol, result: CheckResult, strict: bool = False) -> CheckResult:
    """Mark the allowed findings and recompute the verdict from the findings still in force."""
    allowed = allowances(protocol.source) if "syncverify" in protocol.source else {}
    if not allowed:
        return result
    diags: list[Diagnostic] = []
    hidden_end: list[Diagnostic] = []
    for d in result.diagnostics:
        why = allowed.get(d.span.line if d.span else 0, {}).get(d.code)
        if why is not None and d.span is not None and d.span.path == protocol.path:
            d = replace(d, suppressed=why)
            if d.severity is Severity.ERROR and d.code not in GOES_ON:
                hidden_end.append(d)
        diags.append(d)
    if diags == list(result.diagnostics):
        return result
    verdict, coverage = result.verdict, result.coverage
    in_force = any(d.is_error or (strict and d.severity is Severity.WARNING and d.suppressed is None) for d in diags)
    if result.verdict is Verdict.VIOLATION and not in_force:
        if hidden_end:
            verdict = Verdict.INCONCLUSIVE
            where = ", ".join(f"{d.code} at line {d.span.line}" for d in hidden_end if d.span)
            coverage = (f"the search does not go past an error, and the allowed {where} ended paths it did not "
                        "explore further" + (f"; {coverage}" if coverage else ""))
        else:
            verdict = Verdict.INCONCLUSIVE if coverage else Verdict.SAFE
    return replace(result, diagnostics=tuple(diags), verdict=verdict, coverage=coverage)
