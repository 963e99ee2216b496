"""Tensor maps the kernel rewrites: `tensormap.replace`, `tensormap.cp_fenceproxy`, the tensormap proxy fences and
the TMA copies that read a map in global memory, turned into the language's `tensormap` operations
(docs/language.md §3.3c; docs/extract.md, "Tensor maps rewritten by the kernel").

The recognized shapes are CUTLASS's (cute/arch/copy_sm90_desc.hpp in the pip nvidia-cutlass 4.2.0.0 headers; its
grouped and array GEMMs, e.g. cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:628-756):

* `tensormap.replace.tile.FIELD.shared::cta.b1024.bN [S], v…` (`tma_descriptor_replace_*_in_shared_mem`): a
  generic write of the 128-byte copy of a map at shared-memory address S -- `write` of those bytes; the map
  itself is not touched yet;
* `tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.SCOPE.sync.aligned [G], [S], 128`
  (`tma_descriptor_cp_fence_release`): PTX ISA §9.7.9.26 "copies the tensor-map from the shared memory address
  S to the global memory address G in the generic proxy", then the release half of the proxy pattern -- `read`
  of S, `tensormap.replace T`, `fence.proxy.tensormap.release.SCOPE` (T the map at G). The instruction is
  warp-collective (`.sync.aligned`) and makes one copy, after every lane of the warp reached it: it is written
  as the lowest executing lane's (an `elect`), so what that lane knows is ordered before the rewrite and what
  is ordered after it is that lane's -- never more than the warp's collective execution gives;
* `tensormap.replace.tile.FIELD.global.b1024.bN [G], v…` (`tma_descriptor_replace_addr_in_global_mem`): a
  rewrite of the map at G in place -- `tensormap.replace T`;
* `fence.proxy.tensormap::generic.release.SCOPE` -- `fence.proxy.tensormap.release.SCOPE`;
  `fence.proxy.tensormap::generic.acquire.SCOPE [G], 128` -- `fence.proxy.tensormap.acquire.SCOPE T`;
* a TMA copy whose map operand is the global address G -- `tma.load … map T`; its box bytes come from
  `--tensor-bytes 'P[OFF]=N'`, P a pointer parameter bound with `--param` whose value is G - OFF.

T: one `tensormap` object per global address that a rewrite names (`tm0`, `tm1`, … in address order). A map
in global memory that no rewrite names is a map the kernel never rewrites: copies of it name no map, and the
fences on it are no-ops, as for a `__grid_constant__` map (they are skipped when the protocol has no
rewritten map). Addresses must be known (a pointer parameter bound with `--param`); anything else of these
families -- a rewrite through a generic address, a rewrite of another CTA's shared memory, a copy of a size
other than 128, an address that is not known or that differs between the lanes -- is refused at its line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .access import shared_target
from .globalcomm import keys_meet
from .launch import Event, lanes_of
from .parse import Instr
from .values import UNKNOWN

if TYPE_CHECKING:
    from .globalcomm import GlobalAccesses
    from .warp import WarpState

MAP_BYTES = 128  # a CUtensorMap (PTX: `.b1024`)
KINDS = frozenset({"tm_replace", "tm_fence"})
_SCOPES = ("cta", "cluster", "gpu", "sys")


def handles(op: str) -> bool:
    """Is ``op`` one of the instructions this module turns into events (or refuses)?"""
    return op.startswith(("tensormap.", "fence.proxy.tensormap::generic."))


def _one(run: WarpState, ins: Instr, lanes: int, vals: Iterable[object], what: str) -> int:
    got = set(vals)
    if len(got) != 1 or UNKNOWN in got or None in got:
        raise run.refuse(ins, f"the {what} of this tensor-map instruction is not known, or differs between the lanes "
                         "that execute it (a map in global memory is named by its address: bind the pointer "
                         "parameter it comes from with --param)")
    v = got.pop()
    assert isinstance(v, int)
    return v


def _global(run: WarpState, ins: Instr, lanes: int, op) -> int:  # type: ignore[no-untyped-def]
    return _one(run, ins, lanes, (run.address(op, lane) for lane in lanes_of(lanes)), "global address")


def _smem(run: WarpState, ins: Instr, lanes: int, op) -> int:  # type: ignore[no-untyped-def]
    vals = {shared_target(run.address(op, lane), "cta", run.rank) for lane in lanes_of(lanes)}
    if len(vals) != 1 or None in vals:
        raise run.refuse(ins, "the shared-memory copy of the tensor map is not at one known address of this CTA")
    _rank, off = vals.pop()  # type: ignore[misc]
    return off


def _scope(run: WarpState, ins: Instr) -> str:
    scope = next((m for m in ins.mods if m in _SCOPES), None)
    if scope is None:
        raise run.refuse(ins, f"`{ins.opcode}`: no scope (.cta, .cluster, .gpu or .sys)")
    return scope


def _bytes(run: WarpState, ins: Instr, lanes: int, kind: str, off: int) -> None:
    """A generic access of the 128 bytes of the map's copy in this CTA's shared memory."""
    rng = ((run.rank, off, off + MAP_BYTES),)
    run.events.append(Event(kind, (), lanes, ins, rng, None,
                            tuple((lane, run.rank, off, off + MAP_BYTES) for lane in lanes_of(lanes))))


def execute(run: WarpState, ins: Instr, lanes: int) -> bool:
    """Each recognized shape as its events (module docstring); anything else of these families refused."""
    op, mods, ops = ins.opcode, ins.mods, ins.operands
    if op.startswith("tensormap.replace."):
        if mods[1] != "tile" or "b1024" not in mods:
            raise run.refuse(ins, f"`{op}`: only the .tile mode of a .b1024 map is recognized")
        if "shared::cta" in mods:
            _bytes(run, ins, lanes, "write", _smem(run, ins, lanes, ops[0]))
            return True
        if "global" in mods:
            run.events.append(Event("tm_replace", (_global(run, ins, lanes, ops[0]),), lanes, ins))
            return True
        raise run.refuse(ins, f"`{op}`: a tensor map named by a generic address is not recognized (recognized: "
                         "`.shared::cta` and `.global`)")
    if op.startswith("tensormap.cp_fenceproxy."):
        want = ("global", "shared::cta", "tensormap::generic", "release")
        if any(m not in mods for m in want) or "sync" not in mods or len(ops) != 3:
            raise run.refuse(ins, f"`{op}`: only `tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic"
                             ".release.SCOPE.sync.aligned [gmem], [smem], 128` is recognized")
        size = _one(run, ins, lanes, (run.read(ops[2], lane) for lane in lanes_of(lanes)), "size")
        if size != MAP_BYTES:
            raise run.refuse(ins, f"`{op}` of {size} bytes: a tensor map is {MAP_BYTES}")
        g, s, scope = _global(run, ins, lanes, ops[0]), _smem(run, ins, lanes, ops[1]), _scope(run, ins)
        one = lanes & -lanes  # the warp's one copy, written as its lowest lane's (module docstring)
        _bytes(run, ins, one, "read", s)
        run.events.append(Event("tm_replace", (g,), one, ins))
        run.events.append(Event("tm_fence", ("release", scope, None), one, ins))
        return True
    if op.startswith("fence.proxy.tensormap::generic."):
        sem = mods[2] if len(mods) > 2 else ""
        if sem == "release" and not ops:
            run.events.append(Event("tm_fence", ("release", _scope(run, ins), None), lanes, ins))
            return True
        if sem == "acquire" and len(ops) == 2:
            size = _one(run, ins, lanes, (run.read(ops[1], lane) for lane in lanes_of(lanes)), "size")
            if size != MAP_BYTES:
                raise run.refuse(ins, f"`{op}` of {size} bytes: a tensor map is {MAP_BYTES}")
            g = _global(run, ins, lanes, ops[0])
            run.events.append(Event("tm_fence", ("acquire", _scope(run, ins), g), lanes, ins))
            return True
    raise run.refuse(ins, f"`{op}` affects synchronization and is not recognized (recognized: "
                     "`tensormap.replace.tile.FIELD.{shared::cta,global}.b1024`, `tensormap.cp_fenceproxy.global"
                     ".shared::cta.tensormap::generic.release.SCOPE.sync.aligned`, `fence.proxy.tensormap::generic"
                     ".release.SCOPE` and `.acquire.SCOPE [addr], 128`)")


def map_bytes(run: WarpState, ins: Instr, addr: int) -> int | None:
    """The box bytes of a copy whose map is at global address ``addr``: `--tensor-bytes 'P[OFF]=N'` for a pointer
    parameter P bound (`--param`) to ``addr - OFF``; None when none is given."""
    got = run.launch.tensor_bytes
    for k, name in enumerate(run.param_names):
        data, known = run.params[name]
        if data is None or len(data) != 8 or (known is not None and not all(known)):
            continue
        off = addr - int.from_bytes(data, "little")
        if 0 <= off < 1 << 32:
            n = got.get((name, off), got.get((str(k), off)))
            if n is not None:
                return n
    return None


def check_plain_rewrites(events: dict[tuple[int, int], list[Event]], gcomm: GlobalAccesses) -> None:
    """Refuse an ordinary store that may write the bytes of a tensor map in global memory that a TMA copy reads
    (DeepGEMM's `*(gmem_map) = *(smem_map)`): such a rewrite is not recognized, and a copy of that map would
    otherwise name no map (a rewrite racing with the copy would go unseen). A store may write the map when its
    bytes are known to overlap it, or when it goes through a pointer that may be the map's (globalcomm.py's
    pointer keys, which ignore offsets: conservative)."""
    copies = {id(e.instr): e.tmap for evs in events.values() for e in evs
              if e.kind == "tma_load" and e.tmap is not None}
    if not copies:
        return
    reads = [a for a in gcomm.accesses if id(a.ins) in copies]
    spans = sorted({copies[id(a.ins)] for a in reads})  # type: ignore[type-var]
    for a in gcomm.accesses:
        if not a.writes:
            continue
        hit = next((g for g in spans if a.span is not None and a.span[0] < g + MAP_BYTES and g < a.span[1]), None)
        if hit is None and not any(keys_meet(a.keys, r.keys) for r in reads):
            continue
        at = f"the tensor map at {hit:#x}" if hit is not None else "a tensor map in global memory"
        raise gcomm._at(a.ins, f"cannot extract ({a.who}): a store that may write {at}, which a TMA copy reads: "
                        "a rewrite by an ordinary store is not recognized (recognized: `tensormap.replace.tile"
                        "….global` and `tensormap.cp_fenceproxy`; docs/extract.md, \"Tensor maps rewritten by the "
                        "kernel\")")


def names(events: Iterable[Event]) -> dict[int, str]:
    """The tensor maps a rewrite names: global address -> `tmK` (address order)."""
    return {g: f"tm{j}" for j, g in enumerate(sorted({e.args[0] for e in events if e.kind == "tm_replace"}))}  # type: ignore[misc]


def render(e: Event, maps: dict[int, str]) -> list[str]:
    """The statement of a tm_replace / tm_fence event (a fence on a map no rewrite names is none)."""
    if e.kind == "tm_replace":
        return [f"tensormap.replace {maps[e.args[0]]};"]  # type: ignore[index]
    sem, scope, g = e.args
    if not maps:
        return []
    if sem == "release":
        return [f"fence.proxy.tensormap.release.{scope};"]
    return [f"fence.proxy.tensormap.acquire.{scope} {maps[g]};"] if g in maps else []  # type: ignore[index]


def copy_suffix(e: Event, maps: dict[int, str]) -> str:
    """` map T` for a TMA copy that reads a rewritten map."""
    return f" map {maps[e.tmap]}" if e.tmap is not None and e.tmap in maps else ""
