// CUDA's threadFenceReduction sample, `reduceSinglePass` (NVIDIA/cuda-samples,
// Samples/2_Concepts_and_Techniques/threadFenceReduction/threadFenceReduction_kernel.cuh), with its shared-memory
// block reductions: every CTA reduces its inputs in `sdata`, thread 0 stores the CTA's partial, __threadfence(),
// takes a ticket with atomicInc, and the CTA that drew gridDim.x - 1 reduces the partials in `sdata` again and
// resets the counter. Reduced to its synchronization: one input per thread, the tree reduction of the sample's
// reduceBlock written as a loop over `s`, the counter a parameter (the sample's is a __device__ variable).
//   -DACQUIRE_FENCE  a __threadfence() after the atomicInc: the acquire half the PTX memory model asks of the
//                    ticket's reader. The sample as it ships has none, and its last CTA's reads of the other CTAs'
//                    partials are not ordered after their writes by the model (SV301).
extern "C" __global__ void __launch_bounds__(64) last_block_smem(const float* in, float* partials, float* out,
                                                                  unsigned int* retirement_count) {
  __shared__ float sdata[64];
  __shared__ bool am_last;
  const unsigned int t = threadIdx.x;
  sdata[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) {
      sdata[t] += sdata[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    partials[blockIdx.x] = sdata[0];
    __threadfence();
    const unsigned int ticket = atomicInc(retirement_count, gridDim.x);
#ifdef ACQUIRE_FENCE
    __threadfence();
#endif
    am_last = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (am_last) {
    sdata[t] = t < gridDim.x ? partials[t] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) {
        sdata[t] += sdata[t + s];
      }
      __syncthreads();
    }
    if (t == 0) {
      out[0] = sdata[0];
      *retirement_count = 0;
    }
  }
}
