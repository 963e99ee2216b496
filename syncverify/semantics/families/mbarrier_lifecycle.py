"""The semantics of an mbarrier's lifecycle: init (SV105 count, SV403 live or by many threads) and
inval, each resetting the barrier's knowledge and observations.

A mixin of ``Machine`` through MbarrierOps (mbarrier.py), which registers the handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from .. import rules
from ..core import (
    Violation,
)
from ..state import (
    M_VALID,
    R_CTA,
    R_OBJ,
    R_SLOT,
    R_SPACE,
    SPACE_INIT,
    SPACE_OBS,
    WRITE,
    clear_bits,
)

if TYPE_CHECKING:
    pass



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
