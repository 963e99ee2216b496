"""A reading named by both `--letter` and `--assume` is refused, not decided by whichever came last.

`--letter exit-drains-bulk-reads --assume exit-drains-bulk-reads` used to check under the reading and answer
"safe" for a CTA that exits with a bulk store's read in flight, which to the letter (what `--letter` asked for) is
SV404: a verdict that contradicts one of the options given. options.readings_asked now refuses the pair, and
`check` and `trace` exit 2 with the reading's name (docs/model.md, "Readings PTX does not settle")."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.options import readings_asked

READING = "exit-drains-bulk-reads"
# one elected lane stores a tile and the warp ends without a `bulk.wait_read`: safe under the reading, SV404 to
# the letter
STORE = """protocol store_no_tail_wait {
  cta threads 32;
  role epi = warp 0;
  smem d[1] bytes 1024;
  if epi { elect { write d[0]; fence.proxy.async; tma.store d[0]; bulk.commit; } }
}
"""


def test_a_reading_in_both_letter_and_assume_is_refused():
    with pytest.raises(ValueError, match=READING):
        readings_asked(False, assume=[READING], letter=[READING])
    with pytest.raises(ValueError, match=READING):
        readings_asked(True, assume=[READING, "commit-order"], letter=[READING])
    # what stays allowed: --no-assume then --assume one back, --letter one and --assume another
    assert readings_asked(True, assume=[READING])["assume_exit_drains_bulk_reads"] is True
    asked = readings_asked(False, assume=["commit-order"], letter=[READING])
    assert asked == {"assume_exit_drains_bulk_reads": False, "assume_tcgen05_commit_order": True}


def test_the_commands_exit_2_on_the_pair(tmp_path: Path, capsys):
    spec = tmp_path / "store.sync"
    spec.write_text(STORE)
    assert main(["check", "-q", str(spec), "--letter", READING]) == 1  # the letter alone: SV404
    assert main(["check", "-q", str(spec), "--assume", READING]) == 0
    for order in (["--letter", READING, "--assume", READING], ["--assume", READING, "--letter", READING]):
        capsys.readouterr()
        assert main(["check", "-q", str(spec), *order]) == 2
        assert READING in capsys.readouterr().err
        assert main(["trace", str(spec), "-o", str(tmp_path / "t.html"), *order]) == 2
        assert not (tmp_path / "t.html").exists()
