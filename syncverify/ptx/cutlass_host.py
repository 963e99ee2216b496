"""A CUTLASS sm90 GEMM's launch, Params fields and tensor-map boxes from CUTLASS's own host code.

The kernel's type is read from its PTX entry -- `cutlass::device_kernel<T>`, demangled -- so a `.cu` (once
compiled) and a `.ptx` are served alike, and nothing of the user's file is included. The host program
(syncverify/data/cutlass_sm90_params.cu, `using GemmKernel = T;`) runs the part of
`GemmKernel::to_underlying_arguments` that needs no CUDA driver -- mode, problem shape, hardware info, the
tile scheduler's Params -- and the fusion arguments' own `to_underlying_arguments`, and prints the launch
(`get_grid_shape`, `get_block_shape`, the cluster, `SharedStorageSize`), where each computed field lies
in the Params, and the box of each TMA tensor map (a compile-time property of its copy atom). nvcc builds
it once per kernel type and CUTLASS version, under a content-hash key in the cache directory; it runs on
the CPU. The TMA descriptors and pointers stay unknown to extraction: only a driver encodes them, and no
decision of the protocol reads them (one that does is refused at its line).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .cutlass_headers import cutlass_include
from .extract import find_nvcc
from .launch import ParamBytes
from .parse import Function, PtxError

__all__ = ["HostLaunch", "build", "cache_dir", "cutlass_include", "host_launch", "kernel_type", "run"]

TEMPLATE = "cutlass_sm90_params.cu"
# the stream-K scheduler's: its Params point into a workspace (cutlass_sm90_streamk_params.cu)
STREAM_K_TEMPLATE = "cutlass_sm90_streamk_params.cu"
# the fake device address the stream-K workspace is given: no window of the executor's (launch.py) is there
WORKSPACE_BASE = 0x3000_0000_0000


def is_stream_k(kernel_type: str) -> bool:
    """Does the kernel type use the stream-K tile scheduler (whose Params need a workspace)?"""
    return "StreamKScheduler" in kernel_type or "PersistentTileSchedulerSm90StreamK" in kernel_type


HOST_FLAGS = ("-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-O1")


@dataclass(frozen=True)
class HostLaunch:
    """What CUTLASS's host code computed for one problem: the launch, the Params fields (offset, length,
    name) with their bytes, each tensor map's box (offset, bytes, name), and the SharedStorage members
    (offset in the dynamic shared memory, bytes, path) that name the protocol's barriers and buffers."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    dynamic_smem: int
    fields: tuple[tuple[int, int, str], ...]
    boxes: tuple[tuple[int, int, str], ...]
    image: bytes
    members: tuple[tuple[int, int, str], ...] = ()
    # a stream-K kernel's workspace: (base address, bytes); the scheduler's decomposition (split-K 1 or
    # stream-K 2, stream-K units, stream-K tiles, units per problem, splits)
    workspace: tuple[int, int] | None = None
    decomposition: tuple[int, ...] = ()

    def param_bytes(self) -> ParamBytes:
        return ParamBytes(tuple((o, self.image[o: o + n]) for o, n, _ in self.fields))


def cache_dir() -> Path:
    base = os.environ.get("SYNCVERIFY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "syncverify")
    return Path(base) / "cutlass"


def _demangle(name: str) -> str | None:
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if tool is None:
        return None
    args = [tool, "--no-recurse-limit", name] if tool.endswith("c++filt") else [tool, name]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0 and tool.endswith("c++filt"):  # an older c++filt without the option
        proc = subprocess.run([tool, name], capture_output=True, text=True, check=False)
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out and out != name else None


def kernel_type(path: str, fn: Function) -> str:
    """T of the entry `cutlass::device_kernel<T>`, as C++ source."""
    if not fn.name.startswith("_Z"):  # an unmangled (extern "C") name: no template, so no CUTLASS kernel
        raise PtxError(path, fn.line, 1, f"--cutlass-problem: the kernel is not a CUTLASS "
                       f"`cutlass::device_kernel<GemmKernel>` but `{fn.name}`")
    text = _demangle(fn.name)
    if text is None:
        raise PtxError(path, fn.line, 1, f"--cutlass-problem: cannot demangle the kernel name {fn.name[:80]}… "
                       "(c++filt, from binutils, is needed)")
    head = "void cutlass::device_kernel<"
    if not text.startswith(head):
        raise PtxError(path, fn.line, 1, "--cutlass-problem: the kernel is not a CUTLASS "
                       f"`cutlass::device_kernel<GemmKernel>` but {text[:120]}")
    depth = 0
    for j in range(len(head) - 1, len(text)):
        depth += {"<": 1, ">": -1}.get(text[j], 0)
        if depth == 0:
            return text[len(head): j].strip()
    raise PtxError(path, fn.line, 1, f"--cutlass-problem: unbalanced template arguments in {text[:120]}…")


def build(path: str, fn: Function, includes: list[str], say=None) -> Path:  # type: ignore[no-untyped-def]
    """The host program for the kernel's type, built once (nvcc, minutes) and kept under a key of its
    source, the kernel type, the include directories' CUTLASS version and nvcc's version."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise PtxError(path, fn.line, 1, "--cutlass-problem builds CUTLASS's host code with nvcc, which was not "
                       "found on PATH (nor from the nvidia-cuda-nvcc package)")
    incs = [*includes]
    auto = cutlass_include()
    if auto is not None and auto not in incs:
        incs.append(auto)
    if not any(os.path.isfile(os.path.join(i, "cutlass", "cutlass.h")) for i in incs):
        raise PtxError(path, fn.line, 1, "--cutlass-problem needs CUTLASS's headers: `pip install nvidia-cutlass` "
                       "or give -I DIR (the directory holding cutlass/ and cute/)")
    ty = kernel_type(path, fn)
    name = STREAM_K_TEMPLATE if is_stream_k(ty) else TEMPLATE
    template = resources.files("syncverify.data").joinpath(name).read_text()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256("\0".join([template, ty, version, *HOST_FLAGS, *incs,
                                    *(_version_of(i) for i in incs)]).encode()).hexdigest()[:20]
    out = cache_dir() / key
    exe = out / "params"
    if exe.is_file():
        return exe
    out.mkdir(parents=True, exist_ok=True)
    src = out / "params.cu"
    src.write_text(f"// {fn.name}\n#define SV_GEMM_KERNEL {ty}\n{template}")
    tmp = out / f"params.{os.getpid()}.tmp"
    cmd = ["nice", "-n", "5", nvcc, *HOST_FLAGS, *[f"-I{i}" for i in incs], "-o", str(tmp), str(src)]
    if shutil.which("nice") is None:
        cmd = cmd[3:]
    if say is not None:
        say(f"building CUTLASS's host code for this kernel (once; nvcc takes minutes; kept in {out})")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:400])
        raise PtxError(path, fn.line, 1, f"--cutlass-problem: CUTLASS's host code for this kernel did not compile: "
                       f"{first}", note=" ".join(cmd))
    tmp.replace(exe)
    return exe


def _version_of(include: str) -> str:
    """CUTLASS's version.h, so that another CUTLASS gets another build."""
    try:
        return Path(include, "cutlass", "version.h").read_text()
    except OSError:
        return ""


def run(path: str, fn: Function, exe: Path, problem: tuple[int, int, int, int], sm_count: int,
        beta: float, splits: int | None = None) -> HostLaunch:
    """Run the host program for one problem (M, N, K, L) on `sm_count` SMs; `splits` (a stream-K kernel's
    program only): 1 forces stream-K, N > 1 split-K into N."""
    with tempfile.TemporaryDirectory(prefix="syncverify-cutlass-") as tmp:
        blob = os.path.join(tmp, "params.bin")
        extra = [] if splits is None else [hex(WORKSPACE_BASE), str(splits)]
        proc = subprocess.run([str(exe), *map(str, problem), str(sm_count), repr(float(beta)), blob, *extra],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            why = (proc.stderr.strip() or f"exit {proc.returncode}").removeprefix("error: ")
            raise PtxError(path, fn.line, 1, f"--cutlass-problem: CUTLASS's host code refused the problem: {why}")
        image = Path(blob).read_bytes()
    return parse_output(path, fn, proc.stdout, image)


def parse_output(path: str, fn: Function, stdout: str, image: bytes) -> HostLaunch:
    """What the host program printed for one problem, with the Params image it wrote (kept beside a test
    kernel, `tests/data/ptx/*_host_*.txt` and `.bin`, so that its checks need no nvcc)."""
    launch: list[int] = []
    workspace: tuple[int, int] | None = None
    decomposition: tuple[int, ...] = ()
    fields: list[tuple[int, int, str]] = []
    boxes: list[tuple[int, int, str]] = []
    members: list[tuple[int, int, str]] = []
    for line in stdout.splitlines():
        word, *rest = line.split()
        if word == "launch":
            launch = [int(x) for x in rest]
        elif word == "field":
            fields.append((int(rest[0]), int(rest[1]), rest[2]))
        elif word == "box":
            boxes.append((int(rest[0]), int(rest[1]), rest[2]))
        elif word == "member":
            members.append((int(rest[0]), int(rest[1]), rest[2]))
        elif word == "workspace":
            workspace = (int(rest[0]), int(rest[1]))
        elif word == "decomposition":
            decomposition = tuple(int(x) for x in rest)
    if len(launch) != 10:
        raise PtxError(path, fn.line, 1, f"--cutlass-problem: the host program printed no launch: {stdout[:200]}")
    return HostLaunch(grid=(launch[0], launch[1], launch[2]), block=(launch[3], launch[4], launch[5]),
                      cluster=(launch[6], launch[7], launch[8]), dynamic_smem=launch[9], fields=tuple(fields),
                      boxes=tuple(boxes), image=image, members=tuple(members), workspace=workspace,
                      decomposition=decomposition)


def host_launch(path: str, fn: Function, includes: list[str], problem: tuple[int, int, int, int],
                sm_count: int | None, beta: float = 0.0, quiet: bool = False, splits: int | None = None) -> HostLaunch:
    """Build (once) and run CUTLASS's host code for the kernel at `problem`. `sm_count` None: as many SMs as
    the kernel's cluster has CTAs, so that the whole problem passes through the one cluster extraction
    follows (each CTA takes every tile the persistent scheduler gives it)."""
    say = None if quiet else (lambda s: print(f"syncverify: {s}", file=sys.stderr, flush=True))
    exe = build(path, fn, includes, say)
    if is_stream_k(kernel_type(path, fn)):
        # two SMs by default: at a small problem two CTAs share an output tile (stream-K's fixup)
        return run(path, fn, exe, problem, sm_count or 2, beta, splits or 1)
    if sm_count is None:
        probe = run(path, fn, exe, problem, 1 << 10, beta)
        sm_count = probe.cluster[0] * probe.cluster[1] * probe.cluster[2]
    return run(path, fn, exe, problem, sm_count, beta)
