"""The semantics of an mbarrier's lifecycle: init (SV105 count, SV403 live or by many threads) and
inval, each resetting the barrier's knowledge and observations; and what publishes an init to other CTAs,
`fence.mbarrier_init` (``fence_own_inits``), written once for the fence and for the reading that lets a relaxed
cluster arrive do the same (families/barriers.py, RELAXED_ARRIVE_PUBLISHES_INIT).

A mixin of ``Machine`` through MbarrierOps (mbarrier.py), which registers the handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from .. import rules
from ..core import (
    Violation,
)
from ..program import part_lanes
from ..state import (
    F_ASYNC,
    M_VALID,
    R_AKNOWN,
    R_CTA,
    R_FLAGS,
    R_KIND,
    R_KNOWN,
    R_OBJ,
    R_OWNER,
    R_PART,
    R_SLOT,
    R_SPACE,
    SPACE_INIT,
    SPACE_OBS,
    WRITE,
    Holders,
    clear_bits,
)
from .encoding import INIT

if TYPE_CHECKING:
    from ..program import Process


def fence_own_inits(records: tuple, holders: Holders, p: int, proc: Process, part: int) -> tuple:
    """`fence.mbarrier_init.release.cluster` by the lanes ``part`` of process p: the prior inits those lanes made
    become known on the async side of p's holders, which is what a relaxed cluster arrive carries to the CTAs that
    pass the cluster wait (state.release, ``relaxed``). PTX *membar/fence*: its "synchronizing effect ... only
    applies to the prior mbarrier.init operations executed by the same thread", so an init of lanes outside
    ``part`` is left as it is. Returns ``records`` itself when no record changes."""
    out = None
    mine = holders.proc_mask(p)
    for i, r in enumerate(records):
        if r[R_SPACE] == SPACE_INIT and r[R_OWNER] == p and r[R_KIND] == WRITE and not r[R_FLAGS] & F_ASYNC \
                and not part_lanes(proc, r[R_PART]) & ~part_lanes(proc, part):
            aknown = r[R_AKNOWN] | (r[R_KNOWN] & mine)
            if aknown != r[R_AKNOWN]:
                if out is None:
                    out = list(records)
                out[i] = (*r[:R_AKNOWN], aknown, r[R_KNOWN])
    return records if out is None else tuple(out)


def encode_fence_own_inits(enc: Any, w: Any, p: int, part: int) -> None:
    """``fence_own_inits`` over Z3 terms (the bmc encoding's records, families/encoding/): the fencing lanes' own
    inits become known on the async side of p's holders."""
    proc = enc.machine.procs[p]
    mine_init = enc._mask(r for r, rec in enumerate(enc.records)
                          if rec.space == INIT and rec.owner == p and rec.kind == 1 and not rec.is_async
                          and not part_lanes(proc, rec.part) & ~part_lanes(proc, part))
    if mine_init:
        mask = z3.BitVecVal(mine_init, enc.R)
        for h in (enc.leader(p), enc.lanes_holder(p)):
            w["A", h] = w["A", h] | (w["K", h] & mask)



class MbarrierLifecycleOps:
    """Explicit-state handlers of init and inval (a mixin of Machine, through MbarrierOps)."""

    def op_init(self, w, p, proc, op: ir.MbarInit, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        count = decl.count if op.count is None else self._eval(op.count, env, ctx)
        if not 1 <= count <= rules.MAX_COUNT:
            raise Violation("SV105", f"init count {count} is outside 1..2^20-1", op.span)
        elems = range(decl.size or 1) if op.bar.every else None
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in elems] if elems is not None else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        part = self._part(p, ins)
        # One pass over the records for all targets (`init B[*]` of thousands of barriers stays linear);
        # the same records as one pass per target: the new init records carry no barrier bits.
        mask = 0
        for m in targets:
            if w.mbars[m][M_VALID]:
                raise Violation("SV403", f"init of {self.mb_label(m)}: it is still live (inval it first)", op.span)
            self.storage_init(w, p, lanes, m, op.span)  # bytes still in use as data (families/storage.py)
            if ins.threads > 1:
                # Every thread writes the same fresh state into a barrier no one uses yet: its state stays
                # well defined, so the search goes on past the finding (docs/engines.md, "Findings that end
                # a path") and reports what comes after it too.
                w.soft.append(Violation("SV403", f"init of {self.mb_label(m)}: {ins.threads} threads init it at "
                                        "once (wrap the init in `first thread`)", op.span))
            mb = rules.mb_init(count)
            w.mbars[m] = (mb.valid, mb.k, mb.pend, mb.exp, mb.tx, 1, (), 0)
            mask |= self.holders.mb_cur(m) | self.holders.mb_last(m)
        inited = set(targets)
        w.records = clear_bits(w.records, mask)
        w.records = tuple(r for r in w.records
                          if not (r[R_SPACE] in (SPACE_INIT, SPACE_OBS) and r[R_CTA] == proc.cta
                                  and r[R_OBJ] in inited and (r[R_SPACE] == SPACE_OBS or r[R_SLOT] == 0)))
        w.records = (*w.records, *((SPACE_INIT, proc.cta, m, 0, WRITE, p, part, op.span.line, 0, 0, -1, 0, 0, lanes)
                                   for m in targets))
        return True

    def op_inval(self, w, p, proc, op: ir.MbarInval, ins, env, ctx, lanes) -> bool:
        decl = self.mb_decl[op.bar.name]
        targets = [self.mb_index[(proc.cta, op.bar.name, i)] for i in range(decl.size or 1)] if op.bar.every else \
            [self._mbar(w, p, op.bar, proc.cta, env, ctx)]
        for m in targets:
            self._check_barrier_usable(w, p, m, lanes, op.span, "inval")
            self.storage_inval(w, p, self._part(p, ins), lanes, m, op.span)  # (families/storage.py)
            mb = rules.mb_inval(self._rule_state(w.mbars[m]))
            w.mbars[m] = (mb.valid, *w.mbars[m][1:])
            w.records = tuple(r for r in w.records if r[:4] != (SPACE_INIT, proc.cta, m, 0))
        return True
