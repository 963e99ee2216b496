"""What a step touches: the barrier elements, CTAs and mbarrier events of an instruction.

The model says what can happen; a search decides what to explore. To decide it without stepping
every process (engines/reduction/: which step may be taken alone), the search asks the model what
a step reads, writes, arrives on and waits for — per barrier element, per CTA, and as the mbarrier
events a process's operations make from where it stands. Those queries are facts of the program
and the machine's layout, not of any search, so they live here, beside the families that execute
the operations: the machine offers them as public methods (the Footprint mixin), and the events'
vocabulary (``_EV_*``) is shared with whoever reads them.
"""

from __future__ import annotations

from .. import ir
from ..expr import Context, EvalError, evaluate
from .core import _MEMO_LIMIT, Violation
from .families.mbarrier_wait import wait_commutes
from .footprint_probe import kept_probe_future
from .hooked_local import remembered
from .program import END, OP, Instr
from .state import M_OBSERVED, P_PC, P_VARS, State

# The kinds of mbarrier event an operation makes (see Footprint.future)
_EV_WAIT, _EV_ARRIVE, _EV_BYTES, _EV_FREE, _EV_LIFE, _EV_NAMED = range(6)
_END = ("end",)  # the events of a process's end
_MISSING = object()

Element = tuple[str, int | None]  # an element of a barrier or buffer array; index None: any element of it


def ref_element(ref: ir.Ref, env: dict, ctx: Context) -> Element:
    """The element of a barrier or buffer array a reference names under ``env`` (None: not evaluable
    there, or `[*]`: any element)."""
    if ref.every:
        return (ref.name, None)
    if ref.index is None:
        return (ref.name, 0)
    try:
        return (ref.name, evaluate(ref.index, env, ctx))
    except EvalError:
        return (ref.name, None)


def touches(ahead: frozenset[Element], name: str, index: int | None) -> bool:
    """May an operation in ``ahead`` touch element ``index`` of array ``name`` (None: any element)?"""
    if index is None:
        return any(n == name for n, _ in ahead)
    return (name, None) in ahead or (name, index) in ahead


class Footprint:
    """What the steps of a Machine touch, asked without taking them (a mixin of Machine)."""

    def arrive_target(self, state: State, p: int, cta: int | None = None) -> int | None:
        """The barrier index of process p's arrive (on ``cta``, default its own CTA), or None when
        it cannot be evaluated (the step reports that). Remembered: it depends only on (p, pc, vars)."""
        pstate = state.procs[p]
        key = (p, pstate[P_PC], pstate[P_VARS])
        if key not in self._arrive_bar_memo:
            bar = self.programs[p].code[pstate[P_PC]].op.bar
            try:
                self._arrive_bar_memo[key] = self._mbar(None, p, bar, self.procs[p].cta if cta is None else cta,
                                                        self.env(p, pstate[P_VARS]), self.ctx[p])
            except Violation:
                self._arrive_bar_memo[key] = None
        return self._arrive_bar_memo[key]

    def targets(self, p: int, op: ir.Op, pc: int, vars_: tuple) -> tuple[int, ...] | None:
        """The CTAs that an arrive, access, bulk-tensor load or tensor-core commit of process
        p reaches, under its variables (None when they cannot be evaluated or are out of range:
        the step itself reports that). Remembered: it depends only on (p, pc, vars)."""
        key = (p, pc, vars_)
        if key in self._target_memo:
            return self._target_memo[key]
        own = self.procs[p].cta
        out: tuple[int, ...] | None
        try:
            env, ctx = self.env(p, vars_), self.ctx[p]
            if isinstance(op, ir.MbarArrive | ir.Access):
                out = (own,) if op.remote is None else (evaluate(op.remote, env, ctx),)
            elif op.multicast is not None:  # TmaLoad, UmmaCommit
                mask = evaluate(op.multicast, env, ctx)
                out = tuple(c for c in range(self.ncta) if mask >> c & 1)
                if not 0 < mask < 1 << self.ncta:
                    out = None
            else:
                out = (own,)
        except EvalError:
            out = None
        if out is not None and isinstance(op, ir.TmaLoad) and op.cta_group == 2:
            out = tuple(sorted({*out, *(d & ~1 for d in out)}))  # a 2-SM copy signals the pair leader's barrier
        if out is not None and not all(0 <= d < self.ncta for d in out):
            out = None
        self._target_memo[key] = out
        return out

    def future(self, key: tuple) -> tuple[tuple, tuple | None] | None:
        """The mbarrier events of the instruction at ``key`` = (process, pc, variables), and the
        key of the process's next instruction: (_END, None) at the end; None when a target or
        the local control flow after it cannot be evaluated. It depends only on the key (control
        flow depends only on loop variables), so it is remembered.

        Events: (_EV_WAIT, m, parity), (_EV_ARRIVE, m, arrivals, tx) for an arrival that adds tx
        to the tx-count with it (0 but for an arrive.expect_tx), (_EV_BYTES, m, tx) for a tx update
        or a copy that will count on m (tx: the change it makes, 0 for an arrive.expect_tx, whose
        bytes its arrival carries; one per copy: a copy issued by n threads is n of them), (_EV_FREE,
        m) for an arrive_drop or a non-positive count,
        (_EV_LIFE, (cta, name)) for an init or inval; (_EV_NAMED, index, count, site, sync) for a
        named-barrier arrival (see named_arrival), which only the named-barrier rule reads
        (engines/reduction/named.py).

        Under a loop hook the next key is the hook's answer for its trip count of the moment, and
        each test is to be recorded by the hook when made: there it is remembered with the tests it
        asked, and used again only where the hook decides them alike (semantics/hooked_local.py)."""
        if self.loop_hook is not None:
            return remembered(self, self._hooked_future_memo, key, lambda: self._future(key))
        out = self._future_memo.get(key, _MISSING)
        if out is _MISSING:
            out = self._future(key)
            if len(self._future_memo) >= _MEMO_LIMIT:
                self._future_memo.clear()
            self._future_memo[key] = out
        return out

    def _future(self, key: tuple) -> tuple[tuple, tuple | None] | None:
        """``future`` computed."""
        q, pc, vars_ = key
        ins = self.programs[q].code[pc]
        try:
            if ins.kind == END:
                out = (_END, None)
            elif ins.kind == OP and (isinstance(ins.op, ir.MbarProbe) or ins.slot >= 0):
                # a probe's result picks the next instruction (families/mbarrier_probe.py), as does a value
                # read from a flag (families/flag_values.py): the sequence from here is not fixed, so it is
                # unknown, as one not evaluable is; but a kept probe whose false outcome's sequence covers
                # the true one's stands for both as that sequence (footprint_probe.py)
                out = kept_probe_future(self, key, _EV_WAIT)
            else:
                events = self.events(q, ins, vars_) if ins.kind == OP else ()
                npc, nvars = self._run_local(q, pc + 1, vars_)
                out = (events, (q, npc, nvars))
        except (EvalError, Violation, KeyError):
            out = None
        return out

    def events(self, q: int, ins: Instr, vars_: tuple) -> tuple:
        """The mbarrier events of operation ``ins`` of process q under its variables (see future)."""
        op = ins.op
        env, ctx = self.env(q, vars_), self.ctx[q]
        own = self.procs[q].cta

        def index(ref: ir.Ref, cta: int) -> int:
            i = evaluate(ref.index, env, ctx) if ref.index is not None else 0
            if not 0 <= i < (self.mb_decl[ref.name].size or 1) or not 0 <= cta < self.ncta:
                raise KeyError(ref.name)
            return self.mb_index[(cta, ref.name, i)]

        def dests(mask_expr: ir.Expr | None) -> list[int]:
            if mask_expr is None:
                return [own]
            mask = evaluate(mask_expr, env, ctx)
            if not 0 < mask < 1 << self.ncta:
                raise KeyError("multicast")
            return [c for c in range(self.ncta) if mask >> c & 1]

        if isinstance(op, ir.MbarWait):
            return ((_EV_WAIT, index(op.bar, own), evaluate(op.parity, env, ctx)),)
        if isinstance(op, ir.MbarArrive):
            cta = own if op.remote is None else evaluate(op.remote, env, ctx)
            m2 = index(op.bar, cta)
            count = evaluate(op.count, env, ctx) * ins.threads
            nbytes = 0 if op.tx_bytes is None else evaluate(op.tx_bytes, env, ctx) * ins.threads
            if op.drop or count <= 0:
                events = [(_EV_FREE, m2)]
                if op.tx_bytes is not None:
                    events.append((_EV_BYTES, m2, nbytes))
            else:
                events = [(_EV_ARRIVE, m2, count, nbytes)]
                if op.tx_bytes is not None:
                    events.append((_EV_BYTES, m2, 0))
            return tuple(events)
        if isinstance(op, ir.MbarTx):
            nbytes = evaluate(op.tx_bytes, env, ctx) * ins.threads
            m2 = index(op.bar, own if op.remote is None else evaluate(op.remote, env, ctx))
            return ((_EV_BYTES, m2, nbytes if op.kind == "expect" else -nbytes),)
        if isinstance(op, ir.TmaLoad):
            nbytes = evaluate(op.tx_bytes, env, ctx)
            return tuple((_EV_BYTES, index(op.bar, c & ~1 if op.cta_group == 2 else c), -nbytes)
                         for c in dests(op.multicast) for _ in range(ins.threads))
        if isinstance(op, ir.UmmaCommit):
            return tuple((_EV_ARRIVE, index(op.bar, c), ins.threads, 0) for c in dests(op.multicast))
        if isinstance(op, ir.CpAsyncArrive):
            # .noinc: an arrival per thread; otherwise the increment nets the arrival out, and a
            # pending count that can rise bounds nothing (taken as free)
            m2 = index(op.bar, own)
            return ((_EV_ARRIVE, m2, ins.threads, 0),) if op.noinc else ((_EV_FREE, m2),)
        if isinstance(op, ir.MbarInit | ir.MbarInval | ir.MbarTestWait):
            # (a test_wait acquires or not depending on what came first: no step on its barrier
            # is taken alone while one can come first, as for a lifecycle change)
            return ((_EV_LIFE, (own, op.bar.name)),)
        if isinstance(op, ir.BarSync | ir.BarArrive):
            return ((_EV_NAMED, *self.named_arrival(q, op, vars_)),)
        return ()

    def element_of(self, p: int, ref: ir.Ref, vars_: tuple) -> Element:
        """The barrier element process p's reference names under its variables."""
        return ref_element(ref, self.env(p, vars_), self.ctx[p])

    def wait_cannot_be_lone(self, state: State, p: int) -> bool:
        """Is the step of process p's mbarrier wait certain not to say that it commutes with every
        other step (StepResult.lone False), asked without taking it? op_wait says so only for a wait
        that observes the last completed phase of a barrier whose completion another wait observed
        already (families/mbarrier_wait.py, wait_commutes: a function of the barrier as the step finds it).
        False: it may say so, or the wait's target cannot be evaluated (the step reports that)."""
        pstate = state.procs[p]
        key = (p, pstate[P_PC], pstate[P_VARS])
        target = self._wait_targets.get(key)
        if target is None:
            target = self._wait_targets[key] = self._wait_target(p, self.programs[p].code[pstate[P_PC]].op,
                                                                 pstate[P_VARS])
        if target is False:
            return False
        mb = state.mbars[target[0]]
        return not mb[M_OBSERVED] or not wait_commutes(mb, self.wait_intends(mb, p, target[1])[0])

    def wait_barrier(self, state: State, p: int) -> int:
        """The barrier index of process p's mbarrier wait, once the wait has been stepped in ``state``
        (the step remembers its target: families/mbarrier_wait.py, _wait_blocked)."""
        pstate = state.procs[p]
        return self._wait_targets[(p, pstate[P_PC], pstate[P_VARS])][0]


__all__ = ["Element", "Footprint", "ref_element", "touches"]
