"""Round trip: every emitted kernel of kernels/ compiled to PTX, extracted, checked, and compared
with its spec's `// expect:` error codes.

    PYTHONPATH=$PWD python3 bench/ptx_roundtrip.py [--timeout S] [NAME …]

The kernels are the instrumented ones `syncverify emit` writes: their control
block (`ctl`, parameter 1) is zeroed by the host and only written through that
pointer, which is what `--zero-global` states; `replay_len` (parameter 7) is 0
when no replay schedule is given. Prints one line per kernel: extraction time,
check verdict and time, and whether the error codes match the spec's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from syncverify.check import Options, check_protocol  # noqa: E402
from syncverify.lang import load  # noqa: E402
from syncverify.lang.load import parse_expect, read_source  # noqa: E402
from syncverify.ptx.extract import compile_cu, extract  # noqa: E402
from syncverify.ptx.launch import Launch  # noqa: E402
from syncverify.ptx.parse import PtxError, parse_ptx_file  # noqa: E402

# the emitted watchdog (parameter 5) at its largest value never fires: each wait is the spin it stands for
WATCHDOG_OFF = 2**64 - 1


def launch_for(meta: dict) -> Launch:  # type: ignore[type-arg]
    return Launch(block=(meta["block"], 1, 1), cluster=(meta["cluster"], 1, 1), grid=(meta["cluster"], 1, 1),
                  params={"sv_kernel_param_7": 0, "sv_kernel_param_5": WATCHDOG_OFF},
                  zero_global=("sv_kernel_param_1",))


def run_one(name: str, entry: dict, out_dir: str, timeout: float) -> dict:  # type: ignore[type-arg]
    meta = json.loads((ROOT / "kernels" / entry["launch"]).read_text())
    spec = ROOT / entry["spec"]
    expect = parse_expect(read_source(str(spec)), str(spec))
    want = sorted(expect.errors) if expect else None
    row: dict[str, object] = {"name": name, "want": want}
    t0 = time.perf_counter()
    try:
        ptx = compile_cu(str(ROOT / "kernels" / entry["kernel"]), out_dir=out_dir)
        mod = parse_ptx_file(ptx)
        ex = extract(mod, launch_for(meta), meta["kernel"])
    except PtxError as err:
        row.update(status="refused", why=err.render().splitlines()[0], extract_s=time.perf_counter() - t0)
        return row
    row["extract_s"] = time.perf_counter() - t0
    Path(out_dir, f"{name}.sync").write_text(ex.text)
    protocol = load(ex.text, path=f"{name}.extracted.sync")
    t1 = time.perf_counter()
    res = check_protocol(protocol, Options(timeout=timeout))
    row["check_s"] = time.perf_counter() - t1
    got = sorted({d.code for d in res.diagnostics if d.is_error})
    row.update(status=res.verdict.value, got=got, match=res.verdict.value != "inconclusive" and got == want)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="sv-roundtrip-"))
    args = ap.parse_args()
    index = json.loads((ROOT / "kernels" / "index.json").read_text())
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for entry in index["specs"]:
        if entry["status"] != "emitted" or (args.names and entry["name"] not in args.names):
            continue
        row = run_one(entry["name"], entry, args.out, args.timeout)
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = sum(1 for r in rows if r.get("match"))
    print(f"# {ok} of {len(rows)} kernels give their spec's error codes; protocols in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
