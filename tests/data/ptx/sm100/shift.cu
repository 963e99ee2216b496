// tcgen05.shift, which the language has no form for: extraction refuses it at its line.
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo shift.cu
#include <cstdint>
__global__ void shift_rows() {
  __shared__ uint32_t tmem_base;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::
                 "r"(uint32_t(__cvta_generic_to_shared(&tmem_base))));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    uint32_t base = tmem_base;
    asm volatile("tcgen05.shift.cta_group::1.down [%0];" :: "r"(base));
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(base));
  }
}
