"""What a tcgen05.commit's arrival carries besides the operations it tracks (PTX ISA §9.7.16.12.1;
docs/model.md, "tcgen05": "What else a commit's arrival carries" and "The commit-release reading").

One definition for the explicit machine (families/tcgen05.py, Tcgen05Ops._tc_snapshot) and the bmc
encoding (Tcgen05Encoding.carried_mask)."""

from __future__ import annotations

from ..state import SPACE_DATA, SPACE_OBS, SPACE_TMEM

# The named reading of `--no-assume` (docs/model.md, "Readings PTX does not settle") that lets a
# commit's arrival release the committing thread's generic accesses, as Assumptions.used names it.
COMMIT_RELEASE = "commit-release"


def commit_carries(space: int, completed_write: bool, is_async: bool, tracked_operand: bool) -> bool:
    """Which records, known by the committing lanes, a tcgen05.commit's arrival carries by what PTX
    says (see Tcgen05Ops._tc_snapshot): observations, tensor-memory knowledge, and completed writes
    of shared memory that are asynchronous (a landed copy) or of a slot a tracked operation reads.
    The explicit machine and the bmc encoding (Tcgen05Encoding) both decide it here; with the
    COMMIT_RELEASE reading (commit_release_carries) every data record they know is carried."""
    if space in (SPACE_OBS, SPACE_TMEM):
        return True
    return space == SPACE_DATA and completed_write and (is_async or tracked_operand)


def commit_release_carries(assume: bool, space: int, completed_write: bool, is_async: bool,
                           tracked_operand: bool) -> tuple[bool, bool]:
    """(carried, only by the assumption): commit_carries, widened under the COMMIT_RELEASE reading
    to every data record the committing lanes know -- generic writes and reads of shared memory,
    their own and those they acquired -- as an `mbarrier.arrive` (release semantics by default)
    would carry them. Barrier-init and CTA-start records keep the PTX-only reading: the reading
    is about data, and a barrier's init still needs its own fence and release (fail closed).

    PTX (§9.7.16.12.1, tcgen05.commit) says only that "upon the completion of the tracked
    asynchronous tcgen05 operations, the signal specified by the .completion_mechanism is
    triggered by the system on the mbarrier object"; it gives the arrive-on no memory semantics
    for the committing thread's own accesses. CUTLASS example 77 (the sm100 FMHA) relies on it:
    the MMA warp's tcgen05.alloc writes the tensor-memory base address to shared memory, and the
    warp that frees it reads it ordered only by commits on the MMA pipelines' barriers."""
    base = commit_carries(space, completed_write, is_async, tracked_operand)
    if base or not assume or space != SPACE_DATA:
        return base, False
    return True, True
