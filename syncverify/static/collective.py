"""Who must execute a collective operation, and what the CTA's tensor memory adds up to.

Two rules of the PTX text that no single step breaks, so they are checked on the compiled
programs instead of during the search:

* SV206 — `.sync.aligned` collectives executed by too few threads. wgmma's "mandatory
  .sync … .aligned qualifier … all threads in the warpgroup must execute the same wgmma
  instruction" (ptx-semantics.md §6): every warp of a warpgroup must execute each wgmma
  operation. tcgen05.alloc/dealloc are warp-collective (`.sync.aligned`, "UB … if any thread
  of the warp has exited", §7): a process that is only part of a warp cannot run them.
* SV406 — tensor memory left allocated at exit (or freed beyond what was allocated). "All of
  the Tensor Memory that was allocated … must be explicitly deallocated … before the kernel
  exits" (§7).

Control flow depends only on loop variables and on who executes, so each process runs one fixed
sequence of operations (the reduction's walk over `Machine.future` relies on the same fact). The column totals are
therefore exact for every execution that runs to the end; the search decides the rest (an
allocation that finds no room blocks: Machine.op_tmem). They are added up by tmem_walk, which
summarises loops instead of stepping every trip, and says so (WalkIncomplete) when it cannot.
"""

from __future__ import annotations

from .. import ir
from ..diagnostics import Diagnostic, make
from ..semantics.machine import TMEM_COLUMNS, Machine
from ..semantics.program import OP, Program, is_wgmma
from .tmem_walk import WalkIncomplete, tmem_totals


def collective_findings(protocol: ir.Protocol, programs: list[Program]) -> list[Diagnostic]:
    """SV206 for every wgmma operation some warpgroup runs with fewer than its four warps, and every
    wgmma or warp-collective tcgen05 operation (alloc, dealloc, ld, st, wait) that part of a warp runs."""
    out: list[Diagnostic] = []
    seen: dict[int, ir.Op] = {}
    runs: dict[int, dict[int, set[int]]] = {}  # id(op) -> cta -> warps whose program has it
    for prog in programs:
        proc = prog.process
        for ins in prog.code:
            op = ins.op
            if ins.kind != OP or not (is_wgmma(op) or isinstance(op, ir.TmemAlloc | ir.TmemAccess | ir.TcWait)):
                continue
            if not proc.whole_warp or ins.leader_only or ins.lanes != proc.lane_mask:
                if id(op) not in seen:
                    seen[id(op)] = op
                    what = "wgmma is warpgroup-collective" if is_wgmma(op) else \
                        "tcgen05.alloc/dealloc/ld/st/wait are warp-collective (.sync.aligned)"
                    out.append(make("SV206", f"executed by {proc.label()}, which is only part of a warp; {what}: "
                                    "every thread of the warp must execute it", op.span))
                continue
            if is_wgmma(op):
                seen.setdefault(id(op), op)
                runs.setdefault(id(op), {}).setdefault(proc.cta, set()).add(proc.warp)
    reported = {d.span for d in out}
    for key, by_cta in runs.items():
        op = seen[key]
        for cta, warps in sorted(by_cta.items()):
            missing = sorted({4 * (w // 4) + i for w in warps for i in range(4)} - warps)
            if missing and op.span not in reported:
                reported.add(op.span)
                where = f" of CTA {cta}" if protocol.cluster > 1 else ""
                out.append(make("SV206", f"executed by warps {sorted(warps)}{where} but not by warps {missing} of "
                                "the same warpgroup; wgmma is .sync.aligned over the warpgroup: all four warps must "
                                "execute it (PTX: undefined otherwise)", op.span))
    return out


def _first_in_program(machine: Machine, cta: int) -> ir.Op:
    """The CTA's first alloc or dealloc in program order: where SV406 is reported, by the walk here
    and by the search's exit check (Machine._tmem_exit) alike, so the two are one finding."""
    return next(ins.op for q in machine.procs_of_cta[cta] for ins in machine.programs[q].code
                if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc))


def tmem_findings(protocol: ir.Protocol, programs: list[Program], deadline: float | None = None) -> list[Diagnostic]:
    """SV406: a CTA whose executions allocate more tensor memory than they deallocate, or the reverse.
    Raises WalkIncomplete when the totals cannot be added up within the walk's budgets."""
    if not any(isinstance(ins.op, ir.TmemAlloc) for prog in programs for ins in prog.code):
        return []
    out = []
    machine = Machine(protocol)
    for cta, (alloc, free, _) in sorted(tmem_totals(machine, deadline=deadline).items()):
        where = f"CTA {cta}" if protocol.cluster > 1 else "the CTA"
        first = _first_in_program(machine, cta)
        if alloc > free:
            out.append(make("SV406", f"{where} allocates {alloc} tensor-memory columns but deallocates {free}: "
                            f"{alloc - free} are still allocated when it exits (PTX: all Tensor Memory allocated "
                            "must be deallocated before the kernel exits)", first.span))
        elif free > alloc:
            out.append(make("SV406", f"{where} deallocates {free} tensor-memory columns but allocates only "
                            f"{alloc}", first.span))
    return out


def tmem_may_block(machine: Machine) -> str | None:
    """Why an allocation of the protocol may find no room (a CTA's allocations add up to more than
    512 columns), for the engines that do not model the columns; None when none can. Totals the
    walk cannot add up within its budget are a reason too: nothing is known about them."""
    try:
        totals = tmem_totals(machine)
    except WalkIncomplete as why:
        return f"the tensor-memory columns are not added up: {why}"
    for cta, (alloc, _, first) in sorted(totals.items()):
        if alloc > TMEM_COLUMNS:
            return (f"tensor-memory allocations of CTA {cta} add up to {alloc} columns (more than {TMEM_COLUMNS}): "
                    f"an allocation may block until a deallocation frees room, which is not encoded "
                    f"(line {first.span.line})")
    return None
