"""Symmetry reduction of the bmc encoding: which warps are interchangeable in the unrolled
events (``symmetric_pairs``), and the state with two of them swapped (``swapped``), over which
the solver orders symmetric states (the module docstring of engine.py; docs/engines.md gives the
argument), and what each state component maps to under such a swap (``STATE_COMPONENTS``). A mixin
of layout.Encoding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import z3

from ...semantics import rules
from ...semantics.symmetry import symmetry_groups

if TYPE_CHECKING:
    from ...semantics.families.encoding.events import Event

# Every component of the state (Encoding.fresh), by what the symmetry of two processes maps it
# to (Encoding.swapped): "process" components end in a process index (the other process's own),
# "holder" components are knowledge bit-vectors of one holder (the swapped holder's, bits
# swapped), "records" components are sets of records (bits swapped), "record" components belong
# to one record (the swapped record's), "shared" ones name no process.
STATE_COMPONENTS: dict[str, str] = {
    **dict.fromkeys(("pc", "parked", "token", "cltoken", "tmtoken", "hist", "jprev"), "process"),
    **dict.fromkeys(("K", "A"), "holder"),
    **dict.fromkeys(("live", "inflight", "sup"), "records"),
    "phase": "record",
    **dict.fromkeys((*rules.Mbar._fields, "observed", "rd_cur", "rd_last", "nb_count", "nb_arrived", "nb_gen",
                     "tm_arrived", "tm_gen", "cl_gen", "cl_arrived"), "shared"),
}


class EncodingSymmetry:
    """Symmetry of the unrolled events (a mixin of Encoding)."""

    def symmetric_pairs(self) -> list[tuple[int, int, dict[int, int]]]:
        """Pairs (a, b), a < b, of interchangeable processes, each with the swap of their records.

        The processes are those the explicit engine's symmetry reduction interchanges
        (`semantics.symmetry.symmetry_groups`: whole warps of one CTA and role running one
        program that never reads `instance`), whose swap maps every execution of the machine
        to an execution with the same findings. The pair is kept only where this encoding's
        static layout is invariant under the swap too: their events correspond one to one
        with equal operands, their records one to one with equal fields, and every static
        mask and record list is mapped onto itself; anything else drops the pair (fewer
        symmetry constraints, never a wrong one)."""
        if any((key[0] if isinstance(key, tuple) else key) not in STATE_COMPONENTS for key in self.fresh(0)):
            return []  # a state component whose image is not known: no pair can be shown symmetric
        if self.commits:
            return []  # a commit's snapshot holder belongs to one event: the holder swap does not map it
        out = []
        for group in symmetry_groups(self.machine.procs, self.machine.programs):
            members = sorted(group)
            for i, a in enumerate(members):
                for b in members[i + 1:]:
                    self.tick()
                    rmap = self._swap_records(a, b)
                    if rmap is not None:
                        out.append((a, b, rmap))
        return out

    def _swap_records(self, a: int, b: int) -> dict[int, int] | None:
        """The record swap of processes a and b (an involution), or None if the layout is not
        symmetric in them."""
        evs_a, evs_b = self.events[a], self.events[b]
        if len(evs_a) != len(evs_b) or [(j, len(r)) for j, r in self.runs[a].items()] != \
                [(j, len(r)) for j, r in self.runs[b].items()]:
            return None
        owned: dict[int, list[int]] = {}
        for r, rec in enumerate(self.records):
            if rec.event is not None:
                owned.setdefault(id(rec.event), []).append(r)
        rmap: dict[int, int] = {}
        for x, y in zip(evs_a, evs_b, strict=True):
            if self._event_shape(x) != self._event_shape(y):
                return None
            rx, ry = owned.get(id(x), []), owned.get(id(y), [])
            if len(rx) != len(ry):
                return None
            for r, q in zip(rx, ry, strict=True):
                ra, rb = self.records[r], self.records[q]
                if (ra.space, ra.key, ra.kind, ra.part, ra.is_async, ra.region, ra.owner, rb.owner) != \
                        (rb.space, rb.key, rb.kind, rb.part, rb.is_async, rb.region, a, b):
                    return None
                rmap[r], rmap[q] = q, r
        hmap = self.holder_swap(a, b)
        for x, y in zip(evs_a, evs_b, strict=True):
            mapped = [(rmap.get(r, r), tuple(sorted(hmap.get(h, h) for h in hs))) for r, hs in x.retires]
            if mapped != [(r, tuple(sorted(hs))) for r, hs in y.retires]:
                return None
            if [rmap.get(r, r) for r in (x.record, *x.inits, *(c.record for c in x.copies))] != \
                    [y.record, *y.inits, *(c.record for c in y.copies)]:
                return None
        swap = lambda mask: self._mask(rmap.get(r, r) for r in range(len(self.records)) if mask >> r & 1)  # noqa: E731
        if any(swap(mask) != mask for mask in (self.amask, self.kmask, self.obs_mask, self.nondata_mask)):
            return None
        lists = [self.obs_of[m] for m in range(self.M)] + [self.init_records[m] for m in range(self.M)]
        if any(sorted(rmap.get(r, r) for r in rs) != sorted(rs) for rs in lists):
            return None
        if any((a in self.waiters[m]) != (b in self.waiters[m]) for m in range(self.M)) or \
                (a in self.tm_procs) != (b in self.tm_procs):
            return None
        return rmap

    @staticmethod
    def _event_shape(e: Event) -> tuple:
        """Everything of an event but who runs it and which record bits it owns."""
        return (e.op, e.line, e.threads, e.part, e.own, e.cta, e.error and e.error.code, e.m, e.targets,
                e.parity, e.count, e.nbytes, e.key, e.nb, e.nb_count, e.tm, e.pending, e.ordinal,
                tuple((c.cta, c.m, c.key) for c in e.copies), len(e.lanes))

    def holder_swap(self, a: int, b: int) -> dict[int, int]:
        """The two processes' holders swapped, with the snapshot holders of their copies (event by
        event: _swap_records has checked that their events correspond one to one)."""
        la, lb, wa, wb = self.leader(a), self.leader(b), self.lanes_holder(a), self.lanes_holder(b)
        out = {la: lb, lb: la, wa: wb, wb: wa}
        for x, y in zip(self.events[a], self.events[b], strict=False):
            for cx, cy in zip(x.copies, y.copies, strict=False):
                hx, hy = self.snap_holder(cx), self.snap_holder(cy)
                out[hx], out[hy] = hy, hx
        return out

    def swapped(self, S: dict, a: int, b: int, rmap: dict[int, int]) -> Any:
        """Is the state S invariant under swapping processes a and b, with their records and
        knowledge holders? Every component of `fresh` is compared with its image: a process's
        own components with the other's, a holder's knowledge with the swapped holder's
        (record bits swapped), sets of records with themselves (bits swapped), an observation
        record's phase with the swapped record's; the components that name no process (barriers,
        counts, generations) are their own images."""
        def perm(v: Any) -> Any:
            self.tick()  # (R bits each: on a large protocol these add up to minutes)
            bits = [z3.Extract(rmap.get(r, r), rmap.get(r, r), v) for r in reversed(range(self.R))]
            return bits[0] if len(bits) == 1 else z3.Concat(*bits)

        hswap = self.holder_swap(a, b)
        eqs = []
        for key, value in S.items():
            name = key[0] if isinstance(key, tuple) else key
            kind = STATE_COMPONENTS[name]
            if kind == "process" and key[-1] == a:
                eqs.append(S[(*key[:-1], b)] == value)
            elif kind == "holder" and hswap.get(key[1], key[1]) >= key[1]:
                eqs.append(S[name, hswap.get(key[1], key[1])] == perm(value))
            elif kind == "records":
                eqs.append(value == perm(value))
            elif kind == "record" and rmap.get(key[1], key[1]) > key[1]:
                eqs.append(S[name, rmap[key[1]]] == value)
        return z3.And(*eqs)

    # ------------------------------------------------------------------ state
