// CUTLASS 3.x sm_90 GEMM: TMA warp-specialized cooperative mainloop, cluster 2x1, TMA epilogue.
// Headers from `pip install nvidia-cutlass` (4.2.0.0: cutlass_library/source/include). The PTX beside it
// (gzipped, paths made relative) was compiled with
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> sm90_gemm_coop_2x1.cu
// which takes about two minutes on two cores, so the tests read the committed PTX.
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
using TileShape = Shape<_128,_128,_64>;
#ifndef SV_CLUSTER_M  // sm90_gemm_coop_1x1.cu defines it as 1
#define SV_CLUSTER_M 2
#endif
#ifndef SV_CLUSTER_N  // sm90_gemm_coop_1x2.cu defines it as 2
#define SV_CLUSTER_N 1
#endif
using ClusterShape = Shape<Int<SV_CLUSTER_M>,Int<SV_CLUSTER_N>,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 8, ElementC, LayoutC, 8,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
#ifdef SV_STAGES  // a fixed number of mainloop stages (-DSV_STAGES=2: a stage is reused from the third k-tile on)
using SvStageCount = cutlass::gemm::collective::StageCount<SV_STAGES>;
#else  // as many stages as shared memory holds beside the epilogue (6)
using SvStageCount = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#endif
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float,
    TileShape, ClusterShape,
    SvStageCount, cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue>;
#ifndef SV_HOST_ONLY  // the host programs beside it include this file for its types
template __global__ void cutlass::device_kernel<GemmKernel>(CUTLASS_GRID_CONSTANT typename GemmKernel::Params const);
#endif

