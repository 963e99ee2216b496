"""Control flow of a flattened PTX function: successors, immediate post-dominators, and the
instructions that matter to synchronization.

The executor runs a warp's lanes in lockstep and re-converges diverged lanes at
the immediate post-dominator of the branch (the classic SIMT stack). When a
branch is decided by a value it cannot know, it may skip to that post-dominator
only if nothing on the way can affect synchronization; `affects_sync` is that test.
"""

from __future__ import annotations

from functools import cached_property

import networkx as nx

from .parse import Function, Instr, Name

EXIT = -1

# Families of instructions whose effect the model knows, or that must be refused.
_SYNC_PREFIXES = ("mbarrier.", "bar.", "barrier.", "cp.async", "fence.proxy.async", "fence.mbarrier_init",
                  "membar.proxy.async", "wgmma.", "tcgen05.", "elect.", "shfl.", "vote.", "match.", "redux.",
                  "activemask", "st.async", "red.async", "multimem.", "setmaxnreg", "call", "trap", "brkpt",
                  "exit", "ret", "griddepcontrol", "bar.warp", "clusterlaunchcontrol.",
                  "grid.sync",  # (a recognised this_grid().sync(): cg_grid_sync.py)
                  "tensormap.", "fence.proxy.tensormap::generic")  # (rewritten tensor maps: tensormaps.py)


def affects_sync(ins: Instr) -> bool:
    """True when skipping `ins` could change the synchronization skeleton.

    Shared-memory and generic loads and stores count (they are the accesses
    races are about, and a generic address may point into shared memory), as
    do warp-collective instructions, barrier and copy instructions, calls and
    exits (an exit changes who a barrier waits for).
    """
    op = ins.opcode
    if op.startswith(_SYNC_PREFIXES):
        return True
    base = ins.base
    if base in ("ld", "st", "atom", "red", "ldu", "cp", "prefetch", "stmatrix", "ldmatrix"):
        mods = ins.mods
        return not any(m in ("global", "param", "const", "local") for m in mods) or "shared" in op
    return False


class Cfg:
    """Instruction-level control-flow graph of one function body."""

    def __init__(self, fn: Function):
        self.fn = fn
        assert fn.body is not None
        self.body: tuple[Instr, ...] = fn.body

    def target(self, ins: Instr) -> int:
        lab = ins.operands[-1]
        assert isinstance(lab, Name)
        return self.fn.labels[lab.name]

    def successors(self, i: int) -> list[int]:
        ins = self.body[i]
        nxt = i + 1 if i + 1 < len(self.body) else EXIT
        if ins.base == "bra":
            t = self.target(ins)
            return [t] if ins.guard is None else [t, nxt]
        if ins.base in ("ret", "exit", "trap"):
            return [EXIT] if ins.guard is None else [EXIT, nxt]
        return [nxt]

    @cached_property
    def ipdom(self) -> dict[int, int]:
        """Immediate post-dominator of each instruction that reaches the exit."""
        g = nx.DiGraph()
        g.add_node(EXIT)
        for i in range(len(self.body)):
            for s in self.successors(i):
                g.add_edge(s, i)  # reversed
        idom = nx.immediate_dominators(g, EXIT)
        return {k: v for k, v in idom.items() if k != EXIT or v != EXIT}

    def region(self, branch: int, join: int) -> set[int]:
        """Instructions reachable from the branch's successors before the join point."""
        seen: set[int] = set()
        todo = [s for s in self.successors(branch) if s != join]
        while todo:
            n = todo.pop()
            if n in seen or n == EXIT or n == join:
                continue
            seen.add(n)
            todo.extend(self.successors(n))
        return seen
