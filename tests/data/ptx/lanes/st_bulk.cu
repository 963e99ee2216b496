// st.bulk (PTX ISA 8.6, sm_100): thread 0 zeroes a 1 KiB shared buffer with one bulk store while
// warp 1 reads bytes OFF..OFF+127 of it; `syncverify check st_bulk.cu --kernel NAME --block 64`
// (tests/test_soundness_lanes.py). Compile for sm_100a.
#include <cstdint>

template <int OFF, bool SYNC>
__device__ void bulk_then_read(int *out) {
  __shared__ alignas(128) volatile int buf[512];  // 2 KiB: the store covers the first half
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(const_cast<int *>(buf)));
  if (threadIdx.x == 0) {
    asm volatile("st.bulk.weak.shared::cta [%0], %1, 0;" ::"r"(addr), "l"(static_cast<uint64_t>(1024))
                 : "memory");
  }
  if (SYNC) __syncthreads();
  if (threadIdx.x >= 32) out[threadIdx.x] = buf[OFF / 4 + (threadIdx.x & 31)];
}

// the read of bytes 896..1023 races the bulk store
extern "C" __global__ void bulk_race_tail(int *out) { bulk_then_read<896, false>(out); }
// the same read after __syncthreads(): safe
extern "C" __global__ void bulk_sync_tail(int *out) { bulk_then_read<896, true>(out); }
// a read of bytes 1024..1151, past the store: safe
extern "C" __global__ void bulk_past_end(int *out) { bulk_then_read<1024, false>(out); }
