"""The processes of the model: one proctype per template of warp processes (its parameters, its
expressions, the `pc` automaton of its compiled program with the local control flow inside each
step), and the `init` process that starts them with the copy agents and the deadlock monitor.

A room of its own: this is the model's skeleton that every family's step is written into; it knows
the compiled programs of semantics/program.py and nothing of any operation's meaning.
"""

from __future__ import annotations

from collections import defaultdict

from ... import ir
from ...expr import Context
from ...semantics.program import BAR_WAIT, BRANCH, END, FOR_INIT, FOR_NEXT, JUMP, LET, OP, Program, lane_part
from ...semantics.state import FULL, LEADER
from .base import BITS, ExportError


class ProcessExport:
    """The proctypes and the init process (a mixin of the exporter)."""

    # ------------------------------------------------------------------ templates
    def templates(self) -> list[list[int]]:
        """Processes that run the same compiled program in the same CTA with the same thread count
        share one proctype; what tells them apart (their index, knowledge bits, instance, waiter
        slots) is passed as parameters, which keeps the model (and SPIN's compile) small."""
        groups: dict[tuple, list[int]] = {}
        for p in self.live:
            proc = self.machine.procs[p]
            key = (self.machine.programs[p].code, proc.cta, proc.nthreads, self.machine.ctx[p].roles,
                   self.init_procs[p][:2])
            groups.setdefault(key, []).append(p)
        return list(groups.values())

    def waited_names(self, p: int) -> list[str]:
        return sorted({ins.op.bar.name for ins in self.machine.programs[p].code
                       if ins.kind == OP and isinstance(ins.op, ir.MbarWait)})

    def params(self, p: int) -> list[tuple[str, str, int]]:
        """(type, name, value) of the proctype parameters of process p."""
        h = self.h_lead[p]
        out = [("byte", "me", p), ("byte", "lw", h // BITS), ("int", "lb", 1 << (h % BITS)),
               ("int", "wb", 1 << ((h + 1) % BITS)), ("short", "hl", h),
               ("int", "lpb", 1 << (p - self.machine.procs[p].cta * self.ppc)),
               ("byte", "inst", self.machine.ctx[p].instance)]
        # a wait these params never reach (a loop of no trips) has no waiter index: any value does
        out += [("byte", f"wi_{n}", self.widx.get((n, p), 0)) for n in self.waited_names(p)]
        return out

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr, p: int) -> str:
        """A Promela expression; arithmetic is C's on both sides (expr.py: `/` and `%` truncate).
        `instance` is the proctype parameter `inst`; everything else about the process is static."""
        ctx: Context = self.machine.ctx[p]
        match e:
            case ir.Const(value=v):
                return str(v) if v >= 0 else f"({v})"
            case ir.Var(name=n):
                return f"v_{n}"
            case ir.Builtin(name=n):
                return str(ctx.cta) if n == "cta" else "inst"
            case ir.InRole(role=r):
                return "1" if r in ctx.roles else "0"
            case ir.UnOp(op=o, operand=x):
                return f"(-{self.expr(x, p)})" if o == "-" else f"(!{self.expr(x, p)})"
            case ir.BinOp(op=o, left=a, right=b):
                return f"({self.expr(a, p)} {o} {self.expr(b, p)})"
            case ir.Cond(cond=c, then=a, orelse=b):  # Promela's conditional expression
                return f"({self.expr(c, p)} -> {self.expr(a, p)} : {self.expr(b, p)})"
            case ir.Pick(name=n, values=values, index=ir.Const(value=i), per_cta=per_cta):
                row = values[ctx.cta if per_cta else 0]
                if 0 <= i < len(row):
                    return str(row[i]) if row[i] >= 0 else f"({row[i]})"
                raise ExportError(f"line {e.span.line}: index {i} is out of range for `{n}[{len(row)}]`")
            case ir.Pick(name=n):
                raise ExportError(f"line {e.span.line}: the `choose` array `{n}` is indexed by a variable; the "
                                  "model has no range check for it (check the protocol with `syncverify check`)")
        raise ExportError(f"cannot translate expression {e!r}")

    def mb_expr(self, ref: ir.Ref, p: int, cta: str) -> str:
        idx = "0" if ref.index is None else self.expr(ref.index, p)
        return f"(({cta}) * {self.mbpc} + {self.mb_off[ref.name]} + {idx})"

    def key_expr(self, ref: ir.Ref, p: int, cta: str) -> str:
        idx = "0" if ref.index is None else self.expr(ref.index, p)
        return f"(({cta}) * {self.spc} + {self.buf_off[ref.name]} + {idx})"

    def lanes(self, p: int, ins) -> str:
        """The executing lanes' knowledge mask (machine._lanes): the leader, the other lanes, or both.
        Both bits of a process share the word `lw` (BITS is even)."""
        _, leader, others = self.who(p, ins)
        return "(lb | wb)" if leader and others else "lb" if leader else "wb"

    def who(self, p: int, ins) -> tuple[int, bool, bool]:
        """(part as the model numbers it, leader lane takes part, another lane does): Machine._part."""
        proc = self.machine.procs[p]
        if ins.leader_only or proc.nthreads == 1:
            return LEADER, True, False
        if not ins.lanes or ins.lanes == proc.lane_mask:
            return FULL, True, True
        _, leader, others = lane_part(proc, ins.lanes)
        return 2 + self.lane_sets.index(ins.lanes), leader, others

    def part_lanes_c(self) -> list[str]:
        """C: the lanes (of its warp) that made an access of part `part` by process `me`."""
        sets = ", ".join(f"{m:#x}u" for m in self.lane_sets) or "0u"
        lead = ", ".join(f"{1 << self.machine.procs[q].leader_lane:#x}u" for q in range(self.nprocs))
        whole = ", ".join(f"{self.machine.procs[q].lane_mask:#x}u" for q in range(self.nprocs))
        team = ", ".join(str(next((i for i, t in enumerate(self.teams) if q in t), -1)) for q in range(self.nprocs))
        return [
            f"static const unsigned lane_sets[] = {{ {sets} }};",
            f"static const unsigned lead_lane[] = {{ {lead} }};",
            f"static const unsigned all_lanes[] = {{ {whole} }};",
            f"static const int team_of[] = {{ {team} }};",
            "static unsigned part_lanes(int me, int part) {",
            "  return part == 0 ? lead_lane[me] : part == 1 ? all_lanes[me] : lane_sets[part - 2];",
            "}",
        ]

    @staticmethod
    def local_reach(prog: Program, start: int) -> tuple[list[int], bool]:
        """The local instructions that control can pass through from ``start`` before the next
        visible one, and whether the program can end there: only those go into the step."""
        seen: set[int] = set()
        todo = [start]
        ends = False
        while todo:
            pc = todo.pop()
            if pc in seen:
                continue
            ins = prog.code[pc]
            if ins.kind == END:
                ends = True
                continue
            if ins.kind in (OP, BAR_WAIT):
                continue
            seen.add(pc)
            if ins.kind == JUMP:
                todo.append(ins.target)
            elif ins.kind in (FOR_INIT, FOR_NEXT, BRANCH):
                todo += [pc + 1, ins.target]
            else:
                todo.append(pc + 1)
        return sorted(seen), ends

    def local_flow(self, p: int, pcs: list[int]) -> list[str]:
        """machine._run_local over the given local instructions: let/for/if until the next visible
        instruction, inside the same step."""
        if not pcs:
            return []
        prog: Program = self.machine.programs[p]
        L = ["do"]
        E = lambda e: self.expr(e, p)  # noqa: E731
        for pc in pcs:
            ins = prog.code[pc]
            v = f"v_{prog.var_names[ins.slot]}" if ins.slot >= 0 else ""
            if ins.kind == LET:
                L.append(f":: pc == {pc} -> {v} = {E(ins.expr)}; pc = {pc + 1}")
            elif ins.kind == FOR_INIT:
                L.append(f":: pc == {pc} -> if :: ({E(ins.expr)}) < ({E(ins.expr2)}) -> {v} = {E(ins.expr)}; "
                         f"pc = {pc + 1} :: else -> pc = {ins.target} fi")
            elif ins.kind == FOR_NEXT:
                L.append(f":: pc == {pc} -> if :: {v} + 1 < ({E(ins.expr2)}) -> {v} = {v} + 1; pc = {ins.target} "
                         f":: else -> pc = {pc + 1} fi")
            elif ins.kind == BRANCH:
                L.append(f":: pc == {pc} -> if :: ({E(ins.expr)}) != 0 -> pc = {pc + 1} :: else -> pc = {ins.target} "
                         "fi")
            elif ins.kind == JUMP:
                L.append(f":: pc == {pc} -> pc = {ins.target}")
        L += [":: else -> break", "od;"]
        return L

    def after(self, t: int, p: int, pc: int) -> str:
        """What follows an operation at pc-1 inside its step: the local flow, and the exit if the
        program can end there."""
        prog: Program = self.machine.programs[p]
        pcs, ends = self.local_reach(prog, pc)
        text = f"pc = {pc}; " + " ".join(self.local_flow(p, pcs))
        if ends:
            text += f" if :: pc == {len(prog.code) - 1} -> exit_{t}() :: else -> skip fi;"
        return text

    def proctype(self, t: int, p: int) -> list[str]:
        """One proctype per template: the pc automaton of the compiled program (an operation and the
        local control flow after it form one d_step; a process that ends exits in the same step)."""
        m = self.machine
        prog: Program = m.programs[p]
        proc = m.procs[p]
        pc0, vars0 = self.init_procs[p][0], self.init_procs[p][1]
        L = [f"/* template {t}: {proc.role or 'no role'}, CTA {proc.cta}, {proc.nthreads} threads per process */",
             f"inline exit_{t}() {{"]
        L += ["  " + s for s in self.exit_code(p)]
        L.append("}")
        params = "; ".join(f"{ty} {name}" for ty, name, _ in self.params(p))
        L.append(f"proctype T{t}({params}) {{")
        decls = [f"int v_{name} = {val}" for name, val in zip(prog.var_names, vars0, strict=True)]
        decls += [f"short pc = {pc0}", "short tok_i = -1", "short tok_g = -1", "short cltok = -1", "short bseq = 0",
                  "bit stay = 0"]
        L.append("  " + "; ".join(decls) + ";")
        # A finished process stays at the loop head (pc == END matches no option): the `end` label
        # makes that a valid end state, and the deadlock monitor below tells finished from blocked.
        L.append("end:")
        L.append("  do")
        for pc, ins in enumerate(prog.code):
            if ins.kind == OP:
                body, guard = self.op_code(p, ins)
                L.append(f"  :: d_step {{ pc == {pc} && {guard} ->   /* line {ins.line}: "
                         f"{_comment(self.protocol.text_of(ins.op.span, 60))} */")
                L += ["       " + _me(s) for s in body]
                L.append(f"       if :: stay -> stay = 0 :: else -> {self.after(t, p, pc + 1)} fi;")
                L.append("       c_code { canon(); } }")
            elif ins.kind == BAR_WAIT:
                L.append(f"  :: d_step {{ pc == {pc} && nbgen[tok_i] != tok_g ->   /* line {ins.line}: the bar.sync "
                         "generation completed */")
                L.append(f"       tok_i = -1; tok_g = -1; {self.after(t, p, pc + 1)} c_code {{ canon(); }} }}")
        L += ["  od", "}", ""]
        return L

    def init_proc(self, groups: list[list[int]], agent_keys: list[int]) -> list[str]:
        init = ["init {", "  d_step {"]
        total = 0
        for c in range(self.ncta):
            procs = [p for p in self.live if self.machine.procs[p].cta == c]
            thr = sum(self.machine.procs[p].nthreads for p in procs)
            total += thr
            init.append(f"    alive_procs[{c}] = {len(procs)}; alive_thr[{c}] = {thr};")
            words: dict[int, int] = defaultdict(int)
            for p in procs:
                h = self.h_lead[p]
                words[h // BITS] |= 3 << (h % BITS)
            for wd, mk in sorted(words.items()):
                init.append(f"    skn[{c}].w[{wd}] = {mk};   /* its own warps know that CTA {c} started */")
        init += [f"    alive_all = {total}", "  };", "  atomic {"]
        for t, procs in enumerate(groups):
            for p in procs:
                args = ", ".join(str(v) for _, _, v in self.params(p))
                init.append(f"    run T{t}({args});   /* {self.machine.proc_label(p)} */")
        for k in agent_keys:
            init.append(f"    run A{k}();")
        init += ["    run Deadlock()", "  }", "}", "",
                 "/* SV201: no step is enabled (SPIN's timeout) while some process has not finished. Every",
                 "   process loop carries an end label, so this monitor is what tells a finished run from a",
                 "   deadlock (SV503 when the blocked waits are on barriers whose bytes never balance). */",
                 "proctype Deadlock() {",
                 "  timeout -> assert(alive_all == 0 || SV201)",
                 "}"]
        return init


def _me(line: str) -> str:
    """Inside c_code the process index is the hidden `_w` copy of the parameter `me`."""
    if "c_code" in line and "{me}" in line:
        return "_w = me; " + line.replace("{me}", "_w")
    return line


def _comment(text: str) -> str:
    return text.replace("*/", "* /").replace("/*", "/ *")
