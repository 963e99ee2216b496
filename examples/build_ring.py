"""Build the canonical warp-specialized TMA ring in code, check it, break it, read the race.

    python3 examples/build_ring.py [--stages 4] [--iters 5] [--html ring.html]

What a compiler that generates synchronization would do: emit the protocol
through the builder (no text written by hand), check it with the same engine
as `syncverify check`, then read the structured result — verdict, codes, the
counterexample steps with their spec lines — instead of parsing terminal output.

The ring is the one of `specs/cutlass_ws_ring.sync` (one producer warp, two
consumer warpgroups, a full and an empty mbarrier per stage); `wait_empty=False`
drops the producer's wait on the empty barrier, and the checker answers with the
WAR race (SV302) of the next copy into a stage the consumers are still reading.
Exit status: 0 when the intact ring is safe and the broken one has the race.
"""

from __future__ import annotations

import argparse
import sys

from syncverify import CheckResult, Options, ProtocolBuilder, Verdict, check_protocol
from syncverify.builder import INDEX, BuildError


def ring(wait_empty: bool = True, stages: int = 4, iters: int = 8, nbytes: int = 16384) -> ProtocolBuilder:
    """The ring, statement for statement as in specs/cutlass_ws_ring.sync."""
    b = ProtocolBuilder("cutlass_ws_ring" if wait_empty else "cutlass_ws_ring_no_empty_wait",
                        expect="safe" if wait_empty else "SV302, SV303, SV504")
    STAGES = b.param("STAGES", stages)
    ITERS = b.param("ITERS", iters)
    BYTES = b.param("BYTES", nbytes)
    b.cta_threads(384)
    producer = b.role("producer", "warp", 0)
    consumer = b.role("consumer", "warpgroup", 1 + INDEX, instances=2)  # i = 0, 1
    tile = b.smem("tile", BYTES, slots=STAGES)
    full = b.mbarrier("full", count=1, size=STAGES)
    empty = b.mbarrier("empty", count=256, size=STAGES)

    with b.if_(producer), b.elect():
        b.init(full.all)
        b.init(empty.all)
        b.fence_mbarrier_init()
    b.syncthreads()

    with b.if_(producer), b.for_("k", 0, ITERS) as k:
        s = b.let("s", k % STAGES)
        if wait_empty:
            b.wait(empty[s], (k / STAGES + 1) % 2, comment="producer_acquire")
        with b.elect():
            b.arrive_expect_tx(full[s], BYTES, comment="producer_commit")
            b.tma_load(tile[s], full[s], bytes=BYTES)
    with b.if_(consumer), b.for_("k", 0, ITERS) as k:
        s = b.let("s", k % STAGES)
        b.wait(full[s], (k / STAGES) % 2, comment="consumer_wait")
        b.read(tile[s])
        b.arrive(empty[s], comment="consumer_release")
    return b


def check(b: ProtocolBuilder, iters: int) -> CheckResult:
    protocol = b.build({"ITERS": iters})
    return check_protocol(protocol, Options(max_states=500_000, timeout=120))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=5, help="loop trip count to check (default 5)")
    parser.add_argument("--stages", type=int, default=4, help="pipeline stages (default 4, as in the spec)")
    parser.add_argument("--html", metavar="PATH", help="also write the race's swimlane view")
    args = parser.parse_args(argv)

    try:
        good = check(ring(wait_empty=True, stages=args.stages), args.iters)
        broken_builder = ring(wait_empty=False, stages=args.stages)
        broken = check(broken_builder, args.iters)
    except BuildError as err:  # a generator bug: the message quotes the generated lines
        print(err, file=sys.stderr)
        return 2

    print(f"{good.protocol}: {good.verdict.value} (bound {good.bound}, {good.stats.states} states)")
    print(f"{broken.protocol}: {broken.verdict.value} {sorted(broken.codes())}")
    race = next((d for d in broken.diagnostics if d.code == "SV302"), None)
    if race is not None:
        print(f"  {race.code} at line {race.span.line if race.span else '?'}: {race.message}")
        lines = broken_builder.source.splitlines()
        for step in race.trace:
            text = lines[step.line - 1].strip() if 0 < step.line <= len(lines) else step.op
            print(f"    step {step.step:>3}  {step.role:<16} {step.iteration:<5} line {step.line:>2}: {text}")
    if args.html and race is not None:
        from syncverify.report.swimlane import render_html, views_for

        protocol = broken_builder.build({"ITERS": args.iters})
        result = check_protocol(protocol, Options(max_states=500_000, timeout=120, full_trace=True))
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(protocol, result, views_for(protocol, result, ["SV302"])))
        print(f"wrote {args.html}")
    ok = good.verdict is Verdict.SAFE and broken.verdict is Verdict.VIOLATION and race is not None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
