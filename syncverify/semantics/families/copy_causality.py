"""Causality through bulk copies: a copy's complete_tx is causally after the copy's issue.

The stale-waiter check (SV501, ``MbarrierOps._check_observations``) asks, when a phase of a
barrier completes, whether every wait that observed the phase before is causally before some
contribution to the completing phase. A thread that waits and then issues a bulk copy (`tma.load`,
`cp.async.bulk`) contributes to the phase its copy completes on — the copy's complete_tx — even
when that thread never arrives there itself: FlashInfer's sparse-MLA IO warps wait on the empty
barrier, issue their copies onto the full one and never arrive; the consumer's arrival on the empty
barrier needs the full phase, which needs the copy, which needs the wait. PTX's complete_tx
releases the copy's own writes only (memory ordering), but an operation cannot complete before it
is issued (execution order): so the copy carries the *observations* its issuing lanes had made
when they issued it — no data — into the phase it completes on.

Each copy in flight that carries observations holds a snapshot slot of its issuing thread
(``Holders.copy_snap``): the observation records its lanes knew at the issue are marked with that
slot's bit, and the completion carries what the bit marks into its barrier's current phase. Copies
of one thread whose snapshots are equal share a slot (the marks are the same records, so sharing is
exact). When a thread has more distinct snapshots in flight than it has slots, a 2-SM copy ends
the search as inconclusive (its barrier is the pair leader's, where nothing else of the thread
arrives); a one-CTA copy carries nothing — as before this rule, which can only report a stale
waiter that is not one, never hide one.
"""

from __future__ import annotations

from ..core import ModelBound, _Work
from ..state import AG_TMA, COPY_SLOTS, R_KNOWN, R_SPACE, SPACE_OBS, carry_obs, clear_bits


class CopyCausalityOps:
    """Explicit-state rules of this section (a mixin of Machine)."""

    def copy_issue(self, w: _Work, p: int, lanes: int, required: bool) -> int:
        """A bulk copy is issued by ``lanes`` of process p: the snapshot slot its agent carries,
        as 1 + slot in its last field, or 0 when its issuer has observed nothing (or, for a copy
        that is not ``required`` to carry, when every slot holds another snapshot)."""
        snap = self.holders.copy_snap
        obs = [r[R_KNOWN] for r in w.records if r[R_SPACE] == SPACE_OBS]
        mine = [bool(k & lanes) for k in obs]
        if not any(mine):
            return 0
        used = {a[8] - 1 for a in w.agents if a[0] == AG_TMA and a[6] == p and a[8]}
        for slot in sorted(used):
            bit = snap(p, slot)
            if all(bool(k & bit) == m for k, m in zip(obs, mine, strict=True)):
                return slot + 1  # the same observations: share the slot
        slot = next((i for i in range(COPY_SLOTS) if i not in used), None)
        if slot is None:
            if required:
                raise ModelBound(f"{self.proc_label(p)} has more than {COPY_SLOTS} 2-SM copies in flight "
                                     "with different observations")
            return 0
        w.records = carry_obs(w.records, lanes, snap(p, slot))
        return slot + 1

    def copy_complete(self, w: _Work, a: tuple, m: int) -> None:
        """The copy ``a`` (already removed from the agents in flight) completes on barrier m: the
        observations its slot marks become known by m's current phase (no data: PTX's complete-tx
        releases the copy's own writes only); the slot is freed with its thread's last copy using it."""
        bit = self.holders.copy_snap(a[6], a[8] - 1)
        w.records = carry_obs(w.records, bit, self.holders.mb_cur(m))
        if not any(b[0] == AG_TMA and b[6] == a[6] and b[8] == a[8] for b in w.agents):
            w.records = clear_bits(w.records, bit)
