// What extraction of "the last CTA to arrive" (last_block.cu; CUDA's threadFenceReduction sample,
// NVIDIA/cuda-samples Samples/2_Concepts_and_Techniques/threadFenceReduction/threadFenceReduction_kernel.cuh)
// refuses at its line, never skips: the ticket handed to the warp's other lanes by a shuffle or a ballot (the
// language keeps a value read from a flag in one process and gives it to no lane), the ticket used as an
// address, the __shared__ flag also written with a constant by another warp (the flag would miss it), the flag
// read before the barrier (it may be uninitialized), and a plain reset of the counter that a CTA's input decides.
__device__ __forceinline__ unsigned int ticket_of(unsigned int* count) {
  return atomicInc(count, gridDim.x);
}

extern "C" __global__ void __launch_bounds__(64) shfl_ticket(float* partials, float* out, unsigned int* count) {
  const unsigned int t = threadIdx.x;
  unsigned int ticket = 0;
  if (t == 0) {
    partials[blockIdx.x] = 1.0f;
    __threadfence();
    ticket = ticket_of(count);
    __threadfence();
  }
  ticket = __shfl_sync(0xffffffffu, ticket, 0);                     // every lane of warp 0 gets thread 0's
  if (t < 32 && ticket == gridDim.x - 1) {
    out[t] = partials[t % gridDim.x];
  }
}

extern "C" __global__ void __launch_bounds__(64) ballot_ticket(float* partials, float* out, unsigned int* count) {
  const unsigned int t = threadIdx.x;
  bool last = false;
  if (t == 0) {
    partials[blockIdx.x] = 1.0f;
    __threadfence();
    last = ticket_of(count) == gridDim.x - 1;
    __threadfence();
  }
  if (__ballot_sync(0xffffffffu, last) != 0u && t < 32) {         // thread 0's vote, read by its warp
    out[t] = partials[t % gridDim.x];
  }
}

extern "C" __global__ void __launch_bounds__(64) ticket_index(float* partials, float* out, unsigned int* count) {
  if (threadIdx.x == 0) {
    const unsigned int ticket = ticket_of(count);
    partials[ticket] = 1.0f;                                          // the ticket as an address
  }
}

extern "C" __global__ void __launch_bounds__(64) flag_overwritten(float* partials, float* out, unsigned int* count) {
  __shared__ bool am_last;
  const unsigned int t = threadIdx.x;
  if (t == 0) {
    partials[blockIdx.x] = 1.0f;
    __threadfence();
    am_last = ticket_of(count) == gridDim.x - 1;
    __threadfence();
  }
  if (t == 32) {
    am_last = false;                                                  // another warp's store of the flag
  }
  __syncthreads();
  if (am_last) {
    out[t] = partials[t % gridDim.x];
  }
}

extern "C" __global__ void __launch_bounds__(64) early_read(float* partials, float* out, unsigned int* count) {
  __shared__ bool am_last;
  const unsigned int t = threadIdx.x;
  if (t == 0) {
    partials[blockIdx.x] = 1.0f;
    __threadfence();
    am_last = ticket_of(count) == gridDim.x - 1;
    __threadfence();
  }
  const bool early = am_last;                                         // before the barrier: warp 1 may read it
  __syncthreads();                                                    // uninitialized
  if (early) {
    out[t] = 1.0f;
  }
}

extern "C" __global__ void __launch_bounds__(32) reset_by_data(const float* in, unsigned int* count) {
  if (threadIdx.x == 0) {
    atomicAdd(count, 1u);
    if (blockIdx.x == 0 || in[blockIdx.x] > 0.0f) {
      *count = 0;                                                     // CTA 1 resets or not, by its input
    }
  }
}
