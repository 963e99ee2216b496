"""syncverify: a static verifier for GPU kernel synchronization protocols.

The public names are imported on first use (PEP 562): the command line imports this package before
anything else, and a Ctrl-C while z3, lark and the engines load must reach the command line's own
handling (exit 130, no traceback), which it can only once this package is in."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["CheckResult", "Diagnostic", "InputError", "Options", "ProtocolBuilder", "Severity", "Span", "TraceStep",
           "Verdict", "check_protocol", "load"]
__version__ = "0.1.0"

_HOME = {"check_protocol": ".check", "Diagnostic": ".diagnostics", "InputError": ".diagnostics",
         "Severity": ".diagnostics", "Span": ".diagnostics", "TraceStep": ".diagnostics", "load": ".lang",
         "Options": ".options", "CheckResult": ".result", "Verdict": ".result", "ProtocolBuilder": ".builder"}

if TYPE_CHECKING:
    from .builder import ProtocolBuilder
    from .check import check_protocol
    from .diagnostics import Diagnostic, InputError, Severity, Span, TraceStep
    from .lang import load
    from .options import Options
    from .result import CheckResult, Verdict


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(import_module(_HOME[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
