// The Params of a CUTLASS sm90 GEMM with the stream-K tile scheduler (`cutlass::gemm::StreamKScheduler`:
// PersistentTileSchedulerSm90StreamK, cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp), computed by
// CUTLASS's own host code on the CPU as cutlass_sm90_params.cu computes a GEMM's (its comments apply), with
// the scheduler's workspace: the kernel's `to_underlying_arguments` places the epilogue's workspace first,
// then the scheduler's (the partial accumulators, then one 32-bit lock per output tile and math
// warpgroup), and the scheduler's Params point into it. No driver allocates it here: its base is the
// address given (a fixed fake device address), and its bytes are what `initialize_workspace` leaves --
// the locks zero. The decomposition is forced: stream-K (SPLITS 1) or split-K into SPLITS (> 1).
//
// Usage: params M N K L SM_COUNT BETA OUT.bin WORKSPACE SPLITS. Prints what cutlass_sm90_params.cu prints and
//   workspace BASE SIZE SCHEDULER_OFFSET  (the workspace, and where the scheduler's part of it starts)
//   decomposition MODE SK_UNITS SK_TILES UNITS_PER_PROBLEM SPLITS (MODE 1: split-K, 2: stream-K)
#include <cstddef>
#include <cstdio>
#include <type_traits>
#include <new>
#include <cstdlib>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;

using GemmKernel = SV_GEMM_KERNEL;

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
  if (argc != 10) {
    std::fprintf(stderr, "usage: %s M N K L SM_COUNT BETA OUT.bin WORKSPACE SPLITS\n", argv[0]);
    return 2;
  }
  using Params = typename GemmKernel::Params;
  using TileScheduler = typename GemmKernel::TileScheduler;
  using ProblemShape = typename GemmKernel::ProblemShape;
  using TileShape = typename GemmKernel::TileShape;
  using ClusterShape = typename GemmKernel::DispatchPolicy::ClusterShape;
  int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]), L = std::atoi(argv[4]);
  int sm_count = std::atoi(argv[5]);
  ProblemShape shape{M, N, K, L};
  cutlass::KernelHardwareInfo hw{0, sm_count, 0};  // as to_underlying_arguments: no max_active_clusters
  typename TileScheduler::Arguments sched_args{};
  int splits = std::atoi(argv[9]);
  using Mode = typename TileScheduler::DecompositionMode;
  sched_args.splits = splits;
  sched_args.decomposition_mode = splits > 1 ? Mode::SplitK : Mode::StreamK;
  constexpr uint32_t NumEpilogueSubTiles = GemmKernel::CollectiveEpilogue::get_store_pipe_increment(TileShape{});
  uint8_t* workspace = reinterpret_cast<uint8_t*>(std::strtoull(argv[8], nullptr, 0));
  // GemmKernel::to_underlying_arguments: the epilogue's workspace, then the scheduler's
  typename GemmKernel::CollectiveEpilogue::Arguments epi_args{};
  size_t sched_offset = GemmKernel::CollectiveEpilogue::get_workspace_size(shape, epi_args);
  sched_offset = cutlass::round_nearest(sched_offset, cutlass::MinWorkspaceAlignment);
  size_t sched_size = TileScheduler::template get_workspace_size<ProblemShape, typename GemmKernel::CollectiveMainloop::ElementAccumulator>(
      sched_args, shape, hw, GemmKernel::NumMmaWarpGroups);
  static Params p{};  // zero; only the fields below are bound
  p.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  p.problem_shape = shape;
  p.hw_info = hw;
  // constructed in place (C++17 guaranteed elision) in p's zeroed storage: a copy from a
  // temporary would carry the stack's bytes in its padding into the image
  ::new (static_cast<void*>(&p.scheduler)) std::remove_reference_t<decltype(p.scheduler)>(
      TileScheduler::to_underlying_arguments(append<4>(shape, 1), TileShape{}, ClusterShape{}, hw,
                                                       sched_args, workspace + sched_offset, NumEpilogueSubTiles));
  p.workspace = workspace;
  using Epilogue = typename GemmKernel::CollectiveEpilogue;
  typename Epilogue::FusionCallbacks::Arguments thread{};
  thread.alpha = 1.0f;
  thread.beta = float(std::atof(argv[6]));
  // constructed in place (C++17 guaranteed elision) in p's zeroed storage: a copy from a
  // temporary would carry the stack's bytes in its padding into the image
  ::new (static_cast<void*>(&p.epilogue.thread)) std::remove_reference_t<decltype(p.epilogue.thread)>(
      Epilogue::FusionCallbacks::to_underlying_arguments(shape, thread, nullptr));
  FILE* f = std::fopen(argv[7], "wb");
  if (f == nullptr) { std::perror(argv[7]); return 2; }
  std::fwrite(&p, sizeof p, 1, f);
  std::fclose(f);
  auto at = [&](const void* field) { return int((const char*)field - (const char*)&p); };
  dim3 grid = GemmKernel::get_grid_shape(p), block = GemmKernel::get_block_shape();
  std::printf("launch %u %u %u %u %u %u %d %d %d %d\n", grid.x, grid.y, grid.z, block.x, block.y, block.z,
              int(size<0>(ClusterShape{})), int(size<1>(ClusterShape{})), int(size<2>(ClusterShape{})),
              int(GemmKernel::SharedStorageSize));
  std::printf("field %d %d mode\n", at(&p.mode), int(sizeof p.mode));
  std::printf("field %d %d problem_shape\n", at(&p.problem_shape), int(sizeof p.problem_shape));
  std::printf("field %d %d hw_info\n", at(&p.hw_info), int(sizeof p.hw_info));
  std::printf("field %d %d scheduler\n", at(&p.scheduler), int(sizeof p.scheduler));
  // the mainloop's transaction byte counts: constants of the collective (default member initializers)
  static_assert(offsetof(decltype(p.mainloop), tma_transaction_bytes_nk) ==
                offsetof(decltype(p.mainloop), tma_transaction_bytes) + 8, "three consecutive u32");
  std::printf("field %d 12 mainloop.tma_transaction_bytes\n", at(&p.mainloop.tma_transaction_bytes));
  std::printf("field %d %d epilogue.thread\n", at(&p.epilogue.thread), int(sizeof p.epilogue.thread));
  std::printf("field %d 4 epilogue.tma_transaction_bytes\n", at(&p.epilogue.tma_transaction_bytes));
  std::printf("box %d %d mainloop.tma_load_a\n", at(p.mainloop.tma_load_a.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_a));
  std::printf("box %d %d mainloop.tma_load_b\n", at(p.mainloop.tma_load_b.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_b));
  std::printf("box %d %d epilogue.tma_load_c\n", at(p.epilogue.tma_load_c.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_load_c));
  std::printf("box %d %d epilogue.tma_store_d\n", at(p.epilogue.tma_store_d.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_store_d));
  std::printf("field %d %d workspace\n", at(&p.workspace), int(sizeof p.workspace));
  std::printf("workspace %llu %llu %llu\n", (unsigned long long)workspace,
              (unsigned long long)(sched_offset + sched_size), (unsigned long long)sched_offset);
  std::printf("decomposition %d %llu %u %llu %u\n", int(p.scheduler.divmod_splits_.divisor > 1 ? 1 : 2),
              (unsigned long long)p.scheduler.sk_units_, p.scheduler.sk_tiles_,
              (unsigned long long)p.scheduler.units_per_problem_, p.scheduler.divmod_splits_.divisor);
  std::printf("params %d\n", int(sizeof p));
  return 0;
}
