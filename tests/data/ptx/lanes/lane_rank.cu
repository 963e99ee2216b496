// Lanes of one warp that give an mbarrier arrival different operands: lane r arrives on the empty
// barrier of cluster CTA r (`mapa` of the barrier with the lane as the rank), as DeepGEMM's sm90 GEMM
// releases a multicast stage (deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh:268-269:
// `lane_idx < kNumTMAMulticast ? empty_barriers[stage_idx]->arrive(target_cta) : void()`).
// Cluster 2, 64 threads per CTA: thread 0 of CTA c writes word c of its own CTA's buffer and of the
// peer's (a multicast by hand), arriving on both CTAs' full barriers; warp 1 waits, reads both words,
// and its lanes 0 and 1 release the stage, lane r to CTA r. Each CTA's producer waits its empty
// barrier (one arrival from each CTA's consumer warp) before it writes both buffers again.
//   lane_rank       lane r -> CTA r: safe
//   lane_rank_own   every lane -> its own CTA (the counts still add up): the producer overwrites the
//                   peer's copy of its word while the peer's consumer may still read it, a race at the remote store
#include <cstdint>

__device__ __forceinline__ uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ uint32_t peer(uint32_t a, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}

__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra W;\n}" :: "r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void arrive_at(uint32_t bar, uint32_t rank) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(peer(bar, rank)) : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <bool kOwnRank>
__device__ void body(int* out) {
    __shared__ __align__(8) uint64_t full, empty;
    __shared__ int buf[4];
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;" :: "r"(smem(&full)));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;" :: "r"(smem(&empty)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    int sum = 0;
    cluster_sync();
    #pragma unroll 1  // one copy of the loop body: the same arrive instruction runs in both iterations
    for (uint32_t it = 0; it < 2; ++it) {
        if (threadIdx.x == 0) {
            if (it > 0)
                wait(smem(&empty), (it - 1) % 2);
            for (uint32_t r = 0; r < 2; ++r) {
                asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(peer(smem(&buf[rank]), r)), "r"(int(it)) : "memory");
                arrive_at(smem(&full), r);
            }
        }
        if (warp == 1) {
            wait(smem(&full), it % 2);
            sum += buf[0] + buf[1];
            __syncwarp();
            if (lane < 2)
                arrive_at(smem(&empty), kOwnRank ? rank : lane);
        }
    }
    cluster_sync();
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) lane_rank(int* out) { body<false>(out); }
extern "C" __global__ void __cluster_dims__(2, 1, 1) lane_rank_own(int* out) { body<true>(out); }

// Two lanes storing one half each of a tile with a bulk copy, each committing and waiting for its own
// bulk async-group (DeepGEMM's epilogue with BLOCK_N 128, deep_gemm/include/deep_gemm/impls/
// sm90_fp8_gemm_1d2d.cuh:373-374 and 433-441: `if (threadIdx.x < BLOCK_N / TMA_D_BLOCK_N)` one TMA store per
// 64-column half, then `cute::tma_store_arrive()`; before the next tile, `cute::tma_store_wait<0>()` by the
// same threads and a barrier). Bulk groups are per thread (PTX: "per-thread bulk async-group"): each lane's
// wait retires its own store only.
//   lane_store_halves           lanes 0 and 1 store, commit and wait: safe
//   lane_store_halves_one_wait  only lane 0 waits: the next tile's write of half 1 races with lane 1's store
template <bool kBothWait>
__device__ void store_halves(int* out) {
    __shared__ __align__(128) int tile[64];
    #pragma unroll 1
    for (int it = 0; it < 2; ++it) {
        tile[threadIdx.x] = threadIdx.x + it;
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (threadIdx.x < 2) {
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 128;"
                         :: "l"(out + it * 64 + threadIdx.x * 32), "r"(smem(&tile[threadIdx.x * 32])) : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
        if (kBothWait ? threadIdx.x < 2 : threadIdx.x == 0)
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        __syncthreads();
    }
}

extern "C" __global__ void lane_store_halves(int* out) { store_halves<true>(out); }
extern "C" __global__ void lane_store_halves_one_wait(int* out) { store_halves<false>(out); }
