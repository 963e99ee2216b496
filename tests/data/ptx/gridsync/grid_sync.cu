// A two-phase kernel over a cooperative launch: every CTA writes its partials, the grid meets at
// cooperative_groups::this_grid().sync() (CUDA 13's cooperative_groups.h, sync_grids of
// cooperative_groups/details/sync.h), then every CTA reads its neighbour's partials.
//   -DREAD_EARLY   the neighbour's partials are read before the grid.sync (a race at the read)
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void __launch_bounds__(64) two_phase(float* partials, float* out) {
  cg::grid_group grid = cg::this_grid();
  const unsigned int t = threadIdx.x;
  const unsigned int next = (blockIdx.x + 1) % gridDim.x;
  partials[blockIdx.x * blockDim.x + t] = static_cast<float>(t + blockIdx.x);   // phase 1: this CTA's partials
#ifdef READ_EARLY
  const float theirs = partials[next * blockDim.x + t];
#endif
  grid.sync();
#ifndef READ_EARLY
  const float theirs = partials[next * blockDim.x + t];                        // phase 2: the neighbour's
#endif
  out[blockIdx.x * blockDim.x + t] = theirs;
}
