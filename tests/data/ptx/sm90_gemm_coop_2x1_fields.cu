// The fields of sm90_gemm_coop_2x1.cu's kernel Params that decide its control flow -- mode, problem shape,
// hardware info, tile scheduler -- computed by CUTLASS's own host code (the first half of
// GemmKernel::to_underlying_arguments, with the scheduler from TileScheduler::to_underlying_arguments),
// without a CUDA driver or GPU: the mainloop and epilogue Params (TMA descriptors, pointers) are left out.
// The mainloop's and the epilogue's TMA transaction byte counts are compile-time constants of the
// collectives, bound too, and so are the epilogue's fusion parameters (alpha, beta: whether C is loaded).
// Writes the struct image and prints the --param bindings of the fields it computed, each
// NAME[OFFSET:LENGTH]=@FILE; the other bytes stay unknown to extraction. It also prints, for each TMA
// tensor map in the Params, the bytes one copy through it moves (--tensor-bytes 0[OFFSET]=BYTES): the
// box CUTLASS encodes into the map, a compile-time property of the copy atom (NumBitsPerTMA / 8).
// Build:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DSV_HOST_ONLY -I<include> \
//        -o fields sm90_gemm_coop_2x1_fields.cu
// Usage: fields M N K SM_COUNT OUT.bin [BETA]   (BETA 0, the default: the epilogue does not load C)
#include <cstddef>
#include <cstdio>
#include <cstdlib>
// the kernel, for its types (-DSV_CLUSTER_M=1: the 1x1 cluster GEMM; -DSV_GEMM_TU='"sm90_gemm_pingpong_1x1.cu"':
// the ping-pong GEMM, whose Params have the same fields)
#ifndef SV_GEMM_TU
#define SV_GEMM_TU "sm90_gemm_coop_2x1.cu"
#endif
#include SV_GEMM_TU

// Bytes one TMA instruction of this copy moves: the box of its tensor map. make_tma_copy_atom
// (cute/atom/copy_traits_sm90_tma.hpp) sizes the atom by the whole CTA tile (num_bits_per_tma) and
// make_tma_copy_desc truncates the encoded box by the number of CTAs the copy is multicast to, each CTA
// loading its slice: the box is the atom's bytes over the TiledCopy's thread count (1 without multicast).
template <class TMA>
int tma_box_bytes(TMA const&) {
  constexpr int atom_bits = decltype(cute::size<1>(typename TMA::Traits::SrcLayout{}))::value;
  return atom_bits / 8 / int(typename TMA::TiledNumThr{});
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s M N K SM_COUNT OUT.bin [BETA]\n", argv[0]);
    return 2;
  }
  using Params = typename GemmKernel::Params;
  using TileScheduler = typename GemmKernel::TileScheduler;
  using ProblemShape = typename GemmKernel::ProblemShape;
  int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]), sm_count = std::atoi(argv[4]);
  ProblemShape shape{M, N, K, 1};
  cutlass::KernelHardwareInfo hw{0, sm_count, 0};  // as to_underlying_arguments: no max_active_clusters
  typename TileScheduler::Arguments sched_args{};
  constexpr uint32_t NumEpilogueSubTiles = GemmKernel::CollectiveEpilogue::get_store_pipe_increment(TileShape{});
  if (TileScheduler::template get_workspace_size<ProblemShape, float>(sched_args, shape, hw, 2) != 0) {
    std::fprintf(stderr, "this tile scheduler needs a workspace; use the driver-built Params\n");
    return 1;
  }
  static Params p{};  // zero; only the fields below are bound
  p.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  p.problem_shape = shape;
  p.hw_info = hw;
  p.scheduler = TileScheduler::to_underlying_arguments(append<4>(shape, 1), TileShape{}, ClusterShape{}, hw,
                                                       sched_args, nullptr, NumEpilogueSubTiles);
  using Epilogue = typename GemmKernel::CollectiveEpilogue;
  typename Epilogue::FusionCallbacks::Arguments thread{};
  thread.alpha = 1.0f;
  thread.beta = argc == 7 ? float(std::atof(argv[6])) : 0.0f;
  p.epilogue.thread = Epilogue::FusionCallbacks::to_underlying_arguments(shape, thread, nullptr);
  FILE* f = std::fopen(argv[5], "wb");
  std::fwrite(&p, sizeof p, 1, f);
  std::fclose(f);
  auto at = [&](const void* field) { return int((const char*)field - (const char*)&p); };
  dim3 grid = GemmKernel::get_grid_shape(p), block = GemmKernel::get_block_shape();
  std::printf("--grid %ux%ux%u --block %ux%ux%u --cluster %dx%dx%d --dynamic-smem %d", grid.x, grid.y, grid.z,
              block.x, block.y, block.z, int(size<0>(ClusterShape{})), int(size<1>(ClusterShape{})),
              int(size<2>(ClusterShape{})), int(GemmKernel::SharedStorageSize));
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.mode), int(sizeof p.mode), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.problem_shape), int(sizeof p.problem_shape), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.hw_info), int(sizeof p.hw_info), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.scheduler), int(sizeof p.scheduler), argv[5]);
  // the mainloop's transaction byte counts: constants of the collective (default member initializers)
  std::printf(" --param '0[%d:12]=@%s'", at(&p.mainloop.tma_transaction_bytes), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.epilogue.thread), int(sizeof p.epilogue.thread), argv[5]);
  std::printf(" --param '0[%d:4]=@%s'", at(&p.epilogue.tma_transaction_bytes), argv[5]);
  // the box of each tensor map, by the map's offset in the Params
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.mainloop.tma_load_a.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_a));
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.mainloop.tma_load_b.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_b));
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.epilogue.tma_load_c.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_load_c));
  std::printf(" --tensor-bytes '0[%d]=%d'\n", at(p.epilogue.tma_store_d.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_store_d));
  static_assert(offsetof(decltype(p.mainloop), tma_transaction_bytes_nk) ==
                offsetof(decltype(p.mainloop), tma_transaction_bytes) + 8, "three consecutive u32");
  std::fprintf(stderr, "Params %zu bytes\n", sizeof p);
  return 0;
}
