"""Does a CTA's exit wait for the source reads of its bulk stores? A measurement on the GPU.

docs/model.md ("A CTA's exit and its bulk stores"): nothing in PTX's text says that a CTA's exit waits for the
shared-memory reads of the bulk stores it issued, and DeepGEMM's sm90 GEMM exits with such reads unretired;
CUTLASS (`store_tail`) and Triton wait first. This script asks the hardware what it does, as far as an experiment
can: it cannot prove that the exit waits, only fail to see that it does not where a control shows it would. The
checker's reading `exit-drains-bulk-reads` (on by default) rests on what it printed (docs/gpu-agreement.md).

Each CTA asks for more than half of the SM's shared memory, so one CTA runs per SM and the next CTA on that
SM gets the same shared memory as soon as the last one has gone. A CTA fills BYTES of it with a pattern of
its own, fences the generic proxy's writes for the async proxy, has one thread issue a bulk copy of those
bytes to global memory (`cp.async.bulk.global.shared::cta.bulk_group`), commits the group and exits:

* ``nowait``: with no `cp.async.bulk.wait_group.read` (DeepGEMM's epilogue);
* ``wait``: with `cp.async.bulk.wait_group.read 0` before the exit (CUTLASS's and Triton's; the control);
* ``overwrite``: no wait, and the CTA itself overwrites the bytes after the commit (a WAR race on purpose:
  it shows whether the experiment can see an unretired read at all).

The first thing every CTA does is overwrite that shared memory with a poison word. If an exit did not
wait for the copy's read, a later CTA's poison (or pattern) would reach global memory in place of the
earlier CTA's pattern. The host counts, per launch, the CTAs whose output differs from their pattern.

Needs cuda.core (NVRTC) and numpy, and a GPU of compute capability 9.0 or later:

    python3 bench/gpu_exit_drain.py --launches 20 --out bench/RESULTS-gpu-exit-drain.json
"""

from __future__ import annotations

import argparse
import json
import time

SOURCE = r"""
extern "C" __global__ void store_then_exit(unsigned* out, unsigned words, int wait_read) {
  extern __shared__ __align__(128) unsigned smem[];
  const unsigned cta = blockIdx.x;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) smem[i] = 0xDEADBEEFu;   // poison first
  __syncthreads();
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) smem[i] = cta * 2654435761u + i;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned src = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    unsigned long long dst = reinterpret_cast<unsigned long long>(out + static_cast<size_t>(cta) * words);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(dst), "r"(src), "r"(words * 4u) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (wait_read == 1) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  if (wait_read == 2) {  // the positive control: this CTA itself overwrites the bytes its copy still reads
    __syncthreads();
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x) smem[i] = 0xDEADBEEFu;
  }
}

extern "C" __global__ void count_wrong(const unsigned* out, unsigned words, unsigned ctas, unsigned* wrong) {
  for (unsigned cta = blockIdx.x; cta < ctas; cta += gridDim.x) {
    __shared__ int bad;
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x)
      if (out[static_cast<size_t>(cta) * words + i] != cta * 2654435761u + i) bad = 1;
    __syncthreads();
    if (threadIdx.x == 0 && bad) atomicAdd(wrong, 1u);
    __syncthreads();
  }
}
"""


def _ck(res):  # type: ignore[no-untyped-def]
    """Unwrap a cuda.bindings driver call: (err, *values)."""
    from cuda.bindings import driver

    err = res[0] if isinstance(res, tuple) else res
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(str(err))
    return res[1] if isinstance(res, tuple) and len(res) == 2 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20, help="launches of each variant (default 20)")
    ap.add_argument("--waves", type=int, default=200, help="CTAs per SM in one launch (default 200)")
    ap.add_argument("--sizes", default="4096,16384,65536", help="bytes stored by each CTA, comma-separated")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()

    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    cc = dev.compute_capability
    arch = f"sm_{cc[0]}{cc[1]}a"
    code = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=arch, std="c++17")).compile("cubin")
    store = code.get_kernel("store_then_exit")
    count = code.get_kernel("count_wrong")
    props = dev.properties
    sms = props.multiprocessor_count
    smem_max = props.max_shared_memory_per_block_optin
    smem = smem_max  # more than half of the SM's shared memory: one CTA per SM
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    _ck(driver.cuKernelSetAttribute(attr, smem, store.handle, dev.device_id))
    ctas = sms * args.waves
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        words = size // 4
        out = _ck(driver.cuMemAlloc(ctas * size))
        wrong = _ck(driver.cuMemAlloc(4))
        host = np.zeros(1, dtype=np.uint32)
        for variant, wait_read in (("nowait", 0), ("wait", 1), ("overwrite", 2)):
            per_launch = []
            t0 = time.monotonic()
            for _ in range(args.launches):
                _ck(driver.cuMemsetD32(out, 0, ctas * words))
                _ck(driver.cuMemsetD32(wrong, 0, 1))
                launch(stream, LaunchConfig(grid=ctas, block=256, shmem_size=smem), store,
                       np.uint64(int(out)), np.uint32(words), np.int32(wait_read))
                launch(stream, LaunchConfig(grid=4 * sms, block=256), count,
                       np.uint64(int(out)), np.uint32(words), np.uint32(ctas), np.uint64(int(wrong)))
                stream.sync()
                _ck(driver.cuMemcpyDtoH(host, wrong, 4))
                per_launch.append(int(host[0]))
            row = {"bytes_per_cta": size, "variant": variant, "ctas_per_launch": ctas, "launches": args.launches,
                   "ctas_wrong_per_launch": per_launch, "ctas_wrong": sum(per_launch),
                   "seconds": round(time.monotonic() - t0, 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        _ck(driver.cuMemFree(out))
        _ck(driver.cuMemFree(wrong))
    result = {"device": dev.name, "compute_capability": f"{cc[0]}.{cc[1]}", "sms": sms,
              "dynamic_smem_per_cta": smem, "block": 256, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))


if __name__ == "__main__":
    main()
