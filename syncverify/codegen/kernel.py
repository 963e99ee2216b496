"""Translate a protocol body into the CUDA C++ of one sm_90a kernel.

Every warp runs the whole body, as in the model (one process per warp, or per
role segment of a warp): roles, instances and the CTA rank are per-thread
values computed once, `if`/`for`/`let` become C control flow, and every
operation becomes the PTX of ptx-semantics.md §8. Who executes an operation is
decided exactly as the model decides it (``semantics.program._Compiler``):
outside `elect` / `first thread` every lane of the warp executes it (an `arrive`
by a warp is 32 arrivals); `elect` is `elect.sync` with a full mask, one lane of
each warp that reaches it; `first thread` is the first thread of the innermost
role guard's instance (thread 0 of the CTA at top level).

Around the protocol the kernel adds only what the checks need: stamps in every
write, comparisons in every read, a watchdog in every mbarrier wait, progress
records before every barrier wait that cannot time out, and (for a replay) a
global turn counter that forces the order of a counterexample.
"""

from __future__ import annotations

from .. import ir
from ..expr import EvalError, evaluate, fold, free_names
from ..semantics.families import proxy_fence
from ..semantics.program import first_threads, per_lane, with_lane
from . import ptx
from .base import EmitRefused, Layout, Shape, Tables
from .cp_async import CpAsyncWriter
from .regions import RegionWriter, region_buffers
from .replay import ANY, Hold
from .sites import Site, comment_safe


class KernelWriter(CpAsyncWriter, RegionWriter):
    def __init__(self, protocol: ir.Protocol, sites: list[Site], site_of: dict[int, int], layout: Layout,
                 tables: Tables, shape: Shape, replay: bool, check_stride: int = 1,
                 holds: tuple[Hold, ...] = ()):
        self.p = protocol
        self.sites = sites
        self.site_of = site_of
        self.layout = layout
        self.tables = tables
        self.shape = shape
        self.replay = replay
        self.check_stride = check_stride
        self.out: list[str] = []
        self.depth = 1
        self.loops: list[str] = []
        self.site_loops: dict[int, list[str]] = {}
        self.wait_variants: dict[str, str] = {}
        self.lag: str | None = None  # the late-lanes condition of the read being emitted
        self.lane_mask: str | None = None  # in a gated replay, inside a guard on `lane`: its ballot (lane_guard_mask)
        self.lane_gates = False  # sv_gate_done_lanes is used
        self.late_done: set[int] = set()  # late-lanes holds whose deferred read has been emitted
        self.wgmma_sites = [s.index for s in sites if isinstance(s.op, ir.WgmmaRead)]
        self.parted = region_buffers(protocol)  # buffers accessed by region: stamped by word range (regions.py)
        self.holds: dict[int, list[Hold]] = {}
        for h in holds:
            self.holds.setdefault(h.site, []).append(h)
        # With late writes held, barriers get no progress records: their stores to host memory, right after
        # the barrier and before a bulk store's issue, delay the issue until the held writes have landed.
        # A hang at a bar.sync is then reported without its position.
        self.quiet_barriers = any(h.kind == "late-write" for h in holds)
        # With a wgmma read held, copies, their expect_tx and arrives are issued without first loading the
        # abort flag: those two global-memory round trips, after the producer's wait and before its copy,
        # let the held wgmma's queue drain before the overwrite landed; and a release by one thread
        # (`first thread { arrive … }`) after the held wgmma loads the flag inside its branch, where ptxas
        # cannot hoist it, so the release came a round trip late and the race never showed (released by
        # every thread, the load was hoisted above the wgmma and the race showed; docs/gpu-agreement.md).
        # Waits still return on abort.
        self.held_wgmma = any(h.kind == "slow-wgmma" for h in holds)
        # slow-wgmma sites: N of the wide wgmmas queued before the held one (a 128-register accumulator for 256)
        self.wide_n = {s.index: ptx.wgmma_wide_n(protocol.buffer(s.op.buf.name).bytes) for s in sites
                       if any(h.kind == "slow-wgmma" for h in self.holds.get(s.index, []))}
        if len(self.wide_n) > 1:
            # Every held site's queue stays live in registers at once: two 128-register accumulators
            # exceed what ptxas leaves the wgmma pipeline, and it serializes every wgmma (C7511), which
            # hides the races the hold is there to show. Share the 128 registers between the sites.
            cap = ptx.wgmma_wide_n(256 // len(self.wide_n) * 32)
            self.wide_n = {s: min(n, cap) for s, n in self.wide_n.items()}

    # ------------------------------------------------------------------ statements
    def body(self) -> list[str]:
        self.block(self.p.body, leader=False)
        return self.out

    def block(self, stmts: tuple[ir.Stmt, ...], leader: bool) -> None:
        for s in stmts:
            self.stmt(s, leader)

    def stmt(self, s: ir.Stmt, leader: bool) -> None:
        self._stmt(s, leader)
        if leader or isinstance(s, ir.For):
            return
        for hs in self.holds.values():
            for h in hs:
                if h.kind == "late-lanes" and id(h) not in self.late_done and self._holds_site(s, h.after_site):
                    self.late_done.add(id(h))
                    self.late_lanes_read(h)

    def _holds_site(self, s: ir.Stmt, site: int) -> bool:
        """Does statement s (an op, or a block holding ops) contain the operation numbered `site`?"""
        if isinstance(s, ir.If):
            return any(self._holds_site(x, site) for x in s.then + s.orelse)
        if isinstance(s, ir.Elect | ir.For):
            return any(self._holds_site(x, site) for x in s.body)
        if isinstance(s, ir.Let):
            return False
        return self.site_of.get(id(s)) == site

    def _stmt(self, s: ir.Stmt, leader: bool) -> None:
        if isinstance(s, ir.Let):
            self.line(f"v_{s.name} = {self.expr(s.value)};")
        elif isinstance(s, ir.For):
            v = f"v_{s.var}"
            self.line(f"for ({v} = {self.expr(s.lo)}; {v} < {self.expr(s.hi)}; ++{v}) {{  // line {s.span.line}")
            self.depth += 1
            self.loops.append(s.var)
            self.block(s.body, leader)
            self.loops.pop()
            self.depth -= 1
            self.line("}")
        elif isinstance(s, ir.If):
            outer = self.lane_mask
            lm = None if self.lane_zero_only(s.cond, s.then) else self.lane_guard_mask(s, leader)
            self.line(f"if ({self.expr(s.cond)}) {{  // line {s.span.line}")
            self.depth += 1
            # a guard that leaves lane 0 alone runs its block as the elected lane does (program.lane_part)
            self.lane_mask = lm or outer
            self.block(s.then, leader or self.lane_zero_only(s.cond, s.then))
            self.depth -= 1
            if s.orelse:
                self.line("} else {")
                self.depth += 1
                self.lane_mask = f"({outer or 'c.seg_mask'} & ~{lm})" if lm else outer
                self.block(s.orelse, leader)
                self.depth -= 1
            self.lane_mask = outer
            self.line("}")
        elif isinstance(s, ir.Elect):
            self.line(f"if ({self.elect_cond(s)}) {{  // line {s.span.line}: "
                      f"{'elect' if s.per_warp else 'first thread'}")
            self.depth += 1
            self.block(s.body, True)
            self.depth -= 1
            self.line("}")
        else:
            self.op(s, leader)

    def lane_guard_mask(self, s: ir.If, leader: bool) -> str | None:
        """In a gated replay, the lanes a guard on `lane` lets in, as a ballot taken before the branch by
        every lane that reaches it: a gated step inside the guard hands its turn on once those lanes have
        all taken it (sv_gate_done_lanes), where a whole-warp step would wait on lanes that never come."""
        if not self.replay or leader or "lane" not in free_names(s.cond):
            return None
        name = f"lm{len(self.out)}"
        self.line(f"const u32 {name} = __ballot_sync({self.lane_mask or 'c.seg_mask'}, {self.expr(s.cond)});")
        return name

    def lane_zero_only(self, cond: ir.Expr, body: tuple[ir.Stmt, ...]) -> bool:
        """Does a condition on `lane` hold for lane 0 alone? Decided for each lane as the compiled
        programs decide it. Where it also depends on the CTA, role or instance, the answer can
        differ between warps; that matters only for data accesses (which part of the slot the
        lanes touch), so such a guard is emitted only around arrivals and tx counts."""
        if "lane" not in free_names(cond):
            return False
        holds = set()
        for lane in range(32):
            try:
                if evaluate(fold(with_lane(cond, lane)), {}):
                    holds.add(lane)
            except EvalError:
                if any(not isinstance(op, ir.MbarArrive | ir.MbarTx) for op in _ops(body)):
                    raise EmitRefused(f"{self.p.path}:{cond.span.line}: a condition on `lane` that also depends "
                                      "on the CTA, role or instance is emitted only around arrivals") from None
                return False
        return holds == {0}

    def elect_cond(self, s: ir.Elect) -> str:
        """Who runs the block, as ``semantics.program._Compiler.elected`` decides it."""
        if s.per_warp:
            return "sv_elect_sync()"
        firsts = first_threads(self.p, s)
        if s.role is None:
            return f"c.tid == {firsts[0]}u"
        if len(firsts) == 1:
            return f"in_{s.role} && c.tid == {firsts[0]}u"
        chain = " : ".join(f"inst == {i} ? {f}u" for i, f in enumerate(firsts[:-1])) + f" : {firsts[-1]}u"
        return f"in_{s.role} && c.tid == ({chain})"

    # ------------------------------------------------------------------ operations
    def op(self, op: ir.Op, leader: bool) -> None:
        site = self.site_of[id(op)]
        self.site_loops[site] = list(self.loops)
        text = comment_safe(self.sites[site].text)
        self.line(f"{{  /* line {op.span.line}: {text} */")
        self.depth += 1
        # an access once per lane (an operand uses `lane`) is each lane's access to the whole of its slot
        part = "0u, 1u" if leader or (isinstance(op, ir.Access) and per_lane(op)) else "c.pidx, c.pn"
        whole = "false" if leader else "true"
        gate_first = isinstance(op, ir.BarSync)  # a bar.sync blocks: give the turn away before it
        if self.replay:
            self.line(f"bool g = sv_gate(c, replay, replay_len, rcur, {site}u, o{site});")
            if gate_first:
                self.line(f"sv_gate_done(c, g, rcur, {whole});")
        # a late-process hold (replay.py): the read comes after its turn is handed on and the order has run
        defer = self.hold_cond(site, "late-process") if self.replay and not gate_first else None
        if defer is not None:
            h = max((h for h in self.holds[site] if h.kind == "late-process"), key=lambda h: h.until_turn)
            self.line(f"const bool defer = {defer};")
            self.line(f"if (defer) {{ sv_gate_done(c, g, rcur, {whole}); "
                      f"sv_hold(c, {h.until_turn}u, {h.window_ns}ull, {site}u, o{site}); }}")
        self.lag = None
        if isinstance(op, ir.Access) and op.kind == "read" and not leader:
            self.lag = self.hold_cond(site, "late-lanes")
            late = self.hold_cond(site, "late-read")
            if late is not None:  # the whole process reads late (converged): a window before the read
                window = max(h.window_ns for h in self.holds[site] if h.kind == "late-read")
                self.line(f"if ({late}) sv_hold(c, 0u, {window}ull, {site}u, o{site});")
        if self.lag is not None:
            self.line(f"const bool lag = c.pidx != 0u && ({self.lag});  // these lanes read after lane 0's step")
        handler = getattr(self, "op_" + type(op).__name__)
        handler(op, site, part, leader)
        if self.replay and not gate_first and self.lane_mask and not leader:
            self.lane_gates = True
            self.line(f"sv_gate_done_lanes(c, g, rcur, {self.lane_mask});")
        elif self.replay and not gate_first:
            self.line(f"{'if (!defer) ' if defer is not None else ''}sv_gate_done(c, g, rcur, {whole});")
        self.lag = None
        self.line(f"++o{site};")
        self.depth -= 1
        self.line("}")

    def op_MbarInit(self, op: ir.MbarInit, site: int, part: str, leader: bool) -> None:
        decl = self.p.mbarrier(op.bar.name)
        count = self.expr(op.count) if op.count is not None else str(decl.count)
        if op.bar.every:
            self.line(f"for (u32 i = 0; i < {decl.size or 1}u; ++i)")
            self.line(f'  asm volatile("{ptx.INIT}" :: "r"((u32)({count})), "r"({self.bar_addr(op.bar, "i")}) '
                      ': "memory");')
        else:
            self.line(f'asm volatile("{ptx.INIT}" :: "r"((u32)({count})), "r"({self.bar_addr(op.bar)}) : "memory");')

    def op_MbarInval(self, op: ir.MbarInval, site: int, part: str, leader: bool) -> None:
        decl = self.p.mbarrier(op.bar.name)
        if op.bar.every:
            self.line(f"for (u32 i = 0; i < {decl.size or 1}u; ++i)")
            self.line(f'  asm volatile("{ptx.INVAL}" :: "r"({self.bar_addr(op.bar, "i")}) : "memory");')
        else:
            self.line(f'asm volatile("{ptx.INVAL}" :: "r"({self.bar_addr(op.bar)}) : "memory");')

    def op_MbarArrive(self, op: ir.MbarArrive, site: int, part: str, leader: bool) -> None:
        count_one = isinstance(op.count, ir.Const) and op.count.value == 1
        bar = self.bar_addr(op.bar)
        count = f"(u32)({self.expr(op.count)})"
        if op.tx_bytes is not None and not count_one:
            # arrive.expect_tx has no count operand: expect the bytes, then arrive `count` times at once
            tx = ir.MbarTx("expect", op.bar, op.tx_bytes, op.remote, op.span)
            self.op_MbarTx(tx, site, part, leader)
            op = ir.MbarArrive(op.bar, op.count, None, op.drop, op.sem, op.scope, op.remote, op.span)
        asm, kind = ptx.arrive_asm(op, count_one)
        tx_val = f"(u32)({self.expr(op.tx_bytes)})" if op.tx_bytes is not None else ""
        rank = f"(u32)({self.expr(op.remote)})" if op.remote is not None else ""
        operands = {
            "plain": f'"r"({bar})', "count": f'"r"({bar}), "r"({count})', "tx": f'"r"({tx_val}), "r"({bar})',
            "remote": f'"r"({bar}), "r"({rank})', "remote_count": f'"r"({bar}), "r"({rank}), "r"({count})',
            "remote_tx": f'"r"({bar}), "r"({rank}), "r"({tx_val})',
        }[kind]
        self.line(f'{self.guard()}asm volatile("{asm}" :: {operands} : "memory");')

    def op_MbarTx(self, op: ir.MbarTx, site: int, part: str, leader: bool) -> None:
        bar = self.bar_addr(op.bar)
        nbytes = f"(u32)({self.expr(op.tx_bytes)})"
        asm = ptx.tx_asm(op)
        if op.kind == "expect" and op.remote is None:
            operands = f'"r"({nbytes}), "r"({bar})'
        else:
            rank = f"(u32)({self.expr(op.remote)})" if op.remote is not None else "c.cta"
            operands = f'"r"({bar}), "r"({rank}), "r"({nbytes})'
        self.line(f'{self.guard()}asm volatile("{asm}" :: {operands} : "memory");')

    def wait_fn(self, op: ir.MbarWait) -> str:
        asm = ptx.try_wait_asm(op)
        name = f"sv_wait_{op.sem}_{op.scope}"
        self.wait_variants[name] = asm
        return name

    def op_MbarWait(self, op: ir.MbarWait, site: int, part: str, leader: bool) -> None:
        fn = self.wait_fn(op)
        self.line(f"{fn}(c, {self.bar_addr(op.bar)}, (u32)({self.expr(op.parity)}) & 1u, {op.span.line}u, {site}u, "
                  f"{self.bar_obj(op.bar)}, o{site}, {self.iters()});")

    def _progress(self, site: int, line: int, obj: str) -> None:
        if self.quiet_barriers:
            return
        self.line(f"if (c.pfirst) sv_status(c, SV_STATE_BARRIER, {line}u, {site}u, {obj}, 0u, o{site}, "
                  f"{self.iters()});")

    def _progress_done(self, site: int, line: int) -> None:
        if self.quiet_barriers:
            return
        self.line(f"if (c.pfirst) sv_status(c, SV_STATE_RUNNING, {line}u, {site}u, 0u, 0u, o{site}, {self.iters()});")

    def op_BarSync(self, op: ir.BarSync, site: int, part: str, leader: bool) -> None:
        bar_id = f"(u32)({self.expr(op.bar_id)})"
        self._progress(site, op.span.line, bar_id)
        if op.count is None:
            asm = ptx.BAR_SYNC_ALL if op.aligned else ptx.BARRIER_SYNC_ALL
            self.line(f'asm volatile("{asm}" :: "r"({bar_id}) : "memory");')
        else:
            asm = ptx.BAR_SYNC if op.aligned else ptx.BARRIER_SYNC
            self.line(f'asm volatile("{asm}" :: "r"({bar_id}), "r"((u32)({self.expr(op.count)})) '
                      ': "memory");')
        self._progress_done(site, op.span.line)

    def op_BarArrive(self, op: ir.BarArrive, site: int, part: str, leader: bool) -> None:
        asm = ptx.BAR_ARRIVE if op.aligned else ptx.BARRIER_ARRIVE
        self.line(f'asm volatile("{asm}" :: "r"((u32)({self.expr(op.bar_id)})), '
                  f'"r"((u32)({self.expr(op.count)})) : "memory");')

    def op_ClusterArrive(self, op: ir.ClusterArrive, site: int, part: str, leader: bool) -> None:
        asm = ptx.CLUSTER_ARRIVE_RELAXED if op.relaxed else ptx.CLUSTER_ARRIVE
        self.line(f'asm volatile("{asm}" ::: "memory");')

    def op_ClusterWait(self, op: ir.ClusterWait, site: int, part: str, leader: bool) -> None:
        self._progress(site, op.span.line, "0xFFFFu")
        self.line(f'asm volatile("{ptx.CLUSTER_WAIT}" ::: "memory");')
        self._progress_done(site, op.span.line)

    def op_Syncwarp(self, op: ir.Syncwarp, site: int, part: str, leader: bool) -> None:
        self.line("__syncwarp(c.seg_mask);")

    def op_Fence(self, op: ir.Fence, site: int, part: str, leader: bool) -> None:
        if op.kind == "mbarrier_init":
            self.line(f'asm volatile("{ptx.FENCE_MBARRIER_INIT}" ::: "memory");')
            # CUDA PG TMA examples: also make the initialized barriers visible to the async proxy
            self.line(f'asm volatile("{ptx.FENCE_PROXY_ASYNC}" ::: "memory");')
            return
        # the spec's own form: its state space, or the release/acquire half (families/proxy_fence.py).
        # In a cluster of one CTA every slot is the executing CTA's shared memory, where the plain
        # fence and `.shared::cta` order the same accesses: that one is written (CUTLASS's
        # fence_view_async_shared()).
        text = proxy_fence.ptx_text(op)
        if op.space == "all" and not op.sem and self.p.cluster == 1:
            text = ptx.FENCE_PROXY_ASYNC
        self.line(f'asm volatile("{text}" ::: "memory");')

    def hold_cond(self, site: int, kind: str) -> str | None:
        """The C condition under which this site's access is held, or None when no hold of `kind` applies."""
        conds = []
        for h in self.holds.get(site, []):
            if h.kind != kind:
                continue
            parts = []
            if h.process != ANY:
                parts.append(f"c.proc == {h.process}u")
            if h.occurrence != ANY:
                parts.append(f"o{site} == {h.occurrence}u")
            if h.cta != ANY:
                parts.append(f"c.cta == {h.cta}u")
            conds.append("(" + " && ".join(parts) + ")" if parts else "true")
        return " || ".join(conds) if conds else None

    def op_Access(self, op: ir.Access, site: int, part: str, leader: bool) -> None:
        name = op.buf.name
        target = self.slot_line(op)
        if op.kind == "write":
            stamp = f"SV_STAMP(c.proc, {site}u, o{site})"
            late = self.hold_cond(site, "late-write")
            if name in self.parted and (op.part is not None or op.lo is not None):
                self.region_write(site, stamp, part, late)
            elif late is None:
                self.line(f"sv_stamp(slot, {self.layout.slot_words[name]}u, {stamp}, {part});")
            else:  # bank-conflicted stores: still in flight when the warp moves on (see sv_stamp_late)
                self.line(f"if ({late}) sv_stamp_late(slot, {self.layout.slot_words[name]}u, {stamp}, {part});")
                self.line(f"else sv_stamp(slot, {self.layout.slot_words[name]}u, {stamp}, {part});")
            return
        code = self.read_lines(op, site, part, f"o{site}", target)
        if self.lag is None:
            for text in code:
                self.line(text)
        else:  # lanes the order leaves uncovered skip the read here; stmt() emits it after lane 0's step
            # the slot as of this read: by the deferred read the loop variables may have moved on
            self.line(f"if (lag) {{ held_slot = slot; held_id = {self.slot_id(op.buf, target)}; }}")
            self.line(f"if (!lag) {code[0]}")
            for text in code[1:]:
                self.line(text)

    def slot_line(self, op: ir.Access) -> str:
        """Declare `slot`, the accessed slot in this CTA or (distributed shared memory) the peer's;
        returns the expression of the CTA it lies in."""
        if op.remote is None:
            self.line(f"unsigned char* slot = {self.slot_ptr(op.buf)};")
            return "c.cta"
        target = f"(u32)({self.expr(op.remote)})"
        self.line(f"unsigned char* slot = (unsigned char*)sv_mapa({self.slot_ptr(op.buf)}, {target});")
        return target

    def read_lines(self, op: ir.Access, site: int, part: str, occ: str, target: str,
                   slot: str = "slot", slot_id: str | None = None) -> list[str]:
        """A read's check as a block; `slot` must be in scope. `occ` names the occurrence checked."""
        n = self.tables.nsites
        sid = slot_id if slot_id is not None else self.slot_id(op.buf, target)
        if op.buf.name in self.parted:
            return self.region_read_lines(site, part, occ, slot, sid)
        # a per-lane read's entry indexes the 32 stamps its lanes observe (emit._lane_records)
        want = f"expect[expect[base + {occ}] + (c.tid & 31u)]" if per_lane(op) else f"expect[base + {occ}]"
        return [f"{{ const int base = sv_read_base[c.proc * {n}u + {site}u];",
                f"  const bool known = base >= 0 && {occ} < sv_read_count[c.proc * {n}u + {site}u];",
                f"  if (known) sv_check(c, {slot}, {self.layout.check_words[op.buf.name]}u, {want}, "
                f"{site}u, {occ}, {sid}, {part}, {self.check_stride}u);",
                "  else atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u); }"]

    def late_lanes_read(self, h: Hold) -> None:
        """After lane 0's step (its per-warp release, or its own overwrite): the lanes that step did not cover
        read now, once the rest of the order (the overwrite) has run and a window has passed. The whole
        process waits, converged; lane 0 had read. The slot is the one the read site saw (held_slot)."""
        op = self.sites[h.site].op
        assert isinstance(op, ir.Access)
        line = self.sites[h.site].line
        self.line(f"if (c.proc == {h.process}u && o{h.site} == {h.occurrence + 1}u) {{  "
                  f"// hold: the line {line} read of the lanes lane 0's step does not cover")
        self.depth += 1
        self.line(f"sv_hold(c, {h.until_turn}u, {h.window_ns}ull, {h.site}u, {h.occurrence}u);")
        part = "0u, 1u" if per_lane(op) else "c.pidx, c.pn"  # a per-lane read covers its lane's whole slot
        code = self.read_lines(op, h.site, part, f"{h.occurrence}u", "c.cta", "held_slot", "held_id")
        self.line(f"if (c.pidx != 0u) {code[0]}")
        for text in code[1:]:
            self.line(text)
        self.depth -= 1
        self.line("}")

    def op_TmaLoad(self, op: ir.TmaLoad, site: int, part: str, leader: bool) -> None:
        t = self.tables
        self.line(f"{self.guard()}{{")
        self.depth += 1
        self._lookup("sv_src", site)
        self.line("if (!known) atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u);")
        self.line(f"const u32 region = known ? (u32)base + o{site} : 0u;")
        self.line(f"const u32* g = src + ((u64)c.cluster * {t.src_regions}u + region) * {t.src_region_words}u;")
        dst = f"sv_smem({self.slot_ptr(op.buf)})"
        nbytes = f"(u32)({self.expr(op.tx_bytes)})"
        bar = self.bar_addr(op.bar)
        if op.multicast is None:
            self.line(f'asm volatile("{ptx.TMA_LOAD}" :: "r"({dst}), "l"(g), "r"({nbytes}), "r"({bar}) : "memory");')
        else:
            mask = f"(unsigned short)({self.expr(op.multicast)})"
            self.line(f'asm volatile("{ptx.TMA_LOAD_MULTICAST}" :: "r"({dst}), "l"(g), "r"({nbytes}), "r"({bar}), '
                      f'"h"({mask}) : "memory");')
        self.depth -= 1
        self.line("}")

    def op_TmaStore(self, op: ir.TmaStore, site: int, part: str, leader: bool) -> None:
        """The bulk store is issued with no memory access between the barrier before it and its issue: no
        abort check (a global load) and its region from registers loaded at kernel start (store_tables), so
        that the generic writes it reads have no extra time to land (a missing proxy fence must be able
        to show)."""
        t = self.tables
        self.line(f"const bool known = dbase{site} >= 0 && o{site} < dcount{site};")
        # `gdst`, not `g`: a gated replay names its turn `g` in the same scope
        self.line(f"u32* gdst = dst + ((u64)c.cluster * {t.dst_regions}u + (known ? (u32)dbase{site} + o{site} : 0u)) "
                  f"* {t.dst_region_words}u;")
        self.line(f'if (known) asm volatile("{ptx.TMA_STORE}" :: "l"(gdst), "r"(sv_smem({self.slot_ptr(op.buf)})), '
                  f'"r"((u32)({self.expr(op.tx_bytes)})) : "memory");')
        self.line("else atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u);")

    def store_tables(self) -> list[str]:
        """Each bulk-store site's region base and count, loaded once at kernel start (see op_TmaStore)."""
        out = []
        n = self.tables.nsites
        for s in self.sites:
            if isinstance(s.op, ir.TmaStore):
                i = s.index
                out.append(f"const int dbase{i} = sv_dst_base[c.proc * {n}u + {i}u]; "
                           f"const u32 dcount{i} = sv_dst_count[c.proc * {n}u + {i}u];")
                out.append(f'asm volatile("" :: "r"(dbase{i}), "r"(dcount{i}));  // loaded here, not at the store')
        return out

    def op_GroupCommit(self, op: ir.GroupCommit, site: int, part: str, leader: bool) -> None:
        self.line(f'asm volatile("{ptx.GROUP_COMMIT[op.unit]}" ::: "memory");')

    def op_GroupWait(self, op: ir.GroupWait, site: int, part: str, leader: bool) -> None:
        asm = ptx.GROUP_WAIT[op.unit]
        if not free_names(op.pending):
            self.line(f'asm volatile("{asm}" :: "n"({self.expr(op.pending)}) : "memory");')
        else:  # the immediate must be a constant: dispatch on the value (PTX allows 0..7 pending groups here)
            self.line(f"switch ((int)({self.expr(op.pending)})) {{")
            for n in range(8):
                self.line(f'  case {n}: asm volatile("{asm}" :: "n"({n}) : "memory"); break;')
            self.line(f'  default: asm volatile("{asm}" :: "n"(7) : "memory"); break;')
            self.line("}")
        if op.unit == "wgmma":
            self.check_wgmma()

    def op_WgmmaRead(self, op: ir.WgmmaRead, site: int, part: str, leader: bool) -> None:
        self.line(f'asm volatile("{ptx.WGMMA_FENCE}" ::: "memory");')
        self.line(f"const u64 d = sv_wgmma_desc(sv_smem({self.slot_ptr(op.buf)}));")
        slow = self.hold_cond(site, "slow-wgmma")
        if slow is not None:
            # queue wide accumulating wgmmas reading the slot before the checked one, on their own accumulator
            # (kept live after the wait: ptxas drops wgmmas whose results are never read), each after a fence
            # (else ptxas injects one, C7519): the tensor cores are still busy with them at the release
            chain = max(h.chain for h in self.holds[site] if h.kind == "slow-wgmma")
            n = self.wide_n[site]
            regs = ", ".join(f'"+r"(hw{site}[{i}])' for i in range(n // 2))
            self.line(f"if ({slow}) {{")
            self.line("  #pragma unroll 1")
            self.line(f"  for (u32 i = 0; i < {chain}u; ++i) {{")
            self.line(f'    asm volatile("{ptx.WGMMA_FENCE}" ::: "memory");')
            self.line(f'    asm volatile("{ptx.wgmma_wide(n)}" : {regs} : "l"(d), "l"(d), "r"(1) : "memory");')
            self.line("  }")
            self.line("}")
            self.line(f'asm volatile("{ptx.WGMMA_FENCE}" ::: "memory");')
        self.line(f'asm volatile("{ptx.WGMMA_MMA}" : "+r"(acc{site}[0]), "+r"(acc{site}[1]), "+r"(acc{site}[2]), '
                  f'"+r"(acc{site}[3]) : "l"(d), "l"(d), "r"(0) : "memory");')
        self._lookup("sv_read", site)
        self.line(f"wg_pending{site} = known ? 1u : 2u; wg_expect{site} = known ? expect[base + o{site}] : 0u; "
                  f"wg_occ{site} = o{site}; wg_slot{site} = {self.slot_id(op.buf, 'c.cta')};")

    def check_wgmma(self) -> None:
        """After a wgmma.wait: check every retired wgmma read (the emitter allows only `wgmma.wait 0`)."""
        for s in self.wgmma_sites:
            if s in self.wide_n:  # the held wgmma's queue: its results are not checked, only kept live
                self.line("{")
                self.line("  u32 x = 0u;")
                self.line("  #pragma unroll")
                self.line(f"  for (int i = 0; i < {self.wide_n[s] // 2}; ++i) x ^= hw{s}[i];")
                self.line("  if (x == 0x9E3779B9u) atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 0u);")
                self.line("}")
            self.line(f"if (wg_pending{s}) {{")
            self.line(f'  asm volatile("" : "+r"(acc{s}[0]), "+r"(acc{s}[1]), "+r"(acc{s}[2]), "+r"(acc{s}[3]) '
                      ':: "memory");')
            self.line(f"  if (wg_pending{s} == 1u) {{")
            self.line(f"    const u32 want = sv_wgmma_value(wg_expect{s});")
            # constant indices only: a runtime index puts the accumulators in local memory, and ptxas then
            # waits for the wgmma right after issuing it (C7517), which would hide every wgmma WAR race
            a = [f"acc{s}[{i}]" for i in range(4)]
            self.line(f"    const u32 bad_i = {a[0]} != want ? 0u : {a[1]} != want ? 1u : {a[2]} != want ? 2u : "
                      f"{a[3]} != want ? 3u : 4u;")
            self.line(f"    if (bad_i < 4u) {{ const u32 seen = bad_i == 0u ? {a[0]} : bad_i == 1u ? {a[1]} : "
                      f"bad_i == 2u ? {a[2]} : {a[3]}; atomicAdd(&c.ctl[SV_CTL_WGMMA_BAD], 1u); "
                      f"sv_record(c, 1u, c.proc, {s}u, wg_occ{s}, wg_slot{s}, wg_expect{s}, seen, bad_i); }}")
            self.line("  } else atomicAdd(&c.ctl[SV_CTL_UNCHECKED], 1u);")
            self.line(f"  wg_pending{s} = 0u;")
            self.line("}")

    def op_TmemAlloc(self, op: ir.TmemAlloc, site: int, part: str, leader: bool) -> None:
        raise AssertionError("refused before emission")

    op_UmmaCommit = op_TcMma = op_TmemAccess = op_TcWait = op_TcFence = op_TmemRelinquish = op_TmemAlloc


def _ops(stmts: tuple[ir.Stmt, ...]) -> list[ir.Op]:
    """The operations a block holds, at any depth."""
    out: list[ir.Op] = []
    for s in stmts:
        if isinstance(s, ir.If):
            out += _ops(s.then) + _ops(s.orelse)
        elif isinstance(s, ir.For | ir.Elect):
            out += _ops(s.body)
        elif not isinstance(s, ir.Let):
            out.append(s)
    return out
