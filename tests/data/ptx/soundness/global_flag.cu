// Waits on global memory, which extraction does not model and must refuse at the line of the read, never
// skip: a stream-K fixup written the way cutlass/barrier.h writes it (GenericBarrier::wait_eq spins on
// ld.acquire.gpu, arrive_inc is fence.acq_rel.gpu + red.relaxed.gpu), a volatile flag, a plain load spun
// on, an atomic counter deciding which CTA finishes. The twins read global memory as data only: a
// data-dependent branch, an atomic whose value nothing uses, a trip count loaded once.
#include <cstdint>

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ int ld_plain(const int* p) {
  int v;
  asm volatile("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release(int* p, int v) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// cutlass/barrier.h GenericBarrier<int>::wait_eq and arrive_inc
__device__ __forceinline__ void wait_eq(const int* flag, int val) {
  if (threadIdx.x == 0) {
    while (ld_acquire(flag) != val) {}
  }
  __syncthreads();
}

__device__ __forceinline__ void arrive_inc(int* flag, int val) {
  __syncthreads();
  if (threadIdx.x == 0) red_release(flag, val);
}

// Two CTAs share one output tile: CTA 1 stores its partial sums to the workspace and signals, CTA 0
// waits for the signal, adds the partials to its own (reduced through shared memory) and stores the tile.
template <bool WAIT>
__device__ __forceinline__ void fixup(float* out, float* partials, int* flag) {
  __shared__ float acc[128];
  acc[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  const float mine = acc[(threadIdx.x + 1) % 128];
  if (blockIdx.x == 1) {
    partials[threadIdx.x] = mine;
    arrive_inc(flag, 1);
  } else {
    if (WAIT) wait_eq(flag, 1);
    out[threadIdx.x] = mine + partials[threadIdx.x];
  }
}

extern "C" __global__ void __launch_bounds__(128) stream_k_fixup(float* out, float* partials, int* flag) {
  fixup<true>(out, partials, flag);
}

extern "C" __global__ void __launch_bounds__(128) stream_k_fixup_no_wait(float* out, float* partials, int* flag) {
  fixup<false>(out, partials, flag);
}

// the block waits for a host (or another kernel) to raise a volatile flag, then uses shared memory
extern "C" __global__ void __launch_bounds__(128) volatile_flag(float* out, const int* flag) {
  __shared__ float acc[128];
  if (threadIdx.x == 0) while (*(volatile const int*)flag == 0) {}
  acc[threadIdx.x] = 1.f;
  __syncthreads();
  out[threadIdx.x] = acc[127 - threadIdx.x];
}

// a weak load spun on (kept in the loop by asm volatile)
extern "C" __global__ void __launch_bounds__(128) plain_spin(float* out, const int* flag) {
  __shared__ float acc[128];
  if (threadIdx.x == 0) while (ld_plain(flag) == 0) {}
  acc[threadIdx.x] = 1.f;
  __syncthreads();
  out[threadIdx.x] = acc[127 - threadIdx.x];
}

// the last CTA to finish (an atomic ticket) reduces the partials of all
extern "C" __global__ void __launch_bounds__(128) last_block(float* out, float* partials, int* counter) {
  __shared__ float acc[128];
  __shared__ int last;
  acc[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  partials[blockIdx.x * 128 + threadIdx.x] = acc[127 - threadIdx.x];
  __threadfence();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == (int)gridDim.x - 1;
  __syncthreads();
  if (last) out[threadIdx.x] = partials[threadIdx.x] + partials[128 + threadIdx.x];
}

// the twins: global memory read as data
extern "C" __global__ void __launch_bounds__(128) data_branch(float* out, const float* x) {
  __shared__ float acc[128];
  acc[threadIdx.x] = x[threadIdx.x] > 0.f ? 1.f : 2.f;
  __syncthreads();
  const float v = acc[127 - threadIdx.x];
  out[threadIdx.x] = v;
  if (x[threadIdx.x + 128] > 0.f) out[threadIdx.x + 128] = 2.f * v;
}

extern "C" __global__ void __launch_bounds__(128) atomic_accumulate(float* out, int* hist) {
  __shared__ float acc[128];
  acc[threadIdx.x] = 1.f;
  __syncthreads();
  atomicAdd(&hist[threadIdx.x % 8], 1);
  out[threadIdx.x] = acc[127 - threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(128) trip_from_global(float* out, const float* x, const int* n) {
  __shared__ float acc[128];
  acc[threadIdx.x] = 1.f;
  __syncthreads();
  float s = acc[127 - threadIdx.x];
  const int count = ld_plain(n);
#pragma unroll 1
  for (int i = 0; i < count; ++i) s += x[i];
  out[threadIdx.x] = s;
}
