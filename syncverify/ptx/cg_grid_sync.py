"""`cooperative_groups::this_grid().sync()` as CUDA 13's headers compile it, read as the language's `grid.sync`.

The grid barrier (cooperative_groups/details/sync.h, `sync_grids`, inlined from cooperative_groups.h) compiles
to one shape (nvcc 13.0, sm_90a):

    setp.ne.s64 %p, %W, 0;  @%p bra L2;  trap;          // the grid workspace: null without a cooperative launch
  L2:
    barrier.sync 0;                                       // __syncthreads()
    ... setp (thread (0,0,0)) ...  @%q bra L3;  bra.uni L5;
  L3:
    ... nb = (block (0,0,0)) ? 0x80000001 - gridsize : 1 ...
    atom.add.release.gpu.u32 %old, [%W + 4], %nb;         // arrive: the last arrival flips bit 31
  L4:
    ld.acquire.gpu.u32 %now, [%W + 4];  xor ...;  setp.gt.s32 ...;  @%s bra L4;   // until bit 31 flipped
  L5:
    barrier.sync 0;                                       // __syncthreads()

with %W, the workspace address, built from `%envreg1`/`%envreg2` (the driver's grid workspace of a cooperative
launch). Read instruction by instruction, the arrival word is at an address no parameter gives, its value is a
function of the grid size that wraps at bit 31 and the spin compares a xor of two values: the whole-grid
extraction could not write it as flags (`wait.until F CMP V` has no xor, and a flag's values stop at 2^31-1).
What it implements is exactly the language's `grid.sync` (docs/model.md, "Global memory"): every thread of
the CTA arrives at the first barrier, thread 0's release RMW carries what they did (cumulativity through the
barrier), the spin's acquire load sees every CTA's arrival, and the second barrier hands that to every
thread; no thread leaves before every thread of the grid has arrived. And it is defined only for a cooperative
launch, which the language checks (SV804 without `launch cooperative;`).

So the region is rewritten before execution: its control flow (the trap's branch, the thread-0 branch, the
spin's back edge), the trap, the arrival atom, the spin's load and the first barrier become no-ops, the second
barrier becomes the pseudo-instruction `grid.sync`, which the executor turns into the statement for every
warp. The register arithmetic in between stays: it only feeds what was removed, or (hoisted by the compiler)
the code after it. A shape that differs in any way is left alone, and its instructions are refused at their
lines as before (an atomic at an unknown address, a branch on a loaded value).
"""

from __future__ import annotations

from dataclasses import replace

from .parse import Addr, Function, Imm, Instr, Name

GRID_SYNC = "grid.sync"  # the pseudo-instruction of a recognised grid barrier (execute.py)
NOP = "nop"  # a removed instruction of the region (the executor does nothing for an instruction without operands)
_PURE = ("mov", "add", "sub", "mul", "neg", "selp", "setp", "xor", "and", "or", "not", "cvt", "bfi", "shl", "shr",
         "mad", "cvta")


def _defs(body: tuple[Instr, ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, ins in enumerate(body):
        if ins.operands and isinstance(ins.operands[0], Name) and ins.base not in ("st", "bra", "red") \
                and not ins.base.startswith(("barrier", "bar")):
            out.setdefault(ins.operands[0].name, []).append(i)
    return out


def _from_envreg(body: tuple[Instr, ...], defs: dict[str, list[int]], reg: str) -> bool:
    """Is ``reg`` computed (through single definitions of pure instructions) from %envreg1 and %envreg2 only?"""
    seen: set[str] = set()
    todo, specials = [reg], set()
    while todo:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        if r.startswith("%envreg"):
            specials.add(r)
            continue
        where = defs.get(r, [])
        if len(where) != 1:
            return False
        ins = body[where[0]]
        if ins.base not in _PURE:
            return False
        for op in ins.operands[1:]:
            if isinstance(op, Name):
                todo.append(op.name)
            elif not isinstance(op, Imm):
                return False
    return specials == {"%envreg1", "%envreg2"}


def _label_at(fn: Function) -> dict[int, str]:
    return {i: name for name, i in fn.labels.items()}


def _is_bar0(ins: Instr) -> bool:
    return ins.opcode in ("barrier.sync", "bar.sync", "barrier.sync.aligned") and ins.guard is None \
        and len(ins.operands) == 1 and isinstance(ins.operands[0], Imm) and ins.operands[0].value == 0


def _region(fn: Function, body: tuple[Instr, ...], defs: dict[str, list[int]], atom: int) -> tuple[int, int] | None:
    """(first, last) instruction of the grid barrier around the arrival atom at ``atom``, or None."""
    ins = body[atom]
    addr = ins.operands[1] if len(ins.operands) == 3 else None
    if not isinstance(addr, Addr) or addr.base is None or addr.offset != 0:
        return None
    where = defs.get(addr.base, [])
    if len(where) != 1:
        return None
    add = body[where[0]]
    if add.base != "add" or not isinstance(add.operands[1], Name) or add.operands[2] != Imm(4):
        return None
    ws = add.operands[1].name
    if not _from_envreg(body, defs, ws):
        return None
    # the spin: ld.acquire of the same word, a xor, a setp, a guarded branch back to the load
    ld = atom + 1
    if ld + 3 >= len(body) or body[ld].opcode != "ld.acquire.gpu.u32" or body[ld].operands[1] != addr:
        return None
    back = next((k for k in range(ld + 1, min(ld + 6, len(body))) if body[k].base == "bra"), None)
    if back is None or body[back].guard is None or fn.labels.get(getattr(body[back].operands[-1], "name", "")) != ld:
        return None
    end = next((k for k in range(back + 1, min(back + 8, len(body))) if body[k].base in ("bar", "barrier")), None)
    if end is None or not _is_bar0(body[end]) or any(body[k].base not in _PURE for k in range(back + 1, end)):
        return None
    # backwards: the thread-0 branch after the first barrier, the trap's check of the workspace before it
    first_bar = next((k for k in range(atom - 1, max(atom - 40, -1), -1) if body[k].base in ("bar", "barrier")),
                     None)
    if first_bar is None or not _is_bar0(body[first_bar]):
        return None
    check = first_bar - 3
    if check < 0 or body[check].opcode != "setp.ne.s64" or body[check].operands[1] != Name(ws) \
            or body[check + 1].base != "bra" or body[check + 2].opcode != "trap":
        return None
    for k in range(first_bar + 1, atom):
        if body[k].base not in (*_PURE, "bra"):
            return None
    # no branch from outside into the region, none from inside out of it but to its end
    labels = _label_at(fn)
    inside = {labels[k] for k in range(check + 1, end + 1) if k in labels}
    for k, other in enumerate(body):
        if other.base != "bra":
            continue
        target = getattr(other.operands[-1], "name", "")
        if (check <= k <= end) != (target in inside) and not (check <= k <= end and fn.labels.get(target) == end):
            return None
    return check, end


def rewrite_grid_syncs(fn: Function) -> Function:
    """``fn`` with each recognised `this_grid().sync()` region rewritten (module docstring); unchanged otherwise."""
    if fn.body is None:
        return fn
    body = fn.body
    defs = _defs(body)
    out = list(body)
    changed = False
    for i, ins in enumerate(body):
        if ins.opcode != "atom.add.release.gpu.u32" or ins.guard is not None:
            continue
        region = _region(fn, body, defs, i)
        if region is None:
            continue
        first, last = region
        for k in range(first, last + 1):
            cur = body[k]
            if k == last:
                out[k] = replace(cur, opcode=GRID_SYNC, operands=(), guard=None, guard_neg=False, src=ins.src)
            elif cur.base in ("bra", "trap", "atom", "ld", "bar", "barrier"):
                out[k] = replace(cur, opcode=NOP, operands=(), guard=None, guard_neg=False)
        changed = True
    return replace(fn, body=tuple(out)) if changed else fn
