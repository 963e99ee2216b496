"""Per-warp execution of a kernel's synchronization skeleton.

Each warp of each CTA of one cluster runs the entry function with its lanes in
lockstep: integer and predicate arithmetic is executed per lane with the ids of
the launch, diverged lanes re-converge at the branch's immediate post-dominator,
and every instruction that touches synchronization becomes an `Event` with the
set of lanes that executed it and its operands resolved to shared-memory byte
addresses. What cannot be decided is refused with the PTX and CUDA lines
(`Refusal`), never guessed:

* an unknown value (data, time, an unbound parameter) deciding a branch, unless
  nothing on either side up to the join point affects synchronization;
* an unknown barrier or buffer address, parity, count or byte count;
* an instruction that affects synchronization and is not modelled.

`mbarrier.try_wait` is modelled as the blocking wait of the language: it
returns true once the phase completed (a time-limited try_wait returning false
is not modelled, as in the language, docs/language.md §10), so the spin loop
around it leaves at its first test.

This module is the top of the executor: `WarpRun` walks the warp's control flow
and sends each instruction to its handler -- the synchronization instructions
(sync.py, with access.py, spin.py and undefined.py under it), global memory
(globalcomm.py, globalsync.py) and the ordinary instructions (the arithmetic
here, the moves and memory of `WarpState`, warp.py). The handlers take a
`WarpState` and import only warp.py and launch.py, never this module.
"""

from __future__ import annotations

from .. import budget
from . import clc, kept, tensormaps
from .cfg import EXIT, Cfg, affects_sync
from .cg_grid_sync import GRID_SYNC, rewrite_grid_syncs
from .globalcomm import GlobalAccesses
from .globalsync import global_note, refuse_global_wait
from .gridsync import execute_global, refuse_skipped_flags, spin_wait
from .launch import PARAM_SPACE, Event, Launch, Memory, _bits, _lanes, _params, cluster_warps
from .parse import Function, Instr, Module, Name, Pair, PtxError, Vec
from .probe import fork, retry_exit
from .provenance import param_hint
from .sync import execute_sync
from .values import UNKNOWN, computed
from .warp import WarpState, _Entry
from .wgmma_regs import note_writes

MAX_STEPS = 4_000_000


class WarpRun(WarpState):
    """Executes one warp; `events` is its synchronization skeleton in program order."""

    def __init__(self, mod: Module, fn: Function, cfg: Cfg, mem: Memory, launch: Launch, cta_rank: int,
                 ctaid: tuple[int, int, int], warp: int, params: dict[str, tuple[bytes | None, bytes | None]],
                 zero: dict[str, set[int]] | None = None, gcomm: GlobalAccesses | None = None):
        super().__init__(mod, fn, cfg, mem, launch, cta_rank, ctaid, warp, params, zero)
        self.gcomm = gcomm  # where the global-memory accesses go (globalcomm.py); None: not recorded
        if gcomm is not None:
            gcomm.start(self)

    # ---- execution -------------------------------------------------------------------------------

    def run(self, stack: list[_Entry] | None = None) -> list[Event]:
        """Run to the warp's exit, from the start or from a SIMT stack saved earlier (symloop.py); a probe's
        two outcomes run to their join point this way too (probe.py)."""
        full = (1 << self.nlanes) - 1
        if full == 0:
            return []
        if stack is None:
            stack = [_Entry(0, full, EXIT)]
        self.stack = stack
        self.steps = 0
        while stack:
            self.step(stack)
        return self.events

    def step(self, stack: list[_Entry]) -> None:
        """One instruction of the top of the SIMT stack (or one pop of a finished entry); a probe it met
        (sync.py sets `probe`) is forked into its two outcomes here, after the instruction (probe.py)."""
        body = self.cfg.body
        top = stack[-1]
        top.mask &= ~self.exited
        if top.pc == top.rpc or top.mask == 0 or top.pc == EXIT:
            stack.pop()
            return
        self.steps += 1
        if not self.steps & 0xFFFF:
            budget.check_clock(f"running warp {self.warp} of CTA {self.rank} (PTX line {body[top.pc].line})")
        if self.steps > MAX_STEPS:
            raise self.refuse(body[top.pc], f"execution did not finish after {MAX_STEPS:,} steps (a loop "
                              "whose trip count depends on a value that was not given?)")
        ins = body[top.pc]
        if self.lane_watch is not None:
            self.lane_watch.see(self, top.pc, ins)
        self.pc = top.pc
        active = top.mask
        if self.kept and kept.guard(self, ins, active):
            kept.fork(self, top, ins, active)  # a branch on a value read from a flag (kept.py)
            return
        guard = self._guard(ins, active)
        if ins.base == "bra":
            self._branch(stack, top, ins, active, guard)
            return
        if ins.base in ("ret", "exit"):
            if guard[1]:
                raise self.refuse(ins, "whether the thread exits depends on a value that is not known")
            self.exited |= guard[0]
            top.pc += 1
            return
        run_mask, unknown = guard
        if unknown:
            if affects_sync(ins):
                raise self.refuse(ins, "the guard predicate of a synchronization instruction is not known"
                                  + global_note(self, ins.guard))
            if self.launch.whole_grid:
                refuse_skipped_flags(self, [ins])
            if self.gcomm is not None:
                self.gcomm.note(self, ins, unknown)
            self.havoc(ins, unknown)
        if run_mask:
            self.execute(ins, run_mask)
            note_writes(self, ins, run_mask)  # an RS wgmma's A register written (wgmma_regs.py)
        top.pc += 1
        if self.probe is not None:
            fork(self, stack)

    def _branch(self, stack: list[_Entry], top: _Entry, ins: Instr, active: int, guard: tuple[int, int]) -> None:
        i = top.pc
        taken, unknown = guard
        if unknown:
            giving_up = retry_exit(self, i, taken, unknown, active)  # a watchdog's retry of a probe (probe.py)
            if giving_up is not None:
                top.pc = giving_up
                return
            join = self.cfg.ipdom.get(i, EXIT)
            if join == EXIT:
                raise self.refuse(ins, "a branch is decided by a value that is not known (data, time or an "
                                  "unbound parameter) and its paths do not join before the exit"
                                  + param_hint(self.fn, ins.guard, set(self.launch.params)))
            if self.launch.whole_grid and spin_wait(self, i, join, active):
                top.pc = join  # a spin on a flag in global memory: `wait.until` (gridsync.py)
                return
            region = self._region_ok.get(i)
            if region is None:
                bad = [self.cfg.body[n] for n in sorted(self.cfg.region(i, join)) if affects_sync(self.cfg.body[n])]
                if bad:
                    b = bad[0]
                    raise self.refuse(ins, f"a branch is decided by a value that is not known (data, time or an "
                                      f"unbound parameter; bind it with --param) and a path it decides contains "
                                      f"`{b.opcode}` at PTX line {b.line}{global_note(self, ins.guard)}"
                                      f"{param_hint(self.fn, ins.guard, set(self.launch.params))}")
                refuse_global_wait(self, i, join)  # a flag or a spin in global memory is a wait, not data
                region = [self.cfg.body[n] for n in self.cfg.region(i, join)]
                if self.launch.whole_grid:
                    refuse_skipped_flags(self, region)
                self._region_ok[i] = region
            if self.gcomm is not None:
                self.gcomm.note_region(self, region, active)
            for r in region:
                self.havoc(r, active)
            top.pc = join
            return
        target = self.cfg.target(ins)
        nxt = i + 1
        not_taken = active & ~taken
        if not_taken == 0:
            top.pc = target
        elif taken == 0:
            top.pc = nxt
        else:
            join = self.cfg.ipdom.get(i, EXIT)
            top.pc = join
            stack.append(_Entry(nxt, not_taken, join))
            stack.append(_Entry(target, taken, join))

    def execute(self, ins: Instr, lanes: int) -> None:
        if self.launch.whole_grid:  # values read from flags may be involved (kept.py)
            kept.execute(self, ins, lanes, self._execute_plain)
        else:
            self._execute_plain(ins, lanes)

    def _execute_plain(self, ins: Instr, lanes: int) -> None:
        if ins.opcode == GRID_SYNC:  # a recognised this_grid().sync() (cg_grid_sync.py)
            if not self.launch.whole_grid:
                raise self.refuse(ins, "cooperative_groups::this_grid().sync() is a barrier of the whole grid: "
                                  "extract the grid as one protocol (--whole-grid, with --grid-launch cooperative)")
            self.events.append(Event("text", ("grid.sync;",), lanes, ins))
            return
        if self.gcomm is not None:
            self.gcomm.note(self, ins, lanes)
        if self.launch.whole_grid and execute_global(self, ins, lanes):
            return
        if execute_sync(self, ins, lanes):
            return
        base, mods, ops = ins.base, ins.mods, ins.operands
        if base in ("ld", "ldu"):
            self._load(ins, lanes)
            return
        if base == "st":
            if "local" in mods:
                self._store_local(ins, lanes)
            else:
                self._note_zero_write(ins, ops[0], lanes)
            return
        if base in ("atom", "red"):
            self._note_zero_write(ins, ops[1] if base == "atom" else ops[0], lanes)
            if ops and base == "atom":
                for lane in _lanes(lanes):
                    self.write(ops[0], lane, UNKNOWN)
            return
        if base == "cvta":
            self._cvta(ins, lanes)
            return
        if base in ("membar", "fence", "nanosleep", "prefetch", "pmevent", "griddepcontrol") or not ops:
            return
        bits = _bits(mods)
        if base == "mov" and bits == 32 and len(ops) == 2 and isinstance(ops[1], Name) and ops[1].name in self.params:
            k = self.param_names.index(ops[1].name)  # the parameter's .param-space address
            for lane in _lanes(lanes):
                self.write(ops[0], lane, PARAM_SPACE + (k << 16), 32)
            return
        if base == "mov" and len(ops) == 2 and (isinstance(ops[0], Vec) or isinstance(ops[1], Vec)):
            self._pack(ops[0], ops[1], bits, lanes)
            return
        lane_list = _lanes(lanes)
        cols = [self.column(o, lane_list) for o in ops[1:]]
        dst = ops[0]
        out_bits = 2 * bits if "wide" in mods else 1 if base == "setp" else bits
        if all(c.count(c[0]) == len(c) for c in cols):  # the same inputs in every lane: compute once
            results = [computed(base, mods, tuple(c[0] for c in cols))] * len(lane_list)
        else:
            results = [computed(base, mods, srcs) for srcs in zip(*cols, strict=True)]
        if base == "setp" and isinstance(dst, Pair):
            self.write_column(dst.first, lane_list, results, 1)
            self.write_column(dst.second, lane_list,
                              [UNKNOWN if v is UNKNOWN else int(not v) for v in results], 1)
        elif isinstance(dst, Name):
            self.write_column(dst.name, lane_list, results, out_bits)
        else:
            for lane, v in zip(lane_list, results, strict=True):
                self.write(dst, lane, v, out_bits)


def run_cluster(mod: Module, fn: Function, launch: Launch,
                gcomm: GlobalAccesses | None = None) -> dict[tuple[int, int], list[Event]]:
    """Events of every warp of every CTA of the chosen cluster, keyed by (CTA rank, warp); their
    global-memory accesses go to `gcomm`."""
    if fn.body is None:
        raise PtxError(mod.path, fn.line, 1, f"{fn.name} has no body")
    fn = rewrite_grid_syncs(fn)  # this_grid().sync() as the language's grid.sync (cg_grid_sync.py)
    cfg = Cfg(fn)
    mem = Memory(mod, fn, launch)
    params = _params(fn, launch)
    out: dict[tuple[int, int], list[Event]] = {}
    zero: dict[str, set[int]] = {"read": set(), "write": set()}
    while True:  # again while a warp read a tensor-memory address word before its allocation ran (tcgen05.py)
        known = dict(mem.tmem_words)
        mem.tmem_missed.clear()
        clc.forget(mem)
        zero = {"read": set(), "write": set()}
        if gcomm is not None and known:
            for part in (gcomm.accesses, gcomm.seen, gcomm.elsewhere, gcomm._index):
                part.clear()
        try:
            for rank, ctaid, w in cluster_warps(launch):
                warp = WarpRun(mod, fn, cfg, mem, launch, rank, ctaid, w, params, zero, gcomm)
                out[(rank, w)] = warp.run()
                clc.collect(mem, warp)
        except PtxError:
            if mem.tmem_words == known or not mem.tmem_missed & mem.tmem_words.keys():
                raise
            continue
        if mem.tmem_words == known or not mem.tmem_missed & mem.tmem_words.keys():
            break
    clc.check_order(mod, mem)
    if gcomm is not None:
        tensormaps.check_plain_rewrites(out, gcomm)  # a map a copy reads, rewritten by an ordinary store: refused
    clash = zero["read"] & zero["write"]
    if clash:
        raise PtxError(mod.path, fn.line, 1, f"the kernel writes memory that --zero-global declares zero and "
                       f"that decided its synchronization ({len(clash)} bytes); that memory is not constant")
    return out
