"""The semantics of global memory: flags (small integers in global memory) and the operations on
them — atomics (`atom`, `red`), flag loads and stores, spins (`wait.until`, `probe`) — the thread
fences `fence.acq_rel` / `fence.sc`, `grid.sync`, and the happens-before they give to the data of
global buffers (a `read`/`write` of a `global` buffer is an access of families/memory.py on a
record of CTA ``GLOBAL_CTA``: one copy for the whole grid).

The PTX memory consistency model (docs/model.md, "Global memory", quotes the text) is read so:

* Which write a read returns (families/globalmem_views.py): each flag element keeps its writes in
  coherence order and each thread its view of them; a `ld` or a passing `wait.until` may read any
  write from the thread's view on (one step per readable write: the latest is the process's
  deterministic step, each older one a step labelled ``("p", p, "r", index)``), an RMW reads the
  latest. A spin passes where some readable write satisfies it. `fence.sc` pairs at a scope that
  includes both threads synchronize in the order they run (PTX §8.9.4).
* Release sequence: a release write or RMW heads one; every later RMW of the same location,
  relaxed ones included, continues it; a non-RMW store (`st`) ends it. So each flag element keeps
  the knowledge released into it (holders per scope level and releasing CTA): an RMW adds to it, a
  store replaces it.
* Synchronizes-with needs morally strong operations: each operation's scope includes the other
  thread. A release at `.cta` scope is acquired only in its CTA, `.cluster` only in its cluster,
  `.gpu`/`.sys` anywhere (one GPU: `.sys` is `.gpu`).
* Fence patterns: a `fence.acq_rel`/`fence.sc` followed by a relaxed write releases what the thread
  knew at the fence; a relaxed read followed by such a fence acquires what that read observed. The
  effective scope is the narrower of the fence's and the access's.
* `probe` (a spin that may give up, whose result the protocol does not branch on) orders nothing:
  the execution where it gave up is always possible, and it has the fewest happens-before edges.

Values are exact: a flag that would leave 0..bound makes the search inconclusive (ModelBound),
never safe. The flags and the grid barrier live at the end of the state's ``tmem`` tuple, as
``(value, meta)`` entries (the symbolic key leaves first fields alone; ``meta`` is
families/flag_weak.py's record of who stored, 0 until someone does and for the grid barrier).

The explicit handlers form a mixin that ``Machine`` inherits; ``HANDLERS`` registers them by
operation type. The bmc encoding refuses the family (``REFUSED``).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ..core import STAY, ModelBound, StepResult, Violation, _detached, _Work
from ..program import END
from ..state import P_PC, P_TOKEN, P_VARS, TC_BITS, State, acquire, clear_bits, release
from .flag_weak import WeakFlagOps
from .globalmem_views import HISTORY, LEVELS, FlagViewOps

GLOBAL_CTA = -1  # the CTA field of a global buffer's access records: one copy for the grid
_LEVEL = {"cta": 0, "cluster": 1, "gpu": 2, "sys": 2}
_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
WRITES = ("atom", "red", "st")


def flag_ops_of(protocol: ir.Protocol) -> bool:
    """Does the protocol use the global-memory family at all?"""
    return any(isinstance(op, ir.FlagOp | ir.ThreadFence | ir.GridSync) for op in ir.ops_of(protocol.body))


def global_refusal(protocol: ir.Protocol, what: str) -> str | None:
    """Why an exporter or emitter that does not have this family refuses the protocol, or None."""
    used = []
    if protocol.cluster_dim:
        used.append(f"a grid of {protocol.cluster} CTAs in clusters of {protocol.cluster_dim}")
    if protocol.flags or flag_ops_of(protocol):
        used.append("global flags, atomics, thread fences or grid.sync")
    if any(b.space == "global" for b in protocol.buffers):
        used.append("global buffers")
    if not used:
        return None
    return (f"{what} does not model global memory yet ({'; '.join(used)}): check this protocol with "
            "`syncverify check` (explicit or --engine z3)")


def rmw_value(rmw: str, old: int, args: tuple[int, ...]) -> int:
    """The new value of a read-modify-write (PTX atom: inc wraps to 0 at ``b``, dec to ``b``)."""
    if rmw == "add":
        return old + args[0]
    if rmw == "inc":
        return 0 if old >= args[0] else old + 1
    if rmw == "dec":
        return args[0] if old == 0 or old > args[0] else old - 1
    if rmw == "exch":
        return args[0]
    if rmw == "cas":
        return args[1] if old == args[0] else old
    if rmw == "min":
        return min(old, args[0])
    if rmw == "max":
        return max(old, args[0])
    raise AssertionError(rmw)  # pragma: no cover


class GlobalMemOps(FlagViewOps, WeakFlagOps):
    """Explicit-state handlers of this family (a mixin of Machine)."""

    def _init_global(self) -> None:
        """The layout: flag elements and the grid barrier after the tmem entries of the state, and
        knowledge holders above every other holder."""
        proto = self.protocol
        self.flag_index: dict[tuple[str, int], int] = {}
        self.flag_names: list[tuple[str, int]] = []
        for f in proto.flags:
            for i in range(f.size or 1):
                self.flag_index[(f.name, i)] = len(self.flag_names)
                self.flag_names.append((f.name, i))
        self.gl_tmem = 2 * ((self.ncta + 1) // 2) + self.ncta  # the first global entry of state.tmem
        self.grid_entry = self.gl_tmem + len(self.flag_names)  # (arrived threads, 0), (generation, 0)
        nprocs = len(self.procs)
        base = self.holders.tc_base + TC_BITS * nprocs
        self.gl_flag_base = base  # per flag element, level, releasing CTA
        self.gl_rel_base = base + len(self.flag_names) * HISTORY * LEVELS * self.ncta  # per process, level, lane
        self.gl_obs_base = self.gl_rel_base + nprocs * LEVELS * 2
        self.gl_grid_cur = self.gl_obs_base + nprocs * LEVELS * 2
        self.gl_grid_last = self.gl_grid_cur + 1
        # the Fence-SC order's holders: per CTA (.cta), per cluster (.cluster), the grid (.gpu/.sys)
        self.gl_sc_base = self.gl_grid_last + 1
        self._init_views(self.grid_entry + 2)
        self.read_at: int | None = None  # which write a `ld`/`wait.until` reads (op_flag); None: the latest
        self.grid_threads = self.ncta * proto.threads
        # residency (engines/residency.py): the CTAs that may run, None for all
        self.resident: frozenset[int] | None = None

    def restrict_to(self, resident: frozenset[int]) -> None:
        """Only the CTAs in ``resident`` run (engines/residency.py): the others' processes get the
        program of an empty body, so every search, its reductions included, sees them as exited
        from the start. Reports of who writes a flag still read the full programs."""
        from dataclasses import replace

        from ..program import compile_program

        self.resident = resident
        self.shown_programs = list(self.programs)
        empty = replace(self.protocol, body=())
        for p, proc in enumerate(self.procs):
            if proc.cta not in resident:
                self.programs[p] = compile_program(empty, proc)

    def global_initial(self) -> list[tuple[int, int]]:
        out = []
        for name, _ in self.flag_names:
            out.append((self.protocol.flag(name).init, 0))
        return [*out, (0, 0), (0, 0), *([((), 0)] * len(self.flag_names))]

    # ------------------------------------------------------------------ layout helpers
    def flag_label(self, e: int) -> str:
        name, i = self.flag_names[e]
        return f"{name}[{i}]" if self.protocol.flag(name).size is not None else name

    def _flag_elem(self, ref: ir.Ref, env, ctx) -> int:
        decl = self.protocol.flag(ref.name)
        i = 0
        if ref.index is not None:
            i = self._eval(ref.index, env, ctx)
            if not 0 <= i < (decl.size or 1):
                raise Violation("SV104", f"index {i} is out of range for `{ref.name}[{decl.size}]`", ref.span)
        return self.flag_index[(ref.name, i)]

    def _fence_bits(self, base: int, p: int, level: int, lanes: int) -> list[tuple[int, int]]:
        """(lane holder, its fence bit at ``level``) for the executing lane holders."""
        out = []
        for h, holder in enumerate((self.holders.leader(p), self.holders.lanes(p))):
            if lanes & holder:
                out.append((holder, 1 << (base + ((p * LEVELS + level) * 2 + h))))
        return out

    def _reach(self, level: int, a: int, b: int) -> bool:
        """Does a scope of ``level`` taken by a thread of CTA a include the threads of CTA b?"""
        if level >= 2:
            return True
        if level == 1:
            return self.protocol.cluster_of(a) == self.protocol.cluster_of(b)
        return a == b

    def _distance(self, a: int, b: int) -> int:
        """The narrowest scope level that includes both CTAs."""
        return 0 if a == b else 1 if self.protocol.cluster_of(a) == self.protocol.cluster_of(b) else 2

    # ------------------------------------------------------------------ knowledge
    def _release_into(self, w: _Work, p: int, cta: int, lanes: int, e: int, h: int, sem: str, scope: int) -> None:
        """What the writer releases into write h of the flag element: all it knows (a release write or
        RMW), or what its earlier fences saw (a relaxed one: the fence's release pattern)."""
        if sem in ("release", "acq_rel"):
            w.records = release(w.records, lanes, self._entry_bit(e, h, scope, cta))
            return
        for level in range(LEVELS):
            for _, bit in self._fence_bits(self.gl_rel_base, p, level, lanes):
                w.records = release(w.records, bit, self._entry_bit(e, h, min(level, scope), cta))

    def _acquire_from(self, w: _Work, p: int, cta: int, lanes: int, e: int, h: int, sem: str, scope: int) -> None:
        """What the reader of write h of the flag element acquires: every release into it whose scope
        includes the reader and whose releaser the reader's scope includes (an acquire); for a relaxed
        read, the same kept for a later fence at a scope that includes the releaser (the fence's acquire
        pattern). The read itself makes the lanes causally after the write (their view, PTX §8.10.5)."""
        self._know_write(w, e, h, lanes)
        for src in range(self.ncta):
            if not self._reach(scope, cta, src):
                continue
            for level in range(LEVELS):
                if not self._reach(level, src, cta):
                    continue
                bit = self._entry_bit(e, h, level, src)
                if sem in ("acquire", "acq_rel"):
                    w.records = acquire(w.records, bit, lanes)
                else:
                    for _, obs in self._fence_bits(self.gl_obs_base, p, self._distance(cta, src), lanes):
                        w.records = release(w.records, bit, obs)

    def _sc_bits(self, cta: int, scope: int) -> list[int]:
        """The Fence-SC order's holders a `fence.sc` at ``scope`` by a thread of ``cta`` meets: its CTA's,
        its cluster's (.cluster and wider), the grid's (.gpu/.sys). Two fence.sc meet in one of them
        exactly when each one's scope includes the other's thread (morally strong)."""
        nclusters = self.ncta // self.protocol.cluster_dim if self.protocol.cluster_dim else 1
        bits = [1 << (self.gl_sc_base + cta)]
        if scope >= 1:
            bits.append(1 << (self.gl_sc_base + self.ncta + self.protocol.cluster_of(cta)))
        if scope >= 2:
            bits.append(1 << (self.gl_sc_base + self.ncta + nclusters))
        return bits

    def op_thread_fence(self, w, p, proc, op: ir.ThreadFence, ins, env, ctx, lanes) -> bool:
        """`fence.acq_rel`/`fence.sc` at a scope: the release half records what each executing lane
        holder knows, for its later relaxed writes; the acquire half takes in what its earlier relaxed
        reads observed from releasers the fence's scope includes. A `fence.sc` also synchronizes with
        every morally strong fence.sc before it in the Fence-SC order (PTX §8.9.4: "A fence.sc operation X
        synchronizes with a fence.sc operation Y if X precedes Y in the Fence-SC order"), which is the
        order the fences run in: it acquires what those released into the order's holders and
        releases what it knows into them."""
        scope = _LEVEL[op.scope]
        for level in range(scope + 1):
            for holder, bit in self._fence_bits(self.gl_obs_base, p, level, lanes):
                w.records = acquire(w.records, bit, holder)
        if op.sem == "sc":
            bits = self._sc_bits(proc.cta, scope)
            for bit in bits:
                w.records = acquire(w.records, bit, lanes)
            for bit in bits:
                w.records = release(w.records, lanes, bit)
        for level in range(scope + 1):
            for holder, bit in self._fence_bits(self.gl_rel_base, p, level, lanes):
                w.records = release(w.records, holder, bit)
        return True

    # ------------------------------------------------------------------ flags
    def _flag_value(self, w: _Work, e: int) -> int:
        return w.tmem[self.gl_tmem + e][0]

    def _check_bound(self, e: int, value: int, op: ir.FlagOp) -> None:
        bound = self.protocol.flag(self.flag_names[e][0]).bound
        if not 0 <= value <= bound:
            raise ModelBound(f"line {op.span.line}: flag {self.flag_label(e)} would become {value}, outside its "
                                 f"declared range 0..{bound} (declare `bound` larger, or the counter overflows)")

    def op_flag(self, w, p, proc, op: ir.FlagOp, ins, env, ctx, lanes) -> bool:
        """One flag operation; a `ld` or `wait.until` reads write ``self.read_at`` of the element's
        history (None: the latest; families/globalmem_views.py gives the others their own steps)."""
        e = self._flag_elem(op.flag, env, ctx)
        scope = _LEVEL[op.scope]
        old = self._flag_value(w, e)
        args = tuple(self._eval(a, env, ctx) for a in op.operands)
        if op.kind == "probe":
            return True  # may give up: orders nothing (module docstring)
        meta = self.weak_meta(w, p, lanes, e, op)  # a weak store's order (families/flag_weak.py)
        if op.kind in ("wait", "ld"):
            hist = self.history(w.tmem, e)
            h = len(hist) - 1 if self.read_at is None else self.read_at
            if op.kind == "wait" and not _CMP[op.cmp](hist[h], args[0]):
                return False  # spins
            self._acquire_from(w, p, proc.cta, lanes, e, h, op.sem, scope)
            self._compact(w, e)
            if op.kind == "ld" and ins.slot >= 0:  # `let v = ld.SEM F;`: the value of the write read
                self.keep_flag_value(w, p, ins, hist[h])  # (families/flag_values.py)
            return True
        threads = ins.threads
        if threads > 1 and not (op.kind != "st" and op.rmw == "add"):
            raise ModelBound(f"line {op.span.line}: `{op.kind}.{op.rmw or op.sem}` of a flag executed by "
                                 f"{threads} threads at once is not modelled (only `add` is); put it in "
                                 "`first thread { }` or `elect { }`")
        latest = len(self.history(w.tmem, e)) - 1
        if op.kind == "st":
            new = args[0]  # a store ends the release sequence: its write starts with no knowledge
        else:
            new = rmw_value(op.rmw, old, (args[0] * threads,) if op.rmw == "add" else args)
            # (PTX §8.8: "while atomic reductions conceptually perform a strong read as part of its
            # read-modify-write sequence, this strong read does not form an acquire pattern": a `red`
            # followed by a fence acquires nothing)
            if op.kind == "atom":
                self._acquire_from(w, p, proc.cta, lanes, e, latest, op.sem if op.sem != "release" else "relaxed",
                                   scope)
                if ins.slot >= 0:  # `let v = atom.OP F, V;`: the old value, the latest write's (atomicity)
                    self.keep_flag_value(w, p, ins, old)
            else:
                self._know_write(w, e, latest, lanes)  # (an RMW reads the latest: atomicity, §8.10.3)
        self._check_reset(w, p, e, old, new, op)
        self._check_bound(e, new, op)
        h = self._append_write(w, p, lanes, e, new, op.span.line, op.kind != "st")
        if meta is not None:
            w.tmem[self.gl_tmem + e] = (new, meta)
        if op.sem != "weak":  # a release pattern needs a strong write (PTX §8.8)
            self._release_into(w, p, proc.cta, lanes, e, h, op.sem, scope)
        return True

    def flag_stale_steps(self, state: State, p: int) -> list[StepResult]:
        """The steps of process p's `ld` / `wait.until` that read a write older than the latest (one
        per readable write that, for a spin, satisfies it), labelled ``("p", p, "r", index)``."""
        ins = self.programs[p].code[state.procs[p][P_PC]]
        op = ins.op
        if not isinstance(op, ir.FlagOp) or op.kind not in ("ld", "wait"):
            return []
        try:
            env = self._env_at(p, state.procs[p][1])
            e = self._flag_elem(op.flag, env, self.ctx[p])
        except Violation:
            return []  # the deterministic step reports it
        hist = self.history(state.tmem, e)
        if len(hist) == 1:
            return []  # (only the latest is kept)
        readable = self.readable(state, p, e, self._lanes(p, ins))
        if op.kind == "ld" and ins.slot >= 0:
            self.check_kept_read(ins, e, len(readable))  # one value for all threads (families/flag_values.py)
        out = []
        for h in readable:
            if h == len(hist) - 1:
                break
            if op.kind == "wait":
                try:
                    want = self._eval(op.operands[0], env, self.ctx[p])
                except Violation:
                    return []
                if not _CMP[op.cmp](hist[h], want):
                    continue
            res = self.step_flag_read(state, p, h)
            if res is not None:
                out.append(res)
        return out

    def step_flag_read(self, state: State, p: int, h: int) -> StepResult | None:
        """Process p's `ld` / `wait.until` reading write h of its element (an older one than the latest)."""
        pstate = state.procs[p]
        ins = self.programs[p].code[pstate[P_PC]]
        w = _Work(state)
        label = ("p", p, "r", h)
        self.read_at = h
        try:
            advanced = self._exec(w, p, ins, pstate)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        finally:
            self.read_at = None
        if not advanced:
            return None
        try:
            pc, vars_ = self._run_local(p, w.procs[p][P_PC], w.procs[p][P_VARS])
            w.procs[p] = (pc, vars_, *w.procs[p][2:])
            if self.programs[p].code[pc].kind == END:
                self._exit(w, p)
        except Violation as v:
            return StepResult(label, None, _detached(v), w.warnings, w.soft)
        return StepResult(label, w.freeze(), None, w.warnings, w.soft)

    def _check_reset(self, w: _Work, p: int, e: int, old: int, new: int, op: ir.FlagOp) -> None:
        """SV802: a write that takes away the value another thread's spin is waiting for, before that
        thread has seen it: whether the spinner ever sees it depends on timing alone."""
        if new == old:
            return
        for q, prog in enumerate(self.programs):
            if q == p:
                continue
            qs = w.procs[q]
            ins = prog.code[qs[P_PC]]
            if not isinstance(ins.op, ir.FlagOp) or ins.op.kind != "wait" or ins.op.flag.name != op.flag.name:
                continue
            qenv = self.env(q, qs[1])
            try:
                if self._flag_elem(ins.op.flag, qenv, self.ctx[q]) != e:
                    continue
                want = self._eval(ins.op.operands[0], qenv, self.ctx[q])
            except Violation:
                continue
            cmp = _CMP[ins.op.cmp]
            if cmp(old, want) and not cmp(new, want):
                raise Violation(
                    "SV802", f"reset race: this write changes {self.flag_label(e)} from {old} to {new} while "
                    f"{self.proc_label(q)} spins at line {ins.line} for {self.flag_label(e)} {ins.op.cmp} {want}, "
                    f"which {old} satisfied: whether that CTA ever leaves its spin depends on timing alone (the "
                    "reset must wait until every spinner has passed)", op.span, ((ins.line, "the spin"),),
                    procs=(q,))

    # ------------------------------------------------------------------ grid.sync
    def op_grid_sync(self, w, p, proc, op: ir.GridSync, ins, env, ctx, lanes):
        """`grid.sync` (cooperative_groups::grid_group::sync): a barrier of every thread of the grid,
        released and acquired at .gpu scope. Undefined without a cooperative launch (SV804)."""
        if self.protocol.launch != "cooperative":
            raise Violation("SV804", "grid.sync needs a cooperative launch (cudaLaunchCooperativeKernel): say "
                            "`launch cooperative;`; launched otherwise, the CTAs of the grid need not be resident "
                            "together and the grid barrier is undefined", op.span)
        ps = w.procs[p]
        arrived, gen = w.tmem[self.grid_entry][0], w.tmem[self.grid_entry + 1][0]
        cur, last = 1 << self.gl_grid_cur, 1 << self.gl_grid_last
        if ps[P_TOKEN] < 0:  # first visit: arrive
            w.records = release(w.records, lanes, cur)
            arrived += ins.threads
            if arrived >= self.grid_threads:
                w.records = clear_bits(w.records, last)
                w.records = release(w.records, cur, last)
                w.records = clear_bits(w.records, cur)
                w.tmem[self.grid_entry] = (0, 0)
                w.tmem[self.grid_entry + 1] = (gen + 1, 0)
                w.records = acquire(w.records, last, lanes)
                return True
            w.tmem[self.grid_entry] = (arrived, 0)
            w.procs[p] = (*ps[:P_TOKEN], gen, *ps[P_TOKEN + 1:])
            return STAY
        if gen > ps[P_TOKEN]:
            w.records = acquire(w.records, last, lanes)
            w.procs[p] = (*ps[:P_TOKEN], -1, *ps[P_TOKEN + 1:])
            return True
        return False

    # ------------------------------------------------------------------ reports
    def stale_read_note(self, state: State, p: int, h: int) -> str:
        """What a trace says of a step that read an older write (label ``("p", p, "r", h)``)."""
        op = self.programs[p].code[state.procs[p][P_PC]].op
        try:
            e = self._flag_elem(op.flag, self._env_at(p, state.procs[p][P_VARS]), self.ctx[p])
        except Violation:
            return "→ reads an older write"
        return f"→ reads {self.flag_label(e)} = {self.history(state.tmem, e)[h]} (an older write than the latest)"

    def flag_writers(self, state, name: str) -> str:
        """Who would have written a flag: each writing operation, with where its process stands."""
        out = []
        for q, prog in enumerate(getattr(self, "shown_programs", self.programs)):
            lines = sorted({ins.line for ins in prog.code if isinstance(ins.op, ir.FlagOp)
                            and ins.op.kind in WRITES and ins.op.flag.name == name})
            if not lines:
                continue
            if self.resident is not None and self.procs[q].cta not in self.resident:
                where = "is not resident"
            else:
                here = self.programs[q].code[state.procs[q][P_PC]]
                where = "has exited" if self.done(state, q) else f"stands at line {here.line}"
            out.append(f"{self.proc_label(q)} (line{'s' if len(lines) > 1 else ''} "
                       f"{', '.join(map(str, lines))}; {where})")
        return "; ".join(out) if out else "no operation writes it"

    def global_blocked_reason(self, state, p: int) -> str | None:
        ps = state.procs[p]
        ins = self.programs[p].code[ps[P_PC]]
        op = ins.op
        if isinstance(op, ir.GridSync):
            return (f"line {ins.line}: grid.sync — {state.tmem[self.grid_entry][0]} of the grid's "
                    f"{self.grid_threads} threads arrived")
        if not isinstance(op, ir.FlagOp) or op.kind != "wait":
            return None
        env = self.env(p, ps[1])
        try:
            e = self._flag_elem(op.flag, env, self.ctx[p])
            want = self._eval(op.operands[0], env, self.ctx[p])
        except Violation:
            return None
        value = state.tmem[self.gl_tmem + e][0]
        return (f"line {ins.line}: wait.until {self.flag_label(e)} {op.cmp} {want} — {self.flag_label(e)} is "
                f"{value}; written by {self.flag_writers(state, op.flag.name)}")


HANDLERS: dict[type, Callable] = {
    ir.FlagOp: GlobalMemOps.op_flag,
    ir.ThreadFence: GlobalMemOps.op_thread_fence,
    ir.GridSync: GlobalMemOps.op_grid_sync,
}

# operations the bmc encoding refuses, and why
REFUSED: dict[type, str] = {
    ir.FlagOp: "global-memory flags and atomics (their values and release sequences are not encoded)",
    ir.ThreadFence: "`fence.acq_rel`/`fence.sc` (global-memory fences are not encoded)",
    ir.GridSync: "`grid.sync` (the grid barrier is not encoded)",
}
