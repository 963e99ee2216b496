"""Where the points of a sweep run: worker threads on this machine, or tasks on a Ray cluster.

Both call `execute.run_point` and hand each record to ``on_result`` as it lands (any order); the caller
reports them in manifest order, so a sweep's report does not depend on its executor or on which point
finished first.

Local: a thread per worker (each point's check is a child process: the threads only wait), no service to
start. Ray (the optional extra `syncverify[ray]`): each point a task of one CPU; a task whose worker dies is
run again by Ray (`max_retries`), so a lost machine delays a point and never drops it; the task's own
failure is a record (`execute` never raises for a point's failure). The scheduling is Ray's; nothing here
queues or retries by hand.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from .execute import run_point

OnResult = Callable[[int, dict[str, Any]], None]
RAY_RETRIES = 3  # runs of a point whose worker died, before the point is reported as crashed


def run_local(payloads: Sequence[dict[str, Any]], cache_root: str, jobs: int, on_result: OnResult) -> None:
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(payloads)))) as pool:
        futures = {pool.submit(run_point, p, cache_root): i for i, p in enumerate(payloads)}
        for done in as_completed(futures):
            on_result(futures[done], done.result())


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached (an input error of the sweep, exit 2)."""


def run_ray(payloads: Sequence[dict[str, Any]], cache_root: str, address: str, on_result: OnResult) -> dict[str, Any]:
    """Run every point as a Ray task on the cluster at ``address`` (`auto`: the one this machine belongs to).
    The cache folder must be one every node sees (shared storage) for the nodes to share builds and verdicts;
    otherwise each node keeps its own. Returns what the cluster was (for the report)."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install 'syncverify[ray]'") from None
    # Ray prints what happens to the cluster (a node lost) on the driver's stdout: while it runs, that is
    # stderr, so that stdout stays the report (a JSON or SARIF document)
    with contextlib.redirect_stdout(sys.stderr):
        return _run_ray(ray, payloads, cache_root, address, on_result)


def _run_ray(ray: Any, payloads: Sequence[dict[str, Any]], cache_root: str, address: str,
             on_result: OnResult) -> dict[str, Any]:
    try:
        ray.init(address=address, ignore_reinit_error=True, logging_level="ERROR", log_to_driver=False)
    except Exception as err:  # ConnectionError, and whatever Ray raises for a bad address
        raise RayUnavailable(f"--ray {address}: cannot connect: {err}") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=RAY_RETRIES, retry_exceptions=False)(run_point)
        pending = {task.remote(p, cache_root): i for i, p in enumerate(payloads)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as err:  # the worker died RAY_RETRIES + 1 times: the point's result says so
                    record = _lost(payloads[index], err)
                on_result(index, record)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        return {"executor": "ray", "address": address, "nodes": len(nodes)}
    finally:
        ray.shutdown()


def _lost(payload: dict[str, Any], err: Exception) -> dict[str, Any]:
    point = payload["point"]
    return {"name": point["name"], "path": point["path"], "config": dict(point["config"]),
            "expect": point["expect"], "status": "crashed", "codes": [], "cached": False, "built": False,
            "message": f"the point's worker was lost {RAY_RETRIES + 1} times: {type(err).__name__}: {err}",
            "seconds": 0.0}
