"""One warp's execution with a parameter left symbolic, and its loop over that parameter kept as a loop.

`SymWarpRun` is the concrete executor with values derived from the symbolic
parameter N carried as Z3 terms (symvalues.py). Its modes:

* ``pre``: a term decides a branch or a guard only when Z3 proves the outcome
  the same for every N under the assumption A; a term read by anything else
  (an address, a parity, a count) is its value when Z3 proves it constant,
  else unknown. A branch whose two outcomes are both possible is either the
  exit test of a natural loop (loops.py) -- the warp then enters ``loop`` mode
  and stays in the loop -- or handled as an unknown branch (skipped when no
  synchronization is on its paths, else refused).
* ``loop``: every iteration stays in the loop. At each arrival at the loop head
  the warp's state is recorded: its registers live there, SIMT stack, exited
  lanes, local memory. Registers holding terms are the *counters*; the rest of
  the state is compared exactly, and the first repeat gives the transient j0
  and the period P. No term is turned into a number in this mode (a term read
  by anything but arithmetic is unknown), so the execution from a head state
  is the same function of its concrete part in every iteration: the counters
  can only reach other counters and the exit test.
* ``generic``: one period run again from the head state of iteration j0 with
  every counter c replaced by c(j0) + q * D, q a fresh variable and D the
  counter's change over one period (proved constant). The counters after the
  period must be c(j0) + (q + 1) * D (induction on q), and the exit test of
  iteration j0 + qP + s is obtained as a term in N and q.
* ``suffix``: from the head state of iteration j0 + s, the exit is taken at the
  exit test and the warp runs to its end, its counters unknown (their value at
  the real exit is not that of iteration j0 + s).

Nothing is guessed: whatever cannot be shown raises a `Refusal` naming the PTX
and CUDA line.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from .cfg import Cfg
from .execute import WarpRun
from .launch import PARAM_BASE, Event, Launch, Memory, Refusal, _bits, lanes_of
from .loops import ExitTest, loop_info
from .parse import Function, Instr, Module, Name, NegName, Operand, Vec
from .symvalues import Sym, SymCtx, as_term
from .values import UNKNOWN, Value, compute
from .warp import _Entry

MAX_PERIOD = 64
MAX_TRANSIENT = 64
_SYM_BASES = {"mov", "add", "sub", "mul", "mad", "neg", "not", "min", "max", "and", "or", "xor", "shl", "shr",
              "div", "rem", "cvt", "selp", "setp"}


class _Stop(Exception):
    """Unwinds the executor once the loop's period (or the generic period) has been recorded."""


class Split(Exception):
    """A branch before the loop that would be refused is decided on either side of N = at (a zero-trip
    guard: `k_tile_count > 1` decides the consumer's mainloop): the range of N is split there."""

    def __init__(self, at: int, refusal: Refusal):
        super().__init__(at)
        self.at, self.refusal = at, refusal


@dataclass
class Snap:
    """A warp's state at an arrival at the loop head."""

    regs: dict[str, list[Value | Sym]]
    stack: list[tuple[int, int, int]]
    exited: int
    local: list[dict[int, int]]
    local_unknown: list[bool]
    nevents: int


class SymWarpRun(WarpRun):
    """A warp of the kernel with the symbolic parameter's terms (see the module docstring)."""

    forks_probes = False  # its loop snapshots follow one path: a probe's two outcomes are not run (probe.py)

    def __init__(self, *args: object, ctx: SymCtx, **kw: object):
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.ctx = ctx
        self.mode = "pre"
        self.test: ExitTest | None = None
        self.snaps: list[Snap] = []
        self.keys: list[object] = []
        self.preds: list[Sym] = []  # the exit test's term at each evaluation in loop/generic mode
        self.evals = 0  # evaluations of the exit test since the last head arrival
        self.period: tuple[int, int] | None = None  # (j0, P)
        self.entry: Snap | None = None
        self.generic_heads = 0
        self.forced = False
        self._owner: SymWarpRun = self
        self._sym_unknown_at = -1  # the pc where a term was last read as unknown (for the refusal's reason)
        self._undecided: dict[int, Sym] = {}  # branch pc -> its undecided predicate (for a split of N's range)

    # ---- values: terms stay in the registers; everything but arithmetic sees numbers or UNKNOWN ----

    def _plain(self, v: Value | Sym) -> Value:
        if isinstance(v, Sym):
            got = self.ctx.constant(v) if self.mode in ("pre", "suffix") else UNKNOWN
            if got is UNKNOWN:
                self._sym_unknown_at = self.pc
            return got
        return v

    def refuse(self, ins: Instr, why: str) -> Refusal:
        """A refusal that says so when the unknown value came from the symbolic parameter."""
        if self._sym_unknown_at == self.pc and self.cfg.body[self.pc] is ins:
            name = self.ctx.param.show()
            if self.mode in ("loop", "generic"):
                why += (f"; the value is derived from the loop counter of the loop over the symbolic parameter "
                        f"{name} (exit test at PTX line {self.cfg.body[self.test.branch].line if self.test else '?'}"
                        "): in a loop kept as a loop only the exit test and other counters may depend on the "
                        "counter")
            else:
                why += f"; the value is derived from the symbolic parameter {name} and is not the same for every N"
                pred = self._undecided.get(self.pc)
                if pred is not None and self.mode == "pre" and self._owner is self:
                    at = self.ctx.threshold(pred)
                    if at is not None:
                        raise Split(at, super().refuse(ins, why))
        return super().refuse(ins, why)

    def raw(self, op: Operand, lane: int) -> Value | Sym:
        if isinstance(op, Name):
            r = self.regs.get(op.name)
            if r is not None:
                return r[lane]
        if isinstance(op, NegName):
            r = self.regs.get(op.name)
            if r is not None and isinstance(r[lane], Sym):
                return Sym(~r[lane].expr, 1)  # type: ignore[union-attr]
        return WarpRun.read(self, op, lane)

    def read(self, op: Operand, lane: int) -> Value:
        return self._plain(self.raw(op, lane))

    def column(self, op: Operand, lane_list: list[int]) -> list[Value]:
        return [self._plain(v) for v in super().column(op, lane_list)]

    def write(self, op: Operand, lane: int, v: Value | Sym, bits: int = 64) -> None:  # type: ignore[override]
        if isinstance(v, Sym) and isinstance(op, Name) and op.name != "_":
            t = as_term(v, bits)
            self.regs.setdefault(op.name, [UNKNOWN] * 32)[lane] = Sym(t, bits)  # type: ignore[arg-type]
            return
        super().write(op, lane, self._plain(v) if isinstance(v, Sym) else v, bits)

    def _load_param(self, a: int, size: int) -> Value:
        k, off = divmod(a - PARAM_BASE, 1 << 32)
        sp = self.ctx.param
        if sp.name in (self.param_names[k], str(k)):
            length = self.ctx.bits // 8
            if off < sp.off + length and sp.off < off + size:
                if (off, size) == (sp.off, length):
                    return Sym(self.ctx.n, self.ctx.bits)  # type: ignore[return-value]
                return UNKNOWN
        return super()._load_param(a, size)

    def execute(self, ins: Instr, lanes: int) -> None:
        ops = ins.operands
        if ins.base in _SYM_BASES and len(ops) >= 2 and any(
                isinstance(self.raw(op, lane), Sym) for op in ops[1:] if isinstance(op, Name | NegName)
                for lane in lanes_of(lanes)):
            self._sym_execute(ins, lanes)
            return
        super().execute(ins, lanes)

    def _sym_execute(self, ins: Instr, lanes: int) -> None:
        ops = ins.operands
        if any(isinstance(op, Vec) for op in ops):
            self.havoc(ins, lanes)
            return
        dst = ops[0]
        bits = _width(ins)
        for lane in lanes_of(lanes):
            srcs = [self.raw(op, lane) for op in ops[1:]]
            if any(isinstance(s, Sym) for s in srcs):
                v = self.ctx.compute(ins.base, ins.mods, srcs, self.mode in ("pre", "suffix"))
            else:
                got = compute(ins.base, ins.mods, srcs)  # type: ignore[arg-type]
                v = UNKNOWN if got is None else got
            out_bits = v.bits if isinstance(v, Sym) else 1 if ins.base == "setp" else bits
            if ins.base == "setp" and not isinstance(dst, Name):
                first, second = getattr(dst, "first", None), getattr(dst, "second", None)
                if first is None:
                    self.havoc(ins, 1 << lane)
                    continue
                self.write(Name(first), lane, v, 1)
                neg: Value | Sym = UNKNOWN if v is UNKNOWN else (
                    Sym(~v.expr, 1) if isinstance(v, Sym) else int(not v))
                self.write(Name(second), lane, neg, 1)
            else:
                self.write(dst, lane, v, out_bits)

    # ---- control flow --------------------------------------------------------------------------

    def _guard(self, ins: Instr, active: int) -> tuple[int, int]:
        me = self._owner is self
        if me and self.test is not None and self.pc == self.test.head and self.mode in ("loop", "generic"):
            self._at_head()
        if me and self.mode == "suffix" and self.test is not None and self.pc == self.test.branch \
                and not self.forced:
            self.forced = True
            return (0 if self.test.stay_taken else active), 0
        if ins.guard is None:
            return active, 0
        lanes = lanes_of(active)
        vals = [self.raw(Name(ins.guard), lane) for lane in lanes]
        if not any(isinstance(v, Sym) for v in vals):
            return super()._guard(ins, active)
        if me and self.mode in ("loop", "generic") and self.test is not None and self.pc == self.test.branch:
            self._exit_test(ins, vals)
            return (active if self.test.stay_taken else 0), 0
        run, unknown = 0, 0
        undecided = False
        for lane, v in zip(lanes, vals, strict=True):
            b = self.ctx.decide(v) if isinstance(v, Sym) and self.mode in ("pre", "suffix") else \
                None if isinstance(v, Sym) else (None if v is UNKNOWN else bool(v))
            if b is None:
                unknown |= 1 << lane
                undecided = undecided or isinstance(v, Sym)
                if isinstance(v, Sym):
                    self._sym_unknown_at = self.pc
                    self._undecided[self.pc] = v
            elif b != ins.guard_neg:
                run |= 1 << lane
        if undecided and me and ins.base == "bra":
            test = loop_info(self.cfg).exit_test(self.pc)
            if test is not None and self.mode == "suffix":
                raise self.refuse(ins, "a second loop whose trip count depends on the symbolic parameter "
                                  f"{self.ctx.param.show()} (after the one at PTX line "
                                  f"{self.cfg.body[self.test.branch].line if self.test else '?'}); one loop per "
                                  "warp is kept as a loop")
            if test is not None and self.mode == "pre":
                self.entry = self.snapshot()  # the state where the loop can be left at once (T = 0)
                self.test, self.mode, self.evals = test, "loop", 0
                self._exit_test(ins, vals)
                return (active if test.stay_taken else 0), 0
        return run, unknown

    def _exit_test(self, ins: Instr, vals: list[Value | Sym]) -> None:
        first = vals[0]
        if not isinstance(first, Sym) or any(not isinstance(v, Sym) or not z3.eq(v.expr, first.expr)
                                             for v in vals):
            raise self.refuse(ins, f"the lanes of the warp do not share the exit test of this loop over the "
                              f"symbolic parameter {self.ctx.param.show()}; the language has no lanes")
        assert self.test is not None
        # the condition for staying: the predicate, or its negation when staying is the other outcome
        pred = Sym(first.expr if self.test.stay_taken != ins.guard_neg else ~first.expr, 1)
        self.preds.append(pred)
        self.evals += 1

    def _at_head(self) -> None:
        if self.mode == "generic":
            self.generic_heads += 1
            if self.generic_heads > 1 and self.evals != 1:
                raise self.refuse(self.cfg.body[self.pc], "an iteration of this loop does not evaluate its exit "
                                  "test exactly once")
            self.evals = 0
            if self.period is not None and self.generic_heads == self.period[1] + 1:
                self.snaps.append(self.snapshot())
                raise _Stop
            return
        if self.evals != 1:
            raise self.refuse(self.cfg.body[self.pc], "an iteration of this loop does not evaluate its exit "
                              "test exactly once")
        self.evals = 0
        snap = self.snapshot()
        key = self.key(snap)
        j = len(self.snaps)
        self.snaps.append(snap)
        self.keys.append(key)
        for i in range(max(0, j - MAX_PERIOD), j):
            if self.keys[i] == key:
                self.period = (i, j - i)
                raise _Stop
        if j >= MAX_PERIOD + MAX_TRANSIENT:
            raise self.refuse(self.cfg.body[self.pc], f"the state at the head of this loop over the symbolic "
                              f"parameter {self.ctx.param.show()} does not repeat within {MAX_PERIOD} iterations "
                              f"after {MAX_TRANSIENT}{self._growing()}")

    def _growing(self) -> str:
        """The registers that never repeat at the loop head: counters of the iteration that reach
        synchronization (a stage computed from k), named for the refusal."""
        names = []
        for k in sorted(self.live()):
            seen = [tuple(("S", v.bits) if isinstance(v, Sym) else v for v in s.regs.get(k, ()))
                    for s in self.snaps[-MAX_PERIOD:]]
            if len(set(seen)) == len(seen):
                first = [s.regs[k][0] for s in self.snaps[:4] if k in s.regs]
                names.append(f"{k} ({', '.join(map(str, first))}, ...)")
        if not names:
            return ""
        return (f"; {', '.join(names[:3])}: each takes a new value in every iteration and can reach "
                "synchronization: a loop is kept only when its state repeats (the pipeline's stage and phase), "
                "the iteration count reaching nothing but the exit test")

    # ---- state ---------------------------------------------------------------------------------

    def snapshot(self) -> Snap:
        return Snap({k: list(v) for k, v in self.regs.items()},
                    [(e.pc, e.mask, e.rpc) for e in self.stack], self.exited,
                    [dict(m) for m in self.local], list(self.local_unknown), len(self.events))

    def restore(self, snap: Snap) -> list[_Entry]:
        self.regs = {k: list(v) for k, v in snap.regs.items()}
        self.exited = snap.exited
        self.local = [dict(m) for m in snap.local]
        self.local_unknown = list(snap.local_unknown)
        self.events = []
        return [_Entry(*e) for e in snap.stack]

    def live(self) -> frozenset[str]:
        """The registers the head state consists of: live there and able to reach synchronization."""
        assert self.test is not None
        info = loop_info(self.cfg)
        return info.live_at(self.test.head) & info.relevant(bool(self.launch.zero_global))

    def key(self, snap: Snap) -> object:
        """The concrete part of a head state: live registers (a term is only marked), stack, lanes."""
        regs = tuple((k, tuple(("S", v.bits) if isinstance(v, Sym) else v for v in snap.regs[k]))
                     for k in sorted(self.live()) if k in snap.regs)
        local = tuple(tuple(sorted(m.items())) for m in snap.local)
        return regs, tuple(snap.stack), snap.exited, local, tuple(snap.local_unknown)


def _width(ins: Instr) -> int:
    return _bits(ins.mods)


@dataclass(frozen=True)
class WarpLoop:
    """A warp's loop over the symbolic parameter, kept as a loop.

    With T the number of times the exit test stays in the loop after the first
    evaluation whose outcome depends on N (T = trip(N), a term), the warp's
    events are: for T <= j0, `early[T]` (run exactly: from the state where that
    exit is taken, every term as it is there); for T - 1 = j0 + qP + s (q >= 0,
    0 <= s < P), `pre + body * q + mids[s] + suffixes[s]` (`events_for`).
    """

    test: ExitTest
    instr: Instr
    j0: int
    period: int
    pre: tuple[Event, ...]
    body: tuple[Event, ...]
    mids: tuple[tuple[Event, ...], ...]
    suffixes: tuple[tuple[Event, ...], ...]
    trip: z3.BitVecRef  # T as a function of N (64 bits, nonnegative)
    trip_text: str
    early: tuple[tuple[Event, ...], ...]

    def events_for(self, t: int) -> list[Event]:
        """The warp's events when its loop stays t times."""
        if t <= self.j0:
            return list(self.early[t])
        q, s = divmod(t - 1 - self.j0, self.period)
        return [*self.pre, *self.body * q, *self.mids[s], *self.suffixes[s]]


WarpResult = tuple[Event, ...] | WarpLoop


class WarpAnalysis:
    """Runs one warp symbolically and, when it enters a loop over N, keeps that loop (see module doc)."""

    def __init__(self, mod: Module, fn: Function, cfg: Cfg, mem: Memory, launch: Launch, rank: int,
                 ctaid: tuple[int, int, int], warp: int, params: dict[str, tuple[bytes | None, bytes | None]],
                 ctx: SymCtx):
        self.args = (mod, fn, cfg, mem, launch, rank, ctaid, warp, params)
        self.ctx = ctx

    def fresh(self) -> SymWarpRun:
        return SymWarpRun(*self.args, ctx=self.ctx)

    def run(self) -> WarpResult:
        w = self.fresh()
        try:
            return tuple(w.run())
        except _Stop:
            pass
        assert w.period is not None and w.test is not None
        j0, p = w.period
        instr = w.cfg.body[w.test.branch]
        snaps = w.snaps
        counters = self._counters(w, snaps[j0], snaps[j0 + p], instr)
        q = z3.BitVec("q", 64)
        g_preds = self._generic(w, snaps[j0], counters, q, instr)
        trip, text = self._trip(w, j0, p, g_preds, q, instr)
        events = w.events
        start = snaps[j0].nevents
        mids = tuple(tuple(events[start: snaps[j0 + s].nevents]) for s in range(p))
        # after the loop, a term is decided for every N whose trip count is in the suffix's residue class
        suffixes = tuple(self._suffix(w, snaps[j0 + s], counters,
                                      z3.And(z3.URem(trip - (j0 + 1 + s), p) == 0, trip >= j0 + 1 + s))
                         for s in range(p))
        assert w.entry is not None
        # exits before the period: from the state where each is taken, which is that of every N exiting there
        early = tuple(tuple(events[: (w.entry if t == 0 else snaps[t - 1]).nevents])
                      + self._suffix(w, w.entry if t == 0 else snaps[t - 1], {}, trip == t) for t in range(j0 + 1))
        # (an exit no N takes has no events: () -- symextract.py writes no protocol for its trip counts)
        return WarpLoop(w.test, instr, j0, p, tuple(events[:start]),
                        tuple(events[start: snaps[j0 + p].nevents]), mids, suffixes, trip, text, early)

    def _counters(self, w: SymWarpRun, a: Snap, b: Snap, instr: Instr) -> dict[tuple[str, int], Sym]:
        """Per live register and lane holding a term: its change over one period, proved constant."""
        out: dict[tuple[str, int], Sym] = {}
        for name in sorted(w.live()):
            for lane, (x, y) in enumerate(zip(a.regs.get(name, []), b.regs.get(name, []), strict=False)):
                if not isinstance(x, Sym):
                    continue
                assert isinstance(y, Sym) and y.bits == x.bits  # the keys matched
                d = self.ctx.constant(Sym(y.expr - x.expr, x.bits))
                if d is UNKNOWN:
                    raise w.refuse(instr, f"register {name} changes by a non-constant amount over a period of "
                                   f"this loop over the symbolic parameter {self.ctx.param.show()} ({x.expr} "
                                   f"then {y.expr}); only counters that change by a constant are kept")
                out[(name, lane)] = Sym(z3.BitVecVal(d, x.bits), x.bits)  # type: ignore[arg-type]
        return out

    def _generic(self, w: SymWarpRun, start: Snap, counters: dict[tuple[str, int], Sym], q: z3.BitVecRef,
                 instr: Instr) -> list[Sym]:
        """One period from iteration j0 with the counters at c(j0) + q*D; returns the exit tests' terms."""
        assert w.period is not None
        g = self.fresh()
        g.mode, g.test, g.period = "generic", w.test, w.period
        stack = g.restore(start)
        for (name, lane), d in counters.items():
            x = start.regs[name][lane]
            assert isinstance(x, Sym)
            qb = z3.Extract(x.bits - 1, 0, q) if x.bits < 64 else q
            g.regs[name][lane] = Sym(x.expr + qb * d.expr, x.bits)
        try:
            g.run(stack)
            raise w.refuse(instr, "the loop left before one period could be run again")
        except _Stop:
            pass
        end = g.snaps[-1]
        if w.key(end) != w.key(start):
            raise w.refuse(instr, "one period of this loop run with its counters symbolic does not come back "
                           "to the same state")
        body = w.events[start.nevents: w.snaps[w.period[0] + w.period[1]].nevents]
        if [(e.kind, e.args, e.lanes, e.instr) for e in g.events] != [(e.kind, e.args, e.lanes, e.instr)
                                                                      for e in body]:
            raise w.refuse(instr, "one period of this loop run with its counters symbolic synchronizes "
                           "differently from the recorded one")
        qrange = z3.And(z3.UGE(q, 0), z3.ULT(q, 1 << 31))
        for (name, lane), d in counters.items():
            x, y = start.regs[name][lane], end.regs[name][lane]
            assert isinstance(x, Sym) and isinstance(y, Sym)
            qb = z3.Extract(x.bits - 1, 0, q) if x.bits < 64 else q
            if not self.ctx.holds(y.expr == x.expr + (qb + 1) * d.expr, qrange):
                raise w.refuse(instr, f"register {name} does not advance by the same amount in every period "
                               f"of this loop over the symbolic parameter {self.ctx.param.show()}")
        return g.preds

    def _trip(self, w: SymWarpRun, j0: int, p: int, g_preds: list[Sym], q: z3.BitVecRef,
              instr: Instr) -> tuple[z3.BitVecRef, str]:
        """T(N) = (a*N + b) / d, fitted on small N and proved with Z3: the exit test at evaluation t stays
        in the loop exactly when t < T(N), for every t <= T(N) and every N under A."""
        ctx = self.ctx
        rec = w.preds[: j0 + 1]  # evaluation 0 (the first undecided one) and iterations 0..j0-1
        if len(g_preds) != p:
            raise w.refuse(instr, "an iteration of this loop does not evaluate its exit test exactly once")

        def stays(n: int, t: int) -> bool:
            if t <= j0:
                e = z3.substitute(rec[t].expr, (ctx.n, z3.BitVecVal(n, ctx.bits)))
            else:
                qq, s = divmod(t - j0 - 1, p)
                e = z3.substitute(g_preds[s].expr, (ctx.n, z3.BitVecVal(n, ctx.bits)), (q, z3.BitVecVal(qq, 64)))
            v = z3.simplify(e)
            return z3.is_bv_value(v) and v.as_long() == 1

        def trip_at(n: int) -> int | None:
            """The first evaluation that leaves the loop at N = n (found by doubling, then bisection)."""
            if not stays(n, 0):
                return 0
            lo, hi = 0, 1
            while stays(n, hi):
                lo, hi = hi, hi * 2
                if hi > 1 << 24:
                    return None
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if stays(n, mid) else (lo, mid)
            return hi

        lo_n = ctx.param.lo
        ns = [lo_n + i for i in range(8)] + [lo_n + 97 * i for i in range(1, 6)] + [lo_n + 1009, lo_n + 4099]
        samples = [(n, trip_at(n)) for n in ns]
        if any(t is None for _n, t in samples):
            raise w.refuse(instr, "the trip count of this loop over the symbolic parameter could not be found")
        n64 = z3.SignExt(64 - ctx.bits, ctx.n) if ctx.bits < 64 else ctx.n
        qrange = z3.ULT(q, 1 << 31)
        for d in range(1, 1025):
            for a in range(1, 5):
                lo_b = max(d * t - a * n for n, t in samples)  # type: ignore[operator]
                hi_b = min(d * t - a * n + d - 1 for n, t in samples)  # type: ignore[operator]
                if lo_b > hi_b or a * lo_n + lo_b < 0:
                    continue
                b = lo_b
                u = (a * n64 + b) / d  # nonnegative: truncation is the floor
                # the proofs below range q over [0, 2^31): every evaluation up to T(N) must lie in it
                ok = ctx.holds(u < (1 << 31) * p + j0 + 1) and all(
                    ctx.holds((rec[t].expr == 1) == (t < u), z3.ULE(t, u)) for t in range(j0 + 1))
                for s in range(p):
                    t = q * p + (j0 + 1 + s)
                    ok = ok and ctx.holds((g_preds[s].expr == 1) == (t < u), qrange, z3.ULE(t, u))
                if ok:
                    num = f"{a} * N" if a != 1 else "N"
                    num += f" + {b}" if b > 0 else f" - {-b}" if b < 0 else ""
                    text = num if d == 1 else f"({num}) / {d}"
                    return u, text  # a 64-bit term: the questions about it stay in bit-vector logic
                break  # the fitted b failed: a larger a cannot fit the same samples with this d
        raise w.refuse(instr, f"the trip count of this loop over the symbolic parameter {ctx.param.show()} is "
                       "not of the form (a*N + b) / d for every N (checked with Z3)")

    def _suffix(self, w: SymWarpRun, snap: Snap, counters: dict[tuple[str, int], Sym],
                cond: z3.BoolRef) -> tuple[Event, ...]:
        """The warp's events after leaving the loop at its next exit test from `snap`, for every N that
        satisfies `cond` (those whose trip count leaves there); the counters that change over a period are
        unknown (the state stands for every iteration of its residue)."""
        if not self.ctx.possible(cond):
            return ()
        s = self.fresh()
        s.ctx = self.ctx.under(cond)
        s.mode, s.test = "suffix", w.test
        stack = s.restore(snap)
        for (name, lane), d in counters.items():
            if z3.simplify(d.expr).as_long() != 0:  # type: ignore[attr-defined]
                s.regs[name][lane] = UNKNOWN
        return tuple(s.run(stack))
