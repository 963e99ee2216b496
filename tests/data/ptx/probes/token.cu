// A two-stage TMA ring (warp 0 produces, warp 1 consumes) whose consumer asks for each stage with a probe
// and, after other work, waits only if the probe failed: the shape of CUTLASS's token API,
//     auto tok = pipeline.consumer_try_wait(state);   // one mbarrier.try_wait.parity, its result kept (selp)
//     ... work that synchronizes: here a __syncwarp ...
//     pipeline.consumer_wait(state, tok);             // if (tok == WaitAgain) full_barrier.wait(phase)
// (include/cutlass/pipeline/sm90_pipeline.hpp, PipelineTmaAsync; NVIDIA/cutlass v4.2.0), and two twins:
// one that skips the wait when the token is false, one that retries four times and goes on.
// Built by build.sh beside it (nvcc 13.0, -arch=sm_90a -ptx -lineinfo); the PTX is committed.
#include <cstdint>

#define BYTES 1024
#define STAGES 2
#define ITERS 4

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// ClusterBarrier::try_wait: one probe, its result as a u32 (CUTLASS's barrier_status)
__device__ __forceinline__ uint32_t try_wait(uint64_t* b, uint32_t parity) {
  uint32_t ok;
  asm volatile("{\n\t.reg .pred P1;\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n\t"
               "selp.b32 %0, 1, 0, P1;\n\t}" : "=r"(ok) : "r"(smem_u32(b)), "r"(parity) : "memory");
  return ok;
}

// ClusterBarrier::wait: the LAB_WAIT loop
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

#define KERNEL(NAME, CONSUMER_WAIT)                                                                   \
  extern "C" __global__ void __launch_bounds__(64) NAME(const float* src, float* out) {              \
    __shared__ alignas(128) float tile[STAGES][BYTES / 4];                                           \
    __shared__ alignas(8) uint64_t full[STAGES], empty[STAGES];                                      \
    if (threadIdx.x == 0) {                                                                          \
      for (int s = 0; s < STAGES; ++s) {                                                             \
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full[s])) : "memory"); \
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&empty[s])) : "memory");\
      }                                                                                              \
    }                                                                                                \
    __syncthreads();                                                                                 \
    if (threadIdx.x < 32) {                                                                          \
      for (int k = 0; k < ITERS; ++k) {                                                              \
        const int s = k % STAGES;                                                                    \
        wait(&empty[s], (k / STAGES + 1) % 2);                                                       \
        if (threadIdx.x == 0) {                                                                      \
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"                      \
                       :: "r"(smem_u32(&full[s])), "r"(BYTES) : "memory");                           \
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" \
                       :: "r"(smem_u32(tile[s])), "l"(src + k * (BYTES / 4)), "r"(BYTES),            \
                          "r"(smem_u32(&full[s])) : "memory");                                       \
        }                                                                                            \
      }                                                                                              \
    } else {                                                                                         \
      float acc = 0.f;                                                                               \
      for (int k = 0; k < ITERS; ++k) {                                                              \
        const int s = k % STAGES;                                                                    \
        const uint32_t ph = (k / STAGES) % 2;                                                        \
        const uint32_t tok = try_wait(&full[s], ph);     /* consumer_try_wait */                    \
        __syncwarp();                                    /* other work */                           \
        CONSUMER_WAIT;                                   /* consumer_wait(state, tok) */            \
        acc += tile[s][threadIdx.x % 32];                                                            \
        __syncwarp();                                                                                \
        if (threadIdx.x == 32) arrive(&empty[s]);        /* consumer_release */                     \
      }                                                                                              \
      out[threadIdx.x] = acc;                                                                        \
    }                                                                                                \
  }

// waits for the phase when the probe failed: safe
KERNEL(token_wait, if (!tok) wait(&full[s], ph))
// the twin: when the probe failed it does not wait (a back-off instead), and reads the stage anyway
KERNEL(token_skip, if (!tok) __nanosleep(32))
// a bounded retry after the token: four more probes, then on
KERNEL(token_retry, for (int i = 0; i < 4 && !tok && !try_wait(&full[s], ph); ++i) {})
