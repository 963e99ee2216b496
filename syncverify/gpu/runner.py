"""Run an emitted kernel on the GPU N times and classify each run.

    python3 syncverify/gpu/runner.py KERNEL.cu LAUNCH.json --repeat 20 [--json OUT.json] [--sanitize TOOL]

Run it by path: it imports nothing of syncverify (whose package imports the
Lark front end), only cuda.core, cuda.bindings and numpy, so it works on a GPU
machine where the checker's dependencies are missing. The kernel is compiled
once with NVRTC (cuda.core ``Program``, arch sm_90a) in this process, which
needs no GPU; the launches happen in a child process (``device.py``) that is
killed at a deadline, so that a hung or trapped kernel never takes the parent
with it. Each repetition is classified as completed, hang (where each role
stopped), corrupt (slot, expected and seen writer) or fault.

With ``--sanitize racecheck|synccheck`` the child runs under compute-sanitizer
(``sanitizer.py``): the kernel is compiled with line information, the watchdog
and deadline are stretched for the instrumented run, and the report's findings
are attached to the result.

Exit status: 0 every repetition completed with clean data; 1 some did not;
2 bad arguments or the kernel does not compile; 3 no GPU could be used.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

try:
    from . import outcome as oc
    from . import sanitizer as sz
except ImportError:  # run by path
    import outcome as oc  # type: ignore[no-redef]
    import sanitizer as sz  # type: ignore[no-redef]

HERE = os.path.dirname(os.path.abspath(__file__))
STARTUP_S = 60.0  # the child's imports, context creation and source fill, before its first launch
SANITIZER_EXIT_S = 30.0  # how long a sanitized child that reported its last launch may take to exit
SANITIZE_SLOWDOWN = 20  # watchdog and deadline factor under compute-sanitizer (its instrumentation is slow)


@dataclass
class RunResult:
    launch: dict
    reps: list[oc.Rep] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    compile_s: float = 0.0
    error: str = ""  # set when nothing could run (compile error, no GPU)
    exit_code: int = 0
    sanitizer: sz.Report | None = None  # set by a --sanitize run
    sanitizer_log: str = ""  # the sanitizer's raw report

    def to_json(self) -> dict[str, Any]:
        return {"protocol": self.launch.get("protocol"), "spec": self.launch.get("spec"),
                "device": self.device, "compile_s": self.compile_s, "error": self.error,
                "summary": oc.summary(self.reps) if self.reps else self.error,
                "reps": [r.to_json() for r in self.reps],
                "sanitizer": self.sanitizer.to_json() if self.sanitizer else None,
                "sanitizer_log": self.sanitizer_log}


def compile_cubin(source: str, arch: str = "sm_90a", name: str = "", lineinfo: bool = False) -> bytes:
    """NVRTC through cuda.core: compiling to cubin needs no GPU when the arch is explicit (gpu-notes).
    With ``lineinfo`` (sanitizer runs) reports name `name:LINE` of the kernel source."""
    from cuda.core import Program, ProgramOptions

    opts = ProgramOptions(arch=arch, std="c++17", lineinfo=True, name=name) if lineinfo else \
        ProgramOptions(arch=arch, std="c++17")
    obj = Program(source, code_type="c++", options=opts).compile("cubin")
    return bytes(obj.code)


def run(kernel_path: str, launch: dict, repeat: int, deadline_s: float = 10.0, grid: int | None = None,
        log: Any = None, sanitize: str | None = None) -> RunResult:
    """Compile, then launch `repeat` times in child processes; never raises for GPU trouble.

    With ``sanitize`` (racecheck or synccheck) the child runs under compute-sanitizer and the parsed
    report is attached as ``result.sanitizer``."""
    result = RunResult(launch)
    if grid is not None:
        launch = dict(launch, grid=grid)
        result.launch = launch
    if sanitize:
        if sz.executable() is None:
            result.error, result.exit_code = "cannot sanitize: compute-sanitizer not found (CUDA toolkit)", 3
            return result
        launch = dict(launch, watchdog_ns=launch["watchdog_ns"] * SANITIZE_SLOWDOWN)
        result.launch = launch
        deadline_s *= SANITIZE_SLOWDOWN
    source = ""
    try:
        if kernel_path.endswith(".cubin"):
            with open(kernel_path, "rb") as f:
                cubin = f.read()
        else:
            with open(kernel_path) as f:
                source = f.read()
            t0 = time.monotonic()
            cubin = compile_cubin(source, launch.get("arch", "sm_90a"), os.path.basename(kernel_path),
                                  lineinfo=bool(sanitize))
            result.compile_s = time.monotonic() - t0
    except ImportError as err:
        result.error, result.exit_code = f"cannot compile: {err} (install cuda-core and nvidia-cuda-nvrtc)", 3
        return result
    except Exception as err:
        result.error, result.exit_code = f"compile error: {err}", 2
        return result
    with tempfile.TemporaryDirectory() as tmp:
        cubin_path = os.path.join(tmp, "kernel.cubin")
        launch_path = os.path.join(tmp, "launch.json")
        with open(cubin_path, "wb") as f:
            f.write(cubin)
        with open(launch_path, "w") as f:
            json.dump(launch, f)
        sanitizer_log = os.path.join(tmp, "sanitizer.txt")
        prefix = sz.command(sanitize, sanitizer_log) if sanitize else []
        logs: list[str] = []
        while len(result.reps) < repeat:
            before = len(result.reps)
            fatal = _child(cubin_path, launch_path, repeat - before, deadline_s, result, log, prefix)
            if prefix and os.path.exists(sanitizer_log):
                with open(sanitizer_log, errors="replace") as f:
                    logs.append(f.read())
                os.unlink(sanitizer_log)
            if fatal:
                result.error = fatal
                result.exit_code = 3
                break
            if len(result.reps) == before:  # the child died without reporting: count it and go on
                result.reps.append(oc.Rep(oc.FAULT, error="the runner's child process died without a report"))
        if sanitize:
            result.sanitizer_log = "".join(logs)
            result.sanitizer = sz.parse(sanitize, result.sanitizer_log, source)
            if not logs:
                result.sanitizer.ran = False
                result.sanitizer.note = "no report file (is compute-sanitizer installed?)"
    if not result.exit_code:
        result.exit_code = 0 if result.reps and all(r.status == oc.COMPLETED for r in result.reps) else 1
    return result


def _child(cubin_path: str, launch_path: str, reps: int, deadline_s: float, result: RunResult, log: Any,
           prefix: list[str] | None = None) -> str:
    """One child process: collect its per-repetition lines; kill it at a deadline. Returns a fatal error.

    ``prefix`` (compute-sanitizer and its options) wraps the child; it is ended with its whole process
    group, so that the sanitizer's target does not outlive it."""
    cmd = [*(prefix or []), sys.executable, os.path.join(HERE, "runner.py"), "--child", cubin_path, launch_path,
           "--repeat", str(reps), "--deadline", str(deadline_s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE,
                            start_new_session=bool(prefix))
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    limit = time.monotonic() + STARTUP_S * (3 if prefix else 1) + deadline_s
    buf = ""
    fatal = ""
    try:
        while True:
            if time.monotonic() > limit:
                result.reps.append(oc.Rep(oc.HANG, deadline_s * 1000,
                                          error="no report from the child before its deadline (killed)"))
                break
            if not sel.select(timeout=0.2):
                if proc.poll() is not None:
                    break
                continue
            chunk = proc.stdout.readline()
            if not chunk:
                break
            buf = chunk.strip()
            if not buf:
                continue
            if log is not None:
                log.write(buf + "\n")
            msg = json.loads(buf)
            if msg["event"] == "error":
                fatal = msg["error"]
                break
            if msg["event"] == "ready":
                result.device = msg.get("device", {})
                limit = time.monotonic() + deadline_s + 5.0
            elif msg["event"] == "result":
                rep = oc.Rep.from_json(msg)
                result.reps.append(rep)
                limit = time.monotonic() + deadline_s + 5.0
                if rep.status == oc.FAULT or (rep.status == oc.HANG and "still running" in rep.error):
                    break
                if msg["rep"] == reps - 1:
                    break
    finally:
        last = result.reps[-1] if result.reps else None
        exits = last is not None and last.status != oc.FAULT and "still running" not in last.error
        if prefix and not fatal and exits:
            try:  # a child that ran to its end exits by itself; the sanitizer then prints its summary
                proc.wait(timeout=SANITIZER_EXIT_S)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            if prefix:  # the sanitizer and the python process under it: end the group this call started
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
            else:
                proc.kill()
        proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        if log is not None and err:
            log.write(err)
    return fatal


def format_result(r: RunResult) -> str:
    """A few lines a person can read: the tally, then what the first bad repetition showed."""
    name = r.launch.get("protocol", "?")
    if r.error and not r.reps:
        return f"{name}: {r.error}"
    ms = [x.ms for x in r.reps if x.status == oc.COMPLETED]
    lines = [f"{name}: {oc.summary(r.reps)}" + (f" (median {sorted(ms)[len(ms) // 2]:.3f} ms)" if ms else "")]
    bad = next((x for x in r.reps if x.status != oc.COMPLETED), None)
    if bad is not None:
        lines.append(f"  first {bad.status}: {bad.error}".rstrip(": "))
        for s in bad.stuck[:12]:
            where = f"line {s['line']}" + (f" `{s['op']}`" if s.get("op") else "")
            extra = "".join(f", {k} {s[k]}" for k in ("barrier", "parity", "iteration") if s.get(k) not in (None, ""))
            lines.append(f"    cta {s['cta']} {s['process']}: {s['state']} at {where}{extra}"
                         + (f" ({s['trace_step']})" if s.get("trace_step") else ""))
        if bad.corrupt:
            c = bad.corrupt
            lines.append(f"    {c.get('bad_words', 0)} wrong words in {c.get('bad_reads', 0)} lane-reads, "
                         f"{c.get('wgmma_bad', 0)} wrong wgmma results")
            for f in c.get("first", [])[:3]:
                lines.append(f"    cta {f['cta']} {f['reader']} line {f['line']} `{f['op']}` #{f['occurrence']} read "
                             f"{f['slot']}: expected {f['expected']}, saw {f['seen']}")
                if f.get("trace_step"):
                    lines.append(f"      the read of {f['trace_step']}")
            if c.get("stores"):
                s = c["stores"]
                first = s["first"]
                by = f" (the store at line {first['line']} by {first['store']} #{first['occurrence']})" \
                    if "line" in first else ""
                lines.append(f"    bulk stores: {s['bad_words']} wrong words; first{by}: expected {first['expected']}"
                             f", saw {first['seen']}")
                if first.get("trace_step"):
                    lines.append(f"      the store of {first['trace_step']}")
    if r.sanitizer is not None:
        lines.append(f"  {r.sanitizer.summary()}")
    unchecked = max((x.unchecked for x in r.reps), default=0)
    if unchecked:
        lines.append(f"  note: up to {unchecked} accesses per run had no expectation from the model's schedule")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="runner.py", description="Run an emitted syncverify kernel on the GPU.")
    ap.add_argument("kernel", help="kernel source (.cu) or cubin (.cubin); with --child: the cubin")
    ap.add_argument("launch", help="the launch description written by `syncverify emit`")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=10.0, help="seconds one launch may take")
    ap.add_argument("--grid", type=int, default=None, help="override the number of clusters launched")
    ap.add_argument("--json", default=None, help="write the full result here")
    ap.add_argument("--sanitize", choices=sz.TOOLS, default=None,
                    help="run the launches under compute-sanitizer with this tool and parse its report")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        try:
            from . import device
        except ImportError:
            import device  # type: ignore[no-redef]
        return device.child_main(args.kernel, args.launch, args.repeat, args.deadline, args.grid)
    try:
        with open(args.launch) as f:
            launch = json.load(f)
    except (OSError, ValueError) as err:
        print(f"runner: cannot read {args.launch}: {err}", file=sys.stderr)
        return 2
    result = run(args.kernel, launch, args.repeat, args.deadline, args.grid, sanitize=args.sanitize)
    print(format_result(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=1)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
