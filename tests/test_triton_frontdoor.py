"""Triton and Gluon kernels checked from their Python call (syncverify.triton), and the autotune guard.

No GPU: each call is compiled by Triton for sm_90 and mapped to its launch -- threads, grid, the integers
that decide control flow, the tensor descriptors' boxes -- then extracted and checked. The matmul is the
one tests/test_ptx_triton.py checks from committed PTX with a hand-written launch; here the same verdicts
come from the call alone. The Gluon ring sum (tests/data/triton/ring_sum.py) computes its ring position
as `k & (NUM_STAGES - 1)`: right for 2 and 4 stages, wrong for 3, and its autotune config set holds all three.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon")

from syncverify import triton as svt

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA / "ptx" / "triton"))
sys.path.insert(0, str(DATA / "triton"))

import ring_sum  # noqa: E402
import triton  # noqa: E402
from tma_matmul import tma_matmul  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

RING = DATA / "triton" / "ring_sum.py"


def _matmul(k: int, stages: int) -> svt.TritonCheck:
    a, b, c = svt.tensor([128, k]), svt.tensor([128, k]), svt.tensor([128, 128])
    return svt.check(tma_matmul, (1, 1), TensorDescriptor.from_tensor(a, [128, 64]),
                     TensorDescriptor.from_tensor(b, [128, 64]), TensorDescriptor.from_tensor(c, [128, 128]),
                     128, 128, k, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=stages, num_warps=4)


@pytest.mark.parametrize(("stages", "k"), [(3, 256), (4, 512), (3, 64)])
def test_the_triton_matmul_is_checked_from_its_call(stages, k):  # type: ignore[no-untyped-def]
    """The hand-written harness's verdict (safe at K=256 with 3 stages, K=512 with 4) from the call alone;
    the twin with a single k tile, fewer than the stages, keeps it. The launch is Triton's: K is the
    18th parameter, A's box is 128x64 fp16."""
    got = _matmul(k, stages)
    la = got.compiled.launch
    assert got.safe, got.render()
    assert la.block == (128, 1, 1) and la.grid == (1, 1, 1)
    assert la.params["tma_matmul_param_17"] == k and got.compiled.labels["tma_matmul_param_17"] == "K"
    assert la.tensor_bytes[("tma_matmul_param_0", 0)] == 128 * 64 * 2
    assert f"K={k}" in got.result.bound and "boxes a_desc=16384 bytes" in got.result.bound


def test_a_descriptor_box_is_the_one_triton_encodes():  # type: ignore[no-untyped-def]
    """C's block is 128x128 fp16, but a 128-byte swizzle holds 64 halves a row: Triton's launcher encodes a
    128x64 box (tensordesc_meta) and stores the tile in two copies. The box is the encoded one."""
    got = _matmul(256, 3)
    assert got.compiled.metadata["tensordesc_meta"][2]["block_size"] == [128, 64]
    assert got.compiled.launch.tensor_bytes[("tma_matmul_param_10", 0)] == 128 * 64 * 2


def _ring_call(stages: int) -> tuple[tuple, dict]:  # type: ignore[type-arg]
    x, out = svt.tensor([128, 1024]), svt.tensor([128], "fp32")
    desc = GluonDescriptor.from_tensor(x, [128, 64], gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16))
    return (desc, out, 512), {"BLOCK_M": 128, "BLOCK_K": 64, "NUM_STAGES": stages, "num_warps": 4}


def _line_of(text: str) -> int:
    return next(i for i, ln in enumerate(RING.read_text().splitlines(), 1) if text in ln)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_gluon_ring_is_safe_only_with_a_power_of_two_stages(stages):  # type: ignore[no-untyped-def]
    """3 stages: slot 2 is refilled (tile 3 lands at 3 & 2 = 2) before tile 2 was waited for -- SV504 at
    the refill's `mbarrier.expect`, the user's line (an arrival with none pending; the same arrival lands in an
    unobserved phase, the SV505 warning there). 2 and 4 stages: safe."""
    args, kwargs = _ring_call(stages)
    got = svt.check(ring_sum.ring_sum_kernel, (1,), *args, **kwargs)
    if stages == 3:
        assert got.unsafe
        first = got.result.diagnostics[0]
        assert first.code == "SV504" and first.span is not None
        assert any(d.code == "SV505" and d.span.line == first.span.line for d in got.result.diagnostics)
        assert (Path(first.span.path).name, first.span.line) == (RING.name, _line_of("mbarrier.expect(ready.index(ns)"))
    else:
        assert got.safe, got.render()


def _autotuned(configs, monkeypatch):  # type: ignore[no-untyped-def]
    """The ring sum autotuned over `configs`, guarded, with what would touch a GPU recorded instead:
    each launch (the JITFunction's run) and each benchmark (the autotuner's do_bench, which only launches)."""
    kernel = svt.guard(triton.autotune(configs=configs, key=["K"])(ring_sum.ring_sum_kernel), report=lambda s: None)
    launched: list[int] = []
    monkeypatch.setattr(ring_sum.ring_sum_kernel, "run", lambda *a, **kw: launched.append(kw["NUM_STAGES"]),
                        raising=False)

    def bench(call, quantiles):  # type: ignore[no-untyped-def]
        call()
        return [float(launched[-1]), 0.0, 0.0]

    kernel._do_bench = bench
    return kernel, launched


def test_the_autotune_guard_drops_the_hanging_config_before_any_launch(monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own Autotuner.run, with the ring sum's three configs: the 3-stage one is dropped by the
    guard before anything is benchmarked; 2 and 4 are benchmarked and the faster launched."""
    kernel, launched = _autotuned(ring_sum.CONFIGS, monkeypatch)
    args, _ = _ring_call(0)
    kernel[(1,)](*args, BLOCK_M=128)
    assert 3 not in launched and set(launched) == {2, 4}
    assert kernel.best_config.kwargs["NUM_STAGES"] == 2  # the recorded timing is the stage count
    assert launched[-1] == 2
    decided = {c.kwargs["NUM_STAGES"]: ch for c, ch in kernel.syncverify_guard.checks}
    assert decided[3].unsafe and decided[2].safe and decided[4].safe


def test_a_lone_hanging_config_is_never_launched(monkeypatch):  # type: ignore[no-untyped-def]
    """With one config Triton does not prune: the guard checks it before the launch and refuses it; the
    twin with a safe lone config is launched."""
    args, _ = _ring_call(0)
    bad, launched = _autotuned([c for c in ring_sum.CONFIGS if c.kwargs["NUM_STAGES"] == 3], monkeypatch)
    with pytest.raises(svt.UnsafeConfigs, match=r"NUM_STAGES: 3.*ring_sum.py:\d+:\d+: SV504"):
        bad[(1,)](*args, BLOCK_M=128)
    assert launched == []
    good, launched = _autotuned([c for c in ring_sum.CONFIGS if c.kwargs["NUM_STAGES"] == 4], monkeypatch)
    good[(1,)](*args, BLOCK_M=128)
    assert launched == [4]


def test_a_call_that_does_not_fit_the_kernel_says_so():  # type: ignore[no-untyped-def]
    with pytest.raises(svt.CallError, match="does not match tma_matmul"):
        svt.check(tma_matmul, (1,), 1, 2)
    with pytest.raises(svt.CallError, match=r"not a @triton\.jit"):
        svt.check(ring_sum.ring_sum, (1,))
