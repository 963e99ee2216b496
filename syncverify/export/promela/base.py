"""What every room of the Promela export shares: the error that refuses a protocol, the model's
constants (knowledge bits per Promela int, the sentinels, the check codes its assertions name) and
the record of what the run of every process found (``_Facts``, which each family fills for its
operations). A module of its own so that the skeleton and the family modules import them without
importing one another."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

BITS = 30  # knowledge bits per Promela int: stays clear of the sign bit
NO_JPREV = -2  # "this waiter has no history" (the engine's missing jprev entry); -1 is a real value
ALL_THREADS = -1  # the count of a `syncthreads` generation: every thread not exited
INT_LIMIT = (1 << 31) - 1
CODES = ("SV201", "SV202", "SV205", "SV301", "SV302", "SV303", "SV401", "SV402", "SV403", "SV404", "SV407", "SV501",
         "SV502", "SV503", "SV504", "SV601", "SV602", "EXPORTCAP")

F_LATEST = 16  # a record flag of the export's own (the latest write of its slot), beside semantics.state's


class ExportError(Exception):
    """The protocol cannot be exported faithfully (or is not well formed); the message says why."""


WHOLE_HI = 1 << 30  # the end of a whole-slot region (past every slot's bytes)


@dataclass
class _KeyUse:
    """What the straight-line run of every process does to one buffer slot of one CTA."""

    generic_readers: set[tuple[int, int]] = field(default_factory=set)  # (process, part)
    async_reads: int = 0
    copies: int = 0
    generic_writes: int = 0
    region_writers: set[tuple[int, int, int]] = field(default_factory=set)  # (process, lo, hi) of region writes
    lanes: set[tuple[int, int, bool, int, int, int]] = field(default_factory=set)  # export/lanes.py

    def capacity(self) -> int:
        """Live records of the slot never exceed this (see `_add_read` / `_add_write` in machine.py):
        one generic read per (process, part, region), every async read and copy until a generic
        write drops them, the latest generic write and the one it superseded (where parts of the
        slot are written separately: the latest write of each writer and region, and one more)."""
        writes = (len(self.region_writers) + 2 if self.region_writers else 2) if self.generic_writes else 0
        return len(self.generic_readers) + self.async_reads + self.copies + writes



@dataclass
class _Facts:
    """What the export needs to know about every execution, from one run of each process.

    A process's control flow depends only on its own loop variables (machine.py runs it
    eagerly for that reason), so one run visits every operation instance it can ever
    execute, with the values every expression will have there."""

    keys: dict[int, _KeyUse] = field(default_factory=lambda: defaultdict(_KeyUse))
    nb_ids: set[int] = field(default_factory=set)
    waiters: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    remote_release: bool = False
    regions: bool = False  # some access touches a region of its slot (families/regions.py)
    tmem_pairs: bool = False
    steps: int = 0  # every step of every process and agent on any path: a bound on SPIN's search depth
