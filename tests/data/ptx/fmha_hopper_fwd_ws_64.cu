// CUTLASS example 88 (examples/88_hopper_fmha, nvidia-cutlass 4.2.0.0), the Hopper FMHA forward kernel as
// 88_hopper_fmha.cu's run_fwd_64 instantiates it for "tma ws cooperative 128x64x64": FwdRunner's types
// (fp16 Q/K/V/O, fp32 accumulators, strides Q D (B H)), FmhaBuilder<..., KernelTmaWarpSpecializedCooperative>
// with the default fusion (no mask: neither --causal nor --residual), launched by device/device_universal.hpp
// as cutlass::device_kernel<Kernel>. Only the kernel is instantiated here; the example's own host code
// (Kernel::to_underlying_arguments, the tile scheduler) computes its launch and Params for `--cutlass-fmha`
// (syncverify/data/cutlass_fmha_params.cu). The PTX beside it (fmha_hopper_fwd_ws_64.ptx.gz, paths made
// relative) was compiled with
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> -I<examples>/88_hopper_fmha fmha_hopper_fwd_ws_64.cu
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "collective/fmha_fusion.hpp"
#include "kernel/fmha_kernel_builder.hpp"
using namespace cute;
using Element = cutlass::half_t;
using StrideQ = cute::tuple<int, _1, cute::tuple<int, int>>;  // Q D (B H)
using StrideK = cute::tuple<int, _1, cute::tuple<int, int>>;  // K D (B H)
using StrideV = cute::tuple<int, _1, cute::tuple<int, int>>;  // K D (B H), fp16
using Kernel = typename cutlass::fmha::kernel::FmhaBuilder<
    Element, float, float, Shape<_128, _64, _64>, StrideQ, StrideK, StrideV,
    cutlass::fmha::collective::DefaultFusion, cutlass::gemm::KernelTmaWarpSpecializedCooperative>::Kernel;
template __global__ void cutlass::device_kernel<Kernel>(CUTLASS_GRID_CONSTANT typename Kernel::Params const);
