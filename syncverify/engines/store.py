"""The explicit search's store of visited states: each state packed in one ``bytes`` (issue #36).

Why packed. A state is a tuple of tuples: the processes (24 on the 2x1 ping-pong GEMM), the
mbarriers, named barriers, cluster barrier, agents in flight, tensor memory, and ~200 access
records. Kept as objects, even with every equal part shared, a stored state cost its own tuples
(the process tuple, the ~200-slot records tuple) and a hash bucket: 2,747 bytes a state on that GEMM.

How. Every part is numbered once, in a table per kind, the first time the search meets its value
(SPIN's "collapse" compression):

* each process's state (a state's processes are ``nprocs`` numbers);
* the mbarriers, the named barriers, the cluster barrier, the agents in flight and the tensor
  memory, each as a whole (they change on few steps, and few distinct values occur);
* each access record; and the records, in their sorted order, cut into chunks of CHUNK records,
  each chunk numbered by its records' numbers. A step changes a few records, so a successor
  shares most chunks with its parent, and the same chunks recur across states (on the 2x1 GEMM,
  0.37 new chunks per stored state).

A stored state is the array of those numbers as ``bytes``: a prefix (the number of processes, the
five whole parts, the number of records), the processes, the record chunks (on the 2x1 GEMM: 7 +
24 + ~31 numbers). The visited set is a ``set`` of them, each in its compact form (``key``): the
numbers' bytes by plane (every number's lowest byte, then every number's second byte, ...), the
planes that are zero throughout left out and a last byte saying which are kept. The tables of a
search of a few hundred thousand states stay below 65,536 entries, so a stored state takes two
bytes a number: 125 bytes of data instead of 248 on the 2x1 GEMM (158 with the object's header
instead of 281). Which planes are kept is a function of the numbers alone (not of how full the
tables are when the state is stored), and the last byte and the length give the planes back, so
equal numbers have equal keys and unequal ones unequal keys.

Exact, not hashed. The numbering is a bijection between the values met and their numbers for the
store's lifetime (a number is given to a value once and never reused; values of different kinds
are in different tables), and the chunking of a record sequence is fixed by the sequence, so two
states pack to equal bytes if and only if they are equal: no state is ever merged with a different
one (this is not hash compaction). ``Store.open`` decodes a packed state (the tests check every
state decodes to itself).

Cheap to encode. A successor is mostly its parent's objects: a step copies what it changes, and a
knowledge update rebuilds only the records it touches. So a successor is packed against its parent
(``Opened``: the parent whole, with its numbers): a part that is the parent's very object at the
same position has the parent's number, found by identity (position by position, in C) without
hashing it; a part equal to the parent's (a rebuilt tuple of the same barriers) too, compared in C;
where a record was added or dropped, the records the successor shares with its parent at the start
and at the end of the sequence (the same objects, found in C) keep theirs; only what the step rebuilt
is looked up (a process by the table's id() of its objects, else by value; a record by value), and
only the chunks it falls in (or, after an added or dropped record, the chunks from there on) are
numbered again. Identity is a sound
test while the objects compared are alive: the parent's are (it is being expanded), and so are the
tables' (they keep them).

Why the queue holds whole states, and how many. A state waiting to be expanded held whole, with its
numbers (``Opened``), is expanded without decoding anything, and its successors are packed against the
very objects they share with it. But whole it costs several KB (its own tuples, and the records and
agents its step rebuilt), and where the reductions leave wide levels most stored states are waiting:
on the 2-SM sm100 GEMM with its teardown barrier's init fenced, 345,318 of 397,495 (4.27 GB, 10.7 KB a
stored state). So the search holds at most ``WHOLE_AHEAD`` waiting states whole (explicit.py; more than
the widest frontier of the ping-pong GEMMs, 682 states, whose searches decode nothing); the others wait
as their packed bytes, the set's own object (a reference each), and are decoded when popped
(``Store.open``: every part the tables' object of its value). A decoded state is as good a parent: its
parts are the tables' objects, alive while the tables are, so the identity tests above stay sound; and
it is equal to the state that was stored, and a state's successors depend on its value alone (the
parallel search, parallel.py, rests on that too), so the order of the search, and every state, finding
and counterexample, is the one the whole states give. The cache of duplicates (``Visited``) is
bounded alike: the last states stored, not two levels whole.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterator
from itertools import compress, count, repeat
from operator import floordiv, is_, is_not, ne

from ..semantics.state import R_AKNOWN, R_KNOWN, State

# the states the cache of duplicates (Visited) holds from the level being built, and as many from the one
# before: on a wider level, the last ones stored (whole, ~15 KB each on the fenced 2-SM sm100 GEMM)
CACHE_SIZE = 1024
CHUNK = 8  # elements per chunk: on the 2x1 ping-pong GEMM, 0.37 new record chunks per stored state
assert array("I").itemsize == 4  # the planes of key() are those of four-byte numbers
_PLANE_MASKS = [bytes([m]) for m in range(16)]
_zeros: dict[int, bytes] = {}


def key(numbers: array) -> bytes:
    """The compact stored form of a state's numbers (see the module's doc): the byte planes that are
    not zero throughout (the lowest always), then a byte with a bit per plane kept."""
    b = numbers.tobytes()
    planes = (b[0::4], b[1::4], b[2::4], b[3::4])
    zero = _zeros.get(len(planes[0]))
    if zero is None:
        zero = _zeros[len(planes[0])] = bytes(len(planes[0]))
    mask = 1 | (planes[1] != zero) << 1 | (planes[2] != zero) << 2 | (planes[3] != zero) << 3
    if mask == 3:  # every number below 65,536: the usual case
        return planes[0] + planes[1] + _PLANE_MASKS[3]
    return b"".join([plane for bit, plane in enumerate(planes) if mask >> bit & 1]) + _PLANE_MASKS[mask]


def numbers_of(packed: bytes) -> array:
    """The numbers a key() was made of."""
    mask = packed[-1]
    kept = [bit for bit in range(4) if mask >> bit & 1]
    n = (len(packed) - 1) // len(kept)
    whole = bytearray(4 * n)
    for i, bit in enumerate(kept):
        whole[bit::4] = packed[i * n:(i + 1) * n]
    numbers = array("I")
    numbers.frombytes(bytes(whole))
    return numbers
_new_tuple = tuple.__new__  # tuple.__new__(State, parts): without State's Python-level constructor


class NumberTable:
    """One kind of part: value -> number, number -> value (the first object met of that value). The
    lift's key table numbers its parts so too (symbolic/packed.py)."""

    __slots__ = ("number", "value")

    def __init__(self) -> None:
        self.number: dict = {}
        self.value: list = []

    def __call__(self, v: object) -> int:
        n = self.number.get(v)
        if n is None:
            n = self.number[v] = len(self.value)
            self.value.append(v)
        return n


class _Elements(NumberTable):
    """A table of sequence elements, with the id() of each object it holds: a state's elements are
    mostly the tables' own objects (its parent's, or its siblings'), found so without hashing them.
    Sound: the table keeps those objects alive, so no other object has their id meanwhile."""

    __slots__ = ("by_id",)

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[int, int] = {}

    def of(self, element: object) -> int:
        n = self.by_id.get(id(element))
        if n is None:
            n = self(element)
            if self.value[n] is element:  # a new value: this object is now the table's
                self.by_id[id(element)] = n
        return n

    def all_of(self, seq: tuple, known: dict[int, int] | None = None) -> list[int]:
        """The numbers of a sequence's elements: by id() where ``known`` (id() -> number of objects
        alive meanwhile, a parent's) or the table holds the object, else by value."""
        return _numbers_of(seq, self.by_id if known is None else known, self.of)


def _numbers_of(seq: tuple, by_id: dict[int, int], of: Callable[[object], int]) -> list[int]:
    """The numbers of ``seq``'s elements: those whose id() ``by_id`` holds from it (in C), the others by ``of``."""
    found = list(map(by_id.get, map(id, seq)))
    if None in found:
        for i in compress(range(len(found)), map(is_, found, repeat(None))):
            found[i] = of(seq[i])
    return found


class _RecordTable(NumberTable):
    """The access records' table: by value, without the id() table of _Elements. A successor's records
    that are its parent's objects are found by the parent's numbers (``_Chunks.against``, ``spliced``);
    the others are records a step rebuilt, new objects whatever their value: on the ping-pong 1x2, the
    2x1 cooperative and the CuTe-DSL 2-CTA blockscaled GEMMs not one of 102,802 such look-ups found its
    object in an id() table, which held 2.5 MB on the last.

    A record's knowledge sets (its last two fields) are integers of several hundred bits where a
    protocol has many holders (619 on the CuTe-DSL GEMM), and every knowledge update makes new ones:
    there, 76,600 integer objects of 11,831 values, 4.3 MB of the table's 15 MB. So a record new to the
    table is kept with the table's one object of each of those values (an equal tuple: the record's
    number and every answer are unchanged)."""

    __slots__ = ("_ints",)

    def __init__(self) -> None:
        super().__init__()
        self._ints: dict[int, int] = {}

    def __call__(self, v: tuple) -> int:
        n = self.number.get(v)
        if n is None:
            ints = self._ints
            aknown, known = v[R_AKNOWN], v[R_KNOWN]
            shared_a, shared_k = ints.setdefault(aknown, aknown), ints.setdefault(known, known)
            if shared_a is not aknown or shared_k is not known:
                v = (*v[:R_AKNOWN], shared_a, *v[R_AKNOWN + 1:R_KNOWN], shared_k, *v[R_KNOWN + 1:])
            n = self.number[v] = len(self.value)
            self.value.append(v)
        return n

    of = __call__

    def all_of(self, seq: tuple, known: dict[int, int] | None = None) -> list[int]:
        """The numbers of a sequence's records: by id() where ``known`` (id() -> number of objects alive
        meanwhile, a parent's) holds the object, else by value."""
        return list(map(self, seq)) if known is None else _numbers_of(seq, known, self)


class _Chunks:
    """The records' chunks: key (CHUNK record numbers as bytes) -> chunk number."""

    __slots__ = ("chunks", "elements")

    def __init__(self, elements: _RecordTable) -> None:
        self.elements = elements
        self.chunks = NumberTable()

    def of(self, eids: array, start: int) -> int:
        return self.chunks(eids[start:start + CHUNK].tobytes())

    def all_of(self, eids: array) -> list[int]:
        """The chunk numbers of a whole sequence (its element numbers given), looked up in C."""
        flat = eids.tobytes()
        width = 4 * CHUNK
        found = list(map(self.chunks.number.get, [flat[i:i + width] for i in range(0, len(flat), width)]))
        if None in found:
            for c in compress(range(len(found)), map(is_, found, repeat(None))):
                found[c] = self.of(eids, c * CHUNK)
        return found

    def against(self, seq: tuple, old: tuple, old_eids: array, old_chunks: array) -> array | None:
        """The chunk numbers of ``seq`` (as long as ``old``, the parent's, whose element numbers and
        chunk numbers are given): only chunks where an element changed are numbered again. None:
        the parent's chunks. A knowledge update rebuilds ~35 of the ~200 records of the 2x1
        ping-pong GEMM's states, so the look-ups, the new element numbers and the chunks' keys go
        through C (map, array slices), not a Python loop per element or per chunk."""
        changed = list(compress(range(len(seq)), map(is_not, seq, old)))
        if not changed:
            return None
        table = self.elements  # the changed elements looked up by value, in C
        numbers = list(map(table.number.get, map(seq.__getitem__, changed)))
        if None in numbers:
            for j in compress(range(len(numbers)), map(is_, numbers, repeat(None))):
                numbers[j] = table.of(seq[changed[j]])
        eids = old_eids[:]
        deque(map(eids.__setitem__, changed, numbers), 0)
        if eids == old_eids:
            return None
        flat = eids.tobytes()
        width = 4 * CHUNK
        touched = sorted(set(map(floordiv, compress(changed, map(ne, numbers, map(old_eids.__getitem__, changed))),
                                 repeat(CHUNK))))
        keys = [flat[c * width:(c + 1) * width] for c in touched]
        found = list(map(self.chunks.number.get, keys))
        if None in found:
            for j in compress(range(len(found)), map(is_, found, repeat(None))):
                found[j] = self.chunks(keys[j])
        chunks = old_chunks[:]
        deque(map(chunks.__setitem__, touched, found), 0)
        return chunks

    def spliced(self, seq: tuple, old: tuple, old_eids: array, old_chunks: array) -> array:
        """The chunk numbers of ``seq``, a sequence of another length than ``old`` (the parent's, whose
        element numbers and chunk numbers are given): a step added or dropped elements (a record),
        and maybe changed some. The elements the two share at their start and at their end, the
        same objects, keep the parent's numbers; only those between are looked up (the parent's objects
        by id()), and the chunks
        from the first change on are numbered again (an element added or dropped shifts the rest)."""
        n, n_old = len(seq), len(old)
        short = min(n, n_old)
        lo = next(compress(count(), map(is_not, seq, old)), short)
        tail = next(compress(count(), map(is_not, reversed(seq), reversed(old))), short)
        tail = min(tail, short - lo)
        eids = old_eids[:lo]
        # between: the parent's objects there by their id() (alive while the parent is), else looked up
        known = dict(zip(map(id, old[lo:n_old - tail]), old_eids[lo:n_old - tail], strict=True))
        eids.extend(self.elements.all_of(seq[lo:n - tail], known))
        eids.extend(old_eids[n_old - tail:])
        first = lo // CHUNK
        chunks = old_chunks[:first]
        chunks.extend(self.all_of(eids[first * CHUNK:]))
        return chunks

    def element_numbers(self, chunks: array) -> array:
        return array("I", b"".join(map(self.chunks.value.__getitem__, chunks)))


# The packed numbers: a prefix of PREFIX numbers (the number of processes; the numbers of the
# mbarriers, named barriers, cluster barrier, agents in flight and tensor memory; the number of
# records), then one number per process, then the records' chunks.
PREFIX = 7
MBARS, NAMED, CLUSTER, AGENTS, TMEM, NRECORDS = range(1, 7)


class Opened:
    """A stored state as the search holds it until it expands it: the state whole and its packed
    numbers, against which its successors are encoded. Its records' numbers are worked out when
    the first successor needs them."""

    __slots__ = ("_rids", "numbers", "state", "store")

    def __init__(self, state: State, numbers: array, store: Store) -> None:
        self.state = state
        self.numbers = numbers
        self.store = store
        self._rids: array | None = None

    @property
    def record_chunks(self) -> array:
        return self.numbers[PREFIX + self.numbers[0]:]

    def record_numbers(self) -> array:
        if self._rids is None:
            self._rids = self.store.records.element_numbers(self.record_chunks)
        return self._rids


class Store:
    """The tables and the packing of one search (see the module's doc)."""

    def __init__(self) -> None:
        self.procs = _Elements()
        # one table per kind of part numbered whole: values of different kinds never mixed
        self.mbars, self.named, self.cluster, self.agents, self.tmem = (NumberTable() for _ in range(5))
        self.record_table = _RecordTable()
        self.records = _Chunks(self.record_table)

    def pack(self, state: State, parent: Opened | None = None) -> array:
        """The state's packed numbers, its new parts numbered. ``parent``: the stored state it is a
        successor of (its parts found by identity), or None (every part found by id() or value)."""
        procs, mbars, named, cluster, agents, records, tmem = state
        n = len(procs)
        if parent is None or parent.numbers[0] != n:
            numbers = array("I", (n, self.mbars(mbars), self.named(named), self.cluster(cluster), self.agents(agents),
                                  self.tmem(tmem), len(records)))
            numbers.extend(self.procs.all_of(procs))
            numbers.extend(self.records.all_of(array("I", self.record_table.all_of(records))))
            return numbers
        old = parent.state
        numbers = parent.numbers[:PREFIX + n]
        if procs is not old.procs:
            for i in compress(range(n), map(is_not, procs, old.procs)):
                numbers[PREFIX + i] = self.procs.of(procs[i])
        # a step rebuilds the outer tuple of some parts without changing them: equal to the
        # parent's part (compared in C, identical elements at once) is the parent's number
        if mbars is not old.mbars and mbars != old.mbars:
            numbers[MBARS] = self.mbars(mbars)
        if named is not old.named and named != old.named:
            numbers[NAMED] = self.named(named)
        if cluster is not old.cluster and cluster != old.cluster:
            numbers[CLUSTER] = self.cluster(cluster)
        if agents is not old.agents and agents != old.agents:
            numbers[AGENTS] = self.agents(agents)
        if tmem is not old.tmem and tmem != old.tmem:
            numbers[TMEM] = self.tmem(tmem)
        numbers[NRECORDS] = len(records)
        if records is old.records:
            numbers.extend(parent.record_chunks)
        elif len(records) == len(old.records):
            chunks = self.records.against(records, old.records, parent.record_numbers(), parent.record_chunks)
            numbers.extend(parent.record_chunks if chunks is None else chunks)
        else:
            numbers.extend(self.records.spliced(records, old.records, parent.record_numbers(), parent.record_chunks))
        return numbers

    def open(self, packed: bytes) -> Opened:
        """The stored state (its key()), decoded: every part the tables' one object of its value."""
        return self.decode(numbers_of(packed))

    def decode(self, numbers: array, records: tuple | None = None) -> Opened:
        """The stored state of these numbers; ``records``: its records tuple if one of that value is at
        hand (else every record the table's object)."""
        n = numbers[0]
        procs = tuple(map(self.procs.value.__getitem__, numbers[PREFIX:PREFIX + n]))
        if records is None:
            records = tuple(map(self.record_table.value.__getitem__,
                                self.records.element_numbers(numbers[PREFIX + n:])))
        state = _new_tuple(State, (procs, self.mbars.value[numbers[MBARS]], self.named.value[numbers[NAMED]],
                                   self.cluster.value[numbers[CLUSTER]], self.agents.value[numbers[AGENTS]],
                                   records, self.tmem.value[numbers[TMEM]]))
        return Opened(state, numbers, self)


class Visited:
    """The stored states, exact: a state is a duplicate only when it is equal to a stored one.

    A set of packed states (see the module's doc): equal bytes if and only if equal states, so the
    set's hash finds candidates and its comparison of the bytes decides, with nothing else kept per
    state (the bytes cache their hash).

    Most successors are duplicates (four in five on the 1x1 ping-pong GEMM), and nearly all of
    them duplicates of a state of the level being built or the level being expanded: a state's
    level is the number of steps taken to reach it, and two interleavings of the same steps are
    equally long. So the states stored in those two levels are also kept whole, by the hash of their
    processes and agents in flight, and a successor equal to one of them is known a duplicate
    without packing it. That is a cache of stored states: a successor not found there is packed and
    looked up in the set, so what it holds changes the work, never the answer. The search calls
    ``next_level`` as it starts expanding a level; and where a level is wide (on the fenced 2-SM
    sm100 GEMM the last two levels hold most of the states), the cache starts over whenever the
    newer half holds ``cache_size`` states, so that it holds the last 1-2 ``cache_size`` states stored,
    not two levels whole (4.3 GB at 400,000 states there). A duplicate of an older one is then
    packed to be found: on that GEMM 1.7 packs a stored state instead of 1.0, 13-26% more CPU."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self.store = Store()
        self._packed: set[bytes] = set()
        self.cache_size = cache_size
        self._level: dict[int, State | list[State]] = {}  # the states stored in the level being built
        self._previous: dict[int, State | list[State]] = {}  # ... in the level being expanded
        self._held = 0  # the states in _level
        # the records tuple of the states of those two levels, one object per value (by their chunks)
        self._records: dict[bytes, tuple] = {}
        self._previous_records: dict[bytes, tuple] = {}

    def __len__(self) -> int:
        return len(self._packed)

    def next_level(self) -> None:
        """The level being built becomes the one expanded (the one expanded until now is dropped)."""
        self._previous, self._level = self._level, {}
        self._previous_records, self._records = self._records, {}
        self._held = 0

    def add(self, state: State, like: Opened | None = None, whole: bool = True) -> Opened | bytes | None:
        """If the state is new (now stored): the state with its packed numbers, or with ``whole`` false
        its packed bytes only (the set's own object: holding it costs a reference), and then it is not
        kept in the cache of the level either. None if an equal state is stored. ``like``: the stored
        state it is a successor of (see Store.pack)."""
        h = hash((state.procs, state.agents))
        for recent in (self._level, self._previous):
            kept = recent.get(h)
            if kept is not None:
                if type(kept) is list:
                    if state in kept:
                        return None
                elif kept == state:
                    return None
        numbers = self.store.pack(state, like)
        packed = key(numbers)
        if packed in self._packed:
            return None
        self._packed.add(packed)
        if self._held >= self.cache_size:  # a wide level: the cache keeps the states stored last
            self.next_level()
        self._held += 1
        kept = self._level.get(h)
        if kept is None:
            self._level[h] = state
        elif type(kept) is list:
            kept.append(state)
        else:
            self._level[h] = [kept, state]
        shared = self._shared_records(state, numbers)
        return Opened(shared, numbers, self.store) if whole else packed

    def _shared_records(self, state: State, numbers: array) -> State:
        """The state with the records tuple of an equal value already held in the two levels, if any.
        Equal packed record chunks are equal records, and the one object lets the knowledge updates
        of its successors be found remembered (semantics/state.py, _knowledge_memo): on the 2x1
        ping-pong GEMM 57% of them. The stored state is unchanged (it is packed)."""
        chunks = numbers[PREFIX + numbers[0]:].tobytes()
        records = self._records.get(chunks)
        if records is None:
            records = self._previous_records.get(chunks)
            self._records[chunks] = state.records if records is None else records
        if records is None or records is state.records:
            return state
        return state._replace(records=records)

    def packed(self) -> Iterator[bytes]:
        """The stored states, packed."""
        return iter(self._packed)

    def open(self, packed: bytes | array) -> Opened:
        """A stored state (as packed() gives it, or its numbers), decoded; with the records tuple of its
        value the cache holds, if any (no records decoded, and its successors' knowledge updates found
        remembered, as ``_shared_records`` says)."""
        numbers = numbers_of(packed) if isinstance(packed, bytes) else packed
        chunks = numbers[PREFIX + numbers[0]:].tobytes()
        records = self._records.get(chunks)
        return self.store.decode(numbers, self._previous_records.get(chunks) if records is None else records)


__all__ = ["CHUNK", "Opened", "Store", "Visited", "key", "numbers_of"]
