// DeepGEMM's sm90 FP8 GEMM (1D2D scaling) with TMA multicast 2 on A, as its JIT instantiates it.
// Source: github.com/deepseek-ai/DeepGEMM at 54e22612409371d6364144b69086735beb54e98b,
// deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh, unedited; this file is the code that
// csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp (SM90FP8Gemm1D2DRuntime::generate_impl) generates, with
// the template arguments of a small configuration (compiled dims "nk": SHAPE_M = 0 is read at run time).
//   kMajorSFB K; SHAPE_M 0, SHAPE_N 128, SHAPE_K 384; 1 group; BLOCK_M 64, BLOCK_N 64, BLOCK_K 128;
//   swizzle A/B/D 128/128/128; 2 stages; 128 TMA + 128 math threads; multicast 2 on A (cluster_n 2);
//   2 SMs; GemmType::Normal; bf16 D; EpilogueIdentity.
// -DSV_MULTICAST=1 -DSV_BLOCK_N=128 is the kernel with multicast off and BLOCK_N 128: its epilogue's TMA
// store is issued by two lanes, one per 64-column half (TMA_D_BLOCK_N = kSwizzleDMode / 2 = 64).
// The PTX beside it (gzipped, paths made relative) was compiled with (DeepGEMM's headers from
// `git archive 54e2261 deep_gemm/include`, CUTLASS's from pip nvidia-cutlass 4.2.0.0):
//   nvcc -std=c++20 -arch=sm_90a -ptx -lineinfo --expt-relaxed-constexpr -I<DeepGEMM>/deep_gemm/include \
//        -I<cutlass_library>/source/include deepgemm_sm90_fp8_1d2d.cu
// The launch and the arguments, as DeepGEMM's host code makes them for M=64 (heuristics/sm90.hpp,
// impls/sm90_fp8_gemm_1d2d.hpp; derivation in tests/test_ptx_deepgemm.py): grid 2 (num_sms), block 256,
// cluster 2, dynamic shared memory 41744; `--param 2=64` (m) and the tensor maps' boxes
// `--tensor-bytes 5[0]=8192 6[0]=8192 7[0]=8192 8[0]=256` (A, B, D, SFA). The seeded build: the same
// command with `-DSV_SEED=1 -I<overlay>` in place of DeepGEMM's include directory, the overlay (a copy) by deepgemm_seeds/make_overlay.py.
#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>

using namespace deep_gemm;

#ifndef SV_MULTICAST
#define SV_MULTICAST 2
#endif
#ifndef SV_BLOCK_N
#define SV_BLOCK_N 64
#endif

// generate_impl's text, with the configuration's values filled in:
static void __instantiate_kernel() {
    auto ptr = reinterpret_cast<void*>(&sm90_fp8_gemm_1d2d_impl<
        cute::UMMA::Major::K,
        0, 128, 384,
        1,
        64, SV_BLOCK_N, 128,
        128, 128, 128,
        2,
        128, 128,
        SV_MULTICAST, (SV_MULTICAST > 1),
        2, GemmType::Normal,
        cutlass::bfloat16_t,
        epilogue::transform::EpilogueIdentity
    >);
};
