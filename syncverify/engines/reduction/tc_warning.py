"""A tensor-memory access whose only finding is the SV608 warning, taken alone as any local step.

Steps that carry a finding are never taken alone, with the exceptions that argue why the finding
is at its largest with the step first (element.reuse_warnings_only). This is one more, for the
local tcgen05 operations (`tcgen05.ld/st/cp/shift`, `tcgen05.mma`, their waits and fences: the
successors' LOCAL class, which is taken alone whatever may come first, since each access's records
and race checks commute with every other process's step).

The SV608 warning (families/tcgen05_sync.missing_fence, under the sync-orders-tcgen05 reading) is
decided on the tensor-memory records the access meets and on what the accessing warp's own lanes
know of them (``R_KNOWN``, and ``R_AKNOWN``, known past a `tcgen05.fence::after_thread_sync`). What
the lanes know changes only by the warp's own steps: its acquires and its fences (a release stores
into a barrier, a completion into the barrier's phase; only the warp's own wait pulls it in). Another
process's step can only add a record (its own access: then, with the step later, a second SV608 at
the same line, or a race, which the local argument already keeps, reported at the other access) or
cover one (the warning then disappears). So with the step later the step reports SV608 at its line,
or nothing, or an error the local argument keeps; with it first, SV608 at its line: the search keys
a warning by (code, line), and the same key is reported. The step's effect on the state does not
depend on the warning, so every other step's findings are those of the local argument.

Why. On the CuTe-DSL 2-CTA blockscaled GEMM (bench/families/cute_dsl_2cta_blockscaled_gemm.sync)
every accumulator-update warp's `tcgen05.ld` warns (CUTLASS emits no after-fence), and in every
state the census expanded whole the four warps' loads were refused for that alone.
"""

from __future__ import annotations

from ...semantics.core import StepResult

ENABLED = True  # the rule's switch (tests/rule_compare.py, tests/test_exhaustive_tc_warning.py)


def unfenced_tmem_warnings_only(res: StepResult) -> bool:
    """Is every finding of this local step the SV608 warning (and it breaks no rule)?"""
    return ENABLED and res.violation is None and not res.soft and all(w.code == "SV608" for w in res.warnings)
