"""The Promela of memory accesses: slots of buffers, their race records and the conflict scan,
mirroring semantics/families/memory.py (`_add_read`, `_add_write`, `_conflicts`), with the byte
regions of semantics/families/regions.py where some access names one.

The records of a slot live in the model's array ``R`` (``CAP`` per slot, kept sorted as the
engine's state keeps them); the C functions here add, drop and scan them. The steps form a mixin
of the exporter; ``FACTS`` and ``STEPS`` register its operations by type.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ...semantics.families.regions import WHOLE, region_of
from ...semantics.state import F_ASYNC, F_INFLIGHT, LEADER, READ, WRITE
from .base import WHOLE_HI, _Facts


class MemoryExport:
    """The run's reading and the steps of this family (a mixin of the exporter)."""

    def region_bytes(self, op: ir.Access, p: int, env: dict) -> tuple[int, int]:
        """The bytes of its slot an access by ``p`` touches (regions.Parts.bytes); the whole slot is
        0..WHOLE_HI, which overlaps and is covered exactly as the engine's whole-slot region is."""
        region = region_of(op)
        decl = self.protocol.buffer(op.buf.name)
        if region is None:
            lo, hi = self._val(op.lo, p, env, "byte range"), self._val(op.hi, p, env, "byte range")
            if not 0 <= lo < hi <= decl.bytes:
                raise self._refuse("SV104", op.span.line, f"bytes {lo}..{hi} outside `{op.buf.name}`")
            return lo, hi
        if region == WHOLE:
            return 0, WHOLE_HI
        return self.machine.parts.bytes(region, p, decl.bytes)

    def facts_access(self, facts: _Facts, p: int, proc, op: ir.Access, ins, env: dict, line: int, part: int) -> None:
        k = self._key(op.buf, self._target(op.remote, p, env, line), p, env, line)
        lo, hi = self.region_bytes(op, p, env)
        facts.regions |= (lo, hi) != (0, WHOLE_HI)
        facts.keys[k].lanes.add((p, part, op.kind == "write", line, lo, hi))
        if op.kind == "write":
            facts.keys[k].generic_writes += 1
            if (lo, hi) != (0, WHOLE_HI):
                facts.keys[k].region_writers.add((p, lo, hi))
        else:
            facts.keys[k].generic_readers.add((p, part, lo, hi))

    def records_c(self) -> list[str]:
        """C: a slot's records (remove, add, mark the latest write, keep sorted) and the conflict scan."""
        grp = self.track_grp
        return [
            "/* drop record x of key q, keeping the others in order (the newest write is the last one) */",
            "static void rec_remove(int q, int x) {",
            "  for (; x + 1 < q * CAP + now.nrec[q]; x++) now.R[x] = now.R[x + 1];",
            "  now.nrec[q]--;",
            "  memset(&now.R[q * CAP + now.nrec[q]], 0, sizeof(now.R[0]));",
            "}",
            "/* append a record to key q; -1 when full (the capacity is an upper bound: never reached) */",
            "static int rec_add(int q, int kind, int owner, int part, int flags, int site, int grp) {",
            "  int x;",
            "  if (now.nrec[q] >= CAP) return -1;",
            "  x = q * CAP + now.nrec[q]++;",
            "  memset(&now.R[x], 0, sizeof(now.R[0]));",
            "  now.R[x].kind = kind; now.R[x].owner = owner; now.R[x].part = part; now.R[x].flags = flags;",
            "  now.R[x].site = site;" + (" now.R[x].grp = grp;" if grp else " (void) grp;")
            + (" now.R[x].lo = _lo; now.R[x].hi = _hi;" if self.track_region else ""),
            "  return x;",
            "}",
            "/* the newest write of key q is the one flagged 16 (the engine's highest epoch) */",
            "static void mark_latest(int q, int x) {",
            "  int y;",
            "  for (y = q * CAP; y < q * CAP + now.nrec[q]; y++) now.R[y].flags &= ~16;",
            "  now.R[x].flags |= 16;",
            "}",
            "static int rec_cmp(const void *a, const void *b) { return memcmp(a, b, sizeof(now.R[0])); }",
            "/* records are a set: keep each key's records sorted, as the engine's state does, so that the",
            "   order in which accesses happened does not split states */",
            "static void canon(void) {",
            "  int q;",
            "  for (q = 0; q < NKEYS; q++)",
            "    if (now.nrec[q] > 1) qsort(&now.R[q * CAP], now.nrec[q], sizeof(now.R[0]), rec_cmp);",
            "}",
            "/* machine._conflicts: the first conflicting record of key q not ordered before this access",
            "   (in flight: never; same process and part, generic: program order; else known by all lanes) */",
            "static int race_scan(int q, int me, int part, int lw, int lm, int kind) {",
            "  int x;",
            "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++) {",
            "    if ((now.R[x].kind == 0 && kind == 0) || (now.R[x].flags & 8)) continue;"
            + (" if (now.R[x].lo >= _hi || _lo >= now.R[x].hi) continue;" if self.track_region else ""),
            "    if (!(now.R[x].flags & 2)",
            "        && ((now.R[x].owner == me && !(now.R[x].flags & 1) && now.R[x].part == part)",
            "        || (now.R[x].kn[lw] & lm) == lm)) continue;",
            "    return kind == 1 ? (now.R[x].kind == 1 ? 303 : 302) : 301;",
            "  }",
            "  return 0;",
            "}",
        ]

    def write_records_c(self) -> list[str]:
        """C: what a generic read and a generic write drop of a slot's records."""
        return [
            "/* machine._add_read: a generic read subsumes the same lanes' earlier generic read */",
            "static void drop_reads(int q, int me, int part) {",
            "  int x = q * CAP;",
            "  while (x < q * CAP + now.nrec[q]) {",
            "    if (now.R[x].kind == 0 && now.R[x].owner == me && now.R[x].part == part && !(now.R[x].flags & 1)"
            + (" && now.R[x].lo == _lo && now.R[x].hi == _hi" if self.track_region else "") + ")",
            "      rec_remove(q, x);",
            "    else x++;",
            "  }",
            "}",
            "/* machine._add_write (generic): every older record goes (all are ordered before the write);",
            "   the newest write stays, superseded, where the SV602 data check can still need it */",
            "static void write_reset(int q, int keep) {",
            "  int x, latest = -1;",
            "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++) if (now.R[x].flags & 16) latest = x;",
            *(["  /* regions: only the records whose bytes the write covers go (keep is 0 here) */",
               "  if (!keep) { x = q * CAP; while (x < q * CAP + now.nrec[q])",
               "    if (_lo <= now.R[x].lo && now.R[x].hi <= _hi) rec_remove(q, x); else x++; return; }"]
              if self.track_region else []),
            "  if (!keep || latest < 0) { while (now.nrec[q] > 0) rec_remove(q, q * CAP); return; }",
            "  now.R[q * CAP] = now.R[latest]; now.R[q * CAP].flags |= 8;",
            "  while (now.nrec[q] > 1) rec_remove(q, q * CAP + 1);",
            "}",
        ]

    def conflicts(self, part: int, lanes: str, kind: int, async_op: bool) -> list[str]:
        """machine._conflicts on key _q: a race is SV303 (two writes) or named by which side writes."""
        b = [f"_a = lw; _b = {lanes}; c_code {{ _r = race_scan(_q, {{me}}, {part}, _a, _b, {kind}); }};",
             "assert(_r != 303 || SV303); assert(_r != 302 || SV302); assert(_r != 301 || SV301);"]
        if async_op and self.track_akn:
            b.append("c_code { _r = unfenced(_q, _a, _b); }; assert(_r == 0 || SV601);")
        return b

    def add_read(self, p: int, part: int, lanes: str, line: int, async_grp: str | None) -> list[str]:
        """machine._add_read on key _q (a generic read is known by its own lanes; an async one by nobody)."""
        if async_grp is not None:
            return [f"_n = {async_grp}; c_code {{ _x = rec_add(_q, 0, {{me}}, {part}, {F_ASYNC}, {line}, _n); }};",
                    "assert(_x >= 0 || EXPORTCAP);"]
        known = lanes if part == LEADER else "wb"
        return [f"c_code {{ drop_reads(_q, {{me}}, {part}); _x = rec_add(_q, 0, {{me}}, {part}, 0, {line}, -1); }};",
                "assert(_x >= 0 || EXPORTCAP);",
                f"R[_x].kn[lw] = {known};" + (f" R[_x].akn[lw] = {known};" if self.track_akn else "")]

    def add_write(self, part: int, lanes: str, line: int, inflight: bool) -> list[str]:
        """machine._add_write on key _q: a copy in flight keeps every record and is known by nobody."""
        latest = " if (_x >= 0) mark_latest(_q, _x);" if self.keep_superseded else ""
        if inflight:
            return [f"c_code {{ _x = rec_add(_q, 1, {{me}}, {part}, {F_ASYNC | F_INFLIGHT}, {line}, -1);{latest} }};",
                    "assert(_x >= 0 || EXPORTCAP);"]
        known = lanes if part == LEADER else "wb"
        return [f"c_code {{ write_reset(_q, {int(self.keep_superseded)}); "
                f"_x = rec_add(_q, 1, {{me}}, {part}, 0, {line}, -1);{latest} }};",
                "assert(_x >= 0 || EXPORTCAP);", f"R[_x].kn[lw] = {known};"]

    def step_access(self, p: int, proc, op: ir.Access, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        line = op.span.line
        E = lambda e: self.expr(e, p)  # noqa: E731
        tcta = str(cta) if op.remote is None else E(op.remote)
        b.append(f"_c = {tcta}; _q = {self.key_expr(op.buf, p, '_c')};")
        if op.remote is not None:
            b.append(f"if :: _c != {cta} -> assert(alive_procs[_c] > 0 || SV404); "
                     f"assert((skn[_c].w[lw] & {lanes}) == {lanes} || SV404) :: else -> skip fi;")
        kind = WRITE if op.kind == "write" else READ
        region = self.track_region and region_of(op) != WHOLE
        if region:  # semantics/families/regions.py: the bytes of the slot this access touches
            if region_of(op) is None:
                b.append(f"_lo = {E(op.lo)}; _hi = {E(op.hi)};")
            else:  # the owner's part: processes of identical code share a proctype, so by `me`
                ends = [self.region_bytes(op, q, {}) for q in range(len(self.machine.procs))]
                pick = lambda i: " : ".join(  # noqa: E731
                    [f"(me == {q} -> {e[i]}" for q, e in enumerate(ends[:-1])] + [str(ends[-1][i])]) \
                    + ")" * (len(ends) - 1)
                b.append(f"_lo = {pick(0)}; _hi = {pick(1)};")
        b += self.conflicts(part, lanes, kind, False)
        b += (self.add_write(part, lanes, line, False) if kind == WRITE
              else self.add_read(p, part, lanes, line, None))
        if region:
            b.append(f"_lo = 0; _hi = {WHOLE_HI};")
        return "true"


FACTS: dict[type, Callable] = {
    ir.Access: MemoryExport.facts_access,
}

STEPS: dict[type, Callable] = {
    ir.Access: MemoryExport.step_access,
}
