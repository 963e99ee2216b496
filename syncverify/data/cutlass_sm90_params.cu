// The fields of a CUTLASS sm90 GEMM kernel's Params that decide its control flow -- mode, problem shape,
// hardware info, tile scheduler, the collectives' TMA transaction byte counts, the epilogue's fusion
// parameters (alpha, beta: whether C is loaded) -- and the box of each TMA tensor map, computed by CUTLASS's
// own host code on the CPU, without a CUDA driver or GPU (syncverify/cutlass.py builds and runs it):
// GemmKernel::to_underlying_arguments's first half, with the scheduler from
// TileScheduler::to_underlying_arguments. The mainloop's and the epilogue's TMA descriptors and pointers,
// which only a driver encodes, are left out; their bytes stay unknown to extraction.
//
// SV_GEMM_KERNEL is the kernel's type, as the PTX entry `cutlass::device_kernel<T>` names it (demangled).
// Usage: params M N K L SM_COUNT BETA OUT.bin. Prints, one per line:
//   launch GRID_X GRID_Y GRID_Z BLOCK_X BLOCK_Y BLOCK_Z CLUSTER_X CLUSTER_Y CLUSTER_Z DYNAMIC_SMEM
//   field OFFSET LENGTH NAME          (bytes of OUT.bin that hold a computed field)
//   box OFFSET BYTES NAME             (the tensor map at OFFSET of the Params moves BYTES per copy)
//   member OFFSET BYTES PATH          (a member of the kernel's SharedStorage, the dynamic shared memory:
//                                      the pipelines' barriers, the mainloop's and the epilogue's buffers)
//   params SIZE
#include <cstddef>
#include <cstdio>
#include <new>
#include <cstdlib>
#include <type_traits>
#include <utility>
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

// The members of the kernel's SharedStorage that a protocol names: where they lie in the dynamic shared
// memory and their bytes, by their path in the source (`pipelines.mainloop.full_barrier_`). The storage
// differs between kernels (ping-pong has the math warpgroups' order barrier, an epilogue that does not load C
// has no smem_C), so each member is printed only where the type has it (SV_HAS: the member detected by SFINAE).
#define SV_HAS(m)                                                                              \
  template <class T, class = void> struct has_##m : std::false_type {};                      \
  template <class T> struct has_##m<T, std::void_t<decltype(std::declval<T&>().m)>> : std::true_type {};
SV_HAS(full_barrier_)
SV_HAS(empty_barrier_)
SV_HAS(barrier_)
SV_HAS(smem_A)
SV_HAS(smem_B)
SV_HAS(smem_C)
SV_HAS(smem_D)
SV_HAS(math_wg_order)
SV_HAS(load_order)
SV_HAS(epi_load)
SV_HAS(collective)

static const char* sv_base;
void member(const void* at, int bytes, const char* path) {
  if (bytes > 0) std::printf("member %d %d %s\n", int((const char*)at - sv_base), bytes, path);
}

template <class P> void pipeline_members(P& p, const char* full, const char* empty) {
  if constexpr (has_full_barrier_<P>::value) member(&p.full_barrier_, int(sizeof p.full_barrier_), full);
  if constexpr (has_empty_barrier_<P>::value) member(&p.empty_barrier_, int(sizeof p.empty_barrier_), empty);
}

template <class S> void storage_members(S& s) {
  sv_base = (const char*)&s;
  auto& pipes = s.pipelines;
  using Pipes = std::remove_reference_t<decltype(pipes)>;
  pipeline_members(pipes.mainloop, "pipelines.mainloop.full_barrier_", "pipelines.mainloop.empty_barrier_");
  if constexpr (has_epi_load<Pipes>::value)
    pipeline_members(pipes.epi_load, "pipelines.epi_load.full_barrier_", "pipelines.epi_load.empty_barrier_");
  if constexpr (has_math_wg_order<Pipes>::value) {
    if constexpr (has_barrier_<decltype(pipes.math_wg_order)>::value)
      member(&pipes.math_wg_order.barrier_, int(sizeof pipes.math_wg_order.barrier_), "pipelines.math_wg_order.barrier_");
  }
  if constexpr (has_load_order<Pipes>::value) {
    if constexpr (has_barrier_<decltype(pipes.load_order)>::value)
      member(&pipes.load_order.barrier_, int(sizeof pipes.load_order.barrier_), "pipelines.load_order.barrier_");
  }
  auto& ml = s.tensors.mainloop;
  using Ml = std::remove_reference_t<decltype(ml)>;
  if constexpr (has_smem_A<Ml>::value) member(&ml.smem_A, int(sizeof ml.smem_A), "tensors.mainloop.smem_A");
  if constexpr (has_smem_B<Ml>::value) member(&ml.smem_B, int(sizeof ml.smem_B), "tensors.mainloop.smem_B");
  using Ep = std::remove_reference_t<decltype(s.tensors.epilogue)>;
  if constexpr (has_collective<Ep>::value) {
    auto& c = s.tensors.epilogue.collective;
    using C = std::remove_reference_t<decltype(c)>;
    if constexpr (has_smem_C<C>::value) member(&c.smem_C, int(sizeof c.smem_C), "tensors.epilogue.collective.smem_C");
    if constexpr (has_smem_D<C>::value) member(&c.smem_D, int(sizeof c.smem_D), "tensors.epilogue.collective.smem_D");
  }
}

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s M N K L SM_COUNT BETA OUT.bin\n", argv[0]);
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
  constexpr uint32_t NumEpilogueSubTiles = GemmKernel::CollectiveEpilogue::get_store_pipe_increment(TileShape{});
  if (TileScheduler::template get_workspace_size<ProblemShape, float>(sched_args, shape, hw, 2) != 0) {
    std::fprintf(stderr, "error: this tile scheduler needs a workspace in global memory at this problem "
                         "(stream-K reduction or separate reduction): its Params point into it\n");
    return 3;
  }
  static Params p{};  // zero; only the fields below are bound
  p.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  p.problem_shape = shape;
  p.hw_info = hw;
  // constructed in place (C++17 guaranteed elision) in p's zeroed storage: a copy from a
  // temporary would carry the stack's bytes in its padding into the image
  ::new (static_cast<void*>(&p.scheduler)) std::remove_reference_t<decltype(p.scheduler)>(
      TileScheduler::to_underlying_arguments(append<4>(shape, 1), TileShape{}, ClusterShape{}, hw,
                                                       sched_args, nullptr, NumEpilogueSubTiles));
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
  // never constructed: only the members' addresses are taken
  alignas(1024) static unsigned char storage[sizeof(typename GemmKernel::SharedStorage)];
  storage_members(*reinterpret_cast<typename GemmKernel::SharedStorage*>(storage));
  std::printf("params %d\n", int(sizeof p));
  return 0;
}
