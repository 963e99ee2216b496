"""Checking one protocol: load, static checks, the search engines, the verdict.

Soundness rule: a protocol is only ever called safe by an engine that
explored everything it had to; any budget that runs out makes it
inconclusive, never safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from . import budget, ir
from .diagnostics import Diagnostic, InputError, Severity
from .lang import load
from .result import CheckResult, Stats, Verdict


@dataclass(frozen=True)
class Options:
    engine: str = "auto"  # auto | explicit | z3 | bmc
    # Budgets (syncverify.budget): max_states and rlimit are deterministic and decide when an engine
    # gives up; timeout (wall-clock seconds) and max_memory_mb are the user's outer limits.
    max_states: int = 2_000_000
    timeout: float = 600.0
    max_memory_mb: float = 8192.0
    rlimit: int = budget.DEFAULT_RLIMIT
    strict: bool = False
    full_trace: bool = False
    progress: Callable[[int, int, float, float], None] | None = None  # states, frontier, s, MB
    # each error of the explicit search as soon as it is found; returning True stops the search
    on_finding: Callable[[Diagnostic], bool] | None = None
    defines: Mapping[str, int] = field(default_factory=dict)
    # Readings of the PTX text that production kernels rely on but PTX does not
    # settle (ptx-semantics.md §10.8); each can be dropped to be stricter.
    assume_tcgen05_commit_order: bool = True
    assume_dealloc_blocks: bool = True
    assume_commit_release: bool = True  # a tcgen05.commit releases its thread's generic accesses

    def __post_init__(self) -> None:
        why = budget.problem(self.max_states, self.timeout, self.max_memory_mb, self.rlimit)
        if why is not None:
            raise ValueError(why)


def verdict_of(diags, strict: bool) -> Verdict:
    if any(d.code.startswith("SV1") and d.severity is Severity.ERROR for d in diags):
        return Verdict.ERROR
    if any(d.severity is Severity.ERROR or (strict and d.severity is Severity.WARNING) for d in diags):
        return Verdict.VIOLATION
    return Verdict.SAFE


def check_protocol(protocol: ir.Protocol, options: Options = Options()) -> CheckResult:
    """Run the engines on a loaded protocol, then name the root causes of what they found
    (diagnose.py: only causes that are certain, ahead of the symptoms), and mark the findings
    the spec allows at their site (suppress.py)."""
    from . import suppress
    from .diagnose import root_causes
    from .engines import run_engines

    return suppress.apply(protocol, root_causes(protocol, run_engines(protocol, options), options), options.strict)


def check_path(path: str, options: Options = Options()) -> CheckResult:
    """Load and check one file; input errors become an `error` result, never an exception."""
    try:
        protocol = load(path, options.defines)
    except InputError as err:
        return CheckResult(path=path, protocol=None, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics), stats=Stats())
    return check_protocol(protocol, options)
