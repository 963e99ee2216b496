"""`syncverify emit` and `syncverify run`: verified specs as GPU kernels, and whether the GPU agrees.

Each handler returns an exit code (design §4): 0 success / agreement, 1 the GPU
disagrees with the verdict (or, for `emit`, never), 2 usage or input error,
including a spec the emitter refuses (a Blackwell-only operation), 3 nothing
could run (no GPU, no cuda.core).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .diagnostics import InputError

if TYPE_CHECKING:
    from .codegen import Emission

# The code generator is imported by the handlers that use it, not with the command line: every
# `syncverify check` would otherwise pay for importing (and, without cached bytecode, compiling) it.


def _define(value: str) -> tuple[str, int]:
    name, sep, raw = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"-D {value}: expected NAME=VALUE")
    try:
        return name.strip(), int(raw.strip(), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-D {value}: {raw!r} is not an integer") from None


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Register `emit` and `run` on the `syncverify` subparsers; each sets its handler as `func`."""
    e = sub.add_parser("emit", help="write the spec as an sm_90a CUDA kernel plus its JSON launch description")
    e.add_argument("spec", metavar="SPEC")
    e.add_argument("-o", "--output", metavar="FILE",
                   help="kernel source to write (default: SPEC's name with .cu, in the current directory); "
                        "the launch description goes next to it with .json")
    _common(e)
    e.set_defaults(func=cmd_emit)
    r = sub.add_parser("run", help="compile and run the spec's kernel on the GPU; compare with the verdict")
    r.add_argument("spec", metavar="SPEC")
    r.add_argument("--repeat", type=int, default=None, metavar="N", help="launches (default 20; 1 with --sanitize)")
    r.add_argument("--deadline", type=float, default=10.0, metavar="SECONDS", help="time one launch may take")
    r.add_argument("--json", metavar="FILE", help="write every repetition's details here")
    r.add_argument("--no-replay", action="store_true",
                   help="do not replay the counterexample's order when free runs do not show a violation")
    r.add_argument("--sanitize", choices=["racecheck", "synccheck"], default=None, metavar="TOOL",
                   help="run the kernel under compute-sanitizer (racecheck or synccheck) and report its findings "
                        "(hazard kind, count, kernel and spec line); repetitions default to 1")
    _common(r)
    r.set_defaults(func=cmd_run)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE",
                   help="override a param")
    p.add_argument("--grid", type=int, default=1, metavar="N", help="clusters to launch, each running the protocol")
    p.add_argument("--replay", nargs="?", const="", default=None, metavar="CODE",
                   help="force the order of the checker's counterexample (for CODE; without one, a race the "
                        "replay can hold open, else the shortest)")
    p.add_argument("--check-stride", type=int, default=1, metavar="K",
                   help="reads compare every K-th 16-byte chunk of their lane's part (1: every word)")


def _emission(args: argparse.Namespace) -> Emission:
    from .codegen import emit, replay_order
    from .codegen.sites import collect_sites, site_index
    from .lang import load

    protocol = load(args.spec, dict(args.defines))
    order = None
    if args.replay is not None:
        order = replay_order(protocol, site_index(collect_sites(protocol)), args.replay or None)
    return emit(protocol, grid=args.grid, replay=order, check_stride=args.check_stride)


def write_emission(emission: Emission, source_path: str) -> str:
    """Write kernel and launch description; returns the JSON path."""
    json_path = str(Path(source_path).with_suffix(".json"))
    Path(source_path).parent.mkdir(parents=True, exist_ok=True)
    Path(source_path).write_text(emission.source)
    Path(json_path).write_text(json.dumps(emission.launch, indent=1) + "\n")
    return json_path


def _fail(err: Exception) -> int:
    if isinstance(err, InputError):
        for d in err.diagnostics:
            where = f"{d.span}: " if d.span else ""
            print(f"{where}{d.code}: {d.message}", file=sys.stderr)
    else:
        print(f"syncverify: {err}", file=sys.stderr)
    return 2


def cmd_emit(args: argparse.Namespace) -> int:
    from .codegen import EmitRefused

    try:
        emission = _emission(args)
    except (InputError, EmitRefused) as err:
        return _fail(err)
    out = args.output or Path(args.spec).with_suffix(".cu").name
    json_path = write_emission(emission, out)
    sched = emission.launch["schedule"]
    note = "" if sched["complete"] and not sched["intended"] else \
        f" (expected data from a partial or intended-order schedule: {sched['stuck'] or 'the model reports a race'})"
    print(f"wrote {out} and {json_path}{note}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .check import Options, check_protocol
    from .codegen import EmitRefused, emit, replay_order
    from .codegen.sites import collect_sites, site_index
    from .gpu import outcome as oc
    from .gpu import runner
    from .lang import load

    if args.repeat is None:
        args.repeat = 1 if args.sanitize else 20
    try:
        protocol = load(args.spec, dict(args.defines))
        emission = _emission(args)
    except (InputError, EmitRefused) as err:
        return _fail(err)
    result = check_protocol(protocol, Options(defines=dict(args.defines)))
    errors = {d.code for d in result.diagnostics if d.is_error}
    blocked: set[int] = set()
    for d in result.diagnostics:
        if d.code == "SV201":
            blocked |= oc.model_blocked_lines(d.message)
    print(f"verdict: {result.verdict} {', '.join(sorted(errors))} ({result.bound})".replace("  ", " "))
    details = {}
    first_label = "replay" if args.replay is not None else "free"
    with tempfile.TemporaryDirectory() as tmp:
        free = _run_one(runner, emission, tmp, first_label, args)
        print(runner.format_result(free))
        details[first_label] = free.to_json()
        if free.error and not free.reps:
            return free.exit_code or 3
        agree, why = oc.agreement(errors, blocked, free.reps,
                                  emission.launch.get("replay") if args.replay is not None else None)
        replayable = bool(errors) and "SV201" not in errors and args.replay is None and not args.no_replay \
            and not args.sanitize
        if not agree and replayable:
            try:
                order = replay_order(protocol, site_index(collect_sites(protocol)))
            except EmitRefused as err:
                print(f"no replay: {err}")
            else:
                print(f"replaying the counterexample of {order.code} ({len(order.steps)} gated steps)")
                em = emit(protocol, grid=args.grid, replay=order, check_stride=args.check_stride)
                again = _run_one(runner, em, tmp, "replay", args)
                print(runner.format_result(again))
                details["replay"] = again.to_json()
                ok, why_replay = oc.agreement(errors, blocked, again.reps, em.launch.get("replay"))
                if ok:
                    agree, why = True, f"{why_replay} when the counterexample's order is replayed; free runs: {why}"
    print(f"agreement: {'yes' if agree else 'NO'} — {why}")
    if args.json:
        out = {"verdict": str(result.verdict), "errors": sorted(errors), "runs": details,
               "agreement": agree, "why": why}
        if args.sanitize:
            out["sanitizer"] = details[first_label].get("sanitizer")
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if agree else 1


def _run_one(runner, em: Emission, tmp: str, label: str, args: argparse.Namespace):
    """Write the kernel as `<spec name>.cu` (the name sanitizer reports quote) and run it."""
    source = os.path.join(tmp, label, Path(args.spec).stem + ".cu")
    write_emission(em, source)
    return runner.run(source, em.launch, args.repeat, args.deadline, sanitize=args.sanitize)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"emit": cmd_emit, "run": cmd_run}
