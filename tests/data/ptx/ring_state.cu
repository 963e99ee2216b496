// A two-warp TMA ring whose pipeline position is advanced the way CUTLASS's PipelineState does it
// (`++state`: `if (++index == STAGES) { index = 0; phase ^= 1; }`), with a k-tile count that is a kernel
// parameter counted down (`for (; k_tiles > 0; --k_tiles)`, as CUTLASS's mainloop) and a producer tail
// that acquires every stage after the loop (CUTLASS's `load_tail`). Nothing but the exit test reads the
// count, so the loop can be kept as a loop over every trip count (`--symbolic 2>=1`).
// Seeded bugs: -DNO_EMPTY_WAIT drops the producer's acquire of the empty barrier, -DNO_FULL_WAIT the
// consumer's wait on the full barrier, -DEMPTY_COUNT=16 initializes the empty barriers with half the
// consumer's arrivals (the tail then never completes), -DNO_TAIL drops the producer tail (the kernel is
// still correct: the tail only keeps the producer from exiting early).
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

// CUTLASS's PipelineState: a stage index and a phase bit, advanced together.
struct PipelineState {
  int index = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void operator++() {
    if (++index == STAGES) {
      index = 0;
      phase ^= 1;
    }
  }
};

extern "C" __global__ void __launch_bounds__(64) ring_state(const float* __restrict__ src, float* out, int k_tiles) {
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
    PipelineState write;  // the producer starts with the opposite phase: every stage is free
    const float* p = src;
#pragma unroll 1  // CUTLASS_PRAGMA_NO_UNROLL, as CUTLASS's mainloop
    for (; k_tiles > 0; --k_tiles) {
#if !defined(NO_EMPTY_WAIT)
      mbar_wait(&empty[write.index], write.phase ^ 1);  // producer_acquire
#endif
      if (elect_one()) {
        mbar_arrive_expect_tx(&full[write.index], BYTES);
        bulk_load(tile[write.index], p, BYTES, &full[write.index]);
      }
      __syncwarp();
      p += BYTES / 4;
      ++write;
    }
#if !defined(NO_TAIL)
    for (int s = 0; s < STAGES; ++s) {  // load_tail: wait until the consumer released every stage
      mbar_wait(&empty[write.index], write.phase ^ 1);
      ++write;
    }
#endif
  } else {
    PipelineState read;
    float acc = 0.f;
#pragma unroll 1
    for (; k_tiles > 0; --k_tiles) {
#if !defined(NO_FULL_WAIT)
      mbar_wait(&full[read.index], read.phase);  // consumer_wait
#endif
      for (int j = threadIdx.x % 32; j < BYTES / 4; j += 32) acc += tile[read.index][j];
      mbar_arrive(&empty[read.index]);  // consumer_release
      ++read;
    }
    out[threadIdx.x] = acc;
  }
}
