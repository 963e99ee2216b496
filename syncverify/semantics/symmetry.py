"""Symmetry reduction: identical warps are interchangeable.

Two processes are *symmetric* when they are whole warps of the same CTA and
role, run the same compiled program, and their programs never read a value
that tells them apart at run time (`instance` — `cta` is equal by
construction). Swapping two such processes everywhere in a state — their
local states, the owners and knowledge bits of access records, the waiters
of barriers, the warp bits of named barriers, the cluster barrier's arrivals,
the issuers of async agents with the snapshot bits their copies carry
(state.Holders.proc_block) — maps a reachable state to a reachable state and
a violation to a violation of the same code, because no rule looks at a
process's identity except through those fields.

The search stores one representative per orbit: processes of a group are
sorted by their local state. Any representative in the orbit is sound (the
successors of a representative are images of the successors of the state it
stands for), so ties need no perfect canonical form; a better tie-break only
merges more states.
"""

from __future__ import annotations

from .. import ir
from ..expr import free_names
from .families.regions import asymmetric_procs
from .program import Instr, Process, Program, wgmma_teams
from .state import M_JPREV, P_PC, R_AKNOWN, R_KNOWN, R_OWNER, Holders, State

_MEMO_LIMIT = 1 << 16  # images remembered per permutation before that table starts over


def _uses_instance(code: tuple[Instr, ...]) -> bool:
    def expr_uses(e) -> bool:
        return "instance" in free_names(e)

    def walk(obj) -> bool:
        if isinstance(obj, ir.Builtin | ir.BinOp | ir.UnOp | ir.Cond | ir.Pick):
            return expr_uses(obj)
        if isinstance(obj, tuple):
            return any(walk(x) for x in obj)
        if hasattr(obj, "__dataclass_fields__"):
            return any(walk(getattr(obj, f)) for f in obj.__dataclass_fields__ if f != "span")
        return False

    return any(walk(ins) for ins in code)


def _uses_tcgen05(code: tuple[Instr, ...]) -> bool:
    """Does the program run tcgen05 operations or 2-SM copies? Their per-process knowledge bits
    (after-fences, commit and copy snapshots: state.Holders.tc_base) are not permuted, so such
    processes are not."""
    return any(isinstance(ins.op, (ir.UmmaCommit, *ir.TCGEN05_OPS))
               or (isinstance(ins.op, ir.TmaLoad) and ins.op.cta_group == 2) for ins in code if ins.op is not None)


def _uses_global(code: tuple[Instr, ...]) -> bool:
    """Does the program access flags or run thread fences? Their per-process fence bits
    (families/globalmem.py, above every other holder) are not permuted, so such processes are not."""
    return any(isinstance(ins.op, ir.FlagOp | ir.ThreadFence) for ins in code if ins.op is not None)


def _copies(code: tuple[Instr, ...]) -> bool:
    return any(isinstance(ins.op, ir.TmaLoad) for ins in code if ins.op is not None)


def symmetry_groups(procs: list[Process], programs: list[Program], copies_movable: bool = True) -> list[list[int]]:
    """Groups (of two or more) of interchangeable processes. ``copies_movable``: whether a swap
    moves the copies' observation snapshots (Symmetry.apply with the holders); if not, processes
    that issue bulk copies stay where they are."""
    buckets: dict[tuple, list[int]] = {}
    teams = wgmma_teams(procs, programs)
    # parts of a slot (families/regions.py) are the owner's: a swap must keep which parts overlap
    apart = asymmetric_procs(procs, [prog.code for prog in programs])
    for proc, prog in zip(procs, programs, strict=True):
        if not proc.whole_warp or _uses_tcgen05(prog.code) or _uses_global(prog.code) or \
                (not copies_movable and _copies(prog.code)):
            continue
        # warps that share wgmma-groups are told apart from the other warpgroups' (a swap across
        # warpgroups would move a read to a warp whose waits do not retire it); parts of a slot
        # (families/regions.py) are the owner's: a swap must keep which parts overlap
        key = (proc.cta, proc.role, proc.instance if _uses_instance(prog.code) else None, prog.code,
               proc.warp // 4 if teams[proc.index] else None, apart.get(proc.index))
        buckets.setdefault(key, []).append(proc.index)
    return [g for g in buckets.values() if len(g) > 1]


class Symmetry:
    def __init__(self, procs: list[Process], programs: list[Program], holders: Holders | None = None):
        """``holders``: the machine's knowledge layout, where a swap moves each process's block of
        bits above tc_base (its copies' observation snapshots) with it. Without it, processes that
        issue bulk copies are not swapped."""
        self.holders = holders
        self.groups = symmetry_groups(procs, programs, copies_movable=holders is not None)
        self.warp_of = [p.warp for p in procs]
        self.cta_of = [p.cta for p in procs]
        # memo table: a record's image under a permutation (records recur across states)
        self._images: dict[tuple, dict[tuple, tuple]] = {}

    def canon(self, state: State) -> tuple[State, dict[int, int] | None]:
        """A representative of the state's orbit, and the permutation applied (old -> new).

        Each group's members are ordered by local state; members with equal local states
        keep their relative order. A tie-break on what each warp owns in the records was
        measured to merge no additional state on any spec or on the ring family (it cost
        a fifth of the search time), so there is none."""
        if not self.groups:
            return state, None
        procs = state.procs
        perm: dict[int, int] = {}
        for group in self.groups:
            order = sorted(group, key=procs.__getitem__)
            for new, old in zip(group, order, strict=True):
                if new != old:
                    perm[old] = new
        if not perm:
            return state, None
        return self.apply(state, perm), perm

    def apply(self, state: State, perm: dict[int, int]) -> State:
        new_procs = list(state.procs)
        for old, new in perm.items():
            new_procs[new] = state.procs[old]
        bit_pairs = []
        for old, new in perm.items():
            bit_pairs.append((3 << (2 * old), 2 * old, 2 * new, 3))
        if self.holders is not None:  # each process's snapshot block moves with it
            for old, new in perm.items():
                src, width = self.holders.proc_block(old)
                ones = (1 << width) - 1
                bit_pairs.append((ones << src, src, self.holders.proc_block(new)[0], ones))
        moved = 0
        for mask, _, _, _ in bit_pairs:
            moved |= mask

        keep = ~moved
        # records, waiter lists and knowledge sets recur across states: remember their images under
        # this permutation (a set of knowledge bits, an int, is never equal to a tuple key)
        perm_key = tuple(perm.items())
        images = self._images.get(perm_key)
        if images is None or len(images) > _MEMO_LIMIT:
            images = self._images[perm_key] = {}
        get = images.get

        def remap(bits: int) -> int:
            if not bits & moved:
                return bits
            out = get(bits)
            if out is None:
                out = bits & keep
                for mask, src, dst, ones in bit_pairs:
                    if bits & mask:
                        out |= ((bits >> src) & ones) << dst
                images[bits] = out
            return out

        def image_of(r: tuple) -> tuple:
            owner = r[R_OWNER]
            image = images[r] = (*r[:R_OWNER], perm.get(owner, owner), *r[R_OWNER + 1:R_AKNOWN],
                                 remap(r[R_AKNOWN]), remap(r[R_KNOWN]))
            return image

        records = [get(r) or image_of(r) for r in state.records]
        mbars = list(state.mbars)
        for i, mb in enumerate(mbars):
            jprev = mb[M_JPREV]
            if jprev:
                jp = get(jprev)
                if jp is None:
                    jp = images[jprev] = tuple(sorted([(perm.get(p, p), j) for p, j in jprev]))
                if jp is not jprev:
                    mbars[i] = (*mb[:M_JPREV], jp, *mb[M_JPREV + 1:])
        # named barriers count warps of their own CTA: remap each CTA's bits by its own warps' moves
        moves_by_cta: dict[int, list[tuple[int, int]]] = {}
        for old, new in perm.items():
            moves_by_cta.setdefault(self.cta_of[old], []).append((self.warp_of[old], self.warp_of[new]))
        named = list(state.named)
        for cta, pairs in moves_by_cta.items():
            wmoved = 0
            for w_old, _ in pairs:
                wmoved |= 1 << w_old
            for i in range(cta * 16, cta * 16 + 16):
                nb = named[i]
                if nb.warps & wmoved:
                    bits = nb.warps & ~wmoved
                    for w_old, w_new in pairs:
                        if nb.warps >> w_old & 1:
                            bits |= 1 << w_new
                    named[i] = nb._replace(warps=bits)
        cluster = state.cluster
        if cluster[2]:
            bits = cluster[2]
            out = bits
            for old in perm:
                out &= ~(1 << old)
            for old, new in perm.items():
                if bits >> old & 1:
                    out |= 1 << new
            cluster = (cluster[0], cluster[1], out)
        agents = tuple(sorted((*a[:6], perm.get(a[6], a[6]), *a[7:]) for a in state.agents))
        return State(tuple(new_procs), tuple(mbars), tuple(named), cluster, agents, tuple(sorted(records)),
                     state.tmem)


__all__ = ["P_PC", "Symmetry", "symmetry_groups"]
