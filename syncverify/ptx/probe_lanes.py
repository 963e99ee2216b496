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

Nor is it needed when the lanes' results are made one before they decide: a vote of the result,
`vote.sync.all.pred` or `vote.sync.any.pred` over a member mask that holds every lane of the probe, of a
predicate x = f(result) each lane computes by the same function of its own result alone (`selp`, `setp`,
`not`, ... of the result and immediates). Every lane gets the vote's value, a value one of the uniform
outcomes gives; it reads as the probe's result when its all-true value is given only where every lane's
test passed -- `all` of f(1) = 1 (`__all_sync(~0u, tok)`), `any` of f(1) = 0 -- since a lane whose
try_wait returned false did not acquire, even where another lane saw the phase complete: `__any_sync` of
the result is not one. Nor is a ballot, `vote.sync.uni`, `redux.sync` or a shuffle of the result (a ballot
gives each lane its own bit back; a mixed outcome's `uni` or sum is a value no uniform outcome gives), nor
a vote of a predicate that also reads %laneid or another lane's value.

What is followed (LaneWatch): from the probe on, along the path each outcome's copy of the warp executes
(execute.py calls `see` before each instruction), the registers an instruction writes from a register
computed from the result (or under such a guard), and memory: a store of such a value makes every later
load's result one. A register overwritten from other values leaves the set. The set is carried past the
outcomes' join until it is empty. Checked at each instruction: a branch on such a register has nothing
counted on either of its ways up to its immediate post-dominator (the way neither outcome took included: a
decision both uniform outcomes take alike can still split a mixed one's lanes); any other instruction that
reads one is an instruction lanes may execute apart (a load, a store, a wait, a per-thread fence, a warp
collective of data that all lanes execute), else it is refused.

A probe executed by one lane has one result: nothing to mix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .cfg import EXIT, affects_sync
from .parse import Imm, Instr, Name, NegName, Operand, Pair, Vec, operand_registers
from .values import UNKNOWN

if TYPE_CHECKING:
    from .cfg import Cfg
    from .probe import Pending
    from .warp import WarpState

# warp-collective instructions whose operands are data: the warp executes them together whatever their
# operands hold (their result carries the per-lane values on, but for a vote of the result: above)
_COLLECTIVE_DATA = ("vote.sync", "shfl.sync", "redux.sync", "match.sync")

_STORES = ("st", "red", "atom", "stmatrix", "cp", "multimem")
_LOADS = ("ld", "atom", "ldmatrix", "ldu", "multimem")


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


def _uniform_result(run: WarpState, ins: Instr, lanes: int, result: frozenset[str], value: int | None) -> bool:
    """Whether `ins` is a vote that makes the probe's lanes' results one (module docstring): `vote.sync.all`
    or `.any` of `.pred`, over a member mask that holds every lane of `lanes`, of a predicate x every lane
    computes by the same function f of its own result alone, and such that the vote takes the value of the
    all-true outcome only when every lane's result was true: `all` of f(1) = 1, or `any` of f(1) = 0. This
    state runs the outcome whose result is `value`; x = f(value) is read from it."""
    cfg = run.cfg
    if value is None or ins.opcode not in ("vote.sync.all.pred", "vote.sync.any.pred") \
            or len(ins.operands) != 3 or ins.guard:
        return False
    mask = _constant(cfg, ins.operands[2])
    if mask is None or (mask & 0xFFFFFFFF) & lanes != lanes:
        return False
    src = ins.operands[1]
    if not isinstance(src, (Name, NegName)):
        return False
    if not _own_result(cfg, src.name, result, set()):
        return False
    xs = {run.read(Name(src.name), lane) for lane in range(run.nlanes) if lanes >> lane & 1}
    if len(xs) != 1 or xs == {UNKNOWN}:
        return False
    x = int(bool(xs.pop())) ^ isinstance(src, NegName)
    f_true = x if value == 1 else 1 - x  # f(1): f is not constant, or the vote would not read the result
    return f_true == (1 if ins.opcode == "vote.sync.all.pred" else 0)


# what a lane may compute its voted predicate with: its own values only, nothing from another lane
_LANE_LOCAL = frozenset({"mov", "selp", "setp", "set", "not", "and", "or", "xor", "cvt"})


def _own_result(cfg: Cfg, reg: str, result: frozenset[str], seen: set[str]) -> bool:
    """Whether the one write of `reg` in the function computes it from the probe's `result` registers and
    immediates only, by a lane-local instruction without a guard, and so on back to the result: the same
    function of the lane's own result in every lane (a register read nowhere written, %laneid or a
    parameter, is not; nor is one written in two places, on paths the lanes may take apart)."""
    if reg in result:
        return True
    if reg in seen:
        return False  # a value carried around a loop: not followed
    seen.add(reg)
    defs = [i for i in cfg.body if isinstance(i, Instr) and reg in _written(i)]
    if len(defs) != 1:
        return False  # written in two places: which one a lane ran could depend on the lane
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
    return True


def _written(ins: Instr) -> set[str]:
    dst = ins.operands[0] if ins.operands else None
    return operand_registers(dst) if isinstance(dst, (Name, Pair, Vec)) else set()


def _lanewise(ins: Instr) -> bool:
    """An instruction lanes may execute apart with no effect counted across them: a per-lane load or
    store, a wait, a per-thread fence, and everything that leaves the skeleton unchanged (cfg.affects_sync)."""
    if not affects_sync(ins):
        return True
    op = ins.opcode
    if ins.base in ("ld", "st", "ldu", "prefetch") and not op.startswith("st.async"):
        return True
    return op.startswith(("mbarrier.try_wait", "mbarrier.test_wait", "fence.proxy.async", "membar.proxy.async",
                          "fence.mbarrier_init", "cp.async.wait_", "cp.async.bulk.wait_group"))


@dataclass
class LaneWatch:
    """The registers (and whether shared or local memory) that hold a value computed from a multi-lane
    probe's result, followed instruction by instruction along what a warp executes (execute.py calls `see`
    before each instruction): a value there may differ between the lanes of a mixed outcome, so a decision
    on it must not split a counted operation's lanes (module docstring)."""

    origin: Instr
    lanes: int
    result: frozenset[str]
    tainted: set[str] = field(default_factory=set)
    memory: bool = False
    value: int | None = None  # the result this state's outcome gave every lane; None past the join

    @staticmethod
    def start(parent: LaneWatch | None, p: Pending, value: int) -> LaneWatch | None:
        """The watch for the outcome `value` (1 or 0 in every lane) of probe `p`: its result register added
        to what `parent` followed (a probe of one lane adds nothing)."""
        regs = frozenset(operand_registers(p.pred))
        if p.lanes & (p.lanes - 1) == 0:
            return None if parent is None else parent.copy()
        out = LaneWatch(p.ins, p.lanes, regs, set(regs),
                        parent.memory if parent else False, value)
        if parent is not None:
            out.tainted |= parent.tainted
        return out

    def copy(self) -> LaneWatch:
        return LaneWatch(self.origin, self.lanes, self.result, set(self.tainted), self.memory, self.value)

    def join(self, other: LaneWatch | None) -> None:
        if other is not None:
            self.tainted |= other.tainted
            self.memory |= other.memory

    @property
    def idle(self) -> bool:
        return not self.tainted and not self.memory

    def see(self, run: WarpState, pc: int, ins: Instr) -> None:
        """Check `ins` (at position `pc`) before the warp executes it, then follow its effect on the taint."""
        dst = _written(ins)
        reads = set().union(set(), *(operand_registers(o) for o in (ins.operands[1:] if dst else ins.operands)))
        if ins.guard:
            reads.add(ins.guard)
        if ins.base == "bra":
            reads = {ins.guard} if ins.guard else set()
        hit = reads & self.tainted
        if hit and not _lanewise(ins) and not ins.opcode.startswith(_COLLECTIVE_DATA):
            raise self._refuse(run, ins, ins, f"reads {_one(hit)}, which is computed from it")
        if ins.base == "bra" and ins.guard in self.tainted:
            self._scan(run, pc, ins)
        if ins.opcode.startswith(("mbarrier.try_wait", "mbarrier.test_wait")) \
                or _uniform_result(run, ins, self.lanes, self.result, self.value):
            self.tainted -= dst  # a result of its own (a probe is watched by its own fork), or a vote
            return
        if hit or (self.memory and ins.base in _LOADS):
            self.tainted |= dst
            if ins.base in _STORES:
                self.memory = True
        else:
            self.tainted -= dst

    def _scan(self, run: WarpState, pc: int, ins: Instr) -> None:
        """A branch whose lanes may go both ways in a mixed outcome: nothing counted on either way before
        the paths meet again (its immediate post-dominator), where the lanes are together again."""
        cfg = run.cfg
        join = cfg.ipdom.get(pc, EXIT)
        seen: set[int] = set()
        todo = [s for s in cfg.successors(pc) if s != join]
        while todo:
            i = todo.pop()
            if i in seen or i == EXIT or i == join:
                continue
            seen.add(i)
            if not _lanewise(cfg.body[i]):
                raise self._refuse(run, ins, cfg.body[i], f"lies on one way of the branch at PTX line {ins.line} "
                                   "on a value computed from it")
            todo.extend(cfg.successors(i))

    def _refuse(self, run: WarpState, at: Instr, e: Instr, why: str) -> Exception:
        src = f" (CUDA {e.src})" if e.src is not None else ""
        return run.refuse(self.origin, f"{bin(self.lanes).count('1')} lanes execute this probe and each may get its "
                          f"own result; `{e.opcode}` at PTX line {e.line}{src} {why}: an operation counted across "
                          "lanes or executed by the warp together, which lanes with different results would split "
                          "(neither the all-true nor the all-false outcome covers that); probe with one lane, or "
                          "vote the result across the warp (__all_sync) before branching on it")


def _one(regs: set[str]) -> str:
    return ", ".join(sorted(regs))


def merge_watches(watches: list[LaneWatch | None]) -> LaneWatch | None:
    """What the states that meet at a probe's join follow from there: everything any of them followed."""
    live = [w for w in watches if w is not None]
    if not live:
        return None
    out = live[0].copy()
    out.value = None  # past the join the outcomes' registers are merged: no vote of this result is read
    for w in live[1:]:
        out.join(w)
    return None if out.idle else out
