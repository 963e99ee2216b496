"""The early release named at its arrive (syncverify/diagnose_release.py), on specs: the arrive above the
read it should follow is reported at its own line when moving it below the read checks clean, and only then."""

from __future__ import annotations

from syncverify import Options, check_protocol, load

RING = """
protocol ring {{
  param STAGES = 2;
  param ITERS  = 4;
  cta threads 96;
  role producer = warp 0;
  role consumer[2] = warp 1 + i;
  smem tile[STAGES] bytes 1024;
  mbarrier full[STAGES]  count 1;
  mbarrier empty[STAGES] count 64;

  if producer {{ elect {{ init full[*]; init empty[*]; fence.mbarrier_init; }} }}
  syncthreads;
  if producer {{
    for k in 0..ITERS {{
      let s = k % STAGES;
      wait empty[s] parity (k / STAGES + 1) % 2;
      elect {{ arrive.expect_tx full[s] bytes 1024; tma.load tile[s] bytes 1024 -> full[s]; }}
    }}
  }}
  if consumer {{
    for k in 0..ITERS {{
      let s = k % STAGES;
      {wait}
      {body}
    }}
  }}
}}
"""
WAIT = "wait full[s] parity (k / STAGES) % 2;"


def _check(body: str, wait: str = WAIT):  # type: ignore[no-untyped-def]
    text = RING.format(body=body, wait=wait)
    return text.splitlines(), check_protocol(load(text, path="ring.sync"), Options(engine="explicit"))


def _line(lines: list[str], text: str) -> int:
    return next(n for n, ln in enumerate(lines, 1) if text in ln)


def test_an_arrive_above_the_read_is_named_at_its_line():
    lines, res = _check("arrive empty[s];\n      read tile[s];")
    causes = [d for d in res.diagnostics if d.code == "SV302" and "releases" in d.message]
    assert len(causes) == 1 and causes[0].span.line == _line(lines, "arrive empty[s];")
    assert "`empty[…]` releases `tile[…]`" in causes[0].message
    assert causes[0] is res.diagnostics[0]  # ahead of the race it causes
    race = [d for d in res.diagnostics if d.code == "SV302" and d.message.startswith("WAR race")]
    assert race and race[0].span.line == _line(lines, "tma.load tile[s]")


def test_the_arrive_below_the_read_is_safe():
    _, res = _check("read tile[s];\n      arrive empty[s];")
    assert res.verdict.value == "safe" and not res.diagnostics


def test_an_arrive_whose_move_does_not_fix_the_race_is_not_blamed():
    """Without the wait on `full`, the read races the copy whatever the arrive does: no early release."""
    _, res = _check("arrive empty[s];\n      read tile[s];", wait="")
    assert res.verdict.value == "violation"
    assert not any("releases" in d.message for d in res.diagnostics)
