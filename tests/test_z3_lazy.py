"""z3 is loaded when an encoding first uses it (syncverify/z3_lazy.py): an explicit check never loads it,
an SMT check does, and the command's end resets Z3's SIGINT setting only where z3 was loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "cutlass_ws_ring_no_empty_wait.sync"

_PROBE = """
import io, contextlib, sys
from syncverify import cli, z3_lazy
with contextlib.redirect_stdout(io.StringIO()):
    try:
        cli.main(["check", sys.argv[1], "--engine", sys.argv[2], "-q"])
    except SystemExit:
        pass
print("loaded" if z3_lazy.loaded() is not None else "not loaded")
"""


def _z3_after(engine: str) -> str:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(SPEC), engine], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_an_explicit_check_never_loads_z3():
    assert _z3_after("explicit") == "not loaded"


def test_an_smt_check_loads_z3():
    assert _z3_after("bmc") == "loaded"


def test_loaded_gives_z3_once_used():
    from syncverify import z3_lazy

    z3_lazy.z3.BoolVal(True)  # any look-up loads it
    assert z3_lazy.loaded() is z3_lazy.z3
    assert type(z3_lazy.z3).__name__ == "module"
