"""Walks of the processes' futures under a loop hook (the all-iterations lift's symbolic trip count).

Several rules decide on what other processes can still do: the walk of what can come first
(precede_walk.py), the barriers a process can still count bytes on (element.py), the slots it
reaches before its next wait (cp_arrive.py). Each reads the fixed sequence of operations a
process runs from where it stands (``Machine.future``), which the loop bounds fix. Under a loop
hook the bounds are the hook's: with the trip count fixed at n the machine is the concrete one at
ITERS = n, and the rules hold as they do for the explicit engine; with the trip count not yet
fixed, the hook answers every trip-count test true and records the values it tested, so a walk
reads the sequences of ITERS = ∞ as far as it goes, and its answer holds for every ITERS above
the values it tested. The search recomputes the branches of the smaller trip counts with ITERS
fixed (engines/symbolic/search.py, ``expand``; docs/model.md, "Lone steps under the lift").

Two things a walk needs for that, which this module brackets:

* a walk through a loop whose waits all pass never ends while ITERS is not fixed. The hook
  raises :class:`WalkTooFar` once a walk tests a value past the known ones by more than it
  allows; the walk's rule then refuses (a larger set of steps is explored: always sound);
* a walk whose answer refuses needs none of its tests: a refusal holds at every trip count.
  Its tests are forgotten, so that they add no branches with ITERS fixed.

A room of its own: the reduction reads the hook only through this protocol, and the hook
(engines/symbolic/hook.py) implements it without the reduction knowing the lift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, cast, runtime_checkable

if TYPE_CHECKING:
    from ...semantics.machine import Machine

T = TypeVar("T")

# Off: every walk under a loop hook refuses, as before the walks were bracketed (the lift's rules then
# take alone only the steps that need no walk); tests/test_lift_walks.py compares the two.
WALKS_UNDER_HOOK = True


class WalkTooFar(Exception):
    """A walk under a loop hook went further into a loop than the hook answers for a walk."""


@runtime_checkable
class WalkedHook(Protocol):
    """What a loop hook offers the walks: a mark before one, and after it whether its tests are kept."""

    def walk_begin(self) -> int:
        """Start a walk (walks nest); the mark to hand back to ``walk_end``."""
        ...

    def walk_end(self, mark: int, keep: bool) -> None:
        """End the walk begun at ``mark``; unless ``keep``, forget the tests it recorded."""
        ...

    def governs(self, proc: int, pc: int) -> bool:
        """Does the hook answer the bounds of process ``proc``'s loop whose `for` is at ``pc``?"""
        ...


_WALKED: dict[type, bool] = {}  # per hook type: isinstance(hook, WalkedHook), which a protocol check makes slow


def _walked(hook: object) -> WalkedHook | None:
    """The hook, where it offers the walks' protocol (its methods are the class's); else None. Asked once
    per type: the reduction asks it for every walk, and a protocol's isinstance reads every attribute."""
    kind = type(hook)
    known = _WALKED.get(kind)
    if known is None:
        known = _WALKED[kind] = isinstance(hook, WalkedHook)
    return cast(WalkedHook, hook) if known else None


def governed_loops(machine: Machine, proc: int) -> Callable[[int], bool]:
    """For the per-pc tables (loop_envs.py): which of a process's loops have bounds other than their
    constants, those a loop hook answers. Under a hook that cannot say which, every loop."""
    hook = machine.loop_hook
    if hook is None:
        return lambda pc: False
    walked = _walked(hook)
    if walked is None:
        return lambda pc: True
    return lambda pc: walked.governs(proc, pc)


def walk_under_hook(machine: Machine, walk: Callable[[], T | None]) -> T | None:
    """``walk()``, where no loop hook is installed; under one, bracketed as the module docstring says:
    None (the rule refuses) where the walk goes too far, or where the hook cannot bound a walk."""
    hook = machine.loop_hook
    if hook is None:
        return walk()
    walked = _walked(hook)
    if not WALKS_UNDER_HOOK or walked is None:
        return None
    mark = walked.walk_begin()
    out: T | None = None
    try:
        out = walk()
    except WalkTooFar:
        out = None
    finally:
        walked.walk_end(mark, out is not None)
    return out


__all__ = ["WalkTooFar", "WalkedHook", "governed_loops", "walk_under_hook"]
