"""Findings that need no search: decided on the compiled programs, reported only when certain.

A room of its own beside the engines: `checks.py` (SV503, SV504, SV405, SV509, and the entry
points every engine calls), `collective.py` (SV206, SV406), `tmem_walk.py` (the exact walk that
adds up tensor-memory columns without running every trip). They read the model's compiled
programs and never search it."""

from .checks import StaticOutcome, static_findings, static_outcome

__all__ = ["StaticOutcome", "static_findings", "static_outcome"]
