"""syncverify: a static verifier for GPU kernel synchronization protocols."""

from typing import TYPE_CHECKING, Any

from .check import check_protocol
from .diagnostics import Diagnostic, InputError, Severity, Span, TraceStep
from .lang import load
from .options import Options
from .result import CheckResult, Verdict

__all__ = ["CheckResult", "Diagnostic", "InputError", "Options", "ProtocolBuilder", "Severity", "Span", "TraceStep",
           "Verdict", "check_protocol", "load"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from .builder import ProtocolBuilder


def __getattr__(name: str) -> Any:
    """ProtocolBuilder is imported on first use: the command line imports this package on every
    run and never builds protocols in Python."""
    if name == "ProtocolBuilder":
        from .builder import ProtocolBuilder

        return ProtocolBuilder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
