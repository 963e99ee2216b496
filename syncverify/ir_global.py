"""The IR nodes of global memory (semantics/families/globalmem.py): flags, atomics, spins,
thread fences and the grid barrier. Part of the IR (``ir`` re-exports every name), in a module of
its own to keep ``ir`` small; the types it refers to are ``ir``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .diagnostics import Span

if TYPE_CHECKING:
    from .ir import Expr, Ref

GlobalScope = Literal["cta", "cluster", "gpu", "sys"]
FlagSem = Literal["relaxed", "acquire", "release", "acq_rel", "weak"]  # weak: `st.weak` only (flag_weak.py)


@dataclass(frozen=True, slots=True)
class FlagOp:
    """An operation on a global flag (a counter in global memory, semantics/families/globalmem.py).

    ``kind``: `atom` (a read-modify-write whose old value the thread receives), `red` (the same
    without the result), `st` (a store), `ld` (a load), `wait` (`wait.until`: the thread spins on
    loads until the value satisfies ``cmp`` against ``operands[0]``), `probe` (a spin that may give
    up: one load whose result the protocol does not branch on). ``rmw`` names the operation of an
    atom/red (add, inc, dec, exch, cas, min, max); ``operands`` are its values (cas: compare, new).
    ``sem``/``scope``: the PTX memory-consistency qualifiers (default `.relaxed` / `.gpu`, as PTX's)."""

    kind: Literal["atom", "red", "st", "ld", "wait", "probe"]
    flag: Ref
    rmw: str
    operands: tuple[Expr, ...]
    cmp: str
    sem: FlagSem
    scope: GlobalScope
    span: Span


@dataclass(frozen=True, slots=True)
class ThreadFence:
    """`fence.acq_rel.SCOPE` / `fence.sc.SCOPE` (CUDA's `__threadfence()` is `fence.sc.gpu`): a release
    pattern with a later relaxed write, an acquire pattern with an earlier relaxed read (PTX memory
    consistency model, "release and acquire patterns")."""

    sem: Literal["acq_rel", "sc"]
    scope: GlobalScope
    span: Span


@dataclass(frozen=True, slots=True)
class GridSync:
    """`grid.sync` (cooperative_groups `this_grid().sync()`): every thread of every CTA of the grid
    arrives, and none passes until all have; what came before it in any thread happens before what
    comes after it in every thread. Needs a cooperative launch (`launch cooperative;`)."""

    span: Span


@dataclass(frozen=True, slots=True)
class Flag:
    """`flag NAME[N] [init V] [bound B];`: N integers in global memory, one copy for the grid, that
    atomics, flag loads/stores and `wait.until` read and write. The explicit engine tracks their
    values exactly; a value outside 0..bound makes the check inconclusive (never safe)."""

    name: str
    size: int | None
    init: int
    bound: int
    span: Span
