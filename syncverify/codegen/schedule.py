"""Expected data: run ONE schedule of the model and record what every read observes.

For a protocol the checker verifies race-free, the write a read observes is
its unique happens-before-last write, the same in every execution; so one
schedule of the model gives the expected stamp of every read, bulk store and
wgmma read, and the stamp every TMA copy carries. The model itself is used as
is (``Machine``): this module only watches the steps it takes.

For a protocol with a race the model stops at the racing step. Then the
schedule is run again with the race check switched off in a private subclass
and with a scheduler that lets readers and copy completions go before writers,
which is the order the protocol intends (a read is due to observe the write
before the overwrite that races with it). Such expectations are marked
``intended`` so that reports do not present them as the model's.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from .. import ir
from ..engines.reduction import successors_of
from ..expr import evaluate
from ..semantics.machine import Machine, StepResult
from ..semantics.state import P_PC, P_VARS, State
from . import regions
from .sites import collect_sites, lane_site_index, site_of_instr

MAX_STEPS = 5_000_000


def stamp(process: int, site: int, occurrence: int, nsites: int) -> int:
    """The 32-bit word a write stores: its writer (process, site) and the occurrence.

    Never 0: 0 is the content of a slot nobody wrote. Mirrored by SV_STAMP in the kernel."""
    writer = (1 + process * nsites + site) & 0x7FFF
    return (writer << 16) | (occurrence & 0xFFFF)


@dataclass
class Schedule:
    """What one schedule of the model observed, keyed by (process, site) and listed by occurrence."""

    reads: dict[tuple[int, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    loads: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    stores: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    # region buffers (codegen/regions.py): the segments each read and bulk store observed, the bytes each
    # region write covered, keyed and listed like `reads`
    segs: dict[tuple[int, int], list[regions.Content]] = field(default_factory=lambda: defaultdict(list))
    store_segs: dict[tuple[int, int], list[regions.Content]] = field(default_factory=lambda: defaultdict(list))
    ranges: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    # per-lane reads (an operand uses `lane`: one read per lane, each of its own slot): per occurrence, the
    # stamp each lane observes (0 for a lane that does not read)
    lane_reads: dict[tuple[int, int], list[list[int]]] = field(default_factory=lambda: defaultdict(list))
    # bytes every TMA copy into a buffer wrote: reads check only what every writer covers
    load_bytes: dict[str, int] = field(default_factory=dict)
    complete: bool = True  # every process ran to its end
    intended: bool = False  # the model reported a race; expectations follow the intended order
    steps: int = 0
    stuck: str = ""  # why the schedule could not run to the end


class _NoRaceCheck(Machine):
    """The model with its race check off: used only to walk past a racing step in intended order."""

    def _conflicts(self, *args, **kwargs) -> None:  # type: ignore[override]
        return None


def _slot(m: Machine, ref: ir.Ref, env: dict, ctx) -> tuple[int, int]:
    decl = m.protocol.buffer(ref.name)
    slot = evaluate(ref.index, env, ctx) if ref.index is not None else 0
    return m.buf_index[ref.name], slot if decl.slots is not None else 0


def _is_write(m: Machine, state: State, res: StepResult) -> bool:
    if res.label[0] != "p":
        return False
    p = res.label[1]
    op = m.programs[p].code[state.procs[p][P_PC]].op
    return isinstance(op, ir.TmaLoad | ir.CpAsync) or (isinstance(op, ir.Access) and op.kind == "write")


def run_schedule(protocol: ir.Protocol, site_of: dict[int, int]) -> Schedule:
    sched = _walk(Machine(protocol), site_of, intended=False, reduce=True)
    if not sched.complete and sched.stuck.startswith("violation"):
        retry = _walk(_NoRaceCheck(protocol), site_of, intended=True, reduce=False)
        if retry.steps > sched.steps:
            return retry
    return sched


def _walk(m: Machine, site_of: dict[int, int], intended: bool, reduce: bool) -> Schedule:
    successors = successors_of(m, reduce)
    nsites = len(site_of)
    out = Schedule(intended=intended)
    occ: Counter[tuple[int, int]] = Counter()
    last: dict[tuple[int, int, int], int] = {}
    inflight: dict[tuple, deque[int]] = defaultdict(deque)
    s = m.initial()
    nprocs = len(m.procs)
    parted = regions.region_buffers(m.protocol)
    lane_sites = lane_site_index(collect_sites(m.protocol))
    while out.steps < MAX_STEPS:
        results = list(successors(s))
        ok = [r for r in results if r.state is not None]
        if intended:
            ok.sort(key=lambda r: _is_write(m, s, r))  # stable: readers and completions first
        if not ok:
            if all(m.done(s, p) for p in range(nprocs)):
                return out
            out.complete = False
            bad = [r.violation for r in results if r.violation is not None]
            out.stuck = (f"violation {bad[0].code} at line {bad[0].span.line if bad[0].span else '?'}" if bad
                         else "deadlock: no process can move")
            return out
        res = ok[0]
        if res.label[0] == "p":
            _observe_process(m, s, res.label[1], (site_of, lane_sites), nsites, occ, last, inflight, out, parted)
        elif res.label[1][0] == 0:  # a bulk copy completes: its write lands now
            a = res.label[1]
            queue = inflight[(a[1], a[2], a[3], a[6], a[7])]
            if queue:
                last[(a[1], a[2], a[3])] = queue.popleft()
        s = res.state
        out.steps += 1
    out.complete = False
    out.stuck = f"step limit {MAX_STEPS} reached"
    return out


def _observe_process(m: Machine, s: State, p: int, sites: tuple[dict, dict], nsites: int,
                     occ: Counter, last: dict, inflight: dict, out: Schedule, parted: frozenset[str]) -> None:
    ins = m.programs[p].code[s.procs[p][P_PC]]
    op = ins.op
    if op is None:
        return
    site, lane_copy = site_of_instr(*sites, op)
    if site is None or (lane_copy and not isinstance(op, ir.Access)):
        return  # per-lane arrivals and tx counts carry no data
    # one lane's copy of a per-lane operation: its occurrence is the kernel's o<site> (every lane of the
    # warp's mask runs each execution of the site once), counted per lane
    key = (p, site, ins.lanes.bit_length() - 1) if lane_copy else (p, site)
    n = occ[key]
    occ[key] += 1
    env = m.env(p, s.procs[p][P_VARS])
    ctx = m.ctx[p]
    cta = m.procs[p].cta
    if isinstance(op, ir.Access):
        if op.remote is not None:
            cta = evaluate(op.remote, env, ctx)
        buf, slot = _slot(m, op.buf, env, ctx)
        if op.buf.name in parted:
            _observe_region(m, p, site, n, nsites, op, (cta, buf, slot), env, ctx, last, out)
        elif op.kind == "write":
            last[(cta, buf, slot)] = stamp(p, site, n, nsites)
        elif lane_copy:
            seen = out.lane_reads[(p, site)]
            while len(seen) <= n:
                seen.append([0] * 32)
            seen[n][ins.lanes.bit_length() - 1] = last.get((cta, buf, slot), 0)
        else:
            out.reads[(p, site)].append(last.get((cta, buf, slot), 0))
    elif isinstance(op, ir.WgmmaRead):
        buf, slot = _slot(m, op.buf, env, ctx)
        out.reads[(p, site)].append(_first(last.get((cta, buf, slot), 0)))
    elif isinstance(op, ir.TmaStore):
        buf, slot = _slot(m, op.buf, env, ctx)
        nbytes = evaluate(op.tx_bytes, env, ctx)
        out.stores[(p, site)].append((_first(last.get((cta, buf, slot), 0)), nbytes))
        if op.buf.name in parted:
            content = _content(last.get((cta, buf, slot), 0), m.protocol.buffer(op.buf.name).bytes)
            out.store_segs[(p, site)].append(regions.view(content, 0, nbytes))
    elif isinstance(op, ir.CpAsync):
        # every executing thread copies its part, together the whole slot (families/cp_async.py); the
        # write is recorded at issue: in a race-free protocol nothing reads the slot before it is retired
        buf, slot = _slot(m, op.buf, env, ctx)
        word = stamp(p, site, n, nsites)
        out.loads[(p, site)].append((word, m.protocol.buffer(op.buf.name).bytes))
        last[(cta, buf, slot)] = word
    elif isinstance(op, ir.TmaLoad):
        buf, slot = _slot(m, op.buf, env, ctx)
        nbytes = evaluate(op.tx_bytes, env, ctx)
        word = stamp(p, site, n, nsites)
        out.loads[(p, site)].append((word, nbytes))
        name = op.buf.name
        out.load_bytes[name] = min(out.load_bytes.get(name, nbytes), nbytes)
        dests = [cta]
        if op.multicast is not None:
            mask = evaluate(op.multicast, env, ctx)
            dests = [c for c in range(m.ncta) if mask >> c & 1]
        for dest in dests:
            for _ in range(ins.threads):
                inflight[(dest, buf, slot, p, op.span.line)].append(word)


def _content(value: int | regions.Content, size: int) -> regions.Content:
    """A slot's content as segments: a whole-slot write (an int stamp) covers every byte."""
    return regions.whole(size, value) if isinstance(value, int) else value


def _first(value: int | regions.Content) -> int:
    return value if isinstance(value, int) else value[0][2]


def _observe_region(m: Machine, p: int, site: int, n: int, nsites: int, op: ir.Access, key: tuple[int, int, int],
                    env: dict, ctx, last: dict, out: Schedule) -> None:
    """An access to a region buffer: its bytes are the model's (Machine._region, Parts.bytes)."""
    size = m.protocol.buffer(op.buf.name).bytes
    lo, hi = m.parts.bytes(m._region(op, key[1], env, ctx), p, size)
    content = _content(last.get(key, 0), size)
    if op.kind == "write":
        last[key] = regions.paint(content, lo, hi, stamp(p, site, n, nsites))
        out.ranges[(p, site)].append((lo, hi))
    else:
        seen = regions.view(content, lo, hi)
        out.reads[(p, site)].append(seen[0][2] if seen else 0)
        out.segs[(p, site)].append(seen)
