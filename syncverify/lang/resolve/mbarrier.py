"""The mbarrier operations: init, inval, arrive (and arrive_drop, expect_tx), the tx-count
operations, wait and test_wait, with their semantics and scope qualifiers.

A room of its own because its qualifier rules -- the semantics (.release, .acquire,
.relaxed) and the scope (.cta, .cluster) of an arrive or a wait -- belong to it alone.
"""

from __future__ import annotations

from lark import Token, Tree

from ... import ir
from ...diagnostics import Span
from .operations import MAX_COUNT
from .statements import Statements


class MbarrierOps(Statements):
    """The `op_*` builders of the mbarrier family."""

    @staticmethod
    def _sem_scope(quals: set[str], default_sem: str) -> tuple[str, str]:
        sem = "relaxed" if ".relaxed" in quals else default_sem
        scope = "cluster" if ".cluster" in quals else "cta"
        return sem, scope

    def _check_sem_scope(self, quals: set[str], span: Span) -> bool:
        sem = {".release", ".relaxed", ".acquire"} & quals
        scope = {".cta", ".cluster"} & quals
        if len(sem) > 1 or len(scope) > 1:
            self.error("SV110", "conflicting qualifiers " + " ".join(sorted(sem | scope)), span)
            return False
        return True

    def op_init(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier", every_ok=True)
        count = self.expr(clauses["count"]) if "count" in clauses else None
        if bar is None:
            return None
        if count is None and self.mbarriers[bar.name].count is None:
            self.error("SV105", f"`init {bar.name}` needs `count N`: the declaration gives none", span)
            return None
        if isinstance(count, ir.Const) and not 1 <= count.value <= MAX_COUNT:
            self.error("SV105", f"init count {count.value} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(clauses["count"]))
            return None
        return ir.MbarInit(bar, count, span)

    def op_inval(self, span, quals, operands, clauses):
        bar = self.ref(operands[0], "mbarrier", every_ok=True)
        return ir.MbarInval(bar, span) if bar else None

    def _arrive(self, span, quals, operands, clauses, drop: bool):
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        tx = None
        if ".expect_tx" in quals:
            if "bytes" not in clauses:
                self.error("SV110", "`arrive.expect_tx` needs `bytes N`", span)
                return None
            tx = self._bytes(clauses["bytes"], "expect_tx bytes")
        elif "bytes" in clauses:
            self.error("SV110", "`bytes N` on an arrive needs the `.expect_tx` qualifier", self.span(clauses["bytes"]))
            return None
        count = self.expr(clauses["count"]) if "count" in clauses else ir.Const(1, span)
        if isinstance(count, ir.Const) and not 1 <= count.value <= MAX_COUNT:
            self.error("SV105", f"arrive count {count.value} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(clauses["count"]))
            return None
        sem, scope = self._sem_scope(quals, "release")
        remote = self._remote(clauses)
        if bar is None:
            return None
        # the local form on a mapa'd address: legal only where the target is the executing CTA (SV407)
        local_form = ".shared::cta" in quals and remote is not None
        return ir.MbarArrive(bar, count, tx, drop, sem, scope, remote, span,  # type: ignore[arg-type]
                             local_form=local_form)

    def op_arrive(self, span, quals, operands, clauses):
        return self._arrive(span, quals, operands, clauses, drop=False)

    def op_arrive_drop(self, span, quals, operands, clauses):
        return self._arrive(span, quals, operands, clauses, drop=True)

    def _tx(self, kind, span, operands, clauses):
        bar = self.ref(operands[0], "mbarrier")
        nbytes = self.expr(clauses["bytes"])
        if isinstance(nbytes, ir.Const) and not 0 <= nbytes.value <= MAX_COUNT:
            self.error("SV105", f"tx bytes {nbytes.value} are outside 0..{MAX_COUNT}", self.span(clauses["bytes"]))
        remote = self._remote(clauses)
        return ir.MbarTx(kind, bar, nbytes, remote, span) if bar else None

    def op_expect_tx(self, span, quals, operands, clauses):
        return self._tx("expect", span, operands, clauses)

    def op_complete_tx(self, span, quals, operands, clauses):
        return self._tx("complete", span, operands, clauses)

    def op_wait(self, span, quals, operands, clauses):
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        parity = self.expr(clauses["parity"])
        sem, scope = self._sem_scope(quals, "acquire")
        return ir.MbarWait(bar, parity, sem, scope, span) if bar else None  # type: ignore[arg-type]

    def op_test_wait(self, span, quals, operands, clauses):
        """`mbarrier.test_wait.parity` used once (its result unused): see ir.MbarTestWait. A loop
        spinning on test_wait until it returns true is written `wait`."""
        if not self._check_sem_scope(quals, span):
            return None
        bar = self.ref(operands[0], "mbarrier")
        parity = self.expr(clauses["parity"])
        sem, scope = self._sem_scope(quals, "acquire")
        return ir.MbarTestWait(bar, parity, sem, scope, span) if bar else None  # type: ignore[arg-type]

    def probe(self, t: Tree) -> ir.MbarProbe | None:
        """`if [!]try_wait[.SEM][.SCOPE] B parity P` / `test_wait`: see ir.MbarProbe. The
        qualifiers are those of `wait` (and PTX's `.parity`, `.shared::cta`, which change nothing)."""
        word, *rest = t.children
        quals = [str(q) for q in rest if isinstance(q, Token)]
        bar_t, parity_t = [c for c in rest if isinstance(c, Tree)]
        span = self.span(t)
        name = str(word)
        for q in quals:
            if q not in (".parity", ".acquire", ".relaxed", ".cta", ".cluster", ".shared::cta"):
                self.error("SV110", f"`{name}` does not take qualifier `{q}` (allowed: .acquire .cluster .cta "
                           ".parity .relaxed .shared::cta)", span)
                return None
        if not self._check_sem_scope(set(quals), span):
            return None
        bar = self.ref(bar_t, "mbarrier")
        parity = self.expr(parity_t)
        sem, scope = self._sem_scope(set(quals), "acquire")
        if bar is None:
            return None
        return ir.MbarProbe(bar, parity, sem, scope, name == "test_wait", span)  # type: ignore[arg-type]
