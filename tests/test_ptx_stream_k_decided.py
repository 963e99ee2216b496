"""CUTLASS's stream-K GEMM over its whole grid, decided (#34, #36): with the persistent set of one CTA's
steps (engines/reduction/cta_local.py) the two CTAs' pipelines cost a sum, not a product.

The kernel, its host output and its seeds are those of tests/test_ptx_stream_k.py (the committed PTX of
tests/data/ptx/sm90_gemm_coop_streamk.cu, CUTLASS 4.2.0.0 as it ships; two stream-K units of 8 k-tiles on
one 128x128 tile). Each search takes minutes of a loaded two-core host with the extraction, so these run
with SYNCVERIFY_SLOW=1; bench/RESULTS-ptx.md has the measured states and CPU times.
"""

from __future__ import annotations

import os
import re

import pytest
from test_ptx_stream_k import _streamk_args

from syncverify.cli import main

SLOW = pytest.mark.skipif(not os.environ.get("SYNCVERIFY_SLOW"),
                          reason="a search over two whole GEMM CTAs with its extraction takes minutes on a two-core "
                                 "host; run with SYNCVERIFY_SLOW=1")


def _run(tmp_path, capsys, seed: str = "", host: str | None = None) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    import test_ptx_stream_k as base

    old = base.HOST
    if host is not None:
        base.HOST = host
    try:
        ptx, args = _streamk_args(tmp_path, seed)
    finally:
        base.HOST = old
    rc = main(["check", str(ptx), *args, "--timeout", "3000"])
    return rc, capsys.readouterr().out


@SLOW
def test_the_stream_k_gemm_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    rc, out = _run(tmp_path, capsys)
    assert rc == 0 and re.search(r"\): safe", out), out
    assert not re.search(r"\bSV(?!204)\d{3}\b", out), out  # no finding but SV204 warnings


@SLOW
def test_the_split_k_twin_is_safe(tmp_path, capsys):  # type: ignore[no-untyped-def]
    rc, out = _run(tmp_path, capsys, host="sm90_gemm_coop_streamk_host_128x128x128_split2")
    assert rc == 0 and re.search(r"\): safe", out), out


@SLOW
def test_the_fixup_without_its_wait_races_at_the_partials(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """The final unit adds the peer's partials (functional.h's plus, reading them through block_striped.h) with no
    wait_eq before: a race with the peer's store of them (block_striped.h), one per stripe of warpgroup 0."""
    rc, out = _run(tmp_path, capsys, "_no_wait")
    assert rc == 1, out
    assert re.search(r"functional\.h:\d+:\d+: SV301 RAW race on g\[0\]: read by consumer0\[0\]\.w4@cta1 is not "
                     r"ordered with the write at block_striped\.h:\d+ by consumer0\[0\]\.w4@cta0", out), out


@SLOW
def test_a_count_never_reached_deadlocks_at_barrier_h(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """warpgroup 0's wait_eq for 9 where the peer's arrive_inc adds 8: the deadlock names the lock, the value and
    its writer, at cutlass/barrier.h's spin."""
    rc, out = _run(tmp_path, capsys, "_flag_count")
    assert rc == 1, out
    assert re.search(r"barrier\.h:\d+:\d+: SV801 deadlock through global memory: .*wait\.until flags\[0\] == 9 — "
                     r"flags\[0\] is 8; written by", out), out
