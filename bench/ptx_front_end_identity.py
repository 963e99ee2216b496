"""The PTX front end's outputs under one tree, written so that two trees' can be compared byte for byte.

    PYTHONPATH=$PWD python3 bench/ptx_front_end_identity.py --tree /tmp/main-copy --out /tmp/before
    PYTHONPATH=$PWD python3 bench/ptx_front_end_identity.py --tree . --out /tmp/after
    diff -r /tmp/before /tmp/after && echo identical

A change meant to make the front end faster may change nothing else. For every PTX file under
tests/data (gzipped ones unpacked once into ``--work``, at the same path for both trees, since the path
is part of what is printed) this writes, under ``--out``:

* ``NAME.module``: the parsed :class:`Module`'s repr (every function, instruction, operand, position
  and `.loc`), one line per function, parsed in one process per tree;
* ``NAME.extract``: ``syncverify extract FILE`` (its protocol, or its refusal: stdout, stderr and exit
  status) with one launch: the one CUTLASS's host code computes (``--cutlass-problem``) for a CUTLASS
  GEMM, else 64 threads, one CTA (a kernel written for another launch is refused, and the refusal, with
  its PTX position, is compared too).

The tree's code is the one imported (``PYTHONPATH`` is set to ``--tree`` for each subprocess).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the problem sizes the tests and bench/issue36_table.py give these GEMMs; another CUTLASS GEMM gets 256x128x128
CUTLASS_PROBLEMS = {
    "sm90_gemm_pingpong_1x2.ptx": "128x256x128",
    "sm90_gemm_pingpong_1x1.ptx": "128x128x128",
}
CUTLASS_GEMM = re.compile(r"sm(90|100)_gemm_")


def launch_args(ptx: Path) -> list[str]:
    if CUTLASS_GEMM.match(ptx.name):
        return ["--cutlass-problem", CUTLASS_PROBLEMS.get(ptx.name, "256x128x128")]
    return ["--block", "64"]

_DUMP = """
import sys
from syncverify.ptx.parse import PtxError, parse_ptx_file
for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):
    with open(dst, "w", encoding="utf-8") as out:
        try:
            m = parse_ptx_file(src)
        except PtxError as err:
            out.write(err.render() + "\\n")
            continue
        out.write(repr((m.path, m.version, m.target, m.files, m.variables)) + "\\n")
        for f in m.functions:
            out.write(repr(f) + "\\n")
"""


def ptx_inputs(work: Path) -> list[Path]:
    """Every PTX file of tests/data, the gzipped ones unpacked under ``work`` (kept if already there)."""
    found: list[Path] = []
    for src in sorted((ROOT / "tests" / "data").rglob("*.ptx*")):
        rel = src.relative_to(ROOT / "tests" / "data")
        if src.suffix == ".gz":
            dst = work / rel.with_suffix("")
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(gzip.decompress(src.read_bytes()))
            found.append(dst)
        elif src.suffix == ".ptx":
            dst = work / rel
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(src.read_bytes())
            found.append(dst)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", required=True, help="the repository tree whose syncverify runs")
    ap.add_argument("--out", required=True, help="directory for the outputs")
    ap.add_argument("--work", default="/tmp/ptx-front-end-inputs", help="where the PTX inputs are unpacked")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per extraction")
    ap.add_argument("--only", default="", help="the inputs whose path contains this")
    ap.add_argument("--modules-only", action="store_true", help="the parsed modules, no extraction")
    args = ap.parse_args()
    work, out = Path(args.work), Path(args.out)
    inputs = [p for p in ptx_inputs(work) if args.only in str(p)]
    # one hash seed for both trees: a module's register set is printed in its iteration order
    env = dict(os.environ, PYTHONPATH=str(Path(args.tree).resolve()), PYTHONHASHSEED="0")
    names = {p: str(p.relative_to(work)).replace("/", "__") for p in inputs}
    out.mkdir(parents=True, exist_ok=True)
    pairs = [x for p in inputs for x in (str(p), str(out / f"{names[p]}.module"))]
    subprocess.run([sys.executable, "-c", _DUMP, *pairs], env=env, check=True)
    for p in [] if args.modules_only else inputs:
        cmd = [sys.executable, "-m", "syncverify", "extract", str(p), *launch_args(p)]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
            text = f"{r.stdout}\n--- stderr\n{r.stderr}\n--- exit {r.returncode}\n"
        except subprocess.TimeoutExpired:
            text = f"--- timed out after {args.timeout} s\n"
        (out / f"{names[p]}.extract").write_text(text, encoding="utf-8")
        print(f"{names[p]}.extract: {text.splitlines()[-1]}", flush=True)


if __name__ == "__main__":
    main()
