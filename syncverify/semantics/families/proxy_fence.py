"""The semantics of the async-proxy fences: `fence.proxy.async[.shared::cta|.shared::cluster|.global]`
and its uni-directional halves `fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster`
and `fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster`.

The model checks one direction of proxy crossing: a generic write of a shared-memory slot that an
async-proxy operation (`wgmma.read`, `tma.store`) later reads (SV601). Each record carries, next to
the set of holders ordered after it (R_KNOWN), the set of holders ordered after it through a
generic-to-async proxy fence that covers its slot (R_AKNOWN); the async read checks the latter.

Which writes a fence admits (docs/model.md, "Proxy fences"):

* **Own writes** (program order): the fencing lanes' own earlier generic writes, as before. PTX:
  "A uni-directional proxy ordering from the from-proxykind to the to-proxykind establishes
  ordering between a prior memory access performed via the from-proxykind and a subsequent memory
  access performed via the to-proxykind."
* **Acquired writes** (the fence on the reader's side): a generic write by another thread that
  is already ordered before the fencing lanes (in their R_KNOWN). The fence then lies on the base
  causality path from the write to every later async access of those lanes — the placement PTX's
  proxy-preserved base causality order asks of the alias fence ("there is an alias proxy fence
  along the base causality path from X to Y") and that the fence section gives every proxy
  fence ("Their cross-proxy synchronizing effect composes with other forms of synchronization
  according to the rules of the Memory Consistency Model"). A holder gains it only if every lane
  it stands for executes the fence (fences are per thread): the leader holder when the leader
  lane fences, the other-lanes holder only when the whole process does.
* **State space**: "The memory ordering is limited only to operations performed on objects in
  the state space specified. If no state space is specified, then the memory ordering applies
  on all state spaces." `.shared::cta` covers the executing CTA's own shared memory only — not
  a peer CTA's slot written through DSMEM; `.shared::cluster` covers every CTA's shared memory
  of the cluster; `.global` no slot of the model (every slot is shared memory).
* **The halves**: the release half (`.sync_restrict::shared::cta`: "the effect of the fence only
  applies to operations performed on objects in .shared::cta state space") admits own and
  acquired writes of the executing CTA's slots — a release is cumulative (PTX marks only the
  `::read` form "non-cumulative"). The acquire half (`.sync_restrict::shared::cluster`) is the
  consumer's side of a release/acquire pair (PTX: "A .release proxy fence can form a release
  sequence that synchronizes with an acquire sequence that contains a .acquire proxy fence";
  its example places it after `barrier.cluster.wait.acquire`): it admits acquired writes only.
  Its effect on the fencing thread's own earlier writes would, in this model, travel on through
  that thread's later releases as if the fence were a release, which PTX does not say; they are
  left unfenced (at worst an SV601 a bidirectional fence or the release half would remove).
* **cp.async copies** (non-bulk `cp.async`, "treated as a weak memory operation performed in the
  generic proxy": state.F_GENERIC) are generic writes like any other, fenced from where the fencing
  lanes saw them complete (docs/model.md, "cp.async and the async proxy"): their record is ordered
  before nobody until a group wait or the arrive-on's phase retires it, so a fence issued before
  that admits nothing. An own copy of more lanes than fence is admitted, as an acquired write,
  once a syncwarp after the waits ordered every lane's part before the fencing lanes
  (F_WARPSYNCED).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import ir
from ...z3_lazy import z3
from ..program import part_lanes
from ..state import (
    F_GENERIC,
    F_WARPSYNCED,
    FULL,
    LEADER,
    R_AKNOWN,
    R_CTA,
    R_FLAGS,
    R_KIND,
    R_KNOWN,
    R_OWNER,
    R_PART,
    R_SPACE,
    SPACE_DATA,
    TMAP_CTA,
    WRITE,
    generic_proxy_write,
)
from .encoding import DATA

if TYPE_CHECKING:
    from ..program import Process
    from ..state import Holders
    from .encoding.events import Event
    from .encoding.layout import Encoding


@dataclass(frozen=True, slots=True)
class ProxyFenceRule:
    """What one proxy fence admits into the async proxy: ``own`` — the fencing lanes' own earlier
    generic writes; ``acquired`` — generic writes of other processes already ordered before the
    fencing lanes; ``space`` — the state space whose slots it covers."""

    own: bool
    acquired: bool
    space: str


def rule(op: ir.Fence) -> ProxyFenceRule:
    """The one definition of what each form of `fence.proxy.async` orders (module docstring)."""
    if op.sem == "release":
        return ProxyFenceRule(True, True, "shared::cta")
    if op.sem == "acquire":
        return ProxyFenceRule(False, True, "shared::cluster")
    return ProxyFenceRule(True, True, op.space)


def covers(space: str, slot_cta: int, own_cta: int) -> bool:
    """Does a fence of state space ``space`` executed in CTA ``own_cta`` cover a slot of CTA ``slot_cta``?"""
    if space in ("all", "shared::cluster"):
        return True
    if space == "shared::cta":
        return slot_cta == own_cta
    return False  # .global: the model's slots are all shared memory


def fenced_holders(holders: Holders, p: int, part: int, lanes: int) -> int:
    """The holders of process p every lane of which executes the fence (``lanes``: the executing
    lanes' holder mask): the leader holder when the leader lane fences, the other-lanes holder
    only when every lane of the process does."""
    return lanes if part == FULL else lanes & holders.leader(p)


def ptx_text(op: ir.Fence) -> str:
    """The PTX instruction the CUDA emitter writes for a proxy fence."""
    if op.sem == "release":
        return "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;"
    if op.sem == "acquire":
        return "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;"
    return "fence.proxy.async;" if op.space == "all" else f"fence.proxy.async.{op.space};"


def apply(records: tuple, holders: Holders, p: int, proc: Process, part: int, lanes: int,
          op: ir.Fence) -> tuple:
    """Machine.op_fence for a proxy fence: the records it admits become async-known (R_AKNOWN)
    by the holders that know them — own writes by the whole process's holders (as each lane
    knows its own part), acquired ones by the fenced holders. Copies the tuple only on a change."""
    how = rule(op)
    mine = part_lanes(proc, part)
    own_mask = holders.proc_mask(p)
    fenced = fenced_holders(holders, p, part, lanes)
    out = None
    for i, r in enumerate(records):
        if r[R_SPACE] != SPACE_DATA or r[R_KIND] != WRITE or not generic_proxy_write(r[R_FLAGS]) or \
                r[R_CTA] == TMAP_CTA or not covers(how.space, r[R_CTA], proc.cta):  # (tensor maps: their own fences)
            continue
        if r[R_OWNER] == p and not part_lanes(proc, r[R_PART]) & ~mine:
            if not how.own:
                continue
            gain = r[R_KNOWN] & own_mask
        elif r[R_OWNER] == p and not (r[R_FLAGS] & F_GENERIC and r[R_FLAGS] & F_WARPSYNCED):
            continue  # other lanes' own writes (a copy: until a syncwarp after its waits)
        else:
            if not how.acquired:
                continue
            gain = r[R_KNOWN] & fenced
        if gain & ~r[R_AKNOWN]:
            if out is None:
                out = list(records)
            out[i] = (*r[:R_AKNOWN], r[R_AKNOWN] | gain, r[R_KNOWN])
    return records if out is None else tuple(out)


def encode(enc: Encoding, w: Any, e: Event) -> None:
    """bmc (AsyncAgentEncoding.ev_fence): apply()'s update of the async-side knowledge, with the
    records it admits chosen statically (own writes by both holders, acquired ones by the fenced
    holders, each only where the holder knows the write)."""
    p, op = e.proc, e.op
    proc = enc.machine.procs[p]
    how = rule(op)
    mine = part_lanes(proc, e.part)
    syncs = [x.index for x in enc.events[p][:e.index] if isinstance(x.op, ir.Syncwarp)]
    own, acquired = [], []
    for r, rec in enumerate(enc.records):
        if rec.space != DATA or rec.kind != 1 or (rec.is_async and not rec.generic) or \
                not covers(how.space, rec.key[0], e.own):
            continue
        if rec.owner == p and not part_lanes(proc, rec.part) & ~mine:
            if how.own:
                own.append(r)
        elif rec.owner == p:
            # another lanes' copy of this process: acquired once a syncwarp follows the wait that
            # retired it lane by lane (program order stands for F_WARPSYNCED)
            if how.acquired and rec.generic and any(i > enc.lanewise.get(r, e.index) for i in syncs):
                acquired.append(r)
        elif how.acquired:
            acquired.append(r)
    own_mask, acq_mask = enc._mask(own), enc._mask(acquired)
    fenced = {enc.leader(p)} if mine & part_lanes(proc, LEADER) else set()
    if e.part == FULL:
        fenced.add(enc.lanes_holder(p))
    for h in (enc.leader(p), enc.lanes_holder(p)):
        mask = own_mask | (acq_mask if h in fenced else 0)
        if mask:
            w["A", h] = w["A", h] | (w["K", h] & z3.BitVecVal(mask, enc.R))


def promela(op: ir.Fence, cta: int, part: int, lanes: str, spc: int, nkeys: int) -> list[str]:
    """The Promela export's step for a proxy fence (its C `fence_proxy`, export/promela/fences.py): the
    keys of the slots the state space covers (``spc`` slots per CTA, CTA-major), whether own
    writes count, and the holders that gain acquired writes (``lanes``: the executing lanes'
    holder bits, a Promela expression)."""
    how = rule(op)
    if how.space == "global":
        return []  # no slot of the model is in global memory
    lo, hi = (cta * spc, (cta + 1) * spc) if how.space == "shared::cta" else (0, nkeys)
    fenced = "0" if not how.acquired else lanes if part == FULL else f"(lb & {lanes})"
    return [f"_a = lw; _b = lb | wb; _c = {fenced}; "
            f"c_code {{ fence_proxy({{me}}, {part}, _a, _b, _c, {lo}, {hi}, {int(how.own)}); }};"]
