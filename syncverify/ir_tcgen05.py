"""The tcgen05 (Blackwell tensor-memory) operations of the protocol IR: a module of their own so that ir.py stays
one screenful of concerns. ``syncverify.ir`` re-exports every name; import them from there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .diagnostics import Span

if TYPE_CHECKING:
    from .ir import Expr, Ref


@dataclass(frozen=True, slots=True)
class TmemAlloc:
    """`tmem.alloc` / `tmem.dealloc` (Blackwell; collective over the CTA pair for cta_group 2) of
    ``cols`` tensor-memory columns of the executing CTA (512 per CTA: an allocation without room
    blocks until a deallocation frees it)."""

    dealloc: bool
    cta_group: int
    span: Span
    cols: int = 32


@dataclass(frozen=True, slots=True)
class TmemRelinquish:
    """`tmem.relinquish [cta_group G]` (`tcgen05.relinquish_alloc_permit.cta_group::G.sync.aligned`,
    CUTLASS's `release_allocation_lock`): the executing CTA gives up the right to allocate tensor
    memory; a later `tmem.alloc` of that CTA is illegal (PTX §9.7.16.7.1; SV604)."""

    cta_group: int
    span: Span


@dataclass(frozen=True, slots=True)
class UmmaCommit:
    """`tcgen05.commit bar [multicast mask] [cta_group N]` (old spelling `umma.commit`, CUTLASS's
    `umma_arrive`): an async arrive(1) per target once every prior asynchronous tcgen05 operation
    (mma, cp) of the committing thread is complete."""

    bar: Ref
    multicast: Expr | None
    span: Span
    cta_group: int = 1


@dataclass(frozen=True, slots=True)
class TcMma:
    """`tcgen05.mma ACC, A, B [cta_group N]` or `tcgen05.cp ACC, SRC`: an asynchronous tensor-core
    operation that reads its shared-memory operand slots and writes the tensor-memory region ACC
    until a `tcgen05.commit` that tracks it completes. With cta_group 2 the pair's leader (even
    CTA) issues it for both CTAs: it reads both CTAs' operand slots and writes both CTAs' ACC.
    `tcgen05.shift ACC` (kind "shift", no operands) shifts the rows of ACC down by one: it reads and
    writes ACC, asynchronously, until a commit tracks it (PTX ISA §9.7.16.9.3)."""

    kind: Literal["mma", "cp", "shift"]
    acc: Ref
    operands: tuple[Ref, ...]
    cta_group: int
    span: Span


@dataclass(frozen=True, slots=True)
class TmemAccess:
    """`tcgen05.ld REGION` / `tcgen05.st REGION`: an asynchronous read / write of a tensor-memory
    region by the executing threads, complete at their `tcgen05.wait::ld` / `wait::st`.

    ``lanes`` / ``cols``: the sub-range it touches (`lanes LO..HI`, `cols LO..HI`, half-open; the
    region's columns counted from its first), so that two accesses of one region conflict only where
    their rectangles overlap (semantics/families/tmem_ranges.py); None: every lane / column."""

    kind: Literal["ld", "st"]
    region: Ref
    span: Span
    lanes: tuple[Expr, Expr] | None = None
    cols: tuple[Expr, Expr] | None = None


@dataclass(frozen=True, slots=True)
class TcWait:
    """`tcgen05.wait::ld` / `tcgen05.wait::st`: the executing threads' prior ld / st are complete."""

    kind: Literal["ld", "st"]
    span: Span


@dataclass(frozen=True, slots=True)
class TcFence:
    """`tcgen05.fence::before_thread_sync` / `::after_thread_sync`: orders the thread's tcgen05
    operations before (after) its following (prior) thread synchronization."""

    kind: Literal["before", "after"]
    span: Span
