// tcgen05.shift (PTX ISA §9.7.16.9.3): one warp allocates 32 columns, shifts the rows of the matrix at the
// base down by one (asynchronous, completed by a commit), waits for the commit's barrier and reads the columns
// back. -DSV_SEED_NO_COMMIT_WAIT: the load without waiting for the commit -- it races with the shift.
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo shift.cu -o shift.ptx
//   nvcc -std=c++17 -arch=sm_100a -ptx -lineinfo -DSV_SEED_NO_COMMIT_WAIT shift.cu -o shift_no_commit_wait.ptx
#include <cstdint>
__device__ void wait_parity(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}"
               :: "r"(bar), "r"(parity) : "memory");
}
__global__ void shift_rows(float* out) {
  __shared__ uint32_t tmem_base;
  __shared__ uint64_t done;
  uint32_t bar = uint32_t(__cvta_generic_to_shared(&done));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar));
  }
  __syncwarp();
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::
               "r"(uint32_t(__cvta_generic_to_shared(&tmem_base))));
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  __syncwarp();
  uint32_t base = tmem_base;
  if (threadIdx.x == 0) {
    asm volatile("tcgen05.shift.cta_group::1.down [%0];" :: "r"(base));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(bar));
  }
  __syncwarp();
#ifndef SV_SEED_NO_COMMIT_WAIT
  wait_parity(bar, 0);
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
#endif
  uint32_t v[8];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7])
               : "r"(base));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[threadIdx.x] = __uint_as_float(v[0] + v[7]);
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncwarp();
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(base));
}
