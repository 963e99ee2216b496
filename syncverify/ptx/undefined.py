"""Undefined behavior met while extracting a kernel: a finding at the instruction, not a refusal.

Some instructions are undefined for an execution PTX rules out, and the
executor sees the execution: a warp-collective `.sync` instruction whose member
mask leaves out a lane that executes it ("The behavior is undefined if the
executing thread is not in membermask", PTX ISA for `elect.sync`, `shfl.sync`,
`vote.sync`, `match.sync`, `redux.sync` and `bar.warp.sync`). No protocol
describes what such a kernel does, so extraction stops there, like a refusal,
but says what it found: `check KERNEL` reports it as an error finding (SV207)
at the CUDA line, on every engine (they all start from the extraction), and
`extract` prints it and writes no protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..diagnostics import Diagnostic, Related, Span, make
from ..result import CheckResult, Verdict
from .launch import Refusal, lanes_of
from .parse import Instr, Operand

if TYPE_CHECKING:
    from .warp import WarpState


class Undefined(Refusal):
    """The kernel's behavior is undefined at `instr` (PTX says so); `code` is the finding's code."""

    def __init__(self, run: WarpState, instr: Instr, code: str, why: str):
        base = run.refuse(instr, why)
        self.who = f"warp {run.warp} of CTA {run.rank}"
        super().__init__(base.path, base.line, base.column, f"{code} undefined behavior ({self.who}): {why}",
                         base.source_line, base.note)
        self.instr, self.code, self.why = instr, code, why
        self.module = run.mod  # for the line in the user's own code (frames.user_frame)

    def diagnostic(self) -> Diagnostic:
        """The finding at the line of the user's own code the instruction comes from (frames.user_frame: the
        call of an inline-asm helper, not its `asm` statement), the chain's other frames and the PTX line as
        notes; at the PTX line without line info."""
        from .frames import user_frame

        ins = self.instr
        ptx = Span(self.path, ins.line, ins.column, ins.line, ins.column + 1)
        related = [Related(ptx, "PTX instruction")]
        span = ptx
        where = user_frame(ins, self.module)
        if where is not None:
            primary, others = where
            span = Span(primary.file, primary.line, primary.column, primary.line, primary.column + 1)
            related = [Related(Span(f.file, f.line, f.column, f.line, f.column + 1), f.why) for f in others] + related
        return make(self.code, f"{self.why} ({self.who})", span, related=tuple(related))


def finding_result(path: str, ub: Undefined, kernel: str | None = None) -> CheckResult:
    """`check KERNEL`'s answer when extraction met undefined behavior: a violation with that one finding."""
    return CheckResult(path=path, protocol=kernel, verdict=Verdict.VIOLATION,
                       bound="undefined behavior at the launch given", diagnostics=(ub.diagnostic(),))


def member_mask(run: WarpState, ins: Instr, lanes: int, op: Operand) -> int:
    """The member mask of a warp-collective `.sync` instruction executed by `lanes`.

    A mask that is not known is refused, never assumed full: whether it leaves out an executing lane
    (undefined) is exactly what is not known. A mask that leaves out an executing lane is SV207. A mask
    that names lanes that do not execute this instruction is refused: under independent thread
    scheduling those lanes must execute a matching instruction elsewhere, which is not modelled.
    """
    vals = {run.read(op, lane) for lane in lanes_of(lanes)}
    if len(vals) != 1 or not isinstance(next(iter(vals)), int):
        raise run.refuse(ins, f"the member mask of `{ins.opcode}` is not known (or differs between lanes); a mask "
                         "that leaves out an executing lane is undefined behavior, so it is not assumed full: bind "
                         "what computes it, or write the mask as a constant")
    m = next(iter(vals)) & 0xFFFFFFFF
    outside = lanes & ~m
    if outside:
        raise Undefined(run, ins, "SV207", f"`{ins.opcode}` with member mask {m:#010x} is executed by lanes "
                        f"{lanes:#010x}; lanes {outside:#010x} are not in the mask (PTX: the behavior is undefined "
                        "if the executing thread is not in membermask)")
    m &= (1 << run.nlanes) - 1
    if m & lanes != m:
        raise run.refuse(ins, f"a warp-collective instruction with member mask {m:#x} is executed by lanes "
                         f"{lanes:#x} only")
    return m
