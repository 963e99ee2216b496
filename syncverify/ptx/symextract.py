"""A kernel whose loop trip count is a parameter, extracted as protocols that hold for every trip count.

With `--symbolic NAME[OFF:LEN]>=LO` the parameter is a Z3 variable N
(symvalues.py) and each warp is run by symloop.py: either it does not depend
on N (constant events) or it has one loop over N, kept as a transient, a
period of P_w iterations and a suffix per residue, with its trip count
T_w(N) = (a*N + b) / d proved for every N under the assumption.

Across warps every T_w must differ from the first one's (KT := T_0) by a
constant (Z3). With P the lcm of the warps' blocks (half the period where
the second half is the first with its parities flipped, symblocks.py; the
whole period with `--whole-periods`) and K0 the smallest KT from which every warp is past its transient,
KT = K0 + R + P*Q for one residue R in 0..P-1 and some Q >= 0, and then each
warp's events are concrete statements around `for q in 0..Q { P/H_w blocks }`
(parities of a halved period spelled by the block): one protocol per residue, each with
the one param Q that the z3 engine lifts to every value. The KT below K0 are
extracted concretely at an N that Z3 finds for each (none: that KT does not
occur). The mbarriers and slots are computed over the events of every
residue together, so the protocols name the same objects.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import z3

from .. import budget
from .cfg import Cfg
from .extract import Extracted, cluster_groups, pick_kernel
from .globalcomm import check_static
from .launch import WARP, Event, Launch, Memory, ParamBytes, _params, cluster_warps
from .parse import Function, Module, PtxError
from .skeleton import build
from .slots import Slots, every_slots
from .symblocks import EXIT_NAME, block_events, block_size
from .symloop import Split, WarpAnalysis, WarpLoop, WarpResult
from .symvalues import UPPER, SymCtx, SymParam
from .writer import render

QNAME = "Q"


@dataclass(frozen=True)
class Residue:
    """The protocol of the trip counts KT = k0 + r + period * Q, Q >= 0."""

    r: int
    extracted: Extracted


@dataclass(frozen=True)
class Small:
    """The protocol of one trip count below k0 (every N that gives it: `n` is one of them)."""

    kt: int
    n: int
    extracted: Extracted


@dataclass(frozen=True)
class SymbolicKernel:
    """Everything `--symbolic` extraction produces for one kernel."""

    sym: SymParam
    trip_text: str  # KT as a function of N
    k0: int
    period: int
    residues: tuple[Residue, ...]
    small: tuple[Small, ...]  # each KT below k0 that some N >= LO gives
    absent: tuple[int, ...]  # KT below k0 that no N >= LO gives
    ctx: SymCtx
    trip: z3.BitVecRef | None  # None: nothing depends on N

    def range_text(self) -> str:
        return f"{self.sym.lo}..{'2^30' if self.ctx.hi == UPPER else self.ctx.hi}"

    def part(self) -> str:
        """What this range of N is covered by."""
        if self.trip is None:
            return f"{self.range_text()}: one protocol"
        return f"{self.range_text()}: KT = {self.trip_text}, residues 0..{self.period - 1}"

    def n_for(self, kt: int) -> int | None:
        """A value of N (under the assumption) whose trip count is kt."""
        if self.trip is None:
            return self.sym.lo
        return self.ctx.model_n(self.trip == kt)


def _resolve(mod: Module, fn_params: list[tuple[str, int]], sym: SymParam) -> tuple[SymParam, int]:
    names = [n for n, _s in fn_params]
    if sym.name in names:
        k = names.index(sym.name)
    elif sym.name.isdigit() and int(sym.name) < len(names):
        k = int(sym.name)
    else:
        raise PtxError(mod.path, 1, 1, f"--symbolic {sym.show()}: the kernel has no parameter {sym.name!r}; "
                       f"parameters: {', '.join(names)}")
    size = fn_params[k][1]
    length = sym.length if sym.length is not None else size
    if length not in (1, 2, 4, 8) or sym.off + length > size:
        raise PtxError(mod.path, 1, 1, f"--symbolic {sym.show()}: expected 1, 2, 4 or 8 bytes inside the "
                       f"{size}-byte parameter {names[k]}")
    # the name stays as given (a position or a PTX name), which the executor matches; the PTX name is shown
    return replace(sym, ptx_name=names[k]), 8 * length


MAX_DOMAINS = 8


def extract_symbolic(mod: Module, launch: Launch, kernel: str | None, sym: SymParam,
                     halves: bool = True) -> tuple[SymbolicKernel, ...]:
    """The protocols covering every N from sym.lo to 2^30 (see the module docstring), one family per range
    of N; refusals raise PtxError. ``halves``: each loop written over half periods where it has them
    (symblocks.py; False: `--whole-periods`).

    A branch before the loop that would be refused but is `N >= L` for a threshold L -- the zero-trip guard
    of a rotated loop, CUTLASS's `k_tile_count - 1 > 0` before the consumer's mainloop -- splits the range
    at L: on each side it is decided. At most MAX_DOMAINS ranges.
    """
    if launch.whole_grid:
        raise PtxError(mod.path, 1, 1, "--whole-grid extracts every CTA at the launch's values; it is not "
                       "available with --symbolic")
    name = pick_kernel(mod, kernel)
    fn = next(f for f in mod.entries() if f.name == name)
    if fn.body is None:
        raise PtxError(mod.path, fn.line, 1, f"{fn.name} has no body")
    sym, bits = _resolve(mod, [(p.name, p.size) for p in fn.params], sym)
    _not_bound(mod, fn, launch, sym)
    todo = [(sym.lo, UPPER)]
    out: list[SymbolicKernel] = []
    while todo:
        lo, hi = todo.pop(0)
        try:
            out.append(_domain(mod, launch, name, fn, replace(sym, lo=lo), bits, hi, halves=halves))
        except Split as sp:
            if len(out) + len(todo) + 2 > MAX_DOMAINS:
                raise sp.refusal from None
            todo[:0] = [(lo, sp.at - 1), (sp.at, hi)]
    if len(out) == 1 and out[0].trip is None:
        raise PtxError(mod.path, fn.line, 1, f"--symbolic {sym.show()}: no synchronization of {name} depends on "
                       f"it: every loop and branch runs the same for every N >= {sym.lo} (their counts come from "
                       "other values, bound by --param or constant), so this would be one concrete check, not a "
                       "check of every N. Bind it with --param, or leave unbound the values its trip counts are "
                       "computed from (a tile scheduler's k-tile counts)")
    _other_clusters(mod, launch, name, fn, bits, tuple(out), halves)
    check_static(mod, fn, launch)  # threads communicating through global memory, acquires of it: refused
    return tuple(out)


def _not_bound(mod: Module, fn: Function, launch: Launch, sym: SymParam) -> None:
    """The symbolic bytes must not also be bound by --param (or --zero-global): one of the two would be
    silently ignored, and a check "for every N" of bytes that a binding fixes is one concrete check."""
    img, known = _params(fn, launch)[sym.ptx_name]
    if img is None:
        return
    length = sym.length if sym.length is not None else len(img)
    overlap = [i for i in range(sym.off, sym.off + length) if known is None or known[i]]
    if overlap:
        raise PtxError(mod.path, fn.line, 1, f"--symbolic {sym.show()}: bytes {overlap[0]}..{overlap[-1]} of "
                       f"parameter {sym.ptx_name} are also bound by --param (or --zero-global); a byte is "
                       "either symbolic or bound: drop one of the two")


def _statements(fam: SymbolicKernel) -> list[list[str]]:
    """The protocols' text but for comments: what must agree between clusters."""
    return [[ln.split("//")[0].rstrip() for ln in ex.text.splitlines() if not ln.startswith("//")]
            for ex in [*(r.extracted for r in fam.residues), *(sm.extracted for sm in fam.small)]]


def _other_clusters(mod: Module, launch: Launch, name: str, fn: Function, bits: int,
                    fams: tuple[SymbolicKernel, ...], halves: bool) -> None:
    """With --grid, every cluster of the grid must give the same protocols for each range of N, as
    extract.py requires of a concrete extraction (one cluster of each group that runs alike,
    extract.cluster_groups; under the check's clock); else refused, naming the cluster."""
    if launch.grid is None:
        return
    total, others = cluster_groups(mod, launch)
    for ci in others:
        budget.check_clock(f"comparing cluster {ci} of the grid's {total} with cluster {launch.cluster_index}")
        other = replace(launch, cluster_index=ci)
        for fam in fams:
            try:
                got = _domain(mod, other, name, fn, fam.sym, bits, fam.ctx.hi, fam.ctx, halves=halves)
            except Split:
                got = None
            if got is None or _statements(got) != _statements(fam):
                raise PtxError(mod.path, fn.line, 1, f"cluster {ci} of the grid synchronizes differently from "
                               f"cluster {launch.cluster_index} for {fam.sym.show()} in {fam.range_text()}; a "
                               f"protocol describes one cluster: extract it with --cluster-index {ci}")


def _domain(mod: Module, launch: Launch, name: str, fn: Function, sym: SymParam, bits: int,
            hi: int, ctx: SymCtx | None = None, *, halves: bool) -> SymbolicKernel:
    """One range of N. ``ctx``: the context of the same range already extracted for another cluster,
    whose Z3 answers (SymCtx.constant, SymCtx.under) hold here too: they depend on N's assumption only."""
    ctx = ctx or SymCtx(sym, bits, hi)
    rng = f"{sym.lo}..{'2^30' if hi == UPPER else hi}"
    cfg = Cfg(fn)
    mem = Memory(mod, fn, launch)
    params = _params(fn, launch)
    results: dict[tuple[int, int], WarpResult] = {}
    for rank, ctaid, w in cluster_warps(launch):
        results[(rank, w)] = WarpAnalysis(mod, fn, cfg, mem, launch, rank, ctaid, w, params, ctx).run()
    loops = {k: v for k, v in results.items() if isinstance(v, WarpLoop)}
    if not loops:
        events = {k: list(v) for k, v in results.items()}  # type: ignore[arg-type]
        ex = _render(mod, name, launch, events, None, sym, "", 0, 1, 0, rng=rng)
        return SymbolicKernel(sym, "", 0, 1, (Residue(0, ex),), (), (), ctx, None)
    first = next(iter(loops.values()))
    t0 = first.trip
    lo_n = z3.BitVecVal(sym.lo, bits)
    offsets: dict[tuple[int, int], int] = {}
    for key, lp in loops.items():
        a = z3.simplify(z3.substitute(lp.trip - t0, (ctx.n, lo_n))).as_signed_long()  # type: ignore[attr-defined]
        if not ctx.holds(lp.trip == t0 + a):
            raise PtxError(mod.path, lp.instr.line, lp.instr.column,
                           f"cannot extract (warp {key[1]} of CTA {key[0]}): its loop over {sym.show()} runs "
                           f"{lp.trip_text} times and the first one's {first.trip_text}; their difference is not "
                           "a constant", mod.source_line(lp.instr.line))
        offsets[key] = a
    block = {key: block_size(lp) if halves else lp.period for key, lp in loops.items()}  # symblocks.py
    period = math.lcm(*block.values())
    k0 = max(0, *(lp.j0 + 1 - offsets[k] for k, lp in loops.items()))
    every: dict[object, list[Event]] = {}
    per_r: list[dict[tuple[int, int], list[Event]]] = []
    feasible = [r for r in range(period)
                if ctx.possible(z3.And(z3.URem(t0 - (k0 + r), period) == 0, t0 >= k0 + r))]
    for r in feasible:
        events: dict[tuple[int, int], list[Event]] = {}
        for key, res in results.items():
            if isinstance(res, WarpLoop) and block[key] < res.period:
                events[key] = block_events(res, k0 + r + offsets[key] - 1 - res.j0, period, launch, key[1], QNAME)
            elif isinstance(res, WarpLoop):
                events[key] = _warp_events(res, k0 + r + offsets[key] - 1 - res.j0, period, launch, key[1])
            else:
                events[key] = list(res)
            every[(r, key)] = events[key]
        per_r.append(events)
    kt_min = z3.simplify(z3.substitute(t0, (ctx.n, lo_n))).as_signed_long()  # type: ignore[attr-defined]
    small_events: list[tuple[int, int, dict[tuple[int, int], list[Event]]]] = []
    absent: list[int] = []
    for kt in range(max(0, kt_min), k0):
        n = ctx.model_n(t0 == kt)
        if n is None:
            absent.append(kt)
            continue
        events = {key: res.events_for(kt + offsets[key]) if isinstance(res, WarpLoop) else list(res)
                  for key, res in results.items()}
        every.update({(f"kt{kt}", key): evs for key, evs in events.items()})
        small_events.append((kt, n, events))
    shared = every_slots(mod, every)
    residues = tuple(Residue(r, _render(mod, name, launch, events, every, sym, first.trip_text, k0, period, r,
                                        rng=rng, shared=shared)) for r, events in zip(feasible, per_r, strict=True))
    small = tuple(Small(kt, n, _render(mod, name, launch, events, every, sym, first.trip_text, k0, period, None,
                                       kt, rng, shared)) for kt, n, events in small_events)
    return SymbolicKernel(sym, first.trip_text, k0, period, residues, small, tuple(absent), ctx, t0)


def _warp_events(lp: WarpLoop, c: int, period: int, launch: Launch, warp: int) -> list[Event]:
    """A warp's events for KT = k0 + r + period * Q: its last iteration is j0 + c + period * Q."""
    assert c >= 0
    m, s = divmod(c, lp.period)
    lanes = (1 << max(0, min(WARP, launch.threads - WARP * warp))) - 1
    begin = Event("text", (f"for q in 0..{QNAME} {{",), lanes, lp.instr)
    end = Event("text", ("}",), lanes, lp.instr)
    return [*lp.pre, *lp.body * m, begin, *lp.body * (period // lp.period), end, *lp.mids[s], *lp.suffixes[s]]


def _render(mod: Module, name: str, launch: Launch, events: dict[tuple[int, int], list[Event]],
            every: dict[object, list[Event]] | None, sym: SymParam, trip: str, k0: int, period: int,
            r: int | None, kt: int | None = None, rng: str = "",
            shared: Slots | None = None) -> Extracted:
    sk = build(mod, name, launch, events, every, slots_of_every=shared)
    text, origin = render(sk, mod.path)
    lines = text.split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("// Loops ran to completion"))
    if kt is not None:
        head = [f"// The parameter {sym.show()} is symbolic: N in {rng}. Its loop runs, counted",
                f"// from its first exit test that depends on N, KT = {trip} more times; this protocol is every N",
                f"// with KT = {kt} (below {k0}, where the protocols with a loop over {QNAME} begin)."]
        trip = ""
    elif trip:
        head = [f"// The parameter {sym.show()} is symbolic: N in {rng}. Its loop runs, counted",
                f"// from its first exit test that depends on N, KT = {trip} more times; this protocol covers",
                f"// KT = {k0 + r} + {period} * {QNAME} for every {QNAME} >= 0 (residue {r} of {period}); the other "
                "residues",
                f"// and KT < {k0} are covered by the protocols extracted beside it."]
    else:
        head = [f"// The parameter {sym.show()} is symbolic (N in {rng}); no synchronization depends on it."]
    part = f"[{sym.off}:{sym.length}]" if sym.length is not None else ""
    head.append(f"// N is bytes {part[1:-1]} of kernel parameter {sym.ptx_name}." if part
                else f"// N is kernel parameter {sym.ptx_name}.")
    lines[at: at + 2] = head
    shift = len(head) - 2
    _indent_loops(lines)
    if trip:  # (a residue's protocol) every statement line is below the `protocol` line
        p = next(i for i, ln in enumerate(lines) if ln.startswith("protocol "))
        lines.insert(p + 1, f"  param {QNAME} = 1;")
        shift += 1
    origin = {ln + shift: ins for ln, ins in origin.items()}
    return Extracted("\n".join(lines), origin, mod, name)


def concrete_launch(launch: Launch, sym: SymParam, n: int, size: int | None = None) -> Launch:
    """The launch with the symbolic parameter bound to n."""
    params = dict(launch.params)
    if sym.length is None:
        params[sym.name] = n
    else:
        part = ParamBytes(((sym.off, (n & ((1 << (8 * sym.length)) - 1)).to_bytes(sym.length, "little")),))
        old = params.get(sym.name)
        params[sym.name] = old.merged(part) if isinstance(old, ParamBytes) else part \
            if not isinstance(old, bytes) else ParamBytes(((0, old),)).merged(part)
    return replace(launch, params=params)




def _indent_loops(lines: list[str]) -> None:
    """Indent the statements between the bounds of each kept loop (their lines carry a source comment, the
    `}` of an `elect` block none)."""
    depth = 0
    for i, ln in enumerate(lines):
        body = ln.strip()
        if re.match(r"^\}\s+//", body):
            depth -= 1
        if depth > 0:
            lines[i] = "  " * depth + ln
        if body.startswith((f"for q in 0..{QNAME} {{", f"for {EXIT_NAME} in {QNAME}..")):
            depth += 1
