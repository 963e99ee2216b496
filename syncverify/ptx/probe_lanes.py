"""When one outcome for the whole warp is a sound reading of a probe that several lanes execute.

PTX executes `mbarrier.try_wait`/`test_wait` per thread ("the waiting thread"; a `try_wait` may time out
in each thread separately), so the lanes of a warp that execute one probe can get different results.
Extraction runs two outcomes, every lane true and every lane false (probe.py). A mixed outcome -- some
lanes true, the others false -- is covered by the two when what the outcomes do differently is, lane by
lane, only

* a wait or a probe (an acquire: a lane that does not wait is the all-false outcome's lane, one that
  waits the all-true outcome's, and a wait adds no count anyone else observes), or
* a per-lane shared-memory access (a lane's read or write in a mixed outcome is the same lane's access in
  the uniform outcome it took).

It is not covered when an outcome's path holds an operation whose effect is counted across lanes or
that the warp executes together -- an `mbarrier.arrive` (a mixed outcome gives a count between the two
uniform ones: `if (!tok) arrive` on a barrier of count 32 arrives 5 times, a deadlock neither uniform
outcome shows), expect_tx, a TMA or bulk copy issue, a bulk commit, a named-barrier or cluster-barrier
arrival, `__syncwarp`, a `wgmma`/`tcgen05` instruction (collective: on one path only they diverge).

Nor is it needed when the lanes' results are made equal before they decide: the instruction that decides
between the outcomes reads nothing the probe's result flows into except through `vote.sync.all.pred` or
`vote.sync.any.pred` (`__all_sync`/`__any_sync` of the result) over a member mask that holds every lane of
the probe, of a predicate each lane computes from its own result alone by the same function (`selp`,
`setp`, `not`, ... of the result and immediates). With f that function, the vote of f(r_lane) over a mixed
outcome is a value one of the uniform outcomes gives, and it is consistent with the probe's meaning: a
lane whose result was true shows the phase completed, and false may come at any time. Not cut there: a
ballot, `vote.sync.uni`, `redux.sync` or a shuffle of the result (a ballot gives each lane its own bit
back; a mixed outcome's sum or `uni` is a value no uniform outcome gives), nor a vote of a predicate that
also reads %laneid or another lane's value. The flow is followed over the whole function, through every
register an instruction writes from a register it reads (or from its guard), and through memory: a store
of a value the result flows into makes every load's result carry it. It over-approximates (a register
written twice is one register), which can only refuse more.

A probe executed by one lane has one result: nothing to mix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .launch import Event
from .parse import Imm, Instr, Name, Operand, Pair, Vec, operand_registers

if TYPE_CHECKING:
    from .cfg import Cfg
    from .probe import Part, Pending
    from .warp import WarpState

# what two outcomes may do differently when the lanes' results can differ: acquires and per-lane accesses
# ("text" is the `if`/`else`/`}` of a nested probe, whose statements are in the list themselves)
_LANEWISE = frozenset({"read", "write", "wait", "probe", "text", "bulk_wait"})

_STORES = ("st", "red", "atom", "stmatrix", "cp", "multimem")
_LOADS = ("ld", "atom", "ldmatrix", "ldu", "multimem")

_taint_cache: dict[tuple[int, frozenset[str]], frozenset[str]] = {}


def _constant(cfg: Cfg, op: Operand) -> int | None:
    """An immediate, or a register every write of which in the function is a `mov` of one immediate (the
    member mask nvcc keeps in a register: `mov.u32 %r8, -1; vote.sync.all.pred %p5, %p4, %r8;`)."""
    if isinstance(op, Imm):
        return op.value
    if not isinstance(op, Name):
        return None
    values = set()
    for ins in cfg.body:
        if isinstance(ins, Instr) and op.name in _written(ins):
            src = ins.operands[1] if ins.base == "mov" and len(ins.operands) == 2 and not ins.guard else None
            if not isinstance(src, Imm):
                return None
            values.add(src.value)
    return values.pop() if len(values) == 1 else None


def _uniform_result(cfg: Cfg, ins: Instr, lanes: int, result: frozenset[str]) -> bool:
    """Whether `ins` is `vote.sync.all.pred`/`vote.sync.any.pred` over a member mask that holds every lane
    of `lanes`, of a predicate every lane computes by the same function of its own probe result alone
    (module docstring)."""
    if ins.opcode not in ("vote.sync.all.pred", "vote.sync.any.pred") or len(ins.operands) != 3 or ins.guard:
        return False
    mask = _constant(cfg, ins.operands[2])
    if mask is None or (mask & 0xFFFFFFFF) & lanes != lanes:
        return False
    return all(_own_result(cfg, r, result, set()) for r in operand_registers(ins.operands[1]))


# what a lane may compute its voted predicate with: its own values only, nothing from another lane
_LANE_LOCAL = frozenset({"mov", "selp", "setp", "set", "not", "and", "or", "xor", "cvt"})


def _own_result(cfg: Cfg, reg: str, result: frozenset[str], seen: set[str]) -> bool:
    """Whether every write of `reg` in the function computes it from the probe's `result` registers and
    immediates only, by lane-local instructions without a guard: the same function of the lane's own
    result in every lane (a register read nowhere written, %laneid or a parameter, is not)."""
    if reg in result:
        return True
    if reg in seen:
        return False  # a value carried around a loop: not followed
    seen.add(reg)
    defs = [i for i in cfg.body if isinstance(i, Instr) and reg in _written(i)]
    for ins in defs:
        if ins.base not in _LANE_LOCAL or ins.guard or isinstance(ins.operands[0], Pair):
            return False
        for op in ins.operands[1:]:
            if isinstance(op, Imm):
                continue
            regs = operand_registers(op)
            if not regs or not all(_own_result(cfg, r, result, seen) for r in regs):
                return False
    seen.discard(reg)
    return bool(defs)


def _written(ins: Instr) -> set[str]:
    dst = ins.operands[0] if ins.operands else None
    return operand_registers(dst) if isinstance(dst, (Name, Pair, Vec)) else set()


def result_flow(cfg: Cfg, result: frozenset[str], lanes: int) -> frozenset[str]:
    """The registers the probe's `result` registers can flow into (module docstring), over the whole
    function: a fixpoint over every instruction, cut at the ones whose result is uniform across `lanes`."""
    key = (id(cfg.body), result | {f"#{lanes}"})
    hit = _taint_cache.get(key)
    if hit is not None:
        return hit
    tainted = set(result)
    memory = False
    changed = True
    while changed:
        changed = False
        for ins in cfg.body:
            if not isinstance(ins, Instr):
                continue
            dst = _written(ins)
            srcs = set().union(*(operand_registers(o) for o in ins.operands)) - dst
            if ins.guard:
                srcs.add(ins.guard)
            carries = bool(srcs & tainted) or (memory and ins.base in _LOADS)
            if not carries or _uniform_result(cfg, ins, lanes, result):
                continue
            if ins.base in _STORES and not memory:
                memory = changed = True
            if dst - tainted:
                tainted |= dst
                changed = True
    out = frozenset(tainted)
    _taint_cache[key] = out
    return out


def check_lanes(run: WarpState, p: Pending, parts: list[Part]) -> None:
    """Refuse the probe `p` when its lanes' results can differ and one outcome's path holds an operation
    counted across lanes (module docstring); its uses are the tuples of `parts`."""
    if p.lanes & (p.lanes - 1) == 0:
        return  # one lane: one result
    flow: frozenset[str] | None = None
    for x in parts:
        if not isinstance(x, tuple):
            continue
        at, then, other = x
        counted = [e for e in (*then, *other) if e.kind not in _LANEWISE]
        if not counted:
            continue
        if flow is None:
            flow = result_flow(run.cfg, frozenset(operand_registers(p.pred)), p.lanes)
        reads = set().union(*(operand_registers(o) for o in at.operands)) | ({at.guard} if at.guard else set())
        if at.base == "bra":
            reads = {at.guard} if at.guard else set()
        if not reads & flow:
            continue  # decided by a value equal in every lane (a vote of the result)
        e = counted[0]
        raise run.refuse(p.ins, f"{_lanes(p.lanes)} lanes execute this probe and each may get its own result, "
                         f"and the branch on it at PTX line {at.line} leads to `{e.instr.opcode}` at PTX line "
                         f"{e.instr.line}{_cuda(e)} on one outcome's path: an operation counted across lanes or "
                         "executed by the warp together, which lanes with different results would split (neither "
                         "the all-true nor the all-false outcome covers that); probe with one lane, or vote the "
                         "result across the warp (__all_sync) before branching on it")


def _lanes(mask: int) -> int:
    return bin(mask).count("1")


def _cuda(e: Event) -> str:
    src = e.instr.src
    return f" (CUDA {src})" if src is not None else ""
