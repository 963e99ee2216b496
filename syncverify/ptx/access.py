"""Shared-memory loads and stores turned into access events, with each lane's byte footprint.

The footprint of a load or store is the bytes its opcode names, never a default: the element
type is the opcode's last modifier (PTX ISA "ld", "st": `ld{...}{.vec}.type`), times the vector
count (`.v2`/`.v4`/`.v8`); `st.bulk` (PTX ISA 8.6, sm_100) takes its byte count from its size
operand. An opcode whose type is not one of the ld/st types is refused, not read as 4 bytes.

Each event keeps, besides the union of the ranges, every lane's own ranges (`Event.footprint`):
skeleton.py gives each slot the lanes that really touch it, and refuses lanes of one warp that
touch each other's bytes with nothing between them that orders lanes (lanes.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .launch import ACCESS_BYTES, CLUSTER, RANK, SH_GEN, Event, lanes_of, vector_count
from .parse import Imm, Instr, Name, Operand, Vec
from .values import UNKNOWN, Value


def tmem_word(run: WarpState, rank: int, off: int) -> int | None:
    """The value a 4-byte load of shared-memory word (rank, off) gives: the tensor-memory address when a
    tcgen05.alloc wrote it there (ptx/tcgen05.py), else None (data: unknown). A miss is remembered, so
    that extraction runs again when an allocation later names the word (execute.run_cluster)."""
    mem = run.mem
    if (rank, off) in mem.tmem_words:
        return mem.tmem_words[(rank, off)]
    mem.tmem_missed.add((rank, off))
    return None


if TYPE_CHECKING:
    from .warp import WarpState

# PTX ISA "st.bulk": "size must be a multiple of 8 ... The maximum value of size operand can be 16777216"
ST_BULK_MAX = 16777216


def shared_target(a: Value, space: str, own: int) -> tuple[int, int] | None:
    """(CTA rank, offset) of a shared-memory address, or None when it is not in shared memory."""
    if not isinstance(a, int):
        return None
    if space == "generic":
        if a < SH_GEN or a >= SH_GEN + 2 * CLUSTER:
            return None
        a -= SH_GEN
    if a >= CLUSTER:
        if space in ("cta",):
            return None
        return ((a - CLUSTER) // RANK, (a - CLUSTER) % RANK)
    return (own, a)


def space_of(ins: Instr) -> str:
    for m in ins.mods:
        if m == "shared::cluster":
            return "cluster"
        if m in ("shared", "shared::cta"):
            return "cta"
    return "generic"


def known(v: Value) -> int | None:
    """The value when it is known, else None."""
    return v if isinstance(v, int) else None


def barrier_at(run: WarpState, ins: Instr, op: Operand, lane: int) -> tuple[int, int] | None:
    """(CTA rank, offset) of the barrier (or buffer) the operand names, for one lane; None outside shared memory.
    A shared::cluster address of an odd CTA's own barrier with the CTA-pair bit cleared names the pair
    leader's (peer_bit_cleared: CUTLASS's umma_arrive_2x1SM_sm0)."""
    a = run.address(op, lane)
    space = space_of(ins)
    t = shared_target(a, space, run.rank)
    if t is not None and space == "cluster" and t[0] == run.rank and run.rank % 2 and peer_bit_cleared(run, op):
        return (run.rank - 1, t[1])
    return t


PEER_BIT = 1 << 24  # the CTA-pair bit of a shared::cluster address (CUTLASS: Sm100MmaPeerBitMask = 0xFEFFFFFF)
_RANK_HIGH = 0xFE00_0000  # the address bits above the pair bit (the rest of the rank), which the mask keeps
_PASS = frozenset({"add", "sub", "mov", "cvt", "or", "and"})


def peer_bit_cleared(run: WarpState, op: Operand) -> bool:
    """Whether the address register of ``op`` was computed, in the straight-line code before the current
    instruction, through an `and` with a constant that clears bit 24 -- the CTA-pair bit, which CUTLASS clears
    with Sm100MmaPeerBitMask to name the pair leader's barrier (SM100_TMA_2SM_LOAD, umma_arrive_2x1SM_sm0).
    The hardware's shared::cta addresses carry the CTA's rank bits and extraction's do not, so the mask is
    recognized where it is applied: the chain of definitions is followed back through add/sub/mov/cvt/or/and
    with one register source, within the basic block; anything else is not taken for the leader's."""
    reg = getattr(op, "base", None) if not isinstance(op, Name) else op.name
    body = run.cfg.body
    starts = set(run.cfg.fn.labels.values())
    i = run.pc
    while reg is not None and i > 0 and i not in starts:
        i -= 1
        prev = body[i]
        if prev.base == "bra":
            return False
        if not (prev.operands and isinstance(prev.operands[0], Name) and prev.operands[0].name == reg):
            continue
        if prev.base not in _PASS:
            return False
        srcs = [o for o in prev.operands[1:] if isinstance(o, Name)]
        imms = [o for o in prev.operands[1:] if isinstance(o, Imm)]
        if prev.base == "and" and imms and not imms[0].value & PEER_BIT:
            return imms[0].value & _RANK_HIGH == _RANK_HIGH  # only the pair bit: the other rank bits kept
        if len(srcs) != 1:
            return False
        reg = srcs[0].name
    return False


def element_bytes(run: WarpState, ins: Instr) -> int:
    """Bytes one lane's load or store touches: the element type (the last modifier) times the
    vector count. Refused when the last modifier is not an ld/st type."""
    last = ins.mods[-1] if ins.mods else ""
    if last not in ACCESS_BYTES:
        raise run.refuse(ins, f"`{ins.opcode}`: the size of the access is not known (`.{last}` is not a load or "
                         "store type)")
    return ACCESS_BYTES[last] * vector_count(ins.mods)


def _emit_access(run: WarpState, kind: str, lanes: int, ins: Instr,
                 footprint: list[tuple[int, int, int, int]]) -> None:
    ranges = tuple(sorted({(r, s, t) for _lane, r, s, t in footprint}))
    run.events.append(Event(kind, (), lanes, ins, ranges, None, tuple(sorted(set(footprint)))))


def _refuse_unknown(run: WarpState, ins: Instr, space: str) -> None:
    if space != "generic":
        raise run.refuse(ins, "a shared-memory access whose address is not known")
    raise run.refuse(ins, "a generic-address access whose address is not known (it may be shared "
                     "memory); extraction needs every shared-memory address")


def access(run: WarpState, ins: Instr, lanes: int) -> bool:
    """A load or store that may touch shared memory: an access event with each lane's byte range."""
    base = ins.base
    if ins.opcode.startswith("st.bulk"):
        return st_bulk(run, ins, lanes)
    size = element_bytes(run, ins)
    addr_op = ins.operands[1] if base in ("ld", "ldu", "atom") else ins.operands[0]
    space = space_of(ins)
    footprint: list[tuple[int, int, int, int]] = []
    for lane in lanes_of(lanes):
        a = run.address(addr_op, lane)
        if a is UNKNOWN:
            _refuse_unknown(run, ins, space)
        t = shared_target(a, space, run.rank)
        if t is None:
            continue
        footprint.append((lane, t[0], t[1], t[1] + size))
    if not footprint:
        return False  # not shared memory: an ordinary load or store
    if base in ("ld", "ldu", "atom"):
        dst = ins.operands[0]
        items = dst.items if isinstance(dst, Vec) else (dst,)
        for lane in lanes_of(lanes):
            word = next(((r, s) for la, r, s, t in footprint if la == lane and t - s == 4), None)
            v = tmem_word(run, *word) if base == "ld" and word is not None and len(items) == 1 else None
            for x in items:
                run.write(x, lane, UNKNOWN if v is None else v)
    if base in ("atom", "red"):
        raise run.refuse(ins, "atomics on shared memory are not modelled")
    _emit_access(run, "read" if base in ("ld", "ldu") else "write", lanes, ins, footprint)
    return True


def st_bulk(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`st.bulk{.weak}{.shared::cta} [a], size, initval;` (PTX ISA 8.6, sm_100): a weak store that
    initializes `size` bytes of shared memory from `a` ("st.bulk instruction initializes a region of
    shared memory starting from the location specified by destination address operand a. The ...
    operand size specifies the amount of memory to be initialized in terms of number of bytes").
    It is an ordinary (weak, generic) store of those bytes -- not an async operation: PTX gives it
    `.weak` semantics "as described in the Memory Consistency Model" and no completion mechanism.
    A size that is unknown, not a multiple of 8 or above 16777216 (undefined behaviour), or an
    address outside shared memory (undefined behaviour for a generic address), is refused."""
    if len(ins.operands) != 3:
        raise run.refuse(ins, f"`{ins.opcode}` with {len(ins.operands)} operands (PTX: [a], size, initval)")
    space = space_of(ins)
    footprint: list[tuple[int, int, int, int]] = []
    for lane in lanes_of(lanes):
        a = run.address(ins.operands[0], lane)
        if a is UNKNOWN:
            _refuse_unknown(run, ins, space)
        n = run.read(ins.operands[1], lane)
        if not isinstance(n, int):
            raise run.refuse(ins, "an st.bulk whose size operand is not known")
        if n % 8 or not 0 < n <= ST_BULK_MAX:
            raise run.refuse(ins, f"an st.bulk of {n} bytes: PTX makes a size that is not a multiple of 8 "
                             f"undefined, and allows at most {ST_BULK_MAX}")
        t = shared_target(a, space, run.rank)
        if t is None or t[0] != run.rank:
            raise run.refuse(ins, "an st.bulk whose address is not in this CTA's shared memory (PTX: undefined "
                             "outside the .shared window)")
        footprint.append((lane, t[0], t[1], t[1] + n))
    _emit_access(run, "write", lanes, ins, footprint)
    return True


def matrix(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`ldmatrix`/`stmatrix.sync.aligned.m8n8.xN[.trans].shared.b16`: the warp reads or writes N 8x8 matrices
    of 16-bit elements, each of its 8 rows (16 bytes) at the address one lane gives: lanes 0..8N-1 (PTX ISA,
    "Warp-level matrix load/store instructions"). The rows are moved by the warp collectively (each lane's
    registers hold parts of rows other lanes address), so the footprint is the warp's (lane -1)."""
    mods = ins.mods
    if "m8n8" not in mods or "b16" not in mods:
        raise run.refuse(ins, f"`{ins.opcode}`: only the m8n8 .b16 shapes are modelled")
    count = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), 1)
    load = ins.base == "ldmatrix"
    addr_op = ins.operands[1] if load else ins.operands[0]
    space = space_of(ins)
    footprint: list[tuple[int, int, int, int]] = []
    for lane in lanes_of(lanes & ((1 << (8 * count)) - 1)):
        t = shared_target(run.address(addr_op, lane), space, run.rank)
        if t is None:
            raise run.refuse(ins, "a matrix load or store whose shared-memory address is not known")
        footprint.append((-1, t[0], t[1], t[1] + 16))
    if load:
        dst = ins.operands[0]
        for lane in lanes_of(lanes):
            for x in dst.items if isinstance(dst, Vec) else (dst,):
                run.write(x, lane, UNKNOWN)
    _emit_access(run, "read" if load else "write", lanes, ins, footprint)
    return True
