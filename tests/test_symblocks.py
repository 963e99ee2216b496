"""A kept loop written over half periods (ptx/symblocks.py): for every trip count, the events it spells are the
recorded ones, iteration for iteration, parity for parity."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_ptx_symbolic import DATA, TWINS, _analysis, _json, _n_of

from syncverify.cli import main
from syncverify.ptx.launch import Event
from syncverify.ptx.symblocks import EXIT_NAME, block_events, block_size, half
from syncverify.ptx.symloop import WarpLoop


def _unrolled(events: list[Event], q_value: int) -> list[Event]:
    """The events a protocol's text loops stand for at Q = q_value: `for q in 0..Q { … }` run Q times,
    `for qx in Q..Q + 1 { … }` once with qx = Q, and each parity spelled with the counter evaluated."""
    out: list[Event] = []
    i = 0
    while i < len(events):
        e = events[i]
        if e.kind == "text" and str(e.args[0]).startswith("for "):
            depth, j = 1, i + 1
            while depth:
                line = str(events[j].args[0]) if events[j].kind == "text" else ""
                depth += line.endswith("{") - (line == "}")
                j += 1
            body, header = events[i + 1: j - 1], str(e.args[0])
            values = range(q_value) if header == "for q in 0..Q {" else [q_value]
            assert header in ("for q in 0..Q {", f"for {EXIT_NAME} in Q..Q + 1 {{"), header
            name = "q" if header.startswith("for q ") else EXIT_NAME
            for v in values:
                out += [replace(x, args=(x.args[0], eval(x.args[1], {name: v}), *x.args[2:]))
                        if x.kind in ("wait", "probe") and isinstance(x.args[1], str) else x
                        for x in _unrolled(list(body), q_value)]
            i = j
            continue
        out.append(e)
        i += 1
    return out


def _same(a: list[Event], b: list[Event]) -> bool:
    return [(e.kind, e.args, e.lanes, e.instr) for e in a] == [(e.kind, e.args, e.lanes, e.instr) for e in b]


@pytest.mark.parametrize("ptx", TWINS)
def test_the_half_period_spells_every_recorded_trip_count(ptx):
    """Every warp of the ring kernels with period 4 (two stages, a phase bit) halves into blocks of 2. For every
    offset c and Q = 0..5, the spelled loop unrolled is exactly `events_for` of that trip count -- the
    recorded executions (tests/test_ptx_symbolic.py checks those against the executor at every N)."""
    _mod, _fn, launch, _ctx, out = _analysis(DATA / ptx)
    halved = 0
    for (rank, warp), lp in out.items():
        assert isinstance(lp, WarpLoop)
        if half(lp) is None:  # the consumer that never waits on full: two stages, no phase, period 2
            assert (lp.period, block_size(lp), ptx, warp) == (2, 2, "ring_state_no_full_wait.ptx", 1)
            continue
        halved += 1
        assert block_size(lp) == 2
        for period in (2, 4, 6):  # the lcm over warps may be any multiple of a warp's block
            for c in range(2 * lp.period):
                for q in range(6):
                    spelled = _unrolled(block_events(lp, c, period, launch, warp, "Q"), q)
                    assert _same(spelled, lp.events_for(lp.j0 + 1 + c + period * q)), (ptx, rank, warp, c, q)
    assert halved >= 1


def test_a_period_whose_halves_differ_otherwise_is_not_halved():
    """A second half that differs in anything but flipped parities keeps the whole period."""
    _mod, _fn, _launch, _ctx, out = _analysis(DATA / "ring_state.ptx")
    lp = out[(0, 0)]
    assert isinstance(lp, WarpLoop)
    body = list(lp.body)
    k = next(i for i, e in enumerate(body) if e.kind == "wait" and i >= len(lp.mids[2]))
    body[k] = replace(body[k], args=(body[k].args[0], body[k].args[1], "relaxed", *body[k].args[3:]))
    assert half(replace(lp, body=tuple(body))) is None
    assert block_size(replace(lp, body=tuple(body))) == lp.period


def test_check_over_half_periods_answers_as_the_whole_period(capsys):
    """By default the ring's two residue protocols, with `--whole-periods` its four; the same verdict, and each
    seeded twin's finding at an N where the kernel checked concretely fails too."""
    sym = ["--block", "64", "--symbolic", "2>=1"]
    rc, res = _json(capsys, ["check", str(DATA / "ring_state.ptx"), *sym])
    assert rc == 0 and res["bound"] == "all-iterations of 2 >= 1 (and <= 2^30) (KT = N - 1, residues 0..1)"
    rc, res = _json(capsys, ["check", str(DATA / "ring_state.ptx"), *sym, "--whole-periods"])
    assert rc == 0 and res["bound"] == "all-iterations of 2 >= 1 (and <= 2^30) (KT = N - 1, residues 0..3)"
    for ptx in TWINS[1:]:
        whole, res_whole = _json(capsys, ["check", str(DATA / ptx), *sym, "--whole-periods"])
        rc, res = _json(capsys, ["check", str(DATA / ptx), *sym])
        assert rc == whole == 1
        n = _n_of(res["bound"])
        concrete, _ = _json(capsys, ["check", str(DATA / ptx), "--block", "64", "--param", f"2={n}"])
        assert concrete == 1 and _n_of(res_whole["bound"]) >= n, (ptx, res["bound"], res_whole["bound"])


def test_whole_periods_without_symbolic_is_an_input_error(capsys):
    assert main(["extract", str(DATA / "ring_state.ptx"), "--block", "64", "--whole-periods"]) == 2
    assert "give --symbolic too" in capsys.readouterr().err
