// Probe: can a bulk (TMA) store read shared memory that generic st.shared wrote, ordered before it
// only by bar.sync, without fence.proxy.async (the SV601 pattern of specs/tma_store_no_fence.sync)?
//
// Every CTA runs the spec's epilogue ITERS times over 2 buffers: both warps write their 4 KiB part of
// buffer s with a stamp that names the CTA, iteration and warp, bar.sync, and thread 0 issues the bulk
// store of both parts to global memory (cp.async.bulk.global.shared::cta.bulk_group), then waits for the
// previous store's reads before the buffer is reused. The host counts words whose stamp is not the one
// written in that iteration. Variants make the generic writes as late as a program can make them:
//   0 plain          the spec as written (uint4 stores, no fence)
//   1 flood          each lane first issues FLOOD 32-way bank-conflicted stores to a scratch area,
//                    so the stamp stores sit at the end of a long shared-memory store queue
//   2 conflicted     the stamp stores themselves are 32-way bank-conflicted
//   3 generic        the stamp stores go through generic addresses (st.u32 on a generic pointer)
//   4 flood+fence    variant 1 with the writers' fence.proxy.async.shared::cta (the fix): the control
//   5 writer-only    only warp 1 writes (after a flood); warp 0 issues the store right after bar.sync
//   6 conflicted+fence  variant 2 with the writers' fence.proxy.async (the fix): the control for 2
//   7 conflicted+membar variant 2 with lane 0 of each warp executing __threadfence_system() before the
//                    barrier (what the kernels' progress record before a bar.sync does)
// Build: nvcc -arch=sm_90a -O3 -o probe tma_store_fence.cu ; run: ./probe [CTAS [REPS]] (one line per variant)
#include <cstdio>
#include <cstdlib>
#include <vector>

typedef unsigned int u32;
#define ITERS 256
#define PART 4096u
#define FLOOD 64

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

template <int VARIANT>
__global__ void __launch_bounds__(64) epilogue(u32* dst) {
  extern __shared__ __align__(1024) unsigned char sm[];
  unsigned char* buf = sm;                  // 2 buffers x 2 parts x 4 KiB
  u32* scratch = (u32*)(sm + 4 * PART);     // 4 KiB for the flood
  const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int k = 0; k < ITERS; ++k) {
    const u32 s = k % 2;
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    asm volatile("bar.sync 1, 64;" ::: "memory");
    const u32 stamp = (blockIdx.x << 12) ^ ((u32)k << 1 | warp) ^ 0x5A000000u;
    uint4* part = (uint4*)(buf + (2 * s + warp) * PART);
    const bool writes = VARIANT != 5 || warp == 1;
    if (VARIANT == 1 || VARIANT == 4 || VARIANT == 5) {
      #pragma unroll 1
      for (int f = 0; f < FLOOD; ++f) ((volatile u32*)scratch)[(lane * 32 + f) % 1024] = stamp + f;
    }
    if (writes) {
      const uint4 v = make_uint4(stamp, stamp, stamp, stamp);
      if (VARIANT == 2 || VARIANT == 6 || VARIANT == 7) {
        for (u32 j = 0; j < PART / 16 / 32; ++j) part[lane * (PART / 16 / 32) + j] = v;
      } else if (VARIANT == 3) {
        for (u32 j = lane; j < PART / 4; j += 32) {
          u32* gp = (u32*)part + j;
          asm volatile("st.u32 [%0], %1;" :: "l"(gp), "r"(stamp) : "memory");
        }
      } else {
        for (u32 j = lane; j < PART / 16; j += 32) part[j] = v;
      }
    }
    if (VARIANT == 4 || VARIANT == 6) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (VARIANT == 7 && lane == 0) __threadfence_system();
    asm volatile("bar.sync 1, 64;" ::: "memory");
    if (threadIdx.x == 0) {
      u32* g = dst + ((size_t)blockIdx.x * ITERS + k) * (2 * PART / 4);
      for (u32 w = 0; w < 2; ++w) {
        if (VARIANT == 5 && w == 0) continue;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(g + w * PART / 4), "r"(smem_addr(buf + (2 * s + w) * PART)), "r"(PART) : "memory");
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

template <int V>
static void run(const char* name, int grid, u32* d_dst, std::vector<u32>& h, size_t words) {
  const int smem = 5 * PART;
  cudaFuncSetAttribute(epilogue<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaMemset(d_dst, 0, words * 4);
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  epilogue<V><<<grid, 64, smem>>>(d_dst);
  cudaEventRecord(b);
  cudaError_t err = cudaDeviceSynchronize();
  float ms = 0; cudaEventElapsedTime(&ms, a, b);
  if (err != cudaSuccess) { printf("variant %d %-12s error %s\n", V, name, cudaGetErrorString(err)); exit(1); }
  cudaMemcpy(h.data(), d_dst, words * 4, cudaMemcpyDeviceToHost);
  unsigned long long bad = 0, checked = 0, stale_prev = 0;
  for (int c = 0; c < grid; ++c)
    for (int k = 0; k < ITERS; ++k)
      for (u32 w = 0; w < 2; ++w) {
        if (V == 5 && w == 0) continue;
        const u32 want = ((u32)c << 12) ^ ((u32)k << 1 | w) ^ 0x5A000000u;
        const u32 prev = k >= 2 ? (((u32)c << 12) ^ ((u32)(k - 2) << 1 | w) ^ 0x5A000000u) : 0u;
        const u32* p = h.data() + ((size_t)c * ITERS + k) * (2 * PART / 4) + w * PART / 4;
        for (u32 i = 0; i < PART / 4; ++i) {
          ++checked;
          if (p[i] != want) { ++bad; if (p[i] == prev) ++stale_prev; }
        }
      }
  printf("variant %d %-12s grid %d: %llu of %llu words stale (%llu held the previous iteration's stamp), %.3f ms\n",
         V, name, grid, bad, checked, stale_prev, ms);
}

int main(int argc, char** argv) {
  const int grid = argc > 1 ? atoi(argv[1]) : 132 * 4;
  const int reps = argc > 2 ? atoi(argv[2]) : 2;
  const size_t words = (size_t)grid * ITERS * 2 * PART / 4;
  u32* d_dst;
  if (cudaMalloc(&d_dst, words * 4) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
  std::vector<u32> h(words);
  for (int rep = 0; rep < reps; ++rep) {
    run<0>("plain", grid, d_dst, h, words);
    run<1>("flood", grid, d_dst, h, words);
    run<2>("conflicted", grid, d_dst, h, words);
    run<3>("generic", grid, d_dst, h, words);
    run<4>("flood+fence", grid, d_dst, h, words);
    run<5>("writer-only", grid, d_dst, h, words);
    run<6>("conflicted+fence", grid, d_dst, h, words);
    run<7>("conflicted+membar", grid, d_dst, h, words);
  }
  return 0;
}
