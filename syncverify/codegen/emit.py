"""Assemble one kernel: source text plus the JSON launch description the GPU runner consumes.

The runner imports nothing of syncverify, so the launch description carries
everything it needs to launch, check and explain: the shape (grid of clusters,
cluster, block, dynamic shared memory), the expected stamps, the stamps of the
TMA sources, the process and site tables that turn a stamp or a watchdog
record back into "which warp, which spec line, which iteration", and the
layout of the status and control words.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..semantics.families.async_operands import register_refusal
from ..semantics.families.globalmem import global_refusal
from ..semantics.families.lane_groups import lane_group_refusal
from ..semantics.families.tensormap import tensormap_refusal
from ..semantics.program import compile_program, processes
from ..static.collective import collective_findings, is_wgmma
from . import ptx, regions
from .base import EmitRefused, Layout, Shape, Tables, make_layout
from .kernel import KernelWriter
from .replay import ReplayOrder
from .schedule import Schedule, run_schedule
from .sites import Site, collect_sites, comment_safe, site_index
from .support import check_supported

LAUNCH_VERSION = 1
DEFAULT_WATCHDOG_NS = 500_000_000  # far above any legitimate wait of these kernels (they run for microseconds)


@dataclass
class Emission:
    source: str
    launch: dict
    schedule: Schedule


def emit(protocol: ir.Protocol, *, grid: int = 1, replay: ReplayOrder | None = None,
         watchdog_ns: int = DEFAULT_WATCHDOG_NS, check_stride: int = 1) -> Emission:
    """Emit the kernel of ``protocol``; raises EmitRefused for what sm_90a cannot run."""
    refusal = global_refusal(protocol, "the CUDA emitter") or register_refusal(protocol, "the CUDA emitter") \
        or tensormap_refusal(protocol, "the CUDA emitter")
    if refusal is not None:
        raise EmitRefused(f"{protocol.path}: {refusal}")
    if replay is not None:
        grid = max(grid, replay.grid)
    sites = collect_sites(protocol)
    check_supported(protocol, sites)
    site_of = site_index(sites)
    procs = processes(protocol)
    programs = [compile_program(protocol, p) for p in procs]
    refusal = lane_group_refusal(programs, "the CUDA emitter")
    if refusal is not None:
        raise EmitRefused(f"{protocol.path}: {refusal}")
    _check_wgmma(protocol, sites, programs)
    per_cta = [p for p in procs if p.cta == 0]
    shape = Shape(
        proc_of_tid=[next(i for i, p in enumerate(per_cta) if p.lo <= t < p.hi) for t in range(protocol.threads)],
        proc_lo=[p.lo for p in per_cta], proc_n=[p.hi - p.lo for p in per_cta], procs_per_cta=len(per_cta))
    sched = run_schedule(protocol, site_of)
    for p, site, occ, word in replay.expect if replay is not None else ():
        # the racing read of a forced RAW order is due to see the write the order puts after it
        # (replay._raw_read): that, not what the schedule saw, is its expected stamp
        seen = sched.reads[(p, site)]
        if occ <= len(seen):
            seen[occ:occ + 1] = [word]
    layout = make_layout(protocol, sched.load_bytes)
    tables, expected, sources, stores = _tables(len(procs), len(sites), sched)
    _region_records(protocol, sites, sched, layout, tables, expected, stores)
    _lane_records(sched, tables, expected)
    if check_stride < 1:
        raise EmitRefused(f"check stride {check_stride}: give 1 (every word) or more")
    gated = replay is not None and not replay.why_ungated
    writer = KernelWriter(protocol, sites, site_of, layout, tables, shape, gated, check_stride,
                          replay.holds if replay is not None else ())
    body = writer.body()
    source = _source(protocol, sites, layout, tables, shape, writer, body)
    launch = _launch(protocol, sites, procs, layout, tables, shape, sched, expected, sources, stores, grid,
                     replay, watchdog_ns, writer)
    return Emission(source, launch, sched)


def _check_wgmma(protocol: ir.Protocol, sites: list[Site], programs) -> None:
    """wgmma is warpgroup-collective (.sync.aligned): every warp of a warpgroup must issue each one, and only
    `wgmma.wait 0` is emitted."""
    for s in sites:
        op = s.op
        if isinstance(op, ir.GroupWait) and op.unit == "wgmma":
            if not isinstance(op.pending, ir.Const) or op.pending.value != 0:
                raise EmitRefused(f"{protocol.path}:{s.line}: only `wgmma.wait 0` is emitted (each wgmma read keeps "
                                  "its own accumulator, checked when the wait retires it)")
    # the checker's SV206 rule (syncverify.static.collective): a kernel that breaks it is undefined, not emitted
    for d in collective_findings(protocol, programs):
        site = next((s for s in sites if s.op.span == d.span), None)
        if site is not None and is_wgmma(site.op):
            raise EmitRefused(f"{protocol.path}:{site.line}: `{site.text}` {d.message} (SV206)")


def _tables(nprocs: int, nsites: int, sched: Schedule) -> tuple[Tables, list[int], dict, dict]:
    t = Tables(nprocs, nsites)
    n = nprocs * nsites
    t.read_base, t.read_count = [-1] * n, [0] * n
    t.src_base, t.src_count = [-1] * n, [0] * n
    t.dst_base, t.dst_count = [-1] * n, [0] * n
    expected: list[int] = []
    for (p, s), values in sorted(sched.reads.items()):
        t.read_base[p * nsites + s], t.read_count[p * nsites + s] = len(expected), len(values)
        expected.extend(values)
    src_stamps: list[int] = []
    src_bytes = 16
    for (p, s), loads in sorted(sched.loads.items()):
        t.src_base[p * nsites + s], t.src_count[p * nsites + s] = len(src_stamps), len(loads)
        src_stamps.extend(w for w, _ in loads)
        src_bytes = max([src_bytes, *(b for _, b in loads)])
    dst_expected: list[int] = []
    dst_bytes: list[int] = []
    dst_max = 16
    dst_who: list[list[int]] = []  # (process, site, occurrence) of each store region, to name it in reports
    for (p, s), stores in sorted(sched.stores.items()):
        t.dst_base[p * nsites + s], t.dst_count[p * nsites + s] = len(dst_expected), len(stores)
        dst_who.extend([p, s, i] for i in range(len(stores)))
        dst_expected.extend(w for w, _ in stores)
        dst_bytes.extend(b for _, b in stores)
        dst_max = max([dst_max, *(b for _, b in stores)])
    t.src_regions, t.src_region_words = max(len(src_stamps), 1), (src_bytes + 15) // 16 * 4
    t.dst_regions, t.dst_region_words = max(len(dst_expected), 1), (dst_max + 15) // 16 * 4
    sources = {"regions": t.src_regions, "region_words": t.src_region_words, "stamps": src_stamps or [0],
               "bytes_per_cluster": sum(b for loads in sched.loads.values() for _, b in loads)}
    stores = {"regions": t.dst_regions, "region_words": t.dst_region_words, "expected": dst_expected,
              "bytes": dst_bytes, "who": dst_who}
    return t, expected, sources, stores


def _region_records(protocol: ir.Protocol, sites: list[Site], sched: Schedule, layout: Layout, t: Tables,
                    expected: list[int], stores: dict) -> None:
    """Region buffers (regions.py): each read and region write of one gets, in place of its stamp, the
    index of a record appended to the expectation list: a write's word range, a read's segments. Bulk
    stores of one get their segments in the launch description."""
    n = t.nsites
    for (p, s), ranges in sorted(sched.ranges.items()):
        name = sites[s].op.buf.name  # type: ignore[union-attr]
        t.read_base[p * n + s], t.read_count[p * n + s] = len(expected), len(ranges)
        first = len(expected)
        expected.extend([0] * len(ranges))
        for i, rng in enumerate(ranges):
            expected[first + i] = len(expected)
            expected.extend(regions.words(rng, layout.slot_words[name], f"{protocol.path}:{sites[s].line}"))
    for (p, s), seen in sorted(sched.segs.items()):
        name = sites[s].op.buf.name  # type: ignore[union-attr]
        base = t.read_base[p * n + s]
        for i, content in enumerate(seen):
            if content:  # the read's own range first (a segment's inner bounds are its writers')
                regions.words((content[0][0], content[-1][1]), layout.check_words[name],
                              f"{protocol.path}:{sites[s].line}")
            expected[base + i] = len(expected)
            expected.append(len(content))
            for lo, hi, st in content:
                expected.extend([*regions.words((lo, hi), layout.check_words[name],
                                                f"{protocol.path}:{sites[s].line}"), st])
    if sched.store_segs:
        segments: list[list[list[int]] | None] = []
        for (p, s), stored in sorted(sched.stores.items()):
            seen = sched.store_segs.get((p, s))
            for i, (_, nbytes) in enumerate(stored):
                segments.append(None if seen is None else
                                [[*regions.words((lo, hi), nbytes // 4, f"{protocol.path}:{sites[s].line}"), st]
                                 for lo, hi, st in seen[i]])
        stores["segments"] = segments


def _lane_records(sched: Schedule, t: Tables, expected: list[int]) -> None:
    """Per-lane reads (semantics.program.per_lane): each occurrence's entry is the index of 32 stamps, the
    one each lane must observe in the slot it reads."""
    n = t.nsites
    for (p, s), seen in sorted(sched.lane_reads.items()):
        t.read_base[p * n + s], t.read_count[p * n + s] = len(expected), len(seen)
        first = len(expected)
        expected.extend([0] * len(seen))
        for i, stamps in enumerate(seen):
            expected[first + i] = len(expected)
            expected.extend(stamps)


def _c_array(ctype: str, name: str, values: list[int]) -> str:
    body = ", ".join(str(v) for v in values) if values else "0"
    return f"__constant__ {ctype} {name}[{max(len(values), 1)}] = {{{body}}};"


def _roles(protocol: ir.Protocol) -> list[str]:
    """Role predicates and the instance number. When every role covers whole warps they are made
    warp-uniform through a shuffle (as CUTLASS's canonical_warp_group_idx does): ptxas serializes a
    wgmma.mma_async in a path it cannot prove warp-uniform (C7518), which turns the asynchronous
    operand read into a synchronous one and hides the very races a wgmma spec is about."""
    aligned = all(lo % 32 == 0 and hi % 32 == 0 for r in protocol.roles for lo, hi in r.instances)
    out = []
    for r in protocol.roles:
        conds = " || ".join(f"(c.tid >= {lo}u && c.tid < {hi}u)" for lo, hi in r.instances)
        if aligned:
            out.append(f"const bool in_{r.name} = __shfl_sync(0xFFFFFFFFu, (int)({conds}), 0) != 0;")
        else:
            out.append(f"const bool in_{r.name} = {conds};")
        if r.array:
            for i, (lo, hi) in enumerate(r.instances):
                out.append(f"if (c.tid >= {lo}u && c.tid < {hi}u) inst = {i};")
    if aligned and any(r.array for r in protocol.roles):
        out.append("inst = __shfl_sync(0xFFFFFFFFu, inst, 0);")
    return out


def _var_names(stmts: tuple[ir.Stmt, ...], out: list[str]) -> list[str]:
    for s in stmts:
        if isinstance(s, ir.Let) and s.name not in out:
            out.append(s.name)
        elif isinstance(s, ir.For):
            if s.var not in out:
                out.append(s.var)
            _var_names(s.body, out)
        elif isinstance(s, ir.If):
            _var_names(s.then, out)
            _var_names(s.orelse, out)
        elif isinstance(s, ir.Elect):
            _var_names(s.body, out)
    return out


WAIT_FN = r"""
SV_DEVICE void NAME(const SvCtx& c, u32 bar, u32 parity, u32 line, u32 site, u32 obj, u32 occ,
                    int it0, int it1, int it2, u32 niter) {
  u32 ok;
  asm volatile("ASM" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  if (ok || sv_aborted(c)) return;
  const u64 t0 = sv_now();
  for (;;) {
    asm volatile("ASM" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    if (ok) return;
    if (sv_aborted(c)) { sv_status(c, SV_STATE_ABORTED, line, site, obj, parity, occ, it0, it1, it2, niter); return; }
    if (sv_now() - t0 > c.watchdog_ns) {
      sv_status(c, SV_STATE_TIMEOUT, line, site, obj, parity, occ, it0, it1, it2, niter);
      atomicExch(&c.ctl[SV_CTL_ABORT], 1u);
      return;
    }
    // Lanes of one warp on different paths (a lane guard, an elected lane, a hold) share the warp's
    // issue slots: a spin that never yields starved the other path on the H200 until the watchdog
    // fired (docs/gpu-agreement.md, "Lanes of one warp"). The sleep lets that path run.
    __nanosleep(200);
  }
}
"""

GATE_FNS = r"""
// Replay of a counterexample: step i of the recorded order runs only when the turn counter is i;
// operations after a process's last recorded step wait until the whole order has been replayed.
SV_DEVICE bool sv_gate(const SvCtx& c, const u32* rp, u32 n, u32& cur, u32 site, u32 occ) {
  if (!n) return false;
  while (cur < n && (rp[4 * cur] != c.proc || (rp[4 * cur + 3] && rp[4 * cur + 1] != site))) ++cur;
  const bool mine = cur < n && rp[4 * cur + 1] == site && rp[4 * cur + 2] == occ;
  const u32 target = mine ? cur : n;
  volatile u32* turn = &c.ctl[SV_CTL_TURN];
  if (*turn >= target) return mine;
  const u64 t0 = sv_now();
  while (*turn < target) {
    if (sv_aborted(c)) return false;
    if (sv_now() - t0 > c.watchdog_ns) {
      sv_status(c, SV_STATE_REPLAY_STUCK, 0u, site, target, 0u, occ, 0, 0, 0, 0u);
      atomicExch(&c.ctl[SV_CTL_ABORT], 1u);
      return false;
    }
    __nanosleep(200);  // as in the wait loops: let the warp's other lanes run
  }
  return mine;
}

SV_DEVICE void sv_gate_done(const SvCtx& c, bool mine, u32& cur, bool whole) {
  if (!mine) return;
  if (whole) __syncwarp(c.seg_mask);
  if (!whole || c.pfirst) { __threadfence(); atomicAdd(&c.ctl[SV_CTL_TURN], 1u); }
  ++cur;
}
"""

LANE_GATE_FN = r"""
// A gated step inside a guard on `lane`: the lanes the guard let in (`lanes`, their ballot) take it together,
// and the lowest of them hands the turn on once.
SV_DEVICE void sv_gate_done_lanes(const SvCtx& c, bool mine, u32& cur, u32 lanes) {
  if (!mine) return;
  __syncwarp(lanes);
  if ((c.tid & 31u) == (u32)(__ffs(lanes) - 1)) { __threadfence(); atomicAdd(&c.ctl[SV_CTL_TURN], 1u); }
  ++cur;
}
"""

HOLD_FN = r"""
// A hold: wait until the order has been replayed up to `until` (the overwrite is issued), then `window_ns`
// more for it to land; the held access comes after.
SV_DEVICE void sv_hold(const SvCtx& c, u32 until, u64 window_ns, u32 site, u32 occ) {
  volatile u32* turn = &c.ctl[SV_CTL_TURN];
  const u64 t0 = sv_now();
  while (*turn < until) {
    if (sv_aborted(c)) return;
    if (sv_now() - t0 > c.watchdog_ns) {
      sv_status(c, SV_STATE_REPLAY_STUCK, 0u, site, until, 0u, occ, 0, 0, 0, 0u);
      atomicExch(&c.ctl[SV_CTL_ABORT], 1u);
      return;
    }
    __nanosleep(256);
  }
  const u64 t1 = sv_now();
  while (sv_now() - t1 < window_ns) __nanosleep(1024);
}

// A late write: each lane stores one contiguous run of the slot, so the lanes of a warp hit the same banks
// together and the stores drain slowly; the warp issues them and moves on while they are still in flight.
SV_DEVICE void sv_stamp_late(void* slot, u32 words, u32 value, u32 part, u32 nparts) {
  uint4* v = (uint4*)slot;
  const uint4 x = make_uint4(value, value, value, value);
  const u32 n = words / 4, per = (n + nparts - 1) / nparts;
  for (u32 j = 0; j < per; ++j)
    if (part * per + j < n) v[part * per + j] = x;
}
"""


def _source(protocol: ir.Protocol, sites: list[Site], layout: Layout, tables: Tables, shape: Shape,
            writer: KernelWriter, body: list[str]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in protocol.params) or "none"
    out = [
        f"// Generated by `syncverify emit` from {comment_safe(protocol.path)} (protocol {protocol.name}); "
        "do not edit.",
        f"// params: {params}; cluster {protocol.cluster}; {protocol.threads} threads per CTA; "
        f"{layout.smem_bytes} bytes of dynamic shared memory.",
        "// Target: sm_90a. Every mbarrier wait has a %globaltimer watchdog; reads compare stamps with the model.",
        "",
        f"#define SV_NSITES {len(sites)}u",
        "#define SV_STAMP(p, s, o) ((((1u + (p) * SV_NSITES + (s)) & 0x7FFFu) << 16) | ((o) & 0xFFFFu))",
        ptx.prelude(),
    ]
    for name, asm in sorted(writer.wait_variants.items()):
        out.append(WAIT_FN.replace("NAME", name).replace("ASM", asm))
    if writer.parted:
        out.append(regions.DEVICE_FNS)
    if writer.replay:
        out.append(GATE_FNS)
    if writer.lane_gates:
        out.append(LANE_GATE_FN)
    if writer.holds:
        out.append(HOLD_FN)
    ctype = "unsigned char" if shape.procs_per_cta < 256 else "unsigned short"
    out += [
        _c_array(ctype, "sv_proc_of_tid", shape.proc_of_tid),
        _c_array("unsigned short", "sv_proc_lo", shape.proc_lo),
        _c_array("unsigned char", "sv_proc_n", shape.proc_n),
        _c_array("int", "sv_read_base", tables.read_base), _c_array("u32", "sv_read_count", tables.read_count),
        _c_array("int", "sv_src_base", tables.src_base), _c_array("u32", "sv_src_count", tables.src_count),
        _c_array("int", "sv_dst_base", tables.dst_base), _c_array("u32", "sv_dst_count", tables.dst_count),
        "",
        "// Pre-stamp the TMA sources: region r of every cluster holds stamps[r].",
        'extern "C" __global__ void sv_fill(u32* src, const u32* stamps, u32 regions, u32 region_words, u64 words) {',
        "  for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += (u64)gridDim.x * blockDim.x)",
        "    src[w] = stamps[(w / region_words) % regions];",
        "}",
        "",
        f'extern "C" __global__ void __launch_bounds__({protocol.threads}, 1)',
        "sv_kernel(u32* status, u32* ctl, const u32* expect, const u32* src, u32* dst, u64 watchdog_ns,",
        "          const u32* replay, u32 replay_len) {",
        "  extern __shared__ __align__(1024) unsigned char sv_smem_base[];",
        "  SvCtx c;",
        "  c.tid = threadIdx.x; c.cta = sv_ctarank(); c.cluster = sv_clusterid();",
        "  const u32 lp = sv_proc_of_tid[c.tid];",
        f"  c.proc = c.cta * {shape.procs_per_cta}u + lp;",
        "  c.pidx = c.tid - sv_proc_lo[lp]; c.pn = sv_proc_n[lp]; c.pfirst = c.pidx == 0u;",
        "  c.seg_mask = c.pn == 32u ? 0xFFFFFFFFu : ((1u << c.pn) - 1u) << (sv_proc_lo[lp] & 31u);",
        f"  c.cta_global = c.cluster * {protocol.cluster}u + c.cta;",
        f"  c.status = status + (c.cta_global * {shape.procs_per_cta}u + lp) * SV_STATUS_WORDS;",
        "  c.ctl = ctl; c.watchdog_ns = watchdog_ns;",
        "  const u32 sv_bars = sv_smem(sv_smem_base);",
        "  int inst = 0;",
        *("  " + x for x in _roles(protocol)),
    ]
    names = _var_names(protocol.body, [])
    if names:
        out.append("  int " + ", ".join(f"v_{n} = 0" for n in names) + ";")
    out.append("  u32 " + ", ".join(f"o{s.index} = 0u" for s in sites) + ";" if sites else "")
    out.append("  u32 rcur = 0u; (void)rcur; (void)replay; (void)replay_len; (void)expect; (void)src; (void)dst;")
    if any(h.kind == "late-lanes" for hs in writer.holds.values() for h in hs):  # the slot a held read saw
        out.append("  unsigned char* held_slot = sv_smem_base; u32 held_id = 0u;")
    out += ["  " + x for x in writer.store_tables()]
    for s in writer.wgmma_sites:
        out.append(f"  u32 acc{s}[4] = {{0u, 0u, 0u, 0u}}; u32 wg_pending{s} = 0u, wg_expect{s} = 0u, "
                   f"wg_occ{s} = 0u, wg_slot{s} = 0u;")
        if s in writer.wide_n:
            out.append(f"  u32 hw{s}[{writer.wide_n[s] // 2}];")
            out.append("  #pragma unroll")
            out.append(f"  for (int i = 0; i < {writer.wide_n[s] // 2}; ++i) hw{s}[i] = 0u;")
    buf_bytes = layout.smem_bytes - layout.buffers_start
    out += [
        "  if (c.pfirst) sv_status(c, SV_STATE_RUNNING, 0u, 0u, 0u, 0u, 0u, 0, 0, 0, 0u);",
        *_clear_prologue(protocol.cluster, protocol.threads, layout.buffers_start, buf_bytes),
        "  // ---- the protocol body",
        *body,
        "  // ---- end",
        f"  if (c.pfirst) sv_status(c, SV_STATE_DONE, {protocol.span.end_line}u, 0u, 0u, 0u, 0u, 0, 0, 0, 0u);",
        "}",
        "",
    ]
    return "\n".join(out)


def _launch(protocol: ir.Protocol, sites: list[Site], procs, layout: Layout, tables: Tables, shape: Shape,
            sched: Schedule, expected: list[int], sources: dict, stores: dict, grid: int,
            replay: ReplayOrder | None, watchdog_ns: int, writer: KernelWriter) -> dict:
    site_loops = writer.site_loops
    mbars = []
    for mb in protocol.mbarriers:
        mbars += [mb.name] if mb.size is None else [f"{mb.name}[{i}]" for i in range(mb.size)]
    expect = protocol.expect
    return {
        "version": LAUNCH_VERSION,
        "spec": protocol.path,
        "protocol": protocol.name,
        "params": dict(protocol.params),
        "expect": None if expect is None else {"errors": sorted(expect.errors), "warnings": sorted(expect.warnings)},
        "arch": "sm_90a",
        "kernel": "sv_kernel",
        "fill_kernel": "sv_fill",
        "grid": grid,
        "cluster": protocol.cluster,
        "block": protocol.threads,
        "shmem_size": layout.smem_bytes,
        "watchdog_ns": watchdog_ns,
        "check_stride": writer.check_stride,
        "procs_per_cta": shape.procs_per_cta,
        "nsites": len(sites),
        "status": {"words": ptx.STATUS_WORDS, "stuck_base": ptx.STUCK_BASE, "state": ptx.ST_STATE,
                   "line": ptx.ST_LINE, "site": ptx.ST_SITE,
                   "obj": ptx.ST_OBJ, "parity": ptx.ST_PARITY, "occ": ptx.ST_OCC, "iters": ptx.ST_IT0,
                   "niter": ptx.ST_NITER, "states": {"running": ptx.STATE_RUNNING, "done": ptx.STATE_DONE,
                                                     "timeout": ptx.STATE_TIMEOUT, "barrier": ptx.STATE_BARRIER,
                                                     "aborted": ptx.STATE_ABORTED,
                                                     "replay_stuck": ptx.STATE_REPLAY_STUCK}},
        "ctl": {"words": ptx.CTL_WORDS, "abort": ptx.CTL_ABORT, "bad_words": ptx.CTL_BAD_WORDS,
                "bad_events": ptx.CTL_BAD_EVENTS, "unchecked": ptx.CTL_UNCHECKED, "turn": ptx.CTL_TURN,
                "wgmma_bad": ptx.CTL_WGMMA_BAD, "records": ptx.CTL_RECORDS, "record_words": ptx.RECORD_WORDS,
                "max_records": ptx.MAX_RECORDS},
        "processes": [{"index": p.index, "cta": p.cta, "warp": p.warp, "lo": p.lo, "hi": p.hi, "role": p.role,
                       "instance": p.instance, "label": p.label()} for p in procs],
        "sites": [{"index": s.index, "line": s.line, "op": s.text, "kind": type(s.op).__name__,
                   "loops": site_loops.get(s.index, [])} for s in sites],
        "mbarriers": mbars,
        "buffers": [{"name": b.name, "slots": b.slots, "bytes": b.bytes} for b in protocol.buffers],
        "expected": expected,
        "sources": sources,
        "stores": stores,
        "schedule": {"complete": sched.complete, "intended": sched.intended, "steps": sched.steps,
                     "stuck": sched.stuck},
        "replay": None if replay is None else replay.to_json(),
    }


def _clear_prologue(cluster: int, threads: int, start: int, nbytes: int) -> list[str]:
    """Zero the buffers before the protocol, as one region and released to every CTA of the cluster.

    The CTA's last warp alone clears: one warp's back-to-back stores are one access to the whole
    buffer area, so extracting the kernel back does not split each slot by clearing warp. It is the
    last warp because that is where warp-specialized specs put the producer, outside the consumer
    warpgroups: a warp of a wgmma warpgroup with a prologue of its own would be a program apart from
    the other three, which the extracted protocol reports as a split warpgroup. The stores reach the
    async proxy through ``fence.proxy.async`` and the other warps through the barrier that follows.
    With a cluster, a peer's multicast copy also writes this CTA's buffers, and the protocol's own
    first cluster barrier may be ``.relaxed`` -- which orders no earlier access (PTX ISA,
    barrier.cluster) -- so the prologue ends with a full ``barrier.cluster.arrive`` (.release by
    default) and ``barrier.cluster.wait`` (.acquire) instead of ``__syncthreads()``.
    """
    last = (threads - 1) // 32 * 32
    out = [
        "  // Slots start as stamp 0 (\"nobody wrote\"), visible to both proxies before the protocol begins.",
        f"  if (c.tid >= {last}u)",
        f"    for (u32 i = c.tid - {last}u; i < {nbytes // 16}u; i += {threads - last}u)",
        f"      ((uint4*)(sv_smem_base + {start}u))[i] = make_uint4(0u, 0u, 0u, 0u);",
        f'  asm volatile("{ptx.FENCE_PROXY_ASYNC}" ::: "memory");',
    ]
    if cluster > 1:
        out += [f'  asm volatile("{ptx.CLUSTER_ARRIVE}" ::: "memory");  // .release: the peers\' copies come after',
                f'  asm volatile("{ptx.CLUSTER_WAIT}" ::: "memory");']
    else:
        out.append("  __syncthreads();")
    return out
