"""Search-free findings: reported when certain, silent otherwise."""

from syncverify import load
from syncverify.semantics.machine import Machine
from syncverify.static.checks import static_findings

BASE = """protocol st {{
  cluster {cluster};
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  smem t bytes 64;
  mbarrier m count {count};
  mbarrier f count 1;
  if a {{ elect {{ init m; init f; }} }}
  syncthreads;
  if a {{ {arrive} elect {{ arrive.expect_tx f bytes {expect}; tma.load t bytes {copy} -> f; }} }}
  if b {{ wait m parity 0; wait f parity 0; read t; }}
}}
"""


def findings(**kw):
    args = {"cluster": 1, "count": 32, "arrive": "arrive m;", "expect": 64, "copy": 64} | kw
    protocol = load(BASE.format(**args), path="st.sync")
    return {(d.code, d.span.line) for d in static_findings(protocol, Machine(protocol).programs)}


def test_balanced_protocol_has_no_static_finding():
    assert findings() == set()


def test_whole_warp_arrive_beyond_count_is_sv504():
    assert findings(count=1) == {("SV504", 11)}


def test_elected_arrive_within_count_is_fine():
    assert findings(count=1, arrive="elect { arrive m; }") == set()


def test_unequal_constant_bytes_in_one_block_is_sv503():
    assert findings(copy=32) == {("SV503", 11)}


def test_expect_without_any_completion_is_sv503():
    text = BASE.format(cluster=1, count=32, arrive="arrive m;", expect=64, copy=64).replace(
        "tma.load t bytes 64 -> f;", "")
    protocol = load(text, path="st.sync")
    assert {d.code for d in static_findings(protocol, Machine(protocol).programs)} == {"SV503"}


def test_remote_rank_computed_at_run_time_is_left_to_the_search():
    text = BASE.format(cluster=2, count=32, arrive="arrive m @ cta + 1;", expect=64, copy=64)
    protocol = load(text, path="st.sync")
    assert static_findings(protocol, Machine(protocol).programs) == []
