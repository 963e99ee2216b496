// A warp-specialized TMA kernel as one writes it by hand: warp 0 loads tiles of a row-major matrix with
// TMA into a ring of STAGES shared-memory buffers; warps 1..CONSUMERS sum the rows of each tile. `full[s]`
// says a tile has landed (one arrival with its byte count, plus the copy's bytes), `empty[s]` that every
// consumer warp is done reading it (one arrival per consumer warp, from its lane 0 after __syncwarp).
//
// Planted bugs, one per macro (tests/data/ptx/own/build.sh compiles each):
//   -DEARLY_RELEASE  a consumer warp releases the stage before it reads it (mbar_arrive moved up);
//   -DWRONG_PARITY   the producer's first wait on a fresh `empty` barrier waits for parity 0.
#include "tma_helpers.cuh"

constexpr int STAGES = 3;
constexpr int COLS = 64;              // floats per row
constexpr int ROWS_PER_TILE = 16;     // rows per tile
constexpr int TILE_BYTES = ROWS_PER_TILE * COLS * 4;
constexpr int CONSUMERS = 2;          // consumer warps

__global__ void __launch_bounds__(32 * (1 + CONSUMERS))
ws_rowsum(const float* __restrict__ in, float* __restrict__ row_sums, int num_tiles) {
  __shared__ alignas(128) float tile[STAGES][ROWS_PER_TILE * COLS];
  __shared__ alignas(8) uint64_t full[STAGES];
  __shared__ alignas(8) uint64_t empty[STAGES];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], CONSUMERS);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (warp == 0) {  // producer
    for (int t = 0; t < num_tiles; ++t) {
      const int s = t % STAGES;
#ifdef WRONG_PARITY
      mbar_wait(&empty[s], (t / STAGES) & 1);
#else
      mbar_wait(&empty[s], ((t / STAGES) & 1) ^ 1);
#endif
      if (lane == 0) {
        mbar_expect_bytes(&full[s], TILE_BYTES);
        tma_load_1d(tile[s], in + static_cast<size_t>(t) * ROWS_PER_TILE * COLS, TILE_BYTES, &full[s]);
      }
      __syncwarp();
    }
  } else {  // consumers: warp c sums rows c-1, c-1+CONSUMERS, ... of each tile
    const int c = warp - 1;
    for (int t = 0; t < num_tiles; ++t) {
      const int s = t % STAGES;
      mbar_wait(&full[s], (t / STAGES) & 1);
#ifdef EARLY_RELEASE
      if (lane == 0) mbar_arrive(&empty[s]);
#endif
      for (int r = c; r < ROWS_PER_TILE; r += CONSUMERS) {
        float sum = tile[s][r * COLS + lane] + tile[s][r * COLS + lane + 32];
        for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) row_sums[t * ROWS_PER_TILE + r] = sum;
      }
      __syncwarp();
#ifndef EARLY_RELEASE
      if (lane == 0) mbar_arrive(&empty[s]);
#endif
    }
  }
}
