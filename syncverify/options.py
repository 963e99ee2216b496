"""What a check is asked to do: the engine, the budgets, the readings of unsettled PTX.

A module of its own, importing nothing of the checker, so that the front door (check.py), the
engines and the root-cause pass (diagnose.py) all read the same options without importing one
another."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields

from . import budget
from .diagnostics import Diagnostic


@dataclass(frozen=True)
class Options:
    engine: str = "auto"  # auto | explicit | z3 | bmc
    # Budgets (syncverify.budget): max_states and rlimit are deterministic and decide when an engine
    # gives up; timeout (wall-clock seconds) and max_memory_mb are the user's outer limits.
    max_states: int = 2_000_000
    timeout: float = 600.0
    max_memory_mb: float = 8192.0
    rlimit: int = budget.DEFAULT_RLIMIT
    strict: bool = False
    full_trace: bool = False
    progress: Callable[[int, int, float, float], None] | None = None  # states, frontier, s, MB
    # each error of the explicit search as soon as it is found; returning True stops the search
    on_finding: Callable[[Diagnostic], bool] | None = None
    defines: Mapping[str, int] = field(default_factory=dict)
    # seconds the explicit search goes on after its first error before it stops (None: until done or out of
    # budget); a kernel's check sets it so that a buggy kernel's answer comes in bounded time
    after_first_error: float | None = None
    # protocol line -> the source site it was written from (an extracted kernel: one CUDA statement is
    # written once per stage of a ring); the root-cause pass changes a site in all its places at once
    sites: Mapping[int, object] = field(default_factory=dict)
    # Readings of the PTX text that production kernels rely on but PTX does not
    # settle (ptx-semantics.md §10.8); each can be dropped to be stricter.
    assume_tcgen05_commit_order: bool = True
    assume_dealloc_blocks: bool = True
    assume_commit_release: bool = True  # a tcgen05.commit releases its thread's generic accesses
    assume_sync_orders_tcgen05: bool = True  # release/acquire orders tcgen05 accesses without the fence pair
    assume_warp_collective_orders: bool = True  # a warp's wgmma.commit/wait or tcgen05.wait orders its lanes (SV609)
    # a bulk commit + wait_group.read retires the tensor-map reads of the thread's earlier TMA loads (cutlass#2912)
    assume_bulk_wait_map_reads: bool = True
    # a CTA's exit waits for its bulk stores' source reads (DeepGEMM's epilogue relies on it; PTX does not say so;
    # measured on an H100: bench/gpu_exit_drain.py): `--letter exit-drains-bulk-reads` takes the letter (SV404)
    assume_exit_drains_bulk_reads: bool = True
    # off by default (the letter stands, SV402): a `barrier.cluster.arrive.relaxed` publishes the arriving thread's
    # earlier mbarrier inits as a `fence.mbarrier_init` before it would (CUTLASS's sm100 teardown barrier, #33)
    assume_relaxed_arrive_publishes_init: bool = False
    # processes one explicit search runs on (engines/parallel.py: the one-core search's answer, on N cores)
    search_jobs: int = 1

    def __post_init__(self) -> None:
        why = budget.problem(self.max_states, self.timeout, self.max_memory_mb, self.rlimit)
        if why is not None:
            raise ValueError(why)


# The name of each reading (as `--assume`, `--no-assume` and a result's `assumed` say it) -> its Options field.
# Every `assume_*` field of Options is here (tests/test_options_readings.py), so the CLI, the trace view and
# the engines hand on each reading from this one table and a new one cannot be left out of any of them.
READINGS: dict[str, str] = {
    "commit-order": "assume_tcgen05_commit_order",
    "dealloc-blocks": "assume_dealloc_blocks",
    "commit-release": "assume_commit_release",
    "sync-orders-tcgen05": "assume_sync_orders_tcgen05",
    "warp-collective-orders": "assume_warp_collective_orders",
    "bulk-wait-map-reads": "assume_bulk_wait_map_reads",
    "exit-drains-bulk-reads": "assume_exit_drains_bulk_reads",
    "relaxed-arrive-publishes-init": "assume_relaxed_arrive_publishes_init",
}


def assumption_fields() -> tuple[str, ...]:
    """The Options fields that take a reading of unsettled PTX, read off the dataclass itself."""
    return tuple(f.name for f in fields(Options) if f.name.startswith("assume_"))


def readings_asked(no_assume: bool, assume: Iterable[str] = (), letter: Iterable[str] = ()) -> dict[str, bool]:
    """The Options keywords for the readings a command line asks for: `--no-assume` turns every reading off
    (those on by default and those asked for alike), each `--letter NAME` turns that one off, and each
    `--assume NAME` turns that one on; a reading none of them names keeps its default. A reading named by both
    `--letter` and `--assume` is a ValueError: whichever came last would decide the verdict while the other option
    still reads as asked for."""
    both = sorted(set(assume) & set(letter))
    if both:
        raise ValueError(f"{', '.join(both)}: named by both --letter and --assume (drop one of them)")
    asked = {name: False for name in assumption_fields()} if no_assume else {}
    asked.update({_field_of(name): False for name in letter})
    asked.update({_field_of(name): True for name in assume})
    return asked


def _field_of(name: str) -> str:
    if name not in READINGS:
        raise ValueError(f"no reading named {name!r} (known: {', '.join(sorted(READINGS))})")
    return READINGS[name]
