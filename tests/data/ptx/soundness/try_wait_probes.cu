// A one-stage TMA handoff (warp 0 produces, warp 1 consumes) whose consumer waits in different ways.
// Only a loop that always comes back to a try_wait of the same barrier and parity is a wait; the others
// can go on with the phase incomplete and are refused by extraction (docs/extract.md, "try_wait blocks").
#include <cstdint>

#define BYTES 1024

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ bool try_wait(uint64_t* b, uint32_t parity) {
  uint32_t ok;
  asm volatile("{\n\t.reg .pred P1;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n\t"
               "selp.b32 %0, 1, 0, P1;\n\t}" : "=r"(ok) : "r"(smem_u32(b)), "r"(parity) : "memory");
  return ok != 0;
}

// CUTLASS's ClusterBarrier::wait: the LAB_WAIT loop
__device__ __forceinline__ void lab_wait(uint64_t* b, uint32_t parity) {
  asm volatile("{\n\t.reg .pred P1;\n"
               "LAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\t"
               "bra LAB_WAIT;\n"
               "DONE:\n\t}" :: "r"(smem_u32(b)), "r"(parity) : "memory");
}

__device__ __forceinline__ void produce(uint64_t* full, float* tile, const float* src) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(full)), "r"(BYTES)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_u32(tile)), "l"(src), "r"(BYTES), "r"(smem_u32(full)) : "memory");
  }
}

#define KERNEL(NAME, WAIT)                                                                           \
  extern "C" __global__ void __launch_bounds__(64) NAME(const float* src, float* out, const int* flag) { \
    __shared__ alignas(128) float tile[BYTES / 4];                                                   \
    __shared__ alignas(8) uint64_t full;                                                             \
    if (threadIdx.x == 0)                                                                            \
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full)) : "memory");     \
    __syncthreads();                                                                                 \
    if (threadIdx.x < 32) {                                                                          \
      produce(&full, tile, src);                                                                     \
    } else {                                                                                         \
      WAIT;                                                                                          \
      out[threadIdx.x] = tile[threadIdx.x % 32];                                                     \
    }                                                                                                \
  }

// the waits: a spin (wait), the CUTLASS LAB_WAIT loop (wait), a probe nothing reads, then a spin (wait)
KERNEL(spin, while (!try_wait(&full, 0)) {})
KERNEL(lab, lab_wait(&full, 0))
KERNEL(unused_probe, (void)try_wait(&full, 0); while (!try_wait(&full, 0)) {})
// the probes: four tries, one more try, a clock64 deadline, an abort flag in global memory
KERNEL(bounded_retry, for (int i = 0; i < 4 && !try_wait(&full, 0); ++i) {})
KERNEL(probe_twice, if (!try_wait(&full, 0)) try_wait(&full, 0))
KERNEL(watchdog_clock, const long long t0 = clock64();
       while (!try_wait(&full, 0)) { if (clock64() - t0 > 1000000) break; })
KERNEL(watchdog_flag, while (!try_wait(&full, 0)) { if (*(volatile const int*)flag) break; })
