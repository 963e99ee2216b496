"""Synchronization through global memory, which extraction does not model: found and refused.

The model knows shared-memory synchronization (mbarriers, named and cluster
barriers, async-proxy completions). A kernel can also wait on global memory: a
flag spun on with `ld.acquire.gpu` (CUTLASS's `cutlass/barrier.h` `wait_eq`,
the stream-K fixup's wait for its peers' partials), a counter taken with `atom`
(a semaphore, a last-CTA-done test), a volatile abort flag. A value loaded from
global memory is unknown to the executor, and a branch decided by an unknown
value is skipped when no synchronizing instruction lies on its paths -- which
is exactly what such a wait looks like (`while (ld_acquire(flag) != v) {}` has
nothing but the load in its loop). Skipping it would extract the kernel with
the wait gone: a stream-K fixup that reads its peers' partials without waiting
would give the same protocol as the correct one.

So before a branch decided by an unknown value is skipped, the registers its
predicate derives from are traced back (def-use over the whole function,
`GlobalFlow`) to the instructions that read global memory, and extraction
refuses, at that instruction's line, when

* the value comes from an `atom`, or from a strong load (`.volatile`,
  `.relaxed`, `.acquire`, at any scope) of memory that is not shared: a flag
  deciding a branch is synchronization, whatever the branch does; or
* the load lies on a path the branch decides (inside the loop whose exit the
  branch is): a spin on global memory, which waits for another thread's store.

A plain load before the branch that the branch does not repeat (a
data-dependent `if`, a trip count read once) is data, and is skipped as before.
The def-use relation is flow-insensitive (a register is traced to every
definition of it in the function; nvcc's PTX defines most registers once), so it
can only find more sources than a path has, never fewer.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .cfg import Cfg
from .parse import Addr, Instr, operand_registers

if TYPE_CHECKING:
    from .warp import WarpState

_NO_DST = ("st", "red", "bra", "bar", "barrier", "fence", "membar", "cp", "ret", "exit", "prefetch", "prefetchu",
           "trap", "nanosleep", "mbarrier", "griddepcontrol", "setmaxnreg", "wgmma", "tcgen05", "call")
_STRONG = ("volatile", "relaxed", "acquire")
_NOT_GLOBAL = ("param", "const", "local")


_SHARED = "<shared memory>"


def _in_shared(ins: Instr) -> bool:
    """An access that may touch shared memory (`.shared`, or a generic address)."""
    return not any(m in ("global", *_NOT_GLOBAL) for m in ins.mods)


def reads_global(ins: Instr) -> bool:
    """A load or atomic whose result may come from global memory (`.global`, or a generic address)."""
    if ins.base not in ("ld", "ldu", "atom"):
        return False
    return not any(m.startswith("shared") or m in _NOT_GLOBAL for m in ins.mods)


def is_flag_read(ins: Instr) -> bool:
    """An `atom`, or a strong load, of memory that is not shared: how a thread reads a value another thread
    publishes through global memory (PTX memory consistency model: only strong operations synchronize)."""
    return reads_global(ins) and (ins.base == "atom" or any(m in _STRONG for m in ins.mods))


class GlobalFlow:
    """For each register, the instructions reading global memory that its value may derive from."""

    def __init__(self, cfg: Cfg):
        body = cfg.body
        self.body = body
        src: dict[str, set[int]] = {}
        edges: list[tuple[frozenset[str], frozenset[str]]] = []  # (registers read, registers written)
        for i, ins in enumerate(body):
            ops = ins.operands
            if ins.base in ("st", "red", "atom") and ops and _in_shared(ins):
                # a value stored to shared memory reaches every load of it (`last = atomicAdd(...) == n - 1;`
                # in a __shared__ flag, then `if (last)`): memory is one pseudo-register
                used = set().union(*(operand_registers(o) for o in ops[1:])) | ({ins.guard} if ins.guard else set())
                edges.append((frozenset(used), frozenset({_SHARED})))
            if not ops or ins.base in _NO_DST or isinstance(ops[0], Addr) or not operand_registers(ops[0]):
                continue
            dst = frozenset(operand_registers(ops[0]))
            used = set().union(*(operand_registers(o) for o in ops[1:])) if len(ops) > 1 else set()
            if ins.base in ("ld", "ldu", "atom") and _in_shared(ins):
                used.add(_SHARED)
            if ins.guard:
                used.add(ins.guard)  # `@p mov r, 1`: r depends on p
            if reads_global(ins):
                for r in dst:
                    src.setdefault(r, set()).add(i)
            edges.append((frozenset(used), dst))
        changed = True
        while changed:
            changed = False
            for used, dst in edges:
                got: set[int] = set()
                for r in used:
                    got |= src.get(r, set())
                if not got:
                    continue
                for r in dst:
                    have = src.setdefault(r, set())
                    if not got <= have:
                        have |= got
                        changed = True
        self.sources = src


_FLOWS: weakref.WeakKeyDictionary[Cfg, GlobalFlow] = weakref.WeakKeyDictionary()


def flow_of(cfg: Cfg) -> GlobalFlow:
    got = _FLOWS.get(cfg)
    if got is None:
        got = _FLOWS[cfg] = GlobalFlow(cfg)
    return got


def refuse_global_wait(run: WarpState, branch: int, join: int) -> None:
    """Refuse, at the global read's line, a branch decided by an unknown value that is a global-memory
    flag or whose paths repeat the global load it depends on (a spin); return when it is neither."""
    ins = run.cfg.body[branch]
    if ins.guard is None:
        return
    flow = flow_of(run.cfg)
    sources = sorted(flow.sources.get(ins.guard, ()))
    if not sources:
        return
    body = run.cfg.body
    where = f"the branch at PTX line {ins.line}"
    for s in sources:
        if is_flag_read(body[s]):
            raise run.refuse(body[s], f"`{body[s].opcode}` reads a flag in global memory: its value decides {where} "
                             "(directly or through what it computes). Synchronization through global memory "
                             "(flags, counters, semaphores) is not modelled, and skipping it would drop a wait")
    region = run.cfg.region(branch, join)
    for s in sources:
        if s in region:
            raise run.refuse(body[s], f"a loop waits on global memory: {where} decides whether this load of "
                             "global memory runs again, and the loop's exit depends on the value it reads (a spin "
                             "on a flag another thread stores). Synchronization through global memory is not "
                             "modelled, and skipping the loop would drop a wait")


def global_note(run: WarpState, reg: str | None) -> str:
    """' (it derives from the global-memory read at PTX line N)' for a register, or ''."""
    if reg is None:
        return ""
    sources = sorted(flow_of(run.cfg).sources.get(reg, ()))
    if not sources:
        return ""
    body = run.cfg.body
    flags = [s for s in sources if is_flag_read(body[s])]
    if not flags:
        return f" (it is loaded from global memory at PTX line {body[sources[0]].line})"
    return (f" (it derives from `{body[flags[0]].opcode}` at PTX line {body[flags[0]].line}, a flag in global "
            "memory: synchronization through global memory is not modelled)")
