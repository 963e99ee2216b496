"""Unit tests of the pure barrier rules (syncverify/semantics/rules.py) against the PTX text.

Each test names the rule of ptx-semantics.md (the project's semantics reference) it checks. The rules are
also evaluated over Z3 terms (the symbolic engine's Arith), where the completion
rule is *proved* for all integers instead of sampled.
"""

from __future__ import annotations

import z3

from syncverify.semantics import rules
from syncverify.semantics.rules import (
    CB_FRESH,
    FRESH,
    MAX_COUNT,
    NB_FRESH,
    ClusterBar,
    Mbar,
    NamedBar,
    arrive_overflows,
    cb_arrive,
    cb_complete,
    intended_phase,
    mb_arrive,
    mb_arrive_drop,
    mb_arrive_expect_tx,
    mb_complete_tx,
    mb_expect_tx,
    mb_init,
    mb_inval,
    mb_try_complete,
    mb_wait_passes,
    nb_arrive,
    nb_complete,
    tx_out_of_range,
    wait_aliases,
)

# ---------------------------------------------------------------------------- mbarrier: init, inval


def test_init_sets_every_field():
    # §1.2: init(c): valid←1; k←0; exp←c; pend←c; tx←0
    assert mb_init(3) == Mbar(valid=1, k=0, pend=3, exp=3, tx=0)
    assert FRESH.valid == 0


def test_inval_only_clears_valid():
    s = mb_arrive(mb_init(2), 1)
    assert mb_inval(s) == Mbar(0, s.k, s.pend, s.exp, s.tx)


# ---------------------------------------------------------------------------- completion: pend = 0 and tx = 0


def test_phase_completes_when_last_arrival_comes_and_tx_is_zero():
    s = mb_arrive(mb_init(2), 1)
    assert (s.k, s.pend) == (0, 1)
    s = mb_arrive(s, 1)
    assert (s.k, s.pend, s.exp, s.tx) == (1, 2, 2, 0)  # k←k+1; pend←exp


def test_arrive_with_count_completes_in_one_step():
    assert mb_arrive(mb_init(4), 4) == Mbar(1, 1, 4, 4, 0)


def test_no_completion_while_tx_positive():
    s = mb_arrive(mb_expect_tx(mb_init(1), 16), 1)
    assert (s.k, s.pend, s.tx) == (0, 0, 16)


def test_no_completion_at_negative_tx():
    # §1.2 [O]: with pend = 0 and tx = −16 the phase did NOT complete ("tx ≤ 0" is wrong)
    s = mb_arrive(mb_complete_tx(mb_init(1), 16), 1)
    assert (s.k, s.pend, s.tx) == (0, 0, -16)
    assert mb_try_complete(s) == s


def test_try_complete_is_exactly_pend_zero_and_tx_zero():
    for pend in (-1, 0, 1):
        for tx in (-16, -1, 0, 1, 16):
            s = Mbar(1, 5, pend, 3, tx)
            done = mb_try_complete(s)
            if pend == 0 and tx == 0:
                assert done == Mbar(1, 6, 3, 3, 0)
            else:
                assert done == s


def test_completion_rule_proved_over_z3_terms():
    """The same rule code over Z3 Ints (the symbolic engine's path): for all states,
    k advances iff pend = 0 ∧ tx = 0, and then pend is refilled from exp."""

    class Z3Arith:
        ite = staticmethod(z3.If)
        and_ = staticmethod(z3.And)

        @staticmethod
        def mod2(v):
            return v % 2

    k, pend, exp, tx, n = z3.Ints("k pend exp tx n")
    s = Mbar(1, k, pend, exp, tx)
    done = mb_try_complete(s, Z3Arith())
    solver = z3.Solver()
    solver.add(z3.Not(z3.And(
        (done.k == k + 1) == z3.And(pend == 0, tx == 0),
        z3.Implies(done.k == k + 1, z3.And(done.pend == exp, done.tx == 0)),
        z3.Implies(done.k == k, z3.And(done.pend == pend, done.tx == tx)),
        done.exp == exp,
    )))
    assert solver.check() == z3.unsat
    # complete_tx(n) then arrive(1) on a one-arrival phase completes iff the bytes balance exactly
    after = mb_arrive(mb_complete_tx(Mbar(1, k, 1, 1, tx), n, Z3Arith()), 1, Z3Arith())
    solver = z3.Solver()
    solver.add(z3.Not((after.k == k + 1) == (tx == n)))
    assert solver.check() == z3.unsat
    # the parity wait over terms: passes iff k mod 2 ≠ p mod 2
    solver = z3.Solver()
    p = z3.Int("p")
    solver.add(k >= 0, p >= 0, z3.Not(mb_wait_passes(Mbar(1, k, 1, 1, 0), p, Z3Arith()) == (k % 2 != p % 2)))
    assert solver.check() == z3.unsat


# ---------------------------------------------------------------------------- parity waits


def test_parity_wait_on_fresh_barrier():
    # §1.3 [O]: a fresh barrier (k = 0) returns True for parity(1), and parity(0) blocks
    s = mb_init(1)
    assert mb_wait_passes(s, 1)
    assert not mb_wait_passes(s, 0)


def test_parity_wait_after_completions_uses_only_parity():
    s = mb_arrive(mb_init(1), 1)  # k = 1
    assert mb_wait_passes(s, 0) and not mb_wait_passes(s, 1)
    s = mb_arrive(s, 1)  # k = 2: phase 0's parity again
    assert not mb_wait_passes(s, 0) and mb_wait_passes(s, 1)
    assert mb_wait_passes(s, 3) and not mb_wait_passes(s, 2)  # only the operand's parity counts


# ---------------------------------------------------------------------------- expect_tx / complete_tx


def test_expect_tx_before_arrive():
    # §1.2: tx counts bytes; the phase waits for both the arrival and the bytes
    s = mb_expect_tx(mb_init(1), 32)
    assert (s.k, s.tx) == (0, 32)
    s = mb_arrive(s, 1)
    assert (s.k, s.pend, s.tx) == (0, 0, 32)
    s = mb_complete_tx(s, 16)
    assert (s.k, s.tx) == (0, 16)
    s = mb_complete_tx(s, 16)
    assert (s.k, s.pend, s.tx) == (1, 1, 0)


def test_arrive_expect_tx_is_one_atomic_step_with_expect_first():
    # "expect-tx operation is performed prior to the arrive-on": no completion in between
    s = mb_arrive_expect_tx(mb_init(1), 64, 1)
    assert (s.k, s.pend, s.tx) == (0, 0, 64)
    assert mb_complete_tx(s, 64).k == 1


def test_negative_tx_is_transiently_legal():
    # §1.2 [O]: complete_tx(16) ran before arrive.expect_tx(16), and the phase still completed
    s = mb_complete_tx(mb_init(1), 16)
    assert (s.k, s.tx) == (0, -16)
    assert not tx_out_of_range(s.tx)
    s = mb_arrive_expect_tx(s, 16, 1)
    assert (s.k, s.pend, s.tx) == (1, 1, 0)


def test_expect_tx_can_complete_a_phase():
    # §1.2 [O]: pend = 0 and tx = −16, then expect_tx(16) completed the phase (observed; unspecified)
    s = mb_arrive(mb_complete_tx(mb_init(1), 16), 1)
    assert (s.k, s.pend, s.tx) == (0, 0, -16)
    assert mb_expect_tx(s, 16) == Mbar(1, 1, 1, 1, 0)


def test_complete_tx_counts_bytes_from_several_copies():
    s = mb_arrive_expect_tx(mb_init(1), 48, 1)
    for _ in range(2):
        s = mb_complete_tx(s, 16)
        assert s.k == 0
    assert mb_complete_tx(s, 16).k == 1


# ---------------------------------------------------------------------------- arrive_drop


def test_arrive_drop_lowers_expected_count_for_later_phases():
    # §1.2: arrive_drop(n): exp←exp−n (for all subsequent phases); arrive(n)
    s = mb_arrive_drop(mb_init(3), 1)
    assert (s.k, s.pend, s.exp) == (0, 2, 2)
    s = mb_arrive(mb_arrive(s, 1), 1)  # the current phase still needs the others
    assert (s.k, s.pend, s.exp) == (1, 2, 2)  # the next phase starts with the lowered count
    s = mb_arrive(mb_arrive(s, 1), 1)
    assert (s.k, s.pend) == (2, 2)


def test_arrive_drop_can_complete_the_phase():
    s = mb_arrive(mb_init(2), 1)
    s = mb_arrive_drop(s, 1)
    assert (s.k, s.pend, s.exp) == (1, 1, 1)


def test_arrive_drop_of_last_participant_takes_exp_to_zero():
    # exp = 0 is UB (§1.6); the engine rejects it before applying the rule (SV504)
    s = mb_arrive_drop(mb_init(1), 1)
    assert s.exp == 0


# ---------------------------------------------------------------------------- intended phase, aliasing


def test_intended_phase_of_a_fresh_waiter():
    # A fresh waiter has seen phase −1: parity 0 means phase 0, parity 1 means "starts
    # complete" (CUTLASS's producer start state: the fresh barrier passes parity 1 at once).
    assert intended_phase(-1, 0) == 0
    assert intended_phase(-1, 1) == -1


def test_intended_phase_follows_the_waiters_history():
    assert intended_phase(0, 1) == 1
    assert intended_phase(0, 0) == 0  # the phase it already observed
    assert intended_phase(3, 0) == 4
    assert intended_phase(3, 1) == 3
    assert intended_phase(4, 1) == 5


def test_valid_waits_are_current_or_previous_phase():
    # §1.3: "valid only for: the current incomplete phase …; the immediately preceding phase"
    s = Mbar(1, 3, 1, 1, 0)
    assert not wait_aliases(s, 3)  # current phase: blocks
    assert not wait_aliases(s, 2)  # preceding phase: passes
    assert wait_aliases(s, 1)  # k = j + 2: the stale waiter
    assert wait_aliases(s, 0)


def test_stale_waiter_scenario():
    # §1.3 (a) [O]: after 2 completions, parity(0) returns False although phase 0 completed
    s = mb_arrive(mb_arrive(mb_init(1), 1), 1)
    assert s.k == 2
    j = intended_phase(-1, 0)
    assert j == 0
    assert not mb_wait_passes(s, 0)  # what the hardware does: wait for phase 2 instead
    assert wait_aliases(s, j)  # what the checker reports (SV501)
    # one phase later the same wait is fine: it passes for the phase it means
    s1 = mb_arrive(mb_init(1), 1)
    assert mb_wait_passes(s1, 0) and not wait_aliases(s1, j)


def test_early_waiter_passes_at_once_and_is_not_an_aliasing_finding():
    # §1.3 (b): one phase ahead, parity(j mod 2) returns True for a phase that has not happened.
    # wait_aliases only covers k > j+1; the early pass is caught as a race by the machine.
    s = mb_init(1)
    assert mb_wait_passes(s, 1)
    assert not wait_aliases(s, 1)


# ---------------------------------------------------------------------------- UB guards


def test_arrive_overflows():
    s = mb_init(2)
    assert not arrive_overflows(s, 1)
    assert not arrive_overflows(s, 2)
    assert arrive_overflows(s, 3)
    assert arrive_overflows(mb_arrive(s, 1), 2)
    # a whole warp arriving on a count-1 barrier: synccheck's "Barrier overflow" [O]
    assert arrive_overflows(mb_init(1), 32)


def test_tx_out_of_range():
    # §1.1: tx in −(2^20−1) … 2^20−1, signed
    assert MAX_COUNT == 2**20 - 1
    for tx in (0, 16, -16, MAX_COUNT, -MAX_COUNT):
        assert not tx_out_of_range(tx)
    for tx in (MAX_COUNT + 1, -MAX_COUNT - 1, 2**21):
        assert tx_out_of_range(tx)


# ---------------------------------------------------------------------------- named barriers


def test_named_barrier_counts_threads_per_generation():
    # §3: the barrier counts threads, a warp at a time; completion reinitializes it
    s = nb_arrive(NB_FRESH, 64, 32, 1 << 0, 10)
    assert s == NamedBar(64, 32, 0, 0b1, 10)
    assert nb_complete(s, 64) == s  # not yet
    s = nb_arrive(s, 64, 32, 1 << 1, 10)
    assert (s.arrived, s.warps) == (64, 0b11)
    done = nb_complete(s, 64)
    assert done == NamedBar(None, 0, 1, 0, 0)


def test_named_barrier_one_warp_contributing_twice_completes_a_generation():
    # §3 [O] probe (a): one warp alone runs `bar.arrive 1,64` then `bar.sync 1,64` and passes
    s = nb_arrive(NB_FRESH, 64, 32, 1 << 3, 7)
    s = nb_arrive(s, 64, 32, 1 << 3, 8)
    assert (s.arrived, s.warps) == (64, 1 << 3)  # the same warp bit: the machine warns (SV203)
    assert nb_complete(s, 64).gen == 1


def test_named_barrier_fa3_pre_arrive_generation():
    # FA3: warpgroup 0 pre-arrives (128) and its first bar.sync (128) completes the 256-count generation
    s = NB_FRESH
    for w in range(4):
        s = nb_arrive(s, 256, 32, 1 << w, 1)
    assert nb_complete(s, 256) == s
    for w in range(4):
        s = nb_arrive(s, 256, 32, 1 << w, 2)
    assert s.arrived == 256 and s.warps == 0b1111
    assert nb_complete(s, 256).gen == 1


def test_named_barrier_first_arrival_fixes_count_and_site():
    s = nb_arrive(NB_FRESH, 64, 32, 1, 5)
    s = nb_arrive(s, 96, 32, 2, 9)  # the machine reports the disagreement (SV202)
    assert (s.count, s.site) == (64, 5)


def test_named_barrier_count_may_change_between_generations():
    # §3 [O] probe (c): bar.sync 1,64 by two warps, then bar.sync 1,96 by three warps
    s = nb_arrive(nb_arrive(NB_FRESH, 64, 32, 1, 1), 64, 32, 2, 1)
    s = nb_complete(s, 64)
    assert s.gen == 1 and s.count is None
    for w in range(3):
        s = nb_arrive(s, 96, 32, 1 << w, 2)
    assert s.count == 96
    assert nb_complete(s, 64) != s and nb_complete(s, 96).gen == 2


def test_syncthreads_generation_has_no_explicit_count():
    s = nb_arrive(NB_FRESH, None, 32, 1, 3)
    assert s.count is None
    assert nb_complete(s, 32).gen == 1  # the machine passes the non-exited thread count


# ---------------------------------------------------------------------------- cluster barrier


def test_cluster_barrier_completes_when_all_threads_arrived():
    # §4: completes and re-arms when all non-exited threads of the cluster have arrived
    s = cb_arrive(CB_FRESH, 32, 1 << 0)
    assert s == ClusterBar(0, 32, 0b1)
    assert cb_complete(s, 64) is s
    s = cb_arrive(s, 32, 1 << 2)
    assert s.procs == 0b101
    assert cb_complete(s, 64) == ClusterBar(1, 0, 0)


def test_cluster_barrier_reuse_after_completion():
    s = cb_complete(cb_arrive(CB_FRESH, 32, 1), 32)
    assert s == ClusterBar(1, 0, 0)
    s = cb_complete(cb_arrive(s, 32, 1), 32)
    assert s.gen == 2


def test_cluster_barrier_exited_threads_lower_the_expected_count():
    # completion counts non-exited threads only: with one of two warps gone, one arrival suffices
    s = cb_arrive(CB_FRESH, 32, 1)
    assert cb_complete(s, 32).gen == 1


def test_rules_module_exports_python_arith():
    assert rules.PY.ite(True, 1, 2) == 1 and rules.PY.ite(False, 1, 2) == 2
    assert rules.PY.and_(True, True) and not rules.PY.and_(True, False)
    assert rules.PY.mod2(-1) == 1


def test_tmem_pair_rendezvous_completes_once_both_sides_joined():
    arrived, gen, done = rules.tm_join(0, 4, 1)
    assert (arrived, gen, done) == (0b10, 4, False)  # the first side waits for generation 4
    assert rules.tm_join(arrived, gen, 1) == (0b10, 4, False)  # a second warp of the same side does not complete it
    assert rules.tm_join(arrived, gen, 0) == (0, 5, True)  # the peer's side does, and re-arms it
