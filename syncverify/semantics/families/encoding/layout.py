"""The interface of the bmc encoding's static layout that the families' encodings are written
against: what their ``SETUP``, ``USES`` and ``ADDS`` entries and their ``*Encoding`` mixins read of
the unrolled protocol (its events, records, knowledge holders and numbers).

A module of its own, in semantics/, so that the families depend on this interface and not on the
engine: engines/bmc/layout.py's ``Encoding`` satisfies it (structurally; tests/test_bmc.py checks
that every member is there), and nothing under semantics/ imports the engine. A family that needs
more of the layout declares it here first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import z3

    from .effects import Work
    from .events import Copy, Event, Record


@runtime_checkable
class Encoding(Protocol):
    """The static layout of the Z3 transition relation, as the families use it (the members of
    engines/bmc/layout.py's ``Encoding`` and its mixins; each is documented there)."""

    machine: Any  # the semantics.machine.Machine the events are unrolled from
    P: int  # processes
    ncta: int
    procs_of_cta: list[list[int]]
    events: list[list[Event]]  # per process, in program order
    copies: list[Copy]  # every copy and commit arrival: the actors after the processes
    records: list[Record]
    R: int  # the width of a knowledge bit-vector: one bit per record
    start_record: list[int]  # each CTA's start record
    init_records: dict[int, list[int]]  # per barrier: the init records of its inits
    obs_of: dict[int, list[int]]  # per barrier: the observation records of its waits
    obs_mask: int
    nbs: list[tuple[int, int]]  # named barriers in use: (cta, id)
    all_thread_nbs: set[int]  # named barriers every arrival syncs on with every non-exited thread
    has_cluster_barrier: bool
    track_rdata: bool  # SV602 bookkeeping (a release reaches a peer CTA's barrier)
    tx_can_overflow: bool
    token_base: int  # a parked warp's token: named-barrier index * token_base + generation
    lanewise: dict[int, int]  # cp.async records of some lanes -> the index of the own wait retiring them
    snapped: list[int]  # a warpgroup's wgmma reads: what their issuer had observed is kept

    # ---- knowledge holders
    def leader(self, p: int) -> int: ...

    def lanes_holder(self, p: int) -> int: ...

    def cur(self, m: int) -> int: ...

    def last(self, m: int) -> int: ...

    def nb(self, i: int) -> int: ...

    @property
    def cl_cur(self) -> int: ...

    @property
    def cl_last(self) -> int: ...

    def snap_holder(self, c: Copy) -> int: ...

    # ---- records and numbers
    def _new_record(self, rec: Record) -> int: ...

    def _mask(self, bits: Iterable[int]) -> int: ...

    def bit(self, r: int) -> z3.BitVecRef: ...

    def num(self, value: int) -> z3.BitVecRef: ...

    def tx(self, e: Event) -> int: ...

    def lanes_synced(self, p: int, first: int, last: int) -> bool: ...

    def published(self, e: Event) -> list[int]: ...

    def earlier_commits(self, c: Copy) -> list[Copy]: ...

    # ---- ends of processes and CTAs
    def done(self, w: Work, p: int) -> Any: ...

    def cta_done(self, w: Work, cta: int) -> Any: ...

    # ---- independence (the partial-order reduction's objects)
    def adds_to(self, e: Event | None) -> bool: ...

    def nb_waiters(self, n: int) -> list[int]: ...

    def ending(self, starts: Iterable[int]) -> dict: ...

    def ends_parked_on(self, n: int) -> list[int]: ...
