"""The lift's merge key drops an older completed async access that a newer one of the same operation
dominates (engines/symbolic/key.py, ``_normalize_run``), and nothing else of the kind.

An older record is dropped only where a newer one has the same kind, owner, part, line, flags, group tag
and region, and every holder that knows the newer one knows the older one too (in both knowledge sets):
then wherever the older one races, so does the newer one, with the same report. A read of a wgmma group
still tagged, a region of its own, or knowledge that is not a superset keeps both.
"""

from __future__ import annotations

from syncverify.engines.symbolic.key import _normalize_run
from syncverify.semantics.state import F_ASYNC, F_RETIRED, READ, SPACE_DATA, WRITE

ALL = 0b1111  # four processes' bits: nobody's knowledge here is all of them (no saturation)
WIDE, NARROW = 0b0110, 0b0010


def record(kind: int, epoch: int, known: int, grp: int = -1, region: int = 0, flags: int = F_ASYNC | F_RETIRED,
           line: int = 40) -> tuple:
    # (space, cta, obj, slot, kind, owner, part, line, flags, epoch, grp, region, aknown, known)
    return (SPACE_DATA, 0, 3, 0, kind, 1, 1, line, flags, epoch, grp, region, known, known)


def kept(*records: tuple) -> list[tuple[int, int]]:
    """(kind, known) of each record the key keeps, in its order."""
    return [(r[4], r[13]) for r in _normalize_run(tuple(sorted(records)), True, ALL, 1 << 8)]


def test_an_older_read_known_wider_is_dropped():
    assert kept(record(READ, 2, WIDE), record(READ, 4, NARROW)) == [(READ, NARROW)]


def test_an_older_read_is_kept_where_the_newer_one_is_not_the_same_operation():
    assert len(kept(record(READ, 2, WIDE), record(READ, 4, NARROW, line=41))) == 2  # another line
    assert len(kept(record(READ, 2, WIDE), record(READ, 4, NARROW, region=5))) == 2  # other bytes
    assert len(kept(record(READ, 2, WIDE), record(READ, 4, NARROW, flags=F_ASYNC))) == 2  # not retired


def test_an_older_read_is_kept_where_the_newer_one_is_known_elsewhere():
    assert len(kept(record(READ, 2, NARROW), record(READ, 4, WIDE))) == 2
    assert len(kept(record(READ, 2, 0b0011), record(READ, 4, 0b0110))) == 2


def test_reads_of_a_tagged_group_are_kept():
    """A wgmma group still tagged: its wait adds knowledge to the reads of the group only (families/async_agents)."""
    assert len(kept(record(READ, 2, WIDE, grp=6), record(READ, 4, NARROW, grp=6))) == 2


def test_writes_of_other_bytes_are_kept():
    """A write of other bytes does not stand for the older one: an access of the older one's bytes is apart from it."""
    assert kept(record(WRITE, 2, WIDE), record(WRITE, 4, NARROW)) == [(WRITE, NARROW)]
    assert len(kept(record(WRITE, 2, WIDE), record(WRITE, 4, NARROW, region=5))) == 2
