"""Random small `.sync` protocols for differential testing and fuzzing.

The generator writes spec *text*, not IR, so every protocol also exercises the
front end and can be printed as a reproducer. Protocols are valid by
construction (they load), but their synchronization is drawn at random: the
same knobs that build a correct ring (a wait's parity, an arrival count, who
arrives, whether a wait or fence is there at all) also build broken ones, so a
sample holds safe protocols and violations of most diagnostic families.

Every choice goes through a `Draw` so that one generator serves two drivers:
hypothesis (`protocols()`, which shrinks a failing protocol to a small one) and
a seeded `random.Random` (`random_protocol()`, fast enough for benchmarks that
need thousands of protocols and reproducible from the seed alone).

Sizes are kept small on purpose (at most five warps, two CTAs, a few
iterations): the differential test runs the explicit engine with its
reductions switched off, whose state space grows exponentially with them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from hypothesis import strategies as st

T = TypeVar("T")


class Draw(Protocol):
    """The choices a generator makes; implemented over hypothesis and over `random`."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: Sequence[T]) -> T: ...

    def flag(self, p_true: float = 0.5) -> bool: ...


class HypothesisDraw:
    """Choices drawn from hypothesis (shrinkable)."""

    def __init__(self, draw: st.DrawFn):
        from hypothesis import strategies

        self._draw = draw
        self._st = strategies

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(self._st.integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return self._draw(self._st.sampled_from(list(options)))

    def flag(self, p_true: float = 0.5) -> bool:
        # hypothesis shrinks booleans towards False, and False is the "normal" choice of every
        # bug knob, so shrinking drops the injected bugs that a failure does not need.
        return self._draw(self._st.booleans())


class RandomDraw:
    """Choices drawn from a seeded `random.Random` (reproducible, fast)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return self.rng.choice(list(options))

    def flag(self, p_true: float = 0.5) -> bool:
        return self.rng.random() < p_true


# ---------------------------------------------------------------------------
# Pattern generators. Each returns a complete protocol; the "bug knobs" are
# drawn with a small probability so that about half of the sample is safe.

BUG = 0.15


def _ring(d: Draw) -> str:
    """Producer warp feeding consumer warps through a full/empty mbarrier ring."""
    stages = d.integer(1, 3)
    iters = d.integer(1, 4)
    consumers = d.integer(1, 2)
    bytes_ = d.choice([256, 1024])
    fill = d.choice(["tma", "tma", "generic", "generic_elect"])
    release = d.choice(["all", "all", "syncwarp_per_warp", "per_warp", "wgmma", "first_thread_syncwarp"])
    cons_array = d.flag()
    skip_prod_wait = d.flag(BUG)
    skip_init_sync = d.flag(BUG / 2)
    prod_parity = "(k / STAGES + 1) % 2" if not d.flag(BUG) else "(k / STAGES) % 2"
    cons_parity = "(k / STAGES) % 2" if not d.flag(BUG) else "(k / STAGES + 1) % 2"
    full_count = {"tma": 1, "generic": 32, "generic_elect": 1}[fill]
    empty_count = {"all": 32 * consumers, "syncwarp_per_warp": consumers, "per_warp": consumers,
                   "wgmma": 32 * consumers, "first_thread_syncwarp": 1 if not cons_array else consumers}[release]
    if d.flag(BUG):
        empty_count += d.choice([-1, 1])
    if d.flag(BUG / 2):
        full_count += 1
    empty_count = max(empty_count, 1)
    lines = [
        "protocol ring {",
        f"  param STAGES = {stages};",
        f"  param ITERS = {iters};",
        f"  cta threads {32 * (1 + consumers)};",
        "  role prod = warp 0;",
        f"  role cons[{consumers}] = warp 1 + i;" if cons_array else f"  role cons = warps 1..{1 + consumers};",
        f"  smem tile[STAGES] bytes {bytes_};",
        f"  mbarrier full[STAGES] count {full_count};",
        f"  mbarrier empty[STAGES] count {empty_count};",
        "  if prod { elect { init full[*]; init empty[*]; } }",
    ]
    if not skip_init_sync:
        lines.append("  syncthreads;")
    lines += ["  if prod {", "    for k in 0..ITERS {", "      let s = k % STAGES;"]
    if not skip_prod_wait:
        lines.append(f"      wait empty[s] parity {prod_parity};")
    if fill == "tma":
        lines.append(f"      elect {{ arrive.expect_tx full[s] bytes {bytes_}; tma.load tile[s] -> full[s]; }}")
    elif fill == "generic":
        lines.append("      write tile[s];")
        lines.append("      arrive full[s];")
    else:
        lines.append("      write tile[s];")
        if not d.flag(BUG):
            lines.append("      syncwarp;")
        lines.append("      elect { arrive full[s]; }")
    lines += ["    }", "  }", "  if cons {", "    for k in 0..ITERS {", "      let s = k % STAGES;",
              f"      wait full[s] parity {cons_parity};"]
    if release == "wgmma":
        lines += ["      wgmma.read tile[s];", "      wgmma.commit;"]
        if not d.flag(BUG):
            lines.append("      wgmma.wait 0;")
        lines.append("      arrive empty[s];")
    else:
        lines.append("      read tile[s];")
        if release == "all":
            lines.append("      arrive empty[s];")
        elif release == "syncwarp_per_warp":
            lines += ["      syncwarp;", "      elect { arrive empty[s]; }"]
        elif release == "per_warp":
            lines.append("      elect { arrive empty[s]; }")
        else:  # one arrival per consumer role instance
            lines += ["      syncwarp;", "      first thread { arrive empty[s]; }"]
    lines += ["    }", "  }", "}"]
    return "\n".join(lines) + "\n"


def _named_handoff(d: Draw) -> str:
    """Warps hand a buffer to each other through named barriers (bar.arrive / bar.sync)."""
    warps = d.integer(2, 4)
    rounds = d.integer(1, 3)
    writer_arrives = d.flag(0.7)
    n = 32 * warps + (d.choice([-32, 32]) if d.flag(BUG) else 0)
    n = min(max(n, 32), 32 * warps)
    back = d.flag(0.6) and not d.flag(BUG)
    lines = [
        "protocol handoff {",
        f"  param ROUNDS = {rounds};",
        f"  cta threads {32 * warps};",
        f"  role w[{warps}] = warp i;",
        "  smem buf bytes 512;",
        f"  named ready id 1 count {n};",
        f"  named done id 2 count {32 * warps};",
        "  for r in 0..ROUNDS {",
        "    if w && instance == 0 {",
        "      write buf;",
        f"      {'bar.arrive ready' if writer_arrives else 'bar.sync ready'};",
        "    }",
        "    if w && instance != 0 {",
        "      bar.sync ready;",
        "      read buf;",
        "    }",
    ]
    if back:
        lines.append("    bar.sync done;")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def _epilogue(d: Draw) -> str:
    """Epilogue warps write a buffer, fence, synchronize, one thread stores it with TMA."""
    warps = d.integer(1, 2)
    iters = d.integer(1, 3)
    stages = d.integer(1, 2)
    fence = not d.flag(BUG)
    wait_read = not d.flag(BUG)
    second_sync = not d.flag(BUG)
    lines = [
        "protocol epilogue {",
        f"  param STAGES = {stages};",
        f"  param ITERS = {iters};",
        f"  cta threads {32 * warps};",
        f"  role epi[{warps}] = warp i;",
        f"  named epi_bar id 1 count {32 * warps};",
        f"  smem d[STAGES * {warps}] bytes 1024;",
        "  if epi {",
        "    for k in 0..ITERS {",
        "      let s = k % STAGES;",
    ]
    if wait_read:
        lines.append("      if epi && instance == 0 { elect { bulk.wait_read STAGES - 1; } }")
    lines += ["      bar.sync epi_bar;", f"      write d[{warps} * s + instance];"]
    if fence:
        lines.append("      fence.proxy.async;")
    if second_sync:
        lines.append("      bar.sync epi_bar;")
    stores = " ".join(f"tma.store d[{warps} * s + {w}];" for w in range(warps))
    lines += [f"      if epi && instance == 0 {{ elect {{ {stores} bulk.commit; }} }}", "    }",
              "    if epi && instance == 0 { elect { bulk.wait_read 0; } }", "  }", "}"]
    return "\n".join(lines) + "\n"


def _cluster(d: Draw) -> str:
    """Two CTAs: barrier init made visible to the peer, remote arrivals, cluster barrier before exit."""
    rounds = d.integer(1, 2)
    fence = not d.flag(BUG)
    first_barrier = d.choice(["relaxed", "relaxed", "sync", "none"]) if d.flag(0.8) else "relaxed"
    scope = d.choice([".release.cluster", ".release.cluster", ""])
    wait_scope = ".acquire.cluster" if scope or d.flag(0.5) else ""
    final = not d.flag(BUG)
    data = d.flag(0.5)
    lines = [
        "protocol cluster_pair {",
        f"  param ROUNDS = {rounds};",
        "  cluster 2;",
        "  cta threads 32;",
        "  smem box bytes 256;",
        "  smem late bytes 256;",
        "  mbarrier bar count 1;",
        f"  elect {{ init bar;{' fence.mbarrier_init;' if fence else ''} }}",
    ]
    if first_barrier == "relaxed":
        lines += ["  cluster.arrive.relaxed;", "  cluster.wait;"]
    elif first_barrier == "sync":
        lines.append("  cluster.sync;")
    lines += ["  for r in 0..ROUNDS {", "    if cta == 0 {"]
    if data:
        lines.append("      write box @ 1;")  # every lane writes the peer's buffer (DSMEM) ...
        if not d.flag(BUG):
            lines.append("      syncwarp;")  # ... and the elected lane's release must cover them all
    lines.append(f"      elect {{ arrive{scope} bar @ 1; }}")
    # (drawn last, so that the protocols drawn before this knob existed are unchanged without it)
    if d.flag(0.3):  # a DSMEM write after the hand-off: only a cluster barrier keeps the peer from exiting
        lines += ["      write late @ 1;", "      read box;"]
    lines += ["    }", "    if cta == 1 {", f"      wait{wait_scope} bar parity r % 2;"]
    if data:
        lines.append("      read box;")
    lines += ["    }"]
    if rounds > 1:
        lines.append("    cluster.sync;")
    lines.append("  }")
    if final:
        lines.append("  cluster.sync;")
    lines.append("}")
    return "\n".join(lines) + "\n"


PATTERNS: dict[str, Callable[[Draw], str]] = {
    "ring": _ring, "named": _named_handoff, "epilogue": _epilogue, "cluster": _cluster,
}


def generate(d: Draw) -> str:
    """One random protocol, as `.sync` text."""
    return PATTERNS[d.choice(sorted(PATTERNS))](d)


def protocols() -> Any:
    """Hypothesis strategy: random small protocols as `.sync` text (hypothesis is imported only here, so
    that the benchmarks run where only the checker is installed)."""
    from hypothesis import strategies

    return strategies.composite(lambda draw: generate(HypothesisDraw(draw)))()


def random_protocol(seed: int) -> str:
    """The protocol for one seed (what bench/differential.py runs)."""
    return generate(RandomDraw(random.Random(seed)))


# ---------------------------------------------------------------------------
# Asynchronous-copy stress protocols: the orders in which copies land, bytes are
# expected and completed, and phases are first observed. Kept apart from PATTERNS
# (so that the protocols of `random_protocol` stay those of earlier runs) and drawn
# by `random_async_protocol`.

_FILLS = (
    # the producer's elected operations of one phase; {b}: the barrier, {t0}/{t1}: the tiles
    "arrive.expect_tx {b} bytes 32; tma.load {t0} bytes 32 -> {b};",
    "arrive.expect_tx {b} bytes 32; tma.load {t0} bytes 16 -> {b}; tma.load {t1} bytes 16 -> {b};",
    "tma.load {t0} bytes 16 -> {b}; tma.load {t1} bytes 16 -> {b}; arrive.expect_tx {b} bytes 32;",
    "expect_tx {b} bytes 32; tma.load {t0} bytes 16 -> {b}; tma.load {t1} bytes 16 -> {b}; arrive {b};",
    "tma.load {t0} bytes 32 -> {b}; expect_tx {b} bytes 32; arrive {b};",
    "arrive.expect_tx {b} bytes 32; tma.load {t0} bytes 16 -> {b}; complete_tx {b} bytes 16;",
)


def _async_ring(d: Draw) -> str:
    """A producer warp filling tiles with bulk copies for consumer warps, over one or two stages
    and one or two CTAs, with mutations drawn at random: byte counts, the order of the producer's
    operations, parities, counts, missing or extra waits, syncwarps and arrivals, early exits.
    In a cluster, each CTA's producer multicasts its half of every tile to both CTAs, expecting
    the bytes of both halves, and each consumer releases the stage in both CTAs."""
    cluster = d.flag(0.25)
    consumers = d.integer(1, 2)
    stages = d.integer(1, 2)
    iters = d.integer(1, 3)
    if cluster:  # (small enough for the unreduced search)
        consumers, iters = 1, min(iters, 2)
    fill = d.choice(_FILLS)
    mutate = [d.flag(BUG / 2) for _ in range(11)]  # eleven knobs: about half of the rings are unmutated
    warps = 1 + consumers
    s = "k % STAGES" if stages > 1 else "0"
    ix = f"[{s}]" if stages > 1 else ""
    full, empty = f"full{ix}", f"empty{ix}"
    halves = 2 if cluster else 1
    tile = (lambda name, half: f"{name}[{halves} * ({s}) + {half}]") if cluster or stages > 1 else \
        (lambda name, half: name)
    mine = "cta" if cluster else "0"
    fill = fill.format(b=full, t0=tile("t", mine), t1=tile("u", mine))
    if mutate[0]:  # bytes that do not balance
        fill = fill.replace("bytes 16 ->", "bytes 32 ->", 1) if "bytes 16 ->" in fill else \
            fill.replace("bytes 32;", "bytes 16;", 1)
    if mutate[1]:  # the producer's elected operations in another order
        ops = [o.strip() + ";" for o in fill.split(";") if o.strip()]
        i = d.integer(0, len(ops) - 1)
        j = d.integer(0, len(ops) - 1)
        ops[i], ops[j] = ops[j], ops[i]
        fill = " ".join(ops)
    if cluster:
        fill = fill.replace(f"-> {full};", f"-> {full} multicast 0b11;")
        if not mutate[2]:  # (mutated: the expected bytes count one half only)
            fill = fill.replace("expect_tx " + full + " bytes 32", "expect_tx " + full + " bytes 64")
    full_count = 1 + (1 if mutate[3] else 0)
    empty_count = consumers * halves + (d.choice([-1, 1]) if mutate[4] else 0)
    empty_count = max(empty_count, 1)
    prod_parity = "(k / STAGES + 1) % 2" if not mutate[5] else "(k / STAGES) % 2"
    cons_parity = "(k / STAGES) % 2" if not mutate[6] else "(k / STAGES + 1) % 2"
    dim = f"[{halves} * STAGES]" if cluster or stages > 1 else ""
    lines = ["protocol async_ring {", f"  param STAGES = {stages};", f"  param ITERS = {iters};"]
    if cluster:
        lines.append("  cluster 2;")
    lines += [
        f"  cta threads {32 * warps};",
        "  role prod = warp 0;",
        f"  role cons[{consumers}] = warp 1 + i;",
        f"  smem t{dim} bytes 64;",
        f"  smem u{dim} bytes 64;",
        f"  mbarrier full{'[STAGES]' if stages > 1 else ''} count {full_count};",
        f"  mbarrier empty{'[STAGES]' if stages > 1 else ''} count {empty_count};",
        f"  if prod {{ elect {{ init full{'[*]' if stages > 1 else ''}; init empty{'[*]' if stages > 1 else ''}; "
        "fence.mbarrier_init; } }",
        "  cluster.sync;" if cluster else "  syncthreads;",
        "  if prod {",
        "    for k in 0..ITERS {",
    ]
    if not mutate[7]:
        lines.append(f"      wait {empty} parity {prod_parity};")
    lines.append(f"      elect {{ {fill} }}")
    lines += ["    }", "  }", "  if cons {", "    for k in 0..ITERS {", f"      wait {full} parity {cons_parity};"]
    for half in range(halves):
        lines.append(f"      read {tile('t', half)};")
        if "tma.load u" in fill:
            lines.append(f"      read {tile('u', half)};")
    if not mutate[10]:
        lines.append("      syncwarp;")  # the elected lane's release then covers every lane's reads
    release = f"arrive {empty};" if not cluster else f"arrive {empty}; arrive.release.cluster {empty} @ 1 - cta;"
    lines.append(f"      elect {{ {release} }}")
    if mutate[8]:
        lines.append(f"      wait {full} parity {cons_parity};")  # a second wait on the phase just observed
    lines += ["    }", "  }"]
    if cluster and not mutate[9]:
        lines.append("  cluster.sync;")
    lines.append("}")
    return "\n".join(lines) + "\n"


_ASYNC_OPS = (
    "elect {{ arrive.expect_tx {b} bytes {n}; }}",
    "elect {{ expect_tx {b} bytes {n}; }}",
    "elect {{ complete_tx {b} bytes {n}; }}",
    "elect {{ tma.load {t} bytes {n} -> {b}; }}",
    "elect {{ arrive.expect_tx {b} bytes {n}; tma.load {t} bytes {n} -> {b}; }}",
    "elect {{ arrive {b}; }}",
    "wait {b} parity {p};",
    "wait {b} parity {p};",
    "read {t};",
    "write {t}; fence.proxy.async;",
    "elect {{ arrive_drop {b}; }}",
    "elect {{ umma.commit {b}; }}",
)


def _async_straight(d: Draw) -> str:
    """Two or three warps, each running a few operations drawn at random on two mbarriers and two
    tiles (copies, expect_tx, complete_tx, arrivals, waits, accesses), in a loop of one or two trips."""
    warps = d.integer(2, 3)
    trips = d.integer(1, 2)
    counts = (d.integer(1, 2), d.integer(1, 2))
    lines = [
        "protocol async_straight {",
        f"  param ITERS = {trips};",
        f"  cta threads {32 * warps};",
        f"  role w[{warps}] = warp i;",
        "  smem t[2] bytes 32;",
        f"  mbarrier a count {counts[0]};",
        f"  mbarrier b count {counts[1]};",
        "  if w && instance == 0 { elect { init a; init b; fence.mbarrier_init; } }",
        "  syncthreads;",
        "  for k in 0..ITERS {",
    ]
    for w in range(warps):
        ops = []
        for _ in range(d.integer(1, 4)):
            op = d.choice(_ASYNC_OPS)
            ops.append(op.format(b=d.choice("ab"), n=d.choice([16, 32]), t=f"t[{d.integer(0, 1)}]",
                                 p=d.choice(["0", "1", "k % 2", "(k + 1) % 2"])))
        lines.append(f"    if w && instance == {w} {{ {' '.join(ops)} }}")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


ASYNC_PATTERNS: dict[str, Callable[[Draw], str]] = {"async_ring": _async_ring, "async_straight": _async_straight}


def async_protocols() -> Any:
    """Hypothesis strategy: asynchronous-copy stress protocols as `.sync` text."""
    from hypothesis import strategies

    return strategies.composite(
        lambda draw: (lambda d: ASYNC_PATTERNS[d.choice(sorted(ASYNC_PATTERNS))](d))(HypothesisDraw(draw)))()


def random_async_protocol(seed: int) -> str:
    """An asynchronous-copy stress protocol for one seed (bench/differential.py --generator async)."""
    d = RandomDraw(random.Random(seed))
    return ASYNC_PATTERNS[d.choice(sorted(ASYNC_PATTERNS))](d)


# ---------------------------------------------------------------------------
# Trip-count-derived protocols: params computed from ITERS (min, max, equalities, comparisons,
# divisions, prologue and tail lengths) feeding conditions, counts and loop bounds, plus
# first-iteration arrivals and counter expressions that overflow. They test the all-iterations
# lift's coverage claim (bench/lift_differential.py): each can hide a violation at a few trip
# counts only. Kept apart from PATTERNS, like the asynchronous-copy protocols.

_DERIVED = {
    # name: definition (STAGES and a drawn constant C may appear)
    "PRO": "(ITERS < STAGES) * ITERS + (ITERS >= STAGES) * STAGES",  # CUTLASS k_tile_prologue
    "MX": "(ITERS > C) * ITERS + (ITERS <= C) * C",
    "EQ": "ITERS == C",
    "LT": "ITERS < C",
    "HALF": "ITERS / 2",
    "ROUNDS": "(ITERS + STAGES - 1) / STAGES",
    "ODD": "ITERS % 2",
}


def _derived_ring(d: Draw) -> str:
    """A producer/consumer ring whose params are derived from ITERS and used around its loops."""
    stages = d.integer(1, 3)
    iters = d.integer(1, 5)
    names = sorted({d.choice(sorted(_DERIVED)) for _ in range(d.integer(1, 2))})
    consts = {n: d.integer(0, 6) if not d.flag(0.1) else d.choice([33, 40]) for n in names}
    params = [f"  param {n} = {_DERIVED[n].replace('C', str(consts[n]))};" for n in names]
    tail = d.flag(0.3)
    if tail:
        if "PRO" not in names:
            params.append(f"  param PRO = {_DERIVED['PRO']};")
        params.append("  param TAIL = ITERS - PRO;")

    def cond() -> str:
        n = d.choice(names)
        return d.choice([f"{n} < STAGES", f"{n} == {d.integer(0, 4)}", f"{n} > {d.integer(0, 4)}", f"{n} != 0",
                         f"ITERS >= {d.integer(0, 4)}"])

    empty_count = "32" if not d.flag(0.25) else f"32 + 32 * ({cond()})"
    hi = d.choice(["ITERS", "ITERS", "ITERS", "ITERS - 1", "TRIPS"])
    if hi == "TRIPS":  # the loops' bound is a param derived from ITERS (the lift must follow ITERS)
        params.append(f"  param TRIPS = ITERS + {d.integer(0, 1)};")
    big = d.choice(["0", "0", "0", "1000", "100000000000000000", "1000000000000000000"])
    cidx = "s" if big == "0" else d.choice([f"s + k * {big} * 0", f"s + (k % 2) * {big} * 0"])
    cons_pre = d.choice(["", "", f"if {cond()} {{ read tile[0]; }}", f"if {cond()} {{ read extra; }}",
                         f"for t in 0..{d.choice(names)} {{ read extra; }}"
                         if not set(names) & {"EQ", "LT", "ODD"} else ""])
    done = d.choice(["none", "none", "none", "first", "cond"])
    prod_in = {"first": f"if k == {d.integer(0, 2)} {{ elect {{ arrive done; }} }}"}.get(done, "")
    prod_post = {"cond": f"if {cond()} {{ elect {{ arrive done; }} }}"}.get(done, "")
    cons_post = "wait done parity 0;" if done != "none" else ""
    if tail:
        cons_post += " for t in TAIL..ITERS { read extra; }"
    # last of the draws, so that a seed draws the protocol it drew before this knob, but for the knob's lines: one
    # named barrier reached by both warps from two lines (SV204, a warning) where a condition on the trip count
    # holds, after the loops or at one iteration of them (the lift's warnings against the explicit engine's)
    sites = d.choice(["", "", "", "after", "iteration"])
    site_cond = cond() if sites == "after" else f"k == {d.integer(0, 2)}"
    site = f"if {site_cond} {{ bar.sync 2, 64; }}" if sites else ""
    lines = ["protocol derived {", f"  param STAGES = {stages};", f"  param ITERS = {iters};", *params,
             "  cta threads 64;", "  role prod = warp 0;", "  role cons = warp 1;",
             "  smem tile[STAGES] bytes 256;", "  smem extra bytes 64;",
             "  mbarrier full[STAGES] count 1;", f"  mbarrier empty[STAGES] count {empty_count};",
             "  mbarrier done count 1;",
             "  if prod { elect { init full[*]; init empty[*]; init done; fence.mbarrier_init; } }",
             "  syncthreads;",
             "  if prod {", f"    for k in 0..{hi} {{", "      let s = k % STAGES;",
             "      wait empty[s] parity (k / STAGES + 1) % 2;",
             "      elect { arrive.expect_tx full[s] bytes 256; tma.load tile[s] bytes 256 -> full[s]; }",
             f"      {prod_in}", f"      {site if sites == 'iteration' else ''}", "    }", f"    {prod_post}",
             f"    {site if sites == 'after' else ''}", "  }",
             "  if cons {", f"    {cons_pre}", f"    for k in 0..{hi} {{", "      let s = k % STAGES;",
             "      wait full[s] parity (k / STAGES) % 2;", f"      read tile[{cidx}];", "      arrive empty[s];",
             f"      {site if sites == 'iteration' else ''}", "    }", f"    {cons_post}",
             f"    {site if sites == 'after' else ''}", "  }", "}"]
    return "\n".join(line for line in lines if line.strip()) + "\n"


def trip_protocols() -> Any:
    """Hypothesis strategy: trip-count-derived protocols as `.sync` text."""
    from hypothesis import strategies

    return strategies.composite(lambda draw: _derived_ring(HypothesisDraw(draw)))()


def random_trip_protocol(seed: int) -> str:
    """A trip-count-derived protocol for one seed (bench/lift_differential.py)."""
    return _derived_ring(RandomDraw(random.Random(seed)))
