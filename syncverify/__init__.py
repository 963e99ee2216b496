"""syncverify: a static verifier for GPU kernel synchronization protocols."""

from .diagnostics import Diagnostic, InputError, Severity, Span
from .lang import load

__all__ = ["Diagnostic", "InputError", "Severity", "Span", "load"]
__version__ = "0.1.0"
