"""`--symbolic NAME[OFF:LEN]>=LO` for `extract` and `check` on a kernel: every trip count of its loop.

`extract` writes one protocol per residue of the trip count (symextract.py);
`check` runs the z3 engine's all-iterations lift on each of them and the
explicit engine on the kernel extracted concretely at each small trip count,
and is safe only when every one of them is. A violation is reported with the
concrete N that gives it (found by Z3 from the trip count); one for which no
N exists (a residue's protocol covers trip counts the kernel may not have)
makes the answer inconclusive, never a finding.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace

from .diagnostics import InputError
from .ptx.extract import Extracted, load_module
from .ptx.parse import PtxError
from .ptx.symextract import SymbolicKernel, extract_symbolic
from .ptx.symvalues import SymParam
from .result import CheckResult, Stats, Verdict

_SYM = re.compile(r"^(?P<name>[^\[\]<>=]+)(?:\[(?P<off>\w+):(?P<len>\w+)\])?\s*>=\s*(?P<lo>-?\w+)$")


def parse_symbolic(text: str) -> SymParam:
    """NAME>=LO (a scalar parameter) or NAME[OFFSET:LENGTH]>=LO (bytes of a by-value struct)."""
    m = _SYM.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"--symbolic {text}: expected NAME>=LO or NAME[OFFSET:LENGTH]>=LO, "
                                         "e.g. 2>=1 or 0[12:4]>=64")
    try:
        off = int(m["off"], 0) if m["off"] else 0
        length = int(m["len"], 0) if m["len"] else None
        lo = int(m["lo"], 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--symbolic {text}: OFFSET, LENGTH and LO must be integers") from None
    if off < 0 or (length is not None and length not in (1, 2, 4, 8)) or not -(1 << 30) <= lo <= 1 << 30:
        raise argparse.ArgumentTypeError(f"--symbolic {text}: OFFSET >= 0, LENGTH 1, 2, 4 or 8, |LO| <= 2^30")
    return SymParam(m["name"].strip(), off, length, lo)


def add_symbolic_arg(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--symbolic", type=parse_symbolic, metavar="NAME[OFF:LEN]>=LO",
                   help="keep this parameter symbolic (N >= LO, N <= 2^30) and its loop as a loop: the protocols "
                        "cover every N (one per residue of the trip count)")


def symbolic_kernel(path: str, args: argparse.Namespace) -> SymbolicKernel:
    from .cli_extract import launch_of

    mod = load_module(path, args.includes)
    return extract_symbolic(mod, launch_of(args), args.kernel, args.symbolic)


def residue_path(out: str, kernel: str, tag: str) -> str:
    """-o DIR: DIR/KERNEL_TAG.sync; -o FILE.sync: FILE_TAG.sync (TAG: rR for a residue, ktK for a small
    trip count)."""
    if os.path.isdir(out) or out.endswith(os.sep):
        return os.path.join(out, f"{kernel}_{tag}.sync")
    stem, ext = os.path.splitext(out)
    return f"{stem}_{tag}{ext or '.sync'}"


def cmd_extract_symbolic(args: argparse.Namespace) -> int:
    try:
        sk = symbolic_kernel(args.input, args)
    except PtxError as err:
        print(err.render(), file=sys.stderr)
        return 2
    for res in sk.residues:
        text = res.extracted.text
        if args.expect_header:
            text = f"// expect: {args.expect_header}\n{text}"
        if args.output:
            with open(residue_path(args.output, res.extracted.kernel, f"r{res.r}"), "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
    for sm in sk.small:
        text = sm.extracted.text
        if args.output:
            with open(residue_path(args.output, sm.extracted.kernel, f"kt{sm.kt}"), "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
    small = ", ".join(f"KT={sm.kt} (e.g. N={sm.n})" for sm in sk.small)
    print(f"{len(sk.residues)} protocol(s) for {sk.bound()}" + (f"; and one for each of {small}" if small else "")
          + (f"; no N gives KT in {list(sk.absent)}" if sk.absent else ""), file=sys.stderr)
    return 0


def check_symbolic(path: str, args: argparse.Namespace, options) -> CheckResult | PtxError:  # type: ignore[no-untyped-def]
    """Every residue's protocol with the z3 engine, every small trip count with the explicit engine."""
    from .check import check_protocol
    from .cli_extract import _at_source, _same_site_sv204
    from .lang import load

    try:
        sk = symbolic_kernel(path, args)
    except PtxError as err:
        return err
    sync_name = os.path.splitext(path)[0] + ".extracted.sync"
    cases: list[tuple[str, Extracted, object, int | None]] = []  # (what, protocol, options, KT base)
    for res in sk.residues:
        eng = "z3" if sk.trip is not None else options.engine
        cases.append((f"residue {res.r}", res.extracted, replace(options, engine=eng), res.r + sk.k0))
    for sm in sk.small:
        cases.append((f"{sk.sym.show()}={sm.n} (KT={sm.kt})", sm.extracted, replace(options, engine="explicit"),
                      None))
    states, secs = 0, 0.0
    inconclusive: list[str] = []
    for what, ex, opts, base in cases:
        try:
            protocol = load(ex.text, opts.defines, path=sync_name)  # type: ignore[attr-defined]
        except InputError as err:
            d = err.diagnostics[0]
            return PtxError(path, 1, 1, f"the extracted protocol ({what}) is not valid .sync: {d.message}")
        got = check_protocol(protocol, opts)  # type: ignore[arg-type]
        states += got.stats.states
        secs += got.stats.seconds
        diags = tuple(_at_source(d, ex, sync_name) for d in got.diagnostics if not _same_site_sv204(d, ex))
        if got.verdict is Verdict.VIOLATION:
            bound = _violation_bound(sk, what, got.bound, base)
            if bound is None:
                inconclusive.append(f"{what}: a finding at {got.bound} that no N >= {sk.sym.lo} gives")
                continue
            return replace(got, path=path, diagnostics=diags, bound=bound)
        if got.verdict is Verdict.ERROR:
            return replace(got, path=path, diagnostics=diags, bound=what)
        if got.verdict is Verdict.INCONCLUSIVE:
            inconclusive.append(f"{what}: {got.coverage or got.bound}")
        elif got.verdict is Verdict.SAFE and base is not None and "all-iterations" not in got.bound \
                and sk.trip is not None:
            inconclusive.append(f"{what}: only {got.bound}")
    stats = Stats(states=states, seconds=secs)
    if inconclusive:
        return CheckResult(path=path, protocol=sk.residues[0].extracted.kernel, verdict=Verdict.INCONCLUSIVE,
                           bound="", stats=stats, coverage="; ".join(inconclusive))
    return CheckResult(path=path, protocol=sk.residues[0].extracted.kernel, verdict=Verdict.SAFE,
                       bound=sk.bound(), stats=stats)


def _violation_bound(sk: SymbolicKernel, what: str, bound: str, base: int | None) -> str | None:
    """The concrete N of a finding: for a residue's protocol, from the Q of the engine's bound."""
    if base is None:
        return what
    m = re.search(r"\bQ=(\d+)", bound)
    if m is None:
        return None
    kt = base + sk.period * int(m.group(1))
    n = sk.n_for(kt)
    return None if n is None else f"{sk.sym.show()}={n} (KT={kt}, {what} at Q={m.group(1)})"
