"""Run SPIN on an exported model and read its verdict back.

Used by the agreement test (tests/test_promela.py) and the benchmark
(bench/spin_compare.py), so that both run SPIN the same way: `spin -a`, then
`gcc -DSAFETY -O2` (with a memory bound), then `./pan` with a depth bound
that covers every path (the exporter computes it). Each of the three runs
under `/usr/bin/time` when it exists, so the peak memory of every part is
measured on its own.

A run that cannot give a verdict — out of time, out of memory, depth bound
too small, a compile error — is `inconclusive` or `error`, never safe.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CODE_RE = re.compile(r"\b(SV\d{3}|EXPORTCAP)\b")
TIME = "/usr/bin/time"


@dataclass
class SpinOutcome:
    """What SPIN said about one model."""

    verdict: str  # "safe" | "violation" | "inconclusive" | "error"
    code: str | None = None  # the SV code of the violated assertion; "deadlock" for SV201 or an invalid end state
    states: int = 0
    transitions: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # spin, cc, pan
    peak_mb: dict[str, float] = field(default_factory=dict)  # spin, cc, pan
    detail: str = ""

    @property
    def wall(self) -> float:
        return sum(self.seconds.values())

    @property
    def peak(self) -> float:
        return max(self.peak_mb.values(), default=0.0)


def tools_available() -> str | None:
    """None when spin and a C compiler are on PATH; otherwise what is missing."""
    missing = [t for t in ("spin", os.environ.get("CC", "gcc")) if shutil.which(t) is None]
    return f"not installed: {', '.join(missing)}" if missing else None


def run_group(cmd: list[str], cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run cmd in its own process group; (result, timed out). On timeout the group first gets SIGINT
    (pan then prints the statistics of the search so far, and /usr/bin/time its peak memory),
    then SIGKILL: killing only the direct child would leave pan running under /usr/bin/time."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err), False
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out or "", err or ""), True


def _timed(cmd: list[str], cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess[str], bool, float, float]:
    """Run cmd; (result, timed out, wall seconds, peak RSS in MB of the command itself)."""
    stats = cwd / ".rusage"
    stats.unlink(missing_ok=True)
    full = [TIME, "-f", "%M", "-o", str(stats), *cmd] if os.path.exists(TIME) else cmd
    start = time.monotonic()
    res, timed_out = run_group(full, cwd, timeout)
    wall = time.monotonic() - start
    peak = 0.0
    try:
        peak = int(stats.read_text().strip().splitlines()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return res, timed_out, wall, peak


def run_spin(model: str, workdir: Path, timeout: float = 60.0, memlim_mb: int = 4096, depth: int = 100_000,
             cc_flags: tuple[str, ...] = ("-O2",), pan_flags: tuple[str, ...] = ()) -> SpinOutcome:
    """Verify ``model`` with SPIN in ``workdir`` within ``timeout`` seconds in all (spin + cc + pan)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("pan", "pan.c", "model.pml.trail"):
        (workdir / stale).unlink(missing_ok=True)
    (workdir / "model.pml").write_text(model)
    out = SpinOutcome("error")
    deadline = time.monotonic() + timeout
    cc = os.environ.get("CC", "gcc")
    steps = [("spin", ["spin", "-a", "model.pml"]),
             ("cc", [cc, "-DSAFETY", f"-DMEMLIM={memlim_mb}", *cc_flags, "-w", "-o", "pan", "pan.c"]),
             ("pan", ["./pan", f"-m{depth}", "-n", *pan_flags])]
    res = None
    vector = 16384  # pan's default (1024) is too small for most models; it only bounds buffers
    i = 0
    while i < len(steps):
        name, cmd = steps[i]
        if name == "cc":
            cmd = [*cmd[:2], f"-DVECTORSZ={vector}", *cmd[2:]]
        left = deadline - time.monotonic()
        if left <= 0:
            out.verdict, out.detail = "inconclusive", f"time limit of {timeout:g}s reached before {name}"
            return out
        res, timed_out, wall, peak = _timed(cmd, workdir, left)
        out.seconds[name] = out.seconds.get(name, 0.0) + wall
        out.peak_mb[name] = max(out.peak_mb.get(name, 0.0), peak)
        if timed_out:
            m = re.search(r"(\d+) states, stored", res.stdout)
            out.states = int(m.group(1)) if m else 0
            out.verdict, out.detail = "inconclusive", f"time limit of {timeout:g}s reached in {name}"
            return out
        if name != "pan" and res.returncode != 0:
            out.detail = f"{name} failed: {(res.stderr or res.stdout)[-2000:]}"
            return out
        need = re.search(r"VECTORSZ=N with N>(\d+)", res.stdout) if name == "pan" else None
        if need:  # the state vector is larger than pan's default bound: compile again with room for it
            vector = int(need.group(1)) * 2
            i = 1
            continue
        i += 1
    assert res is not None
    return _parse(res.stdout + res.stderr, out)


def _parse(text: str, out: SpinOutcome) -> SpinOutcome:
    m = re.search(r"(\d+) states, stored", text)
    out.states = int(m.group(1)) if m else 0
    m = re.search(r"(\d+) transitions \(= stored\+matched\)", text)
    out.transitions = int(m.group(1)) if m else 0
    errors = re.search(r"errors: (\d+)", text)
    if "assertion violated" in text:
        line = next(x for x in text.splitlines() if "assertion violated" in x)
        codes = CODE_RE.findall(line)
        out.verdict, out.code, out.detail = "violation", codes[-1] if codes else None, line.strip()
        if out.code == "SV201":  # the deadlock monitor
            out.code = "deadlock"
    elif re.search(r"pan:\d+: invalid end state", text):
        out.verdict, out.code = "violation", "deadlock"
        out.detail = next(x for x in text.splitlines() if re.match(r"pan:\d+: invalid end state", x)).strip()
    elif "max search depth too small" in text:
        out.verdict, out.detail = "inconclusive", "depth bound too small"
    elif "MEMLIM" in text or "out of memory" in text:
        out.verdict, out.detail = "inconclusive", "memory bound reached"
    elif errors and errors.group(1) == "0" and "Search not completed" not in text:
        out.verdict = "safe"
    else:
        out.verdict, out.detail = "error", text[-2000:]
    return out
