"""The semantics of lifecycle: a process's exit, whether a CTA has exited, and the checks on a peer CTA being alive.

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type (see Machine._exec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from .. import rules
from ..core import (
    Violation,
    _Work,
)
from ..program import END
from ..state import (
    F_RETIRED,
    NUNITS,
    P_PC,
    R_CTA,
    R_FLAGS,
    R_GRP,
    R_KNOWN,
    R_LINE,
    R_SPACE,
    SPACE_DATA,
    UNIT_BULK,
    UNIT_CPASYNC,
    UNIT_WGMMA,
    State,
)

if TYPE_CHECKING:
    from .encoding.effects import Work


class LifecycleOps:
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _target_cta(self, w: _Work, p: int, remote: ir.Expr | None, env, ctx, span) -> int:
        if remote is None:
            return self.procs[p].cta
        cta = self._eval(remote, env, ctx)
        if not 0 <= cta < self.ncta:
            raise Violation("SV405", f"remote operation targets CTA rank {cta}, outside the cluster "
                            f"(ranks 0..{self.ncta - 1})", span)
        return cta

    def _cta_exited(self, w: _Work | State, cta: int, ending: int = -1) -> bool:
        """Has every process of CTA cta ended (process ``ending`` counted as ended)?"""
        procs, programs = w.procs, self.programs
        for q in self.procs_of_cta[cta]:
            if q != ending and programs[q].code[procs[q][P_PC]].kind != END:
                return False
        return True

    @staticmethod
    def _exit_may_complete(nb: tuple) -> bool:
        """May an exit complete named barrier ``nb``'s generation: one of all the CTA's threads (no
        explicit count) with arrivals (_exit)?"""
        return bool(nb.arrived) and nb.count is None

    def exit_is_silent(self, state: State, p: int) -> bool:
        """Would process p's exit, were p to end from ``state`` with nothing else changed, do nothing
        but end it? Where no generation of its CTA's named barriers may complete (_exit_may_complete),
        the cluster barrier has no arrivals (_cb_try_complete then returns at once) and another
        process of its CTA still runs (the CTA's exit checks are not reached), _exit reports nothing
        and moves no other process. Asked by MbarrierOps.mbar_arrival_findings for an arrive that
        ends its process."""
        cta = self.procs[p].cta
        if any(map(self._exit_may_complete, state.named[cta * 16:cta * 16 + 16])):
            return False
        return not rules.ClusterBar(*state.cluster).arrived and not self._cta_exited(state, cta, ending=p)

    def _check_peer_alive(self, w: _Work, p: int, cta: int, span, what: str) -> None:
        if cta != self.procs[p].cta and self._cta_exited(w, cta):
            raise Violation("SV404", f"{what} targets CTA {cta}, which may already have exited "
                            "(nothing makes it wait for this access; end with a cluster barrier)", span)

    def _exit(self, w: _Work, p: int) -> None:
        """A process ran off the end. Only bar/barrier waits are released by exited threads
        (§1.6): a `syncthreads` generation may now be complete, and so may the cluster barrier."""
        cta = self.procs[p].cta
        for bar_id in range(16):
            # UNSPECIFIED for explicit counts: we only re-evaluate all-thread generations, so a
            # `bar.sync id, n` that waits for exited warps stays blocked (reported as a deadlock).
            if self._exit_may_complete(w.named[cta * 16 + bar_id]):
                self._nb_try_complete(w, cta, bar_id)
        self._cb_try_complete(w)
        if self._cta_exited(w, cta):
            self._tc_exit(w, cta)  # (families/tcgen05.py)
            self._tmem_exit(w, cta)  # (families/async_agents.py)
            for r in w.records:
                # (an open cp.async write that a cp.async.mbarrier.arrive released has completed:
                # before that release no one knows it; a retired warpgroup wgmma read has completed)
                if r[R_SPACE] == SPACE_DATA and r[R_CTA] == cta and r[R_GRP] >= 0 and \
                        not r[R_FLAGS] & F_RETIRED and not (r[R_GRP] % NUNITS == UNIT_CPASYNC and r[R_KNOWN]):
                    self._unretired_at_exit(cta, r)
            for a in w.agents:
                if a[1] == cta or self.mb_names[a[4]][0] == cta:
                    what = ("a bulk copy into its shared memory", "a tensor-core commit",
                            "a cp.async.mbarrier.arrive")[a[0]]
                    raise Violation("SV404", f"CTA {cta} exits while {what} (issued at line {a[7]}) is still in "
                                    "flight", self.protocol.span, related=((a[7], "the asynchronous operation"),))


    def _unretired_at_exit(self, cta: int, r: tuple) -> None:
        """CTA cta exits with the asynchronous access of record r never retired: SV404, except a bulk
        store's source read under `exit-drains-bulk-reads` (on by default; docs/model.md, "A CTA's exit and
        its bulk stores"), which takes the exit to wait for it."""
        unit = r[R_GRP] % NUNITS
        if unit == UNIT_BULK:
            if self.assume.exit_drains_bulk_reads:
                self.assume.used.add(EXIT_DRAINS_BULK_READS)
                return
            raise Violation("SV404", f"CTA {cta} exits while a bulk store still reads {self.slot_label(*r[1:4])} "
                            f"(issued at line {r[R_LINE]}; no bulk.wait_read retired it). {BULK_EXIT_READING}",
                            self.protocol.span, related=((r[R_LINE], "the asynchronous read"),))
        what = "a wgmma group still reads" if unit == UNIT_WGMMA else "a cp.async still writes"
        raise Violation("SV404", f"CTA {cta} exits while {what} {self.slot_label(*r[1:4])} (issued at "
                        f"line {r[R_LINE]}, never retired by a wgmma.wait / cp.async.wait_group)",
                        self.protocol.span, related=((r[R_LINE], "the asynchronous read"),))


# The reading of a CTA's exit with a bulk store's source read in flight, as `assumed`, `--assume` and `--letter`
# name it, and what an SV404 under the letter says of it (docs/model.md, "A CTA's exit and its bulk stores").
EXIT_DRAINS_BULK_READS = "exit-drains-bulk-reads"
BULK_EXIT_READING = ("PTX completes a bulk store's source read only at a `cp.async.bulk.wait_group.read` and "
                     "does not say that a CTA's exit waits for it, and this check took that letter (`--no-assume` "
                     f"or `--letter {EXIT_DRAINS_BULK_READS}`; an H100 was measured to wait, docs/model.md); add "
                     "`bulk.wait_read 0` after the last commit")


class LifecycleEncoding:
    """The bmc engine's Z3 encoding of this family (a mixin of engines.bmc.Step)."""

    def exits(self, w: Work, cta: int, before_done: Any) -> list[tuple[str, Any]]:
        """Machine._exit: generations of all threads of the CTA may complete once warps have exited,
        and so may the cluster barrier's; a CTA may not exit with a copy into it in flight or an
        async read never retired (SV404)."""
        enc = self.enc
        bars = [n for n, (c, _) in enumerate(enc.nbs) if c == cta]
        for _ in range(max(len(bars), 1)):  # a release can let a warp exit, which can complete another
            for n in bars:
                self.nb_try_complete(w, n, w["nb_count", n] == -1)
        if enc.has_cluster_barrier:
            self.cb_try_complete(w)
        pending = [self.has(w["inflight"], c.record) for c in enc.copies if c.cta == cta]
        pending += [self.has(w["live"], e.record) for evs in enc.events for e in evs
                    if e.retires == [(-1, ())] and e.key[0] == cta]
        if not pending:
            return []
        return [("SV404", z3.And(z3.Not(before_done), enc.cta_done(w, cta), z3.Or(*pending)))]
