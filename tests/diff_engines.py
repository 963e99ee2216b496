"""The engines that differential testing compares, behind one small interface.

Each engine takes a loaded protocol and a budget and answers a verdict with
its error codes. Engines that are not part of the installed version (the
all-iterations engine `engines/symbolic/`, SPIN through the Promela export)
are detected by import and reported unavailable with the reason, so a test or
benchmark skips them cleanly instead of failing.

Comparison rules (`compare`):

* engines with the same *scope* (the same trip counts) must give the same
  verdict whenever both are conclusive;
* an all-iterations engine that proves `safe` contradicts a bounded engine
  that finds a violation; an all-iterations violation beside a bounded
  `safe` is no contradiction (it may lie at a larger trip count) and is
  counted apart;
* inconclusive answers, unsupported protocols and engine errors are counted,
  never taken as agreement or disagreement.

Codes are compared as information only: with reductions the RAW/WAR name of
one race may depend on the interleaving explored first (docs/model.md), so
the reduced engine's codes must be among the full engine's, with SV301/SV302
as one family.

Warnings are compared where both answers are `safe` and both engines report
them (the explicit engines and the all-iterations one): `--strict` makes a
warning a violation, so the engines must agree whether there is one (an
all-iterations `safe` must warn where the bounded reference does: it covers
that trip count), and the reference's warning codes must be among the
unreduced search's, as its errors are.
"""

from __future__ import annotations

import functools
import importlib.util
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from syncverify import ir
from syncverify.diagnostics import Severity
from syncverify.result import Verdict


@dataclass(frozen=True)
class Answer:
    verdict: str  # safe | violation | inconclusive | unsupported | error
    codes: frozenset[str] = frozenset()
    states: int = 0
    seconds: float = 0.0
    detail: str = ""
    bound: str = ""  # what the answer covers, e.g. "ITERS=3" (where a violation was found) or "all-iterations"
    warnings: frozenset[str] | None = None  # the warning codes, where the engine reports warnings


@dataclass(frozen=True)
class Engine:
    name: str
    scope: str  # "bounded": the protocol's own trip counts; "all-iterations": every trip count
    run: Callable[[ir.Protocol, int, float], Answer]
    unavailable: str | None = None  # why it cannot run here (None: it can)
    reference: bool = False  # the engine the others are compared with


def _from_result(res, start: float, warns: bool = False) -> Answer:
    """``warns``: the engine reports warnings, so its answer carries their codes."""
    codes = frozenset(d.code for d in res.diagnostics if d.is_error)
    verdict = {Verdict.SAFE: "safe", Verdict.VIOLATION: "violation", Verdict.INCONCLUSIVE: "inconclusive",
               Verdict.ERROR: "error"}[res.verdict]
    warnings = frozenset(d.code for d in res.diagnostics if d.severity is Severity.WARNING) if warns else None
    return Answer(verdict, codes, res.stats.states, time.monotonic() - start, res.coverage, res.bound, warnings)


def _explicit(reduce: bool, symmetry: bool, readings: dict[str, bool]) -> Callable[[ir.Protocol, int, float], Answer]:
    def run(protocol: ir.Protocol, max_states: int, seconds: float) -> Answer:
        from syncverify.check import Options
        from syncverify.diagnose import root_causes
        from syncverify.engines import merge_static
        from syncverify.engines.explicit import Budget, explore
        from syncverify.semantics.machine import Assumptions, Machine
        from syncverify.static.checks import static_findings

        start = time.monotonic()
        options = Options(max_states=max_states, timeout=seconds, **readings)
        machine = Machine(protocol, Assumptions.of(options))
        res = explore(protocol, Budget(max_states, seconds), machine, symmetry=symmetry, reduce=reduce)
        res = merge_static(res, static_findings(protocol, machine.programs))
        # the root causes check_protocol adds for every engine (the others run through it)
        return _from_result(root_causes(protocol, res, options), start, warns=True)

    return run


def _symbolic(protocol: ir.Protocol, max_states: int, seconds: float,
              readings: dict[str, bool] | None = None) -> Answer:
    from syncverify.check import Options, check_protocol

    start = time.monotonic()
    res = check_protocol(protocol, Options(engine="z3", max_states=max_states, timeout=seconds, **(readings or {})))
    answer = _from_result(res, start, warns=True)
    if answer.verdict == "inconclusive" and "not part of this version" in answer.detail:
        return Answer("unsupported", detail=answer.detail)
    if answer.verdict == "inconclusive" and "not lifted" in answer.detail:
        return Answer("unsupported", detail=answer.detail, seconds=answer.seconds)
    return answer


def _bmc(protocol: ir.Protocol, max_states: int, seconds: float, readings: dict[str, bool] | None = None) -> Answer:
    from syncverify.check import Options, check_protocol

    start = time.monotonic()
    res = check_protocol(protocol, Options(engine="bmc", timeout=seconds, **(readings or {})))
    answer = _from_result(res, start)
    if answer.verdict == "inconclusive" and answer.detail.startswith("unsupported by the bmc engine"):
        return Answer("unsupported", detail=answer.detail, seconds=answer.seconds)
    if answer.verdict == "inconclusive" and answer.detail.startswith("internal:"):
        return Answer("error", detail=answer.detail, seconds=answer.seconds)  # a counterexample the machine refutes
    return answer


def _spin(protocol: ir.Protocol, max_states: int, seconds: float, cc_flags: tuple[str, ...] = ("-O2",)) -> Answer:
    """SPIN on the exported model, with the search-free findings (static/checks.py) added as every
    engine adds them (engines.merge_static): the export models the search, not the static checks,
    so without them a protocol only a static check rejects would read as a disagreement."""
    from syncverify.export.promela import ExportError, export_model
    from syncverify.export.spin import run_spin
    from syncverify.semantics.machine import Machine
    from syncverify.static.checks import static_findings

    start = time.monotonic()
    try:
        model = export_model(protocol)
    except ExportError as why:
        return Answer("unsupported", detail=str(why), seconds=time.monotonic() - start)
    with tempfile.TemporaryDirectory(prefix="sv-spin-") as tmp:
        out = run_spin(model.text, Path(tmp), timeout=seconds, depth=model.max_depth, cc_flags=cc_flags)
    code = "SV201" if out.code == "deadlock" else out.code
    codes = frozenset({code}) if code and code != "EXPORTCAP" else frozenset()
    verdict = "unsupported" if out.code == "EXPORTCAP" else out.verdict
    static = frozenset(d.code for d in static_findings(protocol, Machine(protocol).programs) if d.is_error)
    if static and verdict != "unsupported":
        verdict, codes = "violation", codes | static
    return Answer(verdict, codes, out.states, time.monotonic() - start, out.detail[:300])


def spin_fast(protocol: ir.Protocol, max_states: int, seconds: float) -> Answer:
    """SPIN compiled at -O0: for tiny models the compile is most of the cost, and the optimization
    level cannot change a verdict (tests/test_promela.py does the same)."""
    return _spin(protocol, max_states, seconds, ("-O0",))


def _module_missing(name: str) -> str | None:
    """None when the module imports; otherwise why not (absent from this version, or a dependency missing)."""
    try:
        if importlib.util.find_spec(name) is None:
            return f"{name} is not part of this version"
        importlib.import_module(name)
    except ImportError as err:
        return f"{name} cannot be imported here ({err})"
    return None


def _spin_missing() -> str | None:
    missing = _module_missing("syncverify.export.promela") or _module_missing("syncverify.export.spin")
    if missing:
        return missing
    from syncverify.export.spin import tools_available

    return tools_available()


def engines(**readings: bool) -> list[Engine]:
    """Every engine, available or not (``unavailable`` says why not). ``readings``: Options' `assume_*` keywords
    the engines check under (each reading's default where not given); the Promela export takes the defaults
    only, so SPIN is unavailable where any is given."""
    spin_missing = _spin_missing() if not readings else "the Promela export takes the default readings only"
    return [
        Engine("explicit", "bounded", _explicit(True, True, readings), reference=True),
        Engine("explicit-unreduced", "bounded", _explicit(False, False, readings)),
        Engine("explicit-por-only", "bounded", _explicit(True, False, readings)),
        Engine("explicit-symmetry-only", "bounded", _explicit(False, True, readings)),
        Engine("symbolic", "all-iterations", functools.partial(_symbolic, readings=readings),
               _module_missing("syncverify.engines.symbolic")),
        Engine("bmc", "bounded", functools.partial(_bmc, readings=readings), _module_missing("syncverify.engines.bmc")),
        Engine("spin", "bounded", _spin, spin_missing),
    ]


CONCLUSIVE = ("safe", "violation")


def loaded(texts: Iterable[tuple[int, str]], tally: Counter) -> Iterator[tuple[int, str, ir.Protocol]]:
    """The protocols of (index, text) pairs (a slice of an exhaustive scope), each with its index and text; the
    texts the loader rejects are counted in ``tally`` as "rejected" and left out."""
    from syncverify import load
    from syncverify.diagnostics import InputError

    for index, text in texts:
        try:
            protocol = load(text, path="slice.sync")
        except InputError:
            tally["rejected"] += 1
            continue
        yield index, text, protocol


def family(codes: frozenset[str]) -> frozenset[str]:
    return frozenset("SV30x" if c in ("SV301", "SV302") else c for c in codes)


@dataclass
class Comparison:
    kind: str  # agree | disagree | beyond-bound | skipped
    note: str = ""
    codes_differ: bool = False
    extra: dict = field(default_factory=dict)


def compare(ref: Answer, other: Answer, engine: Engine) -> Comparison:
    """How ``other`` (of ``engine``) relates to the reference (bounded, reduced explicit) answer."""
    if ref.verdict not in CONCLUSIVE or other.verdict not in CONCLUSIVE:
        return Comparison("skipped", f"{ref.verdict} / {other.verdict}")
    codes_differ = family(ref.codes) != family(other.codes)
    warned = _warnings_differ(ref, other, engine)
    if engine.scope == "all-iterations":
        if other.verdict == "safe" and ref.verdict == "violation":
            return Comparison("disagree", "proved safe for all trip counts, violation at the spec's", codes_differ)
        if other.verdict == "violation" and ref.verdict == "safe":
            return Comparison("beyond-bound", "violation at another trip count", codes_differ)
        if warned:
            return Comparison("disagree", warned, codes_differ)
        return Comparison("agree", codes_differ=codes_differ)
    if other.verdict != ref.verdict:
        return Comparison("disagree", f"{engine.name} {other.verdict}, reference {ref.verdict}", codes_differ)
    if warned:
        return Comparison("disagree", warned, codes_differ)
    return Comparison("agree", codes_differ=codes_differ)


def _warnings_differ(ref: Answer, other: Answer, engine: Engine) -> str:
    """Why two safe answers' warnings disagree (see the module's doc), or "" where they do not or are not
    compared."""
    if (ref.verdict, other.verdict) != ("safe", "safe") or ref.warnings is None or other.warnings is None:
        return ""
    if bool(ref.warnings) != bool(other.warnings) and (engine.scope == "bounded" or ref.warnings):
        return (f"{engine.name} warns {sorted(other.warnings)}, the reference {sorted(ref.warnings)}: "
                f"under --strict one is safe, the other a violation")
    if engine.name == "explicit-unreduced" and not ref.warnings <= other.warnings:
        return f"the reference warns {sorted(ref.warnings - other.warnings)}, which the unreduced search does not"
    return ""
