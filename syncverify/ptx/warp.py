"""One warp's state while it runs, and the reads and writes of values every instruction handler shares.

`WarpState` holds a warp's registers per lane, its special registers, its local memory, its exited lanes
and its events; it reads operands, resolves addresses, writes results, decides a guard and builds a
refusal. The ordinary instructions that only move values -- loads of parameters, constants and local
memory, stores to local memory, `cvta`, `mov` packing -- are executed here too. The handlers of the
synchronization instructions (sync.py, access.py, spin.py, globalsync.py, globalcomm.py, undefined.py) take
a `WarpState`; the executor that runs the warp and sends each instruction to its handler (execute.py,
`WarpRun`) is built on it. This module imports no handler and the handlers never import the executor, so
the layers -- launch.py, this state, the handlers, the dispatch -- have no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cfg import Cfg
from .clc import NONE as NO_CLC
from .clc import WarpClc
from .kept_values import KeptTable, without
from .launch import (
    CONST_BASE,
    CONST_GEN,
    LOCAL_GEN,
    PARAM_BASE,
    PARAM_SPACE,
    SH_GEN,
    WARP,
    Event,
    Launch,
    Memory,
    Refusal,
    _access_bytes,
    _lanes,
    _src,
    vector_count,
)
from .parse import Addr, FloatImm, Function, Imm, Instr, Module, Name, NegName, Operand, Pair, Vec
from .values import UNKNOWN, Value, float_imm_bits, mask
from .wgmma_regs import note_writes

if TYPE_CHECKING:
    from .probe import Pending, ProbeCtx
    from .probe_lanes import LaneWatch


@dataclass
class _Entry:
    pc: int
    mask: int
    rpc: int


class WarpState:
    """One warp's registers, local memory, exited lanes and events; what the instruction handlers read
    and write. `WarpRun` (execute.py) runs it."""

    forks_probes = True  # a probe's two outcomes are run from copies of this state (probe.py)

    def __init__(self, mod: Module, fn: Function, cfg: Cfg, mem: Memory, launch: Launch, cta_rank: int,
                 ctaid: tuple[int, int, int], warp: int, params: dict[str, tuple[bytes | None, bytes | None]],
                 zero: dict[str, set[int]] | None = None):
        self.mod, self.fn, self.cfg, self.mem, self.launch = mod, fn, cfg, mem, launch
        self.rank, self.ctaid, self.warp, self.params = cta_rank, ctaid, warp, params
        self.param_names = list(params)
        first = warp * WARP
        self.nlanes = max(0, min(WARP, launch.threads - first))
        self.regs: dict[str, list[Value]] = {}
        # registers holding a value read from a flag, as a language expression, per lane (kept_values.py)
        self.kept: KeptTable = {}
        self.local: list[dict[int, int]] = [{} for _ in range(WARP)]
        self.local_unknown = [False] * WARP
        self.events: list[Event] = []
        self.exited = 0
        self.special = [self._special_regs(first + lane) for lane in range(WARP)]
        self._region_ok: dict[int, list[Instr]] = {}
        self.pc = 0  # the instruction being executed
        # RS-form wgmma: A-operand registers -> their `regs` region, and each register's regions (wgmma_regs.py)
        self.rs_regions: dict[tuple[str, ...], str] = {}
        self.rs_owner: dict[str, list[str]] = {}
        self.steps = 0  # instructions run so far (WarpRun.run bounds them)
        # a try_wait/test_wait whose result is used and that can give up: sync.py records it here and the
        # executor forks its two outcomes after the instruction (probe.py)
        self.probe: Pending | None = None
        # while this state runs a probe's false outcome: the probe (probe.py, a watchdog's retry is cut)
        self.probe_ctx: ProbeCtx | None = None
        self.lockstep = False  # running beside a copy of itself, the other outcome of a probe (probe.py)
        self.probe_chain: tuple[object, ...] = ()  # the probes this state runs an outcome of (probe.py)
        self.lane_watch: LaneWatch | None = None  # values that may differ between a probe's lanes (probe_lanes.py)
        self.clc: WarpClc = NO_CLC  # cluster launch control: requests issued, responses decoded (clc.py)
        # addresses of --zero-global memory this cluster read and wrote (shared by its warps)
        self.zero = zero if zero is not None else {"read": set(), "write": set()}

    # ---- values ----------------------------------------------------------------------------------

    def _special_regs(self, t: int) -> dict[str, Value]:
        bx, by, _bz = self.launch.block
        cx, cy, cz = self.launch.cluster
        tid = (t % bx, (t // bx) % by, t // (bx * by))
        grid = self.launch.grid
        rank = self.rank
        cl = (rank % cx, (rank // cx) % cy, rank // (cx * cy))
        lane = t % WARP
        s: dict[str, Value] = {
            "%tid.x": tid[0], "%tid.y": tid[1], "%tid.z": tid[2],
            "%ntid.x": bx, "%ntid.y": by, "%ntid.z": self.launch.block[2],
            "%ctaid.x": self.ctaid[0], "%ctaid.y": self.ctaid[1], "%ctaid.z": self.ctaid[2],
            "%laneid": lane, "%cluster_ctarank": rank, "%cluster_nctarank": cx * cy * cz,
            "%cluster_ctaid.x": cl[0], "%cluster_ctaid.y": cl[1], "%cluster_ctaid.z": cl[2],
            "%cluster_nctaid.x": cx, "%cluster_nctaid.y": cy, "%cluster_nctaid.z": cz,
            "%is_explicit_cluster": int(cx * cy * cz > 1),
            "%lanemask_eq": 1 << lane, "%lanemask_lt": (1 << lane) - 1, "%lanemask_le": (2 << lane) - 1,
            "%lanemask_gt": mask(~((2 << lane) - 1), 32), "%lanemask_ge": mask(~((1 << lane) - 1), 32),
        }
        if grid is not None:
            s.update({"%nctaid.x": grid[0], "%nctaid.y": grid[1], "%nctaid.z": grid[2]})
            n = (grid[0] // cx, grid[1] // cy, grid[2] // cz)
            cid = (self.ctaid[0] // cx, self.ctaid[1] // cy, self.ctaid[2] // cz)
            s.update({"%clusterid.x": cid[0], "%clusterid.y": cid[1], "%clusterid.z": cid[2],
                      "%nclusterid.x": n[0], "%nclusterid.y": n[1], "%nclusterid.z": n[2]})
        if self.launch.dynamic_smem is not None:
            s["%dynamic_smem_size"] = self.launch.dynamic_smem
        return s

    def read(self, op: Operand, lane: int) -> Value:
        if isinstance(op, Imm):
            return op.value
        if isinstance(op, Name):
            r = self.regs.get(op.name)
            if r is not None:
                return r[lane]
            if op.name in self.fn.registers:
                return UNKNOWN  # never written: PTX leaves it undefined
            if op.name.startswith("%"):
                return self.special[lane].get(op.name, UNKNOWN)
            if op.name in self.params:  # `mov.b64 %rd, PARAM`: the parameter's address
                return PARAM_BASE + (self.param_names.index(op.name) << 32)
            sym = self.mem.symbol(op.name)
            return UNKNOWN if sym is None else sym
        if isinstance(op, NegName):
            v = self.read(Name(op.name), lane)
            return UNKNOWN if v is UNKNOWN else int(not v)
        if isinstance(op, FloatImm):
            return float_imm_bits(op.text)
        return UNKNOWN

    def write(self, op: Operand, lane: int, v: Value, bits: int = 64) -> None:
        if isinstance(op, Name):
            if op.name == "_":
                return
            if self.kept:
                self.kept = without(self.kept, op.name, (lane,))
            self.regs.setdefault(op.name, [UNKNOWN] * WARP)[lane] = v if v is UNKNOWN else mask(v, bits)
        elif isinstance(op, Pair):
            self.write(Name(op.first), lane, v, bits)
        elif isinstance(op, Vec):
            for item in op.items:
                self.write(item, lane, UNKNOWN)

    def havoc(self, ins: Instr, lanes: int) -> None:
        """Every register the instruction could write becomes unknown for those lanes."""
        note_writes(self, ins, lanes)  # a may-write of an RS wgmma's A register is a write (wgmma_regs.py)
        if not ins.operands or ins.base in ("st", "bra", "red", "bar", "barrier", "mbarrier", "fence", "membar"):
            if ins.base == "st" and "local" in ins.mods:
                for lane in _lanes(lanes):
                    self.local_unknown[lane] = True
            return
        dst = ins.operands[0]
        names: list[str] = []
        if isinstance(dst, Name):
            names = [dst.name]
        elif isinstance(dst, Pair):
            names = [dst.first, dst.second]
        elif isinstance(dst, Vec):
            names = [x.name for x in dst.items if isinstance(x, Name)]
        for n in names:
            if n == "_":
                continue
            reg = self.regs.setdefault(n, [UNKNOWN] * WARP)
            if self.kept:
                self.kept = without(self.kept, n, _lanes(lanes))
            for lane in _lanes(lanes):
                reg[lane] = UNKNOWN

    # ---- errors ----------------------------------------------------------------------------------

    def refuse(self, ins: Instr, why: str) -> Refusal:
        note = f"CUDA source: {_src(ins)}" if ins.src else "no CUDA source line (compile with -lineinfo)"
        who = f"warp {self.warp} of CTA {self.launch.cluster_index if self.launch.whole_grid else self.rank}"
        return Refusal(self.mod.path, ins.line, ins.column, f"cannot extract ({who}): {why}",
                       self.mod.source_line(ins.line), note)

    # ---- execution -------------------------------------------------------------------------------

    def _guard(self, ins: Instr, active: int) -> tuple[int, int]:
        """(lanes that execute, lanes whose guard is unknown)."""
        if ins.guard is None:
            return active, 0
        run, unknown = 0, 0
        reg = self.regs.get(ins.guard)  # (read() of each lane, without its dispatch for a written register)
        guard = Name(ins.guard)
        for lane in _lanes(active):
            v = reg[lane] if reg is not None else self.read(guard, lane)
            if v is UNKNOWN:
                unknown |= 1 << lane
            elif bool(v) != ins.guard_neg:
                run |= 1 << lane
        return run, unknown

    def execute(self, ins: Instr, lanes: int) -> None:
        """Execute `ins` for `lanes`. The dispatch to the instruction handlers is `WarpRun.execute`
        (execute.py); a handler that runs instructions itself (a spin's false outcomes, spin.py) calls it
        through this method, never by importing the module that imports it."""
        raise NotImplementedError

    def run(self, stack: list[_Entry] | None = None) -> list[Event]:
        """Run from the SIMT stack `stack` until it is empty (WarpRun.run, execute.py)."""
        raise NotImplementedError

    def step(self, stack: list[_Entry]) -> None:
        """One step of the SIMT stack `stack` (WarpRun.step, execute.py)."""
        raise NotImplementedError

    # ---- ordinary instructions: moves, addresses, parameter, constant and local memory -----------

    def _pack(self, dst: Operand, src: Operand, bits: int, lanes: int) -> None:
        """`mov.b64 %rd, {%r1, %r2}` packs elements, first in the low bits; `mov.b64 {%r1, %r2}, %rd` unpacks
        (a wgmma descriptor is built this way from its two 32-bit halves)."""
        # column by column (a lane's inputs are all read before its outputs are written, as lane by lane)
        lane_list = _lanes(lanes)
        if isinstance(src, Vec):
            part = bits // len(src.items)
            packed: list[Value] = [0] * len(lane_list)
            for k, item in enumerate(src.items):
                for j, x in enumerate(self.column(item, lane_list)):
                    v = packed[j]
                    packed[j] = UNKNOWN if x is UNKNOWN or v is UNKNOWN else v | mask(x, part) << (k * part)  # type: ignore[operator]
            self._write_lanes(dst, lane_list, packed, bits)
        elif isinstance(dst, Vec):
            part = bits // len(dst.items)
            whole = self.column(src, lane_list)
            for k, item in enumerate(dst.items):
                self._write_lanes(item, lane_list, [UNKNOWN if x is UNKNOWN else mask(x >> (k * part), part)  # type: ignore[operator]
                                                    for x in whole], part)

    def _write_lanes(self, dst: Operand, lane_list: list[int], values: list[Value], bits: int) -> None:
        """`write` of each lane's value: a register's as one column."""
        if isinstance(dst, Name):
            self.write_column(dst.name, lane_list, values, bits)
            return
        for lane, v in zip(lane_list, values, strict=True):
            self.write(dst, lane, v, bits)

    def column(self, op: Operand, lane_list: list[int]) -> list[Value]:
        """The operand's value in each of the lanes."""
        if isinstance(op, Imm):
            return [op.value] * len(lane_list)
        if isinstance(op, Name):
            r = self.regs.get(op.name)
            if r is not None:
                return [r[lane] for lane in lane_list]
        return [self.read(op, lane) for lane in lane_list]

    def write_column(self, name: str, lane_list: list[int], values: list[Value], bits: int) -> None:
        if name == "_":
            return
        reg = self.regs.get(name)
        if reg is None:
            reg = self.regs[name] = [UNKNOWN] * WARP
        if self.kept:
            self.kept = without(self.kept, name, lane_list)
        m = (1 << bits) - 1
        for lane, v in zip(lane_list, values, strict=True):
            reg[lane] = v if v is UNKNOWN else v & m  # type: ignore[operator]

    def _cvta(self, ins: Instr, lanes: int) -> None:
        mods = ins.mods
        to = "to" in mods
        space = next((m for m in mods if m in ("shared", "const", "local", "global", "param")), "global")
        off = {"shared": SH_GEN, "const": CONST_GEN - CONST_BASE, "local": LOCAL_GEN}.get(space, 0)
        for lane in _lanes(lanes):
            v = self.read(ins.operands[1], lane)
            if v is UNKNOWN:
                self.write(ins.operands[0], lane, UNKNOWN)
            elif space == "param":
                self.write(ins.operands[0], lane, UNKNOWN if to else self._param_generic(v))
            else:
                self.write(ins.operands[0], lane, v - off if to else v + off)

    def _param_generic(self, v: int) -> Value:
        """The generic address of a kernel parameter's byte from its .param-space address (`cvta.param`);
        an address already generic (`mov.b64 %rd, PARAM`) stays; anything else is unknown."""
        if PARAM_BASE <= v < PARAM_BASE + (len(self.param_names) << 32):
            return v
        k, off = divmod(v - PARAM_SPACE, 1 << 16)
        return PARAM_BASE + (k << 32) + off if 0 <= k < len(self.param_names) else UNKNOWN

    def address(self, op: Operand, lane: int) -> Value:
        if not isinstance(op, Addr):
            return self.read(op, lane)
        if op.base is None:
            return op.offset
        if op.base in self.params:
            return op.offset  # offset within the parameter; see _load
        base = self.read(Name(op.base), lane)
        return UNKNOWN if base is UNKNOWN else base + op.offset

    def _load(self, ins: Instr, lanes: int) -> None:
        mods, ops = ins.mods, ins.operands
        size = _access_bytes(mods)
        dst = ops[0]
        src = ops[1]
        if ("param" in mods or "global" not in mods) and isinstance(src, Addr) and src.base in self.params:
            # `[PARAM+off]`: the same bytes in every lane, read once (a CUTLASS kernel's prologue has hundreds)
            # (written lane by lane with `write`, which the K-symbolic executor overrides, symloop.py)
            a = self._param_address(src, 0)
            lane_list = _lanes(lanes)
            for k, item in enumerate(dst.items if isinstance(dst, Vec) else (dst,)):
                v = self._load_param(a + k * size, size)  # type: ignore[operator]
                for lane in lane_list:
                    self.write(item, lane, v, 8 * size)
            return
        for lane in _lanes(lanes):
            v: Value = UNKNOWN
            a = self._param_address(src, lane) if "param" in mods or "global" not in mods else UNKNOWN
            if a is not UNKNOWN:
                if isinstance(dst, Vec):  # ld.param.v2/v4: consecutive elements
                    for k, item in enumerate(dst.items):
                        self.write(item, lane, self._load_param(a + k * size, size), 8 * size)
                    continue
                v = self._load_param(a, size)
            elif "param" in mods:
                v = UNKNOWN
            elif "const" in mods:
                a = self.address(src, lane)
                v = UNKNOWN if a is UNKNOWN else self.mem.load_const(a, size)
            elif "local" in mods:
                a = self.address(src, lane)
                v = self._load_local(lane, a, size)
            elif "global" in mods or "shared" not in mods:
                a = self.address(src, lane)
                if self._in_zero(a):
                    self.zero["read"].update(range(a, a + size))  # type: ignore[arg-type,operator]
                    v = 0
                if isinstance(a, int) and CONST_GEN <= a < SH_GEN:
                    v = self.mem.load_const(a - CONST_GEN + CONST_BASE, size)
                elif isinstance(a, int) and LOCAL_GEN <= a < CONST_GEN:
                    v = self._load_local(lane, a - LOCAL_GEN, size)
            if isinstance(dst, Vec):
                for item in dst.items:
                    self.write(item, lane, UNKNOWN)
            else:
                self.write(dst, lane, v, 8 * size)

    def _param_address(self, src: Operand, lane: int) -> Value:
        """The parameter-window address a load reads: `[PARAM+off]`, or a register holding one."""
        if not isinstance(src, Addr):
            return UNKNOWN
        if src.base in self.params:
            return PARAM_BASE + (self.param_names.index(src.base) << 32) + src.offset
        a = self.address(src, lane)
        return a if isinstance(a, int) and PARAM_BASE <= a < PARAM_BASE + (len(self.param_names) << 32) else UNKNOWN

    def _load_param(self, a: int, size: int) -> Value:
        """Bytes of a bound parameter; unknown where any of them is not bound."""
        k, off = divmod(a - PARAM_BASE, 1 << 32)
        data, known = self.params[self.param_names[k]]
        if data is None or off + size > len(data) or (known is not None and not all(known[off: off + size])):
            return UNKNOWN
        return int.from_bytes(data[off: off + size], "little")

    def tensor_map(self, a: Value) -> tuple[str, int, int] | None:
        """(parameter name, position, byte offset) of a tensor map address inside a by-value parameter."""
        if not isinstance(a, int) or not PARAM_BASE <= a < PARAM_BASE + (len(self.param_names) << 32):
            return None
        k, off = divmod(a - PARAM_BASE, 1 << 32)
        return self.param_names[k], k, off

    def _in_zero(self, a: Value) -> bool:
        return isinstance(a, int) and any(self.launch.zero_base(j) <= a < self.launch.zero_base(j) + (1 << 36)
                                          for j in range(len(self.launch.zero_global)))

    def _note_zero_write(self, ins: Instr, op: Operand, lanes: int) -> None:
        if not self.launch.zero_global:
            return
        size = _access_bytes(ins.mods) * vector_count(ins.mods)
        for lane in _lanes(lanes):
            a = self.address(op, lane)
            # a store through another pointer does not reach the buffer: the --zero-global assumption
            if self._in_zero(a):
                self.zero["write"].update(range(a, a + size))  # type: ignore[arg-type]

    def _load_local(self, lane: int, a: Value, size: int) -> Value:
        if a is UNKNOWN or self.local_unknown[lane]:
            return UNKNOWN
        out = 0
        for k in range(size):
            byte = self.local[lane].get(a + k)
            if byte is None:
                return UNKNOWN
            out |= byte << (8 * k)
        return out

    def _store_local(self, ins: Instr, lanes: int) -> None:
        size = _access_bytes(ins.mods)
        src = ins.operands[1]
        for lane in _lanes(lanes):
            a = self.address(ins.operands[0], lane)
            if a is UNKNOWN:
                self.local_unknown[lane] = True
                continue
            items = src.items if isinstance(src, Vec) else (src,)
            for j, item in enumerate(items):
                v = self.read(item, lane)
                for k in range(size):
                    if v is UNKNOWN:
                        self.local[lane].pop(a + j * size + k, None)
                    else:
                        self.local[lane][a + j * size + k] = (v >> (8 * k)) & 0xFF
