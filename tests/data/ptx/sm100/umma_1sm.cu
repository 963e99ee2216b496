// The one-SM tcgen05 forms, written with CUTLASS 4.2.0.0's sm100 building blocks: cute::TMEM::Allocator1Sm,
// cute::SM100_MMA_F16BF16_SS (tcgen05.mma.cta_group::1), cutlass::arch::umma_arrive (tcgen05.commit.cta_group::1
// without multicast), cute::SM100::TMEM::UTCCP::SM100_UTCCP_128dp256bit_1cta (tcgen05.cp), SM100_TMEM_STORE_32dp32b8x
// with fence_view_async_tmem_store (tcgen05.st, tcgen05.wait::st) and SM100_TMEM_LOAD_32dp32b8x with
// fence_view_async_tmem_load, and PTX's tcgen05 fence pair. Warp 0 loads A, B and 4 KiB of scale data with bulk
// copies; warp 1 copies the scale data into tensor memory and issues one 128x64x16 MMA; warp 2 stores a bias
// into tensor memory of its own, then reads the accumulator.
//   nvcc -std=c++17 -arch=sm_100a --expt-relaxed-constexpr -ptx -lineinfo -I<include> umma_1sm.cu
// -DSV_SEED_ST_NO_WAIT: the epilogue hands its tensor-memory store on without tcgen05.wait::st.
#include "cutlass/arch/barrier.h"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/arch/copy_sm100.hpp"
#include "cute/arch/mma_sm100_umma.hpp"
#include "cute/arch/tmem_allocator_sm100.hpp"

constexpr int A_BYTES = 128 * 16 * 2, B_BYTES = 64 * 16 * 2, SF_BYTES = 128 * 32;

struct Shared {
  alignas(1024) uint8_t a[A_BYTES];
  alignas(1024) uint8_t b[B_BYTES];
  alignas(1024) uint8_t sf[SF_BYTES];
  uint64_t full, acc_full, acc_empty, bias_ready;
  uint32_t tmem_base;
};

// K-major, no swizzle (cute/arch/mma_sm100_desc.hpp): LBO 128 bytes, SBO 256 bytes, version 1
__device__ uint64_t smem_desc(void const* p) {
  uint64_t addr = cute::cast_smem_ptr_to_uint(p);
  return ((addr >> 4) & 0x3FFF) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32) | (uint64_t(1) << 46);
}

__device__ void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }

__global__ void __launch_bounds__(96) umma_1sm(uint8_t const* ga, uint8_t const* gb, uint8_t const* gsf, float* out) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Shared& s = *reinterpret_cast<Shared*>(smem_raw);
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0 && cute::elect_one_sync()) {
    Barrier::init(&s.full, 1);
    cutlass::arch::ClusterBarrier::init(&s.acc_full, 1);
    cutlass::arch::ClusterBarrier::init(&s.acc_empty, 32);
    cutlass::arch::ClusterBarrier::init(&s.bias_ready, 32);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  cute::TMEM::Allocator1Sm tmem;
  if (warp == 1) {
    tmem.allocate(256, &s.tmem_base);
    __syncwarp();
  }
  if (warp >= 1) {
    tc_fence_before();
    cutlass::arch::NamedBarrier::sync(64, 1);
    tc_fence_after();
  }
  if (warp == 0) {
    if (cute::elect_one_sync()) {
      Barrier::arrive_and_expect_tx(&s.full, A_BYTES + B_BYTES + SF_BYTES);
      cute::SM90_BULK_COPY_G2S::copy(ga, &s.full, s.a, A_BYTES);
      cute::SM90_BULK_COPY_G2S::copy(gb, &s.full, s.b, B_BYTES);
      cute::SM90_BULK_COPY_G2S::copy(gsf, &s.full, s.sf, SF_BYTES);
    }
    __syncwarp();
  } else if (warp == 1) {
    uint32_t base = s.tmem_base;
    Barrier::wait(&s.full, 0);
    cutlass::arch::ClusterBarrier::wait(&s.bias_ready, 0);
    tc_fence_after();
    if (cute::elect_one_sync()) {
      cute::SM100::TMEM::UTCCP::SM100_UTCCP_128dp256bit_1cta::copy(smem_desc(s.sf), base + 128);
    }
    __syncwarp();
    uint64_t idesc = uint64_t((1u << 4) | ((64u >> 3) << 17) | ((128u >> 4) << 24)) << 32;
    cute::SM100_MMA_F16BF16_SS<cute::half_t, cute::half_t, float, 128, 64, cute::UMMA::Major::K,
                               cute::UMMA::Major::K>::fma(smem_desc(s.a), smem_desc(s.b), base, 0, idesc);
    cutlass::arch::umma_arrive(&s.acc_full);  // elects one lane itself, as the MMA's fma does
    cutlass::arch::ClusterBarrier::wait(&s.acc_empty, 0);
    tmem.release_allocation_lock();
  } else {
    uint32_t base = s.tmem_base + (uint32_t(32 * (warp % 4)) << 16);
    uint32_t r[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    cute::SM100::TMEM::STORE::SM100_TMEM_STORE_32dp32b8x::copy(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                                                               base + 192);
#ifndef SV_SEED_ST_NO_WAIT
    cutlass::arch::fence_view_async_tmem_store();
#endif
    tc_fence_before();
    cutlass::arch::ClusterBarrier::arrive(&s.bias_ready);
    cutlass::arch::ClusterBarrier::wait(&s.acc_full, 0);
    tc_fence_after();
    float sum = 0.f;
    for (int j = 0; j < 8; ++j) {
      cute::SM100::TMEM::LOAD::SM100_TMEM_LOAD_32dp32b8x::copy(base + j * 8, r[0], r[1], r[2], r[3], r[4], r[5],
                                                               r[6], r[7]);
      cutlass::arch::fence_view_async_tmem_load();
      for (int i = 0; i < 8; ++i) sum += __uint_as_float(r[i]);
    }
    tc_fence_before();
    cutlass::arch::ClusterBarrier::arrive(&s.acc_empty);
    out[lane] = sum;
  }
  __syncthreads();
  if (warp == 1) {
    tmem.free(s.tmem_base, 256);
  }
}
