// A software grid barrier between the CTAs of a persistent grid, as FlashInfer's multi-CTA radix top-k
// writes it (include/flashinfer/topk.cuh, AdvanceRadixGroupBarrier: thread 0 `red_release`s the arrival
// counter -- fence.acq_rel.gpu, then red.relaxed.gpu.add -- and spins `wait_ge` on it with ld.acquire.gpu,
// between two __syncthreads), once per round; each round every CTA publishes its part of a global
// histogram before the barrier and reads every CTA's part after it (double-buffered by round).
//   -DRESET_RACE   at the end the leading CTA zeroes the counter for the next launch while a peer may still
//                  spin in its last wait_ge (flashinfer-ai/flashinfer#3615): the peer never leaves
//   -DNO_BARRIER   round 1 reads the histogram without the barrier (a race on the parts)
#ifndef ROUNDS
#define ROUNDS 2
#endif

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release(int* p, int v) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void wait_ge(const int* p, int target) {
  while (ld_acquire(p) < target) {}
}

__device__ __forceinline__ void grid_barrier(int* counter, int round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    red_release(counter, 1);
    wait_ge(counter, (round + 1) * gridDim.x);
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(64) radix_rounds(float* hist, float* out, int* counter) {
  const int t = threadIdx.x, n = blockDim.x;
  float acc = 0.0f;
  for (int r = 0; r < ROUNDS; ++r) {
    float* part = hist + (r % 2) * gridDim.x * n;
    part[blockIdx.x * n + t] = acc + static_cast<float>(r);          // this CTA's part of the histogram
#ifdef NO_BARRIER
    if (r == 0)
#endif
    grid_barrier(counter, r);
    for (int c = 0; c < gridDim.x; ++c) {
      acc += part[c * n + t];                                         // every CTA's part
    }
  }
  out[blockIdx.x * n + t] = acc;
#ifdef RESET_RACE
  if (blockIdx.x == 0 && t == 0) {
    st_relaxed(counter, 0);                                           // reset for the next launch
  }
#endif
}
