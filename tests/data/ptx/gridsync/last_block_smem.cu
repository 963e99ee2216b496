// CUDA's threadFenceReduction sample, `reduceSinglePass` (NVIDIA/cuda-samples@ceab6e8,
// Samples/2_Concepts_and_Techniques/threadFenceReduction/threadFenceReduction_kernel.cuh), with its shared-memory
// block reductions: every CTA reduces its inputs in shared memory and thread 0 stores the CTA's partial
// (reduceBlocks: `g_odata[blockIdx.x] = sdata[0]`), __threadfence(), thread 0 takes a ticket with
// `atomicInc(&retirementCount, gridDim.x)` and stores `amLast = (ticket == gridDim.x - 1)`, cg::sync(cta), and the
// last CTA sums `g_odata[i]` for i = tid, tid + blockSize, ..., reduces them in shared memory, and thread 0 stores
// `g_odata[0]` and resets `retirementCount = 0`. Reduced to its synchronization: one input per thread, the tree
// reduction of reduceBlock written as a loop over `s`, the __threadfence() executed by thread 0 (the writer of the
// partial; the sample's other threads have nothing to publish), the counter a parameter (the sample's is a
// __device__ variable), `partials` the sample's g_odata.
//   -DACQUIRE_FENCE  a __threadfence() after the atomicInc: the acquire half the PTX memory model asks of the
//                    ticket's reader. The sample as it ships has none, and its last CTA's reads of the other CTAs'
//                    partials are not ordered after their writes by the model (SV301).
extern "C" __global__ void __launch_bounds__(64) last_block_smem(const float* in, float* partials,
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
      partials[0] = sdata[0];
      *retirement_count = 0;
    }
  }
}
