"""The per-pc tables read an index under the values its constant-bound loops give it (loop_envs.py).

Each test could fail: the element sets are compared exactly, against the elements the loop can
name and against "any element" where the index reads a `let`, the range is long, or a loop hook
answers the bound (the lift's one-pass exit loop, whose compiled bound is one trip count's). The
lift's case: a producer whose stages are a rolled loop inside the trip-count loop; its walks go too
far while the trip count is not fixed, so the consumers' releases are taken alone only when the
table keeps them apart from its copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import load
from syncverify.engines import periodic
from syncverify.engines.reduction import Reduction, successors
from syncverify.engines.reduction.loop_envs import MAX_RANGE
from syncverify.engines.symbolic.hook import TripCount
from syncverify.engines.symbolic.search import lifted_search
from syncverify.semantics.machine import Machine

_TEMPLATE = """
protocol looped {{
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf[2] bytes 64;
  mbarrier mb[4];
  if producer {{ elect {{ for i in 0..4 {{ init mb[i] count 1; }} fence.mbarrier_init; }} }}
  syncthreads;
  if producer {{
    elect {{
      {body}
    }}
  }}
}}
"""


def _tx_ahead(body: str) -> frozenset:
    machine = Machine(load(_TEMPLATE.format(body=body), path="t.sync"))
    producer = next(p for p in machine.procs if p.role == "producer").index
    return Reduction(machine).tx_ahead[producer][0]


def test_a_constant_loop_names_its_elements() -> None:
    assert _tx_ahead("for k in 1..3 { arrive.expect_tx mb[k] bytes 64; }") == {("mb", 1), ("mb", 2)}
    nested = "for j in 0..2 { for k in 0..2 { arrive.expect_tx mb[2 * j + k % 2] bytes 64; } }"
    assert _tx_ahead(nested) == {("mb", i) for i in range(4)}
    assert _tx_ahead("for k in 0..0 { arrive.expect_tx mb[k] bytes 64; }") == frozenset()  # never runs


def test_an_unknown_value_stands_for_the_array() -> None:
    assert _tx_ahead("for k in 0..2 { let s = k + 1; arrive.expect_tx mb[s] bytes 64; }") == {("mb", None)}
    long = f"for k in 0..{MAX_RANGE + 1} {{ arrive.expect_tx mb[k % 4] bytes 64; }}"
    assert _tx_ahead(long) == {("mb", None)}


_ROLLED_BODY = """
          wait mb[2 + k] parity (q + 1) % 2;
          arrive.expect_tx mb[k] bytes 64;
          tma.load buf[k] bytes 64 -> mb[k];"""
_ROLLED = f"for k in 0..2 {{{_ROLLED_BODY}\n        }}"
_LIFTED = """
protocol lifted {
  param Q = 2;
  cta threads 64;
  role producer = warp 0;
  role consumer = warp 1;
  smem buf[2] bytes 64;
  mbarrier mb[4];
  if producer { elect { for i in 0..4 { init mb[i] count 1; } fence.mbarrier_init; } }
  syncthreads;
  if producer {
    elect {
      for q in 0..Q {
        """ + _ROLLED + """
      }
    }
  }
  if consumer {
    for q in 0..Q {
      wait mb[0] parity q % 2;
      read buf[0];
      syncwarp;
      elect { arrive mb[2]; }
      wait mb[1] parity q % 2;
      read buf[1];
      syncwarp;
      elect { arrive mb[3]; }
    }
  }
}
"""


def test_the_trip_count_loop_stays_unknown_and_the_lift_reads_the_inner_loop(tmp_path: Path) -> None:
    path = tmp_path / "lifted.sync"
    path.write_text(_LIFTED)
    plan = periodic.plan(str(path), {}, "Q")
    machine = Machine(plan.protocol)
    machine.loop_hook = TripCount(plan)
    producer = next(p for p in machine.procs if p.role == "producer").index
    tables = Reduction(machine)
    code = machine.programs[producer].code
    load_pc = next(pc for pc, ins in enumerate(code) if type(ins.op).__name__ == "TmaLoad")
    assert tables.tx_ahead[producer][load_pc] == {("mb", 0), ("mb", 1)}
    # an index that reads the trip-count loop's variable: its bound at compile time says nothing
    by_q = _LIFTED.replace("-> mb[k]", "-> mb[q % 2]")
    assert by_q != _LIFTED
    plain = Machine(load(by_q, path="t.sync"))
    plan2 = tmp_path / "lifted2.sync"
    plan2.write_text(by_q)
    p2 = periodic.plan(str(plan2), {}, "Q")
    hooked = Machine(p2.protocol)
    hooked.loop_hook = TripCount(p2)
    load2 = next(pc for pc, ins in enumerate(hooked.programs[producer].code) if type(ins.op).__name__ == "TmaLoad")
    assert ("mb", None) in Reduction(hooked).tx_ahead[producer][load2]
    assert ("mb", None) not in Reduction(plain).tx_ahead[producer][load2]  # Q = 2 there: q in 0..2
    # the lift of the rolled producer explores what the lift of the same statements unrolled does
    unrolled = tmp_path / "unrolled.sync"
    unrolled.write_text(_LIFTED.replace(_ROLLED, "".join(_ROLLED_BODY.replace("k", str(k)) for k in range(2))))
    rolled, flat = (lifted_search(periodic.plan(str(path), {}, "Q"), max_states=20_000, seconds=120)
                    for path in (path, unrolled))
    assert rolled.complete and flat.complete and not rolled.errors and not flat.errors
    assert rolled.states == flat.states


def test_a_one_pass_exit_loop_of_the_lift_stays_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`for qx in Q..Q + 1` after the trip-count loop: compiled at the plan's base trip count its variable is one
    value, whose parity is the base's; at other trip counts it is the other. The hook answers its bounds, so its
    index stands for the whole array; read as a constant loop it would name one element only."""
    marker = "      }\n    }\n  }\n  if consumer {"
    tail = "      for qx in Q..Q + 1 {\n        arrive.expect_tx mb[qx % 2] bytes 64;\n      }\n"
    assert marker in _LIFTED
    path = tmp_path / "exit.sync"
    path.write_text(_LIFTED.replace(marker, "      }\n" + tail + "    }\n  }\n  if consumer {"))
    plan = periodic.plan(str(path), {}, "Q")

    def exit_table() -> frozenset:
        machine = Machine(plan.protocol)
        machine.loop_hook = TripCount(plan)
        producer = next(p for p in machine.procs if p.role == "producer").index
        code = machine.programs[producer].code
        last = max(pc for pc, ins in enumerate(code) if type(ins.op).__name__ == "MbarArrive")
        return Reduction(machine).tx_ahead[producer][last]

    assert exit_table() == {("mb", None)}
    monkeypatch.setattr(successors, "governed_loops", lambda machine, proc: (lambda pc: False))
    assert len(exit_table()) == 1 and ("mb", None) not in exit_table()  # what the hook's answer prevents
