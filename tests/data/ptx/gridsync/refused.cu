// What a whole-grid extraction refuses at its line, never skips: a flag reset that a value loaded from
// memory decides (the protocol would miss it), and a compare-and-swap spin (cutlass/barrier.h
// `wait_eq_reset`: `while (atomicCAS(flag, val, 0) != val) {}`), which the language's `wait.until` is not.
__device__ __forceinline__ void st_relaxed(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

extern "C" __global__ void __launch_bounds__(32) reset_under_data(const int* in, int* counter) {
  if (threadIdx.x == 0 && in[blockIdx.x] > 0) {
    st_relaxed(counter, 0);
  }
}

extern "C" __global__ void __launch_bounds__(32) cas_spin(int* flag) {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) {
      atomicAdd(flag, 1);
    } else {
      while (atomicCAS(flag, 1, 0) != 1) {}
    }
  }
}
