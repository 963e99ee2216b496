"""The PTX instructions that touch synchronization: warp collectives executed across lanes,
and the barrier, copy, fence and shared-memory instructions turned into events.

Each recognised instruction is listed with the language operation it becomes in
`docs/extract.md`; an instruction of these families that is not recognised is
refused (it could change the skeleton), never dropped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from . import clc, fences, tcgen05, tensormaps
from .access import access, matrix, peer_bit_cleared, shared_target
from .access import barrier_at as _bar
from .access import known as _known
from .lane_operands import lane_groups
from .launch import CLUSTER, RANK, SH_GEN, Event, lanes_of
from .parse import Imm, Instr, Name, Operand, Pair, TensorAddr, Vec
from .probe import Pending
from .spin import GivesUp, result_unused, spins
from .undefined import member_mask
from .values import UNKNOWN, Value, mask
from .wgmma_desc import operand_ranges
from .wgmma_regs import note_rs_read

if TYPE_CHECKING:
    from .warp import WarpState

_NOT_MODELLED = ("mbarrier.pending_count", "bar.red", "barrier.red", "cp.async.ca",
                 "cp.async.cg", "cp.async.mbarrier", "cp.async.commit_group", "cp.async.wait_group",
                 "cp.async.wait_all", "cp.async.bulk.shared::cluster.shared::cta",
                 "cp.reduce.async", "st.async", "red.async", "multimem.", "call", "trap", "brkpt",
                 "mbarrier.arrive.noComplete", "wgmma.mma_async.sp",
                 "cp.async.bulk.global.shared::cta.bulk_group.cp_mask")
_WHY = {
    "wgmma.mma_async.sp": "sparse wgmma is not modelled",
    "call": "calls are not followed (device functions are expected to be inlined)",
}


def execute_sync(run: WarpState, ins: Instr, lanes: int) -> bool:
    """Execute `ins` if it is a collective or synchronization instruction; False for ordinary ones."""
    op = ins.opcode
    if tensormaps.handles(op):  # rewritten tensor maps and their proxy fences (tensormaps.py)
        return tensormaps.execute(run, ins, lanes)
    if op.startswith(_NOT_MODELLED):  # (one call for every prefix: this runs for each instruction of each warp)
        why = next((w for p, w in _WHY.items() if op.startswith(p)), "it is not modelled by syncverify")
        raise run.refuse(ins, f"`{op}` affects synchronization and {why}")
    base = ins.base
    handler = _HANDLERS.get(base)
    if handler is None:
        if base in ("st", "ld", "atom", "red", "ldu") and _maybe_shared(ins):
            return access(run, ins, lanes)
        return False
    return handler(run, ins, lanes)


# ---- helpers ----------------------------------------------------------------------------------------

def _maybe_shared(ins: Instr) -> bool:
    mods = ins.mods
    if any(m.startswith("shared") for m in mods):
        return True
    return not any(m in ("global", "param", "const", "local") for m in mods)


def _uniform(run: WarpState, ins: Instr, lanes: int, f, kind: str = "") -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    """Compute f(lane) for every executing lane; they must agree and be known."""
    ((_m, v),) = lane_groups(run, ins, lanes, kind, f)
    return v  # type: ignore[return-value]


def _emit_lanewise(run: WarpState, kind: str, lanes: int, ins: Instr, f, extra: tuple[object, ...] = ()) -> None:  # type: ignore[no-untyped-def]
    """Emit ``kind`` with the operands ``f(lane)`` (plus ``extra``): one event when the lanes agree, else one
    per group of lanes that agree (lane_operands.py), each marked per_lane."""
    groups = lane_groups(run, ins, lanes, kind, f)
    for m, v in groups:
        run.events.append(Event(kind, (*v, *extra), m, ins, per_lane=len(groups) > 1))  # type: ignore[misc]


def _emit(run: WarpState, kind: str, args: tuple[object, ...], lanes: int, ins: Instr,
          ranges: tuple[tuple[int, int, int], ...] = (), retry: Instr | None = None) -> None:
    run.events.append(Event(kind, args, lanes, ins, ranges, retry))


def _collective_mask(run: WarpState, ins: Instr, lanes: int, op: Operand) -> int:
    if "sync" not in ins.mods:
        raise run.refuse(ins, f"`{ins.opcode}` without .sync (a warp-synchronous form before sm_70) is not modelled")
    return member_mask(run, ins, lanes, op)


# ---- warp collectives -------------------------------------------------------------------------------

def _elect(run: WarpState, ins: Instr, lanes: int) -> bool:
    m = _collective_mask(run, ins, lanes, ins.operands[1])
    leader = (m & -m).bit_length() - 1
    dst = ins.operands[0]
    for lane in lanes_of(lanes):
        if isinstance(dst, Pair):
            run.write(Name(dst.first), lane, leader, 32)
            run.write(Name(dst.second), lane, int(lane == leader), 1)
        else:
            run.write(dst, lane, int(lane == leader), 1)
    return True


def _shfl(run: WarpState, ins: Instr, lanes: int) -> bool:
    dst, a, b, c, mop = ins.operands[:5]
    _collective_mask(run, ins, lanes, mop)
    mode = ins.mods[1] if len(ins.mods) > 1 else "idx"
    vals = {lane: run.read(a, lane) for lane in lanes_of(lanes)}
    for lane in lanes_of(lanes):
        bv, cv = run.read(b, lane), run.read(c, lane)
        if not isinstance(bv, int) or not isinstance(cv, int):
            out: Value = UNKNOWN
            ok: Value = UNKNOWN
        else:
            bval, cval, seg = bv & 31, cv & 31, (cv >> 8) & 31
            max_lane = (lane & seg) | (cval & ~seg)
            min_lane = lane & seg
            if mode == "up":
                j, p = lane - bval, lane - bval >= max_lane
            elif mode == "down":
                j, p = lane + bval, lane + bval <= max_lane
            elif mode == "bfly":
                j, p = lane ^ bval, (lane ^ bval) <= max_lane
            else:
                j = min_lane | (bval & ~seg)
                p = j <= max_lane
            if not p:
                j = lane
            out = vals.get(j, UNKNOWN)
            ok = int(p)
        if isinstance(dst, Pair):
            run.write(Name(dst.first), lane, out, 32)
            run.write(Name(dst.second), lane, ok, 1)
        else:
            run.write(dst, lane, out, 32)
    return True


def _vote(run: WarpState, ins: Instr, lanes: int) -> bool:
    dst, src, mop = ins.operands[:3]
    m = _collective_mask(run, ins, lanes, mop)
    preds = {lane: run.read(src, lane) for lane in lanes_of(m)}
    mode = ins.mods[1] if len(ins.mods) > 1 else "any"
    if any(v is UNKNOWN for v in preds.values()):
        res: Value = UNKNOWN
    elif mode == "ballot":
        res = sum(1 << lane for lane, v in preds.items() if v)
    elif mode == "all":
        res = int(all(preds.values()))
    elif mode == "any":
        res = int(any(preds.values()))
    else:
        res = int(len({bool(v) for v in preds.values()}) == 1)
    for lane in lanes_of(lanes):
        run.write(dst, lane, res, 32)
    return True


def _masked_unknown(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`match.sync` / `redux.sync d, a, membermask`: the result is data (unknown); the mask is checked."""
    _collective_mask(run, ins, lanes, ins.operands[2])
    return _unknown_result(run, ins, lanes)


def _activemask(run: WarpState, ins: Instr, lanes: int) -> bool:
    for lane in lanes_of(lanes):
        run.write(ins.operands[0], lane, lanes, 32)
    return True


def _unknown_result(run: WarpState, ins: Instr, lanes: int) -> bool:
    for lane in lanes_of(lanes):
        run.write(ins.operands[0], lane, UNKNOWN)
    return True


def _ignore(run: WarpState, ins: Instr, lanes: int) -> bool:
    return True


def _mapa(run: WarpState, ins: Instr, lanes: int) -> bool:
    generic = "shared::cluster" not in ins.mods
    for lane in lanes_of(lanes):
        a, r = run.read(ins.operands[1], lane), run.read(ins.operands[2], lane)
        t = shared_target(a, "generic" if generic else "cta", run.rank)
        if t is None or not isinstance(r, int):
            run.write(ins.operands[0], lane, UNKNOWN)
            continue
        v = CLUSTER + mask(r, 32) * RANK + t[1]
        run.write(ins.operands[0], lane, v + SH_GEN if generic else v)
    return True


def _getctarank(run: WarpState, ins: Instr, lanes: int) -> bool:
    space = "cluster" if "shared::cluster" in ins.mods else "generic"
    for lane in lanes_of(lanes):
        t = shared_target(run.read(ins.operands[1], lane), space, run.rank)
        run.write(ins.operands[0], lane, UNKNOWN if t is None else t[0], 32)
    return True


# ---- barriers ---------------------------------------------------------------------------------------

def _sem_scope(ins: Instr, sem_default: str) -> tuple[str, str]:
    sem = next((m for m in ins.mods if m in ("release", "relaxed", "acquire")), sem_default)
    scope = next((m for m in ins.mods if m in ("cta", "cluster")), "cta")
    return sem, scope


def _mbarrier(run: WarpState, ins: Instr, lanes: int) -> bool:
    mods = ins.mods
    sub = mods[0]
    ops = ins.operands

    def bar_at(k: int):  # type: ignore[no-untyped-def]
        return lambda lane: _bar(run, ins, ops[k], lane)

    if sub == "init":
        args = _uniform(run, ins, lanes, lambda lane: (_bar(run, ins, ops[0], lane),
                                                       _known(run.read(ops[1], lane))))
        _emit(run, "init", args, lanes, ins)
        return True
    if sub == "inval":
        _emit(run, "inval", (_uniform(run, ins, lanes, bar_at(0)),), lanes, ins)
        return True
    if sub in ("try_wait", "test_wait"):
        if "parity" not in mods:
            raise run.refuse(ins, f"a token (state) {sub} is not modelled; CUTLASS waits use .parity")
        sem, scope = _sem_scope(ins, "acquire")
        args = _uniform(run, ins, lanes, lambda lane: (_bar(run, ins, ops[1], lane),
                                                       _known(run.read(ops[2], lane))))
        spin = spins(run, run.pc, lanes, ops[0], args)
        if isinstance(spin, GivesUp):
            if result_unused(run, run.pc, ops[0]):  # a probe whose answer nothing reads decides nothing
                for lane in lanes_of(lanes):
                    run.write(ops[0], lane, UNKNOWN)
                return True
            # a probe (docs/language.md §7.1.1): both outcomes are run after this instruction (probe.py)
            if lanes != (1 << run.nlanes) - 1 & ~run.exited and lanes & (lanes - 1):
                raise run.refuse(ins, f"this {sub} can give up, so it is a probe ({spin.why}), and only some "
                                 "lanes of the warp execute it; the language's probe is executed by the warp "
                                 "or by one elected lane")
            run.probe = Pending(ins, run.pc, lanes, args[0], args[1], sem, scope, ops[0], sub == "test_wait")  # type: ignore[arg-type]
            return True
        _emit(run, "wait", (*args, sem, scope), lanes, ins, retry=spin.retry if spin.retry is not ins else None)
        for lane in lanes_of(lanes):
            run.write(ops[0], lane, 1, 1)  # the blocking reading: it returns once the phase completed
        return True
    if sub in ("arrive", "arrive_drop"):
        sem, scope = _sem_scope(ins, "release")
        drop = sub == "arrive_drop"
        if "expect_tx" in mods:
            _emit_lanewise(run, "arrive_drop_tx" if drop else "arrive_tx", lanes, ins,
                           lambda lane: (_bar(run, ins, ops[1], lane), _known(run.read(ops[2], lane))), (sem, scope))
        else:
            _emit_lanewise(run, "arrive_drop" if drop else "arrive", lanes, ins,
                           lambda lane: (_bar(run, ins, ops[1], lane),
                                         _known(run.read(ops[2], lane)) if len(ops) > 2 else 1), (sem, scope))
        if isinstance(ops[0], Name) and ops[0].name != "_":
            for lane in lanes_of(lanes):
                run.write(ops[0], lane, 0, 64)  # the state token: any value; only try_wait with a token uses it
        return True
    if sub in ("expect_tx", "complete_tx"):
        _emit_lanewise(run, sub, lanes, ins, lambda lane: (_bar(run, ins, ops[0], lane),
                                                           _known(run.read(ops[1], lane))))
        return True
    raise run.refuse(ins, f"`{ins.opcode}` is not modelled")


def _bar_cta(run: WarpState, ins: Instr, lanes: int) -> bool:
    mods = ins.mods
    if mods and mods[0] == "warp":  # bar.warp.sync mask
        m = _collective_mask(run, ins, lanes, ins.operands[0])
        if m != (1 << run.nlanes) - 1:
            raise run.refuse(ins, "a __syncwarp of part of the warp is not modelled")
        _emit(run, "syncwarp", (), lanes, ins)
        return True
    if mods and mods[0] == "cluster":
        kind = mods[1] if len(mods) > 1 else ""
        if kind == "arrive":
            _emit(run, "cluster_arrive", ("relaxed" in mods,), lanes, ins)
        elif kind == "wait":
            _emit(run, "cluster_wait", (), lanes, ins)
        else:
            raise run.refuse(ins, f"`{ins.opcode}` is not modelled")
        return True
    sub = mods[1] if mods and mods[0] == "cta" and len(mods) > 1 else (mods[0] if mods else "sync")
    if sub not in ("sync", "arrive"):
        raise run.refuse(ins, f"`{ins.opcode}` is not modelled")
    ops = ins.operands
    args = _uniform(run, ins, lanes, lambda lane: (_known(run.read(ops[0], lane)),
                                                   _known(run.read(ops[1], lane)) if len(ops) > 1 else -1))
    count = args[1] if args[1] != -1 else None
    aligned = ins.base == "bar" or "aligned" in mods  # `barrier.sync` without .aligned is the unaligned form
    _emit(run, "bar_" + sub, (args[0], count, aligned), lanes, ins)
    return True


def _fence(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`fence.*` and `membar.*`, each form by its whole opcode (ptx/fences.py): an async-proxy fence
    keeps its state space and half, a fence the model credits nothing to is skipped, any other
    form is refused."""
    what = fences.classify(ins.opcode)
    if isinstance(what, str):
        raise run.refuse(ins, what)
    if what is not None:
        _emit(run, what[0], what[1], lanes, ins)
    return True


# ---- copies -----------------------------------------------------------------------------------------

def _cp(run: WarpState, ins: Instr, lanes: int) -> bool:
    op, ops, mods = ins.opcode, ins.operands, ins.mods
    if not op.startswith("cp.async.bulk"):
        raise run.refuse(ins, f"`{op}` affects synchronization and is not modelled")
    if op.startswith("cp.async.bulk.prefetch"):
        return True
    if op.startswith("cp.async.bulk.tensor"):
        return _tensor_copy(run, ins, lanes)
    if op.startswith("cp.async.bulk.commit_group"):
        _emit(run, "bulk_commit", (), lanes, ins)
        return True
    if op.startswith("cp.async.bulk.wait_group"):
        n = _uniform(run, ins, lanes, lambda lane: _known(run.read(ops[0], lane)))
        _emit(run, "bulk_wait", (n,), lanes, ins)
        return True
    if "mbarrier::complete_tx::bytes" in mods and mods[2].startswith("shared"):
        multicast = "multicast::cluster" in mods

        def load_args(lane: int):  # type: ignore[no-untyped-def]
            dst = shared_target(run.address(ops[0], lane), "cluster", run.rank)
            size = _known(run.read(ops[2], lane))
            mbar = shared_target(run.address(ops[3], lane), "cluster", run.rank)
            m = _known(run.read(ops[4], lane)) if multicast else None
            return (dst, size, mbar, m if multicast else -1)

        _emit_lanewise(run, "tma_load", lanes, ins, load_args)
        return True
    if mods[2] == "global" and mods[3].startswith("shared"):
        def store_args(lane: int):  # type: ignore[no-untyped-def]
            src = shared_target(run.address(ops[1], lane), "cta", run.rank)
            return (src, _known(run.read(ops[2], lane)))

        _emit_lanewise(run, "tma_store", lanes, ins, store_args)  # (each lane its own bulk group: lane_operands.py)
        return True
    raise run.refuse(ins, f"`{op}` affects synchronization and is not modelled")


def tensor_copy_bytes(run: WarpState, ins: Instr, tmap: Operand, lane: int) -> int | None:
    """The bytes one tensor copy moves: the box of its tensor map, as bound with --tensor-bytes.

    The box is encoded in the 128-byte tensor map by the host (cuTensorMapEncodeTiled); the PTX holds
    only the map's address. Extraction never takes the count from the paired expect_tx: that the two
    agree is one of the things the check is for.
    """
    base = tmap.base if isinstance(tmap, TensorAddr) else None
    addr = run.read(Name(base), lane) if base else UNKNOWN
    where = run.tensor_map(addr)
    # a map in global memory, its bytes given for the pointer it is reached through: only for a one-CTA load,
    # whose map read the protocol names (`map T`: _note_map); a store's or a 2-SM copy's would go unmodelled
    load = ins.mods[4:6] == ("shared::cluster", "global") and "cta_group::2" not in ins.mods
    if where is None and load and isinstance(addr, int) and (n := tensormaps.map_bytes(run, ins, addr)) is not None:
        return n
    if where is None:
        raise run.refuse(ins, "the tensor map of this copy is not a kernel parameter passed by value "
                         "(__grid_constant__, as CUTLASS's Params), nor a map in global memory whose bytes were "
                         "given for a bound pointer parameter (--param P=ADDR --tensor-bytes 'P[OFF]=BYTES')")
    name, k, off = where
    got = run.launch.tensor_bytes
    n = got.get((name, off), got.get((str(k), off)))
    if n is None:
        raise run.refuse(ins, f"the bytes a tensor copy moves are the box of its tensor map (parameter {k}, "
                         f"byte {off}), which the PTX does not hold; give them with --tensor-bytes "
                         f"'{k}[{off}]=BYTES' (CUTLASS: the copy atom's NumBitsPerTMA / 8)")
    return n


def _tensor_copy(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`cp.async.bulk.tensor.Nd.dst.src…`: tile-mode TMA loads (complete_tx on an mbarrier, optionally
    multicast) and stores (bulk group), with the byte count of their tensor map's box."""
    mods, ops = ins.mods, ins.operands
    rest = mods[4:]  # after async.bulk.tensor.Nd
    group = 2 if "cta_group::2" in rest else 1
    rest = tuple(m for m in rest if m not in ("cta_group::1", "cta_group::2"))
    if any(m.startswith(("im2col", "tile::", "cta_group")) for m in rest):
        raise run.refuse(ins, f"`{ins.opcode}`: only tile-mode tensor copies are modelled (the bytes of "
                         "im2col and gather modes are not the box)")
    dst_space, src_space = rest[0], rest[1]
    if dst_space.startswith("shared") and src_space == "global":
        if "mbarrier::complete_tx::bytes" not in rest:
            raise run.refuse(ins, f"`{ins.opcode}` is not modelled (only mbarrier completion)")
        multicast = "multicast::cluster" in rest

        def load_args(lane: int):  # type: ignore[no-untyped-def]
            dst = shared_target(run.address(ops[0], lane), "cluster", run.rank)
            mbar = shared_target(run.address(ops[2], lane), "cluster", run.rank)
            m = _known(run.read(ops[3], lane)) if multicast else -1
            return (dst, tensor_copy_bytes(run, ins, ops[1], lane), mbar, m)

        if group == 2:  # the complete-tx lands on the pair leader's barrier (PTX: .cta_group::2)
            args = _uniform(run, ins, lanes, load_args)
            at = args[2][0]
            leader = at == run.rank & ~1 if at != run.rank else \
                run.rank % 2 == 0 or peer_bit_cleared(run, ops[2])
            if not leader or args[0][0] != run.rank or args[3] != -1:
                raise run.refuse(ins, "a 2-SM copy (.cta_group::2) is modelled into the issuing CTA without "
                                 "multicast, signalling the pair leader's barrier (the address masked with "
                                 "CUTLASS's Sm100MmaPeerBitMask, or the leader's own)")
            args = (args[0], args[1], (run.rank & ~1, args[2][1]), args[3])
            _emit(run, "tma_load_2sm", args, lanes, ins)
            return True
        before = len(run.events)
        _emit_lanewise(run, "tma_load", lanes, ins, load_args)
        _note_map(run, ins, lanes, before)
        return True
    if dst_space == "global" and src_space.startswith("shared") and "bulk_group" in rest:
        def store_args(lane: int):  # type: ignore[no-untyped-def]
            src = shared_target(run.address(ops[1], lane), "cta", run.rank)
            return (src, tensor_copy_bytes(run, ins, ops[0], lane))

        _emit_lanewise(run, "tma_store", lanes, ins, store_args)  # (each lane its own bulk group: lane_operands.py)
        return True
    raise run.refuse(ins, f"`{ins.opcode}` affects synchronization and is not modelled")


def _note_map(run: WarpState, ins: Instr, lanes: int, before: int) -> None:
    """Mark the copies just emitted with the address of their map when it is in global memory (a map the kernel
    may rewrite: tensormaps.py), not a kernel parameter."""
    base = ins.operands[1].base if isinstance(ins.operands[1], TensorAddr) else None
    vals = {run.read(Name(base), lane) if base else UNKNOWN for lane in lanes_of(lanes)}
    if len(vals) > 1 and any(isinstance(v, int) and run.tensor_map(v) is None for v in vals):
        raise run.refuse(ins, "lanes of one TMA copy instruction read different tensor maps in global memory")
    addr = vals.pop() if len(vals) == 1 else UNKNOWN
    if isinstance(addr, int) and run.tensor_map(addr) is None:
        if getattr(run, "gcomm", None) is None:  # (a store that rewrites the map could not be seen: tensormaps.py)
            raise run.refuse(ins, "a TMA copy of a tensor map in global memory is extracted only where the kernel's "
                             "global-memory accesses are recorded (not in this mode)")
        run.events[before:] = [replace(e, tmap=addr) for e in run.events[before:]]


def _wgmma(run: WarpState, ins: Instr, lanes: int) -> bool:
    sub = ins.mods[0]
    if sub == "fence":
        return True
    if sub == "commit_group":
        _emit(run, "wgmma_commit", (), lanes, ins)
        return True
    if sub == "wait_group":
        n = _uniform(run, ins, lanes, lambda lane: _known(run.read(ins.operands[0], lane)))
        _emit(run, "wgmma_wait", (n,), lanes, ins)
        return True
    if sub == "mma_async":
        _wgmma_mma(run, ins, lanes)
        return True
    raise run.refuse(ins, f"`{ins.opcode}` is not modelled")


_ELEM_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "u8": 1, "s8": 1, "b1": 1, "f32": 4, "s32": 4}


def _wgmma_mma(run: WarpState, ins: Instr, lanes: int) -> None:
    """`wgmma.mma_async.sync.aligned.mMnNkK.dtype.atype.btype d, a, b, …`: the async reads of A and B, the
    exact bytes each matrix descriptor names (wgmma_desc.py). The major-ness comes from the instruction:
    f16/bf16 with A in shared memory have `d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b,
    imm-trans-a, imm-trans-b`, with A in registers `d, a, b-desc, scale-d, imm-scale-a, imm-scale-b,
    imm-trans-b`; the other types have no transpose operands and are K-major (PTX ISA, wgmma.mma_async)."""
    shape = next((m for m in ins.mods if m.startswith("m") and "n" in m and "k" in m), "")
    try:
        m_, rest = shape[1:].split("n")
        n_, k_ = rest.split("k")
        m, n, k = int(m_), int(n_), int(k_)
    except ValueError:
        raise run.refuse(ins, f"wgmma shape {shape!r} not understood") from None
    types = [t for t in ins.mods if t in _ELEM_BYTES]
    if not types:
        raise run.refuse(ins, "wgmma operand type not understood")
    elem = _ELEM_BYTES[types[-1]]
    ops = ins.operands
    a_in_regs = isinstance(ops[1], Vec)
    if types[-1] in ("f16", "bf16"):
        want = 7 if a_in_regs else 8
        if len(ops) != want:
            raise run.refuse(ins, f"wgmma with {types[-1]} operands takes {want} operands here, not {len(ops)}")
        trans = [None, ops[6]] if a_in_regs else [ops[6], ops[7]]
    else:
        trans = [None, None]  # no transpose operand: K-major
    ranges: set[tuple[int, int, int]] = set()
    for op, rows, tr in ((ops[1], m, trans[0]), (ops[2], n, trans[1])):
        if isinstance(op, Vec):  # A from registers
            continue
        if tr is not None and not (isinstance(tr, Imm) and tr.value in (0, 1)):
            raise run.refuse(ins, "a wgmma transpose operand that is not the immediate 0 or 1")
        k_major = tr is None or tr.value == 0  # type: ignore[union-attr]
        desc = _uniform(run, ins, lanes, lambda lane, op=op: _known(run.read(op, lane)))
        for lo, hi in operand_ranges(desc, rows, elem, k, k_major):  # type: ignore[arg-type]
            ranges.add((run.rank, lo, hi))
    if a_in_regs:  # the A fragment's registers, read until the wait that retires the group (wgmma_regs.py)
        note_rs_read(run, ins, lanes, ops[1])  # type: ignore[arg-type]
    _emit(run, "wgmma_read", (), lanes, ins, tuple(sorted(ranges)))


_HANDLERS = {
    "elect": _elect, "shfl": _shfl, "vote": _vote, "activemask": _activemask, "match": _masked_unknown,
    "redux": _masked_unknown, "mapa": _mapa, "getctarank": _getctarank, "mbarrier": _mbarrier,
    "bar": _bar_cta, "barrier": _bar_cta, "fence": _fence, "membar": _fence, "cp": _cp, "wgmma": _wgmma,
    "tcgen05": tcgen05.execute, "setmaxnreg": _ignore, "griddepcontrol": _ignore, "ldmatrix": matrix,
    "stmatrix": matrix, "clusterlaunchcontrol": clc.execute,
}
