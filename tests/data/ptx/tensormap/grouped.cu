// A grouped load loop that rewrites its tensor map in place between groups, with CUTLASS's own sequence
// (pip nvidia-cutlass 4.2.0.0; the instructions are CuTe's, copied from the headers named):
//  * tensormaps_init (cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:628-650): one lane
//    copies the kernel's __grid_constant__ map into shared memory, then __syncwarp();
//  * tensormaps_replace_global_address (:656-668): tma_descriptor_replace_addr_in_shared_mem
//    (cute/arch/copy_sm90_desc.hpp:342-355, `tensormap.replace.tile.global_address.shared::cta.b1024.b64`), by
//    one lane, then __syncwarp() (sm90_gemm_array_tma_warpspecialized_cooperative.hpp:642, :715);
//  * tensormaps_cp_fence_release (:737-747): one lane drains its earlier copies' map reads with
//    tma_desc_commit_group(); tma_desc_wait_group(); (cute/arch/copy_sm90_tma.hpp:1255-1270:
//    `cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0;`), then the whole warp runs
//    tma_descriptor_cp_fence_release (copy_sm90_desc.hpp:420-435, `tensormap.cp_fenceproxy.global.shared::cta.
//    tensormap::generic.release.gpu.sync.aligned [gmem], [smem], 128`) into this CTA's map in global memory;
//  * tensormaps_fence_acquire (:752-756): the whole warp's tma_descriptor_fence_acquire (copy_sm90_desc.hpp:
//    452-468, `fence.proxy.tensormap::generic.acquire.gpu [gmem], 128`) before the group's loads;
//  * the loads (one lane) read the map in global memory, as `tma_load_a.with(get<0>(input_tensormaps), …)` does
//    (sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:435), through a two-stage full/empty ring with warp 1.
// -DSV_SEED_NO_DRAIN: tensormaps_cp_fence_release as CUTLASS < 4.0 wrote it and DeepGEMM #343 did, without the
// drain: the map is rewritten while the previous group's last copies may still read it.
// -DSV_SEED_NO_ACQUIRE: the loads without tensormaps_fence_acquire -- they may use the stale map.
// -DSV_REPLACE_IN_GLOBAL: the map rewritten in place in global memory (copy_sm90_desc.hpp:323-338,
// tma_descriptor_replace_addr_in_global_mem; :439-449, tma_descriptor_fence_release), the same drain before it.
// -DSV_SEED_STORE_REWRITE: the map published with ordinary stores (`*gmem_map = smem_map`, as DeepGEMM's k-grouped
// GEMM does) -- a rewrite extraction does not recognize: refused at the store.
//   nvcc -std=c++17 -arch=sm_90a -ptx -lineinfo grouped.cu -o grouped.ptx
//   nvcc -std=c++17 -arch=sm_90a -ptx -lineinfo -DSV_SEED_NO_DRAIN grouped.cu -o grouped_no_drain.ptx
//   nvcc -std=c++17 -arch=sm_90a -ptx -lineinfo -DSV_SEED_NO_ACQUIRE grouped.cu -o grouped_no_acquire.ptx
//   nvcc -std=c++17 -arch=sm_90a -ptx -lineinfo -DSV_SEED_STORE_REWRITE grouped.cu -o grouped_store_rewrite.ptx
//   nvcc -std=c++17 -arch=sm_90a -ptx -lineinfo -DSV_REPLACE_IN_GLOBAL grouped.cu -o grouped_in_global.ptx
// Checked with the map pointer bound and the box given for it (docs/extract.md, "Tensor maps rewritten by the
// kernel"): --block 64 --param 1=0x10000000 --tensor-bytes '1[0]=4096'
#include <cstdint>
#include <cuda.h>

constexpr int kGroups = 2, kTiles = 2, kStages = 2, kTileBytes = 4096;

__device__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ void wait_parity(uint64_t* bar, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}"
               :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}

__global__ void grouped_loads(const __grid_constant__ CUtensorMap tmap, CUtensorMap* maps,
                              const uint64_t* group_ptrs, float* out) {
  __shared__ alignas(128) CUtensorMap smem_map;
  __shared__ alignas(1024) uint8_t tile[kStages][kTileBytes];
  __shared__ uint64_t full[kStages], empty[kStages];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  CUtensorMap* gmem_map = &maps[blockIdx.x];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"(smem_u32(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0) {  // tensormaps_init: the map from the kernel parameter into shared memory
      const uint4* src = reinterpret_cast<const uint4*>(&tmap);
      uint4* dst = reinterpret_cast<uint4*>(&smem_map);
      for (int i = 0; i < 8; ++i) dst[i] = src[i];
    }
    __syncwarp();
    int it = 0;
    for (int g = 0; g < kGroups; ++g) {
#ifndef SV_REPLACE_IN_GLOBAL
      if (lane == 0) {  // tensormaps_replace_global_address
        asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                     :: "r"(smem_u32(&smem_map)), "l"(group_ptrs[g]) : "memory");
      }
      __syncwarp();
#endif
      // tensormaps_cp_fence_release
#ifndef SV_SEED_NO_DRAIN
      if (lane == 0) {
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(0) : "memory");
      }
#endif
#if defined(SV_REPLACE_IN_GLOBAL)
      if (lane == 0) {  // tma_descriptor_replace_addr_in_global_mem, then tma_descriptor_fence_release
        asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;"
                     :: "l"(gmem_map), "l"(group_ptrs[g]) : "memory");
        asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
      }
      __syncwarp();
#elif !defined(SV_SEED_STORE_REWRITE)
      asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
                   "[%0], [%1], 128;" :: "l"(gmem_map), "r"(smem_u32(&smem_map)) : "memory");
#else
      if (lane == 0) *gmem_map = smem_map;  // DeepGEMM's form: ordinary stores of the map, then the release
      asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
#endif
      // tensormaps_fence_acquire
#ifndef SV_SEED_NO_ACQUIRE
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(gmem_map) : "memory");
#endif
      for (int k = 0; k < kTiles; ++k, ++it) {
        const int s = it % kStages;
        if (lane == 0) {
          wait_parity(&empty[s], ((it / kStages) & 1) ^ 1);
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                       :: "r"(smem_u32(&full[s])), "r"(kTileBytes) : "memory");
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                       " [%0], [%1, {%2, %3}], [%4];"
                       :: "r"(smem_u32(tile[s])), "l"(gmem_map), "r"(k * 64), "r"(0), "r"(smem_u32(&full[s]))
                       : "memory");
        }
        __syncwarp();
      }
    }
  } else if (warp == 1) {
    float acc = 0.f;
    for (int it = 0; it < kGroups * kTiles; ++it) {
      const int s = it % kStages;
      wait_parity(&full[s], (it / kStages) & 1);
      acc += reinterpret_cast<const float*>(tile[s])[lane];
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(&empty[s])) : "memory");
    }
    out[blockIdx.x * 32 + lane] = acc;
  }
}
