"""The values a program's constant-bound loop variables can hold at each pc, for the per-pc tables.

The tables of what a process can still touch from a pc (element.py, ``_elements_ahead``) evaluate
each operation's barrier index without the process's variables, so an index that reads a loop
variable stood for every element of its array. Extracted kernels keep all their barriers in one
array, and the extractor writes a run of repeated statements as a loop (ptx/roll.py): `arrive.expect_tx
mb0[2 + k0]` in `for k0 in 0..6` then conflicted with the consumers' arrivals on the empty barriers
mb0[8..15], which the unrolled statements never name. Where a walk of the process's own future cannot
be made (the all-iterations lift, whose trip count has no end while it is not fixed), that table is
what the reduction reads, and the lift of the 1x1 ping-pong GEMM with its period halved explored
6.7 times the states of the same protocol unrolled.

Here a loop whose bounds are constants in the process's context ranges its variable over
``lo..hi``: at an operation inside it, the variable holds one of those values, because only the
loop writes its slot (checked: no instruction of the body names it, so no `let`, no inner loop and
no value kept by an operation, a probe's or a flag's, writes it). Each enclosing
loop of that kind contributes its values; an index is then evaluated once per combination, and
the elements it names are exactly those it can name there. A loop whose bounds read a variable,
whose range is long, or whose bounds a loop hook answers (the lift's trip count: the program's
constant there is only the trip count it was compiled at) contributes nothing, so an index that
reads its variable still stands for the whole array.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

from ...expr import Context, EvalError, evaluate
from ...semantics.program import FOR_INIT, Program

MAX_RANGE = 64  # values of one loop variable enumerated
MAX_ENVS = 512  # combinations at one pc; beyond, the innermost loops are left out


def loop_envs(prog: Program, ctx: Context, governed: Callable[[int], bool]) -> list[tuple[dict[str, int], ...]]:
    """Per pc, the environments of the enumerable loops enclosing it (one empty environment where none).

    ``governed(pc)``: whether the loop whose `for` starts at pc has its bounds answered by a loop hook."""
    code = prog.code
    n = len(code)
    enclosing: list[list[tuple[str, range]]] = [[] for _ in range(n)]
    for init, ins in enumerate(code):
        if ins.kind != FOR_INIT or governed(init):
            continue
        body = range(init + 1, ins.target - 1)  # the FOR_NEXT is at target - 1
        if any(code[pc].slot == ins.slot for pc in body):  # a `let`, an inner loop, a kept value writes it
            continue
        try:
            values = range(evaluate(ins.expr, {}, ctx), evaluate(ins.expr2, {}, ctx))
        except EvalError:
            continue
        if len(values) > MAX_RANGE:
            continue
        for pc in body:
            enclosing[pc].append((ins.loop_var, values))
    out: list[tuple[dict[str, int], ...]] = []
    cache: dict[tuple, tuple[dict[str, int], ...]] = {}
    for loops in enclosing:
        kept: list[tuple[str, range]] = []
        size = 1
        for name, values in loops:  # outermost first
            if size * max(len(values), 1) > MAX_ENVS:
                break
            kept.append((name, values))
            size *= max(len(values), 1)
        key = tuple((name, values.start, values.stop) for name, values in kept)
        if key not in cache:
            names = [name for name, _ in kept]
            cache[key] = tuple(dict(zip(names, combo, strict=True)) for combo in product(*(v for _, v in kept)))
        out.append(cache[key])
    return out
