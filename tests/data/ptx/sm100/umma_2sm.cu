// A 2-SM tcgen05 GEMM mainloop and epilogue written with CUTLASS's own sm100 building blocks (nvidia-cutlass
// 4.2.0.0 headers), the way sm100_gemm_tma_warpspecialized.hpp and sm100_mma_warpspecialized.hpp use them:
// cute::TMEM::Allocator2Sm (tcgen05.alloc/relinquish/dealloc .cta_group::2, the address written to shared
// memory and read back by the epilogue), cute::SM100_TMA_2SM_LOAD_2D (completion on the pair leader's
// barrier), cute::SM100_MMA_F16BF16_2x1SM_SS (tcgen05.mma.cta_group::2 in elect_one_sync),
// cutlass::arch::umma_arrive_multicast_2x1SM (tcgen05.commit … multicast::cluster), SM100_TMEM_LOAD_32dp32b8x
// (tcgen05.ld) and fence_view_async_tmem_load (tcgen05.wait::ld), with the tcgen05 fence pair of PTX ISA
// §9.7.16.6.4.4 around the accumulator hand-offs. One 256x128 tile over a CTA pair, K_TILES k-blocks of 16,
// STAGES stages; warp 0 loads, warp 1 issues the MMAs (the leader CTA's), warp 2 is the epilogue.
//   nvcc -std=c++17 -arch=sm_100a --expt-relaxed-constexpr -ptx -lineinfo -I<include> umma_2sm.cu
// Seeded bugs, one per build: -DSV_SEED_NO_AFTER_FENCE (the epilogue loads the accumulator without
// tcgen05.fence::after_thread_sync), -DSV_SEED_NO_ACC_FULL_WAIT (without waiting on the accumulator-full
// barrier), -DSV_SEED_WRONG_COMMIT (the MMA warp releases each stage with a commit to the accumulator-full
// barrier instead of the stage's empty barrier). -DSV_RELEASE_CLUSTER: the epilogue's arrive on the leader's
// accumulator-empty barrier with .release.cluster instead of umma_arrive_2x1SM_sm0's default .release.cta (the
// epilogue's read of the tensor-memory address word is generic data that arrive carries to the other CTA: SV602).
#include <cuda.h>
#include "cutlass/arch/barrier.h"
#include "cute/arch/cluster_sm90.hpp"
#include "cute/arch/copy_sm100_tma.hpp"
#include "cute/arch/copy_sm100.hpp"
#include "cute/arch/mma_sm100_umma.hpp"
#include "cute/arch/tmem_allocator_sm100.hpp"

constexpr int STAGES = 2, K_TILES = 4;
constexpr int A_BYTES = 128 * 16 * 2, B_BYTES = 64 * 16 * 2;  // this CTA's half of A (M 256) and of B (N 128)
constexpr uint32_t ACC_COLS = 128;

struct Shared {
  alignas(1024) uint8_t a[STAGES][A_BYTES];
  alignas(1024) uint8_t b[STAGES][B_BYTES];
  uint64_t full[STAGES], empty[STAGES], acc_full, acc_empty;
  uint32_t tmem_base;
};

// A K-major, no-swizzle UMMA shared-memory descriptor (cute/arch/mma_sm100_desc.hpp, SmemDescriptor):
// 8-row core matrices of 16 bytes, LBO 128 bytes between the two 16-byte K chunks, SBO 256 between row groups.
__device__ uint64_t smem_desc(void const* p) {
  uint64_t addr = cute::cast_smem_ptr_to_uint(p);
  return ((addr >> 4) & 0x3FFF) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32) | (uint64_t(1) << 46);
}

__device__ void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(96)
umma_2sm(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b, float* out) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Shared& s = *reinterpret_cast<Shared*>(smem_raw);
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t rank = cute::block_rank_in_cluster();
  bool leader = (rank % 2) == 0;

  if (warp == 0 && cute::elect_one_sync()) {
    for (int i = 0; i < STAGES; ++i) {
      Barrier::init(&s.full[i], 1);
      cutlass::arch::ClusterBarrier::init(&s.empty[i], 1);
    }
    cutlass::arch::ClusterBarrier::init(&s.acc_full, 1);
    cutlass::arch::ClusterBarrier::init(&s.acc_empty, 64);  // both CTAs' epilogue threads, on the leader's
    cutlass::arch::fence_barrier_init();
  }
  cute::cluster_sync();  // barriers initialized and both CTAs running before any remote use

  cute::TMEM::Allocator2Sm tmem;
  if (warp == 1) {
    tmem.allocate(ACC_COLS, &s.tmem_base);
    __syncwarp();
  }
  if (warp >= 1) {  // the MMA warp and the epilogue warp: the address is written (sm100_gemm_tma_warpspecialized.hpp,
    tc_fence_before();  // tmem_allocation_result_barrier), with PTX's fence pair around the allocation
    cutlass::arch::NamedBarrier::sync(64, 1);
    tc_fence_after();
  }

  if (warp == 0) {  // producer: both CTAs load their halves, the leader expects both CTAs' bytes
    for (int k = 0; k < K_TILES; ++k) {
      int st = k % STAGES;
      cutlass::arch::ClusterBarrier::wait(&s.empty[st], ((k / STAGES) & 1) ^ 1);
      if (cute::elect_one_sync()) {
        if (leader) Barrier::arrive_and_expect_tx(&s.full[st], 2 * (A_BYTES + B_BYTES));
        cute::SM100_TMA_2SM_LOAD_2D::copy(&tma_a, &s.full[st], 0, s.a[st], k * 16, int(rank) * 128);
        cute::SM100_TMA_2SM_LOAD_2D::copy(&tma_b, &s.full[st], 0, s.b[st], k * 16, int(rank) * 64);
      }
      __syncwarp();
    }
  } else if (warp == 1) {  // MMA: the leader issues the pair's MMAs
    uint32_t acc = s.tmem_base;
    if (leader) {
      uint64_t idesc = uint64_t((1u << 4) | ((128u >> 3) << 17) | ((256u >> 4) << 24)) << 32;  // F32 += F16 * F16
      for (int k = 0; k < K_TILES; ++k) {
        int st = k % STAGES;
        Barrier::wait(&s.full[st], (k / STAGES) & 1);
        tc_fence_after();
        cute::SM100_MMA_F16BF16_2x1SM_SS<cute::half_t, cute::half_t, float, 256, 128, cute::UMMA::Major::K,
                                         cute::UMMA::Major::K>::fma(smem_desc(s.a[st]), smem_desc(s.b[st]), acc,
                                                                    k > 0, idesc);
#ifdef SV_SEED_WRONG_COMMIT
        cutlass::arch::umma_arrive_multicast_2x1SM(&s.acc_full, 0x3);
#else
        cutlass::arch::umma_arrive_multicast_2x1SM(&s.empty[st], 0x3);
#endif
      }
      cutlass::arch::umma_arrive_multicast_2x1SM(&s.acc_full, 0x3);
      cutlass::arch::ClusterBarrier::wait(&s.acc_empty, 0);  // both epilogues are done with the accumulator
    }
    tmem.release_allocation_lock();
  } else {  // epilogue: both CTAs read their half of the accumulator
    uint32_t acc = s.tmem_base;
#ifndef SV_SEED_NO_ACC_FULL_WAIT
    cutlass::arch::ClusterBarrier::wait(&s.acc_full, 0);
#endif
#ifndef SV_SEED_NO_AFTER_FENCE
    tc_fence_after();
#endif
    uint32_t r[8];
    float sum = 0.f;
    for (int j = 0; j < 4; ++j) {
      uint32_t taddr = acc + (uint32_t((warp % 4) * 32) << 16) + j * 8;
      cute::SM100::TMEM::LOAD::SM100_TMEM_LOAD_32dp32b8x::copy(taddr, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
      cutlass::arch::fence_view_async_tmem_load();
      for (int i = 0; i < 8; ++i) sum += __uint_as_float(r[i]);
    }
    tc_fence_before();
#ifdef SV_RELEASE_CLUSTER  // the same arrive on the leader's barrier, with .release.cluster
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::
                 "r"(cute::cast_smem_ptr_to_uint(&s.acc_empty) & cute::Sm100MmaPeerBitMask) : "memory");
#else  // on the leader's barrier, as PipelineUmmaAsync::consumer_release_2x1SM (default .release.cta)
    cutlass::arch::umma_arrive_2x1SM_sm0(&s.acc_empty);
#endif
    out[(blockIdx.x * 32 + lane)] = sum;
  }
  __syncthreads();
  cute::cluster_sync();  // the leader's MMAs and both epilogues are done before either CTA frees the pair's columns
  if (warp == 1) {
    tmem.free(s.tmem_base, ACC_COLS);
  }
}
