// The fields of a CUTLASS sm100 GEMM kernel's Params that decide its control flow -- mode, problem shape,
// hardware info, tile scheduler, the epilogue's fusion parameters (alpha, beta: whether C is loaded) -- and
// the box of each TMA tensor map, computed by CUTLASS's own host code on the CPU, without a CUDA driver or
// GPU (syncverify/ptx/cutlass_host_sm100.py builds and runs it): the part of
// GemmKernel::to_underlying_arguments (gemm/kernel/sm100_gemm_tma_warpspecialized.hpp) that needs no driver,
// with the scheduler from TileScheduler::to_underlying_arguments exactly as that function calls it. The
// mainloop's transaction bytes are a compile-time constant of the collective (TmaTransactionBytes), so they
// are in the PTX already. The TMA descriptors and pointers, which only a driver encodes, are left out;
// their bytes stay unknown to extraction.
//
// SV_GEMM_KERNEL is the kernel's type, as the PTX entry `cutlass::device_kernel<T>` names it (demangled).
// Usage: params M N K L SM_COUNT BETA OUT.bin. Prints, one per line:
//   launch GRID_X GRID_Y GRID_Z BLOCK_X BLOCK_Y BLOCK_Z CLUSTER_X CLUSTER_Y CLUSTER_Z DYNAMIC_SMEM
//   field OFFSET LENGTH NAME          (bytes of OUT.bin that hold a computed field)
//   box OFFSET BYTES NAME             (the tensor map at OFFSET of the Params moves BYTES per copy)
//   params SIZE
#include <cstddef>
#include <cstdio>
#include <new>
#include <cstdlib>
#include <type_traits>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
using namespace cute;

using GemmKernel = SV_GEMM_KERNEL;

// Threads of a TiledCopy (a multicast copy: each CTA loads its slice of the atom's box); a bare Copy_Atom
// -- the 2-SM loads of make_tma_atom_A/B_sm100, where each CTA of the pair loads its own half -- has one.
template <class T, class = void> struct sv_thr { static constexpr int value = 1; };
template <class T> struct sv_thr<T, std::void_t<typename T::TiledNumThr>> {
  static constexpr int value = int(typename T::TiledNumThr{});
};
// Bytes one TMA instruction of this copy moves: the box of its tensor map, the atom's bits per TMA over
// the copy's threads (make_tma_copy_desc truncates the encoded box so).
template <class TMA>
int tma_box_bytes(TMA const&) {
  constexpr int atom_bits = decltype(cute::size<1>(typename TMA::Traits::SrcLayout{}))::value;
  return atom_bits / 8 / sv_thr<TMA>::value;
}

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s M N K L SM_COUNT BETA OUT.bin\n", argv[0]);
    return 2;
  }
  using Params = typename GemmKernel::Params;
  using TileScheduler = typename GemmKernel::TileScheduler;
  using ProblemShape = typename GemmKernel::ProblemShape;
  using ClusterShape = typename GemmKernel::ClusterShape;
  if constexpr (!cute::is_static_v<ClusterShape>) {
    std::fprintf(stderr, "error: the kernel's cluster shape is chosen at launch (a dynamic cluster): give "
                         "--cluster and bind hw_info by hand\n");
    return 3;
  } else {
    int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]), L = std::atoi(argv[4]);
    int sm_count = std::atoi(argv[5]);
    ProblemShape shape{M, N, K, L};
    typename GemmKernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = shape;
    args.hw_info.sm_count = sm_count;  // as a host passes it (the examples: the device's SM count)
    if (GemmKernel::get_workspace_size(args) != 0) {
      std::fprintf(stderr, "error: this kernel needs a workspace in global memory at this problem (stream-K "
                           "reduction or separate reduction): its Params point into it\n");
      return 3;
    }
    static Params p{};  // zero; only the fields below are bound
    p.mode = args.mode;
    p.problem_shape = shape;
    p.hw_info = args.hw_info;
    // constructed in place (C++17 guaranteed elision) in p's zeroed storage: a copy from a
    // temporary would carry the stack's bytes in its padding into the image
    ::new (static_cast<void*>(&p.scheduler)) std::remove_reference_t<decltype(p.scheduler)>(
        TileScheduler::to_underlying_arguments(append<4>(shape, 1), typename GemmKernel::TileShape{},
                                                         typename GemmKernel::AtomThrShapeMNK{}, ClusterShape{},
                                                         args.hw_info, args.scheduler, nullptr));
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
    std::printf("field %d %d scheduler\n", at(&p.scheduler), int(sizeof p.scheduler));
    std::printf("field %d %d hw_info\n", at(&p.hw_info), int(sizeof p.hw_info));
    std::printf("field %d %d epilogue.thread\n", at(&p.epilogue.thread), int(sizeof p.epilogue.thread));
    std::printf("box %d %d mainloop.tma_load_a\n", at(p.mainloop.tma_load_a.get_tma_descriptor()),
                tma_box_bytes(p.mainloop.tma_load_a));
    std::printf("box %d %d mainloop.tma_load_b\n", at(p.mainloop.tma_load_b.get_tma_descriptor()),
                tma_box_bytes(p.mainloop.tma_load_b));
    std::printf("box %d %d epilogue.tma_load_c\n", at(p.epilogue.tma_load_c.get_tma_descriptor()),
                tma_box_bytes(p.epilogue.tma_load_c));
    std::printf("box %d %d epilogue.tma_store_d\n", at(p.epilogue.tma_store_d.get_tma_descriptor()),
                tma_box_bytes(p.epilogue.tma_store_d));
    std::printf("params %d\n", int(sizeof p));
    return 0;
  }
}
