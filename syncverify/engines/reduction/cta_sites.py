"""Where an operation acts: the objects it touches, each with the CTA it lies in, for the persistent set
of one CTA's steps in a cluster (cta_local.py; docs/model.md, "Steps of one CTA").

A *site* is (CTA, key): the key of cta_local.py (kind, name, index) in CTA ``cta``, or in every CTA of
the cluster (``ALL_CTAS``) where the target cannot be worked out from the process's context alone (a
rank or a multicast mask read from a loop or `let` variable). Besides the objects of the model's
state a site may name:

* ``ALIVE`` of CTA d: the operation (or the copy or commit in flight) reads whether CTA d has exited
  (a remote access or arrive, a landing in d: SV404), and d's last exit checks it. Every operation
  that reaches a CTA other than its own touches ALIVE there.
* ``CLUSTER``: the cluster barrier, an object of every CTA (its expected count is the threads of the
  cluster that have not exited, so an exit anywhere touches it).
* the queues of one process: ``("copyq", "", p)`` the bulk copies p has in flight (a new copy takes a
  snapshot slot that the landing of an earlier one frees: families/copy_causality.py),
  ``("cpq", "", p)`` its `cp.async.mbarrier.arrive`s (numbered by those in flight), ``("tcq", "", p)``
  its tcgen05 operations and commits (a commit's tag is numbered by those in flight, and a landing
  renumbers them: families/tcgen05.py).
* ``TMEM_ALLOC``: the tensor-memory columns, relinquish mark and cta_group 2 rendezvous of a CTA
  (state.tmem; a step of a held process never changes them, cta_local._keeps_to).
* ``("tmem", "*", None)``: every tensor-memory region of the CTA (a `tcgen05.wait` completes the
  thread's loads and stores of any region; a `tmem.dealloc` checks every region).

The semantics of each operation (families/) says which CTAs it acts on: a multicast's mask
(async_agents.multicast_dests), a `cta_group 2` copy signalling the pair leader's barrier, a
`cta_group 2` mma reading and writing both CTAs of the pair (tcgen05._pair_ctas), a remote operation's
target (lifecycle._target_cta). The tables here over-approximate them: a bad rank or mask, which the
step reports (SV405), stands for every CTA."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from ...expr import Context, EvalError, evaluate
from .cta_keys import ANY, Key, _ref, op_keys, reaches_peer

if TYPE_CHECKING:
    from ...semantics.machine import Machine

ALL_CTAS = -1
Site = tuple[int, Key]
ALIVE: Key = ("alive", "", None)
CLUSTER: Key = ("cluster", "", None)
TMEM_ALLOC: Key = ("tmemalloc", "", None)
EVERY_TMEM: Key = ("tmem", "*", None)


def _rank(expr: ir.Expr, ctx: Context) -> int:
    """A target CTA's rank where the context alone gives it, else ALL_CTAS."""
    try:
        return evaluate(expr, {}, ctx)
    except EvalError:
        return ALL_CTAS


def _dests(machine: Machine, own: int, mask: ir.Expr | None, ctx: Context) -> list[int]:
    """The CTAs a multicast mask names (the executing one without a mask), or [ALL_CTAS]."""
    if mask is None:
        return [own]
    try:
        value = evaluate(mask, {}, ctx)
    except EvalError:
        return [ALL_CTAS]
    named = [c for c in range(machine.ncta) if value >> c & 1]
    return named if 0 < value < 1 << machine.ncta else [ALL_CTAS]


def _pair(own: int, group: int) -> list[int]:
    return [own] if group == 1 else [own, own ^ 1]


def _leader(cta: int, group: int) -> int:
    return cta if cta == ALL_CTAS or group == 1 else cta & ~1


def _tc_ref(ref: ir.Ref, ctx: Context) -> Key:
    return _ref("buf" if ref.kind == "buffer" else "tmem", ref, ctx)


def op_sites(machine: Machine, p: int, op: object) -> frozenset[Site]:
    """The sites of one operation of process p (module docstring): its own CTA's keys (cta_keys.op_keys)
    for an operation of its own CTA, the targets of a remote, multicast, 2-SM or cluster operation, and
    the queues and tensor memory of the tcgen05 operations."""
    own = machine.procs[p].cta
    ctx = machine.ctx[p]
    out: set[Site] = set()
    if isinstance(op, ir.ClusterArrive | ir.ClusterWait):
        out.add((ALL_CTAS, CLUSTER))
    elif isinstance(op, ir.MbarArrive | ir.MbarTx) and op.remote is not None:
        key = ANY if machine.protocol.mbarrier(op.bar.name).storage is not None else _ref("mb", op.bar, ctx)
        out.add((_rank(op.remote, ctx), key))
    elif isinstance(op, ir.Access) and op.remote is not None:
        out.add((_rank(op.remote, ctx), _ref("buf", op.buf, ctx)))
    elif isinstance(op, ir.TmaLoad):
        for d in _dests(machine, own, op.multicast, ctx):
            out.add((d, _ref("buf", op.buf, ctx)))
            out.add((_leader(d, op.cta_group), _ref("mb", op.bar, ctx)))
        out.add((own, ("copyq", "", p)))
    elif isinstance(op, ir.UmmaCommit):
        out.update((d, _ref("mb", op.bar, ctx)) for d in _dests(machine, own, op.multicast, ctx))
        out.add((own, ("tcq", "", p)))
    elif isinstance(op, ir.TcMma):
        for d in _pair(own, op.cta_group):
            out.update((d, _tc_ref(ref, ctx)) for ref in (*op.operands, op.acc))
        out.add((own, ("tcq", "", p)))
    elif isinstance(op, ir.TmemAlloc | ir.TmemRelinquish):
        out.update((d, TMEM_ALLOC) for d in _pair(own, op.cta_group))
        if isinstance(op, ir.TmemAlloc) and op.dealloc:
            out.add((own, EVERY_TMEM))
    elif isinstance(op, ir.CpAsyncArrive):
        out.update((own, k) for k in op_keys(machine, p, op))
        out.add((own, ("cpq", "", p)))
    elif isinstance(op, ir.Fence) and op.space == "shared::cluster":
        pass  # what it changes is its own process's proxy knowledge bits (families/proxy_fence.py)
    elif reaches_peer(op):
        out.add((ALL_CTAS, ANY))  # (every operation that reaches a peer has a case above)
    else:
        out.update((own, k) for k in op_keys(machine, p, op))
    # (the cluster barrier asks no CTA whether it has exited: its count does, which CLUSTER stands for)
    out.update({(d, ALIVE) for d, key in out if d != own and key != CLUSTER})
    return frozenset(out)


def agent_sites(machine: Machine, agent: tuple, mma_sites: list[frozenset[Site]]) -> frozenset[Site]:
    """The sites a copy or commit in flight touches when it lands (async_agents.step_agent): a bulk copy
    its slot and barrier; a `cp.async.mbarrier.arrive` its barrier; a tcgen05 commit its barrier and
    the operands and accumulators of its thread's mma/cp, whose records it completes (``mma_sites``:
    every TcMma site of the issuing process's program). Each also its issuer's queue, and ALIVE of every
    CTA it lands in (SV404)."""
    from ...semantics.state import AG_TMA, AG_UMMA

    kind, target, buf, slot, m, issuer = agent[0], agent[1], agent[2], agent[3], agent[4], agent[6]
    bar_cta, name, i = machine.mb_names[m]
    out: set[Site] = {(bar_cta, ("mb", name, i)), (bar_cta, ALIVE), (target, ALIVE)}
    own = machine.procs[issuer].cta
    if kind == AG_TMA:
        out.add((target, ("buf", machine.protocol.buffers[buf].name, slot)))
        out.add((own, ("copyq", "", issuer)))
    elif kind == AG_UMMA:
        out.update(mma_sites[issuer])
        out.add((own, ("tcq", "", issuer)))
    else:
        out.add((own, ("cpq", "", issuer)))
    return frozenset(out)


__all__ = ["ALIVE", "ALL_CTAS", "CLUSTER", "EVERY_TMEM", "TMEM_ALLOC", "Site", "agent_sites", "op_sites"]
