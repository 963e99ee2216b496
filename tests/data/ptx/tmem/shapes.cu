// The columns of the tcgen05.ld/st shapes that do not map one register to one column, and an address that is
// not known. Three warps touch one 128-column allocation with nothing ordering them:
//  * warp 0: `.32x32b.x8.pack::16b` load from column 0 -- 8 registers, each the 16-bit halves of two adjacent
//    columns (PTX ISA §9.7.16.8.2, "Packing and Unpacking"): columns 0..15 of lanes 0-31;
//  * warp 4: `.16x32bx2.x2` store at column 64 with immHalfSplitoff 32 (the second half 32 columns on): columns
//    64..65 and 96..97 of lanes 0-31 (its quarter; §9.7.16.8.1);
//  * warp 1: a `.32x32b.x1` store at a column read from global memory (not known to extraction: the whole
//    allocation, every column) of lanes 32-63.
// The rectangles are disjoint: no race. -DSV_SEED_UNKNOWN_IN_QUARTER_0: warp 4 issues the store at the unknown
// column instead of warp 1, in warp 0's lanes -- it may overwrite what warp 0 loads.
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo shapes.cu -o shapes.ptx
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo -DSV_SEED_UNKNOWN_IN_QUARTER_0 shapes.cu -o shapes_unknown_q0.ptx
#include <cstdint>
#ifdef SV_SEED_UNKNOWN_IN_QUARTER_0
#define UNKNOWN_WARP 4
#else
#define UNKNOWN_WARP 1
#endif
__global__ void tmem_shapes(float* out, const uint32_t* col) {
  __shared__ uint32_t tmem_base;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;" ::
                 "r"(uint32_t(__cvta_generic_to_shared(&tmem_base))));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t base = tmem_base;
  if (warp == 0) {
    uint32_t v[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.pack::16b.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7])
                 : "r"(base));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    out[threadIdx.x] = __uint_as_float(v[0] + v[7]);
  } else if (warp == UNKNOWN_WARP) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" :: "r"(base + col[0]), "r"(threadIdx.x)
                 : "memory");
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  } else if (warp == 4) {
    asm volatile("tcgen05.st.sync.aligned.16x32bx2.x2.b32 [%0], 32, {%1, %1};" :: "r"(base + 64),
                 "r"(threadIdx.x) : "memory");
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" :: "r"(base));
  }
}
