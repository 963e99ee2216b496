"""Which PTX fence is which operation of the language (docs/extract.md, "Fences").

Every `fence`/`membar` opcode is classified in full, never by prefix: a restricted or
uni-directional fence read as the plain one would order more than PTX does (a false "safe").
PTX ISA, *membar/fence*, syntax:

    fence{.sem}.scope;
    fence.acquire.sync_restrict::shared::cluster.cluster;
    fence.release.sync_restrict::shared::cta.cluster;
    fence.op_restrict.release.cluster;                               .op_restrict = { .mbarrier_init }
    fence.proxy.proxykind;                 .proxykind = { .alias, .async, .async.global, .async.shared::{cta, cluster} }
    fence.proxy.proxykind{.sem}.scope;
    fence.proxy.to_proxykind::from_proxykind.release.scope;          = { .tensormap::generic }
    fence.proxy.to_proxykind::from_proxykind.acquire.scope [addr], size;
    fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;
    fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;
    fence.proxy.async::generic.release.sync_restrict::shared::cluster::read.cluster;
    fence.proxy.to_proxykind::from_proxykind_fabric.alias.sem_fabric.sys;
    membar.level;  membar.proxy.proxykind;     ("On sm_70 and higher, membar.proxy is a synonym for fence.proxy")

The async-proxy fences and `fence.mbarrier_init` become events; the fences whose ordering the model
never credits (thread fences of every `.sem`/`.scope`, restricted or not; the alias, tensormap and
fabric proxy fences, whose proxies no modelled access uses) are skipped — skipping them can only
add findings. Any other form is refused at its line.
"""

from __future__ import annotations

# the async-proxy fences: opcode -> (state space, half)
PROXY_ASYNC: dict[str, tuple[str, str]] = {
    "fence.proxy.async": ("all", ""),
    "fence.proxy.async.shared::cta": ("shared::cta", ""),
    "fence.proxy.async.shared::cluster": ("shared::cluster", ""),
    "fence.proxy.async.global": ("global", ""),
    "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster": ("shared::cta", "release"),
    "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster": ("shared::cluster", "acquire"),
}
MBARRIER_INIT = "fence.mbarrier_init.release.cluster"
_SEMS = ("sc", "acq_rel", "acquire", "release")
_SCOPES = ("cta", "cluster", "gpu", "sys")
# fences that order only what the model does not credit: thread fences and the other proxies' fences
_THREAD_RESTRICTED = ("fence.acquire.sync_restrict::shared::cluster.cluster",
                      "fence.release.sync_restrict::shared::cta.cluster")
_OTHER_PROXIES = ("fence.proxy.alias", "fence.proxy.tensormap::generic.", "fence.proxy.generic::fabric.",
                  "fence.proxy.fabric::generic.", "fence.proxy.fabric::fabric.")


def classify(opcode: str) -> tuple[str, tuple[str, ...]] | str | None:
    """The event a fence opcode becomes: ("fence_proxy", (space, half)) or ("fence_init", ());
    None for a fence the model skips; a string (the reason) for one extraction must refuse."""
    op = "fence.proxy." + opcode[len("membar.proxy."):] if opcode.startswith("membar.proxy.") else opcode
    if op in PROXY_ASYNC:
        return "fence_proxy", PROXY_ASYNC[op]
    if op == MBARRIER_INIT:
        return "fence_init", ()
    if op.startswith("fence.proxy.async"):
        return (f"`{opcode}` is an async-proxy fence of a form the model does not define (the modelled forms: "
                "`fence.proxy.async[.shared::cta|.shared::cluster|.global]` and the release/acquire halves "
                "`fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster`, "
                "`fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster`)")
    if op.startswith("fence.mbarrier_init"):
        return f"`{opcode}`: PTX's only form is `{MBARRIER_INIT}`"
    if op.startswith(_OTHER_PROXIES) or op in _THREAD_RESTRICTED:
        return None
    words = op.split(".")
    if words[0] == "membar" and len(words) == 2 and words[1] in ("cta", "gl", "sys"):
        return None
    if words[0] == "fence" and len(words) in (2, 3) and words[-1] in _SCOPES and \
            (len(words) == 2 or words[1] in _SEMS):
        return None
    return f"`{opcode}` is a fence the model does not know"


def language_text(space: str, half: str) -> str:
    """The statement an async-proxy fence is extracted as (the language spells it as PTX does)."""
    if half == "release":
        return "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;"
    if half == "acquire":
        return "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;"
    return "fence.proxy.async;" if space == "all" else f"fence.proxy.async.{space};"
