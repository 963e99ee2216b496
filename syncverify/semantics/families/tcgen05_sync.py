"""Which finding a tcgen05 access gets when a thread synchronization alone orders it after another
thread's tcgen05 access (PTX ISA §9.7.16.6.3; docs/model.md, "tcgen05": "The fence pair").

PTX gives two sentences that the production kernels read differently. "The standard memory
consistency model synchronization mechanisms also apply to the tcgen05 family of instructions"
(§9.7.16.6.3) — CUTLASS (every sm100 kernel through 4.7, C++ and CuTe DSL) and Triton's NVIDIA
lowering emit no `tcgen05.fence` and hand tensor memory over with an `mbarrier.arrive` (default
`.release`) and an `mbarrier.try_wait` (default `.acquire`) alone. The canonical patterns
(§9.7.16.6.4.2-4) spell every hand-over with `.relaxed.cluster` mbarrier operations and the fence
pair, and say "As tcgen05.ld is an asynchronous operation, the instruction
tcgen05.fence::after_thread_sync is needed" — DeepGEMM's sm100 kernels follow them to the letter.

The checker's reading (SYNC_ORDERS_TCGEN05, on by default, dropped by `--no-assume`): a
synchronization the model carries tensor-memory knowledge through orders the accesses as the fence
pair would, and the missing fence is the SV608 warning (`--strict`: an error). Without the reading
it is the SV603 error. What no reading orders stays a race: an access still in flight at the
synchronization (an ld before its `tcgen05.wait::ld`, an MMA no commit tracks), and anything a
`wait.relaxed` is the only edge to (the model carries no tensor-memory knowledge through it)."""

from __future__ import annotations

from ...diagnostics import Severity
from ..core import Violation

# The named reading of `--no-assume` (docs/model.md, "Readings PTX does not settle"), as
# Assumptions.used names it.
SYNC_ORDERS_TCGEN05 = "sync-orders-tcgen05"


def missing_fence(assume: bool, used: set[str], message: str, span, related: tuple, procs: tuple) -> Violation:
    """The finding for a tcgen05 access (or a dealloc) ordered after another thread's tcgen05
    access by a thread synchronization only. ``message`` says what is ordered after what and
    which fence is missing; with the reading (``assume``) it is the SV608 warning and the reading
    is recorded as used, without it the SV603 error."""
    if not assume:
        return Violation("SV603", f"{message} (PTX orders tcgen05 operations across threads only with the "
                         "fence pair)", span, related=related, procs=procs)
    used.add(SYNC_ORDERS_TCGEN05)
    return Violation("SV608", f"{message}; PTX's canonical patterns (ISA §9.7.16.6.4) put the fence there, and "
                     "the release/acquire synchronization alone orders it only by the reading that \"the "
                     "standard memory consistency model synchronization mechanisms also apply to the tcgen05 "
                     "family\" (§9.7.16.6.3), which CUTLASS and Triton rely on (`--no-assume`: SV603)", span,
                     related=related, severity=Severity.WARNING, procs=procs)
