"""From per-warp events to a protocol: shared-memory objects, statements, roles.

* mbarriers are the 8-byte objects mbarrier instructions name, grouped into
  arrays where they sit at consecutive addresses;
* slots are the byte ranges accesses touch, split at every access boundary and
  merged again where the same accesses touch neighbouring bytes, so two
  accesses share a slot exactly when they share bytes (a copy that spans
  several slots becomes one copy per slot, with its bytes split accordingly);
* each warp is its own role instance (so `elect` means one lane of that warp
  whichever reading of `elect` the checker uses), and warps with the same
  statements form one role array.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

from . import fences, storage, tensormaps, tmem, wgmma_regs
from .lane_operands import LANE_GUARDED
from .lanes import check_crossing, lane_condition, slot_lanes
from .launch import WARP, Event, Launch
from .names import member_symbols, object_names, shared_symbols, split_at_symbols
from .parse import Instr, Module
from .slots import BAR_KINDS, Slots, bars_named, coalesce, every_slots, partition, refuse

# executed by whole warps in the language (elect and lane subsets are refused for them)
_WARP_COLLECTIVE = {"bar_sync", "bar_arrive", "syncwarp", "cluster_arrive", "cluster_wait", "wgmma_read", "rs_read",
                    "wgmma_commit", "wgmma_wait", *tmem.TMEM_COLLECTIVE}


@dataclass(frozen=True)
class Stmt:
    """One line of the protocol body, with the instruction it came from."""

    text: str
    elect: bool
    instr: Instr
    only: tuple[int, ...] = ()  # in a merged warpgroup role: the instances that run it (empty: all)
    retry: Instr | None = None  # a wait: the try_wait its spin tests the phase again with (Event.retry)


@dataclass(frozen=True)
class Role:
    name: str
    first_warp: int
    count: int
    per_cta: tuple[tuple[Stmt, ...], ...]  # statements of CTA rank r


@dataclass(frozen=True)
class Skeleton:
    launch: Launch
    kernel: str
    mbarriers: tuple[tuple[str, int, int], ...]  # name, first offset, count
    slots: tuple[tuple[str, int, int, int, int], ...]  # name, count, bytes, first offset, pieces
    roles: tuple[Role, ...]
    notes: tuple[str, ...]
    # barriers whose bytes are data too (before their init, after their inval): name, slot, byte in the slot
    mb_storage: tuple[tuple[str, str, int], ...] = ()
    tmem: tuple[tuple[str, int, int, int], ...] = ()  # tensor-memory regions: name, count, columns, first
    regs: tuple[str, ...] = ()  # the A-fragment registers of RS-form wgmma, one region per set (wgmma_regs.py)
    # objects named after a member of the dynamic shared memory: name, the member's path in the source
    origins: tuple[tuple[str, str], ...] = ()
    # a grid extracted as one protocol (gridextract.py): its `grid`, `launch`, `flag` and `global` lines
    grid_decls: tuple[str, ...] = ()
    tmaps: tuple[tuple[str, int], ...] = ()  # rewritten tensor maps: name, global address (tensormaps.py)


def guarded_lanes(e: Event, lanes_full: int) -> bool:
    """Is ``e`` written under a lane guard: lanes that gave its instruction their own operands
    (lane_operands.py), or more than one lane but not the whole warp running an operation that the
    language lets some lanes run (docs/language.md §6.1)? One lane alone with the warp's operands is
    the elected lane, as before."""
    if e.per_lane:
        return True
    return e.kind in LANE_GUARDED and e.lanes != lanes_full and e.lanes & (e.lanes - 1) != 0


def build(mod: Module, kernel: str, launch: Launch, events: dict[tuple[int, int], list[Event]],
          every: dict[object, list[Event]] | None = None, source_names: bool = False,
          slots_of_every: Slots | None = None) -> Skeleton:
    """The skeleton of the events; `every` (default: the events themselves) are all the event sequences
    whose protocols must name the same objects: mbarriers and slots are computed over all of them (the
    protocols of the residues of a loop kept as a loop, symextract.py); `slots_of_every`: `every_slots`
    of `every`, where the caller has it."""
    notes: list[str] = []
    bars = bars_named((every or events).values())
    raw = events
    owner: dict[tuple[int, int], list[int]] = {}
    events = {key: coalesce(evs, owner.setdefault(key, [])) for key, evs in events.items()}
    symbols = shared_symbols(mod, kernel, launch) if source_names else []  # the source's names (names.py)
    if every is None:
        slots, slot_of, hosted = partition(mod, events, bars)
    else:
        slots, slot_of, hosted = slots_of_every or every_slots(mod, every)
    host = storage.hosts(hosted, slot_of)  # barrier offset -> (slot, byte in it): bytes that are data too
    mb_arrays = split_at_symbols(storage.runs(sorted(bars), host), symbols)
    members = member_symbols(mod, kernel, launch) if source_names else []
    bar_names, slot_names = object_names(symbols, mb_arrays, [(n, size, start, p) for _, n, size, start, p in slots],
                                         frozenset(m[0] for m in members))
    origins = [(nm, next(p for _, o, n, p in members if o <= at < o + n)) for nm, at in
               [*((bar_names[k], s) for k, (s, _) in enumerate(mb_arrays)),
                *((slot_names[k], sl[3]) for k, sl in enumerate(slots))]
               if any(o <= at < o + n for _, o, n, _ in members)]
    rename = {old: new for (old, *_), new in zip(slots, slot_names, strict=True)}
    slots = [(rename[nm], *rest) for nm, *rest in slots]  # type: ignore[misc]
    slot_of = [(a, b, _renamed(nm, rename)) for a, b, nm in slot_of]
    host = {off: (_renamed(ref, rename), byte) for off, (ref, byte) in host.items()}
    mb_name = {}
    mbarriers = []
    mb_storage = []
    for k, (start, n) in enumerate(mb_arrays):
        name = bar_names[k]
        mbarriers.append((name, start, n))
        if start in host:
            mb_storage.append((name, *host[start]))
        for j in range(n):
            mb_name[start + 8 * j] = f"{name}[{j}]" if n > 1 else name
    regions = tmem.regions(e for evs in (every or events).values() for e in evs)
    ctx = _Ctx(mod, mb_name, slot_of, notes, slots, regions)
    ctx.ranged = tmem.ranged((e for evs in (every or events).values() for e in evs), regions)
    ctx.tmaps = tensormaps.names(e for evs in (every or events).values() for e in evs)

    def side(key: tuple[int, int], i: int, rank: int, byte: int) -> str:
        """How raw event i of warp `key` is written for the slot holding `byte` (lanes.check_crossing)."""
        e = events[key][owner[key][i]]
        full = (1 << max(0, min(WARP, launch.threads - WARP * key[1]))) - 1
        if e.lanes != full and e.lanes & (e.lanes - 1) == 0:
            return "L"  # an elected access: the model's lane 0
        slot = next((n for a, b, n in ctx.slot_of if a <= byte < b), None)
        lanes = 0
        for a, b, n in ctx.slot_of:
            if n == slot:
                lanes |= slot_lanes(e, a, b, rank)
        return "L" if lanes == 1 else "O"

    by_lane = {(key, owner[key][i]) for key, i in check_crossing(mod, raw, side)}
    per_warp: dict[int, list[tuple[Stmt, ...]]] = {}
    nwarps = (launch.threads + WARP - 1) // WARP
    for w in range(nwarps):
        full = (1 << max(0, min(WARP, launch.threads - WARP * w))) - 1
        per_warp[w] = [tuple(ctx.statements(r, events[(r, w)], full, {i for k, i in by_lane if k == (r, w)}))
                       for r in range(launch.ctas)]
    roles: list[Role] = []
    w = 0
    while w < nwarps:
        key = per_warp[w]
        merged = _warpgroup(per_warp, w, nwarps, launch.ctas)
        if merged is not None:
            roles.append(Role(f"w{w}_{w + 3}", w, 4, merged))
            w += 4
            continue
        if not any(key):
            w += 1
            continue
        n = 1
        while w + n < nwarps and _same(per_warp[w + n], key):
            n += 1
        name = f"w{w}" if n == 1 else f"w{w}_{w + n - 1}"
        roles.append(Role(name, w, n, tuple(key)))
        w += n
    return Skeleton(launch, kernel, tuple(mbarriers), tuple(slots), tuple(roles), tuple(dict.fromkeys(notes)),
                    tuple(mb_storage), regions, wgmma_regs.declared(e for evs in events.values() for e in evs),
                    tuple(origins), tmaps=tuple((n, g) for g, n in ctx.tmaps.items()))


def _warpgroup(per_warp: dict[int, list[tuple[Stmt, ...]]], w: int, nwarps: int,
               ctas: int) -> tuple[tuple[Stmt, ...], ...] | None:
    """The four warps of the warpgroup at warp w as one role whose statements they share, when they issue
    wgmma and are not all alike (None otherwise).

    wgmma is .sync.aligned over the warpgroup: the four warps execute the same instructions, which the
    language expresses as one statement run by all four (SV206 otherwise). Where the warps differ -- the
    thread that releases a stage to each CTA of the cluster sits in a different warp -- the statements are
    aligned and the ones some warps lack are written under `if instance == k`. Each warp's own sequence is
    exactly its statements in order (checked), so the role means what the warps executed.
    """
    if w % 4 or w + 4 > nwarps:
        return None
    group = [per_warp[w + j] for j in range(4)]
    if not any(s.text.startswith("wgmma.") for body in group[0] for s in body):
        return None
    if all(_same(g, group[0]) for g in group[1:]):
        return None
    out = []
    for r in range(ctas):
        merged = _align([g[r] for g in group])
        for j in range(4):
            mine = [(s.text, s.elect) for s, who in merged if j in who]
            assert mine == [(s.text, s.elect) for s in group[j][r]], "warpgroup merge lost an order"
        out.append(tuple(replace(s, only=() if len(who) == 4 else tuple(sorted(who))) for s, who in merged))
    return tuple(out)


def _align(bodies: list[tuple[Stmt, ...]]) -> list[tuple[Stmt, set[int]]]:
    """The bodies merged into one sequence, each statement with the bodies that have it; every body's
    statements keep their order (a monotone alignment, matched by text)."""
    merged: list[tuple[Stmt, set[int]]] = [(s, {0}) for s in bodies[0]]
    for j, body in enumerate(bodies[1:], start=1):
        a = [(s.text, s.elect) for s, _w in merged]
        b = [(s.text, s.elect) for s in body]
        out: list[tuple[Stmt, set[int]]] = []
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag == "equal":
                out += [(s, who | {j}) for s, who in merged[i1:i2]]
            else:
                out += merged[i1:i2] + [(s, {j}) for s in body[j1:j2]]
        merged = out
    return merged


def _same(a: list[tuple[Stmt, ...]], b: list[tuple[Stmt, ...]]) -> bool:
    return [[(s.text, s.elect) for s in x] for x in a] == [[(s.text, s.elect) for s in x] for x in b]


def _renamed(name: str, rename: dict[str, str]) -> str:
    """`s0[1]` with `s0` renamed."""
    base, bracket, rest = name.partition("[")
    return rename.get(base, base) + bracket + rest


class _Ctx:
    def __init__(self, mod: Module, mb: dict[int, str], slot_of: list[tuple[int, int, str]], notes: list[str],
                 slots: Sequence[tuple[str, int, int, int, int]] = (),
                 regions: tuple[tuple[str, int, int, int], ...] = ()):
        self.mod, self.mb, self.notes, self.regions = mod, mb, notes, regions
        self.ranged: frozenset[str] = frozenset()  # regions whose loads/stores name their rectangle (tmem.py)
        self.tmaps: dict[int, str] = {}  # rewritten tensor maps: global address -> name (tensormaps.py)
        # slot -> (first byte, bytes) of a slot in one piece: where a lane's region in it starts
        self.piece = {f"{name}[{j}]" if n > 1 else name: (start + j * size, size)
                      for name, n, size, start, pieces in slots if pieces == 1 for j in range(n)}
        self.slot_of = sorted(slot_of)
        self.starts = [a for a, _b, _n in self.slot_of]
        self._slots_in: dict[tuple[int, int], list[tuple[str, int]]] = {}

    def slots_in(self, s: int, t: int) -> list[tuple[str, int]]:
        """The slots that bytes [s, t) touch, each with the number of its bytes in the range (asked once per
        range: a protocol's accesses repeat the loop body's ranges)."""
        hit = self._slots_in.get((s, t))
        if hit is None:
            hit = self._slots_in[(s, t)] = self._find_slots(s, t)
        return list(hit)

    def _find_slots(self, s: int, t: int) -> list[tuple[str, int]]:
        out: dict[str, int] = {}
        j = max(bisect_right(self.starts, s) - 1, 0)
        while j < len(self.slot_of) and self.slot_of[j][0] < t:
            a, b, name = self.slot_of[j]
            if s < b:
                out[name] = out.get(name, 0) + min(b, t) - max(a, s)
            j += 1
        return list(out.items())

    def bar(self, ref: tuple[int, int], own: int) -> str:
        rank, off = ref
        return self.mb[off] + (f" @ {rank}" if rank != own else "")

    def statements(self, own: int, events: list[Event], lanes_full: int,
                   by_lane: AbstractSet[int] = frozenset()) -> list[Stmt]:
        out: list[Stmt] = []
        guarded = [guarded_lanes(e, lanes_full) for e in events]
        single = {e.lanes for e, g in zip(events, guarded, strict=True)
                  if not g and e.lanes & (e.lanes - 1) == 0 and e.lanes != lanes_full}
        if len(single) > 1:
            e = next(x for x in events if x.lanes in single and x.lanes != min(single))
            raise refuse(self.mod, e.instr, "different single lanes of one warp execute synchronization "
                          "operations; the language has no lanes")
        if any(guarded) and single - {1}:
            e = next(x for x, g in zip(events, guarded, strict=True) if g)
            raise refuse(self.mod, e.instr, "some lanes of this warp run this operation under a lane guard, and "
                          "another lane than lane 0 runs the warp's elected operations (written as lane 0, "
                          "`elect`): the two cannot be written together")
        i = 0
        while i < len(events):
            e = events[i]
            if guarded[i]:
                # the groups of lanes of one execution of the instruction: consecutive, with disjoint lanes
                # (the next execution, in a loop, starts again from its first group)
                j, seen = i + 1, e.lanes
                while j < len(events) and e.per_lane and events[j].per_lane and events[j].instr is e.instr \
                        and not events[j].lanes & seen:
                    seen |= events[j].lanes
                    j += 1
                out += [Stmt(text, False, e.instr) for text in self.lane_guarded(own, events[i:j])]
                i = j
                continue
            i += 1
            elect = e.lanes != lanes_full and e.lanes & (e.lanes - 1) == 0
            if e.kind in _WARP_COLLECTIVE and e.lanes != lanes_full:
                raise refuse(self.mod, e.instr, f"{bin(e.lanes).count('1')} of the warp's lanes execute this "
                              "warp-collective barrier; the language counts barrier arrivals a whole warp at a time")
            if not elect and e.lanes != lanes_full:
                if e.kind not in ("read", "write"):
                    raise refuse(self.mod, e.instr, f"{bin(e.lanes).count('1')} of the warp's lanes execute "
                                  "this synchronization operation; the language has whole warps and single "
                                  "elected lanes only")
            if i - 1 in by_lane:
                out += [Stmt(text, False, e.instr) for text in self.lane_by_lane(own, e, lanes_full)]
                continue
            for text in self.render(own, e, None if elect else lanes_full):
                out.append(Stmt(text, elect, e.instr, retry=e.retry))
        return out

    def lane_guarded(self, own: int, evs: list[Event]) -> list[str]:
        """The groups of lanes of one instruction (lane_operands.py), or one lane subset's arrival, tx count
        or TMA load, each under a guard naming exactly its lanes. Single lanes arriving each on the
        barrier of the CTA whose rank is the lane (DeepGEMM's `empty_barrier_arrive`) are one statement,
        `if lane < 2 { arrive … m @ lane; }`, the form docs/language.md §6.1 gives it."""
        if len(evs) > 1 and all(e.kind in BAR_KINDS and e.lanes & (e.lanes - 1) == 0 for e in evs):
            at_lane = [t for e in evs for t in self.render(-1, e)]
            lanes = [e.lanes.bit_length() - 1 for e in evs]
            each = len(at_lane) == len(evs) and all(t.endswith(f" @ {lane};")
                                                    for t, lane in zip(at_lane, lanes, strict=False))
            texts = {t.replace(f" @ {lane};", " @ lane;") for t, lane in zip(at_lane, lanes, strict=False)}
            same = all(e.args[0][1] == evs[0].args[0][1] for e in evs)  # type: ignore[index]
            if each and len(texts) == 1 and same:
                mask = sum(e.lanes for e in evs)
                return [f"if {lane_condition(mask)} {{ {texts.pop()} }}"]
        out = []
        for e in evs:
            for text in self.render(own, e, None):
                out.append(f"if {lane_condition(e.lanes)} {{ {text} }}")
        return out

    def lane_by_lane(self, own: int, e: Event, lanes_full: int) -> list[str]:
        """A read or write whose lanes meet other lanes' bytes (lanes.check_crossing), written as each
        lane's own access: an access by one lane touches exactly its bytes (its region of the slot,
        `bytes A + lane * B..`, when the lanes' ranges are whole words at a constant stride; else one
        guarded statement per lane, of its region, or of the whole slot when its bytes are not one run
        of whole words), which the model keeps apart from every other lane's (lanes_meet_unordered)."""
        per: dict[tuple[str, int], dict[int, list[tuple[int, int] | None]]] = {}
        for lane, rank, s, t in e.footprint:
            for slot, _n in self.slots_in(s, t):
                piece = self.piece.get(slot)
                rng = None if piece is None else (max(s, piece[0]) - piece[0], min(t, piece[0] + piece[1]) - piece[0])
                per.setdefault((slot, rank), {}).setdefault(lane, []).append(rng)
        out = []
        for (slot, rank), by in per.items():
            name = f"{e.kind} {slot}{f' @ {rank}' if rank != own else ''}"
            one = {lane: r[0] for lane, r in by.items() if len(r) == 1 and r[0] is not None
                   and r[0][0] % 4 == 0 and r[0][1] % 4 == 0}
            lanes = sorted(by)
            if len(one) == len(by) and len(lanes) > 1:
                l0, (a0, b0) = lanes[0], one[lanes[0]]
                step = (one[lanes[1]][0] - a0) // (lanes[1] - l0)
                if all(one[lane] == (a0 + (lane - l0) * step, b0 + (lane - l0) * step) for lane in lanes):
                    at = f"(lane - {l0}) * {step}" if l0 else f"lane * {step}"
                    text = f"{name} bytes {a0} + {at}..{b0} + {at};"
                    mask = sum(1 << lane for lane in lanes)
                    out.append(text if mask == lanes_full else f"if {lane_condition(mask)} {{ {text} }}")
                    continue
            for lane in lanes:
                region = f" bytes {one[lane][0]}..{one[lane][1]}" if lane in one else ""
                out.append(f"if lane == {lane} {{ {name}{region}; }}")
        return out

    def per_slot(self, e: Event, off: int, size: int, form: str) -> list[str]:
        """One bulk copy as one statement per slot it covers, each with its share of the bytes."""
        out = []
        for slot, n in self.slots_in(off, off + size):
            if n % 16:
                raise refuse(self.mod, e.instr, f"the copy's part in slot {slot} is {n} bytes, not a multiple "
                              "of 16")
            out.append(form.format(slot=slot, n=n))
        return out

    def render(self, own: int, e: Event, lanes_full: int | None = None) -> list[str]:
        k, a = e.kind, e.args
        if k == "init":
            return [f"init {self.bar(a[0], own)} count {a[1]};"]  # type: ignore[arg-type]
        if k == "inval":
            return [f"inval {self.bar(a[0], own)};"]  # type: ignore[arg-type]
        if k == "wait":
            bar, parity, sem, scope = a
            if bar[0] != own:  # type: ignore[index]
                raise refuse(self.mod, e.instr, "a wait on another CTA's mbarrier")
            q = "" if (sem, scope) == ("acquire", "cta") else f".{sem}.{scope}"
            return [f"wait{q} {self.bar(bar, own)} parity {parity};"]  # type: ignore[arg-type]
        if k in ("arrive", "arrive_drop"):
            bar, count, sem, scope = a
            q = "" if (sem, scope) == ("release", "cta") else f".{sem}.{scope}"
            c = f" count {count}" if count != 1 else ""
            name = "arrive" if k == "arrive" else "arrive_drop"
            target = self.bar(bar, own)  # type: ignore[arg-type]
            base, _, at = target.partition(" @ ")
            return [f"{name}{q} {base}{c}{' @ ' + at if at else ''};"]
        if k in ("arrive_tx", "arrive_drop_tx"):
            bar, tx, sem, scope = a
            q = "" if (sem, scope) == ("release", "cta") else f".{sem}.{scope}"
            name = "arrive.expect_tx" if k == "arrive_tx" else "arrive_drop.expect_tx"
            target = self.bar(bar, own)  # type: ignore[arg-type]
            base, _, at = target.partition(" @ ")
            return [f"{name}{q} {base} bytes {tx}{' @ ' + at if at else ''};"]
        if k in ("expect_tx", "complete_tx"):
            bar, tx = a
            target = self.bar(bar, own)  # type: ignore[arg-type]
            base, _, at = target.partition(" @ ")
            return [f"{k} {base} bytes {tx}{' @ ' + at if at else ''};"]
        if k == "bar_sync":
            bid, count, aligned = a
            if bid == 0 and count is None and aligned:
                return ["syncthreads;"]
            return [f"{'bar' if aligned else 'barrier'}.sync {bid}{'' if count is None else f', {count}'};"]
        if k == "bar_arrive":
            return [f"{'bar' if a[2] else 'barrier'}.arrive {a[0]}, {a[1]};"]
        if k == "syncwarp":
            return ["syncwarp;"]
        if k == "cluster_arrive":
            return ["cluster.arrive.relaxed;" if a[0] else "cluster.arrive;"]
        if k == "cluster_wait":
            return ["cluster.wait;"]
        if k == "fence_proxy":
            return [fences.language_text(*a)]  # type: ignore[arg-type]
        if k == "fence_init":
            return ["fence.mbarrier_init;"]
        if k == "bulk_commit":
            return ["bulk.commit;"]
        if k == "bulk_wait":
            return [f"bulk.wait_read {a[0]};"]
        if k == "wgmma_commit":
            return ["wgmma.commit;"]
        if k == "wgmma_wait":
            return [f"wgmma.wait {a[0]};"]
        if k == "tma_load":
            (drank, off), size, (brank, boff), mcast = a  # type: ignore[misc]
            if drank != own or brank != own:
                raise refuse(self.mod, e.instr, "a bulk copy into another CTA's shared memory, or completing "
                              "on another CTA's mbarrier, has no form in the language")
            m = f" multicast {mcast:#x}" if mcast != -1 else ""  # type: ignore[str-format]
            m += tensormaps.copy_suffix(e, self.tmaps)
            return self.per_slot(e, off, size, "tma.load {slot} bytes {n} -> " + self.mb[boff] + m + ";")  # type: ignore[arg-type]
        if k == "clc_try_cancel":  # a 16-byte tma.load of the response, by the language's name (clc.py)
            (_drank, off), size, (_brank, boff), _m = a  # type: ignore[misc]
            return self.per_slot(e, off, size, "clc.try_cancel {slot} -> " + self.mb[boff] + ";")  # type: ignore[arg-type]
        if k == "tma_store":
            (_rank, off), size = a  # type: ignore[misc]
            return self.per_slot(e, off, size, "tma.store {slot} bytes {n};")  # type: ignore[arg-type]
        if k == "probe":  # a try_wait/test_wait whose result is used (probe.py): `if try_wait …{`, `let T = …;`
            bar, parity, head, form = a
            if bar[0] != own:  # type: ignore[index]
                raise refuse(self.mod, e.instr, "a probe of another CTA's mbarrier")
            test = f"{head} {self.bar(bar, own)} parity {parity}"  # type: ignore[arg-type]
            return [f"if {test} {{" if form == "if" else f"{form} = {test};"]
        if k == "text":  # a line written as it is (the bounds of a loop kept as a loop, symextract.py)
            return [str(a[0])]
        if k == "rs_read":  # an RS-form wgmma's A registers (wgmma_regs.py)
            return [f"wgmma.read {a[0]};"]
        if k == "rs_write":
            return [f"write {a[0]};"]
        if k == "wgmma_read":
            slots = dict.fromkeys(slot for (_r, s, t) in e.ranges for slot, _n in self.slots_in(s, t))
            return [f"wgmma.read {slot};" for slot in slots]
        if k == "tma_load_2sm":  # into this CTA, completing on the pair leader's barrier (same offset)
            (_drank, off), size, (_brank, boff), _m = a  # type: ignore[misc]
            return self.per_slot(e, off, size, "tma.load {slot} bytes {n} -> " + self.mb[boff] + " cta_group 2;")  # type: ignore[arg-type]
        if k in tensormaps.KINDS:
            return tensormaps.render(e, self.tmaps)
        if k in tmem.TMEM_KINDS:
            return tmem.render(e, self.regions, lambda ref: self.bar(ref, own),
                               lambda ev: list(dict.fromkeys(slot for (_r, s, t) in ev.ranges
                                                             for slot, _n in self.slots_in(s, t))),
                               self.ranged)
        if k in ("read", "write"):
            return self.access(own, e, lanes_full)
        raise AssertionError(k)  # pragma: no cover - every event kind is rendered above

    def access(self, own: int, e: Event, lanes_full: int | None) -> list[str]:
        """A read or write, one statement per slot (and CTA) it touches, each for the lanes whose bytes
        lie in that slot (lanes.py): `if lane == 0 { read s0; }` where only lane 0's bytes do. An elected
        access (``lanes_full`` None) is its lane's alone."""
        names: dict[tuple[str, int], int] = {}
        for rank, s, t in e.ranges:
            for slot, _n in self.slots_in(s, t):
                names.setdefault((slot, rank), 0)
        if lanes_full is not None:
            for slot, rank in names:
                for a, b, name in self.slot_of:
                    if name == slot:
                        names[(slot, rank)] |= slot_lanes(e, a, b, rank)
        out = []
        for (slot, rank), lanes in names.items():
            text = f"{e.kind} {slot}{f' @ {rank}' if rank != own else ''};"
            if lanes_full is not None and lanes != lanes_full:
                text = f"if {lane_condition(lanes)} {{ {text} }}"
            out.append(text)
        return out
