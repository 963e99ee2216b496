"""The semantics of operands of asynchronous operations that are not shared memory: the registers an
RS-form `wgmma.mma_async` reads (its A fragment; its accumulator as well).

A `regs NAME[N];` declaration names registers of every executing thread (ir.Buffer with space
"register"). A `wgmma.read` of them is part of the warpgroup's asynchronous MMA: it reads each thread's
registers until a `wgmma.wait_group` that retires its group. PTX ISA (wgmma.wait_group): "Accessing the
accumulator register or the input register containing the fragments of matrix A of a wgmma.mma_async
instruction without first performing a wgmma.wait_group instruction that waits on a wgmma-group including
that wgmma.mma_async instruction is undefined behavior." A `read`/`write` of the registers by their thread
before that is SV605 (docs/model.md, "Registers of an RS-form wgmma").

Registers are private to their thread: no other process can access them, so the model keeps their
records under one key of no CTA (REG_CTA) and tells the threads' registers apart by the record's owner.
The owner is what symmetry permutes, so swapping two warps maps their registers too. Only the wgmma's
asynchronous reads are recorded; the thread's own generic accesses are ordered by program order among
themselves and need no record. A record is dropped once its owner knows it complete (every later check
of it would pass), which keeps the state finite.

The bmc engine, the Promela export and the CUDA emitter do not model registers: they refuse a protocol
that declares `regs` (register_refusal).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ..core import Violation
from ..state import F_ASYNC, NUNITS, P_WGMMA, R_FLAGS, R_GRP, R_KNOWN, R_LINE, R_OWNER, SPACE_DATA, UNIT_WGMMA
from .async_agents import AsyncAgentOps
from .memory import MemoryOps

REG_CTA = -2  # the CTA field of register records: the registers of no CTA (globalmem.GLOBAL_CTA is -1)


def is_register(protocol: ir.Protocol, name: str) -> bool:
    """Is the buffer of this name a `regs` declaration?"""
    return protocol.buffer(name).space == "register"


def register_refusal(protocol: ir.Protocol, what: str) -> str | None:
    """The reason ``what`` (an engine, exporter or emitter) refuses a protocol that declares
    registers, or None."""
    names = [b.name for b in protocol.buffers if b.space == "register"]
    if not names:
        return None
    return (f"{what} does not model registers yet (`regs {', '.join(names)}`: the operands of RS-form wgmma): "
            "check this protocol with the explicit engine or --engine z3")


class RegisterOps:
    """Explicit-state handlers of registers read by an asynchronous wgmma (a mixin of Machine)."""

    def _reg_key(self, ref: ir.Ref, env, ctx) -> tuple[tuple, str]:
        buf, slot = self._slot(ref, env, ctx)  # type: ignore[attr-defined]
        label = ref.name + (f"[{slot}]" if self.protocol.buffers[buf].slots is not None else "")  # type: ignore[attr-defined]
        return (SPACE_DATA, REG_CTA, buf, slot), label

    def _reg_live(self, w, p: int, key: tuple) -> list[tuple]:
        """Process p's wgmma reads of these registers that its whole warp does not yet know complete."""
        whole = self._lane_masks[p][0]  # type: ignore[attr-defined]
        return [r for r in w.records if r[:4] == key and r[R_OWNER] == p and r[R_FLAGS] & F_ASYNC
                and (r[R_KNOWN] & whole) != whole]

    def _reg_prune(self, w, p: int, key: tuple) -> None:
        """Drop p's records of these registers that its whole warp knows complete."""
        whole = self._lane_masks[p][0]  # type: ignore[attr-defined]
        if any(r[:4] == key and r[R_OWNER] == p and (r[R_KNOWN] & whole) == whole for r in w.records):
            w.records = tuple(r for r in w.records
                              if not (r[:4] == key and r[R_OWNER] == p and (r[R_KNOWN] & whole) == whole))

    def reg_access(self, w, p, proc, op: ir.Access, ins, env, ctx, lanes) -> bool:
        """`read`/`write` of the executing threads' own registers: SV605 while a wgmma that reads them
        is not known complete to these lanes (their warp's `wgmma.wait` retiring its group, or a
        synchronization after another warp's)."""
        key, label = self._reg_key(op.buf, env, ctx)
        for r in self._reg_live(w, p, key):
            if (r[R_KNOWN] & lanes) != lanes:
                grp = r[R_GRP]
                group = f"wgmma-group {grp // NUNITS}" if grp >= 0 and grp % NUNITS == UNIT_WGMMA else "its wgmma-group"
                raise Violation(
                    "SV605", f"{op.kind} of registers `{label}` by {self.proc_label(p)} while the wgmma.mma_async "  # type: ignore[attr-defined]
                    f"issued at line {r[R_LINE]} still reads them: no wgmma.wait_group has retired {group} (PTX: "
                    "accessing the input register containing the fragments of matrix A of a wgmma.mma_async "
                    "without first performing a wgmma.wait_group that waits on its group is undefined behavior)",
                    op.span, related=((r[R_LINE], "the wgmma that reads the registers"),), procs=(p,))
        self._reg_prune(w, p, key)
        return True

    def reg_wgmma_read(self, w, p, proc, op: ir.WgmmaRead, ins, env, ctx, lanes) -> bool:
        """A wgmma's read of the executing threads' registers (an RS-form A fragment, or its
        accumulator): in the warp's open wgmma-group, complete at the wait that retires it. Two
        wgmmas reading the same registers are both reads: MMAs of one warpgroup may share their A
        fragment and accumulate into one accumulator without a wait between them."""
        key, _ = self._reg_key(op.buf, env, ctx)
        self._reg_prune(w, p, key)
        seq = w.procs[p][P_WGMMA]
        part = self._part(p, ins)  # type: ignore[attr-defined]
        self._add_read(w, p, part, lanes, key, op.span.line, F_ASYNC, grp=NUNITS * seq + UNIT_WGMMA)  # type: ignore[attr-defined]
        if self.wgmma_team[p]:  # type: ignore[attr-defined]
            self._mark_issue(w, p, lanes, seq)  # type: ignore[attr-defined]
        return True


def _access(machine, w, p, proc, op: ir.Access, ins, env, ctx, lanes) -> bool:
    if machine.protocol.buffer(op.buf.name).space == "register":
        return machine.reg_access(w, p, proc, op, ins, env, ctx, lanes)
    return MemoryOps.op_access(machine, w, p, proc, op, ins, env, ctx, lanes)


def _wgmma_read(machine, w, p, proc, op: ir.WgmmaRead, ins, env, ctx, lanes) -> bool:
    if machine.protocol.buffer(op.buf.name).space == "register":
        return machine.reg_wgmma_read(w, p, proc, op, ins, env, ctx, lanes)
    return AsyncAgentOps.op_wgmma_read(machine, w, p, proc, op, ins, env, ctx, lanes)


# Registered after memory.py's and async_agents.py's: an access or wgmma read of registers comes here,
# one of shared or global memory goes on to its family.
HANDLERS: dict[type, Callable] = {
    ir.Access: _access,
    ir.WgmmaRead: _wgmma_read,
}

__all__ = ["HANDLERS", "REG_CTA", "RegisterOps", "is_register", "register_refusal"]
