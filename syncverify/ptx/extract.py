"""Extraction end to end: a `.ptx` (or a `.cu`, compiled with nvcc) to `.sync` text."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace

from .. import budget
from . import clc
from .execute import run_cluster
from .globalcomm import GlobalAccesses, all_clusters_run
from .gridextract import grid_skeleton
from .launch import Launch
from .parse import Function, Instr, Module, PtxError, parse_ptx, parse_ptx_file
from .skeleton import Skeleton, build
from .writer import render

NVCC_FLAGS = ("-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-ptx", "-lineinfo")


@dataclass(frozen=True)
class Extracted:
    text: str
    origin: dict[int, Instr]
    module: Module
    kernel: str


def find_nvcc() -> str | None:
    """nvcc from PATH, else from the `nvidia-cuda-nvcc` pip package."""
    found = shutil.which("nvcc")
    if found:
        return found
    try:
        import nvidia.cuda_nvcc as pkg  # type: ignore[import-not-found]
    except ImportError:
        return None
    for base in getattr(pkg, "__path__", []):
        cand = os.path.join(base, "bin", "nvcc")
        if os.path.isfile(cand):
            return cand
    return None


def compile_cu(path: str, includes: list[str] | None = None, out_dir: str | None = None,
               flags: list[str] | tuple[str, ...] = ()) -> str:
    """Compile a CUDA file to PTX with line info into `out_dir` (a new temporary directory when None: the
    caller removes it); returns the PTX path. `flags` go to nvcc after the defaults (a later `-arch` wins)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise PtxError(path, 1, 1, "nvcc was not found on PATH (nor from the nvidia-cuda-nvcc package); "
                       "install the CUDA toolkit or `pip install nvidia-cuda-nvcc`, or give the .ptx")
    if not os.path.isfile(path):
        raise PtxError(path, 1, 1, f"no such file: {path}")
    out_dir = out_dir or tempfile.mkdtemp(prefix="syncverify-ptx-")
    out = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + ".ptx")
    cmd = [nvcc, *NVCC_FLAGS, *[f"-I{i}" for i in includes or []], *flags, "-o", out, path]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:400])
        raise PtxError(path, 1, 1, f"nvcc failed: {first}", note=" ".join(cmd))
    return out


def compiled_name(path: str) -> str:
    """What a `.cu` input's PTX is called in reports: it is compiled in a temporary directory that is
    removed at once, so no report cites a PTX file by a path that exists."""
    return f"{path} (PTX from nvcc)"


def load_module(path: str, includes: list[str] | None = None, flags: list[str] | tuple[str, ...] = ()) -> Module:
    """The parsed PTX of a `.ptx`, or of a `.cu` compiled by nvcc in a temporary directory that is removed
    before this returns (also when nvcc or the parser fails)."""
    if not path.endswith((".cu", ".cuh")):
        return parse_ptx_file(path)
    with tempfile.TemporaryDirectory(prefix="syncverify-ptx-") as tmp:
        ptx = compile_cu(path, includes, tmp, flags)
        with open(ptx, encoding="utf-8") as fh:
            text = fh.read()
    return parse_ptx(text, compiled_name(path))


def pick_kernel(mod: Module, name: str | None) -> str:
    entries = [f.name for f in mod.entries()]
    if not entries:
        raise PtxError(mod.path, 1, 1, "the module has no kernel (.entry)")
    if name is None:
        if len(entries) > 1:
            raise PtxError(mod.path, 1, 1, f"the module has {len(entries)} kernels; choose one with --kernel: "
                           + ", ".join(entries))
        return entries[0]
    if name not in entries:
        matches = [e for e in entries if name in e]
        if len(matches) == 1:
            return matches[0]
        raise PtxError(mod.path, 1, 1, f"no kernel {name!r}; kernels: {', '.join(entries)}")
    return name


def extract(mod: Module, launch: Launch, kernel: str | None = None, expect: str | None = None,
            source_names: bool = False) -> Extracted:
    """The `.sync` text of `kernel` at `launch`; refusals raise Refusal (a PtxError). `source_names`: call
    barriers and buffers by the names of their `__shared__` variables (names.py; the command line does),
    else by synthetic names (`mbK`, `sK`)."""
    name = pick_kernel(mod, kernel)
    fn = next(f for f in mod.entries() if f.name == name)
    maxn = fn.directives.get(".maxntid") or fn.directives.get(".reqntid")
    if launch.threads % 32:
        raise PtxError(mod.path, fn.line, 1, f"a block of {launch.threads} threads is not whole warps; "
                       "the language models whole warps")
    if maxn and launch.threads > maxn[0] * (maxn[1] if len(maxn) > 1 else 1) * (maxn[2] if len(maxn) > 2 else 1):
        raise PtxError(mod.path, fn.line, 1, f"--block {launch.threads} exceeds the kernel's .maxntid {maxn}")
    if launch.whole_grid:  # every CTA of the grid, meeting through global memory (gridextract.py)
        sk = grid_skeleton(mod, fn, launch, source_names=source_names)
        text, origin = render(sk, mod.path, expect, mod if source_names else None)
        return Extracted(text, origin, mod, name)
    gcomm = GlobalAccesses(launch)
    events, chooses = clc.run_all(run_cluster, mod, fn, launch, gcomm)  # CLC's count of tiles: a `choose`
    sk = build(mod, name, launch, events, source_names=source_names)
    try:
        notes = _other_clusters(mod, fn, launch, sk, gcomm, source_names)
    except PtxError:
        gcomm.check(False)  # threads that communicate through global memory are the first thing to say
        raise
    gcomm.check(all_clusters_run(launch, gcomm.clusters))  # global memory: no thread reads another's writes
    if notes:
        sk = replace(sk, notes=(*sk.notes, *notes))
    text, origin = render(sk, mod.path, expect, mod if source_names else None)
    if chooses is not None:
        text = clc.declare(text, chooses)
    return Extracted(text, origin, mod, name)


# the special registers that tell one cluster of the grid from another (``%nctaid``, ``%nclusterid``,
# ``%cluster_ctaid`` and the like are the same in every cluster); with no component, the whole vector
_POSITION = re.compile(r"%(?:ctaid|clusterid)(?:\.([xyz]))?\b")


def _shape(sk: Skeleton) -> object:
    return (sk.mbarriers, sk.slots, sk.mb_storage, [(r.name, r.first_warp, r.count,
                                      [[(s.text, s.elect, s.only) for s in b] for b in r.per_cta])
                                     for r in sk.roles])


def position_dims(mod: Module) -> frozenset[int]:
    """The grid dimensions (0: x, 1: y, 2: z) whose position the module's code can read: those of
    each `%ctaid.D` or `%clusterid.D` it names (all three for the bare vector). The execution of a
    cluster depends on which cluster it is only through these registers (Launch.cluster_index
    only places the CTAs, execute.cluster_warps), so clusters at the same coordinates in these
    dimensions run alike."""
    dims: set[int] = set()
    for m in _POSITION.finditer(mod.text):
        dims |= {"xyz".index(m.group(1))} if m.group(1) else {0, 1, 2}
    return frozenset(dims)


def cluster_groups(mod: Module, launch: Launch) -> tuple[int, list[int]]:
    """The number of clusters of the grid, and one cluster (the first) of each group of clusters
    that run alike (same coordinates in position_dims) other than the group of the extracted one."""
    assert launch.grid is not None
    dims = [g // c for g, c in zip(launch.grid, launch.cluster, strict=True)]
    read = sorted(position_dims(mod))

    def group(ci: int) -> tuple[int, ...]:
        at = (ci % dims[0], (ci // dims[0]) % dims[1], ci // (dims[0] * dims[1]))
        return tuple(at[d] for d in read)

    total = dims[0] * dims[1] * dims[2]
    seen = {group(launch.cluster_index)}
    out = []
    for ci in range(total):
        if group(ci) not in seen:
            seen.add(group(ci))
            out.append(ci)
    return total, out


def _other_clusters(mod: Module, fn: Function, launch: Launch, sk: Skeleton,
                    gcomm: GlobalAccesses | None = None, source_names: bool = False) -> list[str]:
    """With --grid, every cluster of the grid must synchronize like the extracted one.

    A protocol describes one cluster; clusters are independent, so the
    protocol covers the grid when each cluster's skeleton is the same. One
    that differs (an edge tile that exits early) is refused with its index.
    Every cluster is covered: the clusters are grouped by their coordinates
    in the grid dimensions the kernel reads its position in (position_dims),
    and one cluster of each group is executed and compared; the groups cover
    the grid. The comparisons run under the check's clock (budget.clock): a
    check that runs out of time is inconclusive and names the cluster it was
    comparing, never safe for clusters it did not reach.
    """
    if launch.grid is None:
        return []
    if any(g % c for g, c in zip(launch.grid, launch.cluster, strict=True)):
        raise PtxError(mod.path, fn.line, 1, f"--grid {launch.grid} is not a whole number of clusters "
                       f"{launch.cluster}")
    total, others = cluster_groups(mod, launch)
    if total == 1:
        return []
    want = _shape(sk)
    for n, ci in enumerate(others):
        budget.check_clock(f"comparing cluster {ci} of the grid's {total} with cluster {launch.cluster_index} "
                           f"({n} of the {len(others)} other groups of clusters compared)")
        other = replace(launch, cluster_index=ci)
        events, _ = clc.run_all(run_cluster, mod, fn, other, gcomm)
        if _shape(build(mod, fn.name, other, events, source_names=source_names)) != want:
            raise PtxError(mod.path, fn.line, 1, f"cluster {ci} of the grid synchronizes differently from "
                           f"cluster {launch.cluster_index}; a protocol describes one cluster: extract it with "
                           f"--cluster-index {ci}")
    done = len(others) + 1
    how = f"{done} executed, one per value of the position it reads" if done < total else "each executed"
    return [f"all {total} clusters of the grid synchronize like this one ({how})"]
