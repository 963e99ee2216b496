"""Probe: does the H200 hang when a warp arrives on war[0] in phase 1 before any wait observed phase 0?

The replay of nvfuser_cb_prologue_unobserved_phase with the checker's SV502 counterexample of 2026-11-29 (cta.w1
reads tile[0] and arrives on war[0] at k=0 before cta.w0 enters its main loop) hung 10/10, and still does on the
current kernel (docs/gpu-agreement.md, "Lanes of one warp"). This writes two kernels gated through the same order:

- unobserved_phase_order.cu: nvfuser_cb_prologue_unobserved_phase (the prologue does not wait on war[k]);
- observed_phase_order.cu: its fix nvfuser_cb_mbarrier_war (the prologue waits phase 0 of war[k]), with that
  wait as the one extra step of the order.

Both have no holds, only the gates. X_sleep.cu is the same kernel with a __nanosleep(200) in every wait and gate
loop, so that lanes of a warp left spinning on one path let the warp's other path run. Run each with
`python3 syncverify/gpu/runner.py kernels/probes/X.cu kernels/probes/X.json --repeat 10` (X_sleep.cu with X.json).
On the H200 (2026-12-02) both plain kernels hung 10/10 and both _sleep kernels completed 10/10 with clean data.

    PYTHONPATH=. python3 kernels/probes/unobserved_phase_order.py

Since the emitter's wait and gate loops sleep themselves (docs/gpu-agreement.md, "Warpgroup wgmma, lanes and the
wait loops' sleep"), the plain probes can no longer be regenerated without the sleep: the committed .cu files
are the kernels that ran, and this script refuses to write over them from the current emitter.
"""

from __future__ import annotations

import json
from pathlib import Path

from syncverify.codegen import emit
from syncverify.codegen.replay import ReplayOrder
from syncverify.codegen.sites import collect_sites
from syncverify.lang import load

HERE = Path(__file__).resolve().parent

# (process, line, leader-only): cta.w0 = 0, cta.w1 = 1; lines of the spec named; the order of 2026-11-29
COMMON_HEAD = [(0, "init full", 1), (0, "init war", 1), (0, "fence.mbarrier_init", 1), (0, "syncthreads", 0),
               (1, "syncthreads", 0), (0, "arrive war[k]", 0), (0, "arrive war[k]", 0)]
ORDERS = {
    "unobserved_phase_order": ("specs/nvfuser_cb_prologue_unobserved_phase.sync", [
        *COMMON_HEAD, (0, "arrive.expect_tx full[k]", 1), (0, "tma.load tile[k]", 1),
        (1, "arrive war[k]", 0), (1, "arrive war[k]", 0)]),
    "observed_phase_order": ("specs/nvfuser_cb_mbarrier_war.sync", [
        *COMMON_HEAD, (1, "arrive war[k]", 0), (1, "arrive war[k]", 0),
        (0, "wait war[k]", 1), (0, "arrive.expect_tx full[k]", 1), (0, "tma.load tile[k]", 1)]),
}
TAIL = [(1, "wait full[s]", 0), (1, "read tile[s]", 0), (1, "arrive war[s]", 0)]  # cta.w1, main loop k=0


def order(spec: str, named: list[tuple[int, str, int]]) -> tuple:
    sites = collect_sites(load(spec))
    occ: dict[tuple[int, int], int] = {}
    steps, trace = [], []
    main = min(s.line for s in sites if s.text.startswith("wait full[s]"))
    for proc, text, leader in named:
        site = next(s for s in sites if s.text.startswith(text) and (not text.endswith("[s]") or s.line >= main))
        n = occ.get((proc, site.index), 0)
        occ[(proc, site.index)] = n + 1
        steps.append((proc, site.index, n, leader))
        trace.append(f"cta.w{proc} line {site.line}")
    return tuple(steps), tuple(trace)


WAIT_LOOP_END = """      atomicExch(&c.ctl[SV_CTL_ABORT], 1u);
      return;
    }
  }"""
GATE_LOOP = """  while (*turn < target) {
    if (sv_aborted(c)) return false;"""


def with_sleep(name: str, source: str) -> str:
    """The probe variant: a __nanosleep in every wait loop and in the gate's loop."""
    if WAIT_LOOP_END not in source or GATE_LOOP not in source:
        raise SystemExit(f"{name}: the emitted wait/gate loops already sleep; the committed probe kernels are the "
                         "ones that ran (see this module's docstring)")
    source = source.replace(WAIT_LOOP_END, WAIT_LOOP_END[:-4] +
                            "\n    __nanosleep(200);  // probe variant: let the warp's other lanes run\n  }")
    source = source.replace(GATE_LOOP, GATE_LOOP + "\n    __nanosleep(200);  // probe variant")
    return f"// Probe variant of {name}.cu: __nanosleep(200) in every wait and gate loop.\n" + source


def main() -> None:
    for name, (spec, named) in ORDERS.items():
        protocol = load(spec)
        steps, trace = order(spec, named + TAIL)
        replay = ReplayOrder("probe", f"probe order of {spec}", steps, trace, (), tuple(s[:3] for s in steps))
        em = emit(protocol, replay=replay)
        (HERE / f"{name}.cu").write_text(em.source)
        (HERE / f"{name}_sleep.cu").write_text(with_sleep(name, em.source))
        (HERE / f"{name}.json").write_text(json.dumps(em.launch, indent=1) + "\n")
        print(name, len(steps), "steps:", ", ".join(trace))


if __name__ == "__main__":
    main()
