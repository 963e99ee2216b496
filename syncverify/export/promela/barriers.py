"""The Promela of named barriers (`bar.sync`, `bar.arrive`, `syncthreads`), the cluster barrier and
`syncwarp`, mirroring semantics/families/barriers.py: a named barrier is (count, arrived,
generation) per CTA and id with the set of warps parked on it; the cluster barrier is
(generation, arrived).

The steps form a mixin of the exporter; ``FACTS`` and ``STEPS`` register its operations by type.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from .base import ALL_THREADS, BITS, _Facts


class BarrierExport:
    """The run's reading and the steps of this family (a mixin of the exporter)."""

    def facts_named(self, facts: _Facts, p: int, proc, op: ir.BarSync | ir.BarArrive, ins,
                    env: dict, line: int, part: int) -> None:
        bar_id = self._val(op.bar_id, p, env)
        if not 0 <= bar_id <= 15:
            raise self._refuse("SV106", line, f"named-barrier id {bar_id} outside 0..15")
        if op.count is not None:
            count = self._val(op.count, p, env)
            if count <= 0 or count % 32 or count > self.protocol.threads:
                raise self._refuse("SV106", line, f"named-barrier count {count}")
        facts.nb_ids.add(bar_id)

    def cb_try_complete_inline(self) -> list[str]:
        """The inline that completes the cluster barrier's generation (machine._cb_try_complete)."""
        return [
            "/* machine._cb_try_complete: every thread not exited has arrived (rules.cb_completes) */",
            "inline cb_try_complete() {",
            f"  if :: carr > 0 && carr >= alive_all -> _c = {self.cl_cur}; _n = {self.cl_last}; "
            "c_code { k_shift(_c, _n); }; cgen = cgen + 1; carr = 0",
            "  :: else -> skip fi",
            "}",
        ]

    def nb_try_complete(self, cta: int) -> list[str]:
        """machine._nb_try_complete for the named-barrier slot _m of this CTA: at the count (or every
        thread not exited, for `syncthreads`), the parked warps acquire the generation's releases,
        a new generation opens, and the generation's holder is emptied."""
        L = [f"inline nb_try_complete_{cta}() {{",
             f"  if :: nbarr[_m] > 0 && nbarr[_m] >= (nbcnt[_m] == {ALL_THREADS} -> alive_thr[{cta}] : nbcnt[_m]) ->",
             f"     _c = {self.nb_base} + _m;"]
        for q in self.live:
            if self.machine.procs[q].cta != cta:
                continue
            h = self.h_lead[q]
            bit = 1 << (q - cta * self.ppc)
            L.append(f"     if :: (nbw[_m] & {bit}) != 0 -> c_code {{ k_acq(_c, {h // BITS}, {3 << (h % BITS)}); }} "
                     ":: else -> skip fi;")
        L += ["     nbgen[_m] = nbgen[_m] + 1; nbarr[_m] = 0; nbcnt[_m] = -1; nbw[_m] = 0;   /* rules.nb_complete */",
              "     c_code { k_clear(_c); }",
              "  :: else -> skip",
              "  fi",
              "}"]
        return L

    def step_named(self, p: int, proc, op: ir.BarSync | ir.BarArrive, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        E = lambda e: self.expr(e, p)  # noqa: E731
        nbi = f"({cta * self.nids} + ({E(op.bar_id)}) - {self.id_min})"
        count = str(ALL_THREADS) if op.count is None else E(op.count)
        b.append(f"_m = {nbi}; _n = {count};")
        if isinstance(op, ir.BarSync):
            b.append("tok_i = _m; tok_g = nbgen[_m]; nbw[_m] = nbw[_m] | lpb;   /* park at the wait */")
        b.append("assert(nbarr[_m] == 0 || nbcnt[_m] == _n || SV202);   /* one count per generation */")
        b.append(f"_a = lw; _b = {lanes}; _c = {self.nb_base} + _m; c_code {{ k_rel(_a, _b, _c); }};")
        b.append(f"if :: nbarr[_m] == 0 -> nbcnt[_m] = _n :: else -> skip fi; nbarr[_m] = nbarr[_m] + "
                 f"{proc.nthreads};   /* rules.nb_arrive */")
        b.append(f"nb_try_complete_{cta}();")
        return "true"

    def step_cluster_arrive(self, p: int, proc, op: ir.ClusterArrive, ins, lanes: str, part: int, b: list[str]) -> str:
        b.append("assert(cltok < 0 || cgen > cltok || SV205);   /* rules.cb_arrives_twice */")
        fn = "k_rel_relaxed" if op.relaxed else "k_rel"
        b.append(f"_a = lw; _b = {lanes}; _c = {self.cl_cur}; c_code {{ {fn}(_a, _b, _c); }};")
        b.append(f"cltok = cgen; carr = carr + {proc.nthreads};   /* rules.cb_arrive */")
        b.append("cb_try_complete();")
        return "true"

    def step_cluster_wait(self, p: int, proc, op: ir.ClusterWait, ins, lanes: str, part: int, b: list[str]) -> str:
        guard = "cltok >= 0 && cgen > cltok"
        b.append(f"_a = lw; _b = {lanes}; _c = {self.cl_last}; c_code {{ k_acq(_c, _a, _b); }}; cltok = -1;")
        return guard

    def step_syncwarp(self, p: int, proc, op: ir.Syncwarp, ins, lanes: str, part: int, b: list[str]) -> str:
        b.append("_a = lw; _b = lb | wb; _c = hl; c_code { k_acq(_c, _a, _b); k_acq(_c + 1, _a, _b); "
                 "k_warpsync({me}, _a, _b); };")
        return "true"


FACTS: dict[type, Callable] = {
    ir.BarSync: BarrierExport.facts_named,
    ir.BarArrive: BarrierExport.facts_named,
}

STEPS: dict[type, Callable] = {
    ir.BarSync: BarrierExport.step_named,
    ir.BarArrive: BarrierExport.step_named,
    ir.ClusterArrive: BarrierExport.step_cluster_arrive,
    ir.ClusterWait: BarrierExport.step_cluster_wait,
    ir.Syncwarp: BarrierExport.step_syncwarp,
}
