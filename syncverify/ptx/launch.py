"""What extraction is given and what it produces, shared by every stage of it.

The launch (`Launch`, `ParamBytes`), the events a warp's execution yields (`Event`), the refusal
(`Refusal`), the address windows the executor gives shared, constant, local and parameter memory, the
module's memory layout (`Memory`), the warps of the chosen cluster, and the small readers of an
instruction's modifiers and of a lane mask. The warp's state (warp.py), the handlers of its instructions
(sync.py, access.py, spin.py, globalsync.py, globalcomm.py, undefined.py), the executor that dispatches to
them (execute.py), the skeleton builder and the writer all read these; this module reads none of them, so
it sits below every one and no import of it comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .parse import Function, Instr, Module, PtxError
from .values import UNKNOWN, Value, mask, width

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
    # the members of the dynamic shared memory, as the host code that lays it out reports them (offset from
    # its start, bytes, the member's path in the source): only names for the protocol (names.py)
    smem_members: tuple[tuple[int, int, str], ...] = ()
    # every CTA of the grid is one protocol (gridextract.py): flags, spins and data in global memory are
    # extracted (gridsync.py), not refused; `grid_launch` is what the launch promises (language §3.7)
    whole_grid: bool = False
    grid_launch: str | None = None
    # cluster launch control (clc.py): how many try_cancel responses each CTA reads, the last one failed
    clc_responses: int | None = None

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
    # the lanes of one instruction gave different operands (ptx/lane_operands.py): this event is the lanes
    # `lanes` with these operands, written under a guard that names them, never as an elected lane's
    per_lane: bool = False
    # a TMA copy whose tensor map is in global memory: the map's address (ptx/tensormaps.py)
    tmap: int | None = None



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
        # tcgen05.alloc: the shared-memory word (CTA rank, offset) each allocation wrote the tensor-memory
        # address to, and the words loads found empty before an allocation was seen (ptx/tcgen05.py)
        self.tmem_words: dict[tuple[int, int], int] = {}
        self.tmem_missed: set[tuple[int, int]] = set()
        self.tmem_cols: dict[int, int] = {}  # CTA rank -> the columns its allocation took (ptx/tcgen05.py)
        # __shared__ words that hold a value read from a flag (ptx/kept.py): offset -> (bytes, 0/1 only)
        self.kept_words: dict[int, tuple[int, bool]] = {}
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
