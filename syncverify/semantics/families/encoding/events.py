"""The unrolled events of the bmc encoding: one operation of one process at fixed loop variables
(``Event``), the records it owns (``Record``) and the asynchronous completions it starts (``Copy``);
the refusal of what the encoding does not model (``Unsupported``) and the set-up helpers the
families' ``SETUP`` entries share.

A module of its own, in semantics/, so that the family modules (semantics/families/*.py), which
each set up the events of their operations (their ``SETUP`` tables), build these without
importing the engine (engines/bmc/layout.py unrolls the events and imports them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .... import ir
from ...core import Violation


class Unsupported(Exception):
    """The protocol uses something this encoding does not model; the message says what."""


def static_value(fn: Callable, *args: Any) -> tuple[Any, Violation | None]:
    """``fn(*args)``, evaluated once when the events are unrolled, and the violation it raises
    instead (executing the event is then that violation: Event.error)."""
    try:
        return fn(*args), None
    except Violation as v:
        return None, v


@dataclass
class Record:
    space: int
    key: tuple  # DATA: (cta, buf, slot); INIT: (m,); OBS: (m,); START: (cta,)
    kind: int  # READ 0 / WRITE 1
    owner: int
    part: int
    is_async: bool = False
    event: Event | None = None
    region: int = 0  # DATA: the bytes of the slot it touches (semantics.families.regions; 0: all)
    generic: bool = False  # (with is_async) a cp.async write: generic-proxy data (state.F_GENERIC)


@dataclass
class Copy:
    """One destination CTA of a bulk-tensor load (a multicast has several): an actor of its own,
    as each destination is an agent of its own in the machine, with its own write record. Or
    (``commit``) the arrival of a tcgen05.commit, with its in-flight flag as its record
    (families/tcgen05.py, Tcgen05Encoding)."""

    event: Event
    cta: int
    m: int
    key: tuple  # (cta, buf, slot)
    record: int
    actor: int = -1
    commit: bool = False


@dataclass
class Event:
    """One operation of one process at fixed loop variables, with everything static evaluated."""

    proc: int
    index: int
    op: Any
    line: int
    threads: int
    lanes: tuple[int, ...]  # holders of the executing lanes
    part: int
    creator: int  # the holder that knows the event's own record first
    own: int  # the executing process's CTA
    cta: int  # the CTA it acts on: a remote operation's target, else ``own``
    error: Violation | None = None  # evaluating its operands already fails: executing it is a violation
    m: int = -1
    targets: tuple[int, ...] = ()
    parity: int = 0
    count: int = 0
    nbytes: int | None = None
    key: tuple = ()
    record: int = -1
    nb: int = -1  # its named barrier: an index into Encoding.nbs
    nb_count: int = -1  # -1: every non-exited thread
    tm: int = -1  # a cta_group 2 allocation or deallocation: its rendezvous (the machine's tmem index)
    pending: int = 0
    retires: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (record, holders that learn it)
    # a wgmma wait of a warpgroup (Machine._wgmma_wait): the (process, event index) each other warp
    # must have reached, None when one never does; the reads whose issue it is causally after
    after: list[tuple[int, int]] | None = field(default_factory=list)
    issued: list[int] = field(default_factory=list)
    hide: int = 0  # records a release by some lanes does not publish from the other-lanes holder
    copies: list[Copy] = field(default_factory=list)  # a bulk-tensor load: one per destination CTA
    inits: tuple[int, ...] = ()  # an init: the init record of each target
    ordinal: int = 0  # which step of its process runs it (see Encoding._runs)

    @property
    def remote(self) -> bool:
        return self.cta != self.own

    @property
    def reaches_peer(self) -> bool:
        """Does it act on a peer CTA (and so depend on that CTA's exit, SV404)?"""
        return self.remote or any(c.cta != self.own for c in self.copies)

    @property
    def cross_release(self) -> bool:
        """A release arrive on a peer CTA's barrier: Machine._check_cross_cta_release (SV602)."""
        return isinstance(self.op, ir.MbarArrive) and self.remote and self.op.sem == "release"


def remote_target(enc: Any, e: Event, env: dict, ctx: Any) -> None:
    """The CTA an operation with a `@ r` operand acts on (Machine._target_cta: SV405 outside the
    cluster), into ``e.cta``."""
    op = e.op
    if op.remote is not None:
        cta, e.error = static_value(enc.machine._target_cta, None, e.proc, op.remote, env, ctx, op.span)
        e.cta = e.own if cta is None else cta


def no_operands(enc: Any, e: Event, env: dict, ctx: Any) -> None:
    """The set-up of an operation without operands to evaluate (a family's SETUP entry)."""
