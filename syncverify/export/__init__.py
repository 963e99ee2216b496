"""Exports of a protocol to other verification tools.

`promela` writes a SPIN model derived from the same compiled programs and barrier
rules as the explicit engine (`syncverify export --promela`); `spin` runs SPIN
on such a model and reads its verdict back, for the agreement test and the
benchmark in bench/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .promela import ExportError, PromelaModel, export_model, export_promela

__all__ = ["ExportError", "PromelaModel", "export_model", "export_promela"]


def __getattr__(name: str) -> Any:
    """The exporter is imported on first use: the command line registers `syncverify export`
    (syncverify.cli.export) on every run, and `check` should not pay for importing it."""
    if name in __all__:
        from . import promela

        return getattr(promela, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
