// A probe executed by the lanes of a whole warp: PTX runs mbarrier.try_wait per thread, and each thread's
// test may time out on its own, so the lanes' results can differ. One TMA load fills a tile (warp 0, lane
// 0); warp 1 probes its barrier and, where the probe failed, arrives on a second barrier `late` (a count of
// the lanes that found the tile not ready), then waits for the tile and reads it.
//   lanes_arrive  every lane arrives on `late` (count 32) where its own probe failed, then waits for it:
//                 lanes with different results arrive fewer than 32 times and wait forever -- refused;
//   lanes_vote    the result is voted across the warp first (__all_sync), then one lane arrives (count 1)
//                 and the warp meets at __syncwarp: every lane takes the same branch -- extracted;
//   lanes_novote  the twin of lanes_vote without the vote: lanes split at the branch, the __syncwarp
//                 on one path only -- refused;
//   lanes_one     one lane probes and arrives -- extracted.
// Built by build.sh beside it (nvcc 13.0, -arch=sm_90a -ptx -lineinfo); the PTX is committed.
#include <cstdint>

#define BYTES 1024

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint32_t try_wait(uint64_t* b, uint32_t parity) {
  uint32_t ok;
  asm volatile("{\n\t.reg .pred P1;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n\t"
               "selp.b32 %0, 1, 0, P1;\n\t}" : "=r"(ok) : "r"(smem_u32(b)), "r"(parity) : "memory");
  return ok;
}

__device__ __forceinline__ void wait(uint64_t* b, uint32_t parity) {
  asm volatile("{\n\t.reg .pred P1;\n"
               "LAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\t"
               "bra LAB_WAIT;\n"
               "DONE:\n\t}" :: "r"(smem_u32(b)), "r"(parity) : "memory");
}

__device__ __forceinline__ void arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(b)) : "memory");
}

#define KERNEL(NAME, LATE, PROBE)                                                                     \
  extern "C" __global__ void __launch_bounds__(64) NAME(const float* src, float* out) {              \
    __shared__ alignas(128) float tile[BYTES / 4];                                                   \
    __shared__ alignas(8) uint64_t full, late;                                                       \
    if (threadIdx.x == 0) {                                                                          \
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full)) : "memory");    \
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(&late)), "r"(LATE)      \
                   : "memory");                                                                      \
    }                                                                                                \
    __syncthreads();                                                                                 \
    if (threadIdx.x == 0) {                                                                          \
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"                          \
                   :: "r"(smem_u32(&full)), "r"(BYTES) : "memory");                                  \
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" \
                   :: "r"(smem_u32(tile)), "l"(src), "r"(BYTES), "r"(smem_u32(&full)) : "memory");   \
    } else if (threadIdx.x >= 32) {                                                                  \
      PROBE                                                                                          \
      wait(&full, 0);                                                                                \
      out[threadIdx.x] = tile[threadIdx.x % 32];                                                     \
    }                                                                                                \
  }

KERNEL(lanes_arrive, 32,
       const uint32_t tok = try_wait(&full, 0);
       if (!tok) { arrive(&late); wait(&late, 0); })
KERNEL(lanes_vote, 1,
       const uint32_t tok = try_wait(&full, 0);
       if (!__all_sync(0xffffffffu, tok)) { if (threadIdx.x == 32) arrive(&late); __syncwarp(); wait(&late, 0); })
KERNEL(lanes_novote, 1,
       const uint32_t tok = try_wait(&full, 0);
       if (!tok) { if (threadIdx.x == 32) arrive(&late); __syncwarp(); wait(&late, 0); })
KERNEL(lanes_one, 1,
       if (threadIdx.x == 32) { if (!try_wait(&full, 0)) arrive(&late); }
       __syncwarp();)
