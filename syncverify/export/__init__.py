"""Exports of a protocol to other verification tools.

`promela` writes a SPIN model derived from the same compiled programs and barrier
rules as the explicit engine (`syncverify export --promela`); `spin` runs SPIN
on such a model and reads its verdict back, for the agreement test and the
benchmark in bench/.
"""

from .promela import ExportError, PromelaModel, export_model, export_promela

__all__ = ["ExportError", "PromelaModel", "export_model", "export_promela"]
