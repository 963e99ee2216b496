"""`syncverify extract KERNEL.ptx|KERNEL.cu …`, and `check` on a kernel: extract, then check.

Findings on an extracted protocol are reported at the CUDA source line of the
instruction behind the statement (from `.loc`), with the PTX line and the line
of the extracted `.sync` as related locations.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import replace

from .. import budget as budgets
from ..diagnostics import InputError
from ..ptx.extract import Extracted, extract, load_module
from ..ptx.frames import patterns_of
from ..ptx.launch import ParamBytes
from ..ptx.parse import Module, PtxError
from ..ptx.undefined import Undefined, finding_result
from ..result import CheckResult
from . import cutlass as cli_cutlass
from .kernel import _at_source, _same_site_sv204, at_cuda_line, demangled, launch_of, not_extracted, sites_of, ticking
from .symbolic import add_symbolic_arg, check_symbolic, cmd_extract_symbolic

KERNEL_SUFFIXES = (".ptx", ".cu")


def is_kernel(path: str) -> bool:
    return path.endswith(KERNEL_SUFFIXES)


def _dims(text: str) -> tuple[int, int, int]:
    parts = [p for p in re.split(r"[x,]", text) if p.strip()]
    try:
        vals = [int(p, 0) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N, NxM or NxMxK") from None
    if not 1 <= len(vals) <= 3 or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: expected N, NxM or NxMxK of positive numbers")
    return (vals[0], *[*vals[1:], 1, 1][:2])  # type: ignore[return-value]


_FIELD = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<off>\w+):(?P<len>\w+)\]$")


def _param(text: str) -> tuple[str, int | bytes | ParamBytes]:
    """NAME=VALUE (an integer), NAME=@FILE (the parameter's bytes, e.g. a kernel Params struct), or
    NAME[OFFSET:LENGTH]=VALUE|@FILE: LENGTH bytes at OFFSET of a by-value struct, from the integer or
    from the same bytes of FILE; the struct's other bytes stay unknown unless bound too."""
    name, eq, raw = text.partition("=")
    name, raw = name.strip(), raw.strip()
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"--param {text}: expected NAME=VALUE, NAME=@FILE or NAME[OFFSET:LENGTH]=…")
    field = _FIELD.match(name)
    if field is None and "[" in name:
        raise argparse.ArgumentTypeError(f"--param {text}: expected NAME[OFFSET:LENGTH], e.g. 0[24:4]")
    if raw.startswith("@"):
        try:
            with open(raw[1:], "rb") as fh:
                value: int | bytes = fh.read()
        except OSError as err:
            raise argparse.ArgumentTypeError(f"--param {text}: cannot read {raw[1:]}: {err.strerror}") from None
    else:
        try:
            value = int(raw, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--param {text}: {raw!r} is not an integer") from None
    if field is None:
        return name, value
    try:
        off, length = int(field["off"], 0), int(field["len"], 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--param {text}: OFFSET and LENGTH must be integers") from None
    if off < 0 or length <= 0:
        raise argparse.ArgumentTypeError(f"--param {text}: OFFSET must be >= 0 and LENGTH > 0")
    if isinstance(value, bytes):
        if off + length > len(value):
            raise argparse.ArgumentTypeError(f"--param {text}: {raw[1:]} has {len(value)} bytes, fewer than "
                                             f"{off + length}")
        part = value[off: off + length]
    else:
        if not -(1 << (8 * length - 1)) <= value < (1 << (8 * length)):
            raise argparse.ArgumentTypeError(f"--param {text}: {value} does not fit in {length} bytes")
        part = (value % (1 << (8 * length))).to_bytes(length, "little")
    return field["name"].strip(), ParamBytes(((off, part),))


_TMAP = re.compile(r"^(?P<name>[^\[\]=]+)(?:\[(?P<off>\w+)\])?$")


def _tensor_bytes(text: str) -> tuple[tuple[str, int], int]:
    """PARAM[OFFSET]=BYTES: a tensor copy through the tensor map at byte OFFSET of the by-value parameter
    PARAM (by PTX name or position; OFFSET 0 when left out) moves BYTES bytes, its box."""
    key, eq, raw = text.partition("=")
    m = _TMAP.match(key.strip())
    if not eq or m is None:
        raise argparse.ArgumentTypeError(f"--tensor-bytes {text}: expected PARAM[OFFSET]=BYTES, e.g. 0[128]=16384")
    try:
        off, n = int(m["off"] or "0", 0), int(raw.strip(), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tensor-bytes {text}: OFFSET and BYTES must be integers") from None
    if off < 0 or n <= 0:
        raise argparse.ArgumentTypeError(f"--tensor-bytes {text}: OFFSET must be >= 0 and BYTES > 0")
    return (m["name"].strip(), off), n


def add_launch_args(p: argparse.ArgumentParser, required: bool) -> None:
    g = p.add_argument_group("kernel inputs (.ptx or .cu)")
    g.add_argument("--kernel", help="the kernel (.entry) to extract; needed when the module has several")
    g.add_argument("--block", type=_dims, required=required, metavar="X[xYxZ]", help="threads per CTA")
    g.add_argument("--cluster", type=_dims, default=(1, 1, 1), metavar="X[xYxZ]", help="CTAs per cluster")
    g.add_argument("--grid", type=_dims, metavar="X[xYxZ]", help="CTAs in the grid (for %%nctaid, %%clusterid)")
    g.add_argument("--cluster-index", type=int, default=0, metavar="N", help="which cluster of the grid to extract")
    g.add_argument("--whole-grid", action="store_true",
                   help="extract every CTA of the grid (--grid, one-CTA clusters, at most 16 CTAs) as one protocol: "
                        "CTAs that meet through global memory (flags, spins, fences, shared workspace)")
    g.add_argument("--grid-launch", choices=("cooperative", "persistent", "ordered"), metavar="KIND",
                   help="with --whole-grid, what the launch promises about co-residency: cooperative, "
                        "persistent (no more CTAs than the GPU holds at once) or ordered (CTAs start in order)")
    g.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                   help="bind a kernel parameter (by PTX name or position) to an integer or to @FILE bytes; "
                        "NAME[OFFSET:LENGTH]=VALUE|@FILE binds bytes of a by-value struct")
    g.add_argument("--tensor-bytes", type=_tensor_bytes, action="append", default=[], metavar="PARAM[OFF]=N",
                   help="a tensor copy (cp.async.bulk.tensor) through the tensor map at byte OFF of by-value "
                        "parameter PARAM moves N bytes: the map's box, as the host encoded it")
    g.add_argument("--zero-global", action="append", default=[], metavar="PARAM",
                   help="the buffer this pointer parameter points to is zero at launch and written only "
                        "through it (a control block the host clears)")
    g.add_argument("--dynamic-smem", type=int, metavar="BYTES", help="dynamic shared memory of the launch")
    g.add_argument("-I", dest="includes", action="append", default=[], metavar="DIR",
                   help="include directory for compiling a .cu")
    g.add_argument("--nvcc-flag", dest="nvcc_flags", action="append", default=[], metavar="FLAG",
                   help="pass FLAG to nvcc when compiling a .cu (repeat it: --nvcc-flag=-DSTAGES=4 "
                        "--nvcc-flag=-arch=sm_100a); after the defaults, so a later -arch wins")
    g.add_argument("--library", dest="library", action="append", default=[], metavar="PATTERN",
                   help="source paths containing PATTERN are library code: a finding is placed at the first "
                        "frame of its inline chain outside them (CUTLASS, CuTe, CCCL, Triton and the CUDA "
                        "headers are libraries already)")
    add_symbolic_arg(g)
    cli_cutlass.add_args(g)


def add_subcommand(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("extract", help="extract the synchronization protocol of a compiled kernel as .sync")
    p.add_argument("input", metavar="KERNEL", help="a .ptx file, or a .cu file compiled with nvcc")
    p.add_argument("-o", dest="output", metavar="FILE", help="write the protocol here (default: stdout)")
    p.add_argument("--expect", dest="expect_header", metavar="VERDICT",
                   help="write `// expect: VERDICT` as the protocol's header")
    add_launch_args(p, required=False)  # --block, unless --cutlass-problem computes it


def extract_kernel(path: str, args: argparse.Namespace, expect: str | None = None,
                   mod: Module | None = None) -> Extracted:
    mod = mod or load_module(path, args.includes, args.nvcc_flags)
    return extract(mod, launch_of(args), args.kernel, expect, source_names=True)


def _with_cutlass(path: str, args: argparse.Namespace) -> tuple[Module | None, argparse.Namespace]:
    """--cutlass-problem / --cutlass-fmha: the module and the launch CUTLASS's host code computed (cli/cutlass.py)."""
    if getattr(args, "cutlass_problem", None) is None and getattr(args, "cutlass_fmha", None) is None:
        return None, args
    return cli_cutlass.resolve(path, args)


def cmd_extract(args: argparse.Namespace) -> int:
    if args.symbolic is not None:
        return cmd_extract_symbolic(args)
    if getattr(args, "whole_periods", False):
        print("syncverify: error: --whole-periods writes a loop kept by --symbolic; give --symbolic too",
              file=sys.stderr)
        return 2
    try:
        mod, args = _with_cutlass(args.input, args)
        if args.block is None:
            raise PtxError(args.input, 1, 1, "extracting a kernel needs its launch: give --block (and --cluster, "
                           "--param), or --cutlass-problem MxNxK for a CUTLASS GEMM")
        ex = extract_kernel(args.input, args, args.expect_header, mod)
    except Undefined as ub:  # no protocol describes the kernel: the finding, and no protocol
        print(ub.render(), file=sys.stderr)
        return 1
    except PtxError as err:
        print(at_cuda_line(err, args.input).render(), file=sys.stderr)
        return 2
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(ex.text)
    else:
        sys.stdout.write(ex.text)
    return 0


AFTER_FIRST_ERROR = 10.0  # a search goes on this long after its first error (--after-first-error)


def after_first_error(args: argparse.Namespace) -> float | None:
    """How long a check's search goes on after its first error (None: to its end), for a spec as for a
    kernel. By default AFTER_FIRST_ERROR seconds: the violation is certain once found, and a protocol
    of a real kernel can have millions of states past it (the CuTe-DSL 2-CTA blockscaled GEMM's seed:
    87,655 states in 86 s with no end in sight). 0 says to the end, and so does --search-jobs N > 1
    unless a time is given (which the parallel search then refuses: a stop by the clock cannot be
    replayed on several cores)."""
    after = getattr(args, "after_first_error", None)
    if after is None and getattr(args, "search_jobs", 1) > 1:
        after = 0
    return AFTER_FIRST_ERROR if after is None else (after or None)


def check_kernel(path: str, args: argparse.Namespace, options) -> CheckResult | PtxError:  # type: ignore[no-untyped-def]
    """Extract and check one kernel; a refusal is returned (the caller prints it and exits 2).

    Findings reach `options.on_finding` (the streamed output) already placed in the kernel's source, so
    the first one is printed when the search finds it. Unless --after-first-error says otherwise, the
    search stops AFTER_FIRST_ERROR seconds after its first error: a kernel's state space can be large,
    and the answer (a violation, certain once found) should not wait for the whole budget."""
    from ..check import check_protocol
    from ..lang import load

    try:
        mod, args = _with_cutlass(path, args)
    except PtxError as err:
        return err
    if args.block is None:
        return PtxError(path, 1, 1, "checking a kernel needs its launch: give --block (and --cluster, --param), "
                        "or --cutlass-problem MxNxK for a CUTLASS GEMM")
    library = patterns_of(getattr(args, "library", ()))
    if getattr(args, "whole_periods", False) and getattr(args, "symbolic", None) is None:
        return PtxError(path, 1, 1, "--whole-periods writes a loop kept by --symbolic; give --symbolic too")
    if getattr(args, "symbolic", None) is not None:
        stop = _stop_at_first if getattr(args, "fail_fast", False) else None
        return check_symbolic(path, args, replace(options, on_finding=stop))
    start = time.monotonic()
    try:
        with budgets.clock(options.timeout), ticking(path, options):  # the executor and the loop roller look at it
            ex = extract_kernel(path, args, mod=mod)
    except Undefined as ub:
        return finding_result(path, ub, args.kernel)
    except PtxError as err:
        return at_cuda_line(err, path)
    except budgets.OutOfBudget as out:
        return not_extracted(path, args, out)
    # the check gets what extraction left of --timeout
    told = options.on_finding

    def placed(d):  # type: ignore[no-untyped-def]
        return False if told is None or _same_site_sv204(d, ex) else told(_at_source(d, ex, library=library))

    options = replace(options, timeout=max(options.timeout - (time.monotonic() - start), 1e-3),
                      on_finding=placed if told is not None else None,
                      after_first_error=after_first_error(args),
                      sites=sites_of(ex, library))
    sync_name = os.path.splitext(path)[0] + ".extracted.sync"
    try:
        protocol = load(ex.text, options.defines, path=sync_name)
    except InputError as err:  # the writer produced something the language refuses: say so plainly
        d = err.diagnostics[0]
        return PtxError(path, 1, 1, f"the extracted protocol is not valid .sync: {d.message} "
                        f"(line {d.span.line if d.span else '?'})")
    result = check_protocol(protocol, options)
    diags = tuple(_at_source(d, ex, library=library) for d in result.diagnostics if not _same_site_sv204(d, ex))
    # the protocol has its loops unrolled at this launch: that launch is what the verdict covers
    la = launch_of(args)
    bound = "launch block " + "x".join(map(str, la.block)) + ", cluster " + "x".join(map(str, la.cluster))
    if la.params:
        bound += ", " + ", ".join(f"{k}={_shown(v)}" for k, v in la.params.items())
    if la.tensor_bytes:
        bound += ", tensor maps " + ", ".join(f"{p}[{o}]={n}" for (p, o), n in la.tensor_bytes.items())
    return replace(result, path=path, diagnostics=diags, bound=bound, protocol=demangled(result.protocol or ""))


def _stop_at_first(_finding: object) -> bool:
    """`--fail-fast` for the protocols of a --symbolic check: each search stops at its first error (a
    module-level function, so that the options reach the worker processes of --jobs)."""
    return True


def _shown(v: int | bytes | ParamBytes) -> str:
    if isinstance(v, int):
        return str(v)
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return v.show()


def print_refusal(err: PtxError) -> None:
    print(err.render(), file=sys.stderr)


HANDLERS = {"extract": cmd_extract}
