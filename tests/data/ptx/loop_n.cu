// A loop of N trips (N: the first parameter): each thread writes its slot, then the CTA synchronizes.
// tests/test_soundness_clusters.py extracts it at N = 3,000,000 under --timeout.
__global__ void loop_kernel(int n, int *out) {
  __shared__ int s[64];
  for (int i = 0; i < n; ++i) {
    s[threadIdx.x] = i;
    __syncthreads();
  }
  out[threadIdx.x] = s[threadIdx.x];
}
