"""The Python API: build a protocol in code, check it, read results and traces (examples/build_ring.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import syncverify
from syncverify import Options, ProtocolBuilder, Span, Verdict, check_protocol, load
from syncverify.builder import BuildError, Obj, Term
from syncverify.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "build_ring.py"


def _example():
    spec = importlib.util.spec_from_file_location("build_ring", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shape(x):
    """An IR value with every span (and the names that say where the text came from) left out."""
    if isinstance(x, Span):
        return None
    if dataclasses.is_dataclass(x):
        return (type(x).__name__, tuple((f.name, _shape(getattr(x, f.name))) for f in dataclasses.fields(x)
                                        if f.name not in ("span", "name", "path", "source", "expect")))
    if isinstance(x, (tuple, list)):
        return tuple(_shape(v) for v in x)
    if isinstance(x, frozenset):
        return frozenset(_shape(v) for v in x)
    return x


def test_example_runs_and_reports_the_race():
    out = subprocess.run([sys.executable, str(EXAMPLE), "--iters", "5", "--stages", "2"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the bounded check at ITERS=5 is lifted to every trip count by the default engine
    assert lines[0].startswith("cutlass_ws_ring: safe (bound all-iterations")
    assert lines[1] == "cutlass_ws_ring_no_empty_wait: violation ['SV302', 'SV303', 'SV504', 'SV505']"
    assert "SV302 at line" in out.stdout and "WAR race on tile[" in out.stdout
    assert "tma.load tile[s] bytes BYTES -> full[s];" in out.stdout  # trace steps quote the generated lines


def test_builder_gives_the_ir_of_the_spec_file():
    built = _example().ring().build()
    from_file = load(ROOT / "specs" / "cutlass_ws_ring.sync")
    assert _shape(built) == _shape(from_file)
    assert built.path == "<builder:cutlass_ws_ring>"
    assert built.expect is not None and not built.expect.errors


def test_structured_results_point_into_the_generated_source():
    example = _example()
    good, bad = example.ring(stages=2, iters=3), example.ring(wait_empty=False, stages=2, iters=3)
    safe = check_protocol(good.build(), Options())
    assert safe.verdict is Verdict.SAFE and safe.diagnostics == () and safe.bound == "all-iterations"
    bounded = check_protocol(good.build(), Options(engine="explicit"))
    assert bounded.verdict is Verdict.SAFE and bounded.bound == "ITERS=3"
    result = check_protocol(bad.build(), Options(full_trace=True))
    assert result.verdict is Verdict.VIOLATION
    assert {"SV302", "SV504"} <= result.codes()
    race = next(d for d in result.diagnostics if d.code == "SV302")
    lines = bad.source.splitlines()
    assert race.span is not None and race.span.path == bad.path
    assert lines[race.span.line - 1].strip().startswith("tma.load tile[s]")
    assert race.trace and race.trace[-1].line == race.span.line
    for step in race.trace:
        if step.role != "async agent":
            assert step.op and step.op in lines[step.line - 1], (step, lines[step.line - 1])


def test_written_text_is_a_spec_that_check_accepts(tmp_path, capsys):
    example = _example()
    good = example.ring(stages=2, iters=3).save(tmp_path / "ring.sync")
    bad = example.ring(wait_empty=False, stages=2, iters=3).save(tmp_path / "ring_bug.sync")
    assert main(["check", "--expect", str(good), str(bad)]) == 0, capsys.readouterr()


def test_front_end_errors_quote_the_generated_line():
    b = ProtocolBuilder("broken")
    b.cta_threads(64)
    b.smem("tile", 4096)
    line = b.read(Obj("tiel", "buffer", None), comment="from tile_op #7")
    with pytest.raises(BuildError) as info:
        b.build()
    err = info.value
    assert isinstance(err, syncverify.InputError)
    (d,) = err.diagnostics
    assert d.code == "SV101" and d.span is not None and d.span.line == line and d.span.path == "<builder:broken>"
    assert f"{line} | read tiel;  // from tile_op #7" in str(err)


def test_misuse_is_refused_at_once():
    b = ProtocolBuilder("misuse")
    k = Term("k")
    with pytest.raises(TypeError, match="eq"):
        b.if_(k == 0).__enter__()  # Python's == is not the language's
    with pytest.raises(TypeError, match="truth value"):
        bool(k < 2)
    with pytest.raises(ValueError, match="identifier"):
        b.param("2x", 1)
    with pytest.raises(ValueError, match="reserved"):
        b.param("cta", 1)
    b.cta_threads(32)
    with b.elect(), pytest.raises(ValueError, match="top level"):
        b.smem("late", 16)
    with pytest.raises(ValueError, match="else_"):
        b.else_().__enter__()


def test_expressions_keep_the_language_meaning():
    b = ProtocolBuilder("exprs")
    n = b.param("N", 7)
    b.cta_threads(64)
    who = b.role("w", "warp", 0, 2)  # warps 0..2
    buf = b.smem("buf", 16, slots=4)
    with b.if_(who.and_(syncverify.builder.INSTANCE.eq(0))), b.for_("k", 0, n) as k:
        b.read(buf[(-k / 2 + n) % 4])
        with b.if_((k < 3).or_(k >= 5)):
            b.read(buf[k % 4])
        with b.else_():
            b.read(buf[(k - 1 - 1) % 4])
    text = b.source
    assert "read buf[(-k / 2 + N) % 4];" in text
    assert "if k < 3 || k >= 5 {" in text and "} else {" in text
    assert "read buf[(k - 1 - 1) % 4];" in text
    assert check_protocol(b.build(), Options()).verdict is Verdict.SAFE
    assert b.build({"N": 3}).param("N") == 3


def test_every_operation_writes_its_language_form():
    b = ProtocolBuilder("ops")
    b.cluster(2)
    b.cta_threads(128)
    wg = b.role("wg", "warpgroup", 0)
    buf = b.smem("buf", 1024, slots=2)
    bar = b.mbarrier("bar", count=1)
    nb = b.named("nb", 1, count=128)
    forms = {
        b.init(bar, 2): "init bar count 2;",
        b.inval(bar): "inval bar;",
        b.arrive(bar, 2, sem="release", scope="cluster", remote=1): "arrive.release.cluster bar count 2 @ 1;",
        b.arrive_expect_tx(bar, 1024): "arrive.expect_tx bar bytes 1024;",
        b.arrive_drop(bar, bytes=16): "arrive_drop.expect_tx bar bytes 16;",
        b.expect_tx(bar, 32, remote=syncverify.builder.CTA ^ 1): "expect_tx bar bytes 32 @ cta ^ 1;",
        b.complete_tx(bar, 32): "complete_tx bar bytes 32;",
        b.wait(bar, 0, sem="acquire", scope="cluster"): "wait.acquire.cluster bar parity 0;",
        b.syncthreads(): "syncthreads;",
        b.syncwarp(): "syncwarp;",
        b.bar_sync(nb): "bar.sync nb;",
        b.bar_arrive(3, 64): "bar.arrive 3, 64;",
        b.cluster_arrive(relaxed=True): "cluster.arrive.relaxed;",
        b.cluster_wait(): "cluster.wait;",
        b.cluster_sync(): "cluster.sync;",
        b.read(buf[1], remote=0): "read buf[1] @ 0;",
        b.write(buf[0]): "write buf[0];",
        b.tma_load(buf[0], bar, bytes=512, multicast=3): "tma.load buf[0] bytes 512 -> bar multicast 3;",
        b.tma_store(buf[1]): "tma.store buf[1];",
        b.bulk_commit(): "bulk.commit;",
        b.bulk_wait_read(): "bulk.wait_read 0;",
        b.wgmma_read(buf[0]): "wgmma.read buf[0];",
        b.wgmma_commit(): "wgmma.commit;",
        b.wgmma_wait(1): "wgmma.wait 1;",
        b.fence_proxy_async(): "fence.proxy.async;",
        b.fence_mbarrier_init(): "fence.mbarrier_init;",
        b.tmem_alloc(cta_group=2, cols=64): "tmem.alloc cta_group 2 cols 64;",
        b.tmem_alloc(cta_group=2, cols=64, dealloc=True): "tmem.dealloc cta_group 2 cols 64;",
        b.umma_commit(bar, multicast=3): "umma.commit bar multicast 3;",
        b.op("arrive.relaxed.cluster", bar, remote=1): "arrive.relaxed.cluster bar @ 1;",
    }
    lines = b.source.splitlines()
    for line, text in forms.items():
        assert lines[line - 1].strip() == text
    assert "role wg = warpgroup 0;" in b.source and "named nb id 1 count 128;" in b.source
    protocol = b.build()  # every form is accepted by the front end
    assert {s.span.line for s in protocol.body} == set(forms)
    assert wg.text == "wg"


def test_the_api_page_examples_run(monkeypatch, capsys):
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 4
    monkeypatch.chdir(ROOT)  # the extraction example names a file of the repository by its relative path
    ns: dict = {}
    for block in blocks:
        exec(block, ns)
    assert "protocol" in ns["ex"].text and ns["result"].verdict is Verdict.SAFE  # the extracted ring is correct
    capsys.readouterr()
    for block in blocks[:3]:
        exec(block, ns)
    assert ns["protocol"].name == "ring" and ns["protocol"].param("ITERS") == 6
    assert ns["result"].verdict is Verdict.SAFE
    assert ns["page"].startswith("<!DOCTYPE html>") and "one schedule of the model" in ns["page"]


def test_tcgen05_forms_through_the_builder():
    """`tmem` regions and the tcgen05 operations (through `op`) build the language text and a protocol."""
    b = ProtocolBuilder("tc")
    b.cta_threads(64)
    mma = b.role("mma", "warp", 0)
    epi = b.role("epi", "warp", 1)
    a = b.smem("a", 1024)
    acc = b.tmem("acc", 128, slots=2)
    full = b.mbarrier("full", count=1)
    with b.first_thread():
        b.init(full)
    b.syncthreads()
    with b.if_(mma), b.elect():
        lines = [b.op("tcgen05.mma", acc[0], a), b.umma_commit(full, cta_group=1)]
    with b.if_(epi):
        b.wait(full, 0)
        lines += [b.op("tcgen05.fence::after_thread_sync"), b.op("tcgen05.ld", acc[0]), b.op("tcgen05.wait::ld")]
    src = b.source.splitlines()
    assert "tmem acc[2] cols 128;" in b.source
    assert [src[n - 1].strip() for n in lines] == ["tcgen05.mma acc[0], a;", "umma.commit full cta_group 1;",
                                                     "tcgen05.fence::after_thread_sync;", "tcgen05.ld acc[0];",
                                                     "tcgen05.wait::ld;"]
    assert [r.name for r in b.build().tmem_regions] == ["acc"]


GROWS = """protocol grows {
  cta threads 32;
  param ITERS = 2;
  param STRIDE = 0;
  smem buf[2] bytes 64;
  for k in 0..ITERS {
    write buf[k * STRIDE];   // out of range from ITERS = 3 on when STRIDE = 1
  }
}
"""


def test_the_lift_proves_the_protocol_loaded_not_the_specs_defaults():
    """`check_protocol(load(spec, {"STRIDE": 1}), Options())` once lifted the spec's default STRIDE = 0 (the
    lift reloads the source at other trip counts, and took the defines from Options): "safe for every trip
    count" for a protocol that writes out of range at ITERS = 3. The lift now reloads with the protocol's own
    defines, and answers as the command line does with -D."""
    protocol = load(GROWS, {"STRIDE": 1, "ITERS": 2}, path="grows.sync")
    assert dict(protocol.defines) == {"STRIDE": 1, "ITERS": 2}
    by_api = check_protocol(protocol, Options())
    by_cli = check_protocol(protocol, Options(defines={"STRIDE": 1, "ITERS": 2}))
    assert by_api.bound == by_cli.bound != "all-iterations", (by_api, by_cli)
    assert "not lifted to all iterations" in by_api.coverage
    at_three = check_protocol(load(GROWS, {"STRIDE": 1, "ITERS": 3}, path="grows.sync"), Options())
    assert at_three.verdict is Verdict.ERROR or "SV104" in {d.code for d in at_three.diagnostics}, at_three
    # the spec's own defaults are safe for every trip count, which is what the lift proved before
    assert check_protocol(load(GROWS, path="grows.sync"), Options()).bound == "all-iterations"


def test_an_import_error_inside_the_z3_engine_is_not_reported_as_z3_missing(monkeypatch):
    """Only a missing z3 module degrades `--engine z3` to "needs z3-solver"; a broken import of the engine's own
    code (a name moved, say) is raised, never answered as an inconclusive check."""
    import syncverify.engines as engines

    monkeypatch.delattr(engines, "symbolic", raising=False)  # (`from . import symbolic` reads it first)
    monkeypatch.setitem(sys.modules, "syncverify.engines.symbolic", None)
    protocol = load(str(Path(__file__).resolve().parent.parent / "specs" / "tilelang_bar_h_deadlock.sync"))
    with pytest.raises(ImportError):
        check_protocol(protocol, Options(engine="z3"))
