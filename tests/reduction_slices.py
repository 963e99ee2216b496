"""One reduction against the unreduced search, on the exhaustive programs where it acts.

Shared by the tests of single reductions (test_exit_por.py, test_named_wait_walk.py): each
counts, through a patched function of its own, where its rule acted, and only the programs on
which it acted are compared, so that the comparison keeps exercising the rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from exhaustive_programs import SCOPES, assignments, sample

from syncverify import load
from syncverify.diagnostics import InputError
from syncverify.engines.explicit import Budget, explore
from syncverify.result import Verdict
from syncverify.semantics.machine import Machine

BUDGET = Budget(max_states=100_000, seconds=120)


def error_codes(result) -> set[str]:
    return {d.code for d in result.diagnostics if d.is_error or d.code in ("SV203", "SV204")}


def _same(reduced, full) -> bool:
    return reduced.verdict == full.verdict and error_codes(reduced) == error_codes(full)


def compare_where_it_acts(slices: tuple[tuple[str, int], ...], acted: list, keep: Callable[[str], bool] = bool,
                          agree: Callable[[object, object], bool] = _same) -> int:
    """Every ``every``-th program of each (scope, every) whose text ``keep`` accepts: searched with
    every reduction, and where ``acted`` (the caller's record of the rule acting, cleared here
    before each search) is not empty, searched without any; ``agree`` (by default: the same verdict
    and error codes) must hold of the two results. Returns how many programs were compared."""
    compared = 0
    for scope, every in slices:
        for index, text in sample(SCOPES[scope], every):
            if not keep(text):
                continue
            for pinned in assignments(text):
                try:
                    protocol = load(text, pinned, path="x.sync")
                except InputError:  # programs the front end rejects are not the point here
                    continue
                acted.clear()
                reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
                if not acted:
                    continue
                full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
                if full.verdict not in (Verdict.SAFE, Verdict.VIOLATION):
                    continue
                assert agree(reduced, full), (scope, index, pinned, text)
                compared += 1
    return compared


def load_point(path: str, defines: dict, inline: dict[str, str], root: Path):
    """A protocol of a test's list: ``inline:NAME`` is the text ``inline[NAME]``, anything else a
    file under ``root`` loaded with ``defines``."""
    if path.startswith("inline:"):
        return load(inline[path[7:]], path="t.sync")
    return load(str(root / path), defines)


def search_summary(protocol, max_states: int = 20_000) -> tuple:
    """What a search that must not change answers: verdict, states, transitions, and each finding
    with its counterexample's length (the tests that turn one shortcut of the search off)."""
    result = explore(protocol, Budget(max_states=max_states, seconds=300), Machine(protocol))
    findings = sorted((d.code, d.span.line if d.span else 0, d.message, len(d.trace)) for d in result.diagnostics)
    return result.verdict, result.stats.states, result.stats.transitions, findings
