"""Cluster launch control (CLC): the persistent tile loop of CUTLASS's sm100 scheduler, from PTX.

`clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes[.multicast::cluster::all].b128
[resp], [bar]` asks the hardware to cancel a cluster that has not started; it writes an opaque 16-byte
response into `resp` asynchronously and performs a complete-tx of 16 bytes on `bar` when done (PTX ISA,
"clusterlaunchcontrol.try_cancel"). It is the language's `clc.try_cancel RESP -> BAR` (docs/language.md
§3.7): a 16-byte asynchronous write with complete_tx, like a 16-byte `tma.load`. With
`.multicast::cluster::all` the response is written into every CTA of the cluster; with a one-CTA cluster
that is the issuing CTA alone, and a larger cluster is refused.

The response is read with `ld.shared.b128` and decoded with `clusterlaunchcontrol.query_cancel.is_canceled`
(did the request cancel a cluster: another tile to run) and `query_cancel.get_first_ctaid` (which one).
Whether a request succeeds is decided by the hardware at run time: a CTA runs its own tile and then as many
tiles as its requests cancel, between none and every other cluster of the grid, and the first failed
response ends its loop (issuing a request after observing a failure is undefined behaviour, PTX ISA). That
is the language's dynamic count, `choose per cta CLC_RESPONSES in 1..N+1` with N the clusters of the grid:
extraction runs the cluster once for each value R, in which the CTA's k-th response (k = 0, 1, ...) says
"canceled" exactly when k < R - 1, and writes what differs between the values under `if CLC_RESPONSES == R`.
The ctaid a response names is not known (any cluster not yet started): the registers it writes are unknown,
so a branch that synchronizes on them is refused as any branch on an unknown value is.

Which response a read sees is the one the model gives it only if the reads are ordered as the requests:
a warp's k-th query must decode a register loaded (`ld.shared.b128`, in the same straight-line code) from
the slot the CTA's k-th `try_cancel` wrote, else extraction refuses at the query. That the load comes after
the request completed and before the next request into the slot is issued is what the check then decides:
a load that is not ordered after the wait on the barrier, or a slot released before its response is read,
races with the asynchronous write (SV302), as in specs/cutlass_sm100_clc_persistent_early_release.sync.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from .access import shared_target
from .launch import WARP, Event, Launch, Memory
from .parse import Function, Instr, Module, Name, PtxError, operand_registers
from .values import UNKNOWN

if TYPE_CHECKING:
    from .globalcomm import GlobalAccesses
    from .warp import WarpState

CHOOSE = "CLC_RESPONSES"
RESPONSE_BYTES = 16  # PTX ISA: "a naturally aligned 16-byte wide shared memory location"
_OPCODE = "clusterlaunchcontrol."
_MAX_SCAN = 16  # instructions between a query and the load of its response (CUTLASS: 1 to 3)


@dataclass(frozen=True)
class WarpClc:
    """What one warp did with CLC, as state that a probe's outcomes copy and merge (probe.py): the queries
    each lane has decoded, the requests the warp issued (their slots), and each decoded response (its index
    among the warp's, the slot it was loaded from, the query)."""

    queries: tuple[int, ...] = (0,) * WARP
    issued: tuple[tuple[tuple[int, int], Instr], ...] = ()
    decoded: tuple[tuple[int, tuple[int, int], Instr], ...] = ()


NONE = WarpClc()


@dataclass
class _Book:
    """The requests and decoded responses of the warps of one cluster run, by CTA rank (collected as each
    warp ends: `collect`)."""

    issued: dict[int, list[tuple[tuple[int, int], Instr]]] = field(default_factory=dict)
    decoded: list[tuple[int, int, int, tuple[int, int], Instr]] = field(default_factory=list)


_BOOKS: weakref.WeakKeyDictionary[Memory, _Book] = weakref.WeakKeyDictionary()


def collect(mem: Memory, run: WarpState) -> None:
    """Add a warp's requests and responses to its cluster's record, once it has run to its end."""
    book = _BOOKS.get(mem)
    if book is None:
        book = _BOOKS[mem] = _Book()
    book.issued.setdefault(run.rank, []).extend(run.clc.issued)
    book.decoded += [(run.rank, run.warp, k, slot, ins) for k, slot, ins in run.clc.decoded]


def merge(into: WarpState, states: list[WarpState]) -> None:
    """After a probe's outcomes join: they must have issued and decoded alike (a response decoded on one
    outcome only would leave the count of the next one undecided)."""
    first = states[0].clc
    if any(s.clc != first for s in states[1:]):
        ins = into.cfg.body[into.pc]
        raise into.refuse(ins, "the outcomes of the probe before this point issue or decode cluster launch "
                          "control responses differently; which response a later query decodes is not modelled")
    into.clc = first


def forget(mem: Memory) -> None:
    """Start the cluster's record afresh (run_cluster runs its warps again after a tensor-memory retry)."""
    _BOOKS.pop(mem, None)


def uses_clc(mod: Module) -> bool:
    return _OPCODE in mod.text


def execute(run: WarpState, ins: Instr, lanes: int) -> bool:
    """`clusterlaunchcontrol.*`: the request as an event, the queries as values; any other form refused."""
    op = ins.opcode
    if op.startswith(_OPCODE + "try_cancel"):
        _try_cancel(run, ins, lanes)
    elif op.startswith(_OPCODE + "query_cancel.is_canceled"):
        _is_canceled(run, ins, lanes)
    elif op.startswith(_OPCODE + "query_cancel.get_first_ctaid"):
        _response(run, ins, lanes)  # the response must be a loaded one; which cluster it names is not known
        for lane in range(WARP):
            if lanes >> lane & 1:
                run.write(ins.operands[0], lane, UNKNOWN)
    else:
        raise run.refuse(ins, f"`{op}` is not modelled")
    return True


def _try_cancel(run: WarpState, ins: Instr, lanes: int) -> None:
    mods = ins.mods
    if "async" not in mods or "mbarrier::complete_tx::bytes" not in mods or len(ins.operands) != 2:
        raise run.refuse(ins, f"`{ins.opcode}`: only the asynchronous form completing on an mbarrier is modelled")
    if "multicast::cluster::all" in mods and run.launch.ctas > 1:
        raise run.refuse(ins, f"`{ins.opcode}` writes the response into each of the cluster's {run.launch.ctas} "
                         "CTAs and signals each one's barrier; the multicast form is modelled for one-CTA "
                         "clusters only")
    space = "cta" if "shared::cta" in mods else "generic"
    args: set[tuple[object, ...]] = set()
    for lane in range(WARP):
        if lanes >> lane & 1:
            dst = shared_target(run.address(ins.operands[0], lane), space, run.rank)
            bar = shared_target(run.address(ins.operands[1], lane), space, run.rank)
            if dst is None or bar is None:
                raise run.refuse(ins, "the response or the mbarrier of this try_cancel is not a known address "
                                 "in this CTA's shared memory")
            args.add((dst, RESPONSE_BYTES, bar, -1))
    if len(args) != 1:
        raise run.refuse(ins, "the lanes of this try_cancel issue different requests; each lane's request is "
                         "not modelled (CUTLASS issues it from one elected lane)")
    if lanes & (lanes - 1):
        raise run.refuse(ins, "more than one lane issues this try_cancel: each lane's request is one of its own "
                         "(one elected lane issues it in CUTLASS)")
    (a,) = args
    issued = run.clc.issued
    limit = run.launch.clc_responses
    if limit is not None and len(issued) >= limit:
        raise run.refuse(ins, f"this warp issues its request {len(issued) + 1} after the {limit} that this "
                         f"extraction's {CHOOSE} = {limit} gives its CTA, the last of which fails; a request "
                         "issued after a failed response was observed is undefined behaviour (PTX ISA)")
    run.clc = replace(run.clc, issued=(*issued, (a[0], ins)))  # type: ignore[arg-type]
    run.events.append(Event("clc_try_cancel", a, lanes, ins))


def _response(run: WarpState, ins: Instr, lanes: int) -> tuple[int, int]:
    """The slot whose response the query decodes: the last write of its register must be an `ld.shared.b128`
    in the straight-line code before the query, whose address registers nothing wrote since; the address is
    read now, for the query's lanes, and must be one known slot of this CTA. For `is_canceled`, no other
    `is_canceled` of that load may lie between (each decodes a response of its own)."""
    reg = ins.operands[1]
    if not isinstance(reg, Name):
        raise run.refuse(ins, "the response a query decodes is not a register")
    body, labels = run.cfg.body, set(run.fn.labels.values())
    at, written = run.pc - 1, set()
    load: Instr | None = None
    for _ in range(_MAX_SCAN):
        if at < 0 or at + 1 in labels:
            break
        cand = body[at]
        if cand.base == "bra":
            break
        if cand.operands and cand.operands[0] == reg:
            load = cand
            break
        if ins.opcode.startswith(_OPCODE + "query_cancel.is_canceled") and cand.opcode == ins.opcode \
                and cand.operands[1:] == ins.operands[1:]:
            raise run.refuse(ins, f"the response `{reg.name}` is decoded by `is_canceled` twice (PTX line "
                             f"{cand.line} and here); each decoding is read as a response of its own")
        written |= operand_registers(cand.operands[0]) if cand.operands else set()
        at -= 1
    if load is None or load.base != "ld" or "b128" not in load.mods \
            or not any(m.startswith("shared") for m in load.mods) or len(load.operands) != 2:
        raise run.refuse(ins, f"the response `{reg.name}` this query decodes is not loaded from shared memory "
                         "(`ld.shared.b128`) in the straight-line code before it; only such a read of the "
                         "response is modelled")
    if operand_registers(load.operands[1]) & written:
        raise run.refuse(ins, f"the address of the response loaded at PTX line {load.line} is overwritten before "
                         "this query")
    space = "cta" if any(m in ("shared", "shared::cta") for m in load.mods) else "cluster"
    slots = {shared_target(run.address(load.operands[1], lane), space, run.rank)
             for lane in range(WARP) if lanes >> lane & 1}
    if len(slots) != 1 or None in slots:
        raise run.refuse(ins, f"the lanes of this query do not all decode one known response slot of this CTA "
                         f"(loaded at PTX line {load.line})")
    (slot,) = slots
    assert slot is not None
    if slot[0] != run.rank:
        raise run.refuse(ins, "a response read from another CTA's shared memory is not modelled")
    return slot


def _is_canceled(run: WarpState, ins: Instr, lanes: int) -> None:
    limit = run.launch.clc_responses
    if limit is None:
        raise run.refuse(ins, "whether this try_cancel response canceled a cluster is decided by the hardware; "
                         f"it is extracted as `choose per cta {CHOOSE}` over the clusters of a known grid "
                         "(give --grid or --cutlass-problem), and not with a loop kept as a loop")
    slot = _response(run, ins, lanes)
    counts = {run.clc.queries[lane] for lane in range(WARP) if lanes >> lane & 1}
    if len(counts) != 1:
        raise run.refuse(ins, "the lanes of this query have decoded different numbers of responses before it; "
                         "which response each decodes is not modelled")
    (k,) = counts
    queries = tuple(q + 1 if lanes >> lane & 1 else q for lane, q in enumerate(run.clc.queries))
    decoded = run.clc.decoded
    if not any(d[0] == k for d in decoded):
        decoded = (*decoded, (k, slot, ins))
    elif next(d[1] for d in decoded if d[0] == k) != slot:
        raise run.refuse(ins, f"lanes of this warp decode their response {k + 1} from different slots")
    run.clc = replace(run.clc, queries=queries, decoded=decoded)
    value = int(k < limit - 1)
    for lane in range(WARP):
        if lanes >> lane & 1:
            run.write(ins.operands[0], lane, value, 1)


def check_order(mod: Module, mem: Memory) -> None:
    """Each warp's k-th response is loaded from the slot its CTA's k-th request wrote; else refused at the
    query (the model gives the k-th read the k-th response)."""
    book = _BOOKS.get(mem)
    if book is None:
        return
    for rank, warp, k, slot, ins in book.decoded:
        issued = book.issued.get(rank, [])
        where = f"cannot extract (warp {warp} of CTA {rank}): "
        if k >= len(issued):
            raise PtxError(mod.path, ins.line, ins.column, where + f"this is the warp's response {k + 1}, and the "
                           f"CTA issues {len(issued)} try_cancel requests before its loop ends")
        if issued[k][0] != slot:
            raise PtxError(mod.path, ins.line, ins.column, where + f"the warp's response {k + 1} is loaded from "
                           f"shared byte {slot[1]}, but the CTA's request {k + 1} (PTX line {issued[k][1].line}) "
                           f"writes byte {issued[k][0][1]}; responses read out of their order are not modelled")


class _Runner(Protocol):
    def __call__(self, mod: Module, fn: Function, launch: Launch,
                 gcomm: GlobalAccesses | None = None) -> dict[tuple[int, int], list[Event]]: ...


def clusters(launch: Launch) -> int:
    """The clusters of the grid: the most tiles one CTA's loop can run (its own and one per other cluster)."""
    assert launch.grid is not None
    g, c = launch.grid, launch.cluster
    return (g[0] // c[0]) * (g[1] // c[1]) * (g[2] // c[2])


def run_all(run_cluster: _Runner, mod: Module, fn: Function, launch: Launch,
            gcomm: GlobalAccesses | None) -> tuple[dict[tuple[int, int], list[Event]], str | None]:
    """The events of the cluster for every count of responses, written as one: what every count does alike
    once, what differs under `if CLC_RESPONSES == R { … }`; with the `choose` line to declare (None when the
    kernel has no CLC instruction or the counts do not differ)."""
    if not uses_clc(mod) or launch.whole_grid:
        return run_cluster(mod, fn, launch, gcomm), None
    if launch.grid is None:
        return run_cluster(mod, fn, launch, gcomm), None  # a query is refused (no count of responses)
    n = clusters(launch)
    runs: list[dict[tuple[int, int], list[Event]]] = []
    for r in range(1, n + 1):
        at = replace(launch, clc_responses=r)
        events = run_cluster(mod, fn, at, gcomm)
        runs.append(events)
    if all(x == runs[0] for x in runs[1:]):
        return runs[0], None
    out = {key: _merge(launch, key[1], [x[key] for x in runs]) for key in runs[0]}
    return out, f"  choose per cta {CHOOSE} in 1..{n + 1};"


def _depth(e: Event) -> int:
    """+1 for an event that opens a block in the written protocol, -1 for one that closes it, else 0."""
    if e.kind == "probe":
        return 1 if e.args[3] == "if" else 0
    if e.kind != "text":
        return 0
    t = str(e.args[0]).strip()
    if t == "}":
        return -1
    if t.endswith("{") and not t.startswith("}"):
        return 1
    return 0


def _balanced_prefix(seqs: list[list[Event]], limit: int) -> int:
    n = 0
    while n < limit and all(s[n] == seqs[0][n] for s in seqs):
        n += 1
    depth, best = 0, 0
    for i in range(n):
        depth += _depth(seqs[0][i])
        if depth == 0:
            best = i + 1
    return best


def _merge(launch: Launch, warp: int, seqs: list[list[Event]]) -> list[Event]:
    if all(s == seqs[0] for s in seqs[1:]):
        return seqs[0]
    p = _balanced_prefix(seqs, min(len(s) for s in seqs))
    rev = [list(reversed(s[p:])) for s in seqs]
    q = 0
    limit = min(len(s) for s in rev)
    while q < limit and all(s[q] == rev[0][q] for s in rev):
        q += 1
    depth, best = 0, 0
    for i in range(q):
        depth -= _depth(rev[0][i])
        if depth == 0:
            best = i + 1
    q = best
    lanes = (1 << max(0, min(WARP, launch.threads - WARP * warp))) - 1
    out = list(seqs[0][:p])
    for r, s in enumerate(seqs, start=1):
        middle = s[p: len(s) - q]
        if not middle:
            continue
        at = middle[0].instr
        out += [Event("text", (f"if {CHOOSE} == {r} {{",), lanes, at), *middle, Event("text", ("}",), lanes, at)]
    return out + list(seqs[0][len(seqs[0]) - q:]) if q else out


def declare(text: str, line: str) -> str:
    """The protocol `text` with the `choose` of the count of responses declared after its `cta threads`."""
    lines = text.split("\n")
    at = next(i for i, t in enumerate(lines) if t.startswith("  cta threads"))
    note = (f"  // {CHOOSE}: the try_cancel responses a CTA reads, the last one failed (the hardware decides how many "
            "of its requests cancel a cluster not yet started: none to all the grid's other clusters)")
    return "\n".join([*lines[: at + 1], note, line, *lines[at + 1:]])
