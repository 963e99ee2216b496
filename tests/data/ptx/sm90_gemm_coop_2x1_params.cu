// Writes the Params of sm90_gemm_coop_2x1.cu's kernel for one problem, as CUTLASS's own host code builds
// them (GemmKernel::to_underlying_arguments: tile scheduler, TMA descriptors), so that extraction can be
// given the bytes the kernel receives: `--param 0=@params.bin`. Run it on a machine with a CUDA driver
// (the TMA descriptors are encoded by the driver). Build:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DSV_HOST_ONLY -I<include> -I<tools/util/include> \
//        -o params sm90_gemm_coop_2x1_params.cu
// Usage: params M N K OUT.bin   (prints the launch: grid, block, cluster, dynamic shared memory)
#include <cstdio>
#include <cstdlib>
#include "sm90_gemm_coop_2x1.cu"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/kernel_hardware_info.hpp"

int main(int argc, char** argv) {
  if (argc != 5) { std::fprintf(stderr, "usage: %s M N K OUT.bin\n", argv[0]); return 2; }
  int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  using StrideA = typename GemmKernel::StrideA; using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC; using StrideD = typename GemmKernel::StrideD;
  ElementA* a; ElementB* b; ElementC* c; ElementC* d;
  cudaMalloc(&a, sizeof(ElementA) * M * K); cudaMalloc(&b, sizeof(ElementB) * N * K);
  cudaMalloc(&c, sizeof(ElementC) * M * N); cudaMalloc(&d, sizeof(ElementC) * M * N);
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  typename GemmKernel::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
      {a, cutlass::make_cute_packed_stride(StrideA{}, {M, K, 1}),
       b, cutlass::make_cute_packed_stride(StrideB{}, {N, K, 1})},
      {{1.0f, 0.0f}, c, cutlass::make_cute_packed_stride(StrideC{}, {M, N, 1}),
       d, cutlass::make_cute_packed_stride(StrideD{}, {M, N, 1})},
      hw};
  size_t ws_size = GemmKernel::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_size) cudaMalloc(&ws, ws_size);
  if (GemmKernel::can_implement(args) == false) { std::fprintf(stderr, "cannot implement\n"); return 1; }
  if (GemmKernel::initialize_workspace(args, ws) != cutlass::Status::kSuccess) return 1;
  typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, ws);
  FILE* f = std::fopen(argv[4], "wb");
  std::fwrite(&params, sizeof params, 1, f);
  std::fclose(f);
  dim3 grid = GemmKernel::get_grid_shape(params), block = GemmKernel::get_block_shape();
  std::printf("params %zu bytes; workspace %zu bytes; sm_count %d\n", sizeof params, ws_size, hw.sm_count);
  std::printf("--grid %ux%ux%u --block %ux%ux%u --cluster %dx%dx%d --dynamic-smem %d\n", grid.x, grid.y, grid.z,
              block.x, block.y, block.z, int(size<0>(ClusterShape{})), int(size<1>(ClusterShape{})),
              int(size<2>(ClusterShape{})), int(GemmKernel::SharedStorageSize));
  return 0;
}
