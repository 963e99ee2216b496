"""What the emitter can turn into a runnable sm_90a kernel, and why not otherwise.

Refusals are raised as :class:`EmitRefused` with a message meant for the user:
the CLI prints it and exits with 2, the exit code for input the tool cannot
take (design §4); the exception is defined in base.py, below every module of
the emitter. Blackwell tensor-memory operations have no sm_90 equivalent,
so a spec that uses them is refused rather than approximated.
"""

from __future__ import annotations

from .. import ir
from ..lang.choices import open_choices
from ..semantics.families.storage import uses_storage
from ..semantics.program import per_lane
from .base import EmitRefused
from .regions import region_buffers
from .sites import Site

WGMMA_TILE_BYTES = 2048  # m64n8k32 u8: A is 64x32 bytes; B (256 bytes) is read from the same tile


def check_supported(protocol: ir.Protocol, sites: list[Site]) -> None:
    """Refuse what sm_90a cannot run; everything else in the IR has an exact PTX form."""
    several = open_choices(protocol)
    if several:
        raise EmitRefused(f"{protocol.path}: {several}; a kernel is emitted for one assignment: pin each with "
                          "-D NAME=VALUE")
    shared = uses_storage(protocol)
    if shared is not None:
        raise EmitRefused(f"{protocol.path}: {shared}: the emitted kernel places every mbarrier in storage of its "
                          "own, so a barrier whose bytes a buffer slot shares is not emitted (its lifetime rules, "
                          "SV408/SV409, are checked by `syncverify check`)")
    parted = region_buffers(protocol)
    probe = next((op for op in ir.ops_of(protocol.body) if isinstance(op, ir.MbarProbe)), None)
    if probe is not None:
        raise EmitRefused(f"{protocol.path}:{probe.span.line}: a branch on a probe's result (`if try_wait`/`if "
                          "test_wait`) is not emitted: the replay that checks a run against the model follows "
                          "one schedule of fixed operations per warp, and a probe's result on the GPU is not "
                          "one the schedule can fix")
    for s in sites:
        what = ir.blackwell_op_name(s.op)
        if what is not None:
            raise EmitRefused(
                f"{protocol.path}:{s.line}: `{what}` is a Blackwell tcgen05 operation (sm_100a); it cannot run on "
                "sm_90a. Write the Hopper analog of the protocol (for a cta_group 2 allocation race: a remote "
                "mbarrier arrive before the peer's init is visible, as in specs/peer_init_race.sync) to run it on a "
                "Hopper GPU")
        if isinstance(s.op, ir.MbarArrive) and s.op.local_form:
            raise EmitRefused(f"{protocol.path}:{s.line}: `{s.text}` is the `.shared::cta` arrive given a "
                              "`mapa`'d address; on a peer's barrier it is SV407 (PTX defines the form on the "
                              "executing CTA's own barrier only), so the kernel would be undefined; write the remote "
                              "form (`arrive B @ CTA`) to run it")
        if isinstance(s.op, ir.Access) and s.op.buf.name in parted and per_lane(s.op):
            raise EmitRefused(f"{protocol.path}:{s.line}: `{s.text}` runs once per lane (an operand uses `lane`) "
                              "on a buffer accessed by region; the kernel checks regions per warp, not per lane")
        if isinstance(s.op, ir.WgmmaRead):
            if s.op.buf.name in parted:
                raise EmitRefused(f"{protocol.path}:{s.line}: `wgmma.read {s.op.buf.name}`: the buffer is also "
                                  "accessed by region, and a wgmma is checked by one sum over the slot, not by "
                                  "the segments the regions leave in it")
            decl = protocol.buffer(s.op.buf.name)
            if decl.bytes < WGMMA_TILE_BYTES:
                raise EmitRefused(f"{protocol.path}:{s.line}: `wgmma.read {s.op.buf.name}` is emitted as a "
                                  f"wgmma.mma_async m64n8k32 reading {WGMMA_TILE_BYTES} bytes of the slot, but "
                                  f"`{s.op.buf.name}` has only {decl.bytes} bytes per slot")
    if protocol.threads > 1024:
        raise EmitRefused(f"{protocol.path}: a CTA of {protocol.threads} threads cannot be launched (limit 1024)")
    if protocol.threads % 32:
        raise EmitRefused(f"{protocol.path}: the emitter needs whole warps; the CTA has {protocol.threads} threads")
