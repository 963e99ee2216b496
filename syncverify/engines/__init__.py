"""Search engines. `run_engines` runs the static checks, then the engines --engine asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..diagnostics import InputError
from ..result import CheckResult, Verdict

if TYPE_CHECKING:
    from .. import ir
    from ..check import Options


def run_engines(protocol: ir.Protocol, options: Options) -> CheckResult:
    from ..semantics.machine import Assumptions, Machine
    from .explicit import Budget, explore

    try:
        machine = Machine(protocol, Assumptions(options.assume_tcgen05_commit_order, options.assume_dealloc_blocks))
    except InputError as err:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics))
    budget = Budget(options.max_states, options.timeout, options.max_memory_mb)
    return explore(protocol, budget, machine, full_trace=options.full_trace, strict=options.strict)
