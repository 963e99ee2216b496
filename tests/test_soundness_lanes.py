"""Lanes of one warp and the footprint of shared-memory accesses in PTX extraction (#31).

* Lanes that communicate through shared memory with nothing ordering them (lane i reads what lane
  i+1 wrote, no __syncwarp) were extracted as one warp's `write; read` (each lane its own part):
  safe. Such accesses are written lane by lane now, and the model no longer reads two lanes other
  than lane 0 as ordered (program.lanes_meet_unordered): a race on every engine, refused by the
  Promela export. With __syncwarp() (or __syncthreads()) between them the kernel stays safe, and
  lanes that touch only their own bytes stay one warp-wide access.
* A lane reading only its own element (lane 0 writes buf[0], every lane reads buf[lane]) was SV301:
  the read was a whole-warp read of buf[0]'s slot. Each slot now gets the lanes whose bytes lie in
  it; its twin (lane 0 writes all of buf) stays SV301.
* `st.bulk` was a 4-byte store (its size came from the `.shared::cta` modifier); it is a store of
  its size operand's bytes now, and every load/store's size comes from its type and vector count.

The kernels are tests/data/ptx/lanes/*.cu, compiled with nvcc here (skipped without it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from syncverify.check import Options, check_protocol
from syncverify.lang import load
from syncverify.ptx.extract import compile_cu, extract, load_module
from syncverify.ptx.launch import Launch, Refusal
from syncverify.ptx.parse import parse_ptx

DATA = Path(__file__).parent / "data" / "ptx" / "lanes"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
ENGINES = ("explicit", "z3", "bmc")


@pytest.fixture(scope="module")
def lanes_ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_cu(str(DATA / "lanes.cu"), out_dir=str(tmp_path_factory.mktemp("lanes")))


@pytest.fixture(scope="module")
def bulk_ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    """st_bulk.cu needs sm_100a (st.bulk is PTX ISA 8.6, sm_100)."""
    import subprocess

    out = tmp_path_factory.mktemp("bulk") / "st_bulk.ptx"
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_100a", "-ptx", "-lineinfo", "-o", str(out),
                        str(DATA / "st_bulk.cu")], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"nvcc cannot compile for sm_100a: {r.stderr[-300:]}")
    return str(out)


def _text(ptx: str, kernel: str, block: int) -> str:
    return extract(load_module(ptx), Launch(block=(block, 1, 1)), kernel).text


def _codes(text: str, engine: str) -> tuple[str, set[str]]:
    res = check_protocol(load(text, path="x.sync"), Options(engine=engine, timeout=60))
    return res.verdict.value, {d.code for d in res.diagnostics if d.is_error}


def _body(text: str) -> list[str]:
    return [ln.split("//")[0].strip() for ln in text.splitlines()
            if ln.startswith("    ") and ln.split("//")[0].strip()]


# ---- lanes that touch each other's bytes ------------------------------------------------------------

RACE = {"SV301", "SV302"}  # which of RAW/WAR names a race can differ (docs/language.md §8.3)


@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
def test_neighbour_exchange_without_syncwarp_is_a_race(lanes_ptx: str, engine: str) -> None:
    text = _text(lanes_ptx, "neighbour_no_syncwarp", 32)
    body = _body(text)
    assert body[0] == "write s0 bytes 0 + lane * 4..4 + lane * 4;"  # each lane's own word
    assert "if lane == 1 { read s0 bytes 8..12; }" in body          # lane 1 reads lane 2's word
    verdict, codes = _codes(text, engine)
    assert verdict == "violation" and codes and codes <= RACE


@needs_nvcc
def test_neighbour_exchange_is_not_exported_to_promela(lanes_ptx: str) -> None:
    from syncverify.export import ExportError, export_model

    with pytest.raises(ExportError, match="one lane of a warp meets"):
        export_model(load(_text(lanes_ptx, "neighbour_no_syncwarp", 32), path="x.sync"))


@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
def test_neighbour_exchange_after_syncwarp_stays_safe(lanes_ptx: str, engine: str) -> None:
    text = _text(lanes_ptx, "neighbour_syncwarp", 32)
    assert _body(text) == ["write s0;", "syncwarp;", "read s0;"]
    assert _codes(text, engine) == ("safe", set())


@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
def test_own_elements_stay_one_warp_wide_access(lanes_ptx: str, engine: str) -> None:
    text = _text(lanes_ptx, "own_element", 32)
    assert _body(text) == ["write s0;", "read s0;"]  # no per-lane statements
    assert _codes(text, engine) == ("safe", set())


# ---- a lane reading only its own element -------------------------------------------------------------

@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
def test_lane0_reading_back_its_own_element_is_safe(lanes_ptx: str, engine: str) -> None:
    text = _text(lanes_ptx, "lane0_writes_own", 32)
    body = _body(text)
    assert "if lane == 0 { read s0; }" in body and "if lane >= 1 { read s1; }" in body
    assert _codes(text, engine) == ("safe", set())


@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
def test_lanes_reading_lane0s_writes_stay_a_race(lanes_ptx: str, engine: str) -> None:
    text = _text(lanes_ptx, "lane0_writes_all", 32)
    assert _codes(text, engine) == ("violation", {"SV301"})


# ---- the language: one lane other than lane 0 meeting other lanes ----------------------------------------

_LANES_1_2 = """
protocol lanes_1_2 {{
  cta threads 32;
  smem buf bytes 128;
  if lane >= 1 && lane < 3 {{ write buf bytes lane * 4..lane * 4 + 4; }}
  {between}
  if lane >= 1 && lane < 3 {{ read buf bytes {read}; }}
}}
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("between", "read", "verdict"), [
    ("", "(3 - lane) * 4..(3 - lane) * 4 + 4", "violation"),  # lane 1 reads lane 2's word: was safe
    ("syncwarp;", "(3 - lane) * 4..(3 - lane) * 4 + 4", "safe"),
    ("syncthreads;", "(3 - lane) * 4..(3 - lane) * 4 + 4", "safe"),
    ("", "lane * 4..lane * 4 + 4", "safe"),                    # each lane its own word
])
def test_two_lanes_other_than_lane0_are_not_ordered(engine: str, between: str, read: str, verdict: str) -> None:
    text = _LANES_1_2.format(between=between, read=read)
    got, codes = _codes(text, engine)
    assert got == verdict
    assert (codes <= RACE and codes) if verdict == "violation" else not codes


def test_lanes_meeting_on_one_slot_through_a_per_lane_index_race() -> None:
    """`write b[lane / 2]`: lanes 2 and 3 write b[1], unordered (was safe: both other-lanes accesses)."""
    text = "protocol p { cta threads 32; smem b[16] bytes 16; if lane >= 2 { write b[lane / 2]; } }"
    assert _codes(text, "explicit") == ("violation", {"SV303"})
    assert _codes(text, "bmc") == ("violation", {"SV303"})


def test_lane_condition_names_exactly_the_lanes() -> None:
    from syncverify.ptx.lanes import lane_condition

    assert lane_condition(1) == "lane == 0"
    assert lane_condition(0xFFFFFFFE) == "lane >= 1"
    assert lane_condition(0b1011) == "lane < 2 || lane == 3"
    assert lane_condition(0b11100) == "lane >= 2 && lane < 5"


# ---- footprints: st.bulk and the vector forms ----------------------------------------------------------

@needs_nvcc
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("kernel", "verdict"), [("bulk_race_tail", "violation"), ("bulk_sync_tail", "safe"),
                                                 ("bulk_past_end", "safe")])
def test_st_bulk_stores_its_size_operand(bulk_ptx: str, engine: str, kernel: str, verdict: str) -> None:
    text = _text(bulk_ptx, kernel, 64)
    got, codes = _codes(text, engine)
    assert got == verdict
    assert codes == ({"SV301"} if verdict == "violation" else set())


_TWO_WARPS = """
.version 8.6
.target sm_100a
.address_size 64
.visible .entry k()
{{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<4>;
  .shared .align 16 .b8 buf[2048];
  mov.u32 %r1, %tid.x;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_READ;
  {store}
$L_READ:
  setp.lt.u32 %p2, %r1, 32;
  @%p2 bra $L_END;
  ld.shared.u32 %r4, [buf+{at}];
$L_END:
  ret;
}}
"""


@pytest.mark.parametrize(("store", "at", "verdict"), [
    ("st.shared.v4.u32 [buf], {%r1, %r1, %r1, %r1};", 12, "violation"),   # 16 bytes, not 4
    ("st.shared.v4.u32 [buf], {%r1, %r1, %r1, %r1};", 16, "safe"),
    ("st.shared.v2.u64 [buf], {%rd1, %rd1};", 8, "violation"),
    ("st.shared.v2.f16x2 [buf], {%r1, %r1};", 4, "violation"),            # two 4-byte elements
    ("st.shared.v2.f16x2 [buf], {%r1, %r1};", 8, "safe"),
    ("st.shared.b128 [buf], %rd1;", 12, "violation"),
    ("st.shared.u8 [buf], %r1;", 1, "safe"),
    ("mov.b64 %rd2, 1024;\n  st.bulk.weak.shared::cta [buf], %rd2, 0;", 1020, "violation"),
    ("st.bulk.weak.shared::cta [buf], 1024, 0;", 1024, "safe"),
])
def test_store_footprint_comes_from_its_type_and_vector(store: str, at: int, verdict: str) -> None:
    mod = parse_ptx(_TWO_WARPS.format(store=store, at=at), "t.ptx")
    text = extract(mod, Launch(block=(64, 1, 1)), "k").text
    assert _codes(text, "explicit")[0] == verdict


@pytest.mark.parametrize(("store", "why"), [
    ("st.shared.e4m3x2 [buf], %r1;", "size of the access is not known"),  # never read as 4 bytes
    ("st.shared.v2 [buf], {%r1, %r1};", "size of the access is not known"),
    ("st.bulk.weak.shared::cta [buf], 12, 0;", "not a multiple of 8"),
    ("ld.param.u64 %rd2, [%rd1];\n  st.bulk.weak.shared::cta [buf], %rd2, 0;", "size operand is not known"),
])
def test_an_unknown_or_undefined_size_is_refused(store: str, why: str) -> None:
    mod = parse_ptx(_TWO_WARPS.format(store=store, at=0), "t.ptx")
    with pytest.raises(Refusal, match=why):
        extract(mod, Launch(block=(64, 1, 1)), "k")


_ELECTED_5 = """
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k()
{
  .reg .b32 %r<8>;
  .reg .pred %p<4>;
  .shared .align 16 .b8 buf[128];
  mov.u32 %r1, %tid.x;
  setp.ne.s32 %p1, %r1, 5;
  @%p1 bra $L_READ;
  st.shared.u32 [buf], %r1;
$L_READ:
  setp.ne.s32 %p2, %r1, 0;
  @%p2 bra $L_END;
  ld.shared.u32 %r4, [buf];
$L_END:
  ret;
}
"""


def test_lane5_alone_then_lane0_alone_is_refused() -> None:
    """Lane 5 alone is the protocol's elected lane (lane 0, with what it synchronizes); lane 0 reading
    what lane 5 wrote cannot be written apart from it: refused at the load (it was `elect { write s0; }
    elect { read s0; }`, program order: safe)."""
    mod = parse_ptx(_ELECTED_5, "t.ptx")
    with pytest.raises(Refusal, match=r"lane 0 of warp 0 .* lane 5 of the same warp wrote"):
        extract(mod, Launch(block=(32, 1, 1)), "k")


# ---- the Promela export agrees where it exports -----------------------------------------------------

def _spin(text: str, where: Path) -> str:
    from syncverify.export import export_model
    from syncverify.export.spin import run_spin

    model = export_model(load(text, path="x.sync"))
    return run_spin(model.text, where, timeout=120, memlim_mb=1024, depth=model.max_depth,
                    cc_flags=("-O0",)).verdict


def _needs_spin() -> None:
    from syncverify.export.spin import tools_available

    missing = tools_available()
    if missing is not None:
        pytest.skip(f"SPIN and a C compiler are needed ({missing})")


@needs_nvcc
@pytest.mark.parametrize(("kernel", "verdict"), [("lane0_writes_own", "safe"), ("lane0_writes_all", "violation")])
def test_spin_agrees_on_lane0s_element(lanes_ptx: str, tmp_path: Path, kernel: str, verdict: str) -> None:
    _needs_spin()
    assert _spin(_text(lanes_ptx, kernel, 32), tmp_path) == verdict


@needs_nvcc
@pytest.mark.parametrize(("kernel", "verdict"), [("bulk_race_tail", "violation"), ("bulk_sync_tail", "safe")])
def test_spin_agrees_on_st_bulk(bulk_ptx: str, tmp_path: Path, kernel: str, verdict: str) -> None:
    _needs_spin()
    assert _spin(_text(bulk_ptx, kernel, 64), tmp_path) == verdict
