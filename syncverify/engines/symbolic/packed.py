"""The lift's keys held compactly: each run of records numbered once, a key's records a few chunk numbers.

Why. The lift stores every merge key it searches (key.normalize: a State and its trip-count mode),
in its visited table and its list of keys to expand. Held as objects, a key of the 2x1 ping-pong
GEMM cost 3.3 KB: nearly all of it the key's own tuple of its ~310 access records (the records
themselves were shared between keys), and every lookup of a key hashed all of them.

How. A key's records, sorted as every State's are, fall into *runs*: the maximal sequences of
records with one (space, CTA, object, slot) (key._RUN_HEAD), some 120 a key there. The
normalization builds a key's records run by run, from tables it keeps anyway (key._normalize_runs),
so each run it builds is numbered here, once per distinct value (``KeyTable.number``), where it is
built, not per key. A key's run numbers are cut into chunks of CHUNK numbers, each chunk numbered
once too (``KeyTable.code``): the code is the chunk numbers, about 16. The processes' local states
and the mbarriers are numbered as the packed numbers of their items (a process's state, a barrier's:
a few hundred values of each occur), the named barriers, cluster barrier, agents in flight, tensor
memory and the trip-count mode as wholes. A held key is one ``bytes``: those seven numbers, then the
code; ``KeyTable.open``
gives the State back, each part the table's object, the records the runs'. Every sequence of numbers
is packed two bytes a number where all of them fit (``_pack``), as they do while a lift has met fewer
than 65,536 runs, chunks and parts. The runs' records, and the items of the parts, are one object per
value, their fields too (the normalization builds equal records afresh, and knowledge sets are
large integers); the table that finds them is emptied every RECORDS records (what it holds changes
the memory, never a key).

Exact, not hashed. A number is given to a value once and never reused for the table's lifetime (the
lift's), so a held key opens to one key only: no key is ever merged with a different one (this is not
hash compaction). And the cut of a sorted records tuple into maximal runs is fixed by the tuple, so
equal keys are held alike: the lift merges what it merged holding the keys whole, the same keys in
the same order. tests/test_lift_keys.py checks both on real searches: every held key opens to
``normalize``'s key, and its code is the one its records, cut afresh, are given.

What it costs. A lookup of a held key hashes some 50 bytes (and a ``bytes`` keeps its hash), where a
whole key's hashed its ~310 records; the code itself is made once per records tuple the normalization
meets (key.py remembers it with the records it came from). Expanding a key opens it, joining its
runs, the last OPENED records tuples kept by code.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import chain, groupby

from ...semantics.state import State
from ..store import NumberTable

CHUNK = 8  # run numbers per chunk
# records tuples opened, kept by code: the knowledge updates (semantics/state.py) remember what they
# computed by the identity of the records tuple, so equal records are best one object
OPENED = 1024
# records found by value before that table starts over: emptied every 2**12 records, the 2x1 ping-pong
# GEMM's residue 0 held 575 B a key in its runs; every 2**14, 555; never, 540 and 127 in the table
RECORDS = 1 << 14
RECENT = 4096  # processes' and mbarriers' objects whose numbers are kept by identity
_NARROW, _WIDE = "H", "I"  # two-byte numbers where every one of a sequence fits, else four
assert array(_NARROW).itemsize == 2 and array(_WIDE).itemsize == 4
_WIDTH = {2: _NARROW, 4: _WIDE}
_HEAD = 7  # a held key's head: the numbers of its processes, barriers, ..., tensor memory and mode


def _pack(numbers: list[int]) -> bytes:
    """A sequence of numbers as bytes, two a number where all are below 65,536, else four, and a last
    byte saying which: a function of the numbers alone, so equal sequences pack alike and unequal
    ones unlike."""
    if not numbers or max(numbers) < 1 << 16:
        return array(_NARROW, numbers).tobytes() + b"\x02"
    return array(_WIDE, numbers).tobytes() + b"\x04"


def _unpack(packed: bytes) -> array:
    return array(_WIDTH[packed[-1]], packed[:-1])


class KeyTable:
    """The numbered runs and chunks of one lift, and its numbered parts (module docstring)."""

    def __init__(self, run_head: Callable[[tuple], tuple]) -> None:
        self._run_head = run_head  # a record's (space, CTA, object, slot): what one run shares
        self._runs = NumberTable()  # each run's records
        self._chunks = NumberTable()  # each chunk of run numbers, packed
        self._parts = NumberTable()  # the processes (packed), barriers (the mbarriers packed), ... and modes met
        self._items = NumberTable()  # a process's local state, an mbarrier's state
        self._recent: dict[int, tuple[tuple, int]] = {}  # the number of a wide part, by the id of the object
        self._wide: dict[int, tuple] = {}  # a wide part opened, by number
        self._opened: dict[bytes, tuple] = {}
        # the runs' records and their fields, one object per value (the normalization builds equal
        # records afresh in different runs, and their knowledge sets are large integers)
        self._records: dict[tuple, tuple] = {}
        self._fields: dict[object, object] = {}

    def number(self, run: tuple) -> int:
        """The number of a run of records."""
        n = self._runs.number.get(run)
        if n is None:
            n = self._runs(tuple([self._record(r) for r in run]))
        return n

    def _record(self, r: tuple) -> tuple:
        """A record (or a process's or a barrier's state), its fields one object per value."""
        out = self._records.get(r)
        if out is None:
            if len(self._records) >= RECORDS:
                self._records.clear()
            field = self._fields.setdefault
            out = tuple([field(x, x) for x in r])
            self._records[out] = out
        return out

    def numbers(self, records: tuple) -> list[int]:
        """The run numbers of a sorted records tuple, cut into its runs here (where the normalization
        did not build them run by run)."""
        return [self.number(tuple(members)) for _, members in groupby(records, self._run_head)]

    def code(self, numbers: list[int]) -> bytes:
        """A key's run numbers as the numbers of their chunks, packed."""
        chunk = self._chunks
        return _pack([chunk(_pack(numbers[i:i + CHUNK])) for i in range(0, len(numbers), CHUNK)])

    def records(self, code: bytes) -> tuple:
        """The records a code stands for (the same object for a code opened lately: OPENED)."""
        out = self._opened.get(code)
        if out is None:
            if len(self._opened) >= OPENED:
                self._opened.clear()
            runs, chunks = self._runs.value, self._chunks.value
            out = self._opened[code] = tuple(chain.from_iterable(
                runs[r] for c in _unpack(code) for r in _unpack(chunks[c])))
        return out

    def hold(self, key: tuple) -> bytes:
        """A key as it is held, from (procs, mbars, named, cluster, agents, tmem, code, mode): the
        numbers of the parts and of the mode, then the code."""
        procs, mbars, named, cluster, agents, tmem, code, mode = key
        part = self._part
        head = _pack([self._wide_part(procs), self._wide_part(mbars), part(named), part(cluster), part(agents),
                      part(tmem), part(mode)])
        return head[-1:] + head[:-1] + code  # (the head's width first: it says where the code begins)

    def _part(self, value: tuple) -> int:
        n = self._parts.number.get(value)
        if n is None:  # (its items one object per value, as the records are)
            n = self._parts(tuple([self._record(x) if type(x) is tuple else x for x in value]))
        return n

    def _wide_part(self, value: tuple) -> int:
        """The number of the processes' local states, or of the mbarriers: of the numbers of their
        items, packed (24 and 60 items on the 2x1 ping-pong GEMM, a few hundred values of each). Found
        first by the object, which the normalization's tables hand on for equal values (RECENT: each
        entry keeps its object alive, so that no other takes its id)."""
        hit = self._recent.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        item = self._items
        n = self._parts(_pack([item(x) for x in value]))
        if len(self._recent) >= RECENT:
            self._recent.clear()
        self._recent[id(value)] = (value, n)
        return n

    def _opened_wide(self, n: int) -> tuple:
        out = self._wide.get(n)
        if out is None:
            if len(self._wide) >= OPENED:
                self._wide.clear()
            items = self._items.value
            out = self._wide[n] = tuple([items[i] for i in _unpack(self._parts.value[n])])
        return out

    def open(self, held: bytes) -> tuple[State, tuple[int, int]]:
        """The key a held one stands for."""
        end = 1 + _HEAD * held[0]
        procs, mbars, named, cluster, agents, tmem, mode = array(_WIDTH[held[0]], held[1:end])
        parts = self._parts.value
        return State(self._opened_wide(procs), self._opened_wide(mbars), parts[named], parts[cluster], parts[agents],
                     self.records(held[end:]), parts[tmem]), parts[mode]

    def mode(self, held: bytes) -> tuple[int, int]:
        """The trip-count mode of a held key."""
        width = held[0]
        return self._parts.value[array(_WIDTH[width], held[1 + (_HEAD - 1) * width:1 + _HEAD * width])[0]]

    @staticmethod
    def code_of(held: bytes) -> bytes:
        """The code of a held key's records."""
        return held[1 + _HEAD * held[0]:]
