"""The semantics of tensor maps: the CUtensorMap objects a TMA copy reads through the tensormap proxy,
rewritten in place by the generic proxy (`tensormap.replace T`) and handed back to the tensormap proxy by
the fence pair `fence.proxy.tensormap::generic.release` / `.acquire` (docs/model.md, "Tensor maps").

PTX ISA: a tensor map is accessed by the copy "in the tensormap proxy"; a modification of it by the
generic proxy reaches a later copy only through "a uni-directional proxy release pattern" (the release
fence, or `tensormap.cp_fenceproxy`) in the writer and the acquire fence `fence.proxy.tensormap::generic
.acquire [addr], 128` in the thread that uses the map, ordered by synchronization between them; the CUDA
programming guide adds that once one thread acquired the map, "it can be used by other threads in the
block after sufficient synchronization", and that the thread that uses the map and the one that fences
must be in the same block. The ISA does not say when, between a copy's issue and its completion, the
tensormap proxy reads the map; the model takes the conservative reading: from the issue until the copy
completes (DeepGEMM #343: "previous TMA loads have already finished reading the tensormaps").

Records (all under the CTA field TMAP_CTA, the key (SPACE_DATA, TMAP_CTA, map, element)):

* the **replace**: one WRITE record, the map's latest rewrite (every older one is ordered before it, or
  the replace was SV606), known like any generic write (R_KNOWN); R_AKNOWN holds the holders ordered
  after it through a release fence of a thread that knew it (the writer's own release, or a release
  cumulative over what its thread had acquired), carried on by synchronization as R_KNOWN is;
* **acquired** markers: a READ record of no async flag, F_TM_ACQ, owner the acquiring process, known by
  the holders whose acquire fence found the rewrite released to them; synchronization carries it
  within the block (a holder of another CTA knowing it does not count: the copy checks the owner's CTA);
* the **copy's read**: a READ record with F_ASYNC | F_INFLIGHT from the copy's issue; the copy's
  completion (async_agents._complete_tma) lands it, known then to the barrier phase that completes.

The **bulk-group reading** (BULK_WAIT_MAP_READS, on by default, dropped by `--no-assume`): a copy's read of its
map also belongs to its thread's open bulk async-group, so that a `bulk.commit` and a `bulk.wait_read` that
retires the group make the read known complete to the waiting lanes, as they do a bulk store's source read.
PTX's `cp.async.bulk.commit_group` batches the operations that "use bulk_group based completion mechanism",
which a copy completing on an mbarrier does not; CUTLASS >= 4.0 drains the map reads this way before it
rewrites a map (`tensormaps_cp_fence_release`: `tma_desc_commit_group(); tma_desc_wait_group();`,
cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp), and NVIDIA's answer in cutlass#2912
is that "the kernels now use cp.async.bulk.commit_group and cp.async.bulk.wait_group to ensure the tensormap
has been read from". A rewrite that passes only because of it names the reading in the result's `assumed`.

Findings: SV606 — a replace of a map while a copy that reads it is not known complete to the replacing
lanes (the tensormap proxy's read races with the generic write), or two replaces, or a replace and a
copy, of one map not ordered by synchronization at all; SV607 — a copy reading a rewritten map that its
lanes know, but without the release/acquire fence pair between them (a stale map).

Scopes: a `.gpu`/`.sys` fence covers every thread of the model; a `.cta` or `.cluster` one is taken to
cover the writer's CTA only (conservative: a release at such a scope marks the rewrite F_TM_NARROW for
good, and an acquire at such a scope admits only a rewrite of its own CTA).

The bmc engine, the Promela export and the CUDA emitter do not model tensor maps: they refuse a protocol
that declares one (tensormap_refusal).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ..core import Violation
from ..state import (
    F_ASYNC,
    F_INFLIGHT,
    GROUP_FIELDS,
    LEADER,
    NUNITS,
    R_AKNOWN,
    R_FLAGS,
    R_KIND,
    R_KNOWN,
    R_LINE,
    R_OWNER,
    READ,
    SPACE_DATA,
    TMAP_CTA,
    UNIT_BULK,
    WRITE,
)
from . import lane_groups
from .async_agents import AsyncAgentOps
from .proxy_fence import fenced_holders
from .regions import WHOLE

# a marker: the rewrite was acquired by the tensormap proxy of its owner's holders (bit 13 is
# warp_collective_order.F_COLLECTIVE: a syncwarp cleared a marker that shared it, a false SV607)
F_TM_ACQ = 1 << 15
F_TM_NARROW = 1 << 14  # a rewrite released at .cta or .cluster scope: only its own CTA may acquire it
_NARROW = ("cta", "cluster")
BULK_WAIT_MAP_READS = "bulk-wait-map-reads"  # the reading of the module docstring, as `assumed` names it


def tensormap_refusal(protocol: ir.Protocol, what: str) -> str | None:
    """The reason ``what`` (an engine, exporter or emitter) refuses a protocol that declares tensor
    maps, or None."""
    names = [b.name for b in protocol.buffers if b.space == "tensormap"]
    if not names:
        return None
    return (f"{what} does not model tensor maps yet (`tensormap {', '.join(names)}`: rewritten maps read by "
            "TMA copies): check this protocol with the explicit engine or --engine z3")


class TensormapOps:
    """Explicit-state handlers of tensor maps (a mixin of Machine)."""

    def _tm_key(self, ref: ir.Ref, env, ctx) -> tuple[tuple, str]:
        buf, slot = self._slot(ref, env, ctx)  # type: ignore[attr-defined]
        label = ref.name + (f"[{slot}]" if self.protocol.buffers[buf].slots is not None else "")  # type: ignore[attr-defined]
        return (SPACE_DATA, TMAP_CTA, buf, slot), label

    @staticmethod
    def _tm_of(w, key: tuple) -> list[tuple]:
        return [r for r in w.records if r[:4] == key]

    def _tm_unordered(self, r: tuple, lanes: int) -> bool:
        return (r[R_KNOWN] & lanes) != lanes

    def tm_replace(self, w, p, proc, op: ir.TensormapReplace, ins, env, ctx, lanes) -> bool:
        """`tensormap.replace T`: SV606 unless every copy that read T and every earlier rewrite of
        it are known complete to these lanes; then the rewrite is T's only record."""
        key, label = self._tm_key(op.map, env, ctx)
        for r in self._tm_of(w, key):
            if r[R_FLAGS] & F_TM_ACQ or not self._tm_unordered(r, lanes):
                if r[R_KIND] == READ and r[R_FLAGS] & F_INFLIGHT:  # known complete only through a bulk wait
                    self.assume.used.add(BULK_WAIT_MAP_READS)  # type: ignore[attr-defined]
                continue
            if r[R_KIND] == READ:
                how = " (still in flight)" if r[R_FLAGS] & F_INFLIGHT else ""
                raise Violation(
                    "SV606", f"tensor map `{label}` rewritten by {self.proc_label(p)} while the TMA copy issued at "  # type: ignore[attr-defined]
                    f"line {r[R_LINE]} may still read it{how}: nothing orders the copy's completion before the "
                    "rewrite (the tensormap proxy reads the map until the copy completes)",
                    op.span, related=((r[R_LINE], "the copy that reads the map"),), procs=(p, r[R_OWNER]))
            raise Violation(
                "SV606", f"tensor map `{label}` rewritten by {self.proc_label(p)} unordered with its rewrite at "  # type: ignore[attr-defined]
                f"line {r[R_LINE]} by {self.proc_label(r[R_OWNER])}",  # type: ignore[attr-defined]
                op.span, related=((r[R_LINE], "the other rewrite"),), procs=(p, r[R_OWNER]))
        # Every record of T is ordered before this rewrite, so before whatever is ordered after it: a
        # later replace or copy that passes against this record would pass against them.
        part = self._part(p, ins)  # type: ignore[attr-defined]
        known = lanes if part == LEADER else self.holders.lanes(p)  # type: ignore[attr-defined]
        rec = (*key, WRITE, p, part, op.span.line, 0, 1, -1, WHOLE, 0, known)
        w.records = (*(r for r in w.records if r[:4] != key), rec)
        return True

    def tm_fence(self, w, p, proc, op: ir.TensormapFence, ins, env, ctx, lanes) -> bool:
        """The release half: rewrites these lanes know become released to the tensormap proxy for the
        holders that know them (R_AKNOWN). The acquire half: a rewrite of the named map released to
        the fencing lanes is acquired by them (a marker record)."""
        part = self._part(p, ins)  # type: ignore[attr-defined]
        fenced = fenced_holders(self.holders, p, part, lanes)  # type: ignore[attr-defined]
        narrow = op.scope in _NARROW
        records = list(w.records)
        if op.sem == "release":
            for i, r in enumerate(records):
                if r[1] == TMAP_CTA and r[R_KIND] == WRITE and r[R_KNOWN] & fenced & ~r[R_AKNOWN]:
                    flags = r[R_FLAGS] | (F_TM_NARROW if narrow else 0)
                    records[i] = (*r[:R_FLAGS], flags, *r[R_FLAGS + 1:R_AKNOWN], r[R_AKNOWN] | (r[R_KNOWN] & fenced),
                                  r[R_KNOWN])
            w.records = tuple(records)
            return True
        assert op.map is not None
        key, _ = self._tm_key(op.map, env, ctx)
        for r in self._tm_of(w, key):
            if r[R_KIND] != WRITE:
                continue
            if (narrow or r[R_FLAGS] & F_TM_NARROW) and self.procs[r[R_OWNER]].cta != proc.cta:  # type: ignore[attr-defined]
                continue
            gain = r[R_AKNOWN] & fenced
            if gain:
                old = [m for m in records if m[:4] == key and m[R_FLAGS] & F_TM_ACQ and m[R_OWNER] == p]
                have = old[0][R_KNOWN] if old else 0
                records = [m for m in records if m not in old]
                records.append((*key, READ, p, part, op.span.line, F_TM_ACQ, 1, -1, WHOLE, 0, have | gain))
        w.records = tuple(records)
        return True

    def tm_copy(self, w, p, proc, op: ir.TmaLoad, ins, env, ctx, lanes) -> bool:
        """A TMA copy that reads map T: SV606 if T's latest rewrite is not ordered before these lanes,
        SV607 if it is but was not acquired (after a release) by a thread of this CTA whose acquire is
        ordered before these lanes; then the copy's read of T, in flight until the copy completes."""
        key, label = self._tm_key(op.tmap, env, ctx)  # type: ignore[arg-type]
        mine = self._tm_of(w, key)
        for r in mine:
            if r[R_KIND] != WRITE:
                continue
            if self._tm_unordered(r, lanes):
                raise Violation(
                    "SV606", f"TMA copy by {self.proc_label(p)} reads tensor map `{label}`, whose rewrite at line "  # type: ignore[attr-defined]
                    f"{r[R_LINE]} by {self.proc_label(r[R_OWNER])} is not ordered before it: the tensormap "  # type: ignore[attr-defined]
                    "proxy's read races with the generic write",
                    op.span, related=((r[R_LINE], "the rewrite"),), procs=(p, r[R_OWNER]))
            if not any(m[R_FLAGS] & F_TM_ACQ and (m[R_KNOWN] & lanes) == lanes
                       and self.procs[m[R_OWNER]].cta == proc.cta for m in mine):  # type: ignore[attr-defined]
                raise Violation(
                    "SV607", f"TMA copy by {self.proc_label(p)} reads tensor map `{label}` rewritten at line "  # type: ignore[attr-defined]
                    f"{r[R_LINE]} without the tensormap proxy fences between them: the copy may use the stale "
                    "map (PTX: the rewrite needs `fence.proxy.tensormap::generic.release` after it and "
                    "`fence.proxy.tensormap::generic.acquire` in this CTA before the copy, ordered by "
                    "synchronization between them)",
                    op.span, related=((r[R_LINE], "the rewrite"),), procs=(p,))
        before = len(w.agents)
        AsyncAgentOps.op_tma_load(self, w, p, proc, op, ins, env, ctx, lanes)  # type: ignore[arg-type]
        part = self._part(p, ins)  # type: ignore[attr-defined]
        # in the thread's open bulk group under the bulk-group reading (module docstring); some lanes' copies
        # (a lane guard) are in no group: only their completion lands them
        grp = NUNITS * w.procs[p][GROUP_FIELDS[UNIT_BULK]] + UNIT_BULK \
            if self.assume.bulk_wait_map_reads and not lane_groups.lane_group_part(part) else -1  # type: ignore[attr-defined]
        reads = tuple((*key, READ, p, part, op.span.line, F_ASYNC | F_INFLIGHT, 1, grp, WHOLE, 0, 0)
                      for _ in range(len(w.agents) - before))
        w.records = self._tm_subsume(w.records, key) + reads
        return True

    @staticmethod
    def _tm_subsume(records: tuple, key: tuple) -> tuple:
        """Drop a landed copy-read of ``key`` known to every holder that another landed one is known to:
        a rewrite that passes against the other passes against it (keeps loops finite)."""
        landed = [r for r in records if r[:4] == key and r[R_KIND] == READ and r[R_FLAGS] & F_ASYNC
                  and not r[R_FLAGS] & F_INFLIGHT]
        if len(landed) < 2:
            return records
        keep: list[tuple] = []
        for r in sorted(landed, key=lambda r: (r[R_KNOWN].bit_count(), r)):  # the least known first
            if not any(s[R_KNOWN] & ~r[R_KNOWN] == 0 for s in keep):
                keep.append(r)
        return tuple(r for r in records if r not in landed) + tuple(keep)

    def tm_land(self, w, issuer: int, line: int, known: int) -> None:
        """A copy completes (async_agents._complete_tma): its read of its map, if it names one, lands,
        known to ``known`` (the completing phase of its barrier) and to whoever a bulk wait already told."""
        records = w.records
        for i, r in enumerate(records):
            if r[1] == TMAP_CTA and r[R_FLAGS] & F_INFLIGHT and r[R_OWNER] == issuer and r[R_LINE] == line:
                # (it stays in its bulk group, if any: a later wait of its thread still retires it)
                landed = (*r[:R_FLAGS], r[R_FLAGS] & ~F_INFLIGHT, *r[R_FLAGS + 1:R_AKNOWN], r[R_AKNOWN] | known,
                          r[R_KNOWN] | known)
                w.records = self._tm_subsume((*records[:i], landed, *records[i + 1:]), r[:4])
                return


def _tma_load(machine, w, p, proc, op: ir.TmaLoad, ins, env, ctx, lanes) -> bool:
    if op.tmap is not None:
        return machine.tm_copy(w, p, proc, op, ins, env, ctx, lanes)
    return AsyncAgentOps.op_tma_load(machine, w, p, proc, op, ins, env, ctx, lanes)


# Registered after async_agents.py's: a copy that names a map comes here, and goes on to its family.
HANDLERS: dict[type, Callable] = {
    ir.TmaLoad: _tma_load,
    ir.TensormapReplace: TensormapOps.tm_replace,
    ir.TensormapFence: TensormapOps.tm_fence,
}

__all__ = ["BULK_WAIT_MAP_READS", "F_TM_ACQ", "HANDLERS", "TMAP_CTA", "TensormapOps", "tensormap_refusal"]
