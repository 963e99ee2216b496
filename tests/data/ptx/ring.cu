// A two-warp TMA ring written the way CUTLASS writes its barriers (inline PTX):
// warp 0 produces with one elected lane, warp 1 consumes and releases with every lane.
// Seeded bugs: -DNO_EMPTY_WAIT drops the producer's wait on the empty barrier (producer_acquire),
// -DNO_FULL_WAIT the consumer's wait on the full barrier (consumer_wait), -DEMPTY_COUNT=16 initializes
// the empty barriers with half the consumer's arrivals.
#include <cstdint>

#define STAGES 2
#define BYTES 1024
#ifndef EMPTY_COUNT
#define EMPTY_COUNT 32
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t* b, uint32_t n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(b)), "r"(n) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile("{\n\t.reg .pred P1;\n"
               "LAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\t"
               "bra LAB_WAIT;\n"
               "DONE:\n\t}" :: "r"(smem_u32(b)), "r"(parity) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(b)) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(b)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ bool elect_one() {
  uint32_t pred = 0;
  asm volatile("{\n\t.reg .b32 %%rx;\n\t.reg .pred %%px;\n\t"
               "elect.sync %%rx|%%px, %1;\n\t"
               "@%%px mov.s32 %0, 1;\n\t}" : "+r"(pred) : "r"(0xFFFFFFFFu));
  return pred != 0;
}

extern "C" __global__ void __launch_bounds__(64) ring(const float* __restrict__ src, float* out, int iters) {
  __shared__ alignas(128) float tile[STAGES][BYTES / 4];
  __shared__ alignas(8) uint64_t full[STAGES];
  __shared__ alignas(8) uint64_t empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], EMPTY_COUNT);
    }
  }
  __syncthreads();
  if (warp == 0) {
    for (int k = 0; k < iters; ++k) {
      const int s = k % STAGES;
#if !defined(NO_EMPTY_WAIT)
      mbar_wait(&empty[s], ((k / STAGES) + 1) & 1);
#endif
      if (elect_one()) {
        mbar_arrive_expect_tx(&full[s], BYTES);
        bulk_load(tile[s], src + (size_t)k * (BYTES / 4), BYTES, &full[s]);
      }
      __syncwarp();
    }
  } else {
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) {
      const int s = k % STAGES;
#if !defined(NO_FULL_WAIT)
      mbar_wait(&full[s], (k / STAGES) & 1);
#endif
      for (int j = threadIdx.x % 32; j < BYTES / 4; j += 32) acc += tile[s][j];
      mbar_arrive(&empty[s]);
    }
    out[threadIdx.x] = acc;
  }
}
