"""`syncverify emit SPEC`: a verified spec as a GPU kernel, plus its JSON launch description.

Also the options and the emission that `run` (cli/run.py) shares with it. Each
handler returns an exit code (design §4): 0 success, 2 usage or input error,
including a spec the emitter refuses (a Blackwell-only operation); `emit`
never returns 1 (disagreement) or 3 (nothing could run), which are `run`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..diagnostics import InputError

if TYPE_CHECKING:
    from ..codegen import Emission

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


def add_subcommand(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `emit` on the `syncverify` subparsers; it sets its handler as `func`."""
    e = sub.add_parser("emit", help="write the spec as an sm_90a CUDA kernel plus its JSON launch description")
    e.add_argument("spec", metavar="SPEC")
    e.add_argument("-o", "--output", metavar="FILE",
                   help="kernel source to write (default: SPEC's name with .cu, in the current directory); "
                        "the launch description goes next to it with .json")
    _common(e)
    e.set_defaults(func=cmd_emit)


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
    from ..codegen import emit, replay_order
    from ..codegen.sites import collect_sites, site_index
    from ..lang import load

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
    from ..codegen import EmitRefused

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


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"emit": cmd_emit}
