"""The Promela of tcgen05 (Blackwell), mirroring semantics/families/tcgen05.py as far as the model
goes: tensor-memory allocation and deallocation, whose `cta_group 2` form is a rendezvous of the
CTA pair ((arrived CTAs, generation) per pair). `tcgen05.commit`, the tensor-memory accesses, the
tcgen05 fences and 2-SM copies have no Promela counterpart yet: the run refuses them.

The steps form a mixin of the exporter; ``FACTS`` and ``STEPS`` register its operations by type.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from .base import ExportError, _Facts


class Tcgen05Export:
    """The run's reading and the steps of this family (a mixin of the exporter)."""

    def facts_tmem(self, facts: _Facts, p: int, proc, op: ir.TmemAlloc, ins, env: dict, line: int, part: int) -> None:
        if op.cta_group == 2:
            if proc.cta ^ 1 >= self.ncta:
                raise self._refuse("SV405", line, "cta_group 2 needs the peer CTA (rank ^ 1) in the cluster")
            facts.tmem_pairs = True

    def facts_umma_commit(self, facts: _Facts, p: int, proc, op: ir.UmmaCommit, ins,
                          env: dict, line: int, part: int) -> None:
        raise ExportError(f"line {line}: `tcgen05.commit` (`umma.commit`) is not exported (its in-order "
                          "delivery assumption has no Promela counterpart yet); check this protocol with "
                          "`syncverify check`")

    def facts_tcgen05(self, facts: _Facts, p: int, proc, op: ir.TcMma | ir.TmemAccess | ir.TcWait | ir.TcFence, ins,
                      env: dict, line: int, part: int) -> None:
        raise ExportError(f"line {line}: `{ir.blackwell_op_name(op)}` is not exported (tensor-memory accesses, the "
                          "tcgen05 fences and 2-SM copies have no Promela counterpart yet); check this protocol "
                          "with `syncverify check`")

    def step_tmem(self, p: int, proc, op: ir.TmemAlloc, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        guard = "true"
        if op.cta_group == 2:
            idx = (cta // 2) * 2 + int(op.dealloc)
            peer = cta ^ 1
            guard = f"(tok_g < 0 || tm_gen[{idx}] > tok_g)"
            b.append(f"if :: tok_g < 0 ->   /* join the rendezvous of CTA pair {idx // 2} */")
            if not op.dealloc:
                b.append(f"   assert((skn[{peer}].w[lw] & {lanes}) == {lanes} || SV402);   /* peer CTA launched */")
            b.append(f"   _x = tm_arr[{idx}] | {1 << (cta & 1)};")
            b.append(f"   if :: _x == 3 -> tm_arr[{idx}] = 0; tm_gen[{idx}] = tm_gen[{idx}] + 1")
            b.append(f"      :: else -> tm_arr[{idx}] = _x; tok_g = tm_gen[{idx}]; stay = 1 fi")
            b.append(":: else -> tok_g = -1 fi;")
        return guard


FACTS: dict[type, Callable] = {
    ir.TmemAlloc: Tcgen05Export.facts_tmem,
    ir.UmmaCommit: Tcgen05Export.facts_umma_commit,
    **{t: Tcgen05Export.facts_tcgen05 for t in ir.TCGEN05_OPS},
}

STEPS: dict[type, Callable] = {
    ir.TmemAlloc: Tcgen05Export.step_tmem,
}
