"""Why the reduction expands a state whole: for each enabled step, the rule that considered it and the condition
that refused it (issues #33, #36).

A breadth-first search with the search's own successor function (the reductions on, and the symmetry
explore() uses), under a state budget. For each state expanded whole (more than one successor) after
``--from`` states, each process's enabled step is put to the rule successors.py asks for its kind, and the first
condition that refuses it is counted, by process role, operation, protocol line and condition; then, per CTA,
why its held steps are no persistent set (engines/reduction/cta_local.py): the processes that are free and what
made each free (its own operation, or an object it touches that a free process or another CTA may still touch).
The conditions are asked as successors() asks them, in its order; the census changes nothing it reads.

    zcat tests/data/ptx/sm100_gemm_2sm_2x1_s2.ptx.gz > g.ptx
    python3 -m syncverify extract g.ptx --cutlass-problem 256x128x128 -o g.sync
    PYTHONPATH=$PWD python3 bench/refusal_census.py g.sync --max-states 100000
    PYTHONPATH=$PWD python3 bench/refusal_census.py g.sync --assume relaxed-arrive-publishes-init   # a reading
"""

from __future__ import annotations

import argparse
import collections

from syncverify import load
from syncverify.engines.reduction import successors as succ
from syncverify.engines.reduction.cta_local import _blocked
from syncverify.engines.reduction.element import reuse_warnings_only
from syncverify.engines.reduction.exit import lone_exit_after_arrive
from syncverify.engines.reduction.first_wait import lone_completing_arrive
from syncverify.engines.reduction.named import named_refusal
from syncverify.engines.reduction.precede_walk import _ANY_UPDATE, _NO_ARRIVAL
from syncverify.engines.reduction.probe_pair import probe_outcomes
from syncverify.engines.reduction.successors import Reduction
from syncverify.engines.reduction.tc_warning import unfenced_tmem_warnings_only
from syncverify.options import READINGS, Options, readings_asked
from syncverify.semantics.machine import Assumptions, Machine
from syncverify.semantics.program import END
from syncverify.semantics.state import AG_CPARRIVE, M_K, P_CLTOKEN, P_PC, P_VARS, State
from syncverify.semantics.symmetry_cta import cta_symmetry
from syncverify.semantics.symmetry_perm import symmetry_for


def _named_refusal(red: Reduction, state: State, p: int) -> str:
    """The named-barrier rule's own answer (named.named_refusal)."""
    return "named: " + (named_refusal(red, state, p) or "(takes it)")


def _step_refusal(red: Reduction, state: State, p: int, cls: str, res) -> str:
    """Why the step ``res`` of process p (class ``cls``) is not taken alone in ``state``."""
    machine = red.machine
    ps = state.procs[p]
    if res.violation is not None or res.soft:
        return "the step breaks a rule"
    ends = machine.programs[p].code[res.state.procs[p][P_PC]].kind == END
    if cls is succ._POR_OTHER:
        return "never alone (class other)"
    if cls is succ._POR_LOCAL:
        return "warns" if res.warnings and not unfenced_tmem_warnings_only(res) else \
            "ends its process" if ends else "local (taken alone?)"
    if cls is succ._POR_CLUSTER:
        return "cluster: not lone" if not res.lone else "cluster: ends"
    if cls is succ._POR_REACHES:
        return "reaches: _lone_reaching_op" if not red._lone_reaching_op(state, p) else \
            ("warns" if res.warnings else "ends" if ends else "reaches (taken alone?)")
    if cls is succ._POR_ARRIVE:
        if red._arrive_ends(p, ps) and not lone_exit_after_arrive(red, state, p):
            return "arrive: ends its process, and may not leave early (exit.py)"
        if not red._lone_reaching_op(state, p):
            return "arrive: _lone_reaching_op"
        if red._arrive_set_aside(state, p) or red._completes_fresh_phase_before_a_first_wait(state, res, p):
            return "arrive: completes a fresh phase before a first wait" + (
                " (first_wait.py takes it?)" if lone_completing_arrive(red, state, p, res) else
                ", and its barrier can be updated first, or a first wait passes now (first_wait.py)")
        return "arrive: warns" if res.warnings and not reuse_warnings_only(res) else "arrive (taken alone?)"
    if cls is succ._POR_WAIT:
        if res.lone:
            return "wait: lifecycle ahead" if not red._no_lifecycle_ahead(
                state, p, machine.element_of(p, machine.programs[p].code[ps[P_PC]].op.bar, ps[P_VARS])) \
                else "wait: (taken alone?)"
        if res.warnings:
            return "wait: warns"
        if ends:
            return "wait: ends its process"
        m = machine.wait_barrier(state, p)
        forbidden = _ANY_UPDATE if state.mbars[m][M_K] == 0 else _NO_ARRIVAL
        if red._can_precede(state, m, p, None, forbidden, False) is None:
            return "observing wait: an update of its barrier can come first" if state.mbars[m][M_K] == 0 else \
                "observing wait: an arrival on its barrier can come first"
        return "observing wait: (taken alone?)"
    if cls is succ._POR_ARRIVE_TX:
        m = machine.arrive_target(state, p)
        if m is None:
            return "arrive.expect_tx: no target"
        if not red._landings_commute(state, m, None, p):
            return "arrive.expect_tx: copies in flight on its barrier do not commute"
        if res.warnings:
            return "arrive.expect_tx: warns"
        if ends:
            return "arrive.expect_tx: ends"
        if red._can_precede(state, m, p, None, _ANY_UPDATE, False, landings_ok=True) is None:
            return "arrive.expect_tx: an update of its barrier can come first"
        return "arrive.expect_tx: completes a fresh phase" if red._completes_fresh_phase_before_a_first_wait(
            state, res, p) else "arrive.expect_tx: (taken alone?)"
    if cls is succ._POR_PROBE:
        if not machine.probe_passes(state, p):
            return "probe: its phase has not completed (false only)"
        return "probe: both outcomes (probe_pair.py takes them?)" if probe_outcomes(red, state, p, {}) else \
            "probe: an update of its barrier can come first, or an outcome reports"
    if cls is succ._POR_NAMED:
        if res.warnings:
            return "named: warns " + ",".join(sorted({w.code for w in res.warnings}))
        if ends:
            return "named: ends"
        return _named_refusal(red, state, p)
    return f"class {cls}"


_AGENT_KINDS = ("tma landing", "tc commit", "cp.async arrive-on")


def _cta_refusal(red: Reduction, state: State, c: int) -> str:
    """Why CTA c's held steps are not a persistent set: the processes that are free, each with its reason."""
    loc = red.cta_local
    machine = red.machine
    members = machine.procs_of_cta[c]
    foreign = loc._foreign(state, cut=True)[c]
    procs = state.procs
    cut = any(procs[p][P_CLTOKEN] < 0 for p in members)
    held, _ = loc._split(state, members, set(), foreign, cut)
    if not held:
        roots = []
        for p in members:
            w = loc.where[p][procs[p][P_PC]]
            if w == 0:
                ins = machine.programs[p].code[procs[p][P_PC]]
                roots.append(f"{machine.procs[p].label()}@{type(ins.op).__name__ if ins.op else ins.kind}:{ins.line}")
        return "no held process; free at an operation not of its CTA: " + " ".join(roots)
    return f"held {[machine.procs[p].label() for p in held]}: T refused"


def census(path: str, max_states: int, start: int, params: dict[str, int] | None = None,
           assume: tuple[str, ...] = ()) -> tuple[collections.Counter, collections.Counter, int]:
    machine = Machine(load(path, params or {}), Assumptions.of(Options(**readings_asked(False, assume=assume))))
    symmetry = cta_symmetry(machine) or symmetry_for(machine, permuted=False)
    canon = symmetry.canon if symmetry.groups else (lambda s: (s, None))
    red = Reduction(machine)
    labels = [p.label() for p in machine.procs]
    init = canon(machine.initial())[0]
    seen, level = {init}, [init]
    steps: collections.Counter = collections.Counter()
    ctas: collections.Counter = collections.Counter()
    whole = 0
    while level and len(seen) < max_states:
        nxt = []
        for state in level:
            results = list(red.successors(state))
            if len(results) > 1 and len(seen) > start:
                whole += 1
                for p, ps in enumerate(state.procs):
                    cls = red._por_class[p][ps[P_PC]]
                    if cls is succ._POR_NONE:
                        continue
                    res = machine.step_process(state, p)
                    if res is None:
                        continue
                    ins = machine.programs[p].code[ps[P_PC]]
                    why = _step_refusal(red, state, p, cls, res)
                    steps[(labels[p].split(".")[0], type(ins.op).__name__, ins.line, why)] += 1
                for a in state.agents:  # the agents in flight, by kind, barrier and issuing line
                    steps[("agent", _AGENT_KINDS[a[0]], a[7] if a[0] == AG_CPARRIVE else "-",
                           f"in flight on {machine.mb_label(a[4])}")] += 1
                for c in range(machine.ncta if machine.ncta > 1 else 0):  # cta_local.py needs two CTAs
                    ctas[(c, _cta_refusal(red, state, c))] += 1
                if any(_blocked(state, ps) for ps in state.procs):
                    ctas[("-", "some process before its next cluster.wait")] += 1
            for res in results:
                if res.violation is None and res.state is not None:
                    image = canon(res.state)[0]
                    if image not in seen:
                        seen.add(image)
                        nxt.append(image)
        level = nxt
    return steps, ctas, whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", help="a .sync file (extract a PTX kernel first)")
    ap.add_argument("--max-states", type=int, default=100_000)
    ap.add_argument("--from", dest="start", type=int, default=0, help="count once this many states are stored")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter of the spec, as `check -D` takes it")
    ap.add_argument("--assume", action="append", default=[], choices=sorted(READINGS), metavar="READING",
                    help="a reading of unsettled PTX to take, as `check --assume` takes it (the others keep their "
                    "defaults)")
    args = ap.parse_args()
    params = {k: int(v) for k, v in (d.split("=", 1) for d in args.defines)}
    steps, ctas, whole = census(args.spec, args.max_states, args.start, params, tuple(args.assume))
    print(f"states expanded whole: {whole:,}\n\nenabled steps there: role, operation, line, refusing condition: count")
    for (role, op, line, why), n in steps.most_common(args.top):
        print(f"  {role:10} {op:12} line {line:4} {why}: {n:,}")
    print("\nper CTA, why its held steps are no persistent set: count")
    for (c, why), n in ctas.most_common(args.top):
        print(f"  CTA {c}: {why}: {n:,}")


if __name__ == "__main__":
    main()
