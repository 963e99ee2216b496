"""The symbolic trip count: the ``Machine.loop_hook`` of the periodic search.

While a branch has not fixed ITERS, the hook answers every trip-count test above the largest
value already tested true with "true" and records it; once a branch fixes ITERS, it answers as
the concrete machine would (``search`` says what this makes of the search). A room of its own
because the search and the merge key (``key``) both read the modes it defines, and neither
needs the other to.
"""

from __future__ import annotations

from ..periodic import Plan
from ..reduction.hooked import WalkTooFar

UNFIXED, FIXED = 0, 1
MAX_TESTS = 4096  # new largest trip-count tests one expansion may make
# How many iterations past the known ones (ITERS > T) a walk of the reduction may test while ITERS
# is not fixed. A walk that goes further refuses its step (reduction/hooked.py); each value a kept
# walk tests adds a branch with ITERS fixed at it (search.py, expand), so the allowance is small.
WALK_AHEAD = 4


class _Unexpected(Exception):
    """The plan's assumptions did not hold during the search (an internal error: inconclusive)."""


# ---------------------------------------------------------------------- the symbolic trip count
class TripCount:
    """``Machine.loop_hook`` for one plan: answers the trip-count tests of its loops.

    ``fixed``: the concrete ITERS of this branch, or None while it is not fixed; then
    ``known`` is T (ITERS > T) and every test above T is answered true and recorded. Only the
    largest value tested matters to the search (the branches it adds with ITERS fixed go up to it),
    so ``tested`` keeps each new largest value, in increasing order.

    The reduction's walks of the processes' futures are bracketed (``walk_begin``/``walk_end``,
    reduction/hooked.py): inside one, while ITERS is not fixed, a test more than WALK_AHEAD above
    T raises WalkTooFar, and a walk whose answer is not used forgets the values it recorded."""

    def __init__(self, p: Plan):
        self.loops: dict[tuple[int, int], tuple[int | None, int]] = {}
        for proc, pp in p.procs:
            for loop in (pp.main, *pp.epilogues):
                for pc in (loop.init_pc, loop.next_pc):
                    self.loops[(proc, pc)] = (loop.lo_off, loop.hi_off)
        self.fixed: int | None = None
        self.known = 0
        self.tested: list[int] = []
        self.walking = 0  # walks of the reduction in progress (they nest)

    def walk_begin(self) -> int:
        self.walking += 1
        return len(self.tested)

    def walk_end(self, mark: int, keep: bool) -> None:
        self.walking -= 1
        if not keep:
            del self.tested[mark:]

    def governs(self, proc: int, pc: int) -> bool:
        return (proc, pc) in self.loops

    def __call__(self, p: int, pc: int, lo: int, hi: int, value: int) -> tuple[int, int]:
        loop = self.loops.get((p, pc))
        if loop is None:
            return lo, hi
        lo_off, hi_off = loop
        if self.fixed is not None:
            return (lo if lo_off is None else self.fixed + lo_off), self.fixed + hi_off
        if lo_off is not None:
            raise _Unexpected("an epilogue loop was reached while the trip count was not fixed")
        u = value - hi_off  # the test value < ITERS + hi_off, as u < ITERS
        if u > self.known and (not self.tested or u > self.tested[-1]):
            if self.walking and u > self.known + WALK_AHEAD:
                raise WalkTooFar(f"a walk tested iteration {u} with ITERS > {self.known} known")
            self.tested.append(u)
            if len(self.tested) > MAX_TESTS:
                # iterations that reach no operation: with ITERS unknown they would never end
                raise _Unexpected("a trip-count loop runs many iterations without reaching an operation")
        return lo, value + 1  # true: this branch stands for every ITERS above the values tested
