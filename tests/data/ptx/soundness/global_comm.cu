// Threads that communicate through global memory, which the checker does not model: extraction refuses
// at the read that may see another thread's write, and names the write. The twins touch global memory
// as data only: each CTA its own output tile from read-only inputs, one thread reading back what it
// stored. An acquire load whose value decides nothing is refused too (it only exists to synchronize).
#include <cstdint>

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// each CTA scales its own 128-element tile of x into out (through shared memory), alpha read by all
extern "C" __global__ void __launch_bounds__(128) own_tile(float* out, const float* x, const float* alpha) {
  __shared__ float acc[128];
  const int base = blockIdx.x * 128;
  acc[threadIdx.x] = x[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = *alpha * acc[127 - threadIdx.x];
}

// warp 0 stores a buffer, warp 1 reads it after __syncthreads: ordered on the GPU, but global memory is not
// modelled, so it is refused
extern "C" __global__ void __launch_bounds__(64) warps_via_global(float* out, float* buf) {
  __shared__ float acc[64];
  acc[threadIdx.x] = (float)threadIdx.x;
  if (threadIdx.x < 32) buf[threadIdx.x] = 2.f * threadIdx.x;
  __syncthreads();
  if (threadIdx.x >= 32) out[threadIdx.x] = buf[threadIdx.x - 32] + acc[63 - threadIdx.x];
}

// the same buffer, stored and read back by one thread only
extern "C" __global__ void __launch_bounds__(64) one_thread_readback(float* out, float* buf) {
  __shared__ float acc[64];
  acc[threadIdx.x] = (float)threadIdx.x;
  if (threadIdx.x == 0) buf[0] = 2.f;
  __syncthreads();
  out[threadIdx.x] = acc[63 - threadIdx.x];
  if (threadIdx.x == 0) out[64] = buf[0];
}

// every thread stores its own element of its CTA's part of the buffer and reads it back: disjoint bytes
// when the addresses are known (the pointer bound), possibly not when they are not
extern "C" __global__ void __launch_bounds__(64) own_readback(float* out, float* buf) {
  __shared__ float acc[64];
  const int i = blockIdx.x * 64 + threadIdx.x;
  acc[threadIdx.x] = (float)threadIdx.x;
  buf[i] = 2.f * threadIdx.x;
  __syncthreads();
  out[i] = buf[i] + acc[63 - threadIdx.x];
}

// an acquire load whose value is only stored: it decides nothing, but an acquire synchronizes with a release
extern "C" __global__ void __launch_bounds__(64) acquire_unused(int* out, const int* flag) {
  __shared__ int acc[64];
  acc[threadIdx.x] = (int)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = acc[63 - threadIdx.x] + (threadIdx.x == 0 ? ld_acquire(flag) : 0);
}

// the same with a relaxed load: data
extern "C" __global__ void __launch_bounds__(64) relaxed_unused(int* out, const int* flag) {
  __shared__ int acc[64];
  acc[threadIdx.x] = (int)threadIdx.x;
  __syncthreads();
  int v = 0;
  if (threadIdx.x == 0) asm volatile("ld.global.relaxed.gpu.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  out[threadIdx.x] = acc[63 - threadIdx.x] + v;
}
