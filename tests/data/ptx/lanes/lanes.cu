// Lanes of one warp and shared memory: each kernel is one warp (block 32) that stores to and
// loads from a shared buffer; `syncverify check lanes.cu --kernel NAME --block 32` (tests/test_soundness_lanes.py).
// The buffers are volatile so that nvcc keeps every load and store.

// lane i reads what lane i+1 wrote, with nothing ordering the lanes: a race under independent
// thread scheduling (extraction refuses it at the load, naming the store)
extern "C" __global__ void neighbour_no_syncwarp(int *out) {
  __shared__ volatile int buf[32];
  int lane = threadIdx.x & 31;
  buf[lane] = lane;
  out[lane] = buf[(lane + 1) & 31];
}

// the same with __syncwarp() between the store and the load: safe
extern "C" __global__ void neighbour_syncwarp(int *out) {
  __shared__ volatile int buf[32];
  int lane = threadIdx.x & 31;
  buf[lane] = lane;
  __syncwarp();
  out[lane] = buf[(lane + 1) & 31];
}

// each lane reads back its own element: one warp-wide write and read, safe
extern "C" __global__ void own_element(int *out) {
  __shared__ volatile int buf[32];
  int lane = threadIdx.x & 31;
  buf[lane] = lane;
  out[lane] = buf[lane];
}

// lane 0 writes buf[0], then every lane reads buf[lane]: lane 0 reads what it wrote itself, lanes
// 1..31 read bytes nobody wrote: safe
extern "C" __global__ void lane0_writes_own(int *out) {
  __shared__ volatile int buf[32];
  int lane = threadIdx.x & 31;
  if (lane == 0) buf[0] = 7;
  out[lane] = buf[lane];
}

// lane 0 writes the whole buffer, then every lane reads buf[lane] without __syncwarp(): lanes 1..31
// read lane 0's writes, a race
extern "C" __global__ void lane0_writes_all(int *out) {
  __shared__ volatile int buf[32];
  int lane = threadIdx.x & 31;
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < 32; ++i) buf[i] = i;
  }
  out[lane] = buf[lane];
}
