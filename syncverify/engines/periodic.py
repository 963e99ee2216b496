"""When can "safe for ITERS = N" be lifted to every trip count? The lift's plan and its Z3 side conditions.

The unbounded method (``docs/engines.md``) runs the explicit semantics with the
trip count left symbolic and the loop counters stored modulo a period. That is
exact only for protocols of a particular shape, and this module decides whether
a protocol has it, without trusting the front end's folding:

* **Where the trip count occurs.** The protocol is loaded twice, with the
  param at ``BASE`` and ``BASE + 1``. Every compiled instruction of every
  process must be identical between the two, except the bounds of `for`
  loops, which may differ by exactly one (a bound ``ITERS + c``). Anything
  else (the param in a declaration, a condition, an index, a bound with a
  coefficient other than one) refuses the lift: the difference would be
  invisible to the abstraction.
* **Loop shape.** Per process, the first loop with a trip-count bound is the
  *main* loop: constant `lo`, `hi = ITERS + c`, not nested in any loop. Later
  ones must have both bounds ``ITERS + c`` (an epilogue with a fixed trip
  count, nvFuser's drain), again not nested. Their variables and the `let`s
  of the form ``k + c`` hold *counter values*; every other `let` that depends
  on a counter must be periodic itself.
* **Periodicity (Z3).** Every expression evaluated at or after the main loop
  that depends on a counter (lets inlined) must satisfy, for all values of the
  other variables, ``∀ k ≥ K: e(k + P) = e(k)`` — with every counter shifted
  by ``P`` at once. Candidate periods come from the constant divisors and
  moduli of each expression (their product; ``(k / S + 1) % 2`` gives ``2S``),
  thresholds ``K`` from 0 to ``MAX_THRESHOLD`` (``k == 0`` needs 1). Division
  and remainder are C's, encoded exactly; bitwise operators on counters, a
  non-constant divisor or a solver ``unknown`` refuse the lift. The solver
  runs with a resource limit and a fixed seed so that answers are repeatable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import z3

from .. import ir
from ..budget import solve
from ..diagnostics import InputError
from ..expr import Context, expressions_in, free_names
from ..lang import load
from ..semantics.machine import Machine
from ..semantics.program import BRANCH, FOR_INIT, FOR_NEXT, LET, OP, Instr, Program
from .carith import Unsupported, z3_term
from .overflow import CounterRange, Obligation, OverflowUnknown, first_overflow
from .tripcount import SettleRefusal, ancestors, settle_point

BASE = 1000  # the trip count the plan's machine is compiled with (large, so that no bound folds to a special case)
MAX_THRESHOLD = 4  # K: how long a prologue (`k == 0`, `k < 2`) the lift accepts
MAX_PERIOD = 1024
RLIMIT = 5_000_000  # Z3 resource units per obligation (deterministic, unlike a timeout)
SEED = 0


class Refusal(Exception):
    """The lift does not apply; the message says why (it ends up in the verdict's coverage)."""


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop with a trip-count bound, in one process's program. Bounds are ``lo`` (constant)
    or ``ITERS + lo_off``, and ``ITERS + hi_off``."""

    init_pc: int
    next_pc: int
    slot: int
    lo_off: int | None  # None: constant lo (the main loop)
    lo_const: int
    hi_off: int


@dataclass(frozen=True, slots=True)
class ProcPlan:
    main: Loop
    epilogues: tuple[Loop, ...]
    counter_slots: tuple[int, ...]  # loop variables and `let k + c` slots: they shift with the counters
    offsets: tuple[int, ...]  # per counter slot: c of `k + c` (0 for loop variables)
    live_from: tuple[int, ...]  # per counter slot: it holds a counter value once pc is past this FOR_INIT


@dataclass(frozen=True, slots=True)
class Plan:
    """How to run one protocol with its trip count symbolic."""

    param: str
    protocol: ir.Protocol  # compiled at ITERS = BASE; the hook maps its bounds to the symbolic ITERS
    period: int
    threshold: int  # K: every stored counter value stays >= K when counters are shifted down
    min_iters: int  # the smallest trip count the periodic search covers (the ones below: one by one, explicitly)
    procs: tuple[tuple[int, ProcPlan], ...]
    obligations: int  # periodicity facts proved
    settle: int = 0  # from this trip count on, every value derived from it is what it is at BASE
    max_iters: int | None = None  # the largest trip count no counter expression overflows at (None: all)
    overflow: str = ""  # why max_iters is what it is

    def proc_plans(self) -> dict[int, ProcPlan]:
        return dict(self.procs)


# ---------------------------------------------------------------------- finding the loops
def _const(e: ir.Expr | None) -> int | None:
    return e.value if isinstance(e, ir.Const) else None


def _programs(protocol: ir.Protocol) -> list[Program]:
    return Machine(protocol).programs


def _describe(ins: Instr) -> str:
    return f"line {ins.line}"


def _loops(prog_a: Program, prog_b: Program) -> list[Loop]:
    """The trip-count loops of one process, checked against the same program at BASE + 1."""
    if len(prog_a.code) != len(prog_b.code):
        raise Refusal("the trip count changes the structure of the program (it is used in a condition)")
    found: list[Loop] = []
    for pc, (a, b) in enumerate(zip(prog_a.code, prog_b.code, strict=True)):
        if a == b:
            continue
        if a.kind not in (FOR_INIT, FOR_NEXT) or (a.kind, a.slot, a.target, a.op) != (b.kind, b.slot, b.target, b.op):
            raise Refusal(f"the trip count is used outside a loop bound ({_describe(a)})")
        lo_a, lo_b, hi_a, hi_b = _const(a.expr), _const(b.expr), _const(a.expr2), _const(b.expr2)
        if a.kind == FOR_NEXT:
            if hi_a is None or hi_b is None or hi_b - hi_a != 1:
                raise Refusal(f"a loop bound is not of the form ITERS + c ({_describe(a)})")
            continue
        if lo_a is None or lo_b is None or hi_a is None or hi_b is None:
            raise Refusal(f"a loop bound is not constant ({_describe(a)})")
        if hi_b - hi_a != 1 or lo_b - lo_a not in (0, 1):
            raise Refusal(f"a loop bound is not of the form ITERS + c ({_describe(a)})")
        if prog_a.loops_at[pc]:
            raise Refusal(f"a trip-count loop is nested in another loop ({_describe(a)})")
        found.append(Loop(pc, a.target - 1, a.slot, (lo_a - BASE) if lo_b != lo_a else None, lo_a, hi_a - BASE))
    if not found:
        return found
    if found[0].lo_off is not None:
        raise Refusal("the first trip-count loop of a role starts at an ITERS-dependent bound")
    for loop in found[1:]:
        if loop.lo_off is None:
            raise Refusal("a role runs two loops of ITERS trips (one main loop per role is supported)")
    return found


# ---------------------------------------------------------------------- expressions
def _inline(e: ir.Expr, defs: Mapping[str, ir.Expr]) -> ir.Expr:
    match e:
        case ir.Var(name=n) if n in defs:
            return defs[n]
        case ir.UnOp(op=op, operand=x, span=span):
            return ir.UnOp(op, _inline(x, defs), span)
        case ir.BinOp(op=op, left=left, right=right, span=span):
            return ir.BinOp(op, _inline(left, defs), _inline(right, defs), span)
        case ir.Cond(cond=c, then=then, orelse=orelse, span=span):
            return ir.Cond(_inline(c, defs), _inline(then, defs), _inline(orelse, defs), span)
        case ir.Pick(name=n, values=values, index=index, per_cta=per_cta, span=span):
            return ir.Pick(n, values, _inline(index, defs), per_cta, span)
    return e


def _names(e: ir.Expr) -> set[str]:
    """The variables e reads (`let` and `for` names)."""
    return {n for n in free_names(e) if n not in ("cta", "instance") and not n.startswith("role:")}


def _affine_counter(e: ir.Expr, counters: set[str]) -> bool:
    """Is e of the form `k`, `k + c`, `c + k` or `k - c` for a counter k (a value that shifts with it)?"""
    match e:
        case ir.Var(name=n):
            return n in counters
        case ir.BinOp(op="+", left=left, right=right):
            return (_affine_counter(left, counters) and isinstance(right, ir.Const)) or \
                (_affine_counter(right, counters) and isinstance(left, ir.Const))
        case ir.BinOp(op="-", left=left, right=ir.Const()):
            return _affine_counter(left, counters)
    return False


def _divisor_product(e: ir.Expr) -> int:
    """The product of the constant divisors and moduli of e: a period candidate for it."""
    match e:
        case ir.Cond(cond=c, then=then, orelse=orelse):
            return _divisor_product(c) * _divisor_product(then) * _divisor_product(orelse)
        case ir.Pick(index=index):
            return _divisor_product(index)
        case ir.UnOp(operand=x):
            return _divisor_product(x)
        case ir.BinOp(op=op, left=left, right=right):
            own = abs(right.value) if op in ("/", "%") and isinstance(right, ir.Const) and right.value else 1
            return own * _divisor_product(left) * _divisor_product(right)
    return 1


def periodic(e: ir.Expr, counters: Mapping[str, int], ctx: Context, period: int, threshold: int,
             rlimit: int = RLIMIT) -> bool | None:
    """Does e(v + P) = e(v) hold for all values of the counters v ≥ K + offset(v) (shifted together)
    and of every other variable? None: Z3 could not tell within its resource limit."""
    names = sorted(_names(e))
    base = {n: z3.Int(n) for n in names}
    shifted = {n: (v + period if n in counters else v) for n, v in base.items()}
    try:
        now, later = z3_term(e, base, ctx), z3_term(e, shifted, ctx)
    except Unsupported:
        return False
    solver = z3.Solver()
    solver.set("rlimit", rlimit)
    solver.set("random_seed", SEED)
    solver.add(*[base[n] >= threshold + counters[n] for n in names if n in counters])
    solver.add(now != later)
    answer = solve(solver)[0]  # (an interrupt Z3 caught becomes KeyboardInterrupt, not "unknown")
    if answer == z3.unsat:
        return True
    if answer == z3.sat:
        return False
    return None


# ---------------------------------------------------------------------- the plan
def plan(path_or_text: str, defines: Mapping[str, int], param: str, source_path: str | None = None) -> Plan:
    """Decide whether ``param`` can be lifted, and how. Raises Refusal with the reason."""
    try:
        proto_a = load(path_or_text, {**defines, param: BASE}, path=source_path)
        proto_b = load(path_or_text, {**defines, param: BASE + 1}, path=source_path)
    except InputError as err:
        raise Refusal(f"the protocol is not valid input for large {param} "
                      f"({err.diagnostics[0].code if err.diagnostics else 'error'})") from None
    try:
        settle = settle_point(proto_a, param, BASE)
    except SettleRefusal as why:
        raise Refusal(str(why)) from None
    for name in ("cluster", "threads", "roles", "buffers", "mbarriers"):
        if getattr(proto_a, name) != getattr(proto_b, name):
            raise Refusal(f"{param} is used in a declaration ({name})")
    machine = Machine(proto_a)
    kept = next((ins for prog in machine.programs for ins in prog.code
                 if ins.slot >= 0 and isinstance(ins.op, ir.FlagOp)), None)
    if kept is not None:  # semantics/families/flag_values.py
        raise Refusal(f"a value read from a flag at line {kept.line} decides control flow: the lift follows "
                      "loop counters, not values of the run (the bounded check explores every value)")
    progs_b = _programs(proto_b)
    if len(progs_b) != len(machine.programs):
        raise Refusal(f"{param} changes the set of processes")
    procs: list[tuple[int, ProcPlan]] = []
    checks: list[tuple[ir.Expr, dict[str, int], Context]] = []
    overflow: list[Obligation] = []
    min_iters = max(1, settle)
    for p, (prog_a, prog_b) in enumerate(zip(machine.programs, progs_b, strict=True)):
        loops = _loops(prog_a, prog_b)
        if not loops:
            continue
        for loop in loops:
            min_iters = max(min_iters, -loop.hi_off, -(loop.lo_off or 0))
        main, epilogues = loops[0], tuple(loops[1:])
        pp, exprs, offsets = _classify(prog_a, main, epilogues)
        procs.append((p, pp))
        checks += [(e, offsets, machine.ctx[p]) for e in exprs]
        overflow.append(_overflow_obligation(prog_a, pp, exprs, offsets, machine.ctx[p]))
    if not procs:
        raise Refusal(f"no loop runs {param} times")
    period, threshold = _choose_period(checks)
    try:
        first = first_overflow(overflow, min_iters)
    except OverflowUnknown as why:
        raise Refusal(str(why)) from None
    max_iters, why = None, ""
    if first is not None:
        max_iters = first[0] - 1
        why = f"the expression at line {first[1]} can exceed 2^62 (SV115) from {param} = {first[0]} on"
    return Plan(param, proto_a, period, threshold, min_iters, tuple(procs), len(checks), settle, max_iters, why)


def _overflow_obligation(prog: Program, pp: ProcPlan, exprs: list[ir.Expr], offsets: Mapping[str, int],
                         ctx: Context) -> Obligation:
    """What ``overflow.first_overflow`` checks for one process: its counter-dependent expressions and
    the `let l = k + c` definitions, with each counter's range in terms of the trip count."""
    names = prog.var_names
    trip = (pp.main, *pp.epilogues)
    ranges = {x: CounterRange(x.lo_const, x.lo_off, x.hi_off - 1) for x in trip}
    loop_vars = {names[x.slot] for x in trip}
    counters: dict[str, tuple[CounterRange, ...]] = {}
    for name, off in offsets.items():
        own = [r for x, r in ranges.items() if names[x.slot] == name] if name in loop_vars else list(ranges.values())
        counters[name] = tuple(CounterRange(r.lo + off, None if r.lo_off is None else r.lo_off + off,
                                            r.hi_off + off) for r in own)
    lets = [ins.expr for ins in prog.code[pp.main.init_pc + 1:]
            if ins.kind == LET and names[ins.slot] in offsets and names[ins.slot] not in loop_vars]
    return Obligation(tuple(exprs) + tuple(lets), tuple(counters.items()), prog, ctx)


def _affine_offset(e: ir.Expr, offsets: Mapping[str, int]) -> int | None:
    """c if e is `v`, `v + c`, `c + v` or `v - c` for a counter slot v (so e shifts with the counters)."""
    match e:
        case ir.Var(name=n):
            return offsets.get(n)
        case ir.BinOp(op="+", left=left, right=ir.Const(value=c)):
            inner = _affine_offset(left, offsets)
            return None if inner is None else inner + c
        case ir.BinOp(op="+", left=ir.Const(value=c), right=right):
            inner = _affine_offset(right, offsets)
            return None if inner is None else inner + c
        case ir.BinOp(op="-", left=left, right=ir.Const(value=c)):
            inner = _affine_offset(left, offsets)
            return None if inner is None else inner - c
    return None


def _classify(prog: Program, main: Loop, epilogues: tuple[Loop, ...]) -> tuple[ProcPlan, list[ir.Expr],
                                                                               dict[str, int]]:
    """Counter slots of one program, and the counter-dependent expressions to prove periodic.

    Counter slots hold values that move with the trip count: the trip-count loops' variables
    and `let l = k + c`. Such a let must open its loop body (only lets before it), so that at
    every visible step inside the loop it holds k + c for the current k. Every other let is an
    ordinary variable: expressions that read it are proved periodic for *all* its values, and
    its own definition, if it reads a counter, is proved periodic too. No let is inlined, so
    nothing is assumed about where a let's stored value came from."""
    names = prog.var_names
    code = prog.code
    trip = [main, *epilogues]
    trip_pcs = {x.init_pc for x in trip} | {x.next_pc for x in trip}
    offsets: dict[str, int] = {names[x.slot]: 0 for x in trip}
    loop_vars = set(offsets)
    after = range(main.init_pc + 1, len(code))
    for pc in after:
        ins = code[pc]
        if ins.kind == FOR_INIT and pc not in trip_pcs and names[ins.slot] in loop_vars:
            raise Refusal(f"the loop variable `{names[ins.slot]}` is reused by another loop (line {ins.line})")
    lets = [(pc, code[pc]) for pc in after if code[pc].kind == LET]
    changed = True
    while changed:
        changed = False
        for _pc, ins in lets:
            name = names[ins.slot]
            off = _affine_offset(ins.expr, offsets)
            if off is None or name in loop_vars:
                continue
            if name in offsets and offsets[name] != off:
                raise Refusal(f"`{name}` is defined in several ways from the loop counter (line {ins.line})")
            if name not in offsets:
                offsets[name] = off
                changed = True
    for pc, ins in lets:
        name = names[ins.slot]
        if name in loop_vars:
            raise Refusal(f"the loop variable `{name}` is assigned by a let (line {ins.line})")
        if name not in offsets:
            continue
        if _affine_offset(ins.expr, offsets) != offsets[name]:
            raise Refusal(f"`{name}` is defined in several ways from the loop counter (line {ins.line})")
        opener = [x for x in trip if x.init_pc < pc < x.next_pc]
        if len(opener) != 1 or any(code[q].kind != LET for q in range(opener[0].init_pc + 1, pc)) \
                or len(prog.loops_at[pc]) != 1:
            raise Refusal(f"`{name}` = loop counter + constant must be defined at the start of its loop body "
                          f"(line {ins.line})")
    exprs: list[ir.Expr] = []
    for pc in after:
        ins = code[pc]
        if pc in trip_pcs:
            continue
        raw: list[ir.Expr] = []
        if ins.kind == LET:
            if names[ins.slot] in offsets:
                continue  # a counter value itself: it shifts with the counters
            raw.append(ins.expr)
        elif ins.kind in (FOR_INIT, FOR_NEXT, BRANCH):
            raw += [e for e in (ins.expr, ins.expr2) if e is not None]
        elif ins.kind == OP:
            raw += list(expressions_in(ins.op))
        exprs += [e for e in raw if _names(e) & offsets.keys()]
    slots = tuple(sorted(names.index(n) for n in offsets))
    live: dict[str, int] = {}
    for x in trip:
        live.setdefault(names[x.slot], x.init_pc)
    for pc, ins in lets:
        name = names[ins.slot]
        if name in offsets and name not in live:
            live[name] = next(x.init_pc for x in trip if x.init_pc < pc < x.next_pc)
    return ProcPlan(main, epilogues, slots, tuple(offsets[names[s]] for s in slots),
                    tuple(live[names[s]] for s in slots)), exprs, offsets


def _choose_period(checks: list[tuple[ir.Expr, dict[str, int], Context]]) -> tuple[int, int]:
    """The smallest (P, K) among the candidates for which every obligation is proved."""
    period = 1
    for e, _, _ in checks:
        period = math.lcm(period, _divisor_product(e))
    if period > MAX_PERIOD:
        raise Refusal(f"the counter-dependent expressions would need a period of {period}")
    unique = list(dict.fromkeys((e, tuple(sorted(c.items())), ctx) for e, c, ctx in checks))
    last_reason = ""
    for threshold in range(MAX_THRESHOLD + 1):
        ok = True
        for e, counters, ctx in unique:
            answer = periodic(e, dict(counters), ctx, period, threshold, RLIMIT)
            if answer is None:
                raise Refusal(f"Z3 could not decide periodicity at line {e.span.line} (resource limit)")
            if not answer:
                ok = False
                last_reason = f"the expression at line {e.span.line} is not periodic in the loop counter " \
                    f"(period {period}, from iteration {threshold} on)"
                break
        if ok:
            return period, threshold
    raise Refusal(last_reason)


def liftable_params(protocol: ir.Protocol) -> list[str]:
    """Candidate trip-count params, most likely first (`ITERS` before the others). A loop-bound param
    derived from others (`param T = ITERS + 1`) comes after the params it is derived from: lifting
    those covers the protocol as written, lifting it covers its values with them fixed."""
    order: list[str] = []
    for name in protocol.loop_params:
        for n in (*ancestors(protocol, name), name):
            if n not in order:
                order.append(n)
    return sorted(order, key=lambda n: (n != "ITERS", order.index(n)))
