"""The launch, Params fields and tensor-map boxes of CUTLASS kernels other than the sm90 GEMMs -- the sm100
GEMMs (1-SM and 2-SM warp-specialized, `GemmUniversal` over an `MainloopSm100...` collective) and CUTLASS
example 88's Hopper FMHA forward kernel -- from their own host code, as ptx/cutlass_host.py does for the sm90
GEMMs.

Which host program serves a kernel is decided by the type its PTX entry names (`cutlass::device_kernel<T>`,
demangled): every family's Params has other members and its host code other entry points, so each has its
program (syncverify/data/cutlass_sm100_params.cu, syncverify/data/cutlass_fmha_params.cu), built once by
nvcc for the kernel's type under a content-hash key of the cache directory and run on the CPU. A kernel
that no family here recognizes is left to the sm90 program (None from `host_launch_of`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .cutlass_host import HostLaunch, cache_dir, cutlass_include, kernel_type
from .extract import find_nvcc
from .parse import Function, PtxError


@dataclass(frozen=True)
class Family:
    """One kind of CUTLASS kernel with a host program of its own: the program's template (in
    syncverify.data), the macro that names the kernel type in it, nvcc's flags for it, the CUTLASS example
    directory whose headers the kernel is built from (if any), and the flag that gives its problem."""

    name: str
    template: str
    macro: str
    flags: tuple[str, ...]
    example: str | None
    flag: str


SM100_GEMM = Family("CUTLASS sm100 GEMM", "cutlass_sm100_params.cu", "SV_GEMM_KERNEL",
                    ("-std=c++17", "-arch=sm_100a", "--expt-relaxed-constexpr", "-O1"), None, "--cutlass-problem")
FMHA = Family("CUTLASS example 88 Hopper FMHA", "cutlass_fmha_params.cu", "SV_FMHA_KERNEL",
              ("-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-O1"), "88_hopper_fmha", "--cutlass-fmha")
FMHA_HEADER = os.path.join("kernel", "fmha_kernel_builder.hpp")


def family_of(ty: str) -> Family | None:
    """The family of the kernel type `ty` (C++ source), None for the sm90 GEMMs' program. An sm100 GEMM is
    a `GemmUniversal` whose mainloop's dispatch policy is one of the `MainloopSm100...` policies
    (dispatch_policy.hpp), which select gemm/kernel/sm100_gemm_*.hpp."""
    if ty.startswith("cutlass::fmha::kernel::"):
        return FMHA
    if ty.startswith("cutlass::gemm::kernel::GemmUniversal<") and "cutlass::gemm::MainloopSm100" in ty:
        return SM100_GEMM
    return None


def example_include(example: str) -> str | None:
    """A CUTLASS example's directory from the `nvidia-cutlass` pip package (its headers are included relative
    to it: `collective/...`, `kernel/...`)."""
    inc = cutlass_include()
    if inc is None:
        return None
    path = Path(inc).parent / "examples" / example
    return str(path) if path.is_dir() else None


def with_example_includes(args: argparse.Namespace, includes: list[str]) -> list[str]:
    """The include directories with example 88's when `--cutlass-fmha` is given (a `.cu` of the kernel
    includes its headers as the example does, relative to its directory), unless an -I already holds them."""
    if getattr(args, "cutlass_fmha", None) is None:
        return includes
    if any(os.path.isfile(os.path.join(i, FMHA_HEADER)) for i in includes):
        return includes
    auto = example_include("88_hopper_fmha")
    return includes if auto is None else [*includes, auto]


def _version_of(include: str) -> str:
    try:
        return Path(include, "cutlass", "version.h").read_text()
    except OSError:
        return ""


def build(path: str, fn: Function, ty: str, fam: Family, includes: list[str],
          say: Callable[[str], None] | None) -> Path:
    """The family's host program for the kernel type, built once (nvcc, minutes) and kept under a key of
    its source, the type, the include directories with their CUTLASS version, and nvcc's version."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise PtxError(path, fn.line, 1, f"{fam.flag} builds CUTLASS's host code with nvcc, which was not found on "
                       "PATH (nor from the nvidia-cuda-nvcc package)")
    incs = [*includes]
    auto = cutlass_include()
    if auto is not None and auto not in incs:
        incs.append(auto)
    if not any(os.path.isfile(os.path.join(i, "cutlass", "cutlass.h")) for i in incs):
        raise PtxError(path, fn.line, 1, f"{fam.flag} needs CUTLASS's headers: `pip install nvidia-cutlass` or "
                       "give -I DIR (the directory holding cutlass/ and cute/)")
    if fam.example is not None and not any(os.path.isfile(os.path.join(i, FMHA_HEADER)) for i in incs):
        ex = example_include(fam.example)
        if ex is None:
            raise PtxError(path, fn.line, 1, f"{fam.flag} needs the headers of CUTLASS's examples/{fam.example}: "
                           f"give -I DIR (the directory holding {FMHA_HEADER})")
        incs.append(ex)
    template = resources.files("syncverify.data").joinpath(fam.template).read_text()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256("\0".join([template, ty, version, *fam.flags, *incs,
                                    *(_version_of(i) for i in incs)]).encode()).hexdigest()[:20]
    out = cache_dir() / key
    exe = out / "params"
    if exe.is_file():
        return exe
    out.mkdir(parents=True, exist_ok=True)
    src = out / "params.cu"
    src.write_text(f"// {fn.name}\n#define {fam.macro} {ty}\n{template}")
    tmp = out / f"params.{os.getpid()}.tmp"
    cmd = ["nice", "-n", "5", nvcc, *fam.flags, *[f"-I{i}" for i in incs], "-o", str(tmp), str(src)]
    if shutil.which("nice") is None:
        cmd = cmd[3:]
    if say is not None:
        say(f"building the host code of this {fam.name} (once; nvcc takes minutes; kept in {out})")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:400])
        raise PtxError(path, fn.line, 1, f"{fam.flag}: the host code of this {fam.name} did not compile: {first}",
                       note=" ".join(cmd))
    tmp.replace(exe)
    return exe


def run(path: str, fn: Function, fam: Family, exe: Path, words: list[str]) -> HostLaunch:
    """Run the host program with its arguments (the problem, the SM count, for a GEMM beta); it writes the
    Params image and prints the launch, the fields and the boxes."""
    with tempfile.TemporaryDirectory(prefix="syncverify-cutlass-") as tmp:
        blob = os.path.join(tmp, "params.bin")
        proc = subprocess.run([str(exe), *words, blob], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            why = (proc.stderr.strip() or f"exit {proc.returncode}").removeprefix("error: ")
            raise PtxError(path, fn.line, 1, f"{fam.flag}: the host code of this {fam.name} refused the problem: {why}")
        image = Path(blob).read_bytes()
    launch: list[int] = []
    fields: list[tuple[int, int, str]] = []
    boxes: list[tuple[int, int, str]] = []
    for line in proc.stdout.splitlines():
        word, *rest = line.split()
        if word == "launch":
            launch = [int(x) for x in rest]
        elif word == "field":
            fields.append((int(rest[0]), int(rest[1]), rest[2]))
        elif word == "box":
            boxes.append((int(rest[0]), int(rest[1]), rest[2]))
    if len(launch) != 10:
        raise PtxError(path, fn.line, 1, f"{fam.flag}: the host program printed no launch: {proc.stdout[:200]}")
    return HostLaunch(grid=(launch[0], launch[1], launch[2]), block=(launch[3], launch[4], launch[5]),
                      cluster=(launch[6], launch[7], launch[8]), dynamic_smem=launch[9], fields=tuple(fields),
                      boxes=tuple(boxes), image=image)


def host_launch_of(path: str, fn: Function, includes: list[str], args: argparse.Namespace) -> HostLaunch | None:
    """The launch of an sm100 GEMM (`--cutlass-problem MxNxK[xL]`) or of example 88's FMHA
    (`--cutlass-fmha B,H,Q,K,D`) from its own host code; None for a kernel of the sm90 program. A shape
    flag that does not fit the kernel's family is refused at the entry, naming the one that does.
    `--cutlass-sms` unset: as many SMs as the kernel's cluster has CTAs, so that the whole problem passes
    through the one cluster extraction follows (a persistent scheduler gives it every tile)."""
    fmha_shape = getattr(args, "cutlass_fmha", None)
    ty = kernel_type(path, fn)
    fam = family_of(ty)
    if fam is None:
        if fmha_shape is not None:
            raise PtxError(path, fn.line, 1, "--cutlass-fmha: the kernel is not CUTLASS example 88's FMHA "
                           f"(`cutlass::fmha::kernel::...`) but {ty[:120]}; a GEMM takes --cutlass-problem MxNxK")
        return None
    if fam is FMHA and fmha_shape is None:
        raise PtxError(path, fn.line, 1, "--cutlass-problem: the kernel is CUTLASS example 88's FMHA; give its "
                       "problem as --cutlass-fmha B,H,Q,K,D (batch, heads, query and key lengths, head dim)")
    if fam is SM100_GEMM and fmha_shape is not None:
        raise PtxError(path, fn.line, 1, f"--cutlass-fmha: the kernel is a {fam.name}; give --cutlass-problem MxNxK")
    quiet = getattr(args, "quiet", False)
    say = None if quiet else (lambda s: print(f"syncverify: {s}", file=sys.stderr, flush=True))
    exe = build(path, fn, ty, fam, includes, say)
    if fam is SM100_GEMM:  # params M N K L SM_COUNT BETA OUT.bin
        problem = [str(v) for v in args.cutlass_problem]
        tail = [repr(float(getattr(args, "cutlass_beta", 0.0) or 0.0))]
    else:  # params B H Q K D SM_COUNT OUT.bin
        problem, tail = [str(v) for v in fmha_shape], []
    sms = getattr(args, "cutlass_sms", None)
    if sms is None:
        probe = run(path, fn, fam, exe, [*problem, str(1 << 10), *tail])
        sms = probe.cluster[0] * probe.cluster[1] * probe.cluster[2]
    return run(path, fn, fam, exe, [*problem, str(sms), *tail])
