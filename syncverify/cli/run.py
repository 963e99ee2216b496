"""`syncverify run SPEC`: compile and run the spec's kernel on the GPU, and say whether the GPU agrees.

The kernel is the one `emit` writes (cli/emit.py holds the options the two
share); a free run that does not show the checker's violation is followed by
a replay of the counterexample's order. Exit codes: 0 agreement, 1 the GPU
disagrees with the verdict, 2 usage or input error, 3 nothing could run (no
GPU, no cuda.core).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..diagnostics import InputError
from .emit import _common, _emission, _fail, write_emission

if TYPE_CHECKING:
    from ..codegen import Emission


def add_subcommand(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `run` on the `syncverify` subparsers; it sets its handler as `func`."""
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


def cmd_run(args: argparse.Namespace) -> int:
    from ..check import Options, check_protocol
    from ..codegen import EmitRefused, emit, replay_order
    from ..codegen.sites import collect_sites, site_index
    from ..gpu import outcome as oc
    from ..gpu import runner
    from ..lang import load

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


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"run": cmd_run}
