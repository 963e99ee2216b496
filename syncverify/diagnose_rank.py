"""An arrive sent to the wrong CTA of the cluster, named at its own line.

With TMA multicast each CTA's producer writes into every CTA of the mask, so it must learn that every one of
them released the stage: DeepGEMM's sm90 GEMMs have lane r of each math warp arrive on the empty barrier of
cluster CTA r (`lane_idx < kNumTMAMulticast ? empty_barriers[s]->arrive(lane_idx)`), the count being the
multicast width times the math warps. An arrive that goes to the CTA's own barrier instead still completes
every phase on time -- the counts add up, nothing hangs -- but a producer then hears only its own CTA's
releases, and its multicast overwrites a peer's copy of the stage that the peer still reads or has not yet
consumed. The search reports that race at the copy; the line to change is the arrive.

The check is counterfactual, like the other root causes (diagnose.py): for an arrive on a barrier that the
racing writer waited on before its write,

guarded by `if lane < K` with 2 <= K <= the cluster's size and aimed at the executing CTA (no `@`, or `@ cta`),
the variant sends lane r to CTA r (`@ lane`), every statement written from the same source site changed
together (Options.sites). The cause is named only when the variant's search is complete and finds no error,
under the same options (assumptions included). The finding carries the race's code at the arrive, ahead of
the race. An arrive to a constant rank is not retargeted: where several arrives share a barrier, another
permutation of their ranks may check clean too, and the one changed would not be the one to blame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import ir
from .diagnose_ir import RACES, blocks, map_ops
from .diagnostics import Diagnostic, Related, make
from .result import CheckResult

if TYPE_CHECKING:
    from .options import Options



@dataclass(frozen=True)
class Retarget:
    """One arrive and a target CTA to try instead of its own: `now` says where it goes as written."""

    arrive: ir.MbarArrive
    now: str
    to: ir.Expr
    written: str  # the target as the fix is written (`@ lane`, `@ 1`)


def _lane_bound(cond: ir.Expr) -> int | None:
    """K of a guard `lane < K`."""
    if isinstance(cond, ir.BinOp) and cond.op == "<" and isinstance(cond.left, ir.Builtin) \
            and cond.left.name == "lane" and isinstance(cond.right, ir.Const):
        return cond.right.value
    return None


def _plain(s: ir.Stmt) -> ir.MbarArrive | None:
    return s if isinstance(s, ir.MbarArrive) and s.tx_bytes is None and not s.drop else None


def _own_cta(a: ir.MbarArrive) -> bool:
    return a.remote is None or (isinstance(a.remote, ir.Builtin) and a.remote.name == "cta")


def _candidates(protocol: ir.Protocol, waited: set[str]) -> Iterator[Retarget]:
    """The retargets to try: each own-CTA arrive of a lane guard, on a barrier some racing writer waited on."""
    for block in blocks(protocol.body):
        for s in block:
            k = _lane_bound(s.cond) if isinstance(s, ir.If) and s.probe is None and not s.orelse else None
            if isinstance(s, ir.If) and k is not None and 2 <= k <= protocol.cluster:
                for a in filter(None, map(_plain, s.then)):
                    if _own_cta(a) and a.bar.name in waited:
                        yield Retarget(a, f"lanes 0..{k - 1} each arrive on their own CTA's",
                                       ir.Builtin("lane", a.span), "@ lane")


def _waited(race: Diagnostic) -> set[str]:
    """The barriers (by name) the racing writer waited on before its write, as the counterexample shows."""
    if not race.trace:
        return set()
    writer = race.trace[-1].role
    return {s.barrier.split("[")[0].split("@")[0] for s in race.trace
            if s.role == writer and s.barrier and s.op.startswith("wait")}


def wrong_rank(protocol: ir.Protocol, result: CheckResult, options: Options,
               search_clean: Callable[[ir.Protocol, Options, float], bool],
               same_site: Callable[[Options, int, list[int]], list[int]]) -> list[Diagnostic]:
    """The arrive whose target CTA, changed, makes the protocol check clean (`search_clean` and `same_site`:
    diagnose.py's, passed in so that the modules import one way)."""
    if protocol.cluster < 2:
        return []
    races = [d for d in result.diagnostics if d.code in RACES and d.is_error and d.span is not None]
    waited = set().union(*(_waited(d) for d in races)) if races else set()
    out: list[Diagnostic] = []
    tried: set[tuple[int, str]] = set()
    found = list(_candidates(protocol, waited))
    lines = sorted({c.arrive.span.line for c in found})
    for cand in found:
        if (cand.arrive.span.line, cand.written) in tried:
            continue
        group = set(same_site(options, cand.arrive.span.line, lines))
        tried |= {(n, cand.written) for n in group}
        changed = {id(c.arrive): replace(c.arrive, remote=c.to) for c in found
                   if c.arrive.span.line in group and c.written == cand.written}
        body = map_ops(protocol.body, lambda s, changed=changed: changed.get(id(s), s))
        if not search_clean(replace(protocol, body=body), options, result.stats.seconds):
            continue
        race = races[0]
        bar = cand.arrive.bar.name + ("[…]" if cand.arrive.bar.index is not None else "")
        out.append(make(
            race.code, f"arrive on the wrong CTA: {cand.now} `{bar}`, so a producer that multicasts into the other "
            f"CTAs learns only of its own CTA's releases (the {race.code} at line {race.span.line}). With "
            f"`{cand.written}` here the protocol checks without error at this bound (and this check's assumptions)",
            cand.arrive.span, trace=race.trace,
            related=(Related(race.span, f"the race it causes ({race.code})"),)))
    return out
