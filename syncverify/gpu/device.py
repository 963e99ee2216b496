"""The part of the runner that touches the GPU; it runs in a child process.

A hung kernel cannot be stopped from inside its process, and a trap leaves the
CUDA context unusable (gpu-notes: "run each GPU case in its own subprocess and
kill it at a deadline"). So this child launches the repetitions one after the
other and prints one JSON line per repetition; when a kernel is still running
at the deadline it prints what the host-visible status words say and waits to
be killed by the parent.

Needs only cuda.core, cuda.bindings and numpy.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

try:
    from . import outcome as oc
except ImportError:  # run by path on a machine without syncverify's dependencies
    import outcome as oc  # type: ignore[no-redef]


def _ck(res: Any) -> Any:
    """Unwrap a cuda.bindings driver call: (err, *values)."""
    from cuda.bindings import driver

    err = res[0] if isinstance(res, tuple) else res
    if err != driver.CUresult.CUDA_SUCCESS:
        name = driver.cuGetErrorName(err)[1]
        raise RuntimeError(name.decode() if isinstance(name, bytes) else str(err))
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


class DeviceRun:
    """One loaded kernel with its buffers, ready to be launched repeatedly."""

    def __init__(self, cubin: bytes, launch: dict, grid: int):
        import numpy as np
        from cuda.bindings import driver
        from cuda.core import Device, LaunchConfig, ObjectCode

        self.np, self.driver = np, driver
        self.launch = launch
        self.grid = grid
        self.dev = Device()
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.obj = ObjectCode.from_cubin(cubin)
        self.kernel = self.obj.get_kernel(launch["kernel"])
        smem = launch["shmem_size"]
        if smem > 48 * 1024:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _ck(driver.cuKernelSetAttribute(attr, smem, self.kernel.handle, self.dev.device_id))
        cluster = launch["cluster"]
        if cluster > 1:
            self.config = LaunchConfig(grid=grid, cluster=cluster, block=launch["block"], shmem_size=smem)
        else:
            self.config = LaunchConfig(grid=grid, block=launch["block"], shmem_size=smem)
        ctas = grid * cluster
        self.status_words = ctas * launch["procs_per_cta"] * launch["status"]["words"]
        flags = driver.CU_MEMHOSTALLOC_DEVICEMAP | driver.CU_MEMHOSTALLOC_PORTABLE
        self.status_host = _ck(driver.cuMemHostAlloc(self.status_words * 4, flags))
        self.status_dev = _ck(driver.cuMemHostGetDevicePointer(self.status_host, 0))
        self.status = np.ctypeslib.as_array((ctypes.c_uint32 * self.status_words).from_address(int(self.status_host)))
        self.ctl = self._alloc(launch["ctl"]["words"])
        self.expect = self._upload(launch["expected"] or [0])
        src = launch["sources"]
        self.src_words = grid * src["regions"] * src["region_words"]
        self.src = self._alloc(self.src_words)
        stamps = self._upload(src["stamps"])
        fill = self.obj.get_kernel(launch["fill_kernel"])
        from cuda.core import launch as cu_launch

        cu_launch(self.stream, LaunchConfig(grid=1024, block=256), fill, np.uint64(int(self.src)),
                  np.uint64(int(stamps)), np.uint32(src["regions"]), np.uint32(src["region_words"]),
                  np.uint64(self.src_words))
        self.stream.sync()
        st = launch["stores"]
        self.dst_words = grid * st["regions"] * st["region_words"]
        self.dst = self._alloc(self.dst_words)
        replay = launch.get("replay") or {}
        steps = [w for s in replay.get("steps", []) for w in s]
        self.replay = self._upload(steps or [0])
        self.replay_len = len(replay.get("steps", []))

    def info(self) -> dict[str, Any]:
        version = _ck(self.driver.cuDriverGetVersion())
        cc = self.dev.compute_capability
        return {"name": self.dev.name, "driver_api": f"{version // 1000}.{version % 1000 // 10}",
                "compute_capability": f"{cc[0]}.{cc[1]}", "sms": self.dev.properties.multiprocessor_count}

    def _alloc(self, words: int) -> Any:
        return _ck(self.driver.cuMemAlloc(max(words, 1) * 4))

    def _upload(self, values: list[int]) -> Any:
        arr = self.np.asarray(values, dtype=self.np.uint32)
        ptr = self._alloc(len(arr))
        _ck(self.driver.cuMemcpyHtoD(ptr, arr, arr.nbytes))
        return ptr

    def _download(self, ptr: Any, words: int) -> list[int]:
        arr = self.np.zeros(max(words, 1), dtype=self.np.uint32)
        _ck(self.driver.cuMemcpyDtoH(arr, ptr, arr.nbytes))
        return arr.tolist()

    def run_once(self, deadline_s: float) -> oc.Rep:
        from cuda.core import launch as cu_launch

        np, driver = self.np, self.driver
        _ck(driver.cuMemsetD32(self.ctl, 0, self.launch["ctl"]["words"]))
        _ck(driver.cuMemsetD32(self.dst, 0, max(self.dst_words, 1)))
        self.status[:] = 0
        start = _ck(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT))
        stop = _ck(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT))
        handle = self.stream.handle
        _ck(driver.cuEventRecord(start, handle))
        cu_launch(self.stream, self.config, self.kernel, np.uint64(int(self.status_dev)), np.uint64(int(self.ctl)),
                  np.uint64(int(self.expect)), np.uint64(int(self.src)), np.uint64(int(self.dst)),
                  np.uint64(self.launch["watchdog_ns"]), np.uint64(int(self.replay)), np.uint32(self.replay_len))
        _ck(driver.cuEventRecord(stop, handle))
        t0 = time.monotonic()
        while True:
            err = driver.cuStreamQuery(handle)[0]
            if err == driver.CUresult.CUDA_SUCCESS:
                break
            if err != driver.CUresult.CUDA_ERROR_NOT_READY:
                name = driver.cuGetErrorName(err)[1]
                return oc.classify(self.launch, False, self.status.tolist(), None, None, 0.0,
                                   fault=name.decode() if isinstance(name, bytes) else str(err))
            if time.monotonic() - t0 > deadline_s:
                return oc.classify(self.launch, False, self.status.tolist(), None, None, deadline_s * 1000)
            time.sleep(0.0002)
        ms = _ck(driver.cuEventElapsedTime(start, stop))
        driver.cuEventDestroy(start)
        driver.cuEventDestroy(stop)
        ctl = self._download(self.ctl, self.launch["ctl"]["words"])
        dst = self._download(self.dst, self.dst_words) if self.launch["stores"]["expected"] else []
        return oc.classify(self.launch, True, self.status.tolist(), ctl, dst, float(ms))


def child_main(cubin_path: str, launch_path: str, reps: int, deadline_s: float, grid: int | None) -> int:
    """Run `reps` repetitions, one JSON line each; stop (and wait to be killed) after a hang or a fault."""
    with open(launch_path) as f:
        launch = json.load(f)
    if grid is not None:
        launch["grid"] = grid
    with open(cubin_path, "rb") as f:
        cubin = f.read()
    try:
        run = DeviceRun(cubin, launch, launch["grid"])
    except Exception as err:  # no GPU, no driver, a cubin the driver rejects
        _emit({"event": "error", "error": f"{type(err).__name__}: {err}"})
        return 2
    _emit({"event": "ready", "device": run.info()})
    for i in range(reps):
        try:
            rep = run.run_once(deadline_s)
        except Exception as err:
            rep = oc.Rep(oc.FAULT, error=f"{type(err).__name__}: {err}")
        _emit({"event": "result", "rep": i, **rep.to_json()})
        if rep.status == oc.FAULT or (rep.status == oc.HANG and "still running" in rep.error):
            # the context is unusable or a kernel still occupies the GPU: the parent kills this process
            time.sleep(3600)
            return 3
    return 0


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
