// Two warps of one lane quarter store to disjoint column ranges of one tensor-memory allocation with nothing
// ordering them, a third warp (another quarter) stores to the first range's columns, and after the barrier warp 0
// loads all 64 columns back. Tensor-memory addresses are `base + (lane << 16) + column` (PTX ISA §9.7.16.2.1,
// "Tensor Memory Addressing"); a warp reaches only the 32 lanes of its quarter of the warpgroup (§9.7.16.8.1,
// "Access restrictions": warp 0 and warp 4 both lanes 0-31, warp 1 lanes 32-63), so the three stores touch
// disjoint lane x column rectangles: no race. -DSV_SEED_OVERLAP: warp 4 stores from column 16, over warp 0's
// columns 16..31 in the same lanes -- a write-write race.
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo ranges.cu -o ranges.ptx
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo -DSV_SEED_OVERLAP ranges.cu -o ranges_overlap.ptx
#include <cstdint>
#ifdef SV_SEED_OVERLAP
#define SECOND_COL 16
#else
#define SECOND_COL 32
#endif
__device__ void store32(uint32_t taddr, uint32_t v) {  // 32 lanes x 32 columns, one value
  asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,"
               "%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1,%1};" :: "r"(taddr), "r"(v) : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
}
__global__ void tmem_ranges(float* out) {
  __shared__ uint32_t tmem_base;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 64;" ::
                 "r"(uint32_t(__cvta_generic_to_shared(&tmem_base))));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t base = tmem_base;
  if (warp == 0) {
    store32(base, threadIdx.x);                               // lanes 0-31, columns 0..31
  } else if (warp == 4) {
    store32(base + SECOND_COL, threadIdx.x + 1);              // lanes 0-31, columns 32..63 (seed: 16..47)
  } else if (warp == 1) {
    store32(base + (32u << 16), threadIdx.x + 2);             // lanes 32-63, columns 0..31
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    uint32_t v[4];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(base + 30));  // columns 30..33
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    out[threadIdx.x] = __uint_as_float(v[0] + v[3]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 64;" :: "r"(base));
  }
}
