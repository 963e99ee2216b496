// Runs the CUTLASS sm_90 cooperative GEMM of tests/data/ptx/sm90_gemm_coop_2x1.cu on the GPU from the cubin of
// the very PTX the checker verified (ptxas of the committed PTX, or of a seeded build of it), so that what runs
// is what was checked, not a recompilation that might differ.
//
// The kernel's Params -- tile scheduler, problem shape and the TMA descriptors, which the driver encodes at run
// time -- are computed by CUTLASS's own host code: GemmKernel::initialize_workspace and
// GemmKernel::to_underlying_arguments, the two calls GemmUniversalAdapter::initialize makes (the adapter
// itself is not used because its initialize also sets an attribute on its own instantiation of the kernel,
// which would compile the device code a second time and is not the kernel that runs here). The launch -- grid
// from GemmKernel::get_grid_shape, 384 threads, the cluster, the dynamic shared memory -- is CUTLASS's too.
//
// Each launch is checked against a host reference GEMM. A launch that has not finished at the deadline is
// reported hung and the process exits at once without waiting for the GPU (a hung kernel never returns; the
// driver tears the context down when the process ends). With SV_SIGINT_ON_HANG=1 it raises SIGINT at the
// deadline instead, so that a debugger running it stops with the kernel still resident and can show where
// each warp waits.
//
// Build (bench/cutlass_gpu/build.sh):
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DSV_HOST_ONLY [-DSV_CLUSTER_M=1] -I<include> \
//        -I<tools/util/include> -I tests/data/ptx -o gemm_run bench/cutlass_gpu/gemm_run.cu
// (runtime API only -- the cubin is loaded with cudaLibraryLoadFromFile -- so it links without libcuda here)
// Usage: gemm_run CUBIN VARIANT M N K [RUNS] [DEADLINE_S] [SM_COUNT]
// (SM_COUNT, where given, is the hardware info the tile scheduler sizes the persistent grid by, as the
// checker's fields program was given it; else the device's own count)
// Prints one JSON line: the variant, the outcome (completed, corrupt, hung, fault -- the kernel ended with a
// CUDA error -- or error), and per launch the
// outcome, the number of wrong outputs, the largest error and the time.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef SV_GEMM_TU  // the kernel's translation unit, for its types: -DSV_GEMM_TU='"sm90_gemm_pingpong_1x1.cu"'
#define SV_GEMM_TU "sm90_gemm_coop_2x1.cu"
#endif
#include SV_GEMM_TU
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace {

std::string g_variant = "?";

// Ends the process with an error record; never returns.
[[noreturn]] void fail(const char* what, const char* detail) {
  std::printf("{\"variant\": \"%s\", \"outcome\": \"error\", \"error\": \"%s: %s\"}\n", g_variant.c_str(), what,
              detail);
  std::fflush(stdout);
  std::_Exit(1);
}

void check_rt(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(what, cudaGetErrorString(e));
}

// The one kernel of the library loaded from the cubin (its mangled name is long and fixed by the PTX).
cudaKernel_t only_kernel(const char* cubin) {
  cudaLibrary_t lib;
  check_rt(cudaLibraryLoadFromFile(&lib, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadFromFile");
  unsigned int count = 0;
  check_rt(cudaLibraryGetKernelCount(&count, lib), "cudaLibraryGetKernelCount");
  if (count != 1) fail("cubin", "expected exactly one kernel");
  cudaKernel_t k;
  check_rt(cudaLibraryEnumerateKernels(&k, 1, lib), "cudaLibraryEnumerateKernels");
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 9) {
    std::fprintf(stderr, "usage: %s CUBIN VARIANT M N K [RUNS] [DEADLINE_S] [SM_COUNT]\n", argv[0]);
    return 2;
  }
  const char* cubin = argv[1];
  g_variant = argv[2];
  int M = std::atoi(argv[3]), N = std::atoi(argv[4]), K = std::atoi(argv[5]);
  int runs = argc > 6 ? std::atoi(argv[6]) : 1;
  double deadline_s = argc > 7 ? std::atof(argv[7]) : 5.0;
  bool sigint_on_hang = std::getenv("SV_SIGINT_ON_HANG") != nullptr;

  check_rt(cudaSetDevice(0), "cudaSetDevice");
  check_rt(cudaFree(nullptr), "cudaFree(0)");
  cudaKernel_t kernel = only_kernel(cubin);

  // Inputs: small integers, so that the fp32 accumulation and the fp16 output are exact (|D| <= K <= 2048)
  // and any wrong value -- a stage read before its copy landed or after it was overwritten -- is an error.
  size_t nA = size_t(M) * K, nB = size_t(N) * K, nD = size_t(M) * N;
  std::vector<cutlass::half_t> hA(nA), hB(nB), hD(nD);
  uint32_t rng = 12345;
  auto next = [&] { rng = rng * 1664525u + 1013904223u; return int((rng >> 16) % 3) - 1; };
  for (auto& x : hA) x = cutlass::half_t(float(next()));
  for (auto& x : hB) x = cutlass::half_t(float(next()));
  // reference: A row-major M x K, B column-major K x N (stored N x K), D column-major M x N
  std::vector<float> ref(nD);
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m) {
      float acc = 0.f;
      for (int k = 0; k < K; ++k) acc += float(hA[size_t(m) * K + k]) * float(hB[size_t(n) * K + k]);
      ref[size_t(n) * M + m] = acc;
    }

  ElementA* a; ElementB* b; ElementC* c; ElementC* d;
  check_rt(cudaMalloc(&a, sizeof(ElementA) * nA), "cudaMalloc A");
  check_rt(cudaMalloc(&b, sizeof(ElementB) * nB), "cudaMalloc B");
  check_rt(cudaMalloc(&c, sizeof(ElementC) * nD), "cudaMalloc C");
  check_rt(cudaMalloc(&d, sizeof(ElementC) * nD), "cudaMalloc D");
  check_rt(cudaMemcpy(a, hA.data(), sizeof(ElementA) * nA, cudaMemcpyHostToDevice), "copy A");
  check_rt(cudaMemcpy(b, hB.data(), sizeof(ElementB) * nB, cudaMemcpyHostToDevice), "copy B");
  check_rt(cudaMemset(c, 0, sizeof(ElementC) * nD), "clear C");

  using StrideA = typename GemmKernel::StrideA; using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC; using StrideD = typename GemmKernel::StrideD;
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = argc > 8 ? std::atoi(argv[8]) : cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  // alpha 1, beta 0: the epilogue does not load C, as in the checked launch (sm90_gemm_coop_2x1_fields.cu)
  typename GemmKernel::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
      {a, cutlass::make_cute_packed_stride(StrideA{}, {M, K, 1}),
       b, cutlass::make_cute_packed_stride(StrideB{}, {N, K, 1})},
      {{1.0f, 0.0f}, c, cutlass::make_cute_packed_stride(StrideC{}, {M, N, 1}),
       d, cutlass::make_cute_packed_stride(StrideD{}, {M, N, 1})},
      hw};
  if (!GemmKernel::can_implement(args)) fail("can_implement", "CUTLASS cannot run this problem");
  size_t ws_size = GemmKernel::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_size) check_rt(cudaMalloc(&ws, ws_size), "cudaMalloc workspace");
  if (GemmKernel::initialize_workspace(args, ws) != cutlass::Status::kSuccess) fail("initialize_workspace", "");
  typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, ws);
  dim3 grid = GemmKernel::get_grid_shape(params), block = GemmKernel::get_block_shape();
  int smem = GemmKernel::SharedStorageSize;
  check_rt(cudaKernelSetAttributeForDevice(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem, 0),
           "smem attribute");

  // as CUTLASS's ClusterLauncher: the grid in CTAs, the cluster as a launch attribute
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = size<0>(ClusterShape{});
  attr[0].val.clusterDim.y = size<1>(ClusterShape{});
  attr[0].val.clusterDim.z = size<2>(ClusterShape{});
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = nullptr;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  void* kargs[] = {&params};

  std::string per_run;
  int n_completed = 0, n_corrupt = 0;
  for (int r = 0; r < runs; ++r) {
    check_rt(cudaMemset(d, 0xff, sizeof(ElementC) * nD), "poison D");  // fp16 0xffff is NaN: unwritten shows
    check_rt(cudaDeviceSynchronize(), "sync before launch");
    auto t0 = std::chrono::steady_clock::now();
    check_rt(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(kernel), kargs), "cudaLaunchKernelExC");
    cudaError_t q;
    double s = 0;
    while ((q = cudaStreamQuery(nullptr)) == cudaErrorNotReady) {
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > deadline_s) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (q == cudaErrorNotReady) {
      std::printf("{\"variant\": \"%s\", \"cluster\": \"%dx1\", \"M\": %d, \"N\": %d, \"K\": %d, "
                  "\"grid\": [%u, %u, %u], \"block\": %u, \"smem\": %d, \"outcome\": \"hung\", "
                  "\"hung_at_run\": %d, \"completed_runs\": %d, \"corrupt_runs\": %d, \"deadline_s\": %g, "
                  "\"runs\": [%s]}\n",
                  g_variant.c_str(), int(size<0>(ClusterShape{})), M, N, K, grid.x, grid.y, grid.z, block.x, smem,
                  r + 1, n_completed, n_corrupt, deadline_s, per_run.c_str());
      std::fflush(stdout);
      if (sigint_on_hang) {
        std::raise(SIGINT);  // a debugger stops here, the kernel still resident
        std::this_thread::sleep_for(std::chrono::seconds(600));
      }
      std::_Exit(3);  // never wait for the GPU
    }
    if (q != cudaSuccess) {  // a fault: which launch, after how many clean ones
      std::printf("{\"variant\": \"%s\", \"cluster\": \"%dx1\", \"M\": %d, \"N\": %d, \"K\": %d, "
                  "\"outcome\": \"fault\", \"error\": \"%s\", \"fault_at_run\": %d, \"completed_runs\": %d, "
                  "\"corrupt_runs\": %d, \"runs\": [%s]}\n",
                  g_variant.c_str(), int(size<0>(ClusterShape{})), M, N, K, cudaGetErrorString(q), r + 1,
                  n_completed, n_corrupt, per_run.c_str());
      std::fflush(stdout);
      std::_Exit(5);
    }
    check_rt(cudaMemcpy(hD.data(), d, sizeof(ElementC) * nD, cudaMemcpyDeviceToHost), "copy D");
    long wrong = 0, nan = 0;
    double max_err = 0;
    for (size_t i = 0; i < nD; ++i) {
      float v = float(hD[i]);
      if (std::isnan(v)) { ++nan; ++wrong; continue; }
      double e = std::fabs(double(v) - double(ref[i]));
      if (e != 0) ++wrong;
      if (e > max_err) max_err = e;
    }
    bool ok = wrong == 0;
    ok ? ++n_completed : ++n_corrupt;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s{\"outcome\": \"%s\", \"wrong\": %ld, \"unwritten\": %ld, \"max_err\": %g, "
                  "\"ms\": %.3f}", r ? ", " : "", ok ? "completed" : "corrupt", wrong, nan, max_err, ms);
    per_run += buf;
  }
  std::printf("{\"variant\": \"%s\", \"cluster\": \"%dx1\", \"M\": %d, \"N\": %d, \"K\": %d, "
              "\"grid\": [%u, %u, %u], \"block\": %u, \"smem\": %d, \"outcome\": \"%s\", \"completed_runs\": %d, "
              "\"corrupt_runs\": %d, \"runs\": [%s]}\n",
              g_variant.c_str(), int(size<0>(ClusterShape{})), M, N, K, grid.x, grid.y, grid.z, block.x, smem,
              n_corrupt ? "corrupt" : "completed", n_completed, n_corrupt, per_run.c_str());
  return n_corrupt ? 4 : 0;
}
