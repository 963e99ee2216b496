// CUTLASS 3.x sm_100 GEMM: the 1-SM tcgen05 warp-specialized mainloop (KernelTmaWarpSpecialized1SmSm100),
// cluster 1x1, 1-SM TMA epilogue (TmaWarpSpecialized1Sm), the default (static persistent) tile scheduler.
// The configuration is examples/71_blackwell_gemm_with_collective_builder/71_blackwell_gemm_with_collective_builder.cu's
// `ExampleRunner<KernelTmaWarpSpecialized1SmSm100, TmaWarpSpecialized1Sm>` (runner_3: fp16 A row-major, B and
// C/D column-major, MMA tile 128x128x64, LinearCombination), with the cluster one CTA.
// Headers from `pip install nvidia-cutlass` (4.2.0.0: cutlass_library/source/include). The PTX beside it
// (sm100_gemm_1sm_1x1_s2.ptx.gz, paths made relative) was compiled with two mainloop stages:
//   nvcc -std=c++17 -arch=sm_100a --expt-relaxed-constexpr -ptx -lineinfo -DSV_STAGES=2 -I<include> sm100_gemm_1sm_1x1.cu
// Its launch, Params fields and boxes come from `--cutlass-problem` (syncverify/data/cutlass_sm100_params.cu).
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;
using ElementA = cutlass::half_t; using LayoutA = cutlass::layout::RowMajor;
using ElementB = cutlass::half_t; using LayoutB = cutlass::layout::ColumnMajor;
using ElementC = cutlass::half_t; using LayoutC = cutlass::layout::ColumnMajor;
using MmaTileShape = Shape<_128,_128,_64>;  // the largest 1-SM MMA tile (example 71: MmaTileMNK without 2-SM)
using ClusterShape = Shape<_1,_1,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 8, ElementC, LayoutC, 8,
    cutlass::epilogue::TmaWarpSpecialized1Sm>::CollectiveOp;
#ifdef SV_STAGES  // a fixed number of mainloop stages
using SvStageCount = cutlass::gemm::collective::StageCount<SV_STAGES>;
#else
using SvStageCount = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#endif
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float,
    MmaTileShape, ClusterShape, SvStageCount, cutlass::gemm::KernelTmaWarpSpecialized1SmSm100>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue>;
template __global__ void cutlass::device_kernel<GemmKernel>(CUTLASS_GRID_CONSTANT typename GemmKernel::Params const);
