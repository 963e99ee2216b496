"""One point of a sweep, start to end: build (a `.cu`), look up the cache, check, record.

The same function runs in a local worker thread and in a Ray task, so a sweep's results cannot depend on
where it ran. The check itself is `syncverify check --format json` in a child process: the point gets the
whole budget of one check, a crash or an out-of-memory kill of the checker is that point's result (never
the sweep's end), and the parent holds no Z3 or parser state. What a point can end as (``status``):

- ``safe`` / ``violation`` / ``inconclusive`` -- the check's verdict;
- ``refused`` -- extraction refused the kernel at a line (exit 2, the refusal's text kept);
- ``error`` -- the input is not a protocol (exit 2 with SV1xx findings);
- ``build-failed`` -- nvcc failed (its first error kept);
- ``crashed`` -- the checker died or outlived its wall-clock guard (its last output kept).

A record is a plain dict (it crosses process and machine boundaries as JSON).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any

from .cache import Cache, arg_files, checker_digest, digest, files_digest
from .points import Point

GUARD_SLACK = 120.0  # seconds a check may run past its own --timeout before the sweep kills it


def point_payload(point: Point, base: str) -> dict[str, Any]:
    """A point as a task's argument: plain data (Ray and process pools pickle it)."""
    return {"point": asdict(point), "base": base}


def _point(payload: dict[str, Any]) -> Point:
    raw = dict(payload["point"])
    for key in ("define", "budgets", "config"):
        raw[key] = tuple(tuple(x) for x in raw[key])
    for key in ("args", "nvcc_flags"):
        raw[key] = tuple(raw[key])
    if raw["expect"] is not None:
        raw["expect"] = tuple(raw["expect"])
    return Point(**raw)


def run_point(payload: dict[str, Any], cache_root: str) -> dict[str, Any]:
    """Build, look up, check: the record of one point."""
    point, base = _point(payload), payload["base"]
    cache = Cache(cache_root)
    started = time.monotonic()
    record: dict[str, Any] = {"name": point.name, "path": point.path, "config": dict(point.config),
                              "expect": None if point.expect is None else list(point.expect),
                              "cached": False, "built": False, "host": os.uname().nodename}
    if point.triton:
        return {**record, **_triton(point, base, cache), "seconds": round(time.monotonic() - started, 3)}
    target = point.path
    if point.path.endswith(".cu"):
        built = build_ptx(point, base, cache)
        if isinstance(built, dict):  # nvcc failed: that is the point's result
            return {**record, **built, "seconds": round(time.monotonic() - started, 3)}
        target, record["built"] = built
    inputs = [target, *[os.path.join(base, f) for f in arg_files(point.args)]]
    content = files_digest(inputs)
    key = None if content is None else digest(checker_digest(), json.dumps(point.argv("<input>")), content)
    if key is not None:
        hit = cache.get_json("verdicts", key)
        if hit is not None:
            return {**record, **hit, "cached": True, "seconds": round(time.monotonic() - started, 3)}
    outcome = _check(point, target, base)
    if key is not None and outcome["status"] != "crashed":  # a crash may be the machine's, not the point's
        cache.put_json("verdicts", key, outcome)
    return {**record, **outcome, "seconds": round(time.monotonic() - started, 3)}


def _triton(point: Point, base: str, cache: Cache) -> dict[str, Any]:
    """A `[[triton]]` point: keyed by the module's bytes, Triton's version and the point; checked by
    triton_point.py in a child process."""
    try:
        from importlib.metadata import version

        triton_version = version("triton")
    except Exception:  # not installed: the child says so, and the point is not cached
        triton_version = None
    key = None if triton_version is None else digest(checker_digest(), triton_version, point.triton,
                                                     files_digest([point.path]) or "")
    if key is not None and (hit := cache.get_json("verdicts", key)) is not None:
        return {**hit, "cached": True}
    outcome = _guarded(point, [sys.executable, "-m", "syncverify.sweep.triton_point", point.triton], base)
    if key is not None and outcome["status"] != "crashed":
        cache.put_json("verdicts", key, outcome)
    return outcome


def _nvcc() -> str | None:
    from ..ptx.extract import find_nvcc

    return find_nvcc()


def _nvcc_version(nvcc: str) -> str:
    proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "?"


def build_ptx(point: Point, base: str, cache: Cache) -> tuple[str, bool] | dict[str, Any]:
    """The point's PTX, from the cache when its source, headers, flags and nvcc are unchanged; else nvcc's
    (kept in the cache). Returns (the .ptx path, whether nvcc ran now), or a ``build-failed`` outcome."""
    from ..ptx.extract import NVCC_FLAGS

    nvcc = _nvcc()
    if nvcc is None:
        return {"status": "build-failed", "codes": [], "message": "nvcc was not found on PATH"}
    flags = [*NVCC_FLAGS, *point.nvcc_flags]
    version = _nvcc_version(nvcc)
    source_key = digest(point.path, json.dumps(flags), version)
    deps = cache.get_json("deps", source_key)
    compile_key = None
    if deps is not None:  # the headers nvcc listed last time, re-hashed
        now = files_digest(deps["files"])
        if now is not None and now == deps["digest"]:
            compile_key = digest(now, json.dumps(flags), version)
    if compile_key is None:
        listed = _dependencies(nvcc, flags, point.path, base)
        if isinstance(listed, dict):
            return listed
        now = files_digest(listed)
        if now is None:
            return {"status": "build-failed", "codes": [], "message": "a header nvcc listed cannot be read"}
        cache.put_json("deps", source_key, {"files": listed, "digest": now})
        compile_key = digest(now, json.dumps(flags), version)
    hit = cache.path_of("ptx", compile_key, ".ptx")
    if hit is not None:
        return str(hit), False
    out_dir = cache.root / "ptx"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{compile_key}.{os.getpid()}.ptx"
    proc = subprocess.run([nvcc, *flags, "-o", str(tmp), point.path], capture_output=True, text=True,
                          check=False, cwd=base)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:400])
        return {"status": "build-failed", "codes": [], "message": f"nvcc failed: {first}"}
    final = out_dir / f"{compile_key}.ptx"
    os.replace(tmp, final)
    return str(final), True


def _dependencies(nvcc: str, flags: list[str], source: str, base: str) -> list[str] | dict[str, Any]:
    """Every file the preprocessor reads for ``source`` (nvcc -M), the source first."""
    pre = [f for f in flags if f not in ("-ptx", "-lineinfo")]
    proc = subprocess.run([nvcc, *pre, "-M", source], capture_output=True, text=True, check=False, cwd=base)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:400])
        return {"status": "build-failed", "codes": [], "message": f"nvcc failed: {first}"}
    words = proc.stdout.replace("\\\n", " ").split()
    files = [w for w in words[1:] if not w.endswith(":")]  # make's `target: dep dep …`
    src = os.path.normpath(os.path.join(base, source))
    headers = {os.path.normpath(os.path.join(base, f)) for f in files} - {src}
    return [src, *sorted(headers)]


def _check(point: Point, target: str, base: str) -> dict[str, Any]:
    """`syncverify check --format sarif` on the point, in a child process with a wall-clock guard."""
    cmd = [sys.executable, "-m", "syncverify", "check", "--format", "sarif", "-q", *point.argv(target)]
    return _guarded(point, cmd, base)


def _guarded(point: Point, cmd: list[str], base: str) -> dict[str, Any]:
    """A child that prints one check's SARIF, killed past the point's timeout plus GUARD_SLACK: its outcome."""
    timeout = dict(point.budgets).get("timeout", 600.0)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=base,
                              timeout=timeout + GUARD_SLACK)
    except subprocess.TimeoutExpired:
        return {"status": "crashed", "codes": [], "warnings": [], "findings": [], "sarif": None,
                "message": f"the check ran past its guard of {timeout + GUARD_SLACK:.0f} s", "exit": None}
    return outcome_of(proc.returncode, proc.stdout, proc.stderr)


def outcome_of(rc: int, stdout: str, stderr: str) -> dict[str, Any]:
    """What a `check --format sarif` run says about its one point: its verdict, its error and warning codes,
    its findings (file, line, column, code, message), and the SARIF run itself (the sweep's SARIF merges them)."""
    empty = {"codes": [], "warnings": [], "findings": [], "sarif": None, "exit": rc}
    try:
        run = json.loads(stdout)["runs"][0] if stdout.strip() else None
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        run = None
    files = (run or {}).get("properties", {}).get("files", [])
    if rc not in (0, 1, 2, 3) or (run is None and rc != 2):
        tail = (stderr or stdout).strip().splitlines()[-5:]
        return {**empty, "status": "crashed", "message": "\n".join(tail) or f"exit code {rc}"}
    if not files:  # a refusal, or an input error reported before any check
        return {**empty, "status": "refused" if rc == 2 else "crashed", "message": stderr.strip()}
    findings = [_finding(r) for r in run.get("results", []) if r.get("ruleId") != "SV701"]
    live = [f for f in findings if not f["suppressed"]]
    info = files[0]
    return {**empty, "status": info["verdict"], "coverage": info.get("coverage") or "",
            "codes": sorted({f["code"] for f in live if f["level"] == "error"}),
            "warnings": sorted({f["code"] for f in live if f["level"] == "warning"}),
            "findings": findings, "states": info.get("states", 0), "check_seconds": info.get("seconds", 0.0),
            "sarif": run}


def _finding(result: dict[str, Any]) -> dict[str, Any]:
    from urllib.parse import unquote

    loc = (result.get("locations") or [{}])[0]
    phys = loc.get("physicalLocation", {})
    uri = phys.get("artifactLocation", {}).get("uri")
    region = phys.get("region", {})
    logical = (loc.get("logicalLocations") or [{}])[0].get("fullyQualifiedName")
    return {"code": result["ruleId"], "level": result.get("level", "error"), "message": result["message"]["text"],
            "file": unquote(uri) if uri else logical, "line": region.get("startLine"),
            "column": region.get("startColumn"), "suppressed": bool(result.get("suppressions"))}
