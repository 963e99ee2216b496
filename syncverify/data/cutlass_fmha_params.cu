// The fields of CUTLASS example 88's Hopper FMHA forward kernel Params (examples/88_hopper_fmha,
// kernel/fmha_kernel_tma_warpspecialized.hpp) that decide its control flow -- the problem size (B, H, Q, K,
// D: the KV loop's trip count, the tiles) and the tile scheduler's Params (the grid, or the persistent
// scheduler's divisors) -- the epilogue's fusion parameters and transaction bytes, and the box of each TMA
// tensor map, computed by the example's own host code on the CPU without a CUDA driver or GPU
// (syncverify/ptx/cutlass_host_sm100.py builds and runs it): Kernel::can_implement, and the parts of
// Kernel::to_underlying_arguments that need no driver -- TileScheduler::to_underlying_arguments as it calls
// it, and the epilogue's FusionCallbacks::to_underlying_arguments with the arguments FmhaFwdEpilogue passes
// (`args_tma{{}, ...}`: alpha 1, no C). The TMA descriptors, pointers and strides, which only the driver
// and the caller's tensors give, and the softmax scales (floats no decision reads) are left out; their
// bytes stay unknown to extraction.
//
// SV_FMHA_KERNEL is the kernel's type, as the PTX entry `cutlass::device_kernel<T>` names it (demangled).
// Usage: params B H Q K D SM_COUNT OUT.bin. Prints, one per line:
//   launch GRID_X GRID_Y GRID_Z BLOCK_X BLOCK_Y BLOCK_Z CLUSTER_X CLUSTER_Y CLUSTER_Z DYNAMIC_SMEM
//   field OFFSET LENGTH NAME          (bytes of OUT.bin that hold a computed field)
//   box OFFSET BYTES NAME             (the tensor map at OFFSET of the Params moves BYTES per copy)
//   params SIZE
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "collective/fmha_fusion.hpp"
#include "kernel/fmha_kernel_builder.hpp"
using namespace cute;

using Kernel = SV_FMHA_KERNEL;

// The kernel's collectives and tile scheduler are template arguments, not members: read them off its type
// (FmhaKernelTmaWarpSpecialized<CollectiveMainloop, CollectiveEpilogue, TileScheduler, Options...>).
template <class K> struct sv_parts;  // another FMHA kernel (FmhaKernelTma, the backward kernels): not served
template <class M, class E, class S, class... O>
struct sv_parts<cutlass::fmha::kernel::FmhaKernelTmaWarpSpecialized<M, E, S, O...>> {
  using Epilogue = E;
  using TileScheduler = S;
};

// Threads of a TiledCopy: a copy multicast to N CTAs loads a 1/N slice of the atom's box in each.
template <class T, class = void> struct sv_thr { static constexpr int value = 1; };
template <class T> struct sv_thr<T, std::void_t<typename T::TiledNumThr>> {
  static constexpr int value = int(typename T::TiledNumThr{});
};
// Bytes one TMA instruction of this copy moves: the box of its tensor map (make_tma_copy_desc truncates
// the atom's box by the CTAs it is multicast to).
template <class TMA>
int tma_box_bytes(TMA const&) {
  constexpr int atom_bits = decltype(cute::size<1>(typename TMA::Traits::SrcLayout{}))::value;
  return atom_bits / 8 / sv_thr<TMA>::value;
}

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s B H Q K D SM_COUNT OUT.bin\n", argv[0]);
    return 2;
  }
  using Params = typename Kernel::Params;
  using ProblemShape = typename Kernel::ProblemShape;
  using ClusterShape = typename Kernel::ClusterShape;
  using TileScheduler = typename sv_parts<Kernel>::TileScheduler;
  ProblemShape problem_size{std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                            std::atoi(argv[5])};
  cutlass::KernelHardwareInfo hw_info{0, std::atoi(argv[6])};
  typename Kernel::Arguments args{problem_size, {}, {}, hw_info};
  if (!Kernel::can_implement(args)) {
    std::fprintf(stderr, "error: the kernel cannot run this problem (Kernel::can_implement: the head dim D "
                         "at most the kernel's %d and D and Q multiples of its alignment)\n",
                 int(get<2>(typename Kernel::TileShape{})));
    return 3;
  }
  if (Kernel::get_workspace_size(args) != 0) {
    std::fprintf(stderr, "error: this kernel needs a workspace in global memory: its Params point into it\n");
    return 3;
  }
  static Params p{};  // zero; only the fields below are bound
  p.problem_size = problem_size;
  p.tile_scheduler = TileScheduler::to_underlying_arguments(problem_size, hw_info, ClusterShape{},
                                                   typename Kernel::TileShape{});
  // FmhaFwdEpilogue::to_underlying_arguments: the TMA epilogue's problem (Q, D, 1, (B, H)), fusion args {}
  using EpilogueTMA = typename sv_parts<Kernel>::Epilogue::CollectiveEpilogueTMA;
  auto problem_size_o = make_shape(get<2>(problem_size), get<4>(problem_size), 1,
                                   make_shape(get<0>(problem_size), get<1>(problem_size)));
  p.epilogue.epilogue_TMA.thread =
      EpilogueTMA::FusionCallbacks::to_underlying_arguments(problem_size_o, typename EpilogueTMA::FusionCallbacks::Arguments{}, nullptr);
  FILE* f = std::fopen(argv[7], "wb");
  if (f == nullptr) { std::perror(argv[7]); return 2; }
  std::fwrite(&p, sizeof p, 1, f);
  std::fclose(f);
  auto at = [&](const void* field) { return int((const char*)field - (const char*)&p); };
  dim3 grid = Kernel::get_grid_shape(p), block = Kernel::get_block_shape();
  std::printf("launch %u %u %u %u %u %u %d %d %d %d\n", grid.x, grid.y, grid.z, block.x, block.y, block.z,
              int(size<0>(ClusterShape{})), int(size<1>(ClusterShape{})), int(size<2>(ClusterShape{})),
              int(Kernel::SharedStorageSize));
  std::printf("field %d %d problem_size\n", at(&p.problem_size), int(sizeof p.problem_size));
  std::printf("field %d %d tile_scheduler\n", at(&p.tile_scheduler), int(sizeof p.tile_scheduler));
  std::printf("field %d %d epilogue.epilogue_TMA.thread\n", at(&p.epilogue.epilogue_TMA.thread),
              int(sizeof p.epilogue.epilogue_TMA.thread));
  std::printf("field %d 4 epilogue.epilogue_TMA.tma_transaction_bytes\n",
              at(&p.epilogue.epilogue_TMA.tma_transaction_bytes));
  std::printf("box %d %d mainloop.tma_load_q\n", at(p.mainloop.tma_load_q.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_q));
  std::printf("box %d %d mainloop.tma_load_k\n", at(p.mainloop.tma_load_k.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_k));
  std::printf("box %d %d mainloop.tma_load_v\n", at(p.mainloop.tma_load_v.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_v));
  std::printf("box %d %d epilogue.epilogue_TMA.tma_store_d\n",
              at(p.epilogue.epilogue_TMA.tma_store_d.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.epilogue_TMA.tma_store_d));
  std::printf("params %d\n", int(sizeof p));
  return 0;
}
