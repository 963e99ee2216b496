"""Search engines. `run_engines` picks them per --engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..result import CheckResult, Verdict

if TYPE_CHECKING:
    from .. import ir
    from ..check import Options


def run_engines(protocol: ir.Protocol, options: Options) -> CheckResult:
    return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound="",
                       coverage="no search engine yet")
