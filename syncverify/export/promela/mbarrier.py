"""The Promela of mbarriers: init, inval, arrive (with expect_tx), expect_tx/complete_tx and the
parity wait, with their checks (usable barrier, consumption rule, parity aliasing, tx-count range,
cross-CTA data scope), mirroring semantics/families/mbarrier.py.

Every barrier update is a rule of ``semantics.rules`` run over Promela text (terms.py). The steps
form a mixin of the exporter; ``FACTS`` and ``STEPS`` register its operations by type, as the
semantics' ``HANDLERS`` do.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ...semantics import rules
from ...semantics.families.scopes import accessor_holders
from ...semantics.state import FULL
from .base import BITS, NO_JPREV, ExportError, _Facts
from .knowledge import RECS
from .terms import mb_update


class MbarrierExport:
    """The run's reading and the steps of this family (a mixin of the exporter)."""

    def facts_init(self, facts: _Facts, p: int, proc, op: ir.MbarInit, ins, env: dict, line: int, part: int) -> None:
        decl = self.protocol.mbarrier(op.bar.name)
        count = decl.count if op.count is None else self._val(op.count, p, env)
        if count is None or not 1 <= count <= rules.MAX_COUNT:
            raise self._refuse("SV105", line, f"init count {count} outside 1..2^20-1")
        self._mb_index(op.bar, p, env, line)

    def facts_inval(self, facts: _Facts, p: int, proc, op: ir.MbarInval, ins, env: dict, line: int, part: int) -> None:
        self._mb_index(op.bar, p, env, line)

    def facts_arrive(self, facts: _Facts, p: int, proc, op: ir.MbarArrive, ins,
                     env: dict, line: int, part: int) -> None:
        self._target(op.remote, p, env, line)
        self._mb_index(op.bar, p, env, line)
        self._val(op.count, p, env)
        self._val(op.tx_bytes, p, env)
        if op.remote is not None and op.sem == "release":
            facts.remote_release = True

    def facts_tx(self, facts: _Facts, p: int, proc, op: ir.MbarTx, ins, env: dict, line: int, part: int) -> None:
        self._target(op.remote, p, env, line)
        self._mb_index(op.bar, p, env, line)
        self._val(op.tx_bytes, p, env)

    def facts_wait(self, facts: _Facts, p: int, proc, op: ir.MbarWait, ins, env: dict, line: int, part: int) -> None:
        self._mb_index(op.bar, p, env, line)
        if self._val(op.parity, p, env) < 0:
            raise ExportError(f"line {line}: a negative parity operand is not exported")
        if p not in facts.waiters[op.bar.name]:
            facts.waiters[op.bar.name].append(p)

    def mb_after_inline(self) -> list[str]:
        """The inline that follows every barrier update (machine._set_mb)."""
        return [
            "/* machine._set_mb after a rule changed barrier _m whose phase was _t: a completed phase moves the",
            "   current phase's knowledge to the last one and must be observed again (consumption rule). A",
            "   completion while the previous phase is unobserved is the consumption rule's hazard (SV502); an",
            "   arrive-on that lands early without completing (the explicit engine's SV505 warning) is not encoded */",
            "inline mb_after() {",
            f"  if :: mk[_m] != _t -> assert(mobs[_m] || SV502); _c = {self.mb_base} + 2 * _m; _n = _c + 1; "
            "c_code { k_shift(_c, _n); };",
            "        mobs[_m] = 0; mrd[_m] = (mrd[_m] & 5) * 2",
            "  :: else -> skip fi",
            "}",
        ]

    def usable(self, m: str, lanes: str, remote: str | None, what: str, cta: int) -> list[str]:
        """machine._check_barrier_usable: valid, and the init ordered before this use (SV401; SV402
        for a peer CTA's barrier, which must also still be running: SV404)."""
        ok = f"(mvalid[{m}] && (ikn[{m}].w[lw] & {lanes}) == {lanes})"
        if remote is None:
            return [f"assert({ok} || SV401);   /* {what} */"]
        return [f"if :: ({remote}) != {cta} -> assert(alive_procs[{remote}] > 0 || SV404); assert({ok} || SV402)",
                f"   :: else -> assert({ok} || SV401) fi;   /* {what} */"]

    def step_init(self, p: int, proc, op: ir.MbarInit, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        threads = ins.threads
        E = lambda e: self.expr(e, p)  # noqa: E731
        decl = self.protocol.mbarrier(op.bar.name)
        count = str(decl.count) if op.count is None else E(op.count)
        targets = ([f"{cta * self.mbpc + self.mb_off[op.bar.name] + i}" for i in range(decl.size or 1)]
                   if op.bar.every else [self.mb_expr(op.bar, p, str(cta))])
        for m in targets:
            b.append(f"_m = {m};")
            b.append(f"assert((!mvalid[_m] && {threads} <= 1) || SV403);   /* init of a live barrier, or by "
                     "several threads */")
            b.append(mb_update(rules.mb_init, str(count)))
            b.append("mobs[_m] = 1; mrd[_m] = 0;")
            if self.nj:
                b.append(f"_j = 0; do :: _j < {self.nj} -> jp[_m * {self.nj} + _j] = {NO_JPREV}; _j++ "
                         ":: else -> break od;")
            b.append(f"_c = {self.mb_base} + 2 * _m; c_code {{ k_clear(_c); k_clear(_c + 1); }};")
            b.append("iex[_m] = 1; iown[_m] = me; _j = 0; do :: _j < NW -> ikn[_m].w[_j] = 0; iakn[_m].w[_j] = 0; "
                     "_j++ :: else -> break od;")
            b.append(f"ikn[_m].w[lw] = {lanes};   /* the init record, known by the initializing lanes */")
        return "true"

    def step_inval(self, p: int, proc, op: ir.MbarInval, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        decl = self.protocol.mbarrier(op.bar.name)
        targets = ([f"{cta * self.mbpc + self.mb_off[op.bar.name] + i}" for i in range(decl.size or 1)]
                   if op.bar.every else [self.mb_expr(op.bar, p, str(cta))])
        for m in targets:
            b.append(f"_m = {m};")
            b += self.usable("_m", lanes, None, "inval", cta)
            b.append(mb_update(rules.mb_inval))
            b.append("iex[_m] = 0;   /* the init record goes */")
        return "true"

    def step_arrive(self, p: int, proc, op: ir.MbarArrive, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        threads = ins.threads
        E = lambda e: self.expr(e, p)  # noqa: E731
        tcta = str(cta) if op.remote is None else E(op.remote)
        if op.local_form:  # MbarrierOps.check_local_form
            b.append(f"assert(({tcta}) == {cta} || SV407);   /* .shared::cta arrive on a peer's barrier */")
        b.append(f"_c = {tcta}; _m = {self.mb_expr(op.bar, p, '_c')};")
        b += self.usable("_m", lanes, None if op.remote is None else "_c", "arrive", cta)
        b.append(f"_n = {E(op.count)} * {threads};")
        if op.drop:
            b.append("assert(_n < mexp[_m] || SV504);   /* arrive_drop taking the expected count to 0 */")
        b.append("assert(_n <= mpend[_m] || SV504);   /* rules.arrive_overflows */")
        b.append("_t = mk[_m];")
        if op.tx_bytes is not None:
            b.append(f"_x = {E(op.tx_bytes)} * {threads};")
            b.append(f"assert((mtx[_m] + _x >= -{rules.MAX_COUNT} && mtx[_m] + _x <= {rules.MAX_COUNT}) "
                     "|| SV503);   /* rules.tx_out_of_range */")
            rule = rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx
            b.append(mb_update(rule, "_x", "_n"))
        else:
            b.append(mb_update(rules.mb_arrive_drop if op.drop else rules.mb_arrive, "_n"))
        if op.sem == "release":
            if op.remote is not None:
                b.append(f"_a = lw; _b = {lanes}; c_code {{ _r = carries(_a, _b, _c, {self.ppc}); }};")
                # a .cta-scope one is judged at the acquiring waits of the phase (bit 2: learns)
                b.append(f"mrd[_m] = mrd[_m] | _r{' * 5' if op.scope == 'cta' else ''};")
            if part > FULL:  # some lanes: each publishes its own part only (program.own_part_hidden)
                b.append(f"_a = lw; _b = {lanes}; _l = lb; _c = {self.mb_base} + 2 * _m; "
                         f"c_code {{ k_rel_lanes({{me}}, _a, _b, _l, {self.lane_sets[part - 2]:#x}u, _c); }};")
            else:
                b.append(f"_a = lw; _b = {lanes}; _c = {self.mb_base} + 2 * _m; c_code {{ k_rel(_a, _b, _c); }};")
        b.append("mb_after();")
        return "true"

    def step_tx(self, p: int, proc, op: ir.MbarTx, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        threads = ins.threads
        E = lambda e: self.expr(e, p)  # noqa: E731
        tcta = str(cta) if op.remote is None else E(op.remote)
        b.append(f"_c = {tcta}; _m = {self.mb_expr(op.bar, p, '_c')};")
        b += self.usable("_m", lanes, None if op.remote is None else "_c", f"{op.kind}_tx", cta)
        b.append(f"_x = {E(op.tx_bytes)} * {threads}; _t = mk[_m];")
        sign = "+" if op.kind == "expect" else "-"
        b.append(f"assert((mtx[_m] {sign} _x >= -{rules.MAX_COUNT} && mtx[_m] {sign} _x <= {rules.MAX_COUNT}) "
                 "|| SV503);")
        b.append(mb_update(rules.mb_expect_tx if op.kind == "expect" else rules.mb_complete_tx, "_x"))
        b.append("mb_after();")
        return "true"

    def step_wait(self, p: int, proc, op: ir.MbarWait, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        E = lambda e: self.expr(e, p)  # noqa: E731
        m = self.mb_expr(op.bar, p, str(cta))
        par = f"(({E(op.parity)}) % 2)"
        j = f"jp[{m} * {self.nj} + wi_{op.bar.name}]"
        intended = f"({j} == {NO_JPREV} -> {par} : ((({j} + 2) % 2) == {par} -> {j} : {j} + 1))"
        # machine._wait_blocked: valid, init known, parity not passing, not stale -> no step
        guard = (f"!(mvalid[{m}] && (ikn[{m}].w[lw] & {lanes}) == {lanes} && (mk[{m}] % 2) == {par} && "
                 f"mk[{m}] <= {intended} + 1)")
        b.append(f"_m = {m}; _t = {par};")
        b += self.usable("_m", lanes, None, "wait", cta)
        jj = f"jp[_m * {self.nj} + wi_{op.bar.name}]"
        b.append(f"_j = {jj};")
        b.append(f"if :: _j == {NO_JPREV} -> _n = _t; _j = -1 "
                 ":: else -> _n = (((_j + 2) % 2) == _t -> _j : _j + 1) fi;   /* rules.intended_phase */")
        b.append("assert(!(mk[_m] > _n + 1) || SV501);   /* rules.wait_aliases: stale waiter */")
        b.append("_x = mk[_m] - 1;   /* the phase observed: the wait passes (rules.mb_wait_passes) */")
        b.append(f"if :: _n == _x && _x > _j -> {jj} = _x :: else -> {jj} = _j fi;")
        b.append("if :: _n == _x -> mobs[_m] = 1 :: else -> skip fi;")
        if op.sem == "acquire":
            # (a .cta-scope acquire of cross-CTA data is the SV602 warning: not modelled)
            b.append(f"_a = lw; _b = {lanes}; _c = {self.mb_base} + 2 * _m + 1;")
            b.append(f"if :: mrd[_m] & 8 -> c_code {{ _r = learns(_c, _a, _b, {cta}, {self.ppc}); }}; "
                     "assert(_r == 0 || SV602)   /* .cta-scope release of data the waiter learns only here */"
                     " :: else -> skip fi;")
            b.append("c_code { k_acq(_c, _a, _b); };")
        return guard

    def accessor_words(self) -> list[str]:
        """C: for each slot key, the holder words every thread that may access the slot must know a
        write by (semantics.families.scopes.accessor_holders, the model's SV602 rule), and whether
        one of those threads is a process this model does not run (then no write is settled)."""
        words, never = [], []
        for cta in range(self.ncta):
            for b, decl in enumerate(self.protocol.buffers):
                need = [0] * self.nw
                gone = 0
                for p, part in accessor_holders(self.machine, cta, b):
                    if p not in self.h_lead:
                        gone = 1
                        continue
                    h = self.h_lead[p] + part
                    need[h // BITS] |= 1 << (h % BITS)
                words += ["{" + ", ".join(map(str, need)) + "}"] * (decl.slots or 1)
                never += [str(gone)] * (decl.slots or 1)
        words += ["{" + ", ".join(["0"] * self.nw) + "}"] * (self.nkeys - len(words))
        never += ["1"] * (self.nkeys - len(never))
        return [f"static const int acc_need[NKEYS][NW] = {{{', '.join(words)}}};",
                f"static const char acc_gone[NKEYS] = {{{', '.join(never)}}};"]

    def cross_cta_c(self) -> list[str]:
        """C: the cross-CTA data checks of a release to a peer's barrier and of the wait that learns it."""
        recs = RECS
        return [
            "/* machine._check_cross_cta_release: does the release carry a generic write made outside",
            "   the barrier's CTA? */",
            "static int carries(int lw, int lm, int cta, int ppc) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].kind == 1 && !(now.R[i].flags & 1) && (now.R[i].kn[lw] & lm)",
            "      && now.R[i].owner / ppc != cta) return 1;",
            "  return 0;",
            "}",
            "/* ScopeOps._settled: every thread that may access slot q knows write i (the holders of",
            "   semantics.families.scopes.accessor_holders) */",
            *self.accessor_words(),
            "static int settled(int i, int q) {",
            "  int x;",
            "  if (acc_gone[q]) return 0;",
            "  for (x = 0; x < NW; x++) if ((now.R[i].kn[x] & acc_need[q][x]) != acc_need[q][x]) return 0;",
            "  return 1;",
            "}",
            "/* ScopeOps._check_cta_scope_data's test: does the waiter (lanes lm of word lw) learn from holder t",
            "   a generic write made outside its CTA that it does not already know, and that some thread",
            "   which may access its slot does not know either? (asserted here at the wait; the machine",
            "   withholds such a write and reports only an access that needs it: docs/model.md) */",
            "static int learns(int t, int lw, int lm, int cta, int ppc) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].kind == 1 && !(now.R[i].flags & 1) && k_has(now.R[i].kn, t)",
            "      && (now.R[i].kn[lw] & lm) != lm && now.R[i].owner / ppc != cta && !settled(i, q)) return 1;",
            "  return 0;",
            "}",
        ]


FACTS: dict[type, Callable] = {
    ir.MbarInit: MbarrierExport.facts_init,
    ir.MbarInval: MbarrierExport.facts_inval,
    ir.MbarArrive: MbarrierExport.facts_arrive,
    ir.MbarTx: MbarrierExport.facts_tx,
    ir.MbarWait: MbarrierExport.facts_wait,
}

STEPS: dict[type, Callable] = {
    ir.MbarInit: MbarrierExport.step_init,
    ir.MbarInval: MbarrierExport.step_inval,
    ir.MbarArrive: MbarrierExport.step_arrive,
    ir.MbarTx: MbarrierExport.step_tx,
    ir.MbarWait: MbarrierExport.step_wait,
}
