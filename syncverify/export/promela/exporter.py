"""The exporter: the layout of the model (processes, barriers, slots, knowledge holders, from the
engine's ``Machine``), its declarations, and the assembly of what the family modules write.

``_Exporter`` inherits one mixin per room: the run of every process (facts.py), the proctypes
(processes.py), the C knowledge operations (knowledge.py) and one module per primitive family
(mbarrier, barriers, memory, async_agents, fences, tcgen05, lifecycle), as ``Machine`` inherits the
semantics' families. An operation's step is written by its family (``_STEPS``, by operation type).
"""

from __future__ import annotations

import math

from ... import ir
from ...diagnostics import InputError
from ...semantics.families import warp_collective_order
from ...semantics.families.async_operands import register_refusal
from ...semantics.families.globalmem import global_refusal
from ...semantics.families.lane_groups import lane_group_refusal
from ...semantics.families.tensormap import tensormap_refusal
from ...semantics.machine import Assumptions, Machine
from ...semantics.program import END, OP, lane_part
from ...semantics.state import FULL
from ..lanes import lane_pairs_refusal
from .async_agents import STEPS as ASYNC_STEPS
from .async_agents import AsyncAgentExport
from .barriers import STEPS as BARRIER_STEPS
from .barriers import BarrierExport
from .base import ALL_THREADS, BITS, CODES, NO_JPREV, WHOLE_HI, ExportError
from .facts import FactsExport
from .fences import STEPS as FENCE_STEPS
from .fences import FenceExport
from .knowledge import KnowledgeExport
from .lifecycle import LifecycleExport
from .mbarrier import STEPS as MBARRIER_STEPS
from .mbarrier import MbarrierExport
from .memory import STEPS as MEMORY_STEPS
from .memory import MemoryExport
from .processes import ProcessExport
from .tcgen05 import STEPS as TCGEN05_STEPS
from .tcgen05 import Tcgen05Export


class _Exporter(FactsExport, ProcessExport, KnowledgeExport, MbarrierExport, BarrierExport, MemoryExport,
                AsyncAgentExport, FenceExport, Tcgen05Export, LifecycleExport):
    """The model of one protocol: the layout is fixed here, from the engine's ``Machine`` and the run
    of every process; ``render`` writes the text."""

    def __init__(self, protocol: ir.Protocol):
        self.protocol = protocol
        refusal = global_refusal(protocol, "the Promela export") or register_refusal(protocol, "the Promela export") \
            or tensormap_refusal(protocol, "the Promela export")
        if refusal is not None:
            raise ExportError(refusal)
        try:
            self.machine = Machine(protocol, Assumptions())
        except InputError as err:
            raise ExportError("; ".join(f"{d.code}: {d.message}" for d in err.diagnostics)) from None
        m = self.machine
        refusal = lane_group_refusal(m.programs, "the Promela export") or \
            warp_collective_order.program_refusal(m.procs, m.programs, "the Promela export")
        if refusal is not None:
            raise ExportError(refusal)
        from ...static.collective import tmem_may_block
        why = tmem_may_block(m)  # Machine._tmem_columns: an allocation without room blocks
        if why:
            raise ExportError(why)
        self.ncta = protocol.cluster
        self.nprocs = len(m.procs)
        self.ppc = self.nprocs // self.ncta  # processes per CTA (the same role layout in every CTA)
        if self.nprocs > 255 or self.ppc > BITS or len(m.mb_names) > 255:
            raise ExportError(f"{self.nprocs} warp processes ({self.ppc} per CTA) and {len(m.mb_names)} mbarriers: "
                              f"the model indexes them with bytes and parks warps in a {BITS}-bit mask per CTA")
        init = m.initial()
        self.init_procs = init.procs
        self.live = [p for p in range(self.nprocs) if m.programs[p].code[init.procs[p][0]].kind != END]
        # mbarrier and slot layouts: the engine's (cta-major, declaration order)
        self.mbpc = len(m.mb_names) // self.ncta
        self.mb_off: dict[str, int] = {}
        for i, (cta, name, _) in enumerate(m.mb_names):
            if cta == 0 and name not in self.mb_off:
                self.mb_off[name] = i
        self.buf_off: dict[str, int] = {}
        spc = 0
        for b in protocol.buffers:
            self.buf_off[b.name] = spc
            spc += b.slots or 1
        self.spc = spc
        self.nkeys = max(1, spc * self.ncta)
        # parts of an access (program.lane_part): 0 the leader lane, 1 the whole process, 2 + i the
        # i-th set of some lanes that the programs use (a lane guard)
        self.lane_sets = sorted({ins.lanes for p in self.live for ins in m.programs[p].code
                                 if ins.kind == OP and lane_part(m.procs[p], ins.lanes)[0] > FULL})
        # the warps that share wgmma-groups (Machine._wgmma_wait), by team number
        self.teams = [team for team in m.teams if len(team) > 1]
        self.facts = self._dry_run()
        why = lane_pairs_refusal({k: u.lanes for k, u in self.facts.keys.items()})
        if why:
            raise ExportError(why)
        self.track_akn = any(k.generic_writes for k in self.facts.keys.values())
        self.track_grp = any(k.async_reads for k in self.facts.keys.values())
        self.keep_superseded = self.facts.remote_release and self.track_akn
        self.track_region = self.facts.regions
        if self.track_region and self.keep_superseded:
            raise ExportError("regions of slots (`part ...` / `bytes LO..HI`) in a protocol that releases generic "
                              "data to a peer CTA's barrier: the superseded writes the SV602 check keeps are not "
                              "mirrored per region; not exported")
        self.cap = max([k.capacity() for k in self.facts.keys.values()] + [1])
        ids = sorted(self.facts.nb_ids) or [0]
        self.id_min, self.nids = ids[0], ids[-1] - ids[0] + 1
        self.nnb = self.nids * self.ncta
        # waiter slots per mbarrier; one at least where a wait is written that these params never reach
        # (a loop of no trips), since its guard still names the array
        writes_wait = any(self.waited_names(p) for p in self.live)
        self.nj = max([len(v) for v in self.facts.waiters.values()] + [int(writes_wait)])
        self.widx = {(name, p): i for name, ps in self.facts.waiters.items() for i, p in enumerate(ps)}
        self.ntm = (self.ncta + 1) // 2 * 2
        # knowledge holders: leader and other lanes of each live process, each mbarrier's current and
        # last phase, each named barrier slot, the cluster barrier's current and last generation
        self.h_lead = {p: 2 * i for i, p in enumerate(self.live)}
        self.mb_base = 2 * len(self.live)
        self.nb_base = self.mb_base + 2 * len(m.mb_names)
        self.cl_cur = self.nb_base + self.nnb
        self.cl_last = self.cl_cur + 1
        self.nholders = self.cl_last + 1
        self.nw = math.ceil(self.nholders / BITS)

    # ------------------------------------------------------------------ the model
    def render(self) -> str:
        out: list[str] = []
        w = out.append
        proto = self.protocol
        w(f"/* Promela model of protocol `{proto.name}` ({proto.path}), generated by `syncverify export --promela`.")
        params = ", ".join(f"{k}={v}" for k, v in proto.params) or "none"
        w(f"   params: {params}. Verify with: spin -a model.pml && gcc -DSAFETY -O2 -o pan pan.c && "
          f"./pan -m{self.max_depth()}")
        w("   An assertion names the syncverify code it checks (`cond || SVnnn`); a deadlock fails the monitor's")
        w("   assertion SV201 (syncverify says SV503 when bytes never balance). See docs/promela.md. */")
        w("")
        for name, value in (("NW", self.nw), ("CAP", self.cap), ("NKEYS", self.nkeys),
                            ("NMB", max(1, len(self.machine.mb_names))), ("NCTA", self.ncta), ("NNB", self.nnb)):
            w(f"#define {name} {value}")
        w("")
        w("typedef Mask { int w[NW] }")
        fields = ["bit kind", "byte owner", "byte part", "byte flags", "short site"]
        if self.track_region:
            fields += ["int lo", "int hi"]  # the bytes of the slot it touches (semantics/families/regions.py)
        if self.track_grp:
            fields.append("short grp")
        fields.append("int kn[NW]")
        if self.track_akn:
            fields.append("int akn[NW]")
        w("/* an access record (semantics/state.py): who accessed, and which holders are ordered after it */")
        w("typedef Rec { " + "; ".join(fields) + " }")
        w("Rec R[NKEYS * CAP]; byte nrec[NKEYS];")
        w(f"short wseq[{self.nprocs}];   /* committed wgmma-groups, per process (team waits compare them) */")
        w("/* mbarriers: rules.Mbar, whether the last phase was observed, each waiter's last observed phase,")
        w("   whether cross-CTA data were released into the current / last phase */")
        w("bit mvalid[NMB]; short mk[NMB]; int mpend[NMB]; int mexp[NMB]; int mtx[NMB]; bit mobs[NMB] = 1; "
          "byte mrd[NMB];")
        if self.nj:
            w(f"short jp[NMB * {self.nj}] = {NO_JPREV};")
        w("bit iex[NMB]; byte iown[NMB]; Mask ikn[NMB]; Mask iakn[NMB];   /* init records */")
        w("Mask skn[NCTA];   /* CTA start records */")
        w(f"short nbcnt[NNB] = {ALL_THREADS}; short nbarr[NNB]; short nbgen[NNB]; int nbw[NNB];   "
          "/* named barriers (rules.NamedBar) and the warps parked on them */")
        w("short cgen; short carr;   /* the cluster barrier (rules.ClusterBar) */")
        w("byte alive_procs[NCTA]; short alive_thr[NCTA]; short alive_all;")
        w("bit ag_live[NKEYS]; byte ag_m[NKEYS]; int ag_bytes[NKEYS]; byte ag_iss[NKEYS]; short ag_site[NKEYS];")
        if self.facts.tmem_pairs:
            w(f"byte tm_arr[{self.ntm}]; short tm_gen[{self.ntm}];")
        w("hidden int _q, _m, _t, _c, _n, _x, _j, _a, _b, _r, _w, _l;")
        if self.track_region:
            w(f"hidden int _lo, _hi = {WHOLE_HI};   /* the region of the access being made (whole: 0..{WHOLE_HI}) */")
        w("hidden int _mb0, _mb1, _mb2, _mb3, _mb4;   /* a barrier's fields after a rule (mb_update) */")
        w("hidden byte " + ", ".join(CODES) + ";   /* always 0: they name the check in SPIN's report */")
        w("")
        out.extend(self.c_helpers())
        out.extend(self.inlines())
        groups = self.templates()
        for t, procs in enumerate(groups):
            out.extend(self.proctype(t, procs[0]))
        agent_keys = sorted(k for k, use in self.facts.keys.items() if use.copies)
        for k in agent_keys:
            out.extend(self.agent(k))
        out.extend(self.init_proc(groups, agent_keys))
        return "\n".join(out) + "\n"

    def c_helpers(self) -> list[str]:
        """The knowledge operations of semantics/state.py over every live record, as C loops (one
        definition each: written in Promela, every call site would expand them), then the C that
        the families' steps call."""
        lines = ["c_code {", *self.knowledge_c(), *self.records_c()]
        if self.track_akn:
            lines += self.unfenced_c()
        lines += [*self.write_records_c(), *self.fence_init_c(), *self.cross_cta_c(), *self.copy_lands_c()]
        if self.track_grp:
            lines += self.groups_c()
        lines += ["}", ""]
        return lines

    def inlines(self) -> list[str]:
        L = [*self.mb_after_inline(), *self.cb_try_complete_inline()]
        for c in range(self.ncta):
            L += self.nb_try_complete(c)
        L.append("")
        return L

    def op_code(self, p: int, ins) -> tuple[list[str], str]:
        """The body of one operation step and its guard (the condition under which it can move),
        written by the operation's family."""
        op = ins.op
        proc = self.machine.procs[p]
        lanes = self.lanes(p, ins)
        part = self.who(p, ins)[0]
        b: list[str] = []
        step = _STEPS.get(type(op))
        if step is None:
            raise ExportError(f"line {op.span.line}: `{type(op).__name__}` is not exported")
        guard = step(self, p, proc, op, ins, lanes, part, b)
        return b, guard


_STEPS = {**MBARRIER_STEPS, **BARRIER_STEPS, **MEMORY_STEPS, **ASYNC_STEPS, **FENCE_STEPS, **TCGEN05_STEPS}
