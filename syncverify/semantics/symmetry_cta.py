"""Symmetry over CTAs that run the same program: a grid of identical CTAs searched as one orbit.

A kernel's grid is many copies of one program, told apart only by the CTA's index. Where the
index is used only to name the CTA's own objects (its shared memory, mbarriers and named barriers,
which the model keeps per CTA anyway) or its own piece of a global buffer or flag array at a
constant element, exchanging two CTAs everywhere in a state maps a reachable state to a reachable
state. Such an exchange is an automorphism of the machine (semantics/symmetry_perm.py's argument)
whose renaming of source lines is the identity: every process of CTA a is matched with the process
at the same position of CTA b, and their programs must be equal *instruction by instruction at the
same source lines*, so a finding met in one CTA of an orbit is reported at the line where it is
(the renaming kind of symmetry_perm.py moves lines, which is why that kind is not on by default).

The proof, per candidate exchange (a b) of two CTAs, on the compiled programs of every process
(moved or not):

* the two CTAs have processes of the same roles, instances, warps and lanes, wgmma warpgroups
  alike, and the same residency (engines/residency.py restricts a search to some CTAs) and cluster
  (a scope `.cluster` or a cluster barrier must mean the same CTAs after the exchange);
* the program of the image of p is the program of p with every instruction's kind, jump target,
  threads, lanes, loop slot and line equal, and every expression equal once the parts that depend
  only on who runs it (`block`, `cta`, `instance`, role tests, a `choose per cta` row) are replaced
  by their values for that process. The only places that may differ are a constant element index of
  a global buffer or a flag array, and they must differ by one bijection each, the same for every
  process (a process that is not moved forces the identity on what it names; an index computed at
  run time forces the identity on its whole array, which an exchange of pieces then contradicts);
* shared memory, mbarriers and named barriers are renamed by the CTA alone (the same name and
  element in the other CTA), whichever CTA's process names them;
* an operand that names CTAs of the cluster is renamed with them: a rank `@ r` (a remote arrive or
  tx count, a DSMEM access) of a process must be, in its image, pi(r), and a multicast mask m must
  be the mask of the pi(c), c in m, whose rank order pi keeps (the copy visits its destinations in
  rank order, and the step reports the first one's violation). Both must be constants in the cluster
  once the parts that depend on who runs it are folded: a rank computed at run time (a loop or
  `let` variable) refuses the exchange. So `@ cta ^ 1` (the peer) is renamed to the other peer,
  and a rank the exchange fixes (a leader outside it) stays; lane r naming rank r in every CTA, or
  ranks named in rank order (`@ 0; @ 1`), are not images and refuse it (docs/model.md);
* tcgen05 and tensor memory (the 2-SM pair's leader issues for both), mbarriers stored in a buffer,
  register or tensor-map buffers get no exchange;
* the image of the initial state is the initial state.

The state is renamed whole (``CtaMapper``): processes with their named-barrier tokens, mbarriers with
their waiters, named barriers, cluster arrivals, agents (CTA, barrier, issuer), access records (CTA,
mbarrier, global slot, flag element, owner) and every knowledge bit — per process, per mbarrier, per
named barrier, the copies' snapshot blocks, and the global-memory holders (per flag write, level and
releasing CTA; per process and level for fences; the Fence-SC order per CTA and per one-CTA cluster)
— and the per-CTA entries of ``tmem`` with the flags' values and histories.

Where every exchange of two CTAs of a class is proved, the group is every permutation of the class,
and the representative of a state sorts the class's CTAs by their processes' local states (any
member of the orbit is a sound representative: ties only merge less). The permutation applied is
composed from the proved exchanges (a cycle is a product of exchanges with its first CTA), so its
renaming is exact. Counterexamples are mapped back by engines/witness.py as for symmetry_perm.py,
and replayed on the unreduced machine.
"""

from __future__ import annotations

import time
from dataclasses import fields, is_dataclass, replace

from .. import ir, ir_tcgen05
from ..expr import Context
from .families.globalmem import GLOBAL_CTA
from .families.globalmem_views import HISTORY, LEVELS, SPACE_FLAG
from .program import BAR_WAIT, Process, Program, wgmma_teams
from .state import (
    AG_CPARRIVE,
    AG_TMA,
    M_JPREV,
    P_PC,
    P_TOKEN,
    R_AKNOWN,
    R_CTA,
    R_KNOWN,
    R_OBJ,
    R_OWNER,
    R_SLOT,
    R_SPACE,
    SPACE_DATA,
    SPACE_INIT,
    SPACE_OBS,
    SPACE_START,
    State,
)
from .symmetry import Symmetry, _uses_tcgen05
from .symmetry_perm import IDENTITY, Auto, Mismatch, PermutedSymmetry, renamed_cluster, specialize

_MEMO_LIMIT = 1 << 16
_MAX_CLASS = 64  # CTAs of one class whose exchanges are proved, at most (the rest keep their place)
_MAPPERS = 4096  # permutations whose renaming is remembered
_MAX_PROOFS = 256  # candidate exchanges tried per machine (each matches every program): past it, no more classes


def _rows(expr, ctx: Context):
    """The expression with every `choose per cta` value read from the executing CTA's row."""
    if isinstance(expr, ir.Pick):
        index = _rows(expr.index, ctx)
        if expr.per_cta:
            return ir.Pick(expr.name, (expr.values[ctx.cta],), index, False, expr.span)
        return replace(expr, index=index)
    if isinstance(expr, ir.BinOp | ir.UnOp | ir.Cond):
        return replace(expr, **{f.name: _rows(getattr(expr, f.name), ctx) for f in fields(expr) if f.name != "span"
                                and not isinstance(getattr(expr, f.name), str)})
    return expr


_EXPR = (ir.Builtin, ir.BinOp, ir.UnOp, ir.Cond, ir.InRole, ir.Const, ir.Var, ir.Pick)


class _CtaMatcher:
    """Matches the program of p against that of its image, collecting the global renaming."""

    def __init__(self, machine, pi: dict[int, int]):
        self.machine = machine
        self.pi = pi  # the CTAs exchanged (old -> new): what a rank operand must be renamed by
        self.proto: ir.Protocol = machine.protocol
        self.gslots: dict[tuple[int, int], tuple[int, int]] = {}
        self.flags: dict[int, int] = {}
        self.ctx: tuple[Context, Context] = (machine.ctx[0], machine.ctx[0])

    @staticmethod
    def _bind(table: dict, a, b, what: str) -> None:
        if table.setdefault(a, b) != b:
            raise Mismatch(f"{what} {a} maps to both {table[a]} and {b}")

    def _spec(self, e, side: int):
        return None if e is None else specialize(_rows(e, self.ctx[side]), self.ctx[side])

    def _elements(self, table: dict, keys: list, ia, ib, what: str, name: str) -> None:
        """Bind the elements two references name: constants to each other, else the whole array fixed."""
        if (ia is None or isinstance(ia, ir.Const)) and (ib is None or isinstance(ib, ir.Const)):
            va, vb = (0 if ia is None else ia.value), (0 if ib is None else ib.value)
            if not (0 <= va < len(keys) and 0 <= vb < len(keys)):
                raise Mismatch(f"{name}: an element out of range")  # (the step reports it; no exchange)
            self._bind(table, keys[va], keys[vb], what)
            return
        if ia != ib:
            raise Mismatch(f"{name}: run-time indices differ")
        for k in keys:
            self._bind(table, k, k, what)

    def _ref(self, ra: ir.Ref, rb: ir.Ref) -> None:
        if (ra.kind, ra.name, ra.every) != (rb.kind, rb.name, rb.every):
            raise Mismatch(f"references {ra.name} and {rb.name} differ")
        ia, ib = self._spec(ra.index, 0), self._spec(rb.index, 1)
        if ra.kind == "buffer":
            decl = self.proto.buffer(ra.name)
            if decl.space == "global":
                if ra.every:
                    return  # the whole array: it maps onto itself (slots move within their buffer)
                b = self.machine.buf_index[ra.name]
                self._elements(self.gslots, [(b, k) for k in range(decl.slots or 1)], ia, ib, "slot", ra.name)
                return
            if decl.space != "shared":
                raise Mismatch(f"{decl.space} buffer {ra.name}")
        elif ra.kind == "flag":
            decl = self.proto.flag(ra.name)
            if ra.every:
                return
            keys = [self.machine.flag_index[(ra.name, k)] for k in range(decl.size or 1)]
            self._elements(self.flags, keys, ia, ib, "flag element", ra.name)
            return
        elif ra.kind == "mbarrier":
            if self.machine.mb_decl[ra.name].storage is not None:
                raise Mismatch(f"mbarrier {ra.name} stored in a buffer")
        else:
            raise Mismatch(f"{ra.kind} {ra.name}")
        if ia != ib:  # a CTA's own object: the same element in the other CTA
            raise Mismatch(f"{ra.name}: elements differ")

    def _ranks(self, a, b, field: str) -> None:
        """Operands that name CTAs of the cluster: a rank (`@ r`: a remote arrive, tx count or DSMEM
        access) or a multicast mask. Each process's value, once what depends on who runs it is
        folded, must be a constant in the cluster, and the image process's value must be its image
        under the exchange: rank r becomes pi(r), mask m the mask of the pi(c) for the c in m."""
        if a is None or b is None:
            if a is not b:
                raise Mismatch("an operation names another CTA in one program only")
            return
        va, vb = self._spec(a, 0), self._spec(b, 1)
        if not (isinstance(va, ir.Const) and isinstance(vb, ir.Const)):
            raise Mismatch(f"a CTA {'rank' if field == 'remote' else 'mask'} computed at run time")
        n, pi = self.machine.ncta, self.pi
        if field == "remote":
            if not (0 <= va.value < n and 0 <= vb.value < n):
                raise Mismatch("a CTA rank outside the cluster")  # (the step reports it: SV405)
            if pi.get(va.value, va.value) != vb.value:
                raise Mismatch(f"rank {va.value} becomes rank {pi.get(va.value, va.value)}, not {vb.value}")
            return
        if not (0 < va.value < 1 << n and 0 < vb.value < 1 << n):
            raise Mismatch("a multicast mask outside the cluster")
        dests = [c for c in range(n) if va.value >> c & 1]
        image = sum(1 << pi.get(c, c) for c in dests)
        if image != vb.value:
            raise Mismatch(f"multicast mask {va.value:#b} becomes {image:#b}, not {vb.value:#b}")
        # The copy is issued to its destinations in rank order and the step reports the first one's
        # violation (a race or an unusable barrier there): an exchange that reorders them would report
        # another destination's, possibly of another code, in the image state.
        images = [pi.get(c, c) for c in dests]
        if images != sorted(images):
            raise Mismatch(f"the exchange reorders the destinations of multicast mask {va.value:#b}")

    def value(self, a, b, field: str = "") -> None:
        if field in ("remote", "multicast"):
            self._ranks(a, b, field)
            return
        if isinstance(a, _EXPR):
            a = self._spec(a, 0)
        if isinstance(b, _EXPR):
            b = self._spec(b, 1)
        if isinstance(a, ir.Span) and isinstance(b, ir.Span):
            if a.line != b.line:
                raise Mismatch(f"lines {a.line} and {b.line} differ")
            return
        if isinstance(a, ir.Ref) and isinstance(b, ir.Ref):
            self._ref(a, b)
            return
        if type(a) is not type(b):
            raise Mismatch(f"{type(a).__name__} against {type(b).__name__}")
        if isinstance(a, tuple):
            if len(a) != len(b):
                raise Mismatch("lengths differ")
            for x, y in zip(a, b, strict=True):
                self.value(x, y)
            return
        if is_dataclass(a):
            for f in fields(a):
                self.value(getattr(a, f.name), getattr(b, f.name), f.name)
            return
        if a != b:
            raise Mismatch(f"{a!r} against {b!r}")

    def program(self, pa: Program, pb: Program, ca: Context, cb: Context) -> None:
        self.ctx = (ca, cb)
        if len(pa.code) != len(pb.code) or pa.var_names != pb.var_names or pa.loop_slots != pb.loop_slots:
            raise Mismatch("program shapes differ")
        for ia, ib in zip(pa.code, pb.code, strict=True):
            if (ia.kind, ia.threads, ia.leader_only, ia.lanes, ia.slot, ia.target, ia.line, ia.loop_var) != \
                    (ib.kind, ib.threads, ib.leader_only, ib.lanes, ib.slot, ib.target, ib.line, ib.loop_var):
                raise Mismatch(f"instructions at lines {ia.line} and {ib.line} differ")
            self.value(ia.op, ib.op)
            self.value(ia.expr, ib.expr)
            self.value(ia.expr2, ib.expr2)


def excluded(machine) -> str:
    """Why no CTA of the machine is exchanged with another, or ""."""
    proto = machine.protocol
    if machine.ncta < 2:
        return "one CTA"
    if proto.tmem_regions:
        return "tensor memory"
    if any(b.space not in ("shared", "global") for b in proto.buffers):
        return "register or tensor-map buffers"
    if any(b.storage is not None for b in proto.mbarriers):
        return "mbarriers stored in a buffer"
    if any(_uses_tcgen05(prog.code) or any(ins.op is not None and type(ins.op).__module__ == ir_tcgen05.__name__
                                           for ins in prog.code) for prog in machine.programs):
        return "tcgen05 or tensor memory (their pair rendezvous names CTAs)"
    return ""


def _cluster_ok(machine, a: int, b: int) -> bool:
    """Does exchanging CTAs a and b keep every cluster (scopes, Fence-SC holders, cluster barriers)?"""
    proto = machine.protocol
    if proto.cluster_of(a) == proto.cluster_of(b):
        return True
    if proto.cluster_dim != 1:
        return False
    # one-CTA clusters: the exchange maps cluster a to cluster b; a cluster barrier is refused
    return not any(isinstance(ins.op, ir.ClusterArrive | ir.ClusterWait) for prog in machine.programs
                   for ins in prog.code)


def cta_map(machine, pi: dict[int, int], gslots: dict, flags: dict) -> Auto:
    """The Auto of a permutation ``pi`` of CTAs (old -> new) with its global renaming: processes,
    mbarriers, named barriers and warps follow their CTA, at the same position."""
    procs, mbars, named, warps = {}, {}, {}, {}
    for a, b in pi.items():
        if a == b:
            continue
        for q, r in zip(machine.procs_of_cta[a], machine.procs_of_cta[b], strict=True):
            procs[q] = r
            warps[(a, machine.procs[q].warp)] = (b, machine.procs[r].warp)
        for (c, name, k), m in machine.mb_index.items():
            if c == a:
                mbars[m] = machine.mb_index[(b, name, k)]
        for i in range(16):
            named[a * 16 + i] = b * 16 + i

    def moved(table: dict) -> tuple:
        return tuple(sorted((k, v) for k, v in table.items() if k != v))
    return Auto(moved(procs), (), moved(mbars), moved(named), moved(warps), (), moved(pi), moved(gslots),
                moved(flags))


def verify_exchange(machine, a: int, b: int) -> Auto:
    """The automorphism exchanging CTAs a and b, proved on the whole machine (module docstring);
    raises Mismatch with the reason when there is none."""
    if why := excluded(machine):
        raise Mismatch(why)
    procs: list[Process] = machine.procs
    qa, qb = machine.procs_of_cta[a], machine.procs_of_cta[b]
    if len(qa) != len(qb):
        raise Mismatch(f"CTAs {a} and {b} have different processes")
    resident = machine.resident
    if resident is not None and (a in resident) != (b in resident):
        raise Mismatch(f"CTA {a} and CTA {b} differ in residency")
    if not _cluster_ok(machine, a, b):
        raise Mismatch(f"CTAs {a} and {b} lie in different clusters")
    full = {q: q for q in range(len(procs))}
    for q, r in zip(qa, qb, strict=True):
        x, y = procs[q], procs[r]
        if (x.role, x.instance, x.warp, x.lo, x.hi) != (y.role, y.instance, y.warp, y.lo, y.hi):
            raise Mismatch(f"{x.label()} and {y.label()} differ in role, warp or lanes")
        full[q], full[r] = r, q
    teams = wgmma_teams(procs, machine.programs)
    for q, r in full.items():
        if tuple(sorted(full[t] for t in teams[q])) != tuple(sorted(teams[r])):
            raise Mismatch(f"{procs[q].label()}: wgmma warpgroups differ")
    matcher = _CtaMatcher(machine, {a: b, b: a})
    for q, r in full.items():
        if machine.deadline is not None and time.monotonic() > machine.deadline:
            # (the check's time budget: a grid of hundreds of warps takes seconds to match)
            raise Mismatch("the time budget ended before the CTAs' programs were matched")
        matcher.program(machine.programs[q], machine.programs[r], machine.ctx[q], machine.ctx[r])
    for name, table in (("global slots", matcher.gslots), ("flag elements", matcher.flags)):
        if len(set(table.values())) != len(table) or set(table.values()) != set(table):
            raise Mismatch(f"the renaming of {name} is not a permutation")
    g = cta_map(machine, {a: b, b: a}, matcher.gslots, matcher.flags)
    init = machine.initial()
    if CtaMapper(machine, g).state(init) != init:
        raise Mismatch("the initial state is not fixed")
    return g


class CtaMapper:
    """The image of every part of a state under one exchange of CTAs (memoized: records recur)."""

    def __init__(self, machine, g: Auto):
        self.g = g
        self.p = dict(g.procs)
        self.m = dict(g.mbars)
        self.n = dict(g.named)
        self.c = dict(g.ctas)
        self.s = dict(g.gslots)
        self.f = dict(g.flags)
        h = machine.holders
        ncta = machine.ncta
        dst: dict[int, int] = {}

        def block(src: int, to: int, width: int) -> None:
            for i in range(width):
                dst[src + i] = to + i
        for a, b in g.procs:
            block(2 * a, 2 * b, 2)
            block(h.proc_block(a)[0], h.proc_block(b)[0], h.proc_block(a)[1])
            block(machine.gl_rel_base + a * LEVELS * 2, machine.gl_rel_base + b * LEVELS * 2, LEVELS * 2)
            block(machine.gl_obs_base + a * LEVELS * 2, machine.gl_obs_base + b * LEVELS * 2, LEVELS * 2)
        for a, b in g.mbars:
            block(h.mb_base + 2 * a, h.mb_base + 2 * b, 2)
        for a, b in g.named:
            block(h.nb_base + a, h.nb_base + b, 1)
        for a, b in g.ctas:
            block(machine.gl_sc_base + a, machine.gl_sc_base + b, 1)
            if machine.protocol.cluster_dim == 1:  # one-CTA clusters: the cluster's Fence-SC holder too
                block(machine.gl_sc_base + ncta + a, machine.gl_sc_base + ncta + b, 1)
        nflags = len(machine.flag_names)
        for e in range(nflags):
            e2 = self.f.get(e, e)
            for hh in range(HISTORY):
                for level in range(LEVELS):
                    for cta in range(ncta):
                        c2 = self.c.get(cta, cta)
                        if e2 != e or c2 != cta:
                            dst[machine.gl_flag_base + ((e * HISTORY + hh) * LEVELS + level) * ncta + cta] = \
                                machine.gl_flag_base + ((e2 * HISTORY + hh) * LEVELS + level) * ncta + c2
        self.dst = {k: v for k, v in dst.items() if k != v}
        self.moved = sum(1 << k for k in self.dst)
        # state.tmem: each CTA's columns entry, and per flag element its value and its history
        self.tmem_moves: list[tuple[int, int]] = []
        base = 2 * ((ncta + 1) // 2)
        for a, b in g.ctas:
            self.tmem_moves.append((base + a, base + b))
        for e, e2 in g.flags:
            self.tmem_moves.append((machine.gl_tmem + e, machine.gl_tmem + e2))
            self.tmem_moves.append((machine.hist_entry + e, machine.hist_entry + e2))
        self.bar_waits = [{pc for pc, ins in enumerate(prog.code) if ins.kind == BAR_WAIT} for prog in machine.programs]
        self.images: dict = {}

    def bits(self, v: int) -> int:
        x = v & self.moved
        if not x:
            return v
        out = self.images.get(v)
        if out is None:
            out = v & ~self.moved
            dst = self.dst
            while x:
                low = x & -x
                out |= 1 << dst[low.bit_length() - 1]
                x ^= low
            self.images[v] = out
        return out

    def record(self, r: tuple) -> tuple:
        out = self.images.get(r)
        if out is not None:
            return out
        space, cta, obj, slot = r[R_SPACE], r[R_CTA], r[R_OBJ], r[R_SLOT]
        if space == SPACE_DATA:
            if cta == GLOBAL_CTA:
                obj, slot = self.s.get((obj, slot), (obj, slot))
            elif cta < 0:  # (register and tensor-map records: machines with them get no exchange)
                raise Mismatch(f"record of CTA field {cta}")
        elif space in (SPACE_INIT, SPACE_OBS):
            obj = self.m.get(obj, obj)
        elif space == SPACE_FLAG:
            obj = self.f.get(obj, obj)
        elif space != SPACE_START:
            raise Mismatch(f"record space {space}")
        owner = r[R_OWNER]
        out = (space, self.c.get(cta, cta), obj, slot, *r[R_SLOT + 1:R_OWNER], self.p.get(owner, owner),
               *r[R_OWNER + 1:R_AKNOWN], self.bits(r[R_AKNOWN]), self.bits(r[R_KNOWN]))
        if len(self.images) > _MEMO_LIMIT:
            self.images.clear()
        self.images[r] = out
        return out

    def agent(self, a: tuple) -> tuple:
        kind = a[0]
        if kind == AG_TMA:
            return (kind, self.c.get(a[1], a[1]), a[2], a[3], self.m.get(a[4], a[4]), a[5], self.p.get(a[6], a[6]),
                    *a[7:])
        if kind == AG_CPARRIVE:
            covered = tuple(sorted((self.c.get(c, c), o, s, e) for c, o, s, e in a[8]))
            return (kind, self.c.get(a[1], a[1]), a[2], a[3], self.m.get(a[4], a[4]), a[5], self.p.get(a[6], a[6]),
                    a[7], covered, *a[9:])
        raise Mismatch(f"agent kind {kind}")

    def state(self, s: State) -> State:
        p, m, n = self.p, self.m, self.n
        procs = list(s.procs)
        for q, ps in enumerate(s.procs):
            tok = ps[P_TOKEN]
            # at a named barrier's wait, the token names the barrier (CTA*16+id); elsewhere (grid.sync,
            # a split warp's syncwarp) it is a generation or a mark, the same in every CTA
            if tok >= 0 and ps[P_PC] in self.bar_waits[q] and tok // 65536 in n:
                ps = (*ps[:P_TOKEN], n[tok // 65536] * 65536 + tok % 65536, *ps[P_TOKEN + 1:])
            procs[p.get(q, q)] = ps
        mbars = list(s.mbars)
        for i, mb in enumerate(s.mbars):
            jprev = mb[M_JPREV]
            if jprev:
                mb = (*mb[:M_JPREV], tuple(sorted((p.get(q, q), j) for q, j in jprev)), *mb[M_JPREV + 1:])
            mbars[m.get(i, i)] = mb
        named = list(s.named)
        for i, nb in enumerate(s.named):
            named[n.get(i, i)] = nb  # (warp bits are local to the CTA: the same warps in the other)
        cluster = renamed_cluster(s.cluster, p)
        agents = tuple(sorted(self.agent(a) for a in s.agents))
        records = tuple(sorted(self.record(r) for r in s.records))
        tmem = s.tmem
        if self.tmem_moves:
            out = list(tmem)
            for a, b in self.tmem_moves:
                out[b] = tmem[a]
            tmem = tuple(out)
        return State(tuple(procs), tuple(mbars), tuple(named), cluster, agents, records, tmem)


def cta_classes(machine) -> tuple[list[tuple[list[int], dict[int, Auto]]], list[str]]:
    """The classes of CTAs every two of which are exchanged by a proved automorphism: (the class,
    its first CTA's exchange with each other member), and why the other candidates failed."""
    if why := excluded(machine):
        return [], [why]
    shape: dict[tuple, list[int]] = {}
    for c in range(machine.ncta):
        key = tuple((machine.procs[q].role, machine.procs[q].instance, machine.procs[q].warp, machine.procs[q].lo,
                     machine.procs[q].hi, len(machine.programs[q].code)) for q in machine.procs_of_cta[c])
        shape.setdefault(key, []).append(c)
    classes: list[tuple[list[int], dict[int, Auto]]] = []
    rejected = [f"CTA{'s' if len(m) > 1 else ''} {', '.join(map(str, m))} run{'' if len(m) > 1 else 's'} a program "
                f"of another shape than CTA {first}'s"
                for first in [min(min(m) for m in shape.values())] for m in shape.values() if first not in m]
    tried = 0
    for members in shape.values():
        pending = list(members[:_MAX_CLASS])
        while len(pending) > 1 and tried < _MAX_PROOFS:
            first, rest = pending[0], pending[1:]
            star: dict[int, Auto] = {}
            left = []
            for c in rest:
                tried += 1
                if tried > _MAX_PROOFS:  # (a grid of many CTAs that all differ: the search goes on without)
                    rejected.append(f"CTA {first} and CTA {c}: not tried (more than {_MAX_PROOFS} candidates)")
                    break
                try:
                    star[c] = verify_exchange(machine, first, c)
                except Mismatch as why:
                    rejected.append(f"CTA {first} and CTA {c}: {why}")
                    left.append(c)
            if star:
                classes.append(([first, *star], star))
            pending = left
    return classes, rejected


class CtaSymmetry(PermutedSymmetry):
    """The plain swaps of symmetry.py after a sort of each class of interchangeable CTAs.

    ``canon`` returns the representative and the Auto applied (real -> representative), which
    engines/witness.py inverts to name the real warps and objects of each step."""

    def __init__(self, machine, classes: list[tuple[list[int], dict[int, Auto]]]):
        super().__init__(machine, [])
        self.classes = classes
        self.elements, self.mappers = [], []
        self._maps: dict[tuple, tuple[Auto, CtaMapper]] = {}
        h = machine.holders
        self._holders = [sum(h.proc_mask(q) for q in machine.procs_of_cta[c]) for c in range(machine.ncta)]

    def describe(self) -> str:
        """What the reduction exchanges, for the coverage line."""
        return "; ".join(f"CTAs {', '.join(map(str, sorted(members)))} interchangeable"
                         for members, _ in self.classes)

    def _exchange(self, star: dict[int, Auto], first: int, a: int, b: int) -> Auto:
        if a == first:
            return star[b]
        if b == first:
            return star[a]
        return star[a].compose(star[b].compose(star[a]))  # (first a)(first b)(first a) = (a b)

    def _auto(self, pi: tuple[tuple[int, int], ...]) -> tuple[Auto, CtaMapper]:
        hit = self._maps.get(pi)
        if hit is not None:
            return hit
        perm = dict(pi)
        g = IDENTITY
        for members, star in self.classes:
            first = members[0]
            seen: set[int] = set()
            for start in members:
                if start in seen or perm.get(start, start) == start:
                    continue
                cycle = [start]
                seen.add(start)
                nxt = perm[start]
                while nxt != start:
                    cycle.append(nxt)
                    seen.add(nxt)
                    nxt = perm[nxt]
                # (x1 x2 ... xk) = (x1 xk) ... (x1 x3)(x1 x2): the rightmost applied first
                for x in cycle[1:]:
                    g = self._exchange(star, first, cycle[0], x).compose(g)
        assert dict(g.ctas) == {k: v for k, v in perm.items() if k != v}
        if len(self._maps) > _MAPPERS:
            self._maps.clear()
        hit = self._maps[pi] = (g, CtaMapper(self.machine, g))
        return hit

    def canon(self, state: State) -> tuple[State, Auto | None]:  # type: ignore[override]
        procs = state.procs
        of = self.machine.procs_of_cta
        flags = [r for r in state.records if r[R_SPACE] == SPACE_FLAG]
        holders = self._holders

        def key(c: int) -> tuple:
            # the CTA's processes' local states, then which flag writes it made and knows (a view):
            # both move with the CTA, so CTAs that differ only in the latter still sort alike
            mine, h = of[c], holders[c]
            return (tuple(procs[q] for q in mine),
                    tuple((r[R_OWNER] in mine, bool(r[R_KNOWN] & h), bool(r[R_AKNOWN] & h)) for r in flags))
        pi: list[tuple[int, int]] = []
        for members, _ in self.classes:
            order = sorted(members, key=key)
            pi += [(old, new) for new, old in zip(members, order, strict=True) if old != new]
        best, best_g = state, IDENTITY
        if pi:
            best_g, mapper = self._auto(tuple(sorted(pi)))
            best = mapper.state(state)
        plain = [g for g in self.groups if len(g) > 1]
        if plain:
            saved, self.groups = self.groups, plain
            best, perm = Symmetry.canon(self, best)  # the plain swaps
            self.groups = saved
            best_g = self.plain_auto(perm).compose(best_g)
        return best, (None if best_g.identity else best_g)


def cta_symmetry(machine) -> CtaSymmetry | None:
    """The CTA symmetry of the machine, or None where no two CTAs are proved interchangeable."""
    classes, _ = cta_classes(machine)
    return CtaSymmetry(machine, classes) if classes else None


__all__ = ["CtaMapper", "CtaSymmetry", "cta_classes", "cta_symmetry", "excluded", "verify_exchange"]
