// A split-K hand-off between the CTAs of one output tile through global memory, written with CUTLASS's
// own inter-CTA barrier (cutlass/barrier.h of pip nvidia-cutlass 4.2.0.0: GenericBarrier<SyncthreadsSync>,
// `wait_eq` spins on `ld.global.acquire.gpu`, `arrive_inc` is __syncthreads then thread 0's
// `fence.acq_rel.gpu; red.relaxed.gpu.global.add`), as the stream-K fixup
// (cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp, `fixup`) uses it: every CTA but the tile's first
// stores its partial accumulators to the workspace and signals its flag; CTA 0 waits until all have
// signalled, then adds the partials to its own and stores the tile.
//   -DNO_WAIT          the fixup reads the partials without its wait_eq (a race on the workspace)
//   -DFLAG_COUNT=N     the value CTA 0 waits for (right: gridDim.x - 1 arrivals; N = gridDim.x never comes)
#include "cutlass/barrier.h"

#ifndef FLAG_COUNT
#define FLAG_COUNT (gridDim.x - 1)
#endif

extern "C" __global__ void __launch_bounds__(64) splitk_fixup(float* out, float* partials, int* flags) {
  const int t = threadIdx.x;
  float acc = static_cast<float>(t + blockIdx.x);
  if (blockIdx.x != 0) {
    partials[(blockIdx.x - 1) * blockDim.x + t] = acc;               // store this CTA's partials
    cutlass::Barrier::arrive_inc(flags, t, 0, 1);                    // signal them
  } else {
#ifndef NO_WAIT
    cutlass::Barrier::wait_eq(flags, t, 0, FLAG_COUNT);              // wait for every peer's
#endif
    for (int s = 1; s < gridDim.x; ++s) {
      acc += partials[(s - 1) * blockDim.x + t];                     // reduce them
    }
    out[t] = acc;
  }
}
