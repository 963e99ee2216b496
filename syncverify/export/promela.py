"""Promela export: a SPIN model of a protocol, derived from the same semantics.

The model is generated from what the explicit engine runs, not written beside
it: the processes and their compiled programs come from
``semantics.program`` (one proctype per warp process, its flat instruction
list turned into a ``pc`` automaton), the layouts of barriers, slots and
knowledge holders from ``semantics.machine.Machine``, and every mbarrier update
is the rule of ``semantics.rules`` itself, run over Promela expressions
(``mb_update``) instead of integers. docs/promela.md describes the mapping; in short:

* one step of the explicit engine (an operation plus the local control flow
  after it) is one ``d_step`` of the proctype, so SPIN interleaves exactly the
  steps the engine interleaves;
* every in-flight bulk copy is served by an agent proctype (one per slot that
  copies target; two copies into one slot in flight at once are a race, which
  the model reports first), completing at any later moment;
* happens-before is the engine's knowledge scheme: every live access record
  carries the bitmask of holders ordered after it, and release, acquire and
  phase completion move bits exactly as ``semantics.state`` does;
* a rule broken is ``assert(cond || SVnnn)``: SPIN prints the code with the
  violated assertion; a deadlock is caught by a monitor on SPIN's `timeout` (SV201).

Soundness first: whatever cannot be mirrored exactly is refused with an
``ExportError`` (the CLI exits 2) instead of being approximated. The readings
that differ from the explicit engine, and why they preserve verdicts, are
listed in docs/promela.md.
"""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from .. import ir
from ..diagnostics import InputError
from ..expr import Context, EvalError, evaluate
from ..lang.choices import open_choices
from ..semantics import rules
from ..semantics.families import proxy_fence
from ..semantics.families.regions import WHOLE, region_of
from ..semantics.machine import Assumptions, Machine, Violation
from ..semantics.program import BAR_WAIT, BRANCH, END, FOR_INIT, FOR_NEXT, JUMP, LET, OP, Program, lane_part
from ..semantics.state import F_ASYNC, F_INFLIGHT, FULL, LEADER, READ, WRITE
from .lanes import lane_pairs_refusal

BITS = 30  # knowledge bits per Promela int: stays clear of the sign bit
NO_JPREV = -2  # "this waiter has no history" (the engine's missing jprev entry); -1 is a real value
ALL_THREADS = -1  # the count of a `syncthreads` generation: every thread not exited
INT_LIMIT = (1 << 31) - 1
CODES = ("SV201", "SV202", "SV205", "SV301", "SV302", "SV303", "SV401", "SV402", "SV403", "SV404", "SV407", "SV501",
         "SV502", "SV503", "SV504", "SV601", "SV602", "EXPORTCAP")

F_LATEST = 16  # a record flag of the export's own (the latest write of its slot), beside semantics.state's


class _Term:
    """A Promela expression, built by running a rule of ``semantics.rules`` over text."""

    def __init__(self, text: str):
        self.text = text

    def _op(self, op: str, other: object) -> _Term:
        return _Term(f"({self.text} {op} {_promela(other)})")

    def __add__(self, other: object) -> _Term:
        return self._op("+", other)

    def __sub__(self, other: object) -> _Term:
        return self._op("-", other)

    def __eq__(self, other: object) -> _Term:  # type: ignore[override]
        return self._op("==", other)

    def __ne__(self, other: object) -> _Term:  # type: ignore[override]
        return self._op("!=", other)

    __hash__ = None  # type: ignore[assignment]


def _promela(value: object) -> str:
    return value.text if isinstance(value, _Term) else str(int(value))  # type: ignore[call-overload]


class _PromelaArith:
    """``rules.Arith`` over Promela expressions."""

    @staticmethod
    def ite(cond: object, then: object, other: object) -> _Term:
        return _Term(f"({_promela(cond)} -> {_promela(then)} : {_promela(other)})")

    @staticmethod
    def and_(*conds: object) -> _Term:
        return _Term("(" + " && ".join(_promela(c) for c in conds) + ")")

    @staticmethod
    def or_(*conds: object) -> _Term:
        return _Term("(" + " || ".join(_promela(c) for c in conds) + ")")

    @staticmethod
    def mod2(value: object) -> _Term:
        return _Term(f"({_promela(value)} % 2)")


_MB_FIELDS = ("mvalid", "mk", "mpend", "mexp", "mtx")


def mb_update(rule, *args: str) -> str:
    """Promela statements that apply ``rule`` (a function of ``semantics.rules`` on an ``Mbar``) to
    barrier ``_m``, with Promela expressions ``args`` as its other operands. The rule runs over
    Promela terms, so the export states no barrier arithmetic of its own. Every changed field is
    computed into a hidden temporary first, so all of them read the barrier before the step."""
    old = rules.Mbar(*(_Term(f"{f}[_m]") for f in _MB_FIELDS))
    state = () if rule is rules.mb_init else (old,)  # init makes a barrier from its count alone
    arith = {"A": _PromelaArith()} if "A" in inspect.signature(rule).parameters else {}
    new = rule(*state, *(_Term(a) for a in args), **arith)
    changed = [(i, _promela(v)) for i, (v, o) in enumerate(zip(new, old, strict=True)) if _promela(v) != o.text]
    temps = " ".join(f"_mb{i} = {text};" for i, text in changed)
    stores = " ".join(f"{_MB_FIELDS[i]}[_m] = _mb{i};" for i, _ in changed)
    return f"{temps} {stores}   /* rules.{rule.__name__} */"


class ExportError(Exception):
    """The protocol cannot be exported faithfully (or is not well formed); the message says why."""


WHOLE_HI = 1 << 30  # the end of a whole-slot region (past every slot's bytes)

@dataclass
class _KeyUse:
    """What the straight-line run of every process does to one buffer slot of one CTA."""

    generic_readers: set[tuple[int, int]] = field(default_factory=set)  # (process, part)
    async_reads: int = 0
    copies: int = 0
    generic_writes: int = 0
    region_writers: set[tuple[int, int, int]] = field(default_factory=set)  # (process, lo, hi) of region writes
    lanes: set[tuple[int, int, bool, int, int, int]] = field(default_factory=set)  # export/lanes.py

    def capacity(self) -> int:
        """Live records of the slot never exceed this (see `_add_read` / `_add_write` in machine.py):
        one generic read per (process, part, region), every async read and copy until a generic
        write drops them, the latest generic write and the one it superseded (where parts of the
        slot are written separately: the latest write of each writer and region, and one more)."""
        writes = (len(self.region_writers) + 2 if self.region_writers else 2) if self.generic_writes else 0
        return len(self.generic_readers) + self.async_reads + self.copies + writes


@dataclass
class _Facts:
    """What the export needs to know about every execution, from one run of each process.

    A process's control flow depends only on its own loop variables (machine.py runs it
    eagerly for that reason), so one run visits every operation instance it can ever
    execute, with the values every expression will have there."""

    keys: dict[int, _KeyUse] = field(default_factory=lambda: defaultdict(_KeyUse))
    nb_ids: set[int] = field(default_factory=set)
    waiters: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    remote_release: bool = False
    regions: bool = False  # some access touches a region of its slot (families/regions.py)
    tmem_pairs: bool = False
    steps: int = 0  # every step of every process and agent on any path: a bound on SPIN's search depth


class _Exporter:
    def __init__(self, protocol: ir.Protocol):
        self.protocol = protocol
        try:
            self.machine = Machine(protocol, Assumptions())
        except InputError as err:
            raise ExportError("; ".join(f"{d.code}: {d.message}" for d in err.diagnostics)) from None
        m = self.machine
        from ..collective import tmem_may_block
        why = tmem_may_block(m)  # Machine._tmem_columns: an allocation without room blocks
        if why:
            raise ExportError(why)
        self.ncta = protocol.cluster
        self.nprocs = len(m.procs)
        self.ppc = self.nprocs // self.ncta  # processes per CTA (the same role layout in every CTA)
        if self.nprocs > 255 or self.ppc > BITS or len(m.mb_names) > 255:
            raise ExportError(f"{self.nprocs} warp processes ({self.ppc} per CTA) and {len(m.mb_names)} mbarriers: "
                              f"the model indexes them with bytes and parks warps in a {BITS}-bit mask per CTA")
        init = m.initial()
        self.init_procs = init.procs
        self.live = [p for p in range(self.nprocs) if m.programs[p].code[init.procs[p][0]].kind != END]
        # mbarrier and slot layouts: the engine's (cta-major, declaration order)
        self.mbpc = len(m.mb_names) // self.ncta
        self.mb_off: dict[str, int] = {}
        for i, (cta, name, _) in enumerate(m.mb_names):
            if cta == 0 and name not in self.mb_off:
                self.mb_off[name] = i
        self.buf_off: dict[str, int] = {}
        spc = 0
        for b in protocol.buffers:
            self.buf_off[b.name] = spc
            spc += b.slots or 1
        self.spc = spc
        self.nkeys = max(1, spc * self.ncta)
        # parts of an access (program.lane_part): 0 the leader lane, 1 the whole process, 2 + i the
        # i-th set of some lanes that the programs use (a lane guard)
        self.lane_sets = sorted({ins.lanes for p in self.live for ins in m.programs[p].code
                                 if ins.kind == OP and lane_part(m.procs[p], ins.lanes)[0] > FULL})
        # the warps that share wgmma-groups (Machine._wgmma_wait), by team number
        self.teams = [team for team in m.teams if len(team) > 1]
        self.facts = self._dry_run()
        why = lane_pairs_refusal({k: u.lanes for k, u in self.facts.keys.items()})
        if why:
            raise ExportError(why)
        self.track_akn = any(k.generic_writes for k in self.facts.keys.values())
        self.track_grp = any(k.async_reads for k in self.facts.keys.values())
        self.keep_superseded = self.facts.remote_release and self.track_akn
        self.track_region = self.facts.regions
        if self.track_region and self.keep_superseded:
            raise ExportError("regions of slots (`part ...` / `bytes LO..HI`) in a protocol that releases generic "
                              "data to a peer CTA's barrier: the superseded writes the SV602 check keeps are not "
                              "mirrored per region; not exported")
        self.cap = max([k.capacity() for k in self.facts.keys.values()] + [1])
        ids = sorted(self.facts.nb_ids) or [0]
        self.id_min, self.nids = ids[0], ids[-1] - ids[0] + 1
        self.nnb = self.nids * self.ncta
        # waiter slots per mbarrier; one at least where a wait is written that these params never reach
        # (a loop of no trips), since its guard still names the array
        writes_wait = any(self.waited_names(p) for p in self.live)
        self.nj = max([len(v) for v in self.facts.waiters.values()] + [int(writes_wait)])
        self.widx = {(name, p): i for name, ps in self.facts.waiters.items() for i, p in enumerate(ps)}
        self.ntm = (self.ncta + 1) // 2 * 2
        # knowledge holders: leader and other lanes of each live process, each mbarrier's current and
        # last phase, each named barrier slot, the cluster barrier's current and last generation
        self.h_lead = {p: 2 * i for i, p in enumerate(self.live)}
        self.mb_base = 2 * len(self.live)
        self.nb_base = self.mb_base + 2 * len(m.mb_names)
        self.cl_cur = self.nb_base + self.nnb
        self.cl_last = self.cl_cur + 1
        self.nholders = self.cl_last + 1
        self.nw = math.ceil(self.nholders / BITS)

    # ------------------------------------------------------------------ one run of every process
    def _dry_run(self) -> _Facts:
        m = self.machine
        facts = _Facts()
        for p in self.live:
            pc, vars_ = self.init_procs[p][0], self.init_procs[p][1]
            code = m.programs[p].code
            steps = 0
            while code[pc].kind != END:
                ins = code[pc]
                if ins.kind == OP:
                    self._visit(facts, p, ins, m.env(p, vars_))
                steps += 1
                facts.steps += 2 if ins.kind == OP and isinstance(ins.op, ir.TmemAlloc) else 1
                if steps > 1_000_000:
                    raise ExportError(f"{m.proc_label(p)} runs more than a million operations; too large to export")
                try:
                    pc, vars_ = m._run_local(p, pc + 1, vars_)
                except Violation as v:
                    raise ExportError(f"{v.code}: {v.message}") from None
            facts.steps += 1  # the step that ends the process
        facts.steps += sum(k.copies for k in facts.keys.values())  # every copy completes once
        return facts

    def _val(self, e: ir.Expr | None, p: int, env: dict, what: str = "") -> int:
        """Evaluate as the engine will, and check every sub-expression fits a Promela int."""
        if e is None:
            return 0
        ctx = self.machine.ctx[p]
        for sub in _evaluated(e, env, ctx):
            try:
                v = evaluate(sub, env, ctx)
            except EvalError as err:
                raise ExportError(f"line {e.span.line}: {what or 'expression'} cannot be evaluated: {err}") from None
            if abs(v) > INT_LIMIT:
                raise ExportError(f"line {e.span.line}: value {v} does not fit a 32-bit Promela int")
        return evaluate(e, env, ctx)

    def _refuse(self, code: str, line: int, msg: str) -> ExportError:
        return ExportError(f"line {line}: {code}: {msg} (`syncverify check` reports this; the export needs a "
                           "protocol free of it)")

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

    def _visit(self, facts: _Facts, p: int, ins, env: dict) -> None:
        op = ins.op
        proc = self.machine.procs[p]
        line = op.span.line
        if isinstance(op, ir.Syncwarp) and p in self.machine.warp_parts:
            raise ExportError(f"line {line}: `syncwarp` by part of a warp split between roles (its parts meet, a "
                              "rendezvous the model does not have)")
        if isinstance(op, ir.CpAsync | ir.CpAsyncArrive | ir.MbarTestWait) or (
                isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "cp_async"):
            raise ExportError(f"line {line}: non-bulk cp.async (with its groups and mbarrier arrive) and test_wait "
                              "are not exported")
        if (isinstance(op, ir.TmaStore) or (isinstance(op, ir.GroupCommit | ir.GroupWait) and op.unit == "bulk")) \
                and self.machine._part(p, ins) != LEADER and proc.lane_mask & (proc.lane_mask - 1):
            # one bulk copy per lane, each retired by its own lane's wait (Machine.op_group_wait, F_LANEWISE):
            # the model's group_wait lets every lane learn them all
            raise ExportError(f"line {line}: a bulk store group of several lanes (one copy per lane, retired lane "
                              "by lane) is not exported; issue it under `elect`")

        def mb_index(ref: ir.Ref) -> None:
            decl = self.protocol.mbarrier(ref.name)
            if ref.index is not None and not ref.every:
                idx = self._val(ref.index, p, env, "barrier index")
                if not 0 <= idx < (decl.size or 1):
                    raise self._refuse("SV104", line, f"index {idx} out of range for `{ref.name}`")

        def target(remote: ir.Expr | None) -> int:
            if remote is None:
                return proc.cta
            cta = self._val(remote, p, env, "CTA rank")
            if not 0 <= cta < self.ncta:
                raise self._refuse("SV405", line, f"remote rank {cta} outside the cluster")
            return cta

        def key(ref: ir.Ref, cta: int) -> int:
            decl = self.protocol.buffer(ref.name)
            slot = 0
            if ref.index is not None:
                slot = self._val(ref.index, p, env, "slot index")
                if not 0 <= slot < (decl.slots or 1):
                    raise self._refuse("SV104", line, f"index {slot} out of range for `{ref.name}`")
            return cta * self.spc + self.buf_off[ref.name] + slot

        def mask_ctas(expr: ir.Expr) -> list[int]:
            mask = self._val(expr, p, env, "multicast mask")
            if mask <= 0 or mask >= 1 << self.ncta:
                raise self._refuse("SV405", line, f"multicast mask {mask:#b} outside the cluster")
            return [c for c in range(self.ncta) if mask >> c & 1]

        part = self.who(p, ins)[0]
        if isinstance(op, ir.MbarInit):
            decl = self.protocol.mbarrier(op.bar.name)
            count = decl.count if op.count is None else self._val(op.count, p, env)
            if count is None or not 1 <= count <= rules.MAX_COUNT:
                raise self._refuse("SV105", line, f"init count {count} outside 1..2^20-1")
            mb_index(op.bar)
        elif isinstance(op, ir.MbarInval):
            mb_index(op.bar)
        elif isinstance(op, ir.MbarArrive):
            target(op.remote)
            mb_index(op.bar)
            self._val(op.count, p, env)
            self._val(op.tx_bytes, p, env)
            if op.remote is not None and op.sem == "release":
                facts.remote_release = True
        elif isinstance(op, ir.MbarTx):
            target(op.remote)
            mb_index(op.bar)
            self._val(op.tx_bytes, p, env)
        elif isinstance(op, ir.MbarWait):
            mb_index(op.bar)
            if self._val(op.parity, p, env) < 0:
                raise ExportError(f"line {line}: a negative parity operand is not exported")
            if p not in facts.waiters[op.bar.name]:
                facts.waiters[op.bar.name].append(p)
        elif isinstance(op, ir.BarSync | ir.BarArrive):
            bar_id = self._val(op.bar_id, p, env)
            if not 0 <= bar_id <= 15:
                raise self._refuse("SV106", line, f"named-barrier id {bar_id} outside 0..15")
            if op.count is not None:
                count = self._val(op.count, p, env)
                if count <= 0 or count % 32 or count > self.protocol.threads:
                    raise self._refuse("SV106", line, f"named-barrier count {count}")
            facts.nb_ids.add(bar_id)
        elif isinstance(op, ir.Access):
            k = key(op.buf, target(op.remote))
            lo, hi = self.region_bytes(op, p, env)
            facts.regions |= (lo, hi) != (0, WHOLE_HI)
            facts.keys[k].lanes.add((p, part, op.kind == "write", line, lo, hi))
            if op.kind == "write":
                facts.keys[k].generic_writes += 1
                if (lo, hi) != (0, WHOLE_HI):
                    facts.keys[k].region_writers.add((p, lo, hi))
            else:
                facts.keys[k].generic_readers.add((p, part, lo, hi))
        elif isinstance(op, ir.TmaLoad) and op.cta_group == 2:
            raise ExportError(f"line {line}: `tma.load cta_group 2` is not exported (a 2-SM copy signalled on the "
                              "pair leader's barrier has no Promela counterpart yet); check this protocol with "
                              "`syncverify check`")
        elif isinstance(op, ir.TmaLoad):
            if ins.threads != 1:
                raise ExportError(f"line {line}: `tma.load` executed by {ins.threads} threads at once (outside "
                                  "`elect`) is not exported: put it in `elect`")
            nbytes = self._val(op.tx_bytes, p, env)
            if nbytes <= 0 or nbytes % 16:
                raise self._refuse("SV107", line, f"copy of {nbytes} bytes")
            dests = [proc.cta] if op.multicast is None else mask_ctas(op.multicast)
            mb_index(op.bar)
            for c in dests:
                facts.keys[key(op.buf, c)].copies += 1
        elif isinstance(op, ir.TmaStore | ir.WgmmaRead):
            facts.keys[key(op.buf, proc.cta)].async_reads += 1
        elif isinstance(op, ir.GroupWait):
            self._val(op.pending, p, env)
        elif isinstance(op, ir.TmemAlloc):
            if op.cta_group == 2:
                if proc.cta ^ 1 >= self.ncta:
                    raise self._refuse("SV405", line, "cta_group 2 needs the peer CTA (rank ^ 1) in the cluster")
                facts.tmem_pairs = True
        elif isinstance(op, ir.UmmaCommit):
            raise ExportError(f"line {line}: `tcgen05.commit` (`umma.commit`) is not exported (its in-order "
                              "delivery assumption has no Promela counterpart yet); check this protocol with "
                              "`syncverify check`")
        elif isinstance(op, ir.TCGEN05_OPS):
            raise ExportError(f"line {line}: `{ir.blackwell_op_name(op)}` is not exported (tensor-memory accesses, the "
                              "tcgen05 fences and 2-SM copies have no Promela counterpart yet); check this protocol "
                              "with `syncverify check`")

    def max_depth(self) -> int:
        """Every step of every process and copy once, plus creating the processes and the monitor."""
        return self.facts.steps + 2 * len(self.live) + len(self.facts.keys) + 16

    # ------------------------------------------------------------------ templates
    def templates(self) -> list[list[int]]:
        """Processes that run the same compiled program in the same CTA with the same thread count
        share one proctype; what tells them apart (their index, knowledge bits, instance, waiter
        slots) is passed as parameters, which keeps the model (and SPIN's compile) small."""
        groups: dict[tuple, list[int]] = {}
        for p in self.live:
            proc = self.machine.procs[p]
            key = (self.machine.programs[p].code, proc.cta, proc.nthreads, self.machine.ctx[p].roles,
                   self.init_procs[p][:2])
            groups.setdefault(key, []).append(p)
        return list(groups.values())

    def waited_names(self, p: int) -> list[str]:
        return sorted({ins.op.bar.name for ins in self.machine.programs[p].code
                       if ins.kind == OP and isinstance(ins.op, ir.MbarWait)})

    def params(self, p: int) -> list[tuple[str, str, int]]:
        """(type, name, value) of the proctype parameters of process p."""
        h = self.h_lead[p]
        out = [("byte", "me", p), ("byte", "lw", h // BITS), ("int", "lb", 1 << (h % BITS)),
               ("int", "wb", 1 << ((h + 1) % BITS)), ("short", "hl", h),
               ("int", "lpb", 1 << (p - self.machine.procs[p].cta * self.ppc)),
               ("byte", "inst", self.machine.ctx[p].instance)]
        # a wait these params never reach (a loop of no trips) has no waiter index: any value does
        out += [("byte", f"wi_{n}", self.widx.get((n, p), 0)) for n in self.waited_names(p)]
        return out

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr, p: int) -> str:
        """A Promela expression; arithmetic is C's on both sides (expr.py: `/` and `%` truncate).
        `instance` is the proctype parameter `inst`; everything else about the process is static."""
        ctx: Context = self.machine.ctx[p]
        match e:
            case ir.Const(value=v):
                return str(v) if v >= 0 else f"({v})"
            case ir.Var(name=n):
                return f"v_{n}"
            case ir.Builtin(name=n):
                return str(ctx.cta) if n == "cta" else "inst"
            case ir.InRole(role=r):
                return "1" if r in ctx.roles else "0"
            case ir.UnOp(op=o, operand=x):
                return f"(-{self.expr(x, p)})" if o == "-" else f"(!{self.expr(x, p)})"
            case ir.BinOp(op=o, left=a, right=b):
                return f"({self.expr(a, p)} {o} {self.expr(b, p)})"
            case ir.Cond(cond=c, then=a, orelse=b):  # Promela's conditional expression
                return f"({self.expr(c, p)} -> {self.expr(a, p)} : {self.expr(b, p)})"
            case ir.Pick(name=n, values=values, index=ir.Const(value=i), per_cta=per_cta):
                row = values[ctx.cta if per_cta else 0]
                if 0 <= i < len(row):
                    return str(row[i]) if row[i] >= 0 else f"({row[i]})"
                raise ExportError(f"line {e.span.line}: index {i} is out of range for `{n}[{len(row)}]`")
            case ir.Pick(name=n):
                raise ExportError(f"line {e.span.line}: the `choose` array `{n}` is indexed by a variable; the "
                                  "model has no range check for it (check the protocol with `syncverify check`)")
        raise ExportError(f"cannot translate expression {e!r}")

    def mb_expr(self, ref: ir.Ref, p: int, cta: str) -> str:
        idx = "0" if ref.index is None else self.expr(ref.index, p)
        return f"(({cta}) * {self.mbpc} + {self.mb_off[ref.name]} + {idx})"

    def key_expr(self, ref: ir.Ref, p: int, cta: str) -> str:
        idx = "0" if ref.index is None else self.expr(ref.index, p)
        return f"(({cta}) * {self.spc} + {self.buf_off[ref.name]} + {idx})"

    def lanes(self, p: int, ins) -> str:
        """The executing lanes' knowledge mask (machine._lanes): the leader, the other lanes, or both.
        Both bits of a process share the word `lw` (BITS is even)."""
        _, leader, others = self.who(p, ins)
        return "(lb | wb)" if leader and others else "lb" if leader else "wb"

    def who(self, p: int, ins) -> tuple[int, bool, bool]:
        """(part as the model numbers it, leader lane takes part, another lane does): Machine._part."""
        proc = self.machine.procs[p]
        if ins.leader_only or proc.nthreads == 1:
            return LEADER, True, False
        if not ins.lanes or ins.lanes == proc.lane_mask:
            return FULL, True, True
        _, leader, others = lane_part(proc, ins.lanes)
        return 2 + self.lane_sets.index(ins.lanes), leader, others

    def part_lanes_c(self) -> list[str]:
        """C: the lanes (of its warp) that made an access of part `part` by process `me`."""
        sets = ", ".join(f"{m:#x}u" for m in self.lane_sets) or "0u"
        lead = ", ".join(f"{1 << self.machine.procs[q].leader_lane:#x}u" for q in range(self.nprocs))
        whole = ", ".join(f"{self.machine.procs[q].lane_mask:#x}u" for q in range(self.nprocs))
        team = ", ".join(str(next((i for i, t in enumerate(self.teams) if q in t), -1)) for q in range(self.nprocs))
        return [
            f"static const unsigned lane_sets[] = {{ {sets} }};",
            f"static const unsigned lead_lane[] = {{ {lead} }};",
            f"static const unsigned all_lanes[] = {{ {whole} }};",
            f"static const int team_of[] = {{ {team} }};",
            "static unsigned part_lanes(int me, int part) {",
            "  return part == 0 ? lead_lane[me] : part == 1 ? all_lanes[me] : lane_sets[part - 2];",
            "}",
        ]

    # ------------------------------------------------------------------ the model
    def render(self) -> str:
        out: list[str] = []
        w = out.append
        proto = self.protocol
        w(f"/* Promela model of protocol `{proto.name}` ({proto.path}), generated by `syncverify export --promela`.")
        params = ", ".join(f"{k}={v}" for k, v in proto.params) or "none"
        w(f"   params: {params}. Verify with: spin -a model.pml && gcc -DSAFETY -O2 -o pan pan.c && "
          f"./pan -m{self.max_depth()}")
        w("   An assertion names the syncverify code it checks (`cond || SVnnn`); a deadlock fails the monitor's")
        w("   assertion SV201 (syncverify says SV503 when bytes never balance). See docs/promela.md. */")
        w("")
        for name, value in (("NW", self.nw), ("CAP", self.cap), ("NKEYS", self.nkeys),
                            ("NMB", max(1, len(self.machine.mb_names))), ("NCTA", self.ncta), ("NNB", self.nnb)):
            w(f"#define {name} {value}")
        w("")
        w("typedef Mask { int w[NW] }")
        fields = ["bit kind", "byte owner", "byte part", "byte flags", "short site"]
        if self.track_region:
            fields += ["int lo", "int hi"]  # the bytes of the slot it touches (semantics/families/regions.py)
        if self.track_grp:
            fields.append("short grp")
        fields.append("int kn[NW]")
        if self.track_akn:
            fields.append("int akn[NW]")
        w("/* an access record (semantics/state.py): who accessed, and which holders are ordered after it */")
        w("typedef Rec { " + "; ".join(fields) + " }")
        w("Rec R[NKEYS * CAP]; byte nrec[NKEYS];")
        w(f"short wseq[{self.nprocs}];   /* committed wgmma-groups, per process (team waits compare them) */")
        w("/* mbarriers: rules.Mbar, whether the last phase was observed, each waiter's last observed phase,")
        w("   whether cross-CTA data were released into the current / last phase */")
        w("bit mvalid[NMB]; short mk[NMB]; int mpend[NMB]; int mexp[NMB]; int mtx[NMB]; bit mobs[NMB] = 1; "
          "byte mrd[NMB];")
        if self.nj:
            w(f"short jp[NMB * {self.nj}] = {NO_JPREV};")
        w("bit iex[NMB]; byte iown[NMB]; Mask ikn[NMB]; Mask iakn[NMB];   /* init records */")
        w("Mask skn[NCTA];   /* CTA start records */")
        w(f"short nbcnt[NNB] = {ALL_THREADS}; short nbarr[NNB]; short nbgen[NNB]; int nbw[NNB];   "
          "/* named barriers (rules.NamedBar) and the warps parked on them */")
        w("short cgen; short carr;   /* the cluster barrier (rules.ClusterBar) */")
        w("byte alive_procs[NCTA]; short alive_thr[NCTA]; short alive_all;")
        w("bit ag_live[NKEYS]; byte ag_m[NKEYS]; int ag_bytes[NKEYS]; byte ag_iss[NKEYS]; short ag_site[NKEYS];")
        if self.facts.tmem_pairs:
            w(f"byte tm_arr[{self.ntm}]; short tm_gen[{self.ntm}];")
        w("hidden int _q, _m, _t, _c, _n, _x, _j, _a, _b, _r, _w, _l;")
        if self.track_region:
            w(f"hidden int _lo, _hi = {WHOLE_HI};   /* the region of the access being made (whole: 0..{WHOLE_HI}) */")
        w("hidden int _mb0, _mb1, _mb2, _mb3, _mb4;   /* a barrier's fields after a rule (mb_update) */")
        w("hidden byte " + ", ".join(CODES) + ";   /* always 0: they name the check in SPIN's report */")
        w("")
        out.extend(self.c_helpers())
        out.extend(self.inlines())
        groups = self.templates()
        for t, procs in enumerate(groups):
            out.extend(self.proctype(t, procs[0]))
        agent_keys = sorted(k for k, use in self.facts.keys.items() if use.copies)
        for k in agent_keys:
            out.extend(self.agent(k))
        out.extend(self.init_proc(groups, agent_keys))
        return "\n".join(out) + "\n"

    def c_helpers(self) -> list[str]:
        """The knowledge operations of semantics/state.py over every live record, as C loops (one
        definition each: written in Promela, every call site would expand them)."""
        akn = self.track_akn
        grp = self.track_grp

        def both(stmt: str) -> str:
            return stmt.format(x="kn") + (" " + stmt.format(x="akn") if akn else "")

        recs = "for (q = 0; q < NKEYS; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)"
        shift = "if (k_has({a}, c)) k_set({a}, l); else k_clr({a}, l); k_clr({a}, c);"
        lines = [
            "c_code {",
            f"static int k_has(int *a, int h) {{ return (a[h / {BITS}] >> (h % {BITS})) & 1; }}",
            f"static void k_set(int *a, int h) {{ a[h / {BITS}] |= 1 << (h % {BITS}); }}",
            f"static void k_clr(int *a, int h) {{ a[h / {BITS}] &= ~(1 << (h % {BITS})); }}",
            "/* state.release: records known by the lanes (word lw, mask lm) become known by holder t */",
            "static void k_rel(int lw, int lm, int t) {",
            "  int q, i;",
            f"  {recs} {{ {both('if (now.R[i].{x}[lw] & lm) k_set(now.R[i].{x}, t);')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (now.ikn[i].w[lw] & lm) k_set(now.ikn[i].w, t);",
            "    if (now.iakn[i].w[lw] & lm) k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            *self.part_lanes_c(),
            "/* state.release_partial: some lanes of process me release; the other-lanes holder does not",
            "   publish me's own generic accesses made by a lane outside `rel` */",
            "static void k_rel_lanes(int me, int lw, int lm, int lb, unsigned rel, int t) {",
            "  int q, i, src;",
            f"  {recs} {{",
            "    src = (now.R[i].owner == me && !(now.R[i].flags & 129) && now.R[i].part != 0",
            "           && (part_lanes(me, now.R[i].part) & ~rel)) ? (lm & lb) : lm;",
            f"    {both('if (now.R[i].{x}[lw] & src) k_set(now.R[i].{x}, t);')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (now.ikn[i].w[lw] & lm) k_set(now.ikn[i].w, t);",
            "    if (now.iakn[i].w[lw] & lm) k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            "/* barriers._mark_warpsynced: after me's syncwarp, its own generic accesses that its lanes know",
            "   are held whole by every lane (state.F_WARPSYNCED = 128) */",
            "static void k_warpsync(int me, int lw, int lm) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].owner == me && now.R[i].part != 0 && !(now.R[i].flags & 1)",
            "      && (now.R[i].kn[lw] & lm) == lm) now.R[i].flags |= 128;",
            "}",
            "/* state.release(relaxed=True): only inits published by fence.mbarrier_init and CTA starts */",
            "static void k_rel_relaxed(int lw, int lm, int t) {",
            "  int i;",
            "  for (i = 0; i < NMB; i++) if (now.iex[i] && (now.iakn[i].w[lw] & lm)) {",
            "    k_set(now.ikn[i].w, t); k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            "/* state.acquire: records known by holder s become known by the lanes */",
            "static void k_acq(int s, int lw, int lm) {",
            "  int q, i;",
            f"  {recs} {{ {both('if (k_has(now.R[i].{x}, s)) now.R[i].{x}[lw] |= lm;')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (k_has(now.ikn[i].w, s)) now.ikn[i].w[lw] |= lm;",
            "    if (k_has(now.iakn[i].w, s)) now.iakn[i].w[lw] |= lm; }",
            "  for (i = 0; i < NCTA; i++) if (k_has(now.skn[i].w, s)) now.skn[i].w[lw] |= lm;",
            "}",
            "/* state.shift_phase: the knowledge of the current phase (c) becomes the last phase's (l) */",
            "static void k_shift(int c, int l) {",
            "  int q, i;",
            f"  {recs} {{ {shift.format(a='now.R[i].kn')}"
            + (f" {shift.format(a='now.R[i].akn')}" if akn else "") + " }",
            f"  for (i = 0; i < NMB; i++) {{ {shift.format(a='now.ikn[i].w')} {shift.format(a='now.iakn[i].w')} }}",
            f"  for (i = 0; i < NCTA; i++) {{ {shift.format(a='now.skn[i].w')} }}",
            "}",
            "/* state.clear_bits for one holder */",
            "static void k_clear(int h) {",
            "  int q, i;",
            f"  {recs} {{ {both('k_clr(now.R[i].{x}, h);')} }}",
            "  for (i = 0; i < NMB; i++) { k_clr(now.ikn[i].w, h); k_clr(now.iakn[i].w, h); }",
            "  for (i = 0; i < NCTA; i++) k_clr(now.skn[i].w, h);",
            "}",
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
        if akn:
            lines += [
                "/* machine._conflicts, async side: a generic write of key q not fenced into the async proxy */",
                "static int unfenced(int q, int lw, int lm) {",
                "  int x;",
                "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++) {"
                + (" if (now.R[x].lo >= _hi || _lo >= now.R[x].hi) continue;" if self.track_region else ""),
                "    if (now.R[x].kind == 1 && !(now.R[x].flags & 9) && (now.R[x].akn[lw] & lm) != lm) return 1; }",
                "  return 0;",
                "}",
                "/* fence.proxy.async (families/proxy_fence.py): in the slots of keys klo..khi-1, this",
                "   process's own generic writes (when own) and the writes it acquired (holders fm) */",
                "static void fence_proxy(int me, int part, int pw, int pm, int fm, int klo, int khi, int own) {",
                "  int q, i;",
                "  for (q = klo; q < khi; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)",
                "    if (now.R[i].kind == 1 && !(now.R[i].flags & 1)) {",
                "      if (now.R[i].owner != me) now.R[i].akn[pw] |= now.R[i].kn[pw] & fm;",
                "      else if (own && !(part_lanes(me, now.R[i].part) & ~part_lanes(me, part)))",
                "        now.R[i].akn[pw] |= now.R[i].kn[pw] & pm; }",
                "}",
            ]
        lines += [
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
            "/* fence.mbarrier_init: this thread's inits are published at cluster scope */",
            "static void fence_init(int me, int pw, int pm) {",
            "  int i;",
            "  for (i = 0; i < NMB; i++)",
            "    if (now.iex[i] && now.iown[i] == me) now.iakn[i].w[pw] |= now.ikn[i].w[pw] & pm;",
            "}",
            "/* machine._check_cross_cta_release: does the release carry a generic write made outside",
            "   the barrier's CTA? */",
            "static int carries(int lw, int lm, int cta, int ppc) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].kind == 1 && !(now.R[i].flags & 1) && (now.R[i].kn[lw] & lm)",
            "      && now.R[i].owner / ppc != cta) return 1;",
            "  return 0;",
            "}",
            "/* MbarrierOps._check_cta_scope_data: does the waiter (lanes lm of word lw) learn from holder t",
            "   a generic write made outside its CTA that it does not already know? */",
            "static int learns(int t, int lw, int lm, int cta, int ppc) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].kind == 1 && !(now.R[i].flags & 1) && k_has(now.R[i].kn, t)",
            "      && (now.R[i].kn[lw] & lm) != lm && now.R[i].owner / ppc != cta) return 1;",
            "  return 0;",
            "}",
            "/* a bulk copy completes: its record is no longer in flight and is known only by the phase",
            "   holder cur (the .release.cluster of complete_tx covers the copy's own write) */",
            "static void copy_lands(int q, int iss, int site, int cur) {",
            "  int x;",
            "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++)",
            "    if ((now.R[x].flags & 2) && now.R[x].owner == iss && now.R[x].site == site) {",
            "      now.R[x].flags &= ~2; memset(now.R[x].kn, 0, sizeof(now.R[x].kn));"
            + (" memset(now.R[x].akn, 0, sizeof(now.R[x].akn));" if akn else ""),
            "      k_set(now.R[x].kn, cur);" + (" k_set(now.R[x].akn, cur);" if akn else ""),
            "      return;",
            "    }",
            "}",
        ]
        if grp:
            lines += [
                "/* wgmma.wait / bulk.wait_read: the retired groups' reads become ordered before the lanes.",
                "   Groups are per thread: an elected lane's wait does not retire the other lanes' reads,",
                "   and a warp's wait orders an elected lane's read before that lane alone. */",
                "static void group_wait(int me, int unit, int limit, int lw, int lm, int waiter, int lead) {",
                "  int q, i, learn;",
                f"  {recs} if (now.R[i].owner == me && now.R[i].grp >= 0 && now.R[i].grp % 2 == unit",
                "      && now.R[i].grp / 2 < limit && !(waiter == 0 && now.R[i].part == 1)) {",
                "    learn = now.R[i].part == 0 ? (lm & lead) : lm;",
                "    now.R[i].grp = -1; now.R[i].kn[lw] |= learn;" + (" now.R[i].akn[lw] |= learn;" if akn else ""),
                "  }",
                "}",
                *self.team_knows_c(),
                "/* Machine._wgmma_wait: a warp of a warpgroup (team) learns every team warp's wgmma reads of the",
                "   groups before the limit; a read keeps its tag until the whole team knows it (flag 32: complete) */",
                "static void team_wait(int me, int limit, int lw, int lm, int waiter, int lead) {",
                "  int q, i, learn;",
                f"  {recs} if (now.R[i].grp >= 0 && now.R[i].grp % 2 == 1 && now.R[i].grp / 2 < limit",
                "      && team_of[now.R[i].owner] == team_of[me] && !(waiter == 0 && now.R[i].part == 1)) {",
                "    learn = now.R[i].part == 0 ? (lm & lead) : lm;",
                "    now.R[i].kn[lw] |= learn;" + (" now.R[i].akn[lw] |= learn;" if akn else "")
                + " now.R[i].flags |= 32;",
                "    if (team_knows(team_of[me], now.R[i].kn)) now.R[i].grp = -1;",
                "  }",
                "}",
                "/* machine._exit: an async read of a slot of this CTA never retired */",
                "static int unretired(int lo, int hi) {",
                "  int q, i;",
                "  for (q = lo; q < hi; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)",
                "    if (now.R[i].grp >= 0 && !(now.R[i].flags & 32)) return 1;",
                "  return 0;",
                "}",
            ]
        lines += ["}", ""]
        return lines

    def team_knows_c(self) -> list[str]:
        """C: does every holder of every warp of team t know the record (knowledge words kn)?"""
        L = ["static int team_knows(int t, int *kn) {"]
        for t, team in enumerate(self.teams):
            words: dict[int, int] = defaultdict(int)
            for q in team:
                h = self.h_lead[q]
                words[h // BITS] |= 3 << (h % BITS)
            test = " && ".join(f"(kn[{wd}] & {mask:#x}) == {mask:#x}" for wd, mask in sorted(words.items()))
            L.append(f"  if (t == {t}) return {test};")
        L += ["  return 0;", "}"]
        return L

    def inlines(self) -> list[str]:
        L = [
            "/* machine._set_mb after a rule changed barrier _m whose phase was _t: a completed phase moves the",
            "   current phase's knowledge to the last one and must be observed again (consumption rule) */",
            "inline mb_after() {",
            f"  if :: mk[_m] != _t -> _c = {self.mb_base} + 2 * _m; _n = _c + 1; c_code {{ k_shift(_c, _n); }};",
            "        mobs[_m] = 0; mrd[_m] = (mrd[_m] & 5) * 2",
            "  :: else -> skip fi",
            "}",
            "/* machine._cb_try_complete: every thread not exited has arrived (rules.cb_completes) */",
            "inline cb_try_complete() {",
            f"  if :: carr > 0 && carr >= alive_all -> _c = {self.cl_cur}; _n = {self.cl_last}; "
            "c_code { k_shift(_c, _n); }; cgen = cgen + 1; carr = 0",
            "  :: else -> skip fi",
            "}",
        ]
        for c in range(self.ncta):
            L += self.nb_try_complete(c)
        L.append("")
        return L

    def nb_try_complete(self, cta: int) -> list[str]:
        """machine._nb_try_complete for the named-barrier slot _m of this CTA: at the count (or every
        thread not exited, for `syncthreads`), the parked warps acquire the generation's releases,
        a new generation opens, and the generation's holder is emptied."""
        L = [f"inline nb_try_complete_{cta}() {{",
             f"  if :: nbarr[_m] > 0 && nbarr[_m] >= (nbcnt[_m] == {ALL_THREADS} -> alive_thr[{cta}] : nbcnt[_m]) ->",
             f"     _c = {self.nb_base} + _m;"]
        for q in self.live:
            if self.machine.procs[q].cta != cta:
                continue
            h = self.h_lead[q]
            bit = 1 << (q - cta * self.ppc)
            L.append(f"     if :: (nbw[_m] & {bit}) != 0 -> c_code {{ k_acq(_c, {h // BITS}, {3 << (h % BITS)}); }} "
                     ":: else -> skip fi;")
        L += ["     nbgen[_m] = nbgen[_m] + 1; nbarr[_m] = 0; nbcnt[_m] = -1; nbw[_m] = 0;   /* rules.nb_complete */",
              "     c_code { k_clear(_c); }",
              "  :: else -> skip",
              "  fi",
              "}"]
        return L

    # ---- per-operation code
    def usable(self, m: str, lanes: str, remote: str | None, what: str, cta: int) -> list[str]:
        """machine._check_barrier_usable: valid, and the init ordered before this use (SV401; SV402
        for a peer CTA's barrier, which must also still be running: SV404)."""
        ok = f"(mvalid[{m}] && (ikn[{m}].w[lw] & {lanes}) == {lanes})"
        if remote is None:
            return [f"assert({ok} || SV401);   /* {what} */"]
        return [f"if :: ({remote}) != {cta} -> assert(alive_procs[{remote}] > 0 || SV404); assert({ok} || SV402)",
                f"   :: else -> assert({ok} || SV401) fi;   /* {what} */"]

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

    def op_code(self, p: int, ins) -> tuple[list[str], str]:
        """The body of one operation step and its guard (the condition under which it can move)."""
        op = ins.op
        proc = self.machine.procs[p]
        cta = proc.cta
        lanes = self.lanes(p, ins)
        part = self.who(p, ins)[0]
        line = op.span.line
        threads = ins.threads
        E = lambda e: self.expr(e, p)  # noqa: E731
        b: list[str] = []
        guard = "true"
        if isinstance(op, ir.MbarInit):
            decl = self.protocol.mbarrier(op.bar.name)
            count = str(decl.count) if op.count is None else E(op.count)
            targets = ([f"{cta * self.mbpc + self.mb_off[op.bar.name] + i}" for i in range(decl.size or 1)]
                       if op.bar.every else [self.mb_expr(op.bar, p, str(cta))])
            for m in targets:
                b.append(f"_m = {m};")
                b.append(f"assert((!mvalid[_m] && {threads} <= 1) || SV403);   /* init of a live barrier, or by "
                         "several threads */")
                b.append(mb_update(rules.mb_init, str(count)))
                b.append("mobs[_m] = 1; mrd[_m] = 0;")
                if self.nj:
                    b.append(f"_j = 0; do :: _j < {self.nj} -> jp[_m * {self.nj} + _j] = {NO_JPREV}; _j++ "
                             ":: else -> break od;")
                b.append(f"_c = {self.mb_base} + 2 * _m; c_code {{ k_clear(_c); k_clear(_c + 1); }};")
                b.append("iex[_m] = 1; iown[_m] = me; _j = 0; do :: _j < NW -> ikn[_m].w[_j] = 0; iakn[_m].w[_j] = 0; "
                         "_j++ :: else -> break od;")
                b.append(f"ikn[_m].w[lw] = {lanes};   /* the init record, known by the initializing lanes */")
        elif isinstance(op, ir.MbarInval):
            decl = self.protocol.mbarrier(op.bar.name)
            targets = ([f"{cta * self.mbpc + self.mb_off[op.bar.name] + i}" for i in range(decl.size or 1)]
                       if op.bar.every else [self.mb_expr(op.bar, p, str(cta))])
            for m in targets:
                b.append(f"_m = {m};")
                b += self.usable("_m", lanes, None, "inval", cta)
                b.append(mb_update(rules.mb_inval))
                b.append("iex[_m] = 0;   /* the init record goes */")
        elif isinstance(op, ir.MbarArrive):
            tcta = str(cta) if op.remote is None else E(op.remote)
            if op.local_form:  # MbarrierOps.check_local_form
                b.append(f"assert(({tcta}) == {cta} || SV407);   /* .shared::cta arrive on a peer's barrier */")
            b.append(f"_c = {tcta}; _m = {self.mb_expr(op.bar, p, '_c')};")
            b += self.usable("_m", lanes, None if op.remote is None else "_c", "arrive", cta)
            b.append("assert(mobs[_m] || SV502);   /* consumption rule: the previous phase was observed */")
            b.append(f"_n = {E(op.count)} * {threads};")
            if op.drop:
                b.append("assert(_n < mexp[_m] || SV504);   /* arrive_drop taking the expected count to 0 */")
            b.append("assert(_n <= mpend[_m] || SV504);   /* rules.arrive_overflows */")
            b.append("_t = mk[_m];")
            if op.tx_bytes is not None:
                b.append(f"_x = {E(op.tx_bytes)} * {threads};")
                b.append(f"assert((mtx[_m] + _x >= -{rules.MAX_COUNT} && mtx[_m] + _x <= {rules.MAX_COUNT}) "
                         "|| SV503);   /* rules.tx_out_of_range */")
                rule = rules.mb_arrive_drop_expect_tx if op.drop else rules.mb_arrive_expect_tx
                b.append(mb_update(rule, "_x", "_n"))
            else:
                b.append(mb_update(rules.mb_arrive_drop if op.drop else rules.mb_arrive, "_n"))
            if op.sem == "release":
                if op.remote is not None:
                    b.append(f"_a = lw; _b = {lanes}; c_code {{ _r = carries(_a, _b, _c, {self.ppc}); }};")
                    # a .cta-scope one is judged at the acquiring waits of the phase (bit 2: learns)
                    b.append(f"mrd[_m] = mrd[_m] | _r{' * 5' if op.scope == 'cta' else ''};")
                if part > FULL:  # some lanes: each publishes its own part only (program.own_part_hidden)
                    b.append(f"_a = lw; _b = {lanes}; _l = lb; _c = {self.mb_base} + 2 * _m; "
                             f"c_code {{ k_rel_lanes({{me}}, _a, _b, _l, {self.lane_sets[part - 2]:#x}u, _c); }};")
                else:
                    b.append(f"_a = lw; _b = {lanes}; _c = {self.mb_base} + 2 * _m; c_code {{ k_rel(_a, _b, _c); }};")
            b.append("mb_after();")
        elif isinstance(op, ir.MbarTx):
            tcta = str(cta) if op.remote is None else E(op.remote)
            b.append(f"_c = {tcta}; _m = {self.mb_expr(op.bar, p, '_c')};")
            b += self.usable("_m", lanes, None if op.remote is None else "_c", f"{op.kind}_tx", cta)
            b.append(f"_x = {E(op.tx_bytes)} * {threads}; _t = mk[_m];")
            sign = "+" if op.kind == "expect" else "-"
            b.append(f"assert((mtx[_m] {sign} _x >= -{rules.MAX_COUNT} && mtx[_m] {sign} _x <= {rules.MAX_COUNT}) "
                     "|| SV503);")
            b.append(mb_update(rules.mb_expect_tx if op.kind == "expect" else rules.mb_complete_tx, "_x"))
            b.append("mb_after();")
        elif isinstance(op, ir.MbarWait):
            m = self.mb_expr(op.bar, p, str(cta))
            par = f"(({E(op.parity)}) % 2)"
            j = f"jp[{m} * {self.nj} + wi_{op.bar.name}]"
            intended = f"({j} == {NO_JPREV} -> {par} : ((({j} + 2) % 2) == {par} -> {j} : {j} + 1))"
            # machine._wait_blocked: valid, init known, parity not passing, not stale -> no step
            guard = (f"!(mvalid[{m}] && (ikn[{m}].w[lw] & {lanes}) == {lanes} && (mk[{m}] % 2) == {par} && "
                     f"mk[{m}] <= {intended} + 1)")
            b.append(f"_m = {m}; _t = {par};")
            b += self.usable("_m", lanes, None, "wait", cta)
            jj = f"jp[_m * {self.nj} + wi_{op.bar.name}]"
            b.append(f"_j = {jj};")
            b.append(f"if :: _j == {NO_JPREV} -> _n = _t; _j = -1 "
                     ":: else -> _n = (((_j + 2) % 2) == _t -> _j : _j + 1) fi;   /* rules.intended_phase */")
            b.append("assert(!(mk[_m] > _n + 1) || SV501);   /* rules.wait_aliases: stale waiter */")
            b.append("_x = mk[_m] - 1;   /* the phase observed: the wait passes (rules.mb_wait_passes) */")
            b.append(f"if :: _n == _x && _x > _j -> {jj} = _x :: else -> {jj} = _j fi;")
            b.append("if :: _n == _x -> mobs[_m] = 1 :: else -> skip fi;")
            if op.sem == "acquire":
                # (a .cta-scope acquire of cross-CTA data is the SV602 warning: not modelled)
                b.append(f"_a = lw; _b = {lanes}; _c = {self.mb_base} + 2 * _m + 1;")
                b.append(f"if :: mrd[_m] & 8 -> c_code {{ _r = learns(_c, _a, _b, {cta}, {self.ppc}); }}; "
                         "assert(_r == 0 || SV602)   /* .cta-scope release of data the waiter learns only here */"
                         " :: else -> skip fi;")
                b.append("c_code { k_acq(_c, _a, _b); };")
        elif isinstance(op, ir.BarSync | ir.BarArrive):
            nbi = f"({cta * self.nids} + ({E(op.bar_id)}) - {self.id_min})"
            count = str(ALL_THREADS) if op.count is None else E(op.count)
            b.append(f"_m = {nbi}; _n = {count};")
            if isinstance(op, ir.BarSync):
                b.append("tok_i = _m; tok_g = nbgen[_m]; nbw[_m] = nbw[_m] | lpb;   /* park at the wait */")
            b.append("assert(nbarr[_m] == 0 || nbcnt[_m] == _n || SV202);   /* one count per generation */")
            b.append(f"_a = lw; _b = {lanes}; _c = {self.nb_base} + _m; c_code {{ k_rel(_a, _b, _c); }};")
            b.append(f"if :: nbarr[_m] == 0 -> nbcnt[_m] = _n :: else -> skip fi; nbarr[_m] = nbarr[_m] + "
                     f"{proc.nthreads};   /* rules.nb_arrive */")
            b.append(f"nb_try_complete_{cta}();")
        elif isinstance(op, ir.ClusterArrive):
            b.append("assert(cltok < 0 || cgen > cltok || SV205);   /* rules.cb_arrives_twice */")
            fn = "k_rel_relaxed" if op.relaxed else "k_rel"
            b.append(f"_a = lw; _b = {lanes}; _c = {self.cl_cur}; c_code {{ {fn}(_a, _b, _c); }};")
            b.append(f"cltok = cgen; carr = carr + {proc.nthreads};   /* rules.cb_arrive */")
            b.append("cb_try_complete();")
        elif isinstance(op, ir.ClusterWait):
            guard = "cltok >= 0 && cgen > cltok"
            b.append(f"_a = lw; _b = {lanes}; _c = {self.cl_last}; c_code {{ k_acq(_c, _a, _b); }}; cltok = -1;")
        elif isinstance(op, ir.Syncwarp):
            b.append("_a = lw; _b = lb | wb; _c = hl; c_code { k_acq(_c, _a, _b); k_acq(_c + 1, _a, _b); "
                     "k_warpsync({me}, _a, _b); };")
        elif isinstance(op, ir.Access):
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
        elif isinstance(op, ir.TmaLoad):
            nbytes = E(op.tx_bytes)
            dests = list(range(self.ncta)) if op.multicast is not None else [cta]
            for d in dests:
                sub: list[str] = [f"_c = {d}; _m = {self.mb_expr(op.bar, p, str(d))};"]
                sub += self.usable("_m", lanes, None if d == cta else "_c", "tma.load completion", cta)
                sub.append(f"_q = {self.key_expr(op.buf, p, str(d))};")
                sub += self.conflicts(part, lanes, WRITE, True)
                sub += self.add_write(part, lanes, line, True)
                sub.append("assert(!ag_live[_q] || EXPORTCAP);")
                sub.append(f"ag_live[_q] = 1; ag_m[_q] = _m; ag_bytes[_q] = {nbytes}; ag_iss[_q] = me; "
                           f"ag_site[_q] = {line};")
                if op.multicast is not None:
                    b.append(f"if :: ((({E(op.multicast)}) >> {d}) & 1) != 0 ->")
                    b += ["   " + s for s in sub]
                    b.append(":: else -> skip fi;")
                else:
                    b += sub
        elif isinstance(op, ir.TmaStore | ir.WgmmaRead):
            unit = 0 if isinstance(op, ir.TmaStore) else 1
            seq = "bseq" if unit == 0 else "wseq[me]"
            b.append(f"_q = {self.key_expr(op.buf, p, str(cta))};")
            b += self.conflicts(part, lanes, READ, True)
            b += self.add_read(p, part, lanes, line, f"2 * {seq} + {unit}")
        elif isinstance(op, ir.GroupCommit):
            b.append("bseq = bseq + 1;" if op.unit == "bulk" else "wseq[me] = wseq[me] + 1;")
        elif isinstance(op, ir.GroupWait) and op.unit == "wgmma" and any(p in t for t in self.teams):
            # Machine._wgmma_wait: blocked until every other warp of the warpgroup has committed the
            # groups before the limit (the engine also lets it pass while one stands at that commit,
            # which only reorders a commit that touches nothing shared)
            team = next(t for t in self.teams if p in t)
            guard = " && ".join(f"wseq[{q}] >= wseq[me] - ({E(op.pending)})" for q in team if q != p)
            if self.track_grp:
                b.append(f"_n = wseq[me] - ({E(op.pending)}); _a = lw; _b = {lanes}; _c = lb; "
                         f"c_code {{ team_wait({{me}}, _n, _a, _b, {part}, _c); }};   /* the team's groups */")
        elif isinstance(op, ir.GroupWait):
            unit = 0 if op.unit == "bulk" else 1
            seq = "bseq" if unit == 0 else "wseq[me]"
            if self.track_grp:
                b.append(f"_n = {seq} - ({E(op.pending)}); _a = lw; _b = {lanes}; _c = lb; "
                         f"c_code {{ group_wait({{me}}, {unit}, _n, _a, _b, {part}, _c); }};   "
                         "/* older groups are complete */")
        elif isinstance(op, ir.Fence):
            if op.kind == "proxy_async":
                if self.track_akn:
                    b += proxy_fence.promela(op, cta, part, lanes, self.spc, self.nkeys)
            else:
                b.append("_a = lw; _b = lb | wb; c_code { fence_init({me}, _a, _b); };   /* fence.mbarrier_init */")
        elif isinstance(op, ir.TmemAlloc):
            if op.cta_group == 2:
                idx = (cta // 2) * 2 + int(op.dealloc)
                peer = cta ^ 1
                guard = f"(tok_g < 0 || tm_gen[{idx}] > tok_g)"
                b.append(f"if :: tok_g < 0 ->   /* join the rendezvous of CTA pair {idx // 2} */")
                if not op.dealloc:
                    b.append(f"   assert((skn[{peer}].w[lw] & {lanes}) == {lanes} || SV402);   /* peer CTA launched */")
                b.append(f"   _x = tm_arr[{idx}] | {1 << (cta & 1)};")
                b.append(f"   if :: _x == 3 -> tm_arr[{idx}] = 0; tm_gen[{idx}] = tm_gen[{idx}] + 1")
                b.append(f"      :: else -> tm_arr[{idx}] = _x; tok_g = tm_gen[{idx}]; stay = 1 fi")
                b.append(":: else -> tok_g = -1 fi;")
        else:
            raise ExportError(f"line {line}: `{type(op).__name__}` is not exported")
        return b, guard

    def exit_code(self, p: int) -> list[str]:
        """machine._exit: exited threads release all-thread generations and the cluster barrier; the
        last warp of a CTA must leave no async read unretired and no copy in flight (SV404)."""
        proc = self.machine.procs[p]
        cta = proc.cta
        L = [f"alive_procs[{cta}] = alive_procs[{cta}] - 1; alive_thr[{cta}] = alive_thr[{cta}] - {proc.nthreads}; "
             f"alive_all = alive_all - {proc.nthreads};"]
        for i in range(self.nids):
            L.append(f"_m = {cta * self.nids + i}; if :: nbarr[_m] > 0 && nbcnt[_m] == {ALL_THREADS} -> "
                     f"nb_try_complete_{cta}() :: else -> skip fi;")
        L.append("cb_try_complete();")
        L.append(f"if :: alive_procs[{cta}] == 0 ->")
        if self.track_grp:
            L.append(f"   c_code {{ _r = unretired({cta * self.spc}, {(cta + 1) * self.spc}); }}; "
                     "assert(_r == 0 || SV404);   /* an async read never retired */")
        L.append("   _x = 0; do :: _x < NKEYS -> assert(!ag_live[_x] || (_x / "
                 f"{self.spc} != {cta} && ag_m[_x] / {self.mbpc} != {cta}) || SV404); _x++ :: else -> break od")
        L.append(":: else -> skip fi")
        return L

    @staticmethod
    def local_reach(prog: Program, start: int) -> tuple[list[int], bool]:
        """The local instructions that control can pass through from ``start`` before the next
        visible one, and whether the program can end there: only those go into the step."""
        seen: set[int] = set()
        todo = [start]
        ends = False
        while todo:
            pc = todo.pop()
            if pc in seen:
                continue
            ins = prog.code[pc]
            if ins.kind == END:
                ends = True
                continue
            if ins.kind in (OP, BAR_WAIT):
                continue
            seen.add(pc)
            if ins.kind == JUMP:
                todo.append(ins.target)
            elif ins.kind in (FOR_INIT, FOR_NEXT, BRANCH):
                todo += [pc + 1, ins.target]
            else:
                todo.append(pc + 1)
        return sorted(seen), ends

    def local_flow(self, p: int, pcs: list[int]) -> list[str]:
        """machine._run_local over the given local instructions: let/for/if until the next visible
        instruction, inside the same step."""
        if not pcs:
            return []
        prog: Program = self.machine.programs[p]
        L = ["do"]
        E = lambda e: self.expr(e, p)  # noqa: E731
        for pc in pcs:
            ins = prog.code[pc]
            v = f"v_{prog.var_names[ins.slot]}" if ins.slot >= 0 else ""
            if ins.kind == LET:
                L.append(f":: pc == {pc} -> {v} = {E(ins.expr)}; pc = {pc + 1}")
            elif ins.kind == FOR_INIT:
                L.append(f":: pc == {pc} -> if :: ({E(ins.expr)}) < ({E(ins.expr2)}) -> {v} = {E(ins.expr)}; "
                         f"pc = {pc + 1} :: else -> pc = {ins.target} fi")
            elif ins.kind == FOR_NEXT:
                L.append(f":: pc == {pc} -> if :: {v} + 1 < ({E(ins.expr2)}) -> {v} = {v} + 1; pc = {ins.target} "
                         f":: else -> pc = {pc + 1} fi")
            elif ins.kind == BRANCH:
                L.append(f":: pc == {pc} -> if :: ({E(ins.expr)}) != 0 -> pc = {pc + 1} :: else -> pc = {ins.target} "
                         "fi")
            elif ins.kind == JUMP:
                L.append(f":: pc == {pc} -> pc = {ins.target}")
        L += [":: else -> break", "od;"]
        return L

    def after(self, t: int, p: int, pc: int) -> str:
        """What follows an operation at pc-1 inside its step: the local flow, and the exit if the
        program can end there."""
        prog: Program = self.machine.programs[p]
        pcs, ends = self.local_reach(prog, pc)
        text = f"pc = {pc}; " + " ".join(self.local_flow(p, pcs))
        if ends:
            text += f" if :: pc == {len(prog.code) - 1} -> exit_{t}() :: else -> skip fi;"
        return text

    def proctype(self, t: int, p: int) -> list[str]:
        """One proctype per template: the pc automaton of the compiled program (an operation and the
        local control flow after it form one d_step; a process that ends exits in the same step)."""
        m = self.machine
        prog: Program = m.programs[p]
        proc = m.procs[p]
        pc0, vars0 = self.init_procs[p][0], self.init_procs[p][1]
        L = [f"/* template {t}: {proc.role or 'no role'}, CTA {proc.cta}, {proc.nthreads} threads per process */",
             f"inline exit_{t}() {{"]
        L += ["  " + s for s in self.exit_code(p)]
        L.append("}")
        params = "; ".join(f"{ty} {name}" for ty, name, _ in self.params(p))
        L.append(f"proctype T{t}({params}) {{")
        decls = [f"int v_{name} = {val}" for name, val in zip(prog.var_names, vars0, strict=True)]
        decls += [f"short pc = {pc0}", "short tok_i = -1", "short tok_g = -1", "short cltok = -1", "short bseq = 0",
                  "bit stay = 0"]
        L.append("  " + "; ".join(decls) + ";")
        # A finished process stays at the loop head (pc == END matches no option): the `end` label
        # makes that a valid end state, and the deadlock monitor below tells finished from blocked.
        L.append("end:")
        L.append("  do")
        for pc, ins in enumerate(prog.code):
            if ins.kind == OP:
                body, guard = self.op_code(p, ins)
                L.append(f"  :: d_step {{ pc == {pc} && {guard} ->   /* line {ins.line}: "
                         f"{_comment(self.protocol.text_of(ins.op.span, 60))} */")
                L += ["       " + _me(s) for s in body]
                L.append(f"       if :: stay -> stay = 0 :: else -> {self.after(t, p, pc + 1)} fi;")
                L.append("       c_code { canon(); } }")
            elif ins.kind == BAR_WAIT:
                L.append(f"  :: d_step {{ pc == {pc} && nbgen[tok_i] != tok_g ->   /* line {ins.line}: the bar.sync "
                         "generation completed */")
                L.append(f"       tok_i = -1; tok_g = -1; {self.after(t, p, pc + 1)} c_code {{ canon(); }} }}")
        L += ["  od", "}", ""]
        return L

    def agent(self, k: int) -> list[str]:
        """A bulk copy into slot k completes (machine._complete_tma): its write lands, known only to
        the phase it completes (.release.cluster covers the copy's own write), then complete_tx."""
        cta = k // self.spc
        return [f"/* the bulk copies into slot {k} ({self._slot_name(k)}) */",
                f"proctype A{k}() {{",
                "end:",
                "  do",
                f"  :: d_step {{ ag_live[{k}] ->",
                f"       assert(alive_procs[{cta}] > 0 || SV404);   /* a copy lands in an exited CTA */",
                f"       _q = {k}; _m = ag_m[{k}]; _a = ag_iss[{k}]; _b = ag_site[{k}]; _c = {self.mb_base} + 2 * _m;",
                "       c_code { copy_lands(_q, _a, _b, _c); };",
                "       assert(mvalid[_m] || SV401);",
                f"       assert((mtx[_m] - ag_bytes[{k}] >= -{rules.MAX_COUNT}) || SV503);",
                f"       _t = mk[_m]; {mb_update(rules.mb_complete_tx, f'ag_bytes[{k}]')} mb_after();",
                f"       ag_live[{k}] = 0; ag_m[{k}] = 0; ag_bytes[{k}] = 0; ag_iss[{k}] = 0; ag_site[{k}] = 0;",
                "       c_code { canon(); } }",
                "  od",
                "}",
                ""]

    def _slot_name(self, k: int) -> str:
        cta, rest = divmod(k, self.spc)
        for b in self.protocol.buffers:
            off = self.buf_off[b.name]
            if off <= rest < off + (b.slots or 1):
                return self.machine.slot_label(cta, self.machine.buf_index[b.name], rest - off)
        return str(k)

    def init_proc(self, groups: list[list[int]], agent_keys: list[int]) -> list[str]:
        init = ["init {", "  d_step {"]
        total = 0
        for c in range(self.ncta):
            procs = [p for p in self.live if self.machine.procs[p].cta == c]
            thr = sum(self.machine.procs[p].nthreads for p in procs)
            total += thr
            init.append(f"    alive_procs[{c}] = {len(procs)}; alive_thr[{c}] = {thr};")
            words: dict[int, int] = defaultdict(int)
            for p in procs:
                h = self.h_lead[p]
                words[h // BITS] |= 3 << (h % BITS)
            for wd, mk in sorted(words.items()):
                init.append(f"    skn[{c}].w[{wd}] = {mk};   /* its own warps know that CTA {c} started */")
        init += [f"    alive_all = {total}", "  };", "  atomic {"]
        for t, procs in enumerate(groups):
            for p in procs:
                args = ", ".join(str(v) for _, _, v in self.params(p))
                init.append(f"    run T{t}({args});   /* {self.machine.proc_label(p)} */")
        for k in agent_keys:
            init.append(f"    run A{k}();")
        init += ["    run Deadlock()", "  }", "}", "",
                 "/* SV201: no step is enabled (SPIN's timeout) while some process has not finished. Every",
                 "   process loop carries an end label, so this monitor is what tells a finished run from a",
                 "   deadlock (SV503 when the blocked waits are on barriers whose bytes never balance). */",
                 "proctype Deadlock() {",
                 "  timeout -> assert(alive_all == 0 || SV201)",
                 "}"]
        return init


def _me(line: str) -> str:
    """Inside c_code the process index is the hidden `_w` copy of the parameter `me`."""
    if "c_code" in line and "{me}" in line:
        return "_w = me; " + line.replace("{me}", "_w")
    return line


def _evaluated(e: ir.Expr, env: dict, ctx: Context) -> Iterator[ir.Expr]:
    """The sub-expressions that evaluating e evaluates: of a conditional, the branch taken only."""
    if isinstance(e, ir.Cond):
        yield e
        yield from _evaluated(e.cond, env, ctx)
        try:
            taken = e.then if evaluate(e.cond, env, ctx) else e.orelse
        except EvalError:
            return  # the condition's own error is reported first
        yield from _evaluated(taken, env, ctx)
        return
    yield e
    children: tuple[ir.Expr, ...] = ()
    if isinstance(e, ir.UnOp):
        children = (e.operand,)
    elif isinstance(e, ir.BinOp):
        children = (e.left, e.right)
    elif isinstance(e, ir.Pick):
        children = (e.index,)
    for sub in children:
        yield from _evaluated(sub, env, ctx)


def _comment(text: str) -> str:
    return text.replace("*/", "* /").replace("/*", "/ *")


@dataclass(frozen=True)
class PromelaModel:
    """A model and the length of its longest path (every step of every process and copy once, plus
    the creation of the processes): pass it to pan as -m so that no path is cut off."""

    text: str
    max_depth: int


def export_model(protocol: ir.Protocol) -> PromelaModel:
    """The Promela model of a loaded protocol. Raises ExportError when it cannot be exported faithfully."""
    several = open_choices(protocol)
    if several:  # a model of the first assignment would say nothing of the others
        raise ExportError(f"{several}; the model is built for one assignment: pin each with -D NAME=VALUE")
    exp = _Exporter(protocol)
    return PromelaModel(exp.render(), exp.max_depth())


def export_promela(protocol: ir.Protocol) -> str:
    """The Promela text of a loaded protocol (see export_model)."""
    return export_model(protocol).text
