// CUTLASS 3.x sm_100 GEMM: the 2-SM tcgen05 warp-specialized mainloop (KernelTmaWarpSpecialized2SmSm100),
// cluster 2x1 (one CTA pair), 2-SM TMA epilogue (TmaWarpSpecialized2Sm), static persistent tile scheduler.
// The configuration is examples/70_blackwell_gemm/70_blackwell_fp16_gemm.cu's, with the schedules named.
// Headers from `pip install nvidia-cutlass` (4.2.0.0: cutlass_library/source/include). The PTX beside it
// (sm100_gemm_2sm_2x1_s2.ptx.gz, paths made relative) was compiled with two mainloop stages:
//   nvcc -std=c++17 -arch=sm_100a --expt-relaxed-constexpr -ptx -lineinfo -DSV_STAGES=2 -I<include> sm100_gemm_2sm_2x1.cu
// and its Params fields printed by sm100_gemm_2sm_2x1_fields.cu (`fields 256 128 128 148 OUT.bin`, the bytes
// beside it). CUTLASS 4.2.0.0's sm100 GEMM emits no tcgen05.fence: its MMA and epilogue warps hand the
// accumulator over through mbarriers alone.
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
using namespace cute;
using ElementA = cutlass::half_t; using LayoutA = cutlass::layout::RowMajor;
using ElementB = cutlass::half_t; using LayoutB = cutlass::layout::ColumnMajor;
using ElementC = cutlass::half_t; using LayoutC = cutlass::layout::ColumnMajor;
using MmaTileShape = Shape<_256,_128,_64>;  // one MMA across the CTA pair: 128 rows of A per CTA
using ClusterShape = Shape<_2,_1,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 8, ElementC, LayoutC, 8,
    cutlass::epilogue::TmaWarpSpecialized2Sm>::CollectiveOp;
#ifdef SV_STAGES  // a fixed number of mainloop stages
using SvStageCount = cutlass::gemm::collective::StageCount<SV_STAGES>;
#else
using SvStageCount = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#endif
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float,
    MmaTileShape, ClusterShape, SvStageCount, cutlass::gemm::KernelTmaWarpSpecialized2SmSm100>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue,
    cutlass::gemm::StaticPersistentScheduler>;
#ifndef SV_HOST_ONLY  // the host programs beside it include this file for its types
template __global__ void cutlass::device_kernel<GemmKernel>(CUTLASS_GRID_CONSTANT typename GemmKernel::Params const);
#endif
