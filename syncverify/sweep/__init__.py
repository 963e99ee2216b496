"""Sweeps: many kernels and configurations checked as one job (`syncverify check --manifest FILE`).

`manifest` reads what to check; `cache` keys builds and verdicts by content; `execute` runs one point (the
same code in a local worker and in a Ray task); `executors` runs them all, locally or on Ray; `report` says
it once, in manifest order. docs/sweeps.md is the user's guide.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from . import manifest as manifest_mod
from . import report
from .execute import point_payload
from .executors import RayUnavailable, run_local, run_ray


def default_cache() -> str:
    """$SYNCVERIFY_CACHE, else the user's cache folder."""
    env = os.environ.get("SYNCVERIFY_CACHE")
    if env:
        return env
    return str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "syncverify")


def sweep(manifest_path: str, *, jobs: int = 1, cache: str | None = None, ray: str | None = None,
          progress: IO[str] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    """Check every point of the manifest; the records in manifest order, what ran them, and the seconds.
    ``cache`` None: a temporary cache, removed at the end (nothing is kept between runs)."""
    loaded = manifest_mod.load(manifest_path)  # InputError on a bad manifest: before anything runs
    base = str(Path(manifest_path).resolve().parent)
    payloads = [point_payload(p, base) for p in loaded.points]
    records: list[dict[str, Any] | None] = [None] * len(payloads)
    started = time.monotonic()
    done = 0

    def landed(index: int, record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        records[index] = record
        if progress is not None:
            print(report.progress_line(done, len(payloads), record), file=progress, flush=True)

    with tempfile.TemporaryDirectory(prefix="syncverify-sweep-") as scratch:
        root = cache if cache is not None else scratch
        if ray is not None:
            about = run_ray(payloads, str(Path(root).resolve()), ray, landed)
        else:
            run_local(payloads, root, jobs, landed)
            about = {"executor": "local", "jobs": jobs}
    assert all(r is not None for r in records)
    return [r for r in records if r is not None], about, time.monotonic() - started


def main(manifest_path: str, *, fmt: str, jobs: int, cache: str | None, ray: str | None, expect: bool,
         quiet: bool, verbose: bool = False) -> int:
    """`check --manifest`: run the sweep and print its report; the exit code."""
    from ..diagnostics import InputError

    try:
        records, about, seconds = sweep(manifest_path, jobs=jobs, cache=cache, ray=ray,
                                        progress=None if quiet else sys.stderr)
    except InputError as err:  # `file:line:col: SV119 …`, the manifest's line and a caret
        from ..report import text

        console = text.make_console(sys.stderr)
        for d in err.diagnostics:
            text.print_diagnostic(console, d, {}, False)
        return 2
    except RayUnavailable as err:
        print(f"syncverify: {err}", file=sys.stderr)
        return 2
    if fmt == "json":
        print(report.render_json(records, about, seconds))
    elif fmt == "sarif":
        print(report.render_sarif(records))
    else:
        report.render_text(records, sys.stdout, expect, verbose)
    if not quiet or fmt == "text":
        print(report.summary(records, seconds, about), file=sys.stderr)
    if expect:
        return 0 if all(report.expectation(r) for r in records) else 1
    return report.exit_code(records)
