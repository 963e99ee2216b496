"""Search engines. `run_engines` runs the static checks, then the engines --engine asks for."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..diagnostics import InputError
from ..result import CheckResult, Verdict
from .merging import merge_static, searched
from .residency import check_residency

__all__ = ["merge_static", "run_engines", "searched"]

if TYPE_CHECKING:
    from .. import ir
    from ..options import Options


def run_engines(protocol: ir.Protocol, options: Options) -> CheckResult:
    from ..lang.choices import open_choices, ranges

    if open_choices(protocol):  # `choose` values: every assignment is a protocol of its own
        from .choices import check_every

        return check_every(protocol, options, _run_engines)
    result = _run_engines(protocol, options)
    if protocol.choices and not protocol.assignment and result.bound:  # each pinned: say to what
        result = replace(result, bound=f"{result.bound}; {ranges(protocol)}")
    return result


def _run_engines(protocol: ir.Protocol, options: Options) -> CheckResult:
    """The engines' result, with the named readings of unsettled PTX it relied on (Assumptions.used)."""
    from ..semantics.machine import Assumptions

    assumptions = Assumptions.of(options)
    result = _run(protocol, options, assumptions)
    if assumptions.used and result.verdict is not Verdict.ERROR:
        result = replace(result, assumed=tuple(sorted(assumptions.used)))
    return result


def _run(protocol: ir.Protocol, options: Options, assumptions) -> CheckResult:
    from ..semantics.machine import Machine
    deadline = time.monotonic() + options.timeout  # the static walks run under the same --timeout
    from .explicit import Budget, explore

    try:
        machine = Machine(protocol, assumptions)
    except InputError as err:
        return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.ERROR, bound="",
                           diagnostics=tuple(err.diagnostics))
    if options.engine == "bmc":
        from . import bmc

        return bmc.check(protocol, options, machine)
    if options.engine in ("z3", "auto"):
        try:
            from . import symbolic
        except ModuleNotFoundError as missing:  # z3-solver missing: the bounded search still runs under auto
            if (missing.name or "").split(".")[0] != "z3":
                raise  # any other import error is a defect, never "z3-solver is missing"
            symbolic = None
        if symbolic is None and options.engine == "z3":
            return CheckResult(path=protocol.path, protocol=protocol.name, verdict=Verdict.INCONCLUSIVE, bound="",
                               coverage="the Z3 engine needs z3-solver; use --engine explicit")
        if symbolic is not None and options.engine == "z3":
            return check_residency(protocol, options, assumptions, symbolic.check(protocol, options, machine),
                                   machine.programs)
    budget = Budget(options.max_states, options.timeout, options.max_memory_mb, options.after_first_error)
    search_with = None
    if options.search_jobs > 1:  # the same search on several cores (its refusals are the CLI's to report)
        from .parallel import searcher

        search_with = searcher(options.search_jobs)
    result = explore(protocol, budget, machine, full_trace=options.full_trace, strict=options.strict,
                     progress=options.progress, on_finding=options.on_finding, search_with=search_with)
    from ..static.checks import (
        static_outcome,  # (lazy: static.checks imports the machine)
    )

    result = merge_static(result, searched(static_outcome(protocol, machine.programs, deadline)))
    if options.engine == "auto" and symbolic is not None:
        # explicit search for the bounded check and counterexamples, then lift "safe for ITERS=N"
        result = symbolic.lift_result(result, protocol, options, assumptions)
    return check_residency(protocol, options, assumptions, result, machine.programs)
