// "The last CTA to arrive reduces", in the form of CUDA's threadFenceReduction sample
// (NVIDIA/cuda-samples@ceab6e8, Samples/2_Concepts_and_Techniques/threadFenceReduction/threadFenceReduction_kernel.cuh,
// reduceSinglePass: thread 0 stores the CTA's partial, __threadfence(), takes a ticket with atomicInc, and the
// CTA that drew gridDim.x - 1 sums every partial and resets the counter), with the acquire half the PTX memory
// model asks of the ticket's reader (a __threadfence() after the atomicInc, before the barrier). The counter is a
// parameter (the sample's is a __device__ variable; PyTorch's Reduce.cuh passes its `semaphores` so).
//   -DNO_FENCE    without the fences (the partials are not ordered before the last CTA's reads)
//   -DOFF_BY_ONE  `ticket == gridDim.x`: atomicInc wraps at gridDim.x, so no ticket equals it and no CTA reduces
//                 (no synchronization error: nothing reads the partials, nothing resets the counter)
extern "C" __global__ void __launch_bounds__(64) last_block(float* partials, float* out,
                                                             unsigned int* retirement_count) {
  __shared__ bool am_last;
  const unsigned int t = threadIdx.x;
  if (t == 0) {
    partials[blockIdx.x] = static_cast<float>(blockIdx.x);        // this CTA's partial
#ifndef NO_FENCE
    __threadfence();
#endif
    const unsigned int ticket = atomicInc(retirement_count, gridDim.x);
#ifndef NO_FENCE
    __threadfence();
#endif
#ifdef OFF_BY_ONE
    am_last = (ticket == gridDim.x);
#else
    am_last = (ticket == gridDim.x - 1);
#endif
  }
  __syncthreads();
  if (am_last) {
    float sum = 0.0f;
    for (unsigned int i = t; i < gridDim.x; i += blockDim.x) {
      sum += partials[i];                                          // every CTA's partial
    }
    out[t] = sum;
    if (t == 0) {
      *retirement_count = 0;                                        // reset for the next launch
    }
  }
}
