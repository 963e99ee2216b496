"""Global memory: a grid of several clusters (`grid N;`) and its launch (`launch cooperative;`),
global buffers (`global NAME[N] bytes B;`) and flags (`flag NAME[N] [init V] [bound B];`), and
the operations on them: atomics (`atom`, `red`), flag loads and stores (`ld`, `st`), spins
(`wait.until`, `probe`), the thread fences `fence.acq_rel` / `fence.sc`, and `grid.sync`.

A room of its own because these are one family (semantics/families/globalmem.py) with checks of
their own: a memory-consistency qualifier and a scope on every access, an operation on every
atomic, and a condition for every spin.
"""

from __future__ import annotations

from lark import Token, Tree

from ... import ir
from .operations import MAX_ARRAY
from .statements import Statements

MAX_GRID = 16  # CTAs of a grid the explicit engine models (every one is a set of processes)
FLAG_BOUND = (1 << 31) - 1  # a flag's default bound: a 32-bit signed counter
LAUNCHES = ("cooperative", "persistent", "ordered")
_RMW = ("add", "inc", "dec", "exch", "cas", "min", "max")
_CMP = ("==", "!=", "<", "<=", ">", ">=")


class GlobalOps(Statements):
    """The declarations and `op_*` builders of the global-memory family."""

    # ---- declarations ----------------------------------------------------
    def decl_grid(self, t: Tree) -> None:
        v = self.const(t.children[0], "the grid size")
        if v is None:
            return
        if not 1 <= v <= MAX_GRID:
            self.error("SV113", f"grid of {v} CTAs is outside 1..{MAX_GRID} (every CTA is modelled)",
                       self.span(t.children[0]))
            return
        self.grid_ctas = v

    def decl_launch(self, t: Tree) -> None:
        word = str(t.children[0])
        if word not in LAUNCHES:
            self.error("SV110", f"unknown launch `{word}`: write `launch cooperative;` (cudaLaunchCooperativeKernel: "
                       "every CTA resident at once), `launch persistent;` (a grid no larger than the CTAs the GPU "
                       "holds at once) or `launch ordered;` (CTAs start in block order)", self.span(t.children[0]))
            return
        self.launch = word

    def decl_gmem(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        nbytes = self.const(rest[0], "buffer bytes")
        if not self.declare(name, "global buffer") or not ok or nbytes is None:
            return
        if nbytes <= 0:
            self.error("SV107", f"global buffer `{name}` has {nbytes} bytes", self.span(rest[0]))
            return
        self.buffers[str(name)] = ir.Buffer(str(name), size, nbytes, self.span(t), "global")

    def decl_flag_decl(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        init, bound = 0, FLAG_BOUND
        for opt in rest:
            v = self.const(opt.children[0], "a flag's initial value" if opt.data == "f_init" else "a flag's bound")
            if v is None:
                return
            if opt.data == "f_init":
                init = v
            else:
                bound = v
        if not self.declare(name, "flag") or not ok:
            return
        if not 0 <= init <= bound <= FLAG_BOUND:
            self.error("SV110", f"flag `{name}`: need 0 <= init ({init}) <= bound ({bound}) <= 2^31-1",
                       self.span(t))
            return
        if size is not None and size > MAX_ARRAY:  # pragma: no cover - _array already refuses it
            return
        self.flags[str(name)] = ir.Flag(str(name), size, init, bound, self.span(t))

    def finish_shape(self) -> None:
        """`grid N;` with N larger than the cluster: the model's CTAs are the grid's, in clusters of
        ``cluster_dim``. N must be a whole number of clusters, as the launch requires."""
        if not self.grid_ctas:
            return
        if self.grid_ctas % self.cluster:
            self.error("SV113", f"a grid of {self.grid_ctas} CTAs is not a whole number of clusters of "
                       f"{self.cluster}", self.header)
            self.grid_ctas = 0
            return
        if self.grid_ctas == self.cluster:  # one cluster: the protocol as before
            self.grid_ctas = 0
            return
        self.cluster_dim, self.cluster = self.cluster, self.grid_ctas

    def _grid_allows(self, name: str, quals: set[str], clauses: dict, span) -> bool:
        """In a grid of several clusters, the model's CTA ranks are grid indices: an operation
        that names a peer CTA's shared memory or the cluster barrier would read them as cluster
        ranks. Those are refused (SV108): CTAs of a grid meet through global memory."""
        cross = name.startswith("cluster.") or "remote" in clauses or "multicast" in clauses \
            or ".cta_group::2" in quals or "cta_group" in clauses or ".shared::cluster" in quals
        if cross:
            self.error("SV108", f"`{name}` reaches other CTAs of the cluster; in a grid of several clusters "
                       "(`grid N;`) the model has no cluster operations yet: CTAs meet through global memory "
                       "(flags, atomics, `grid.sync`)", span)
            return False
        return True

    # ---- operands --------------------------------------------------------
    def _global_sem_scope(self, name: str, quals: set[str], span, allowed: tuple[str, ...],
                   default: str | None) -> tuple[str, str] | None:
        """The memory-consistency qualifier and the scope: `.volatile` is `.relaxed.sys` (PTX: "ld.volatile
        ... may be used ... with the same semantics as ld.relaxed.sys"); no scope is `.gpu`."""
        sems = [q[1:] for q in quals if q in (".relaxed", ".acquire", ".release", ".acq_rel", ".volatile")]
        scopes = [q[1:] for q in quals if q in (".cta", ".cluster", ".gpu", ".sys")]
        if len(sems) > 1 or len(scopes) > 1:
            self.error("SV110", f"`{name}` takes one memory-consistency qualifier and one scope", span)
            return None
        sem = sems[0] if sems else default
        scope = scopes[0] if scopes else "gpu"
        if sem == "volatile":
            if scopes:
                self.error("SV110", f"`{name}.volatile` takes no scope (it is .relaxed.sys)", span)
                return None
            sem, scope = "relaxed", "sys"
        if sem is None:
            self.error("SV110", f"`{name}` of a flag needs `.{'` or `.'.join(allowed)}` (a weak access of a "
                       "flag another thread writes is a data race, and orders nothing)", span)
            return None
        if sem not in allowed:
            self.error("SV110", f"`{name}` cannot be `.{sem}` (PTX allows .{', .'.join(allowed)})", span)
            return None
        return sem, scope

    def _flag_cond(self, name: str, t: Tree, span) -> tuple[ir.Ref, str, ir.Expr] | None:
        """`FLAG OP EXPR` of a spin."""
        if t.data != "binop" or str(t.children[1]) not in _CMP:
            self.error("SV110", f"`{name}` takes a condition on a flag: `{name}.acquire.gpu FLAG >= V`", span)
            return None
        left, op, right = t.children
        flag = self.ref(left, "flag")
        if flag is None:
            return None
        return flag, str(op), self.expr(right)

    # ---- operations ------------------------------------------------------
    def _rmw(self, name: str, quals: set[str], operands: list, span, allowed: tuple[str, ...]) -> ir.FlagOp | None:
        ops = [q[1:] for q in quals if q[1:] in _RMW]
        if len(ops) != 1 or ops[0] not in allowed:
            self.error("SV110", f"`{name}` takes one operation of .{', .'.join(allowed)}", span)
            return None
        rmw = ops[0]
        want = 3 if rmw == "cas" else 2
        if len(operands) != want:
            what = "COMPARE, NEW" if rmw == "cas" else "V"
            self.error("SV110", f"`{name}.{rmw}` takes {want} operands (FLAG, {what})", span)
            return None
        sem_scope = self._global_sem_scope(name, quals, span, ("relaxed", "acquire", "release", "acq_rel")
                                    if name == "atom" else ("relaxed", "release"), "relaxed")
        flag = self.ref(operands[0], "flag")
        values = tuple(self.expr(o) for o in operands[1:])
        if sem_scope is None or flag is None:
            return None
        return ir.FlagOp(name, flag, rmw, values, "", sem_scope[0], sem_scope[1], span)  # type: ignore[arg-type]

    def op_atom(self, span, quals, operands, clauses):
        return self._rmw("atom", quals, operands, span, _RMW)

    def op_red(self, span, quals, operands, clauses):
        return self._rmw("red", quals, operands, span, ("add", "inc", "dec", "min", "max"))

    def op_st(self, span, quals, operands, clauses):
        if ".weak" in quals:  # a plain store (`*counter = 0;`): semantics/families/flag_weak.py
            if len([q for q in quals if q not in (".b32", ".s32", ".u32")]) != 1:
                self.error("SV110", "`st.weak` takes no other memory-consistency qualifier and no scope", span)
                return None
            flag = self.ref(operands[0], "flag")
            value = self.expr(operands[1])
            return None if flag is None else ir.FlagOp("st", flag, "", (value,), "", "weak", "gpu", span)
        sem_scope = self._global_sem_scope("st", quals, span, ("relaxed", "release"), None)
        flag = self.ref(operands[0], "flag")
        value = self.expr(operands[1])
        if sem_scope is None or flag is None:
            return None
        return ir.FlagOp("st", flag, "", (value,), "", sem_scope[0], sem_scope[1], span)  # type: ignore[arg-type]

    def op_ld(self, span, quals, operands, clauses):
        sem_scope = self._global_sem_scope("ld", quals, span, ("relaxed", "acquire"), None)
        flag = self.ref(operands[0], "flag")
        if sem_scope is None or flag is None:
            return None
        return ir.FlagOp("ld", flag, "", (), "", sem_scope[0], sem_scope[1], span)  # type: ignore[arg-type]

    def _spin(self, kind: str, name: str, span, quals, operands):
        sem_scope = self._global_sem_scope(name, quals, span, ("relaxed", "acquire"), None)
        cond = self._flag_cond(name, operands[0], span)
        if sem_scope is None or cond is None:
            return None
        flag, cmp, value = cond
        return ir.FlagOp(kind, flag, "", (value,), cmp, sem_scope[0], sem_scope[1], span)  # type: ignore[arg-type]

    def op_wait_until(self, span, quals, operands, clauses):
        return self._spin("wait", "wait.until", span, quals, operands)

    def let_flag(self, t: Tree, ctx) -> list[ir.Stmt]:
        """`let v = atom.OP[.SEM] F, V;` or `let v = ld.SEM F;`: the operation as a statement would build it,
        its result kept in ``v`` (ir.Let with the FlagOp as its ``probe``). Where ``v`` may be used is
        semantics/families/flag_values.py's check (SV806)."""
        name, word, *rest = t.children
        quals, operands = [q for q in rest if isinstance(q, Token)], rest[-1]
        head = Tree("opname", [Token("NAME", str(word)), *quals], meta=t.meta)
        op = self.op(Tree("op", [head, operands], meta=t.meta), ctx)
        self.bind(name)
        if not isinstance(op, ir.FlagOp):
            return []
        return [ir.Let(str(name), ir.Const(0, self.span(t)), self.span(t), op)]

    def op_probe(self, span, quals, operands, clauses):
        return self._spin("probe", "probe", span, quals, operands)

    def _thread_fence(self, sem: str, span, quals):
        scopes = [q[1:] for q in quals]
        if len(scopes) != 1:
            self.error("SV110", f"`fence.{sem}` takes a scope: `fence.{sem}.gpu` (`__threadfence()` is fence.sc.gpu)",
                       span)
            return None
        return ir.ThreadFence(sem, scopes[0], span)  # type: ignore[arg-type]

    def op_fence_acq_rel(self, span, quals, operands, clauses):
        return self._thread_fence("acq_rel", span, quals)

    def op_fence_sc(self, span, quals, operands, clauses):
        return self._thread_fence("sc", span, quals)

    def op_grid_sync(self, span, quals, operands, clauses):
        return ir.GridSync(span)

    def op_clc_try_cancel(self, span, quals, operands, clauses):
        """`clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [resp], [bar]`:
        PTX: it "asynchronously writes an opaque response to shared memory" (16 bytes) and on completion
        performs a complete-tx "with completeCount argument equal to amount of data stored in bytes" on
        the mbarrier: the same asynchronous write and completion as a bulk copy of 16 bytes into RESP
        (ir.TmaLoad). The thread's own `arrive.expect_tx BAR bytes 16` is written separately, as CUTLASS's
        CLC pipeline does (`producer_acquire` on PipelineCLCFetchAsync)."""
        buf = self.ref(operands[0], "buffer")
        bar = self.ref(clauses["target"], "mbarrier")
        if buf is None or bar is None:
            return None
        if self.buffers[buf.name].bytes != 16:
            self.error("SV107", f"the response of clc.try_cancel is 16 bytes; `{buf.name}` has "
                       f"{self.buffers[buf.name].bytes}", span)
            return None
        return ir.TmaLoad(buf, ir.Const(16, span), bar, None, span, clc=True)

    def global_access(self, kind: str, span, t: Tree | Token, clauses: dict):
        """`read`/`write` of a global buffer: one copy for the whole grid; no `@ CTA`."""
        if "remote" in clauses:
            self.error("SV108", "a global buffer is one for the whole grid: `@ CTA` names shared memory of a peer",
                       self.span(clauses["remote"]))
            return None
        buf = self.ref(t, "global buffer")  # type: ignore[arg-type]
        if buf is None:
            return None
        part, lo, hi = self._region(buf, clauses)
        return ir.Access(kind, buf, None, span, part, lo, hi)  # type: ignore[arg-type]
