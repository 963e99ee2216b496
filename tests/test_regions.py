"""Sub-slot regions (`write buf[s] part warp;`, `read buf[s] bytes 0..1024;`).

Accesses to disjoint parts of a slot never race; a part overlaps the whole slot; byte ranges
overlap exactly (half-open). Identical warps that each touch their own part stay symmetric, and
the reductions keep every verdict. The explicit engine and bmc share the definition
(semantics/families/regions.py) and must agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import syncverify
from syncverify.check import Options, check_protocol
from syncverify.cli import main
from syncverify.engines.explicit import Budget, explore
from syncverify.result import Verdict
from syncverify.semantics.families.regions import OWN_WARP, OWN_WARPGROUP, WHOLE, Parts, explicit
from syncverify.semantics.machine import Machine
from syncverify.semantics.symmetry import symmetry_groups

SPECS = Path(__file__).resolve().parent.parent / "specs"
BUDGET = Budget(max_states=50_000, seconds=60)


def _protocol(body: str, warps: int = 2, extra: str = "") -> str:
    return f"""protocol t {{
  cta threads {32 * (warps + 1)};
  role w = warps 0..{warps};
  role other = warp {warps};
  smem buf bytes 4096;
  {extra}
{body}
}}
"""


def _codes(text: str, engine: str = "explicit") -> set[str]:
    res = check_protocol(syncverify.load(text, path="t.sync"), Options(engine=engine, timeout=120))
    assert res.verdict in (Verdict.SAFE, Verdict.VIOLATION), res.coverage
    return {d.code for d in res.diagnostics if d.is_error}


# (body, codes): each race case sits next to the near twin that must stay clean.
CASES = {
    "own parts": ("  if w { write buf part warp; }", set()),
    "same part of a warpgroup": ("  if w { write buf part warpgroup; }", {"SV303"}),
    "one range by two warps": ("  if w { write buf bytes 0..1024; }\n  if other { write buf bytes 1024..2048; }",
                               {"SV303"}),
    "adjacent ranges, one writer each": ("  if other { write buf bytes 1024..2048; }\n"
                                         "  if w { first thread { write buf bytes 0..1024; } }", set()),
    "ranges overlapping by one byte": ("  if other { write buf bytes 1023..2048; }\n"
                                       "  if w { first thread { write buf bytes 0..1024; } }", {"SV303"}),
    "part against the whole slot": ("  if w { write buf part warp; }\n  if other { read buf; }", {"SV301", "SV302"}),
    "part against a range in another part": (
        "  if w { write buf part warp; }\n  if other { read buf bytes 2048..4096; }", {"SV301", "SV302"}),
}


@pytest.mark.parametrize("name", CASES)
def test_races_follow_the_bytes(name):
    body, codes = CASES[name]
    found = _codes(_protocol(body))
    if codes:
        assert found & codes and found <= codes | {"SV301", "SV302", "SV303"}, found
    else:
        assert found == set(), found


def test_a_warps_range_read_of_its_own_part_is_clean_and_of_a_siblings_is_a_race():
    # warp 0 owns bytes 0..2048 of the 4096, warp 1 owns 2048..4096 (two warps of role w)
    own = _protocol("  if w { write buf part warp; read buf bytes 0..16; }", extra="")
    assert _codes(own.replace("read buf bytes 0..16;", "read buf part warp;")) == set()
    assert _codes(own) & {"SV301", "SV302"}  # warp 1 reads bytes of warp 0's part, unordered


def test_parts_split_the_slot_exactly():
    text = _protocol("  if w { write buf part warp; }", warps=3)
    machine = Machine(syncverify.load(text, path="t.sync"))
    parts: Parts = machine.parts
    assert [parts.bytes(OWN_WARP, p, 4096) for p in range(3)] == [(0, 1365), (1365, 2730), (2730, 4096)]
    assert parts.bytes(OWN_WARP, 3, 4096) == (0, 4096)  # the only warp of role `other`
    assert parts.bytes(WHOLE, 0, 4096) == (0, 4096)
    assert parts.overlap(explicit(0, 1024), 0, explicit(1023, 2048), 1, 4096)
    assert not parts.overlap(explicit(0, 1024), 0, explicit(1024, 2048), 1, 4096)
    assert not parts.overlap(OWN_WARP, 0, OWN_WARP, 1, 4096)
    assert parts.overlap(OWN_WARP, 0, WHOLE, 1, 4096)
    assert parts.covers(WHOLE, 0, OWN_WARP, 1, 4096) and not parts.covers(OWN_WARP, 0, WHOLE, 1, 4096)
    # fewer bytes than parts: not split (no warp gets an empty part that would overlap nothing)
    assert [parts.bytes(OWN_WARP, p, 2) for p in range(3)] == [(0, 2)] * 3


TWO_WARPGROUPS = """protocol t {
  cta threads 256;
  role w = warps 0..8;
  smem buf bytes 4096;
  if w { write buf part warpgroup; }
}
"""


def test_warpgroup_parts_are_shared_by_the_warps_of_a_warpgroup():
    text = TWO_WARPGROUPS
    parts = Machine(syncverify.load(text, path="t.sync")).parts
    assert {parts.bytes(OWN_WARPGROUP, p, 4096) for p in range(4)} == {(0, 2048)}
    assert {parts.bytes(OWN_WARPGROUP, p, 4096) for p in range(4, 8)} == {(2048, 4096)}


def test_a_range_outside_the_slot_at_run_time_is_sv104():
    text = _protocol("  if w { for i in 0..3 { first thread { write buf bytes i * 2048..(i + 1) * 2048; } } }")
    assert _codes(text) == {"SV104"}
    assert _codes(text.replace("0..3", "0..2")) == set()


# ---- symmetry ----------------------------------------------------------------------------

def _groups(text: str) -> list[list[int]]:
    machine = Machine(syncverify.load(text, path="t.sync"))
    return symmetry_groups(machine.procs, machine.programs)


def test_warps_writing_their_own_parts_stay_symmetric():
    assert _groups(_protocol("  if w { write buf part warp; }", warps=4)) == [[0, 1, 2, 3]]


def test_parts_that_a_range_can_tell_apart_are_not_swapped():
    # warp 0's part overlaps bytes 0..16, warp 1's does not: swapping them would not map states to states
    assert _groups(_protocol("  if w { write buf part warp; }\n  if other { read buf bytes 0..16; }", warps=4)) == []
    # a range on another buffer does not matter
    other_buf = _protocol("  if w { write buf part warp; }\n  if other { read buf2 bytes 0..16; }", warps=4,
                          extra="smem buf2 bytes 64;")
    assert _groups(other_buf) == [[0, 1, 2, 3]]


CLUSTER_PARTS = """protocol t {
  cluster 2;
  cta threads 128;
  role w = warps 0..4;
  smem buf bytes 4096;
  if w { write buf part warp; }
}
"""


def test_each_ctas_parts_stay_symmetric_unless_a_peer_writes_them():
    assert sorted(_groups(CLUSTER_PARTS)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # a part written into the peer CTA's buffer overlaps the peer's own warp with the same index
    remote = CLUSTER_PARTS.replace("write buf part warp;", "write buf part warp; write buf part warp @ cta ^ 1;")
    assert _groups(remote) == []


def test_warpgroup_parts_swap_only_within_a_warpgroup():
    text = TWO_WARPGROUPS
    assert sorted(_groups(text)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


REDUCTION_CASES = {
    "spec": (SPECS / "cutlass_epilogue_warp_parts.sync").read_text(),
    "same part": (SPECS / "cutlass_epilogue_same_part.sync").read_text(),
    "store before the barrier": (SPECS / "cutlass_epilogue_store_before_bar.sync").read_text(),
    "parts and a range": _protocol("  if w { write buf part warp; fence.proxy.async; bar.sync 1, 96; }\n"
                                   "  if other { bar.sync 1, 96; read buf bytes 0..16; write buf bytes 2048..2064; }",
                                   warps=2),
    "parts and a late range": _protocol("  if w { write buf part warp; bar.sync 1, 64; }\n"
                                        "  if other { read buf bytes 2040..2050; }", warps=2),
}


@pytest.mark.parametrize("name", REDUCTION_CASES)
def test_reduced_and_unreduced_searches_agree(name):
    """Partial-order reduction and symmetry on, against neither: same verdict and codes, and
    no more states."""
    protocol = syncverify.load(REDUCTION_CASES[name], path=f"{name}.sync", defines=None)
    if "ITERS" in protocol.loop_params:
        protocol = syncverify.load(REDUCTION_CASES[name], path=f"{name}.sync", defines={"ITERS": 1})
    reduced = explore(protocol, BUDGET, Machine(protocol), symmetry=True)
    full = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert reduced.verdict == full.verdict != Verdict.INCONCLUSIVE
    fam = lambda r: {"SV30x" if d.code in ("SV301", "SV302") else d.code for d in r.diagnostics if d.is_error}  # noqa: E731
    assert fam(reduced) <= fam(full) and bool(fam(reduced)) == bool(fam(full))
    assert reduced.stats.states <= full.stats.states


def test_symmetry_shrinks_the_epilogue_search():
    protocol = syncverify.load(str(SPECS / "cutlass_epilogue_warp_parts.sync"), {"ITERS": 1})
    sym = explore(protocol, BUDGET, Machine(protocol), symmetry=True, reduce=False)
    plain = explore(protocol, BUDGET, Machine(protocol), symmetry=False, reduce=False)
    assert sym.verdict == plain.verdict == Verdict.SAFE
    assert sym.stats.states < plain.stats.states


# ---- bmc ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["own parts", "same part of a warpgroup", "adjacent ranges, one writer each",
                                  "ranges overlapping by one byte", "part against a range in another part"])
def test_bmc_agrees_with_the_explicit_engine_on_regions(name):
    text = _protocol(CASES[name][0])
    ref, got = _codes(text), _codes(text, "bmc")
    assert bool(ref) == bool(got) and got <= ref | ({"SV301", "SV302"} if ref & {"SV301", "SV302"} else set())


def test_bmc_pairs_warps_writing_their_own_parts_and_not_those_a_range_tells_apart():
    from syncverify.engines.bmc import BMC

    own = _protocol("  if w { write buf part warp; }", warps=3)
    pairs = BMC(Machine(syncverify.load(own, path="t.sync"))).enc.symmetric_pairs()
    assert [(a, b) for a, b, _ in pairs] == [(0, 1), (0, 2), (1, 2)]
    told = _protocol("  if w { write buf part warp; }\n  if other { read buf bytes 0..16; }", warps=3)
    assert BMC(Machine(syncverify.load(told, path="t.sync"))).enc.symmetric_pairs() == []


# ---- input errors and the other back ends ---------------------------------------------------

@pytest.mark.parametrize("stmt, code, message", [
    ("write buf part lane;", "SV110", "`part lane`: a slot is split by `part warp` or `part warpgroup`"),
    ("write buf bytes 0..5000;", "SV104", "bytes 0..5000 is not a non-empty range inside `buf`'s 4096-byte slots"),
    ("write buf bytes 64..64;", "SV104", "bytes 64..64 is not a non-empty range"),
    ("write buf part warp bytes 0..16;", "SV110", "an access takes `part ...` or `bytes LO..HI`, not both"),
    ("tma.store buf part warp;", "SV110", "`tma.store` does not take `part warp`"),
])
def test_bad_regions_are_input_errors(stmt, code, message, tmp_path, capsys):
    path = tmp_path / "bad.sync"
    path.write_text(_protocol(f"  if w {{ {stmt} }}"))
    rc = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out + err
    assert f"{path}:7:" in out and code in out and message in out and "^" in out




def _spin_verdict(text: str, where: Path) -> tuple[str, str | None]:
    """SPIN on the exported model (skipped without spin and a C compiler)."""
    from syncverify.export import export_model
    from syncverify.export.spin import run_spin, tools_available

    if tools_available() is not None:
        pytest.skip(f"needs spin and a C compiler ({tools_available()})")
    model = export_model(syncverify.load(text, path="t.sync"))
    spin = run_spin(model.text, where, timeout=60, memlim_mb=512, depth=model.max_depth, cc_flags=("-O0",))
    return spin.verdict, spin.code


@pytest.mark.parametrize("name", ["own parts", "same part of a warpgroup", "adjacent ranges, one writer each",
                                  "ranges overlapping by one byte", "part against a range in another part"])
def test_spin_agrees_on_the_exported_regions(name, tmp_path):
    text = _protocol(CASES[name][0])
    verdict, code = _spin_verdict(text, tmp_path / "spin")
    codes = _codes(text)
    assert verdict == ("violation" if codes else "safe")
    if codes:
        assert code in codes | {"SV301", "SV302", "SV303"}


def test_a_range_of_loop_variables_is_exported_per_iteration(tmp_path):
    """Each iteration writes the next 1024 bytes: clean; with a stride of 1536 the second overlaps."""
    body = ("  if other { for i in 0..2 { write buf bytes STRIDE * i..STRIDE * i + 1024; } }\n"
            "  if w { first thread { write buf bytes 2048..4096; } }")
    for stride, race in ((1024, False), (1536, True)):
        text = _protocol(body.replace("STRIDE", str(stride)))
        assert bool(_codes(text)) == race
        assert _spin_verdict(text, tmp_path / f"spin{stride}")[0] == ("violation" if race else "safe")
