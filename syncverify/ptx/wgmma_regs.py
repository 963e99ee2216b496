"""The A-fragment registers of RS-form wgmma in extraction: which registers each `wgmma.mma_async` with A
in registers reads, and every later instruction that writes one of them.

PTX ISA, `wgmma.wait_group`: "Accessing the accumulator register or the input register containing the
fragments of matrix A of a wgmma.mma_async instruction without first performing a wgmma.wait_group
instruction that waits on a wgmma-group including that wgmma.mma_async instruction is undefined behavior."
In PTX the A registers are known by name (`{%r1, %r2, %r3, %r4}`): each distinct set of them becomes a
`regs` region of the spec (`rs_a0`, `rs_a1`, …), the wgmma a `wgmma.read` of it, and an instruction whose
destination is one of its registers, once a wgmma has read them, a `write` of it at that instruction's line
(semantics/families/async_operands.py decides SV605 from the groups and waits). An instruction the executor
does not run because its guard or branch is not known may still write the register: it is written as a
write too (WarpState.havoc), so a write is never missed.

Only the A fragment is tracked. The accumulator registers are written by every wgmma into them, which the
language's `wgmma.read` of registers does not model as a write; an epilogue reading them before the wait is
not reported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .launch import Event
from .parse import Instr, Name, Pair, Vec

if TYPE_CHECKING:
    from .warp import WarpState

# instructions whose first operand is not a register they write (or, wgmma, one this module does not track)
_NO_DEST = frozenset({"st", "bra", "red", "bar", "barrier", "mbarrier", "fence", "membar", "wgmma", "cp",
                      "prefetch", "stmatrix"})


def dest_names(ins: Instr) -> list[str]:
    """The registers ``ins`` writes through its first operand (as WarpState.havoc reads it)."""
    if not ins.operands or ins.base in _NO_DEST:
        return []
    dst = ins.operands[0]
    if isinstance(dst, Name):
        return [dst.name]
    if isinstance(dst, Pair):
        return [dst.first, dst.second]
    if isinstance(dst, Vec):
        return [x.name for x in dst.items if isinstance(x, Name)]
    return []


def region_of(run: WarpState, a: Vec) -> str:
    """The `regs` region of this A operand's registers, named when first seen (per warp: every warp runs the
    same code, so the names agree)."""
    names = tuple(x.name for x in a.items if isinstance(x, Name))
    name = run.rs_regions.get(names)
    if name is None:
        name = run.rs_regions[names] = f"rs_a{len(run.rs_regions)}"
        for reg in names:
            run.rs_owner.setdefault(reg, []).append(name)
    return name


def note_rs_read(run: WarpState, ins: Instr, lanes: int, a: Vec) -> None:
    """An RS-form wgmma's read of its A registers: `wgmma.read rs_aN;` in the warp's open group."""
    run.events.append(Event("rs_read", (region_of(run, a),), lanes, ins))


def note_writes(run: WarpState, ins: Instr, lanes: int) -> None:
    """A `write rs_aN;` for each region one of whose registers ``ins`` writes (executed or may-write)."""
    if not run.rs_owner or not lanes:
        return
    hit = dict.fromkeys(r for reg in dest_names(ins) for r in run.rs_owner.get(reg, ()))
    for region in hit:
        run.events.append(Event("rs_write", (region,), lanes, ins))


def declared(events) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    """The `regs` regions the events name, in order of first use."""
    return tuple(dict.fromkeys(str(e.args[0]) for e in events if e.kind in ("rs_read", "rs_write")))
