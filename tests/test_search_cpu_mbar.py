"""mbarrier arrivals the explicit search no longer steps to learn that they break no rule (issue #36).

``Machine.mbar_arrival_findings`` tells, without the step's knowledge updates, what the step of an
`arrive` or `arrive.expect_tx` reports: the violation that ends it, its soft findings, whether it
warns. Each answer that is not None is checked against the step itself (the same violation code,
the same soft finding codes, warnings exactly when it says so, no other process moved, by the
arrival or by the exit of a process it ends), every kind of answer occurs (quiet, warnings only,
a soft finding, a violation, with SV401, SV402, SV502 and SV504 among them; arrivals that end their
process and ones that do not), and the search with the question answered None everywhere (every
arrival stepped, as before) explores the same states and transitions with the same findings and
counterexample lengths.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from reduction_slices import load_point, search_summary

from syncverify.engines.explicit import Budget, explore
from syncverify.engines.reduction.successors import _POR_ARRIVE, _POR_ARRIVE_TX, _POR_WAIT, Reduction
from syncverify.semantics.machine import Machine
from syncverify.semantics.program import END
from syncverify.semantics.state import P_PC

ROOT = Path(__file__).resolve().parent.parent


def _three_warps(name: str, count: int, arrival: str) -> str:
    """Warps a and b each arrive on `bar` (of ``count``) after its init, as ``arrival`` says (the text
    after `elect {`: the arrive, the elect's brace and what follows it); warp c waits."""
    return f"""protocol {name} {{
  cta threads 96;
  mbarrier bar count {count};
  role a = warp 0;
  role b = warp 1;
  role c = warp 2;
  first thread {{ init bar; }}
  syncthreads;
  if a {{ elect {{ {arrival} }}
  if b {{ elect {{ {arrival} }}
  if c {{ wait bar parity 0; }}
}}
"""


# an arrive before the init (SV401), a wait before it (SV401), a wait that ends its CTA (its exit: not
# known without the step), arrivals past the pending count (SV504), a phase no wait observed before
# the next arrival (SV502, then SV501 at the completion after it)
INLINE = {
    "uninit": """protocol uninit {
  cta threads 64;
  mbarrier bar count 1;
  role a = warp 0;
  role b = warp 1;
  if a { elect { arrive bar; } wait bar parity 0; }
  if b { elect { init bar; } }
}
""",
    "wait_uninit": """protocol wait_uninit {
  cta threads 64;
  mbarrier bar count 1;
  role a = warp 0;
  role b = warp 1;
  if a { wait bar parity 0; }
  if b { elect { init bar; } elect { arrive bar; } syncwarp; }
}
""",
    "last_wait": """protocol last_wait {
  cta threads 64;
  mbarrier bar count 1;
  role a = warp 0;
  role b = warp 1;
  first thread { init bar; }
  syncthreads;
  if a { wait bar parity 0; }
  if b { elect { arrive bar; } }
}
""",
    "overflow": _three_warps("overflow", 3, "arrive bar count 2; } wait bar parity 0;"),
    "unobserved": _three_warps("unobserved", 1, "arrive bar; } syncwarp;"),
}
POINTS = [
    ("specs/peer_init_race.sync", {}),  # a remote arrive before the peer's init is visible (SV402)
    ("specs/cluster_multicast_ring_cta_scope.sync", {}),  # .cta-scope remote arrives (SV602 warnings)
    ("specs/cutlass_ws_ring.sync", {}),  # arrive.expect_tx and consumer releases, quiet
    ("specs/nvfuser_cb_prologue_unobserved_phase.sync", {}),
    ("specs/triton_fa_barrier_inval_before_wait.sync", {}),
    *[(f"inline:{name}", {}) for name in INLINE],
]
IDS = [Path(p).stem if not p.startswith("inline:") else p[7:] for p, _ in POINTS]


def _load(path: str, defines: dict):
    return load_point(path, defines, INLINE, ROOT)


def _summary(path: str, defines: dict) -> tuple:
    return search_summary(_load(path, defines), max_states=8_000)


def test_mbar_arrival_findings_agree_with_the_step(monkeypatch):
    kinds: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    wait_kinds: Counter[str] = Counter()
    walk = Reduction.successors

    def checked(self, state):
        machine = self.machine
        for p, classes in enumerate(self._por_class):
            cls = classes[state.procs[p][P_PC]]
            if cls not in (_POR_ARRIVE, _POR_ARRIVE_TX, _POR_WAIT):
                continue
            wait = cls is _POR_WAIT
            answer = (machine.mbar_wait_findings if wait else machine.mbar_arrival_findings)(state, p)
            kind = "not known" if answer is None else "violation" if answer.violation else "soft" if answer.soft \
                else "warns" if answer.warns else "quiet"
            (wait_kinds if wait else kinds)[kind] += 1
            if answer is None:
                continue
            codes.update(answer.soft + ((answer.violation,) if answer.violation else ()))
            res = machine.step_process(state, p)
            if res is None:  # a blocked wait
                assert wait and answer == (None, (), False), (p, answer)
                continue
            assert (res.violation.code if res.violation else None) == answer.violation, (p, res.violation)
            assert tuple(v.code for v in res.soft) == answer.soft, (p, res.soft)
            assert bool(res.warnings) == answer.warns, (p, res.warnings)
            if res.violation is None:
                # no other process moved (an arrive that ends its process: its exit moved none either)
                assert all(a == b for q, (a, b) in enumerate(zip(state.procs, res.state.procs, strict=True))
                           if q != p)
                ends["ended" if machine.programs[p].code[res.state.procs[p][P_PC]].kind == END else "runs"] += 1
        return walk(self, state)

    monkeypatch.setattr(Reduction, "successors", checked)
    for path, defines in POINTS:
        protocol = _load(path, defines)
        explore(protocol, Budget(max_states=2_000, seconds=300), Machine(protocol))
    assert all(kinds[k] for k in ("quiet", "warns", "soft", "violation", "not known")), kinds
    assert all(codes[c] for c in ("SV401", "SV402", "SV502", "SV504")), codes
    assert ends["ended"] and ends["runs"], ends
    assert all(wait_kinds[k] for k in ("quiet", "violation", "not known")), wait_kinds


@pytest.mark.parametrize(("path", "defines"), POINTS, ids=IDS)
def test_search_unchanged_with_every_arrival_stepped(path, defines, monkeypatch):
    with_it = _summary(path, defines)
    monkeypatch.setattr(Machine, "mbar_arrival_findings", lambda self, state, p: None)
    monkeypatch.setattr(Machine, "mbar_wait_findings", lambda self, state, p: None)
    assert _summary(path, defines) == with_it
