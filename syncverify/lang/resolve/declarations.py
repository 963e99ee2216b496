"""The declarations of a protocol: params, the cluster and CTA size, roles, buffers, tensor
memory, mbarriers, named barriers and `choose` values, each evaluated for the given params
and checked against the limits; and the roles' check that no thread is in two of them.

A room of its own because declarations fix the kernel's shape before any statement is
read: they run first, over the top level only, and fill the tables the statements look
names up in.
"""

from __future__ import annotations

from lark import Token, Tree

from ... import ir
from ...diagnostics import Span, make
from .names import Names, _Chosen, _Named, _suggest
from .operations import MAX_ARRAY, MAX_CLUSTER, MAX_COUNT, MAX_THREADS


class Declarations(Names):
    """The `decl_*` handlers, the assignment of the `choose` values, and the checks of
    named-barrier ids and counts that the barrier operations share."""

    # ---- declarations ----------------------------------------------------
    def declarations(self, items: list[Tree]) -> None:
        self.in_declarations = True
        for item in items:
            handler = getattr(self, f"decl_{item.data}", None)
            if handler is not None:
                handler(item)
        self.in_declarations = False
        self.finish_shape()
        self._assign_choices()
        for name in self.defines:
            if name not in self.params and name not in self.chosen:
                self.errors.append(make("SV114", f"-D {name}: no `param {name}` in this protocol"
                                        + _suggest(name, self.params), self.header))

    def finish_shape(self) -> None:
        """After every declaration: what the shape of the launch makes of them (a grid of several
        clusters: resolve/globalmem.py)."""

    def decl_param(self, t: Tree) -> None:
        name, value = t.children
        # (a param set with -D does not depend on what its definition reads)
        self._site = None if str(name) in self.defines else ("param", str(name))
        v = self.const(value, f"param `{name}`")
        self._site = ("value", "")
        if not self.declare(name, "param"):
            return
        if str(name) in self.defines:
            v = self.defines[str(name)]
        self.params[str(name)] = v if v is not None else 0

    def decl_cluster(self, t: Tree) -> None:
        v = self.const(t.children[0], "the cluster size")
        if v is not None:
            if not 1 <= v <= MAX_CLUSTER:
                self.error("SV113", f"cluster size {v} is outside 1..{MAX_CLUSTER}", self.span(t.children[0]))
            else:
                self.cluster = v

    def decl_cta_threads(self, t: Tree) -> None:
        v = self.const(t.children[0], "the CTA thread count")
        if v is None:
            return
        if not 32 <= v <= MAX_THREADS or v % 32:
            self.error("SV113", f"CTA thread count {v} must be a multiple of 32 in 32..{MAX_THREADS}",
                       self.span(t.children[0]))
        else:
            self.threads = v

    def _array(self, t: Tree | None) -> tuple[int | None, bool]:
        if t is None:
            return None, True
        n = self.const(t.children[0], "an array size")
        if n is None:
            return None, False
        if not 1 <= n <= MAX_ARRAY:
            self.error("SV104", f"array size {n} is outside 1..{MAX_ARRAY}", self.span(t.children[0]))
            return None, False
        return n, True

    @staticmethod
    def _split_array(children: list) -> tuple[Token, Tree | None, list]:
        name, rest = children[0], children[1:]
        if rest and isinstance(rest[0], Tree) and rest[0].data == "array":
            return name, rest[0], rest[1:]
        return name, None, rest

    def decl_role(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        rng = rest[0]
        kind = str(rng.children[0].children[0])
        unit = {"thread": 1, "threads": 1, "warp": 32, "warps": 32, "warpgroup": 128, "warpgroups": 128}[kind]
        plural = kind.endswith("s")
        if plural and len(rng.children) != 3:
            self.error("SV100", f"`{kind}` takes a range `A..B`", self.span(rng))
            return
        if not plural and len(rng.children) != 2:
            self.error("SV100", f"`{kind}` takes one index; use `{kind}s A..B` for a range", self.span(rng))
            return
        if not self.declare(name, "role") or not ok:
            return
        before = len(self.errors)
        lo_expr = self.expr(rng.children[1], allow_i=size is not None)
        hi_expr = self.expr(rng.children[2], allow_i=size is not None) if plural else None
        if len(self.errors) > before:
            return
        instances = []
        for i in range(size or 1):
            env = {"i": i}
            label = f"{name}[{i}]" if size is not None else str(name)
            lo = self.value(lo_expr, rng.children[1], "a role range", env)
            hi = (self.value(hi_expr, rng.children[2], "a role range", env) if hi_expr is not None
                  else (lo + 1 if lo is not None else None))
            if lo is None or hi is None:
                return
            if lo < 0:
                self.error("SV103", f"role `{label}` starts at {kind} {lo}; indices start at 0", self.span(rng))
                return
            if hi <= lo:
                self.error("SV103", f"role `{label}` is empty ({kind} {lo}..{hi})", self.span(rng))
                return
            instances.append((lo * unit, hi * unit))
        self.roles.append(ir.Role(str(name), tuple(instances), size is not None, self.span(t)))

    def decl_smem(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        nbytes = self.const(rest[0], "buffer bytes")
        if not self.declare(name, "buffer") or not ok or nbytes is None:
            return
        if nbytes <= 0 or nbytes % 16:
            self.error("SV107", f"buffer `{name}` has {nbytes} bytes; shared-memory buffers used by bulk copies "
                       "need a positive multiple of 16", self.span(rest[0]))
            return
        self.buffers[str(name)] = ir.Buffer(str(name), size, nbytes, self.span(t))

    def decl_tmem_decl(self, t: Tree) -> None:
        """`tmem NAME[N] cols C;`: tensor-memory regions (the 512 columns of a CTA hold them all)."""
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        cols = self.const(rest[0], "tensor-memory columns")
        if not self.declare(name, "tmem") or not ok or cols is None:
            return
        total = sum((r.slots or 1) * r.cols for r in self.tmem_regions.values()) + (size or 1) * cols
        if not 1 <= cols <= 512 or total > 512:
            self.error("SV110", f"tensor-memory region `{name}` of {size or 1} x {cols} columns: a CTA has 512 "
                       f"columns (the regions declared so far would take {total})", self.span(rest[0]))
            return
        self.tmem_regions[str(name)] = ir.TmemRegion(str(name), size, cols, self.span(t))

    def decl_mbarrier(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        where = next((c for c in rest if isinstance(c, Tree) and c.data == "mb_storage"), None)
        rest = [c for c in rest if c is not where]
        count = self.const(rest[0], "an mbarrier count") if rest else None
        if not self.declare(name, "mbarrier") or not ok:
            return
        if count is not None and not 1 <= count <= MAX_COUNT:
            self.error("SV105", f"mbarrier `{name}` count {count} is outside 1..{MAX_COUNT} (2^20-1)",
                       self.span(rest[0]))
            count = 1  # reported once here; keeps `init` from reporting a missing count again
        storage = self._mb_storage(where, str(name), size) if where is not None else None
        self.mbarriers[str(name)] = ir.Mbarrier(str(name), size, count, self.span(t), storage)

    def _mb_storage(self, t: Tree, name: str, size: int | None) -> ir.MbarStorage | None:
        """`in BUF[S] at OFF`: the buffer slot the barriers' bytes lie in (declared before; SV101),
        the slot in range and the barriers' 8-byte objects inside it, 8-aligned (SV104)."""
        buf_t, array, off_t = t.children[0], None, None
        for c in t.children[1:]:
            if isinstance(c, Tree) and c.data == "array":
                array = c
            elif c is not None:
                off_t = c
        buf = self.buffers.get(str(buf_t))
        if buf is None:
            self.error("SV101", f"mbarrier `{name}` in `{buf_t}`: no shared-memory buffer `{buf_t}` is declared "
                       "before it", self.span(buf_t))
            return None
        slot = self.const(array.children[0], "a buffer slot") if array is not None else 0
        offset = self.const(off_t, "a byte offset") if off_t is not None else 0
        if slot is None or offset is None:
            return None
        nbytes = 8 * (size or 1)
        where = self.span(array.children[0]) if array is not None else self.span(buf_t)
        if (buf.slots is None and array is not None) or not 0 <= slot < (buf.slots or 1):
            self.error("SV104", f"mbarrier `{name}` in `{buf_t}[{slot}]`: slot {slot} is out of range for "
                       f"`{buf_t}{'' if buf.slots is None else f'[{buf.slots}]'}`", where)
            return None
        if offset < 0 or offset % 8 or offset + nbytes > buf.bytes:
            self.error("SV104", f"mbarrier `{name}` at byte {offset} of `{buf_t}`: its {nbytes} bytes must lie "
                       f"inside the {buf.bytes}-byte slot at an offset that is a multiple of 8 (an mbarrier is an "
                       "8-byte aligned object)", self.span(off_t) if off_t is not None else where)
            return None
        return ir.MbarStorage(str(buf_t), slot, offset)

    def decl_named(self, t: Tree) -> None:
        name, array, rest = self._split_array(t.children)
        size, ok = self._array(array)
        if not self.declare(name, "named barrier") or not ok:
            return
        before = len(self.errors)
        id_expr = self.expr(rest[0], allow_i=size is not None)
        count_expr = self.expr(rest[1], allow_i=size is not None) if len(rest) > 1 else None
        if len(self.errors) > before:
            return
        for i in range(size or 1):  # one report per declaration, not one per element
            env = {"i": i}
            bid = self.value(id_expr, rest[0], "a named-barrier id", env)
            cnt = self.value(count_expr, rest[1], "a named-barrier count", env) if count_expr else None
            if (bid is None or (count_expr is not None and cnt is None) or not self._check_bar_id(bid, self.span(
                    rest[0])) or (cnt is not None and not self._check_bar_count(cnt, self.span(rest[1])))):
                return  # reported; its uses are then skipped silently (see _bar_operands)
        self.named[str(name)] = _Named(size, id_expr, count_expr, self.span(t))

    def decl_choose(self, t: Tree) -> None:
        per_cta = isinstance(t.children[0], Tree) and t.children[0].data == "per_cta"
        name, array, rest = self._split_array(t.children[1:] if per_cta else t.children)
        size, ok = self._array(array)
        lo, hi = self.const(rest[0], "a `choose` range"), self.const(rest[1], "a `choose` range")
        if not self.declare(name, "choose value") or not ok or lo is None or hi is None:
            return
        span = self.span(t)
        if hi <= lo:
            self.error("SV118", f"`choose {name}` has no value to choose: the range {lo}..{hi} is empty "
                       "(ranges are half-open, as in `for`)", self.span(rest[1]))
            return
        pinned = str(name) in self.defines
        if pinned:
            v = self.defines[str(name)]
            if lo <= v < hi:
                lo, hi = v, v + 1
            else:  # still declared, so that its uses are not reported as unknown
                self.errors.append(make("SV114", f"-D {name}={v} is outside the range {lo}..{hi} of `choose {name}`",
                                        self.header))
        self.chosen[str(name)] = _Chosen(per_cta, size, lo, hi, pinned, span)

    def _assign_choices(self) -> None:
        """Give each `choose` its values: the assignment asked for, else the first of each range.
        Done after every declaration, since a value per CTA needs the cluster size."""
        for name, c in self.chosen.items():
            width = c.size or 1
            cells = width * (self.cluster if c.per_cta else 1)
            values = (c.lo,) * cells
            if self.assignment is not None:  # (from lang/choices.assignments; a mismatch is a caller's bug)
                values = tuple(self.assignment.get(name, ()))
                if len(values) != cells or not all(c.lo <= v < c.hi for v in values):
                    raise ValueError(f"assignment {name}={values} does not fit `choose {name}`")
            c.rows = tuple(values[r * width:(r + 1) * width] for r in range(cells // width))

    def choices(self) -> tuple[ir.Choice, ...]:
        return tuple(ir.Choice(name, c.per_cta, c.size, c.lo, c.hi, c.pinned, len(c.rows) * (c.size or 1), c.span)
                     for name, c in self.chosen.items())

    def _check_bar_id(self, bid: int, span: Span) -> bool:
        if not 0 <= bid <= 15:
            self.error("SV106", f"named-barrier id {bid} is outside 0..15", span)
            return False
        return True

    def _check_bar_count(self, count: int, span: Span) -> bool:
        limit = self.threads or MAX_THREADS
        if count <= 0 or count % 32 or count > limit:
            self.error("SV106", f"named-barrier thread count {count} must be a positive multiple of 32 "
                       f"and at most the CTA's {limit} threads", span)
            return False
        return True

    def check_roles(self) -> None:
        """SV103: every role inside the CTA, no thread in two roles (one report per role)."""
        threads = self.threads
        if threads is None:  # no valid `cta threads`: SV113 says so; without it nothing bounds the ranges
            return
        owner: dict[int, str] = {}
        for role in self.roles:
            for i, (lo, hi) in enumerate(role.instances):
                label = f"{role.name}[{i}]" if role.array else role.name
                if hi > threads:
                    covers = f"thread {lo}" if hi - lo == 1 else f"threads {lo}..{hi - 1}"
                    self.error("SV103", f"role `{label}` covers {covers}, beyond the CTA's {threads} threads",
                               role.span)
                    break
                clash = next((tid for tid in range(lo, hi) if tid in owner), None)
                if clash is not None:
                    self.error("SV103", f"roles `{owner[clash]}` and `{label}` overlap at thread {clash}", role.span)
                    break
                owner.update((tid, label) for tid in range(lo, hi))
