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
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import budget
from ..diagnostics import Diagnostic, InputError, Severity
from ..ptx.extract import Extracted, load_module
from ..ptx.parse import PtxError
from ..ptx.undefined import Undefined, finding_result
from ..result import CheckResult, Stats, Verdict
from .kernel import _at_source, _same_site_sv204, launch_of, not_extracted

if TYPE_CHECKING:  # the symbolic extraction and its values import z3: loaded when --symbolic is given
    from ..check import Options
    from ..ptx.symextract import SymbolicKernel
    from ..ptx.symvalues import SymParam

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
    from ..ptx.symvalues import SymParam

    return SymParam(m["name"].strip(), off, length, lo)


def add_symbolic_arg(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--symbolic", type=parse_symbolic, metavar="NAME[OFF:LEN]>=LO",
                   help="keep this parameter symbolic (N >= LO, N <= 2^30) and its loop as a loop: the protocols "
                        "cover every N (one per residue of the trip count)")
    g.add_argument("--whole-periods", action="store_true",
                   help="with --symbolic: write a kept loop over its whole recorded period, also where its second "
                        "half is its first with every mbarrier parity flipped (a pipeline's two phases), which by "
                        "default is written over half periods: twice as many residue protocols (docs/extract.md, "
                        "\"Half periods\")")


def symbolic_kernel(path: str, args: argparse.Namespace) -> tuple[SymbolicKernel, ...]:
    from ..ptx.symextract import extract_symbolic

    mod = load_module(path, args.includes, getattr(args, "nvcc_flags", ()))
    return extract_symbolic(mod, launch_of(args), args.kernel, args.symbolic,
                            halves=not getattr(args, "whole_periods", False))


def residue_path(out: str, kernel: str, tag: str) -> str:
    """-o DIR: DIR/KERNEL_TAG.sync; -o FILE.sync: FILE_TAG.sync (TAG: rR for a residue, ktK for a small
    trip count)."""
    if os.path.isdir(out) or out.endswith(os.sep):
        return os.path.join(out, f"{kernel}_{tag}.sync")
    stem, ext = os.path.splitext(out)
    return f"{stem}_{tag}{ext or '.sync'}"


def bound_text(fams: tuple[SymbolicKernel, ...]) -> str:
    """`all-iterations of NAME >= LO (and <= 2^30) (…)`: what covers each range of N."""
    sym = fams[0].sym
    if len(fams) == 1 and fams[0].trip is not None:
        tail = f"KT = {fams[0].trip_text}, residues 0..{fams[0].period - 1}"
    else:
        tail = "; ".join(f.part() for f in fams)
    return f"all-iterations of {sym.show()} >= {sym.lo} (and <= 2^30) ({tail})"


def _write(args: argparse.Namespace, kernel: str, tag: str, text: str) -> None:
    if args.expect_header:
        text = f"// expect: {args.expect_header}\n{text}"
    if args.output:
        with open(residue_path(args.output, kernel, tag), "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def cmd_extract_symbolic(args: argparse.Namespace) -> int:
    try:
        fams = symbolic_kernel(args.input, args)
    except Undefined as ub:
        print(ub.render(), file=sys.stderr)
        return 1
    except PtxError as err:
        print(err.render(), file=sys.stderr)
        return 2
    for fam in fams:
        pre = "" if len(fams) == 1 else f"n{fam.sym.lo}_"
        for res in fam.residues:
            _write(args, res.extracted.kernel, f"{pre}r{res.r}", res.extracted.text)
        for sm in fam.small:
            _write(args, sm.extracted.kernel, f"{pre}kt{sm.kt}", sm.extracted.text)
    count = sum(len(f.residues) + len(f.small) for f in fams)
    print(f"{count} protocol(s) for {bound_text(fams)}", file=sys.stderr)
    return 0


def _cases(fam: SymbolicKernel, options) -> list[tuple[str, Extracted, object, int | None]]:  # type: ignore[no-untyped-def]
    """(what, protocol, options, KT of its Q = 0 or None) of one range of N."""
    if fam.trip is None:
        return [(f"N in {fam.range_text()}", fam.residues[0].extracted, options, None)]
    out: list[tuple[str, Extracted, object, int | None]] = [
        (f"residue {res.r}", res.extracted, replace(options, engine="z3"), res.r + fam.k0) for res in fam.residues]
    out += [(f"KT={sm.kt}", sm.extracted, replace(options, engine="explicit"), None) for sm in fam.small]
    return out


def check_symbolic(path: str, args: argparse.Namespace, options) -> CheckResult | PtxError:  # type: ignore[no-untyped-def]
    """Every residue's protocol with the z3 engine, every small trip count with the explicit engine.

    ``--timeout`` is the wall clock of the whole command, extraction included (a symbolic extraction that
    outlives it is inconclusive, "not extracted"): each protocol is checked
    with what is left of it (each protocol alone had the whole budget once, and a check of five of them
    ran five times as long as asked). A protocol reached with none left is not checked, and the answer is
    inconclusive. The deterministic budgets (states, rlimit) stay per protocol.

    With ``--jobs N`` the protocols are checked N at a time in worker processes, each with what is left
    of the same wall clock when it begins; the results are read in the same order, so the answer, the
    finding reported and its N are those of one job (a finding ends the checks still running).
    Each protocol's search is independent, so this is what several cores buy a check of every K."""
    from .. import runs

    start = time.monotonic()
    jobs = getattr(args, "jobs", 1)  # the family's protocols checked at once (`check --jobs`)
    try:
        with budget.clock(options.timeout):  # the symbolic executor and the loop roller look at it
            fams = symbolic_kernel(path, args)
    except Undefined as ub:
        return finding_result(path, ub, args.kernel)
    except PtxError as err:
        return err
    except budget.OutOfBudget as out:
        return not_extracted(path, args, out)
    sync_name = os.path.splitext(path)[0] + ".extracted.sync"
    states, secs = 0, 0.0
    inconclusive: list[str] = []
    # The warnings of every protocol (a kernel checked concretely reports its warnings beside a safe answer;
    # so does a check of every N), once per code, place and message, with the first protocol that gave it.
    kept: dict[tuple[object, ...], Diagnostic] = {}
    cases = [(fam, *case) for fam in fams for case in _cases(fam, options)]
    work = [(ex.text, replace(opts, progress=None) if jobs > 1 else opts, sync_name, start + options.timeout)
            for _fam, _what, ex, opts, _base in cases]
    checked = runs.in_order(_check_case, work, jobs)
    try:
        for (fam, what, ex, _opts, base), got in zip(cases, checked, strict=True):
            if got is None:
                inconclusive.append(f"{what}: not checked, the time budget of {options.timeout:g} s was spent")
                continue
            if isinstance(got, str):
                return PtxError(path, 1, 1, f"the extracted protocol ({what}) is not valid .sync: {got}")
            states += got.stats.states
            secs += got.stats.seconds
            diags = tuple(_at_source(d, ex, sync_name) for d in got.diagnostics if not _same_site_sv204(d, ex))
            for d in diags:  # warnings and notes: kept for the family's answer, each once
                if d.severity is not Severity.ERROR:
                    notes = tuple(_at_kernel_trip_count(n, fam, what, base) for n in d.notes)
                    kept.setdefault((d.code, d.span, d.message), replace(d, notes=(*notes, f"found in {what}")))
            if got.verdict is Verdict.VIOLATION:
                bound = _violation_bound(fam, what, got.bound, base)
                if bound is None:
                    inconclusive.append(f"{what}: a finding at {got.bound} that no N in {fam.range_text()} gives")
                    continue
                return replace(got, path=path, diagnostics=diags, bound=bound)
            if got.verdict is Verdict.ERROR:
                return replace(got, path=path, diagnostics=diags, bound=what)
            if got.verdict is Verdict.INCONCLUSIVE:
                inconclusive.append(f"{what}: {got.coverage or got.bound}")
            elif base is not None and not _every_q(got.bound):
                inconclusive.append(f"{what}: only {got.bound}")
    finally:
        checked.close()  # (a finding returned early: the checks still running are stopped)
    stats = Stats(states=states, seconds=secs)
    kernel = fams[0].residues[0].extracted.kernel
    if inconclusive:
        return CheckResult(path=path, protocol=kernel, verdict=Verdict.INCONCLUSIVE, bound="", stats=stats,
                           coverage="; ".join(inconclusive), diagnostics=tuple(kept.values()))
    return CheckResult(path=path, protocol=kernel, verdict=Verdict.SAFE, bound=bound_text(fams), stats=stats,
                       diagnostics=tuple(kept.values()))


def _check_case(work: tuple[str, Options, str, float]) -> CheckResult | str | None:
    """One protocol of the family: its result, the parse error's message, or None when the command's time
    budget (``deadline``, on the monotonic clock every process shares) was spent before it began."""
    from ..check import check_protocol
    from ..lang import load

    text, opts, sync_name, deadline = work
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    try:
        protocol = load(text, opts.defines, path=sync_name)
    except InputError as err:
        return err.diagnostics[0].message
    return check_protocol(protocol, replace(opts, timeout=left))


def _violation_bound(fam: SymbolicKernel, what: str, bound: str, base: int | None) -> str | None:
    """The concrete N of a finding: for a residue's protocol, from the Q of the engine's bound."""
    if base is None:
        kt = int(what[3:]) if what.startswith("KT=") else None
        n = fam.sym.lo if kt is None else fam.n_for(kt)
        return None if n is None else f"{fam.sym.show()}={n} ({what})"
    m = re.search(r"\bQ=(\d+)", bound)
    if m is None:
        return None
    kt = base + fam.period * int(m.group(1))
    n = fam.n_for(kt)
    return None if n is None else f"{fam.sym.show()}={n} (KT={kt}, {what} at Q={m.group(1)})"


def _at_kernel_trip_count(note: str, fam: SymbolicKernel, what: str, base: int | None) -> str:
    """A finding's note ``found at Q=q`` (a trip count the lift checked with the explicit engine,
    tripcount.small_trip_counts) said in the kernel's N, as a violation's bound is; any other note as it is."""
    m = re.fullmatch(r"found at (Q=\d+)", note)
    at = None if m is None or base is None else _violation_bound(fam, what, m.group(1), base)
    return note if at is None else f"found at {at}"


def _every_q(bound: str) -> bool:
    """Whether the z3 engine's bound covers every Q the kernel can have (below 2^31: the trip count's range):
    `all-iterations`, or `all-iterations (Q <= u)` with u that large."""
    if bound == "all-iterations":
        return True
    m = re.fullmatch(r"all-iterations \(Q <= (\d+)\)", bound)
    return m is not None and int(m.group(1)) >= 1 << 31
