"""Every cluster of the grid is compared with the extracted one, and extraction runs under --timeout.

A protocol extracted from one cluster covers the grid only when every cluster synchronizes the
same way. Clusters that can differ only through the position registers the kernel reads
(%ctaid, %clusterid) are grouped by those coordinates and one of each group is executed, so the
comparison covers the whole grid without a cap; it runs under the check's clock, and a check
that runs out of time is inconclusive, naming what was not compared.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from syncverify import budget
from syncverify.cli import main
from syncverify.ptx.extract import extract
from syncverify.ptx.launch import Launch
from syncverify.ptx.parse import PtxError, parse_ptx

DATA = Path(__file__).resolve().parent / "data" / "ptx"


def kernel(body: str, name: str = "t.ptx"):  # type: ignore[no-untyped-def]
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
            f"  .reg .b32 %r<8>;\n  .reg .pred %p<4>;\n{body}}}\n")
    return parse_ptx(text, name)


def skipping(reg: str, cta: int):  # type: ignore[no-untyped-def]
    """The CTA whose `reg` is ``cta`` skips its barrier."""
    return kernel(f"""  mov.u32 %r2, {reg};
  setp.eq.u32 %p1, %r2, {cta};
  @%p1 bra $L__BB0_2;
  bar.sync 0;
$L__BB0_2:
  ret;
""")


def test_a_cluster_past_the_sixty_fourth_that_skips_its_wait_is_refused():
    with pytest.raises(PtxError) as err:
        extract(skipping("%ctaid.x", 100), Launch(block=(32, 1, 1), grid=(128, 1, 1)))
    assert "cluster 100 of the grid synchronizes differently" in err.value.message


def test_twin_where_no_cluster_of_the_grid_skips_covers_all_of_them():
    text = extract(skipping("%ctaid.x", 200), Launch(block=(32, 1, 1), grid=(128, 1, 1))).text
    assert "all 128 clusters of the grid synchronize like this one (each executed)" in text


def test_clusters_are_grouped_by_the_position_the_kernel_reads():
    """Only %ctaid.y is read: the clusters of one row run alike, one per row is executed."""
    text = extract(skipping("%ctaid.y", 7), Launch(block=(32, 1, 1), grid=(100, 4, 1))).text
    assert "all 400 clusters of the grid synchronize like this one (4 executed" in text
    with pytest.raises(PtxError) as err:
        extract(skipping("%ctaid.y", 3), Launch(block=(32, 1, 1), grid=(100, 4, 1)))
    assert "cluster 300 of the grid synchronizes differently" in err.value.message


def test_a_kernel_that_reads_no_position_runs_alike_in_every_cluster():
    mod = kernel("  bar.sync 0;\n  ret;\n")
    text = extract(mod, Launch(block=(32, 1, 1), grid=(100000, 1, 1))).text
    assert "all 100000 clusters of the grid synchronize like this one (1 executed" in text


def test_the_comparison_of_clusters_runs_under_the_clock():
    with budget.clock(1e-9), pytest.raises(budget.OutOfBudget) as out:
        extract(skipping("%ctaid.x", 200), Launch(block=(32, 1, 1), grid=(128, 1, 1)))
    assert out.value.kind == budget.TIME and "comparing cluster 1 of the grid's 128" in str(out.value)


class Hang(Exception):
    pass


def cli_check(*args: str, hang: int = 90) -> tuple[int, dict, float]:
    out = io.StringIO()

    def alarm(signum, frame):
        raise Hang(f"no answer after {hang}s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(hang)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["check", *args, "--format", "json"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    (result,) = json.loads(out.getvalue())["results"]
    return rc, result, time.monotonic() - start


@pytest.fixture()
def loop_ptx(tmp_path: Path) -> str:
    """A kernel whose loop runs as many trips as its first parameter says (loop_n.cu, compiled)."""
    path = tmp_path / "loop_n.ptx"
    shutil.copy(DATA / "loop_n.ptx", path)
    return str(path)


def test_timeout_holds_while_extracting_three_million_trips(loop_ptx):
    rc, result, seconds = cli_check(loop_ptx, "--block", "64", "--param", "0=3000000", "--timeout", "3")
    assert rc == 3 and result["verdict"] == "inconclusive" and result["stopped_by"] == "time"
    assert "the kernel was not extracted" in result["coverage"]
    assert seconds < 45


def test_twin_a_thousand_trips_extract_and_check_within_the_timeout(loop_ptx):
    rc, result, seconds = cli_check(loop_ptx, "--block", "64", "--param", "0=1000", "--timeout", "60")
    assert rc == 0 and result["verdict"] == "safe"
    assert seconds < 60
