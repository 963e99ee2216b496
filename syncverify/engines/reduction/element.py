"""Per-element rules of the partial-order reduction: what the operations ahead of a process can
still touch, barrier element by barrier element, and the rules that read it to take an arrive, a
wait or an operation that reaches another CTA alone.

A rule here asks, of one step, whether another process can still init, inval, wait on or count
bytes on the barrier element the step touches, or whether the CTA it reaches can exit before it;
the tables of what each program can still touch from each pc are computed once per machine
(Reduction.__init__). They are a room of their own because they are the reduction's reading of
the program's future, which the model itself never needs (docs/model.md, "The search and its
reductions").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ... import ir
from ...expr import Context
from ...semantics import rules
from ...semantics.core import StepResult
from ...semantics.footprint import _END, _EV_ARRIVE, _EV_BYTES, _EV_FREE, Element, ref_element, touches
from ...semantics.hooked_local import remembered
from ...semantics.program import BRANCH, END, FOR_INIT, FOR_NEXT, JUMP, OP, Program
from ...semantics.state import M_K, M_VALID, P_CLTOKEN, P_PC, P_VARS, State
from .hooked import walk_under_hook

if TYPE_CHECKING:
    from ...semantics.machine import Machine


# the operations whose barrier updates do not commute with an arrive (_no_bytes_ahead; the table tx_ahead)
_TX_KINDS = (ir.MbarTx, ir.TmaLoad, ir.UmmaCommit, ir.CpAsyncArrive)
_COUNTING = (_EV_ARRIVE, _EV_BYTES, _EV_FREE)


def counts_bytes(op: ir.Op) -> bool:
    """Does this operation count bytes or arrive asynchronously on its barrier: an expect_tx or complete_tx,
    a bulk copy, a tensor-core commit, a cp.async arrive-on, or an arrive.expect_tx, whose arrival carries bytes
    (taken first, it can leave the phase pending on them where a plain arrive first completes it, and the
    plain arrive then overflows: SV504 in one order only)?"""
    return isinstance(op, _TX_KINDS) or (isinstance(op, ir.MbarArrive) and op.tx_bytes is not None)


def reuse_warnings_only(res: StepResult) -> bool:
    """Are a plain arrive's findings only SV602 warnings (a `.cta`-scope remote arrive that carries
    no data made outside the target CTA, so it only guards reuse)? Such a step may still be taken
    alone: the warning is decided on the records the arriving lanes know that were made outside
    the target CTA. Only the arriving process's own steps (its accesses, waits and barrier waits)
    make a record known to its lanes; another process's step can only remove such a record (a
    covering write) or leave it, so what is a warning here, with the step first, is a warning in
    every order that runs the step later, and the barrier's record of a data-carrying release
    is not set in any of them (docs/model.md).

    The SV609 warning (families/warp_collective_order.py) is decided the same way: on the marks the
    arriving warp's own wgmma collectives and tcgen05.waits put on its own lanes' records, which no
    other process's step sets (only the warp's own `syncwarp` clears them), so it too is at its
    largest with the step first.
    Without this, every such release was expanded with every other step, and the DeepGEMM scale specs
    grew from 15,346 states to past a million.

    The SV505 warning (an arrival in a phase whose previous phase no wait has observed yet, which
    it does not complete) is decided on the barrier's observed flag. Another process's step only
    sets that flag (a wait observing the previous phase) within a phase; a step that completes the
    phase first is another arrival, which in this order overflows the count (SV504), or bytes,
    which _no_bytes_ahead rules out. So it too is at its largest with the step first, and the
    states after both orders are the same (DeepGEMM's one-sided multicast: CTA 0's math warps
    release CTA 1's empty barrier before CTA 1's producer has waited on it)."""
    return all(w.code in ("SV602", "SV609", "SV505") for w in res.warnings)


def union_ahead(prog: Program, here: list, stop_at_cluster_wait: bool = False) -> list:
    """Per pc, the union of ``here`` (a frozenset per pc) over every pc reachable from it, every branch both ways
    (a backward fixpoint over the control-flow graph); with ``stop_at_cluster_wait`` not past a `cluster.wait`."""
    succ = _successor_pcs(prog)
    ahead = list(here)
    changed = True
    while changed:
        changed = False
        for pc in range(len(here) - 1, -1, -1):
            stop = stop_at_cluster_wait and prog.code[pc].kind == OP and isinstance(prog.code[pc].op, ir.ClusterWait)
            acc = here[pc].union(*(ahead[t] for t in succ[pc])) if succ[pc] and not stop else here[pc]
            if acc != ahead[pc]:
                ahead[pc] = acc
                changed = True
    return ahead


def _successor_pcs(prog: Program) -> list[list[int]]:
    """The control-flow graph of a program: every pc's possible next pcs, each branch both ways."""
    code = prog.code
    n = len(code)
    succ: list[list[int]] = []
    for pc, ins in enumerate(code):
        nxt = [] if ins.kind == END else [pc + 1]
        if ins.kind in (FOR_INIT, BRANCH) or (ins.kind == OP and isinstance(ins.op, ir.MbarProbe) and ins.target >= 0):
            nxt.append(ins.target)
        elif ins.kind == JUMP:
            nxt = [ins.target]
        elif ins.kind == FOR_NEXT:
            nxt.append(ins.target)
        succ.append([t for t in nxt if t < n])
    return succ


def _elements_ahead(prog: Program, kinds: tuple[type, ...] | Callable[[ir.Op], bool],
                    ctx: Context, envs: list[tuple[dict[str, int], ...]]) -> list[frozenset[Element]]:
    """For every pc: the mbarrier elements that ops of the given kinds can still touch from there.

    An index is evaluated in the process's context (its CTA, instance and roles; the protocol's
    parameters are constants by now) under each value the enclosing constant-bound loops can give
    their variables there (``envs``, loop_envs.py): one that reads another variable (a `let`, a
    loop a hook answers) stands for every element of its array. Extracted kernels keep all their
    barriers in one array, so a name alone would make every barrier conflict with every other
    (docs/model.md)."""
    code = prog.code
    n = len(code)
    succ = _successor_pcs(prog)
    chosen = kinds if callable(kinds) else (lambda op: isinstance(op, kinds))
    own = [frozenset(ref_element(ins.op.bar, env, ctx) for env in envs[pc]) if ins.kind == OP and chosen(ins.op)
           else frozenset() for pc, ins in enumerate(code)]
    ahead = list(own)
    changed = True
    while changed:  # backward fixpoint over the (small) control-flow graph
        changed = False
        for pc in range(n - 1, -1, -1):
            acc = own[pc].union(*(ahead[t] for t in succ[pc])) if succ[pc] else own[pc]
            if acc != ahead[pc]:
                ahead[pc] = acc
                changed = True
    return ahead


def _must_pass(prog: Program, kind: type, before: type | None = None) -> list[bool]:
    """For every pc: does every path from there to the end pass an op of ``kind`` (and, with
    ``before``, pass it before any op of that kind)?

    The complement of a least fixpoint, "some path reaches END (or ``before``) without passing
    one", over the control-flow graph with every branch taken both ways (so it holds for any
    values)."""
    code = prog.code
    n = len(code)
    succ = _successor_pcs(prog)
    escapes = [ins.kind == END or (before is not None and ins.kind == OP and isinstance(ins.op, before))
               for ins in code]
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            ins = code[pc]
            if escapes[pc] or (ins.kind == OP and isinstance(ins.op, kind)):
                continue
            if any(escapes[t] for t in succ[pc]):
                escapes[pc] = changed = True
    return [not e for e in escapes]


# the longest stretch of a process's fixed future that _bytes_ahead walks in one question
_BYTES_WALK_LIMIT = 4096


class ElementRules:
    """The per-element conditions over a machine's states (a mixin of Reduction)."""

    machine: Machine
    lifecycle_ahead: list[list[frozenset[Element]]]
    waits_ahead: list[list[frozenset[Element]]]
    tx_ahead: list[list[frozenset[Element]]]
    cluster_wait_ahead: list[list[bool]]

    def _lone_reaching_op(self, state: State, p: int) -> bool:
        """May this operation, which reaches a barrier or another CTA, be taken alone?

        A plain arrive (on this CTA's barrier or a peer's) commutes with every other
        step except a wait, init or inval of that barrier. Against a wait, taking the
        arrive first reports any violation the other order would (an arrive that
        completes the phase makes a late wait stale, SV501, and completes a phase no
        wait observed the previous one of, SV502; one that does not complete it lands
        before the observing wait, the SV505 warning, which the other order lacks)
        and otherwise reaches the same state. A bulk-tensor load or tensor-core
        commit checks that its barriers are usable when issued. Neither commutes
        with an init or inval of the barrier, so these are taken alone only when no
        other process of a target CTA can still reach an init or inval of that
        barrier array.

        An operation on a peer CTA (a remote arrive or access, a multicast copy or
        commit) is also checked against the peer's exit (SV404): taking it first
        would hide the order in which the peer exits before it. So it is taken alone
        only when the peer cannot exit first (_peer_cannot_exit_first, or failing that
        _peer_cannot_end_first)."""
        machine = self.machine
        pstate = state.procs[p]
        ins = machine.programs[p].code[pstate[P_PC]]
        targets = machine.targets(p, ins.op, pstate[P_PC], pstate[P_VARS])
        if targets is None:
            return False  # not evaluable here: the step reports it, and is not taken alone
        op = ins.op
        own = machine.procs[p].cta
        elem = machine.element_of(p, op.bar, pstate[P_VARS]) \
            if isinstance(op, ir.MbarArrive | ir.TmaLoad | ir.UmmaCommit) else None
        for d in targets:
            if elem is not None and not self._no_lifecycle_ahead(state, p, elem, d):
                return False
            if d != own and not (self._peer_cannot_exit_first(state, p, d) or self._peer_cannot_end_first(state, p, d)):
                return False
        if isinstance(op, ir.MbarArrive) and not self._no_bytes_ahead(state, p, targets[0], op.bar):
            return False
        return True

    def _no_bytes_ahead(self, state: State, p: int, cta: int, bar: ir.Ref) -> bool:
        """Can no other step count bytes or arrive asynchronously on the barrier of an arrive
        before it? An arrive and a copy's landing (or a complete_tx) on one barrier do not
        commute: with the tx-count at 0, the arrive first completes the phase and the bytes
        land in the next one, while the landing first leaves the phase waiting for bytes that
        never come (and a landing in the next phase, unlike an arrive, completes nothing that
        a consumption rule would report). So the arrive is taken alone only when nothing in
        flight completes on that barrier and no other process can still count bytes on it.

        "Can still" is asked of each other process's own remaining sequence, with the barrier
        element of each of its byte-counting operations evaluated from its current variables
        (_bytes_ahead), and of the per-pc table (any element an index with a variable can name)
        only where that sequence is not known: DeepGEMM's producers copy into `full[k % 2]` in
        a loop, which the table reads as every element of the array."""
        machine = self.machine
        m = machine.arrive_target(state, p, cta)
        if m is None:
            return False
        if any(a[4] == m for a in state.agents):
            return False
        _, name, index = machine.mb_names[m]
        for q in range(len(machine.procs)):
            if q == p:
                continue
            ahead = self._bytes_ahead(q, state.procs[q])
            if m in ahead if ahead is not None else touches(self.tx_ahead[q][state.procs[q][P_PC]], name, index):
                return False
        return True

    def _bytes_ahead(self, q: int, qstate: tuple) -> frozenset[int] | None:
        """The barriers (machine indices) that process q's remaining operations of the kinds that count
        bytes or arrive asynchronously (expect_tx/complete_tx, bulk copies, tensor-core commits,
        cp.async arrive-ons: those of the table ``tx_ahead``) will touch, from where q stands; None
        where the sequence is not known (an operand or the control flow that cannot be evaluated, a
        probe or flag value that picks the next instruction, a loop hook).

        Control flow depends only on loop variables, so q runs a fixed sequence from (pc, variables)
        (Machine.future, as the walk of what can come first reads it), and each operation's barrier
        is the one its index names under the variables it will then have: exactly the elements q can
        still touch. A function of (q, pc, variables): each key of a walked sequence is remembered.
        Under a loop hook the sequence is the hook's for its trip count of the moment: the answer is
        remembered from where q stands only, with the tests its walk asked the hook, and used again
        only where the hook decides them alike (semantics/hooked_local.py); the walk may also go too
        far for the hook (hooked.py) and then counts as unknown."""
        machine = self.machine
        if machine.loop_hook is not None:
            return walk_under_hook(machine, lambda: remembered(
                machine, self._hooked_bytes_memo, (q, qstate[P_PC], qstate[P_VARS]),  # type: ignore[attr-defined]
                lambda: self._walk_bytes_ahead(q, qstate, {})))
        return self._walk_bytes_ahead(q, qstate, self._bytes_memo)  # type: ignore[attr-defined]

    def _walk_bytes_ahead(self, q: int, qstate: tuple, memo: dict) -> frozenset[int] | None:
        """_bytes_ahead's walk, remembering each key of the sequence in ``memo``."""
        machine = self.machine
        key = (q, qstate[P_PC], qstate[P_VARS])
        chain: list[tuple[tuple, frozenset[int]]] = []
        while True:
            if key in memo:
                acc = memo[key]
                break
            if len(chain) >= _BYTES_WALK_LIMIT:
                # a long loop (a trip count of 2^40) would be walked to its end before any budget is asked:
                # beyond the limit the sequence counts as unknown, and the static table answers instead
                acc = None
                break
            fut = machine.future(key)
            if fut is None:
                acc = None
                break
            events, nxt = fut
            if events is _END:
                acc = frozenset()
                break
            ins = machine.programs[key[0]].code[key[1]]
            own = frozenset(ev[1] for ev in events if ev[0] in _COUNTING) \
                if ins.kind == OP and counts_bytes(ins.op) else frozenset()
            chain.append((key, own))
            key = nxt
        if len(memo) >= 1 << 16:
            memo.clear()
        for k, own in reversed(chain):
            acc = None if acc is None else acc | own
            memo[k] = acc
        return acc

    def _peer_cannot_exit_first(self, state: State, p: int, cta: int) -> bool:
        """Can CTA ``cta`` not exit before process p's next step, whatever the others do?

        True when p has not arrived on the cluster barrier's current generation, and some
        process of that CTA must pass a cluster wait before it can end, for the current
        generation or a later one (it has not arrived yet, or arrived on the current one).
        Such a generation completes only once every thread not yet exited has arrived —
        p's included, and p cannot arrive (or exit) before taking its next step."""
        machine = self.machine
        if state.procs[p][P_CLTOKEN] >= 0:
            return False
        gen = state.cluster[0]
        for q in machine.procs_of_cta[cta]:
            qs = state.procs[q]
            if self.cluster_wait_ahead[q][qs[P_PC]] and (qs[P_CLTOKEN] < 0 or qs[P_CLTOKEN] >= gen):
                return True
        return False

    def _peer_cannot_end_first(self, state: State, p: int, cta: int) -> bool:
        """Can CTA ``cta`` not exit before process p's next step, by what can run before it?

        A CTA exits when its last process ends. ``_can_precede`` (nothing forbidden, p frozen)
        over-approximates what every execution that avoids p's step runs, and says which processes
        can reach their end in it: if some process of ``cta`` cannot, no such execution has the
        CTA exit first. CUTLASS's producer keeps its CTA alive this way: its load_tail waits on
        every empty barrier for the consumers' releases, the peer's remote ones included
        (docs/model.md). Under a loop hook the walk's answer holds for the trip counts its tests
        leave open (docs/model.md, "Lone steps under the lift")."""
        machine = self.machine
        # (only the ends of the CTA's processes are read: the walk stops once they all can end)
        ends = self._can_precede(state, -1, p, None, frozenset(), False, goal=tuple(machine.procs_of_cta[cta]))
        return ends is not None and not all(ends[q] for q in machine.procs_of_cta[cta])

    def _completes_fresh_phase_before_a_first_wait(self, state: State, res: StepResult, p: int) -> bool:
        """Does this arrive complete a phase of a barrier that another process may still wait on
        without any history? Such a first wait means the phase of PTX's window with its parity
        (rules.first_wait_phase), which the completion moves: with parity 1 on a fresh barrier it
        passes at once (the CUTLASS producer start) but blocks once phase 0 has completed; with
        parity 0 it observes phase 0 in phase 1 but waits for phase 2 once phase 1 has completed.
        Neither is stale, so nothing reports the difference on the path that takes the arrive
        first (the causal SV501 check needs the path where the wait observes early). The two
        orders then reach different behaviours, so the arrive must not be taken alone."""
        for m, (before, after) in enumerate(zip(state.mbars, res.state.mbars, strict=True)):
            if before[M_K] != after[M_K] and self._first_wait_ahead(state, m, p):
                return True
        return False

    def _first_wait_ahead(self, state: State, m: int, p: int) -> bool:
        """May a process other than p, of barrier m's CTA, still wait on m without any history
        (its first wait on m: rules.first_wait_phase)?"""
        machine = self.machine
        cta, name, index = machine.mb_names[m]  # the barrier's CTA: the arrive may be remote
        mb = state.mbars[m]
        for q in machine.procs_of_cta[cta]:
            if q != p and touches(self.waits_ahead[q][state.procs[q][P_PC]], name, index) and \
                    machine._jprev(mb, q) is None:
                return True
        return False

    def _arrive_set_aside(self, state: State, p: int) -> bool:
        """Is process p's plain arrive (class _POR_ARRIVE, not ending its process: _arrive_ends)
        one the first loop of successors() would set aside after computing it, as completing a
        phase before a first wait (_completes_fresh_phase_before_a_first_wait)? Asked before the
        step is computed: on the 2x1 ping-pong GEMM the math warpgroups' arrives on their order
        barrier complete its phase while the other warpgroup's first wait on it lies ahead, and
        were computed (with the phase completion's knowledge shift) and set aside in a quarter of
        the states.

        The step's effect on barriers is what the model states for it: its footprint
        (Machine.future: one arrival event of ``count`` on barrier m2) applied by the arrival rule
        (rules.mb_arrive, which the mbarrier family applies, after its checks, to the barrier's
        state). A step that passes those checks then changes the phase of m2 alone, exactly when
        the rule says; one that fails them is set aside too (it breaks a rule). So True is the
        first loop's own answer; False (not known here, an invalid barrier, an overflow) computes
        the step as before. The step not computed here is computed where it is asked again
        (_some_step_breaks_a_rule, the full expansion), so the search is unchanged."""
        machine = self.machine
        pstate = state.procs[p]
        fut = machine.future((p, pstate[P_PC], pstate[P_VARS]))
        if fut is None or fut[0] is _END or len(fut[0]) != 1:
            return False
        ev = fut[0][0]
        if ev[0] != _EV_ARRIVE or ev[3] != 0:
            return False
        m2, count = ev[1], ev[2]
        mb = state.mbars[m2]
        if not mb[M_VALID]:
            return False
        s = rules.Mbar(*mb[:5])
        if rules.arrive_overflows(s, count) or rules.mb_arrive(s, count).k == s.k:
            return False
        return self._first_wait_ahead(state, m2, p)

    def _no_lifecycle_ahead(self, state: State, p: int, elem: Element, cta: int | None = None) -> bool:
        """No other process of ``cta`` (default: p's CTA) can still init or inval barrier element ``elem``."""
        machine = self.machine
        name, index = elem
        for q in machine.procs_of_cta[machine.procs[p].cta if cta is None else cta]:
            if q != p and touches(self.lifecycle_ahead[q][state.procs[q][P_PC]], name, index):
                return False
        return True
