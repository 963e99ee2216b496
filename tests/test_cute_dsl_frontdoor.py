"""CuTe DSL kernels checked from the call that launches them (syncverify.cute_dsl), without a GPU: the DSL
compiles for sm_90a with no device and keeps its PTX; the launch is recorded as the host function makes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("cutlass.cute")
np = pytest.importorskip("numpy")

from cutlass.cute.runtime import from_dlpack  # noqa: E402

from syncverify import cute_dsl  # noqa: E402

DATA = Path(__file__).parent / "data" / "cute_dsl"
sys.path.insert(0, str(DATA))

import kernels  # noqa: E402


def test_the_dsl_elementwise_add_example_is_checked_at_its_launch():  # type: ignore[no-untyped-def]
    """The notebook's naive elementwise add on 64x64 halves: 256 threads, 16 CTAs, no synchronization to
    get wrong -- safe, at the launch its host function makes."""
    a = np.zeros((64, 64), dtype=np.float16)
    got = cute_dsl.check(kernels.naive_elementwise_add, from_dlpack(a), from_dlpack(a), from_dlpack(a))
    assert got.safe, got.render()
    assert got.compiled.launch.block == (256, 1, 1) and got.compiled.launch.grid == (16, 1, 1)


@pytest.mark.parametrize("sync", [True, False])
def test_a_shared_rotation_needs_its_sync_threads(sync):  # type: ignore[no-untyped-def]
    """With `sync_threads` between each thread's write and its neighbour's read: safe. Without: SV301 at
    the read, on the kernel's Python line, with the write as the other access."""
    a = np.zeros(256, dtype=np.float32)
    got = cute_dsl.check(kernels.rotate, from_dlpack(a), from_dlpack(a), SYNC=sync)
    assert got.compiled.launch.grid == (2, 1, 1) and got.compiled.launch.dynamic_smem == 1024
    if sync:
        assert got.safe, got.render()
        return
    assert got.unsafe
    d = got.result.diagnostics[0]
    src = (DATA / "kernels.py").read_text().splitlines()
    assert d.code == "SV301" and d.span is not None and Path(d.span.path).name == "kernels.py"
    assert "buf[(tidx + 1) % 128]" in src[d.span.line - 1]
