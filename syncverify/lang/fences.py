"""The spellings of the async-proxy fences in the language (docs/language.md §7.5), each the PTX
instruction's own: `fence.proxy.async` with an optional state space, and the two uni-directional
halves with the only qualifiers PTX allows them. What each orders is defined in
semantics/families/proxy_fence.py."""

from __future__ import annotations

from collections.abc import Callable

from .. import ir

# PTX ISA, membar/fence: ".proxykind = { .alias, .async, .async.global, .async.shared::{cta, cluster} }"
SPACES = (".shared::cta", ".shared::cluster", ".global")
# PTX ISA, membar/fence, syntax of the uni-directional proxy fences:
#   fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;
#   fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;
HALVES = {"release": (".sync_restrict::shared::cta", ".cluster"),
          "acquire": (".sync_restrict::shared::cluster", ".cluster")}


def bidirectional(span: ir.Span, quals: set[str], error: Callable[[str, str, ir.Span], None]) -> ir.Fence | None:
    """`fence.proxy.async[.shared::cta|.shared::cluster|.global]`: at most one state space."""
    given = [q for q in SPACES if q in quals]
    if len(given) > 1:
        error("SV110", f"`fence.proxy.async` takes one state space, got {' and '.join(given)}", span)
        return None
    return ir.Fence("proxy_async", span, given[0][1:] if given else "all")  # type: ignore[arg-type]


def half(sem: str, span: ir.Span, quals: set[str], error: Callable[[str, str, ir.Span], None]) -> ir.Fence | None:
    """`fence.proxy.async::generic.SEM.sync_restrict::….cluster`: PTX requires both qualifiers
    ("When either .sync_restrict::shared::cta or .sync_restrict::shared::cluster is present, the
    .scope must be specified as .cluster")."""
    want = HALVES[sem]
    if set(want) - quals:
        error("SV110", f"write `fence.proxy.async::generic.{sem}{''.join(want)}` (PTX's only form of this fence)",
              span)
        return None
    return ir.Fence("proxy_async", span, "shared::cta" if sem == "release" else "shared::cluster",
                    sem)  # type: ignore[arg-type]
