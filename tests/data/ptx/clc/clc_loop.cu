// A persistent tile loop scheduled by cluster launch control, the protocol of CUTLASS's sm100 tile scheduler
// (cutlass/gemm/kernel/sm100_tile_scheduler.hpp: advance_to_next_work, fetch_next_work;
// cutlass/pipeline/sm100_pipeline.hpp: PipelineCLCFetchAsync) written out small: warp 0 is the CLC
// pipeline's producer (wait for the stage's empty barrier, arrive.expect_tx of 16 bytes, try_cancel into the
// stage's response slot), and both warps consume every response (wait for the stage's full barrier, read
// and decode the response, one elected arrival each on the stage's empty barrier). The loop ends at the
// first response that canceled no cluster. Compiled to PTX (no GPU needed):
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo [-DSV_SEED=N] clc_loop.cu
// SV_SEED: 0 the protocol as CUTLASS runs it; 1 the stage released before its response is read (a later
// try_cancel may write the slot being read); 2 the response read without waiting for the full barrier;
// 3 one stage of two read in the order of a one-stage ring (the response of the wrong request).
#include <cstdint>
#ifndef SV_SEED
#define SV_SEED 0
#endif

__device__ __forceinline__ uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void init(uint64_t* b, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void wait(uint64_t* b, uint32_t phase) {
  asm volatile("{\n\t.reg .pred P1;\n\tLAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\tbra LAB_WAIT;\n\tDONE:\n\t}" :: "r"(smem(b)), "r"(phase) : "memory");
}
__device__ __forceinline__ void arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem(b)) : "memory");
}
__device__ __forceinline__ void arrive_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void try_cancel(uint4* resp, uint64_t* b) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "r"(smem(resp)), "r"(smem(b)) : "memory");
}
// work_tile_info_from_clc_response: the load and the two queries, as CUTLASS writes them
__device__ __forceinline__ bool next_tile(uint4* resp, uint32_t* x) {
  uint32_t valid = 0, y, z;
  asm volatile("{\n\t.reg .pred p1;\n\t.reg .b128 clc_result;\n\t"
               "ld.shared.b128 clc_result, [%4];\n\t"
               "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p1, clc_result;\n\t"
               "selp.u32 %3, 1, 0, p1;\n\t"
               "@p1 clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%0, %1, %2, _}, clc_result;\n\t}"
               : "=r"(*x), "=r"(y), "=r"(z), "=r"(valid) : "r"(smem(resp)) : "memory");
  return valid == 1;
}

__global__ void clc_loop(float* out) {
  __shared__ alignas(16) uint4 response[2];
  __shared__ alignas(8) uint64_t full[2], empty[2];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) { init(&full[s], 1); init(&empty[s], 2); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  uint32_t tile = blockIdx.x;
  for (uint32_t k = 0;; ++k) {
    const uint32_t s = k % 2, phase = (k / 2) % 2;
    if (warp == 0) {  // advance_to_next_work: producer_acquire, then one lane issues the query
      wait(&empty[s], phase ^ 1);
      if (lane == 0) { arrive_tx(&full[s], 16); try_cancel(&response[s], &full[s]); }
    }
    out[tile * 64 + threadIdx.x] = static_cast<float>(k);  // the tile's work (global memory, its own element)
    const uint32_t r = SV_SEED == 3 ? 0 : s;
    if (SV_SEED != 2) wait(&full[r], SV_SEED == 3 ? k % 2 : phase);  // fetch_next_work: consumer_wait
    if (SV_SEED == 1 && lane == 0) arrive(&empty[r]);
    const bool more = next_tile(&response[r], &tile);
    __syncwarp();
    if (SV_SEED != 1 && lane == 0) arrive(&empty[r]);      // consumer_release
    if (!more) break;
  }
}
