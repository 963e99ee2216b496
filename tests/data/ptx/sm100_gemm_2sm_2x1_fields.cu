// The fields of sm100_gemm_2sm_2x1.cu's kernel Params that decide its control flow -- mode, problem shape,
// tile scheduler, hardware info -- computed by CUTLASS's own host code (GemmKernel::to_underlying_arguments
// of sm100_gemm_tma_warpspecialized.hpp, with the scheduler from TileScheduler::to_underlying_arguments),
// without a CUDA driver or GPU: the mainloop's and epilogue's TMA descriptors are left out. The epilogue's
// fusion parameters (alpha, beta: whether C is loaded) are bound too. The mainloop's transaction bytes are a
// compile-time constant of the collective (TmaTransactionBytes), so they are in the PTX already.
// Writes the struct image and prints the launch and the --param bindings (NAME[OFFSET:LENGTH]=@FILE) of the
// fields it computed; the other bytes stay unknown to extraction. It also prints, for each TMA tensor map in
// the Params, the bytes one copy through it moves (--tensor-bytes 0[OFFSET]=BYTES): the box CUTLASS encodes
// into the map, a compile-time property of the copy atom (NumBitsPerTMA / 8 over the TiledCopy's threads;
// for the 2-SM copies of A and B each CTA loads its own half: SM100_TMA_2SM_LOAD).
// Build:
//   nvcc -std=c++17 -arch=sm_100a --expt-relaxed-constexpr -DSV_HOST_ONLY -DSV_STAGES=2 -I<include> \
//        -o fields sm100_gemm_2sm_2x1_fields.cu
// Usage: fields M N K SM_COUNT OUT.bin [BETA]   (BETA 0, the default: the epilogue does not load C)
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include "sm100_gemm_2sm_2x1.cu"

// Bytes one TMA instruction of this copy moves: the box of its tensor map, the atom's NumBitsPerTMA over
// the threads of a TiledCopy (multicast: each CTA its slice); a bare Copy_Atom (the 2-SM loads,
// make_tma_atom_A/B_sm100) has one.
template <class T, class = void> struct sv_thr { static constexpr int value = 1; };
template <class T> struct sv_thr<T, std::void_t<typename T::TiledNumThr>> {
  static constexpr int value = int(typename T::TiledNumThr{});
};
template <class TMA>
int tma_box_bytes(TMA const&) {
  constexpr int atom_bits = decltype(cute::size<1>(typename TMA::Traits::SrcLayout{}))::value;
  return atom_bits / 8 / sv_thr<TMA>::value;
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
  cutlass::KernelHardwareInfo hw{0, sm_count};  // as the host passes it (examples: the device's SM count)
  typename TileScheduler::Arguments sched_args{};
  static Params p{};  // zero; only the fields below are bound
  p.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  p.problem_shape = shape;
  p.hw_info = hw;
  p.scheduler = TileScheduler::to_underlying_arguments(append<4>(shape, 1), typename GemmKernel::TileShape{},
                                                       typename GemmKernel::AtomThrShapeMNK{}, ClusterShape{},
                                                       hw, sched_args, nullptr);
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
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.scheduler), int(sizeof p.scheduler), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.hw_info), int(sizeof p.hw_info), argv[5]);
  std::printf(" --param '0[%d:%d]=@%s'", at(&p.epilogue.thread), int(sizeof p.epilogue.thread), argv[5]);
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.mainloop.tma_load_a.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_a));
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.mainloop.tma_load_b.get_tma_descriptor()),
              tma_box_bytes(p.mainloop.tma_load_b));
  std::printf(" --tensor-bytes '0[%d]=%d'", at(p.epilogue.tma_load_c.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_load_c));
  std::printf(" --tensor-bytes '0[%d]=%d'\n", at(p.epilogue.tma_store_d.get_tma_descriptor()),
              tma_box_bytes(p.epilogue.tma_store_d));
  std::fprintf(stderr, "Params %zu bytes\n", sizeof p);
  return 0;
}
