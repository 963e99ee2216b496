"""The Promela of asynchronous agents: TMA loads (with multicast), bulk stores and wgmma reads,
their groups (commit/wait, a warpgroup's team wait) and the agents that complete the copies,
mirroring semantics/families/async_agents.py.

Every buffer slot that bulk copies target has an agent proctype: a copy in flight is its work item
(barrier, bytes, issuer, site), completed at any later moment. Bulk stores and wgmma reads need no
agent: they are async read records retired by the group wait. The steps form a mixin of the
exporter; ``FACTS`` and ``STEPS`` register its operations by type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ... import ir
from ...semantics import rules
from ...semantics.state import READ, WRITE
from .base import BITS, ExportError, _Facts
from .knowledge import RECS
from .terms import mb_update


class AsyncAgentExport:
    """The run's reading, the steps and the agents of this family (a mixin of the exporter)."""

    def facts_tma_load(self, facts: _Facts, p: int, proc, op: ir.TmaLoad, ins, env: dict, line: int, part: int) -> None:
        if op.cta_group == 2:
            raise ExportError(f"line {line}: `tma.load cta_group 2` is not exported (a 2-SM copy signalled on the "
                              "pair leader's barrier has no Promela counterpart yet); check this protocol with "
                              "`syncverify check`")
        if ins.threads != 1:
            raise ExportError(f"line {line}: `tma.load` executed by {ins.threads} threads at once (outside "
                              "`elect`) is not exported: put it in `elect`")
        nbytes = self._val(op.tx_bytes, p, env)
        if nbytes <= 0 or nbytes % 16:
            raise self._refuse("SV107", line, f"copy of {nbytes} bytes")
        dests = [proc.cta] if op.multicast is None else self._mask_ctas(op.multicast, p, env, line)
        self._mb_index(op.bar, p, env, line)
        for c in dests:
            facts.keys[self._key(op.buf, c, p, env, line)].copies += 1

    def facts_async_read(self, facts: _Facts, p: int, proc, op: ir.TmaStore | ir.WgmmaRead, ins,
                         env: dict, line: int, part: int) -> None:
        facts.keys[self._key(op.buf, proc.cta, p, env, line)].async_reads += 1

    def facts_group_wait(self, facts: _Facts, p: int, proc, op: ir.GroupWait, ins,
                         env: dict, line: int, part: int) -> None:
        self._val(op.pending, p, env)

    def step_tma_load(self, p: int, proc, op: ir.TmaLoad, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        line = op.span.line
        E = lambda e: self.expr(e, p)  # noqa: E731
        nbytes = E(op.tx_bytes)
        dests = list(range(self.ncta)) if op.multicast is not None else [cta]
        for d in dests:
            sub: list[str] = [f"_c = {d}; _m = {self.mb_expr(op.bar, p, str(d))};"]
            sub += self.usable("_m", lanes, None if d == cta else "_c", "tma.load completion", cta)
            sub.append(f"_q = {self.key_expr(op.buf, p, str(d))};")
            sub += self.conflicts(part, lanes, WRITE, True)
            sub += self.add_write(part, lanes, line, True)
            sub.append("assert(!ag_live[_q] || EXPORTCAP);")
            sub.append(f"ag_live[_q] = 1; ag_m[_q] = _m; ag_bytes[_q] = {nbytes}; ag_iss[_q] = me; "
                       f"ag_site[_q] = {line};")
            if op.multicast is not None:
                b.append(f"if :: ((({E(op.multicast)}) >> {d}) & 1) != 0 ->")
                b += ["   " + s for s in sub]
                b.append(":: else -> skip fi;")
            else:
                b += sub
        return "true"

    def step_async_read(self, p: int, proc, op: ir.TmaStore | ir.WgmmaRead, ins,
                        lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        line = op.span.line
        unit = 0 if isinstance(op, ir.TmaStore) else 1
        seq = "bseq" if unit == 0 else "wseq[me]"
        b.append(f"_q = {self.key_expr(op.buf, p, str(cta))};")
        b += self.conflicts(part, lanes, READ, True)
        b += self.add_read(p, part, lanes, line, f"2 * {seq} + {unit}")
        return "true"

    def step_commit(self, p: int, proc, op: ir.GroupCommit, ins, lanes: str, part: int, b: list[str]) -> str:
        b.append("bseq = bseq + 1;" if op.unit == "bulk" else "wseq[me] = wseq[me] + 1;")
        return "true"

    def step_group_wait(self, p: int, proc, op: ir.GroupWait, ins, lanes: str, part: int, b: list[str]) -> str:
        E = lambda e: self.expr(e, p)  # noqa: E731
        guard = "true"
        if op.unit == "wgmma" and any(p in t for t in self.teams):
            # Machine._wgmma_wait: blocked until every other warp of the warpgroup has committed the
            # groups before the limit (the engine also lets it pass while one stands at that commit,
            # which only reorders a commit that touches nothing shared)
            team = next(t for t in self.teams if p in t)
            guard = " && ".join(f"wseq[{q}] >= wseq[me] - ({E(op.pending)})" for q in team if q != p)
            if self.track_grp:
                b.append(f"_n = wseq[me] - ({E(op.pending)}); _a = lw; _b = {lanes}; _c = lb; "
                         f"c_code {{ team_wait({{me}}, _n, _a, _b, {part}, _c); }};   /* the team's groups */")
        else:
            unit = 0 if op.unit == "bulk" else 1
            seq = "bseq" if unit == 0 else "wseq[me]"
            if self.track_grp:
                b.append(f"_n = {seq} - ({E(op.pending)}); _a = lw; _b = {lanes}; _c = lb; "
                         f"c_code {{ group_wait({{me}}, {unit}, _n, _a, _b, {part}, _c); }};   "
                         "/* older groups are complete */")
        return guard

    def agent(self, k: int) -> list[str]:
        """A bulk copy into slot k completes (machine._complete_tma): its write lands, known only to
        the phase it completes (.release.cluster covers the copy's own write), then complete_tx."""
        cta = k // self.spc
        return [f"/* the bulk copies into slot {k} ({self._slot_name(k)}) */",
                f"proctype A{k}() {{",
                "end:",
                "  do",
                f"  :: d_step {{ ag_live[{k}] ->",
                f"       assert(alive_procs[{cta}] > 0 || SV404);   /* a copy lands in an exited CTA */",
                f"       _q = {k}; _m = ag_m[{k}]; _a = ag_iss[{k}]; _b = ag_site[{k}]; _c = {self.mb_base} + 2 * _m;",
                "       c_code { copy_lands(_q, _a, _b, _c); };",
                "       assert(mvalid[_m] || SV401);",
                f"       assert((mtx[_m] - ag_bytes[{k}] >= -{rules.MAX_COUNT}) || SV503);",
                f"       _t = mk[_m]; {mb_update(rules.mb_complete_tx, f'ag_bytes[{k}]')} mb_after();",
                f"       ag_live[{k}] = 0; ag_m[{k}] = 0; ag_bytes[{k}] = 0; ag_iss[{k}] = 0; ag_site[{k}] = 0;",
                "       c_code { canon(); } }",
                "  od",
                "}",
                ""]

    def _slot_name(self, k: int) -> str:
        cta, rest = divmod(k, self.spc)
        for b in self.protocol.buffers:
            off = self.buf_off[b.name]
            if off <= rest < off + (b.slots or 1):
                return self.machine.slot_label(cta, self.machine.buf_index[b.name], rest - off)
        return str(k)

    def copy_lands_c(self) -> list[str]:
        """C: a bulk copy's write lands."""
        akn = self.track_akn
        return [
            "/* a bulk copy completes: its record is no longer in flight and is known only by the phase",
            "   holder cur (the .release.cluster of complete_tx covers the copy's own write) */",
            "static void copy_lands(int q, int iss, int site, int cur) {",
            "  int x;",
            "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++)",
            "    if ((now.R[x].flags & 2) && now.R[x].owner == iss && now.R[x].site == site) {",
            "      now.R[x].flags &= ~2; memset(now.R[x].kn, 0, sizeof(now.R[x].kn));"
            + (" memset(now.R[x].akn, 0, sizeof(now.R[x].akn));" if akn else ""),
            "      k_set(now.R[x].kn, cur);" + (" k_set(now.R[x].akn, cur);" if akn else ""),
            "      return;",
            "    }",
            "}",
        ]

    def groups_c(self) -> list[str]:
        """C: the group waits (a thread's, a warpgroup team's) and the exit's check of unretired reads."""
        akn = self.track_akn
        recs = RECS
        return [
            "/* wgmma.wait / bulk.wait_read: the retired groups' reads become ordered before the lanes.",
            "   Groups are per thread: an elected lane's wait does not retire the other lanes' reads,",
            "   and a warp's wait orders an elected lane's read before that lane alone. */",
            "static void group_wait(int me, int unit, int limit, int lw, int lm, int waiter, int lead) {",
            "  int q, i, learn;",
            f"  {recs} if (now.R[i].owner == me && now.R[i].grp >= 0 && now.R[i].grp % 2 == unit",
            "      && now.R[i].grp / 2 < limit && !(waiter == 0 && now.R[i].part == 1)) {",
            "    learn = now.R[i].part == 0 ? (lm & lead) : lm;",
            "    now.R[i].grp = -1; now.R[i].kn[lw] |= learn;" + (" now.R[i].akn[lw] |= learn;" if akn else ""),
            "  }",
            "}",
            *self.team_knows_c(),
            "/* Machine._wgmma_wait: a warp of a warpgroup (team) learns every team warp's wgmma reads of the",
            "   groups before the limit; a read keeps its tag until the whole team knows it (flag 32: complete) */",
            "static void team_wait(int me, int limit, int lw, int lm, int waiter, int lead) {",
            "  int q, i, learn;",
            f"  {recs} if (now.R[i].grp >= 0 && now.R[i].grp % 2 == 1 && now.R[i].grp / 2 < limit",
            "      && team_of[now.R[i].owner] == team_of[me] && !(waiter == 0 && now.R[i].part == 1)) {",
            "    learn = now.R[i].part == 0 ? (lm & lead) : lm;",
            "    now.R[i].kn[lw] |= learn;" + (" now.R[i].akn[lw] |= learn;" if akn else "")
            + " now.R[i].flags |= 32;",
            "    if (team_knows(team_of[me], now.R[i].kn)) now.R[i].grp = -1;",
            "  }",
            "}",
            "/* machine._exit: an async read of a slot of this CTA never retired; a bulk store's (unit 0) is",
            "   waited for by the exit (the engine's default reading, exit-drains-bulk-reads) */",
            "static int unretired(int lo, int hi) {",
            "  int q, i;",
            "  for (q = lo; q < hi; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)",
            "    if (now.R[i].grp >= 0 && now.R[i].grp % 2 == 1 && !(now.R[i].flags & 32)) return 1;",
            "  return 0;",
            "}",
        ]

    def team_knows_c(self) -> list[str]:
        """C: does every holder of every warp of team t know the record (knowledge words kn)?"""
        L = ["static int team_knows(int t, int *kn) {"]
        for t, team in enumerate(self.teams):
            words: dict[int, int] = defaultdict(int)
            for q in team:
                h = self.h_lead[q]
                words[h // BITS] |= 3 << (h % BITS)
            test = " && ".join(f"(kn[{wd}] & {mask:#x}) == {mask:#x}" for wd, mask in sorted(words.items()))
            L.append(f"  if (t == {t}) return {test};")
        L += ["  return 0;", "}"]
        return L


FACTS: dict[type, Callable] = {
    ir.TmaLoad: AsyncAgentExport.facts_tma_load,
    ir.TmaStore: AsyncAgentExport.facts_async_read,
    ir.WgmmaRead: AsyncAgentExport.facts_async_read,
    ir.GroupWait: AsyncAgentExport.facts_group_wait,
}

STEPS: dict[type, Callable] = {
    ir.TmaLoad: AsyncAgentExport.step_tma_load,
    ir.TmaStore: AsyncAgentExport.step_async_read,
    ir.WgmmaRead: AsyncAgentExport.step_async_read,
    ir.GroupCommit: AsyncAgentExport.step_commit,
    ir.GroupWait: AsyncAgentExport.step_group_wait,
}
