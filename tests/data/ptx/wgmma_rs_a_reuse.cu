// A two-stage TMA ring whose consumer warpgroup multiplies each stage with an RS-form wgmma: the A fragment
// is loaded from the stage into registers (ld.shared, as DeepGEMM's sm90 tf32_hc_prenorm_gemm converts its A
// tile: deep_gemm/include/deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh lines 182-201 at 54e22612), B is
// read from the stage through its descriptor. Reduced from that kernel's loop (lines 167-231), with the wait
// where its fix (DeepGEMM PR #448) puts it: right after the commit, so the next stage's A fragment is
// written once the wgmma that read the registers is retired.
//
// nvcc -arch=sm_90a -ptx wgmma_rs_a_reuse.cu -o wgmma_rs_a_reuse.ptx  (-DSV_LATE_WAIT: the wait where the
// kernel had it before the fix, after the next fragment is loaded: deepseek-ai/DeepGEMM#449, SV605 at the
// ld.shared that overwrites the registers)
#include <cstdint>

#define STAGES 2
#define BYTES 8192
#define SV_TRANS 0

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

// make_gmma_desc<Major::MN> of a 64 x 16 slice of Layout_MN_SW128_Atom<bf16> tiled to 64 x 64: start at
// the slice's 16 K rows, LBO (the next 64 N elements: unused here) 1024, SBO (the next 8 K rows) 1024,
// 128-byte swizzle
__device__ __forceinline__ uint64_t desc_of(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(1024 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void wgmma_b(float (&d)[32], const uint32_t (&a)[4], uint64_t bdesc) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, 1, 0;\n\t"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n\t}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                 "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                 "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc), "n"(SV_TRANS)
               : "memory");
}

extern "C" __global__ void __launch_bounds__(160) wgmma_rs_a_reuse(const uint16_t* __restrict__ src, float* out,
                                                                 int k_tiles) {
  // one more stage than the ring uses: the shared storage goes on after the ring (CUTLASS's smem_o, ...)
  __shared__ alignas(1024) uint16_t tile[STAGES + 1][BYTES / 2];
  __shared__ alignas(8) uint64_t full[STAGES];
  __shared__ alignas(8) uint64_t empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 128);
    }
  }
  __syncthreads();
  if (warp == 4) {  // the producer warp
    int index = 0;
    uint32_t phase = 0;
    const uint16_t* p = src;
#pragma unroll 1
    for (int k = 0; k < k_tiles; ++k) {
      mbar_wait(&empty[index], phase ^ 1);
      if (threadIdx.x % 32 == 0) {
        mbar_arrive_expect_tx(&full[index], BYTES);
        bulk_load(tile[index], p, BYTES, &full[index]);
      }
      __syncwarp();
      p += BYTES / 2;
      if (++index == STAGES) { index = 0; phase ^= 1; }
    }
  } else {  // the consumer warpgroup
    float d[32] = {};
    uint32_t a[4];
    int index = 0;
    uint32_t phase = 0;
#pragma unroll 1
    for (int k = 0; k < k_tiles; ++k) {
      mbar_wait(&full[index], phase);
      const uint32_t* words = reinterpret_cast<const uint32_t*>(&tile[index][0]);
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = words[threadIdx.x * 4 + i];  // the A fragment -> registers
#if defined(SV_LATE_WAIT)
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");  // after the fragment: too late
      if (k > 0) mbar_arrive(&empty[index ^ 1]);
#endif
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      wgmma_b(d, a, desc_of(smem_u32(&tile[index][0])));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#if !defined(SV_LATE_WAIT)
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");  // PR #448: right after the commit
      mbar_arrive(&empty[index]);
#endif
      if (++index == STAGES) { index = 0; phase ^= 1; }
    }
#if defined(SV_LATE_WAIT)
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
  }
}
