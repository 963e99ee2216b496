"""A sampling profile of one `syncverify` command, for runs that cProfile makes too slow to finish (issue #36).

cProfile's per-call hook multiplies the CPU of the symbolic extraction (many small Z3 calls) several times over:
under it, `extract --symbolic` of the 2x1 ping-pong GEMM had not finished in 12 CPU minutes. Here a thread
reads the main thread's stack every ``--every`` seconds and counts, per function, the samples it is on the
stack (cumulative) and on top (self); the command itself runs unhooked, in this process. The table is written
to OUT every 30 s and at the end, so a run ended by a limit still leaves its profile. Z3 releases the GIL
while it solves, so its time is sampled like the rest.

    PYTHONPATH=$PWD python3 bench/sample_profile.py prof.txt extract g.ptx ... --symbolic '0[12:4]>=64' -o g.sync
    PYTHONPATH=$PWD python3 bench/sample_profile.py prof.txt check --engine z3 g_n65_r0.sync --max-states 20000
"""

from __future__ import annotations

import collections
import resource
import runpy
import sys
import threading
import time
from pathlib import Path
from types import CodeType, FrameType

ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _name(code: CodeType) -> str:
    return f"{code.co_filename.replace(ROOT, '')}:{code.co_firstlineno}:{code.co_name}"


class Sampler:
    """Counts the functions on the main thread's stack, every `every` seconds."""

    def __init__(self, out: Path, every: float):
        self.out, self.every = out, every
        self.main = threading.get_ident()
        self.samples = 0
        self.cumulative: collections.Counter[str] = collections.Counter()
        self.own: collections.Counter[str] = collections.Counter()

    def dump(self) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        n = max(self.samples, 1)
        lines = [f"samples {self.samples}, CPU {ru.ru_utime + ru.ru_stime:.1f} s, peak {ru.ru_maxrss / 1024:.0f} MB",
                 "## on the stack (share of samples)"]
        lines += [f"{100 * c / n:6.1f}% {k}" for k, c in self.cumulative.most_common(80)]
        lines += ["## on top"] + [f"{100 * c / n:6.1f}% {k}" for k, c in self.own.most_common(40)]
        self.out.write_text("\n".join(lines) + "\n")

    def run(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(self.every)
            frame: FrameType | None = sys._current_frames().get(self.main)
            if frame is None:
                continue
            self.samples += 1
            self.own[_name(frame.f_code)] += 1
            seen: set[str] = set()
            while frame is not None:
                name = _name(frame.f_code)
                if name not in seen:  # (a recursive function counts once per sample)
                    seen.add(name)
                    self.cumulative[name] += 1
                frame = frame.f_back
            if time.monotonic() - last > 30:
                self.dump()
                last = time.monotonic()


def main() -> None:
    args = sys.argv[1:]
    every = 0.02
    if args[:1] == ["--every"]:
        every, args = float(args[1]), args[2:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    sampler = Sampler(Path(args[0]), every)
    sys.argv = ["syncverify", *args[1:]]
    threading.Thread(target=sampler.run, daemon=True).start()
    try:
        runpy.run_module("syncverify", run_name="__main__")
    finally:
        sampler.dump()


if __name__ == "__main__":
    main()
