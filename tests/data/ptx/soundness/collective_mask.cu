// Warp-collective .sync instructions whose member mask leaves out lanes that execute them: all 32 lanes of
// warp 0 run elect.sync / shfl.sync / vote.sync / __syncwarp with the mask 0xffff. PTX: "The behavior is
// undefined if the executing thread is not in membermask" (SV207). The twins use the full mask, or a mask
// that is a kernel parameter (refused unless bound: it is not assumed full).
#include <cstdint>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ bool elect(uint32_t mask) {
  uint32_t pred = 0;
  asm volatile("{\n\t.reg .b32 %%rx;\n\t.reg .pred %%px;\n\t"
               "elect.sync %%rx|%%px, %1;\n\t"
               "@%%px mov.s32 %0, 1;\n\t}" : "+r"(pred) : "r"(mask));
  return pred != 0;
}

__device__ __forceinline__ void wait(uint64_t* b, uint32_t parity) {
  asm volatile("{\n\t.reg .pred P1;\n"
               "LAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\t"
               "bra LAB_WAIT;\n"
               "DONE:\n\t}" :: "r"(smem_u32(b)), "r"(parity) : "memory");
}

// warp 0 writes the tile (its lane i: word i), one lane releases it after a __syncwarp, warp 1 reads it
#define KERNEL(NAME, MASK, PRODUCE)                                                                  \
  extern "C" __global__ void __launch_bounds__(64) NAME(float* out, uint32_t mask_param) {           \
    __shared__ float tile[32];                                                                       \
    __shared__ alignas(8) uint64_t full;                                                             \
    if (threadIdx.x == 0)                                                                            \
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full)) : "memory");     \
    __syncthreads();                                                                                 \
    if (threadIdx.x < 32) {                                                                          \
      const uint32_t m = (MASK);                                                                     \
      PRODUCE;                                                                                       \
    } else {                                                                                         \
      wait(&full, 0);                                                                                \
      out[threadIdx.x] = tile[threadIdx.x % 32];                                                     \
    }                                                                                                \
  }

#define ARRIVE asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(&full)) : "memory")

// elect.sync: one lane releases the warp's writes
#define BY_ELECT tile[threadIdx.x] = 1.f; __syncwarp(); if (elect(m)) ARRIVE
// shfl.sync: lane 0's word, read by every lane, picks the word each lane writes
#define BY_SHFL tile[__shfl_sync(m, (int)threadIdx.x, 0) ^ threadIdx.x] = 1.f; __syncwarp(); \
                if (threadIdx.x == 0) ARRIVE
// vote.sync: the ballot decides who releases
#define BY_VOTE tile[threadIdx.x] = 1.f; __syncwarp(); if (__ballot_sync(m, threadIdx.x < 8) == 0xffu && \
                threadIdx.x == 0) ARRIVE
// __syncwarp(mask): the lanes' writes are published through it
#define BY_SYNCWARP tile[threadIdx.x] = 1.f; __syncwarp(m); if (threadIdx.x == 0) ARRIVE

KERNEL(elect_half, 0xffffu, BY_ELECT)
KERNEL(elect_full, 0xffffffffu, BY_ELECT)
KERNEL(elect_param, mask_param, BY_ELECT)
KERNEL(shfl_half, 0xffffu, BY_SHFL)
KERNEL(shfl_full, 0xffffffffu, BY_SHFL)
KERNEL(vote_half, 0xffffu, BY_VOTE)
KERNEL(vote_full, 0xffffffffu, BY_VOTE)
KERNEL(syncwarp_half, 0xffffu, BY_SYNCWARP)
KERNEL(syncwarp_full, 0xffffffffu, BY_SYNCWARP)
