"""The Promela of lifecycle: a process's exit, mirroring semantics/families/lifecycle.py. Exited
threads release all-thread generations of named barriers and the cluster barrier; the last warp of
a CTA must leave no async read unretired and no copy in flight (SV404).

A mixin of the exporter: each proctype's exit inline is written from it.
"""

from __future__ import annotations

from .base import ALL_THREADS


class LifecycleExport:
    """A process's exit (a mixin of the exporter)."""

    def exit_code(self, p: int) -> list[str]:
        """machine._exit: exited threads release all-thread generations and the cluster barrier; the
        last warp of a CTA must leave no async read unretired and no copy in flight (SV404)."""
        proc = self.machine.procs[p]
        cta = proc.cta
        L = [f"alive_procs[{cta}] = alive_procs[{cta}] - 1; alive_thr[{cta}] = alive_thr[{cta}] - {proc.nthreads}; "
             f"alive_all = alive_all - {proc.nthreads};"]
        for i in range(self.nids):
            L.append(f"_m = {cta * self.nids + i}; if :: nbarr[_m] > 0 && nbcnt[_m] == {ALL_THREADS} -> "
                     f"nb_try_complete_{cta}() :: else -> skip fi;")
        L.append("cb_try_complete();")
        L.append(f"if :: alive_procs[{cta}] == 0 ->")
        if self.track_grp:
            L.append(f"   c_code {{ _r = unretired({cta * self.spc}, {(cta + 1) * self.spc}); }}; "
                     "assert(_r == 0 || SV404);   /* an async read never retired */")
        L.append("   _x = 0; do :: _x < NKEYS -> assert(!ag_live[_x] || (_x / "
                 f"{self.spc} != {cta} && ag_m[_x] / {self.mbpc} != {cta}) || SV404); _x++ :: else -> break od")
        L.append(":: else -> skip fi")
        return L
