"""syncverify: a static verifier for GPU kernel synchronization protocols."""

from .builder import ProtocolBuilder
from .check import Options, check_protocol
from .diagnostics import Diagnostic, InputError, Severity, Span, TraceStep
from .lang import load
from .result import CheckResult, Verdict

__all__ = ["CheckResult", "Diagnostic", "InputError", "Options", "ProtocolBuilder", "Severity", "Span", "TraceStep",
           "Verdict", "check_protocol", "load"]
__version__ = "0.1.0"
