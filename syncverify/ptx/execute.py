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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .. import budget
from .cfg import EXIT, Cfg, affects_sync
from .globalcomm import GlobalAccesses
from .globalsync import global_note, refuse_global_wait
from .parse import Addr, FloatImm, Function, Imm, Instr, Module, Name, NegName, Operand, Pair, PtxError, Vec
from .values import UNKNOWN, Value, compute, float_imm_bits, mask, width

WARP = 32
# Address windows. A shared::cta address is an offset below CLUSTER; a shared::cluster
# address of CTA rank r is CLUSTER + r * RANK + offset; generic addresses add SH_GEN.
CLUSTER = 1 << 30
RANK = 1 << 24
SH_GEN = 0x7F00_0000_0000
CONST_BASE = 0x5000_0000
CONST_GEN = 0x7E00_0000_0000
LOCAL_GEN = 0x7D00_0000_0000
ZERO_BASE = 0x1000_0000_0000
PARAM_BASE = 0x2000_0000_0000  # kernel parameter k (its address taken, e.g. a by-value Params) at + (k << 32)
# the same parameter's address in the .param state space, as `mov.b32 %r, PARAM` takes it (Triton does,
# then `cvt.u64.u32` and `cvta.param.u64`): 32 bits, kernel parameter k at + (k << 16) (a kernel's
# parameters take at most 32,764 bytes, PTX ISA "Kernel Function Parameters")
PARAM_SPACE = 0x4000_0000
MAX_STEPS = 4_000_000


class Refusal(PtxError):
    """Extraction cannot decide something; carries the PTX position and the CUDA source line."""


@dataclass(frozen=True)
class ParamBytes:
    """Some bytes of a by-value parameter, each part (offset, bytes); the bytes outside every part are
    unknown. It binds the fields of a struct such as a kernel's Params that decide control flow (a tile
    scheduler's counts, the problem shape) when the rest -- TMA descriptors, which only a CUDA driver
    encodes -- is not available; a load that touches an unbound byte is unknown."""

    parts: tuple[tuple[int, bytes], ...]

    def show(self) -> str:
        return "<" + ", ".join(f"bytes {o}..{o + len(b) - 1}" for o, b in self.parts) + ">"

    def merged(self, other: ParamBytes) -> ParamBytes:
        return ParamBytes(self.parts + other.parts)

    def image(self, size: int) -> tuple[bytes, bytes]:
        """The parameter's bytes and, for each, 1 where it is bound (later parts win)."""
        data, known = bytearray(size), bytearray(size)
        for off, b in self.parts:
            b = b[: max(0, size - off)]
            data[off: off + len(b)] = b
            known[off: off + len(b)] = b"\1" * len(b)
        return bytes(data), bytes(known)


@dataclass(frozen=True)
class Launch:
    """The launch the skeleton is extracted for; `params` binds kernel parameters by name or index."""

    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    grid: tuple[int, int, int] | None = None
    params: dict[str, int | bytes | ParamBytes] = field(default_factory=dict)
    cluster_index: int = 0
    dynamic_smem: int | None = None
    zero_global: tuple[str, ...] = ()
    # bytes one tensor copy moves through the tensor map at (parameter, byte offset): its box, which
    # only the host that encoded the map knows (--tensor-bytes)
    tensor_bytes: dict[tuple[str, int], int] = field(default_factory=dict)

    def zero_base(self, k: int) -> int:
        """The address given to the k-th --zero-global pointer parameter (a window of its own)."""
        return ZERO_BASE + (k << 36)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def ctas(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]


@dataclass(frozen=True)
class Event:
    """One synchronization-relevant instruction executed by a warp.

    `kind` names the model operation, `args` its resolved operands (equal for
    every executing lane), `lanes` the bitmask of executing lanes, `ranges` the
    shared-memory byte ranges an access touches (rank, start, end) over all lanes, and
    `footprint` the same per lane (lane, rank, start, end; lane -1 for an access the warp makes
    collectively, ldmatrix/stmatrix), so that each slot can be given the lanes that really touch
    it and lanes that touch each other's bytes can be told apart (skeleton.py).
    """

    kind: str
    args: tuple[object, ...]
    lanes: int
    instr: Instr
    ranges: tuple[tuple[int, int, int], ...] = ()
    # a wait read from a spin: the other try_wait its false outcome tests the same phase with, where that is
    # not itself (CUTLASS's consumer_try_wait, then consumer_wait): a thread blocked there is at this wait
    retry: Instr | None = None
    footprint: tuple[tuple[int, int, int, int], ...] = ()


@dataclass
class _Entry:
    pc: int
    mask: int
    rpc: int


class Memory:
    """Module-level memory: constant-space symbols with their bytes, shared-memory layout."""

    def __init__(self, mod: Module, fn: Function, launch: Launch):
        self.const: dict[str, tuple[int, bytes | None, int]] = {}
        self.shared: dict[str, int] = {}
        addr = CONST_BASE
        for v in mod.variables:
            if v.space == "const":
                addr = (addr + max(v.align, 1) - 1) // max(v.align, 1) * max(v.align, 1)
                # a shorter initializer leaves the rest zero (PTX); no initializer: whatever the host wrote
                data = None if v.init is None else v.init.ljust(v.size or 0, b"\0")
                self.const[v.name] = (addr, data, v.size or 0)
                addr += v.size or 0
        off = 0
        dynamic: list[str] = []
        for v in (*mod.variables, *fn.local_vars):
            if v.space != "shared":
                continue
            if v.size is None:
                dynamic.append(v.name)
                continue
            al = max(v.align, 1)
            off = (off + al - 1) // al * al
            self.shared[v.name] = off
            off += v.size
        self.static_smem = off
        dyn = (off + 1023) // 1024 * 1024 if dynamic else off
        for name in dynamic:
            self.shared[name] = dyn
        self.dynamic_base = dyn
        self.local: dict[str, int] = {}
        loff = 0
        for v in fn.local_vars:
            if v.space == "local":
                self.local[v.name] = loff
                loff += v.size or 0

    def symbol(self, name: str) -> int | None:
        if name in self.const:
            return self.const[name][0]
        if name in self.shared:
            return self.shared[name]
        if name in self.local:
            return self.local[name]
        return None

    def load_const(self, addr: int, size: int) -> Value:
        for _name, (base, data, n) in self.const.items():
            if base <= addr < base + n:
                if data is None or addr + size > base + len(data):
                    return UNKNOWN
                return int.from_bytes(data[addr - base: addr - base + size], "little")
        return UNKNOWN


def _params(fn: Function, launch: Launch) -> dict[str, tuple[bytes | None, bytes | None]]:
    """Each parameter's offset-less byte image, bound by name or by position (else None: unknown), and
    which of its bytes are bound (None: all). A file shorter than the parameter binds only its bytes."""
    out: dict[str, tuple[bytes | None, bytes | None]] = {}
    zero = {name: j for j, name in enumerate(launch.zero_global)}
    for k, p in enumerate(fn.params):
        v = launch.params.get(p.name, launch.params.get(str(k)))
        j = zero.get(p.name, zero.get(str(k)))
        if j is not None:
            v = launch.zero_base(j)
        if v is None:
            out[p.name] = (None, None)
        elif isinstance(v, bytes):
            out[p.name] = ParamBytes(((0, v),)).image(p.size) if len(v) < p.size else (v[: p.size], None)
        elif isinstance(v, ParamBytes):
            out[p.name] = v.image(p.size)
        else:
            out[p.name] = (mask(v, 8 * p.size).to_bytes(p.size, "little"), None)
    return out


class WarpRun:
    """Executes one warp; `events` is its synchronization skeleton in program order."""

    def __init__(self, mod: Module, fn: Function, cfg: Cfg, mem: Memory, launch: Launch, cta_rank: int,
                 ctaid: tuple[int, int, int], warp: int, params: dict[str, tuple[bytes | None, bytes | None]],
                 zero: dict[str, set[int]] | None = None, gcomm: GlobalAccesses | None = None):
        self.mod, self.fn, self.cfg, self.mem, self.launch = mod, fn, cfg, mem, launch
        self.rank, self.ctaid, self.warp, self.params = cta_rank, ctaid, warp, params
        self.param_names = list(params)
        first = warp * WARP
        self.nlanes = max(0, min(WARP, launch.threads - first))
        self.regs: dict[str, list[Value]] = {}
        self.local: list[dict[int, int]] = [{} for _ in range(WARP)]
        self.local_unknown = [False] * WARP
        self.events: list[Event] = []
        self.exited = 0
        self.special = [self._special_regs(first + lane) for lane in range(WARP)]
        self._region_ok: dict[int, list[Instr]] = {}
        self.pc = 0  # the instruction being executed
        # addresses of --zero-global memory this cluster read and wrote (shared by its warps)
        self.zero = zero if zero is not None else {"read": set(), "write": set()}
        self.gcomm = gcomm  # where the global-memory accesses go (globalcomm.py); None: not recorded
        if gcomm is not None:
            gcomm.start(self)

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
            self.regs.setdefault(op.name, [UNKNOWN] * WARP)[lane] = v if v is UNKNOWN else mask(v, bits)
        elif isinstance(op, Pair):
            self.write(Name(op.first), lane, v, bits)
        elif isinstance(op, Vec):
            for item in op.items:
                self.write(item, lane, UNKNOWN)

    def havoc(self, ins: Instr, lanes: int) -> None:
        """Every register the instruction could write becomes unknown for those lanes."""
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
            for lane in _lanes(lanes):
                reg[lane] = UNKNOWN

    # ---- errors ----------------------------------------------------------------------------------

    def refuse(self, ins: Instr, why: str) -> Refusal:
        note = f"CUDA source: {_src(ins)}" if ins.src else "no CUDA source line (compile with -lineinfo)"
        who = f"warp {self.warp} of CTA {self.rank}"
        return Refusal(self.mod.path, ins.line, ins.column, f"cannot extract ({who}): {why}",
                       self.mod.source_line(ins.line), note)

    # ---- execution -------------------------------------------------------------------------------

    def run(self, stack: list[_Entry] | None = None) -> list[Event]:
        """Run to the warp's exit, from the start or from a SIMT stack saved earlier (symloop.py)."""
        body = self.cfg.body
        full = (1 << self.nlanes) - 1
        if full == 0:
            return []
        if stack is None:
            stack = [_Entry(0, full, EXIT)]
        self.stack = stack
        steps = 0
        while stack:
            top = stack[-1]
            top.mask &= ~self.exited
            if top.pc == top.rpc or top.mask == 0 or top.pc == EXIT:
                stack.pop()
                continue
            steps += 1
            if not steps & 0xFFFF:
                budget.check_clock(f"running warp {self.warp} of CTA {self.rank} (PTX line {body[top.pc].line})")
            if steps > MAX_STEPS:
                raise self.refuse(body[top.pc], f"execution did not finish after {MAX_STEPS:,} steps (a loop "
                                  "whose trip count depends on a value that was not given?)")
            ins = body[top.pc]
            self.pc = top.pc
            active = top.mask
            guard = self._guard(ins, active)
            if ins.base == "bra":
                self._branch(stack, top, ins, active, guard)
                continue
            if ins.base in ("ret", "exit"):
                if guard[1]:
                    raise self.refuse(ins, "whether the thread exits depends on a value that is not known")
                self.exited |= guard[0]
                top.pc += 1
                continue
            run_mask, unknown = guard
            if unknown:
                if affects_sync(ins):
                    raise self.refuse(ins, "the guard predicate of a synchronization instruction is not known"
                                      + global_note(self, ins.guard))
                if self.gcomm is not None:
                    self.gcomm.note(self, ins, unknown)
                self.havoc(ins, unknown)
            if run_mask:
                self.execute(ins, run_mask)
            top.pc += 1
        return self.events

    def _guard(self, ins: Instr, active: int) -> tuple[int, int]:
        """(lanes that execute, lanes whose guard is unknown)."""
        if ins.guard is None:
            return active, 0
        run, unknown = 0, 0
        for lane in _lanes(active):
            v = self.read(Name(ins.guard), lane)
            if v is UNKNOWN:
                unknown |= 1 << lane
            elif bool(v) != ins.guard_neg:
                run |= 1 << lane
        return run, unknown

    def _branch(self, stack: list[_Entry], top: _Entry, ins: Instr, active: int, guard: tuple[int, int]) -> None:
        i = top.pc
        taken, unknown = guard
        if unknown:
            join = self.cfg.ipdom.get(i, EXIT)
            if join == EXIT:
                raise self.refuse(ins, "a branch is decided by a value that is not known (data, time or an "
                                  "unbound parameter) and its paths do not join before the exit")
            region = self._region_ok.get(i)
            if region is None:
                bad = [self.cfg.body[n] for n in sorted(self.cfg.region(i, join)) if affects_sync(self.cfg.body[n])]
                if bad:
                    b = bad[0]
                    raise self.refuse(ins, f"a branch is decided by a value that is not known (data, time or an "
                                      f"unbound parameter; bind it with --param) and a path it decides contains "
                                      f"`{b.opcode}` at PTX line {b.line}{global_note(self, ins.guard)}")
                refuse_global_wait(self, i, join)  # a flag or a spin in global memory is a wait, not data
                region = [self.cfg.body[n] for n in self.cfg.region(i, join)]
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
        from .sync import execute_sync  # the synchronization instructions live in their own module

        if self.gcomm is not None:
            self.gcomm.note(self, ins, lanes)
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
            v = compute(base, mods, [c[0] for c in cols])
            results = [UNKNOWN if v is None else v] * len(lane_list)
        else:
            results = []
            for j in range(len(lane_list)):
                v = compute(base, mods, [c[j] for c in cols])
                results.append(UNKNOWN if v is None else v)
        if base == "setp" and isinstance(dst, Pair):
            self.write_column(dst.first, lane_list, results, 1)
            self.write_column(dst.second, lane_list,
                              [UNKNOWN if v is UNKNOWN else int(not v) for v in results], 1)
        elif isinstance(dst, Name):
            self.write_column(dst.name, lane_list, results, out_bits)
        else:
            for lane, v in zip(lane_list, results, strict=True):
                self.write(dst, lane, v, out_bits)

    def _pack(self, dst: Operand, src: Operand, bits: int, lanes: int) -> None:
        """`mov.b64 %rd, {%r1, %r2}` packs elements, first in the low bits; `mov.b64 {%r1, %r2}, %rd` unpacks
        (a wgmma descriptor is built this way from its two 32-bit halves)."""
        for lane in _lanes(lanes):
            if isinstance(src, Vec):
                part = bits // len(src.items)
                v: Value = 0
                for k, item in enumerate(src.items):
                    x = self.read(item, lane)
                    if x is UNKNOWN or v is UNKNOWN:
                        v = UNKNOWN
                        continue
                    v |= mask(x, part) << (k * part)  # type: ignore[operator]
                self.write(dst, lane, v, bits)
            elif isinstance(dst, Vec):
                part = bits // len(dst.items)
                x = self.read(src, lane)
                for k, item in enumerate(dst.items):
                    self.write(item, lane, UNKNOWN if x is UNKNOWN else mask(x >> (k * part), part), part)  # type: ignore[operator]

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


# bytes of one element of each ld/st type (PTX ISA "ld", "st": the type is the opcode's last modifier)
ACCESS_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "b32": 4, "u32": 4,
                "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16}
_ACCESS = ACCESS_BYTES


def _access_bytes(mods: tuple[str, ...]) -> int:
    """Bytes per element of a load or store (the vector count is applied by the caller)."""
    return next((_ACCESS[m] for m in reversed(mods) if m in _ACCESS), 4)


def vector_count(mods: tuple[str, ...]) -> int:
    return next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)


@lru_cache(maxsize=4096)
def _bits(mods: tuple[str, ...]) -> int:
    return width(next((m for m in reversed(mods) if (m[:1] in "busf" and m[1:].isdigit()) or m == "pred"), "b64"))


@lru_cache(maxsize=1 << 16)
def _lanes(m: int) -> list[int]:
    out = []
    lane = 0
    while m:
        if m & 1:
            out.append(lane)
        m >>= 1
        lane += 1
    return out


lanes_of = _lanes  # the executing lanes of a mask, for the synchronization instructions


def _src(ins: Instr) -> str:
    s = ins.src
    if s is None:
        return "?"
    out = f"{s.file}:{s.line}"
    for f, ln, _c in s.inlined_at:
        out += f" (inlined at {f}:{ln})"
    return out


source_of = _src  # "FILE:LINE (inlined at FILE:LINE)" of an instruction


def run_cluster(mod: Module, fn: Function, launch: Launch,
                gcomm: GlobalAccesses | None = None) -> dict[tuple[int, int], list[Event]]:
    """Events of every warp of every CTA of the chosen cluster, keyed by (CTA rank, warp); their
    global-memory accesses go to `gcomm`."""
    if fn.body is None:
        raise PtxError(mod.path, fn.line, 1, f"{fn.name} has no body")
    cfg = Cfg(fn)
    mem = Memory(mod, fn, launch)
    params = _params(fn, launch)
    out: dict[tuple[int, int], list[Event]] = {}
    zero: dict[str, set[int]] = {"read": set(), "write": set()}
    for rank, ctaid, w in cluster_warps(launch):
        out[(rank, w)] = WarpRun(mod, fn, cfg, mem, launch, rank, ctaid, w, params, zero, gcomm).run()
    clash = zero["read"] & zero["write"]
    if clash:
        raise PtxError(mod.path, fn.line, 1, f"the kernel writes memory that --zero-global declares zero and "
                       f"that decided its synchronization ({len(clash)} bytes); that memory is not constant")
    return out


def cluster_warps(launch: Launch) -> list[tuple[int, tuple[int, int, int], int]]:
    """(CTA rank, CTA id, warp) of every warp of the chosen cluster, in execution order."""
    cx, cy, cz = launch.cluster
    grid = launch.grid or launch.cluster
    per_row = max(grid[0] // cx, 1)
    per_plane = per_row * max(grid[1] // cy, 1)
    ci = launch.cluster_index
    base = ((ci % per_row) * cx, ((ci // per_row) % max(grid[1] // cy, 1)) * cy, (ci // per_plane) * cz)
    nwarps = (launch.threads + WARP - 1) // WARP
    out = []
    for rank in range(launch.ctas):
        local = (rank % cx, (rank // cx) % cy, rank // (cx * cy))
        ctaid = (base[0] + local[0], base[1] + local[1], base[2] + local[2])
        out += [(rank, ctaid, w) for w in range(nwarps)]
    return out
