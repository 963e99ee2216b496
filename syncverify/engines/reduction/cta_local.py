"""A persistent set of one CTA's steps: CTAs that meet only through global memory cost a sum, not a
product.

Where no single step may be taken alone (successors.py), the reduction used to explore every
enabled step. On a grid whose CTAs interact only through global memory (flags, atomics, global
buffers: CUTLASS's stream-K GEMM), that is the product of the CTAs' pipelines, although each CTA's
mainloop touches nothing any other CTA can touch. This rule explores, instead, the enabled steps T of
the processes of one CTA c that are *held*, with the landings of c's copies, when

* the machine has at least two CTAs, and nothing another CTA may still do touches c's
  objects where T does: in a grid whose programs never reach another CTA, nothing; in a cluster, the
  sites in c of every process of another CTA from its pc on and of every copy or commit in flight that
  is not c's own (cta_sites.py: a remote, multicast, 2-SM, cluster or tcgen05 operation at the CTAs it
  acts on, a CTA's liveness, the cluster barrier) — counted up to each process's next cluster.wait
  while a held process of c has not arrived at the barrier's open generation (``_blocked``);
* the processes of c that are *free* — those that stand at an operation that is not of c's own
  objects (``local_op``: a global access, a flag operation, a `.gpu`/`.cluster`/`.sys` thread fence
  or any `fence.sc`, `grid.sync`, a tensor-map operation, a tcgen05 mma, commit or allocation, an
  operation that reaches another CTA...), and, to a fixpoint, those
  whose current operation touches an object that a free process may still touch (``ahead``: every
  object of every operation from its pc to its end; an exit touches the CTA's all-thread named
  barriers, ``_exits``) — may still touch nothing that a step of T touches: then every step a free
  process can take before T is independent of T, and a held process cannot move before T (its step
  is in T, or it waits on an object only T or a held process can release);
* every copy in flight issued by or landing in c lands in c's shared memory on c's barrier (a bulk
  copy or a `cp.async.mbarrier.arrive`; tensor-core commits are not counted local);
* T is not empty, and each of its steps breaks no rule (no violation, no soft finding) and changes no
  part of the state that belongs to another CTA, to the grid or to a free process (checked on the
  step's result: the other CTAs' and the free processes' states, the other CTAs' mbarriers and named
  barriers, the cluster barrier, tensor memory, flags and the grid barrier are those of the state
  before it). A held process whose step would bring a process onto a spin on a flag (a write elsewhere
  may be a reset race, SV802, only while a process spins: families/globalmem.py ``_check_reset``), or
  end a process whose exit touches what a free process may (an all-thread named barrier whose
  generation is open or still ahead), is counted free instead, and the split is made again.

Of the CTAs that qualify, the one of lowest index is taken, so that the choice stays with one CTA from
state to state until it no longer qualifies (``STABLE``; the CTA with the fewest steps, which changes
with the state, interleaves the CTAs again along different paths). Why T is persistent, and what it
keeps of every finding, is in docs/model.md ("The search and its reductions", *Steps of one CTA*). The tables
it reads hold for every trip count, so it applies under a loop hook too ("Lone steps under the lift")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import ir
from ...semantics.core import StepResult
from ...semantics.program import BAR_WAIT, END, OP, Instr
from ...semantics.state import AG_CPARRIVE, AG_TMA, P_CLTOKEN, P_PC, State
from .cta_keys import ANY, EXIT, Key, Objects, _index, local_op, op_keys, reaches_peer
from .cta_sites import ALIVE, ALL_CTAS, CLUSTER, Site, agent_sites, op_sites
from .element import _successor_pcs

if TYPE_CHECKING:
    from ...semantics.machine import Machine

# The rule on or off (off: the search as before it; tests compare the two)
ENABLED = True
# what the other CTAs may still touch constrains a CTA's held steps (off only in tests: they show what the
# condition keeps)
FOREIGN = True
# the qualifying CTA of lowest index (True), or the one with the fewest steps in T (False; measured in
# bench/RESULTS-ptx.md)
STABLE = True

_IN_T, _NO, _FREE = 0, 1, 2  # what _keeps_to says of a step


def _spins_on_flag(ins: Instr) -> bool:
    return ins.kind == OP and isinstance(ins.op, ir.FlagOp) and ins.op.kind == "wait"


def _blocked(state: State, ps: tuple) -> bool:
    """Does the process's next cluster.wait wait for the open generation of the cluster barrier (it has not
    arrived, or its arrival is of that generation)?"""
    return ps[P_CLTOKEN] < 0 or state.cluster[0] <= ps[P_CLTOKEN]


def _at(sites: frozenset[Site], cta: int) -> frozenset[Key]:
    """The keys of the sites in CTA ``cta`` (those of every CTA included)."""
    return frozenset(key for d, key in sites if d == cta or d == ALL_CTAS)


class CtaLocalSteps:
    """The rule of the module docstring over one machine: its static tables, and ``steps``."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        programs = machine.programs
        self.applies = ENABLED and machine.ncta >= 2
        # does some program reach another CTA's objects (a cluster)? Then an exit also touches the cluster
        # barrier and the CTA's liveness (cta_sites.py)
        self.clustered = any(reaches_peer(ins.op) for prog in programs for ins in prog.code if ins.kind == OP)
        # per process and pc: 1 an operation of the CTA's own objects, 2 the end, 3 parked at the wait of a
        # `bar.sync` (its own CTA's named barrier: no step of its own, released by the CTA's arrivals), 0 else
        self.where = [[1 if local_op(machine, ins) else 2 if ins.kind == END else 3 if ins.kind == BAR_WAIT else 0
                       for ins in prog.code] for prog in programs]
        self.spin = [[_spins_on_flag(ins) for ins in prog.code] for prog in programs]
        self.cta_of = [proc.cta for proc in machine.procs]
        self.mbars_of = [[m for m, (c, _, _) in enumerate(machine.mb_names) if c == cta]
                         for cta in range(machine.ncta)]
        self.here: list[list[frozenset[Key]]] = []  # the objects of its own CTA of the operation at each pc
        self.ahead: list[list[frozenset[Key]]] = []  # those of every operation from each pc on
        # per process, pc and CTA d other than its own: the objects of d that it may touch from the pc on
        self.reach: list[list[tuple[frozenset[Key], ...]]] = []
        # the same up to the process's next cluster.wait (the rest cannot come while the open generation of the
        # cluster barrier waits for a held process's arrival: ``steps``)
        self.reach_cut: list[list[tuple[frozenset[Key], ...]]] = []
        self.ahead_cut: list[list[frozenset[Key]]] = []  # ``ahead`` up to the next cluster.wait
        self.mma_sites: list[frozenset[Site]] = []  # per process: every site of its tcgen05 mma/cp
        self._agent_sites: dict[tuple, frozenset[Site]] = {}
        if self.applies:
            self._tables()
        self.stats = [0, 0]  # states where the rule applied, states where it was asked (tests, bench)

    def _tables(self) -> None:
        """``here``, ``ahead`` and ``reach``, and each CTA's all-thread named barriers (``all_thread``)."""
        machine = self.machine
        ncta = machine.ncta
        self.all_thread: list[set[int | None]] = [set() for _ in range(ncta)]
        for p, prog in enumerate(machine.programs):
            for ins in prog.code:
                if ins.kind == OP and isinstance(ins.op, ir.BarSync) and ins.op.count is None:
                    self.all_thread[self.cta_of[p]].add(_index(ins.op.bar_id, machine.ctx[p]))
            self.mma_sites.append(frozenset().union(*(op_sites(machine, p, ins.op) for ins in prog.code
                                                      if ins.kind == OP and isinstance(ins.op, ir.TcMma))))
        for p, prog in enumerate(machine.programs):
            own = self.cta_of[p]
            here = [op_sites(machine, p, ins.op) if ins.kind in (OP, BAR_WAIT)
                    else frozenset({(own, EXIT)}) if ins.kind == END else frozenset() for ins in prog.code]
            succ = _successor_pcs(prog)
            ahead = list(here)
            changed = True
            while changed:  # backward fixpoint over the control-flow graph, every branch both ways
                changed = False
                for pc in range(len(here) - 1, -1, -1):
                    acc = here[pc].union(*(ahead[t] for t in succ[pc])) if succ[pc] else here[pc]
                    if acc != ahead[pc]:
                        ahead[pc] = acc
                        changed = True
            cut = list(here)
            changed = True
            while changed:
                changed = False
                for pc in range(len(here) - 1, -1, -1):
                    stop = prog.code[pc].kind == OP and isinstance(prog.code[pc].op, ir.ClusterWait)
                    acc = here[pc].union(*(cut[t] for t in succ[pc])) if succ[pc] and not stop else here[pc]
                    if acc != cut[pc]:
                        cut[pc] = acc
                        changed = True
            self.reach_cut.append([tuple(frozenset() if d == own else _at(sites, d) for d in range(ncta))
                                   for sites in cut])
            self.ahead_cut.append([_at(sites, own) for sites in cut])
            self.here.append([_at(sites, own) for sites in here])
            self.ahead.append([_at(sites, own) for sites in ahead])
            self.reach.append([tuple(frozenset() if d == own else _at(sites, d) for d in range(ncta))
                               for sites in ahead])

    def _exits(self, state: State, c: int, members: list[int]) -> frozenset[Key]:
        """What an exit of a process of CTA c touches in ``state``: the all-thread named barriers of c
        whose generation is open, or that a process of c that has not ended may still arrive at; in a
        cluster also the cluster barrier (its count is of the threads that have not exited) and the CTA's
        liveness (what another CTA's access or landing in c checks, SV404)."""
        ids = self.all_thread[c]
        out: set[Key] = {ALIVE, CLUSTER} if self.clustered else set()
        for i in ids:
            if i is None or state.named[16 * c + i].arrived:
                out.add(("nb", "", i))
        procs = state.procs
        for p in members if ids else ():
            for key in self.ahead[p][procs[p][P_PC]]:
                if key[0] == "nb" and (key[2] in ids or key[2] is None or None in ids):
                    out.add(key)
        return frozenset(out)

    def _sites_of_agent(self, a: tuple) -> frozenset[Site]:
        key = (a[0], a[1], a[2], a[3], a[4], a[6])
        got = self._agent_sites.get(key)
        if got is None:
            got = self._agent_sites[key] = agent_sites(self.machine, a, self.mma_sites)
        return got

    def _own_agent(self, a: tuple, c: int) -> bool:
        """A bulk copy or `cp.async.mbarrier.arrive` of CTA c landing in c on c's barrier: its landing may
        be in T."""
        return a[0] in (AG_TMA, AG_CPARRIVE) and a[1] == c and self.machine.mb_names[a[4]][0] == c \
            and self.cta_of[a[6]] == c

    def _foreign(self, state: State, cut: bool) -> list[list[frozenset[Key]]]:
        """Per CTA c, what the processes of the other CTAs may still touch in c (``reach``), and the copies
        and commits in flight that are not c's own (their sites in c; those of another CTA's own copies
        touch nothing of c). ``cut``: a process whose next cluster.wait waits for the open generation of the
        cluster barrier (it has not arrived, or its arrival is of that generation) only up to that wait."""
        ncta = self.machine.ncta
        out: list[list[frozenset[Key]]] = [[] for _ in range(ncta)]
        for q, ps in enumerate(state.procs):
            row = (self.reach_cut if cut and _blocked(state, ps) else self.reach)[q][ps[P_PC]]
            for d in range(ncta):
                if row[d]:
                    out[d].append(row[d])
        for a in state.agents:
            if self._own_agent(a, a[1]):
                continue
            for d, key in self._sites_of_agent(a):
                for t in range(ncta) if d == ALL_CTAS else (d,):
                    out[t].append(frozenset({key}))
        return out

    def steps(self, state: State, tried: dict[int, StepResult | None],
              landed: dict[tuple, StepResult]) -> list[StepResult] | None:
        """The steps T of the qualifying CTA of lowest index, or None where no CTA qualifies. Steps
        computed are kept in ``tried`` / ``landed`` for the full expansion."""
        machine = self.machine
        if not self.applies:  # (static tables: under a loop hook too, the lift recomputing the set per trip count)
            return None
        self.stats[1] += 1
        foreign = self._foreign(state, cut=False) if FOREIGN else [[] for _ in range(machine.ncta)]
        foreign_cut = self._foreign(state, cut=True) if FOREIGN and self.clustered else foreign
        best: list[StepResult] | None = None
        for c, members in enumerate(machine.procs_of_cta):
            found = self._qualify(state, c, members, foreign_cut[c], tried, landed, self.clustered)
            if isinstance(found, tuple):
                # the other CTAs cut at their next cluster.wait only while a held process of c has not arrived
                # at the cluster barrier: then its open generation cannot complete on a path that avoids T
                if any(state.procs[p][P_CLTOKEN] < 0 for p in found[1]):
                    found = found[0]
                else:
                    got = self._qualify(state, c, members, foreign[c], tried, landed, False)
                    found = got[0] if isinstance(got, tuple) else None
            if found and (best is None or (not STABLE and len(found) < len(best))):
                best = found
                if STABLE:
                    break
        if best is not None:
            self.stats[0] += 1
        return best

    def _qualify(self, state: State, c: int, members: list[int], foreign: list[frozenset[Key]],
                 tried: dict[int, StepResult | None], landed: dict[tuple, StepResult], cut: bool
                 ) -> tuple[list[StepResult], list[int]] | None:
        """T of CTA c with its held processes, or None where c does not qualify against ``foreign``
        (``cut``: what c's free processes may touch counted up to their next cluster.wait, as ``foreign``)."""
        forced: set[int] = set()
        while True:
            held, free = self._split(state, members, forced, foreign, cut)
            if not held:
                return None
            found = self._cta_steps(state, c, held, free, tried, landed)
            if not isinstance(found, int):
                return (found, held) if found else None
            forced.add(found)  # a held process whose step may not be in T: counted free, split again

    def _split(self, state: State, members: list[int], forced: set[int],
               foreign: list[frozenset[Key]], cut: bool = False) -> tuple[list[int], Objects]:
        """CTA c's held processes, and what its free ones (those of ``forced`` among them) and everything
        of the other CTAs (``foreign``) may still touch in c (module docstring)."""
        procs = state.procs
        free_objs = Objects(self._exits(state, self.cta_of[members[0]], members))
        for keys in foreign:
            free_objs.add(keys)
        free = [p for p in members if not self.where[p][procs[p][P_PC]] or p in forced]
        rest = [p for p in members if p not in forced and self.where[p][procs[p][P_PC]] not in (0, 2)]
        for p in free:
            free_objs.add((self.ahead_cut if cut and _blocked(state, procs[p]) else self.ahead)[p][procs[p][P_PC]])
        grew = bool(free) or bool(foreign)
        while grew and rest:
            grew = False
            for p in list(rest):
                if free_objs.meets(self.here[p][procs[p][P_PC]]):
                    rest.remove(p)
                    free_objs.add((self.ahead_cut if cut and _blocked(state, procs[p]) else self.ahead)[p][
                        procs[p][P_PC]])
                    grew = True
        return rest, free_objs

    def _cta_steps(self, state: State, c: int, held: list[int], free: Objects, tried: dict[int, StepResult | None],
                   landed: dict[tuple, StepResult]) -> list[StepResult] | int | None:
        """The enabled steps of CTA c's held processes and of its copies in flight, in the order
        Machine.successors gives them; None where one of them disqualifies the CTA, or the held
        process whose step may not be in T but may be taken as a free one's (``_keeps_to``)."""
        machine = self.machine
        out: list[StepResult] = []
        for p in held:
            if self.where[p][state.procs[p][P_PC]] != 1:
                continue
            res = tried[p] if p in tried else tried.setdefault(p, machine.step_process(state, p))
            if res is None:
                continue
            verdict = self._keeps_to(state, res, c, held, free)
            if verdict != _IN_T:
                return p if verdict == _FREE else None
            out.append(res)
            if isinstance(machine.programs[p].code[state.procs[p][P_PC]].op, ir.MbarProbe):
                other = machine.step_probe_false(state, p)
                if other is not None:
                    verdict = self._keeps_to(state, other, c, held, free)
                    if verdict != _IN_T:
                        return p if verdict == _FREE else None
                    out.append(other)
        seen = set()
        for a in state.agents:
            if not self._own_agent(a, c) or a in seen:
                continue
            seen.add(a)
            if not machine._agent_enabled(state, a):
                continue
            if free.meets(frozenset(key for _, key in self._sites_of_agent(a))):
                return None
            res = landed[a] if a in landed else landed.setdefault(a, machine.step_agent(state, a))
            if self._keeps_to(state, res, c, held, free) != _IN_T:
                return None
            out.append(res)
        return out or None

    def _keeps_to(self, state: State, res: StepResult, c: int, held: list[int], free: Objects) -> int:
        """May this step of CTA c be in T (_IN_T)? Not where it breaks a rule or changes the state of
        another CTA, of the grid or of a free process (_NO: the CTA does not qualify). Not either where
        it brings a process to a spin on a flag, or ends a process whose exit touches what a free
        process may (an all-thread named barrier): the process is then counted free (_FREE)."""
        if res.violation is not None or res.soft or res.state is None:
            return _NO
        machine = self.machine
        new = res.state
        mine = set(held)
        verdict = _IN_T
        for q, (a, b) in enumerate(zip(state.procs, new.procs, strict=True)):
            if a is b or a == b:
                continue
            if q not in mine:
                return _NO  # another CTA's process, or a free one of c
            pc = b[P_PC]
            if self.spin[q][pc] or (self.where[q][pc] == 2 and free.meets(self.here[q][pc])):
                verdict = _FREE
        if new.cluster != state.cluster or new.tmem != state.tmem:
            return _NO
        lo, hi = 16 * c, 16 * (c + 1)
        if new.named is not state.named and any(
                a != b for i, (a, b) in enumerate(zip(state.named, new.named, strict=True)) if not lo <= i < hi):
            return _NO
        if new.mbars is not state.mbars:
            own = set(self.mbars_of[c])
            if any(a is not b and m not in own and a != b
                   for m, (a, b) in enumerate(zip(state.mbars, new.mbars, strict=True))):
                return _NO
        if any(a[1] != c or machine.mb_names[a[4]][0] != c for a in set(new.agents) - set(state.agents)):
            return _NO
        return verdict


__all__ = ["ANY", "CtaLocalSteps", "Objects", "local_op", "op_keys", "reaches_peer"]
